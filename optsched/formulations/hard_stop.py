"""A hard wall-clock stop for the solver processes pulp starts (CBC, the ``highs`` binary).

CBC's ``-sec`` is checked between its own steps: on a large model, reading the file, presolve and the root
LP ran about a second past a 0.1 s limit (issue 26: ``--backend cbc`` 7-10 s at ``--time-limit 5``). Inside
:func:`hard_stop` a solver process started by pulp's command-line interfaces (``pulp.apis.coin_api``,
``pulp.apis.highs_api``) on this thread is killed once the given time passes; pulp then raises
``PulpSolverError`` and :attr:`Stop.fired` says why. A call cancelled by its caller
(:func:`~optsched.core.deadline.cancel_scope`: the service's client hung up) kills the process too. Only those two pulp modules see the wrapper (their
``subprocess`` name is a copy of the module with ``Popen`` replaced), and only a thread inside
:func:`hard_stop` arms it, so concurrent solves (the service's workers) each stop their own process.
"""

from __future__ import annotations

import contextlib
import subprocess
import threading
import time
import types
from dataclasses import dataclass
from typing import Any, Iterator

from optsched.core.deadline import current_cancel

_local = threading.local()
_install_lock = threading.Lock()
_installed: list[bool] = []


@dataclass
class Stop:
    """What :func:`hard_stop` yields: ``fired`` once it killed a solver process."""

    at: float
    fired: bool = False


#: seconds between two looks at the clock and the cancel event while a solver process runs
_POLL_S = 0.05


class _StoppablePopen(subprocess.Popen):  # type: ignore[type-arg]
    """``subprocess.Popen`` that kills its process at the :class:`Stop` of the thread that started it, or once
    the call's cancel event is set (:func:`~optsched.core.deadline.cancel_scope`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        stop: Stop | None = getattr(_local, "stop", None)
        self._watcher: threading.Thread | None = None
        if stop is not None:
            self._watcher = threading.Thread(target=self._watch, args=(stop, current_cancel()),
                                             name="optsched-solver-stop", daemon=True)
            self._watcher.start()

    def _watch(self, stop: Stop, cancel: threading.Event | None) -> None:
        while self.poll() is None:
            left = stop.at - time.perf_counter()
            if left <= 0 or (cancel is not None and cancel.is_set()):
                stop.fired = True
                self.kill()
                return
            if cancel is None:
                time.sleep(min(left, _POLL_S))
            else:
                cancel.wait(min(left, _POLL_S))


def _install() -> None:
    """Give pulp's command-line solver modules the stoppable ``Popen`` (once)."""
    with _install_lock:
        if _installed:
            return
        from pulp.apis import coin_api, highs_api

        for module in (coin_api, highs_api):
            original = getattr(module, "subprocess", None)
            if original is None:
                continue
            proxy = types.ModuleType("subprocess")
            proxy.__dict__.update(vars(subprocess))
            proxy.Popen = _StoppablePopen  # type: ignore[attr-defined]
            module.subprocess = proxy  # type: ignore[attr-defined]
        _installed.append(True)


@contextlib.contextmanager
def hard_stop(at: float) -> Iterator[Stop]:
    """Kill any solver process pulp starts on this thread inside the block once ``time.perf_counter()``
    passes ``at`` (module docstring)."""
    _install()
    stop = Stop(at)
    previous = getattr(_local, "stop", None)
    _local.stop = stop
    try:
        yield stop
    finally:
        _local.stop = previous


__all__ = ["Stop", "hard_stop"]

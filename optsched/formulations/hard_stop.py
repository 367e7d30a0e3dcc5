"""A hard wall-clock stop for the solver processes pulp starts (CBC, the ``highs`` binary).

CBC's ``-sec`` is checked between its own steps: on a large model, reading the file, presolve and the root
LP ran about a second past a 0.1 s limit (issue 26: ``--backend cbc`` 7-10 s at ``--time-limit 5``). Inside
:func:`hard_stop` a solver process started by pulp's command-line interfaces (``pulp.apis.coin_api``,
``pulp.apis.highs_api``) on this thread is killed once the given time passes; pulp then raises
``PulpSolverError`` and :attr:`Stop.fired` says why. Only those two pulp modules see the wrapper (their
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

_local = threading.local()
_install_lock = threading.Lock()
_installed: list[bool] = []


@dataclass
class Stop:
    """What :func:`hard_stop` yields: ``fired`` once it killed a solver process."""

    at: float
    fired: bool = False


class _StoppablePopen(subprocess.Popen):  # type: ignore[type-arg]
    """``subprocess.Popen`` that kills its process at the :class:`Stop` of the thread that started it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        stop: Stop | None = getattr(_local, "stop", None)
        self._timer: threading.Timer | None = None
        if stop is not None:
            self._timer = threading.Timer(max(0.0, stop.at - time.perf_counter()), self._kill, (stop,))
            self._timer.daemon = True
            self._timer.start()

    def _kill(self, stop: Stop) -> None:
        if self.poll() is None:
            stop.fired = True
            self.kill()

    def wait(self, timeout: float | None = None) -> int:
        try:
            return super().wait(timeout)
        finally:
            if self._timer is not None and self.returncode is not None:
                self._timer.cancel()


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

"""A wall-clock budget shared by every step of one call (parsing, table, heuristic, solver), so that a
time limit covers the whole call and not the solver alone.

**Cancellation.** A budget may also end early, when its caller gives up on the answer (the service, when the
client hangs up: :mod:`optsched.service`). The caller holds a :class:`threading.Event` and runs the call inside
:func:`cancel_scope`; every :class:`Deadline` made in that scope (on that thread) carries the event, and once it is
set the deadline has no time left (``remaining()`` at most 0, ``expired()`` true), so every step that respects its
deadline stops at its next check, as it would at the end of its limit. A CP-SAT search stops too
(:func:`optsched.formulations.cpsat.cp_solver`). What a cancelled call returns is what its limit cut short would
return (``partial``, ``heuristic-fallback``); nobody is expected to read it. The scope is a context variable: it
reaches what the call runs on its own thread, not other processes (the parts of a partitioned solve); a solver
process pulp starts (CBC, the ``highs`` binary) is killed (:mod:`optsched.formulations.hard_stop`), HiGHS run
in-process through ``highspy`` stops at its own limit."""

from __future__ import annotations

import contextlib
import contextvars
import math
import threading
import time
from dataclasses import dataclass, field
from typing import Iterator

from optsched.core.errors import ValidationError


_CANCEL: contextvars.ContextVar[threading.Event | None] = contextvars.ContextVar("optsched_cancel", default=None)


def current_cancel() -> threading.Event | None:
    """The cancel event of the innermost :func:`cancel_scope` around the caller, or None (module docstring)."""
    return _CANCEL.get()


@contextlib.contextmanager
def cancel_scope(cancel: threading.Event | None) -> Iterator[None]:
    """Within the block, deadlines and CP-SAT searches end once ``cancel`` is set (module docstring); None: no
    cancellation (an enclosing scope's event still holds)."""
    if cancel is None:
        yield
        return
    token = _CANCEL.set(cancel)
    try:
        yield
    finally:
        _CANCEL.reset(token)


@dataclass(frozen=True)
class Deadline:
    """``seconds`` of wall time counted from ``start`` (a ``time.perf_counter()`` reading; default:
    when the deadline is made), ended early once ``cancel`` is set (default: the event of the enclosing
    :func:`cancel_scope`, module docstring). ``Deadline.never()`` has no limit."""

    seconds: float
    start: float = field(default_factory=time.perf_counter)
    cancel: threading.Event | None = field(default_factory=current_cancel, compare=False, repr=False)

    def __post_init__(self) -> None:
        if isinstance(self.seconds, bool) or not isinstance(self.seconds, (int, float)) or not self.seconds > 0:
            raise ValidationError(f"time limit must be a positive number of seconds, got {self.seconds!r}")

    @classmethod
    def never(cls) -> "Deadline":
        return cls(math.inf)

    @classmethod
    def since(cls, seconds: float, clock_start: float | None = None) -> "Deadline":
        """``seconds`` counted from ``clock_start`` (a ``time.perf_counter()`` reading, e.g. when the
        caller began reading the round: ``PolicyOptions.clock_start``), or from now when it is None."""
        return cls(seconds) if clock_start is None else cls(seconds, clock_start)

    @property
    def at(self) -> float:
        """The ``time.perf_counter()`` reading at which the budget runs out."""
        return self.start + self.seconds

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    @property
    def cancelled(self) -> bool:
        """Whether the caller gave up on the answer (module docstring): no time is left."""
        return self.cancel is not None and self.cancel.is_set()

    def remaining(self) -> float:
        """Seconds left (may be negative once past; at most 0 once cancelled)."""
        left = self.at - time.perf_counter()
        return min(left, 0.0) if self.cancelled else left

    def earlier(self, seconds: float) -> "Deadline":
        """This deadline moved ``seconds`` earlier (never to or before its start): the budget of the steps
        that come before a last step known to need about ``seconds``."""
        return Deadline(max(self.seconds - max(seconds, 0.0), 1e-9), self.start, self.cancel)

    def expired(self, reserve: float = 0.0) -> bool:
        """Whether less than ``reserve`` seconds are left (always, once cancelled)."""
        return self.cancelled or time.perf_counter() > self.at - reserve


__all__ = ["Deadline", "cancel_scope", "current_cancel"]

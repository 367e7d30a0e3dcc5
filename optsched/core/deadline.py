"""A wall-clock budget shared by every step of one call (parsing, table, heuristic, solver), so that a
time limit covers the whole call and not the solver alone."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from optsched.core.errors import ValidationError


@dataclass(frozen=True)
class Deadline:
    """``seconds`` of wall time counted from ``start`` (a ``time.perf_counter()`` reading; default:
    when the deadline is made). ``Deadline.never()`` has no limit."""

    seconds: float
    start: float = field(default_factory=time.perf_counter)

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

    def remaining(self) -> float:
        """Seconds left (may be negative once past)."""
        return self.at - time.perf_counter()

    def earlier(self, seconds: float) -> "Deadline":
        """This deadline moved ``seconds`` earlier (never to or before its start): the budget of the steps
        that come before a last step known to need about ``seconds``."""
        return Deadline(max(self.seconds - max(seconds, 0.0), 1e-9), self.start)

    def expired(self, reserve: float = 0.0) -> bool:
        """Whether less than ``reserve`` seconds are left."""
        return time.perf_counter() > self.at - reserve


__all__ = ["Deadline"]

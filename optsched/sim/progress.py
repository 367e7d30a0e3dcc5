"""A dependency-free progress bar for long simulations and sweeps: redrawn in place on a terminal,
one log line per 10% otherwise (so CI logs stay short)."""

from __future__ import annotations

import logging
import sys
import time
from typing import TextIO

log = logging.getLogger(__name__)


class Progress:
    """``update(done)`` with the number of finished items (``unit``) out of ``total``; ``close()`` at the
    end."""

    def __init__(self, total: int, label: str, enabled: bool = True, stream: TextIO | None = None,
                 unit: str = "jobs") -> None:
        self.total = max(1, int(total))
        self.label = label
        self.unit = unit
        self.enabled = enabled
        self.stream = stream or sys.stderr
        self.tty = enabled and hasattr(self.stream, "isatty") and self.stream.isatty()
        self._t0 = time.perf_counter()
        self._last_draw = 0.0
        self._last_decile = -1
        self._done = 0

    def update(self, done: int) -> None:
        if not self.enabled:
            return
        self._done = done
        now = time.perf_counter()
        if self.tty:
            if now - self._last_draw >= 0.2 or done >= self.total:
                self._last_draw = now
                self._draw(now)
        else:
            decile = 10 * done // self.total
            if decile > self._last_decile:
                self._last_decile = decile
                log.info("%s: %d/%d %s done (%.0f s)", self.label, done, self.total, self.unit, now - self._t0)

    def _draw(self, now: float) -> None:
        width = 30
        filled = int(width * self._done / self.total)
        self.stream.write(f"\r{self.label:>14} [{'#' * filled}{'.' * (width - filled)}] "
                          f"{self._done}/{self.total} {self.unit} {now - self._t0:6.1f} s")
        self.stream.flush()

    def close(self) -> None:
        if self.tty:
            self._draw(time.perf_counter())
            self.stream.write("\n")
            self.stream.flush()


__all__ = ["Progress"]

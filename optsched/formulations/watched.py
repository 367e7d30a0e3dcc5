"""A blocking solver call (HiGHS through SciPy, which cannot be interrupted) run on a thread of its own while the
caller's thread watches a stop condition (a deadline, a cancel): shared by :mod:`optsched.formulations.switch` and
:mod:`optsched.formulations.rubick_prices`."""

from __future__ import annotations

import threading
from typing import Callable, TypeVar

T = TypeVar("T")

#: seconds between two looks at the stop condition
WATCH_S = 0.05


def run_watched(call: Callable[[], T], stop: Callable[[], bool], name: str) -> T | None:
    """``call()`` on a daemon thread named ``name``; its result, or None as soon as ``stop()`` holds (the call is
    then left to end at its own time limit) or when it raised nothing but returned nothing."""
    out: dict[str, T] = {}

    def run() -> None:
        out["res"] = call()

    worker = threading.Thread(target=run, name=name, daemon=True)
    worker.start()
    while worker.is_alive():
        worker.join(WATCH_S)
        if stop():
            return None
    return out.get("res")


__all__ = ["WATCH_S", "run_watched"]

"""Where a solve spends its time, recorded when a caller asks (issue 29: a benchmark reports each phase).

The exact driver (:mod:`optsched.policies.exact`) marks, for every kind:

* ``prepare``: the kind's round context (for ``rubick`` and ``crius``: the coefficient table, admission);
* ``warm_start``: the kind's heuristic;
* ``import``: importing the model's module (OR-Tools, pulp) the first time a process solves exactly;
* ``model``: building the exact model and solving it (:meth:`~optsched.policies.exact.ExactKind.solve`);
* ``assemble``: the decision from the answer.

The Rubick and Crius models mark inside ``model``: ``build`` (the model) and ``solver`` (the solver's search,
with the pulp translation for the MILP back ends). :func:`optsched.solve` marks ``solve`` (the whole call).

Nothing is recorded unless a caller opens :func:`recording`; a mark outside it costs one context-variable
read. Seconds are summed per name (a phase run twice, e.g. a rebuilt model, counts twice). The record
follows the caller's context: threads and processes a solve starts (the parts of a partitioned solve) are
not recorded.
"""

from __future__ import annotations

import contextvars
import time
from contextlib import contextmanager
from typing import Iterator

_RECORD: contextvars.ContextVar[dict[str, float] | None] = contextvars.ContextVar("optsched_phases", default=None)


@contextmanager
def recording() -> Iterator[dict[str, float]]:
    """Record the phases of the solves made inside the block: yields ``{phase: seconds}``, filled as they run."""
    seconds: dict[str, float] = {}
    token = _RECORD.set(seconds)
    try:
        yield seconds
    finally:
        _RECORD.reset(token)


@contextmanager
def phase(name: str) -> Iterator[None]:
    """Count the block's wall seconds as phase ``name`` when a :func:`recording` is open (module docstring)."""
    seconds = _RECORD.get()
    if seconds is None:
        yield
        return
    t0 = time.perf_counter()
    try:
        yield
    finally:
        seconds[name] = seconds.get(name, 0.0) + time.perf_counter() - t0


__all__ = ["phase", "recording"]

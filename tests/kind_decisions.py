"""Every (kind, method) on the kind's own generated rounds, solved once per test session and shared by
the tests that check what every decision must be (``tests/schemas/test_kind_schemas.py``,
``tests/policies/test_decision_top_level.py``)."""

from __future__ import annotations

import functools

import optsched
from optsched.core.decision import Decision
from optsched.core.kinds import round_kind, round_kinds
from optsched.core.round import RoundProblem
from optsched.policies.registry import methods_of

#: every registered (kind, method)
KIND_METHODS: tuple[tuple[str, str], ...] = tuple((k, m) for k in round_kinds() for m in methods_of(k))
#: the time limit of every solve here (exact methods that do not prove optimality stop there)
TIME_LIMIT = 2.0


@functools.cache
def generated(kind: str, seed: int) -> RoundProblem:
    """``round_kind(kind).generate(seed=seed)`` with the generator's defaults."""
    return round_kind(kind).generate(seed=seed)


@functools.cache
def decided(kind: str, method: str, seed: int) -> Decision:
    """``method``'s decision of :func:`generated` ``(kind, seed)`` (solver seed 0, one worker)."""
    return optsched.solve(generated(kind, seed), method, TIME_LIMIT, 0)


__all__ = ["KIND_METHODS", "TIME_LIMIT", "decided", "generated"]

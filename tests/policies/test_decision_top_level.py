"""One meaning of a decision's top level across kinds (``optsched/core/decision.py``, "The rule of the
top level"; docs/rounds.md, "The decision file"), checked for every registered (kind, method) on the
kind's own generated rounds."""

from __future__ import annotations

import pytest

from optsched.core.decision import relative_gap

from kind_decisions import KIND_METHODS, decided

#: the solver methods of the built-in kinds (every other method is a heuristic or baseline)
EXACT_METHODS = ("exact", "rubick-exact", "crius-exact", "lyra-exact")
#: objective and bound comparisons allow this much floating-point slack (relative, floor 1)
TOL = 1e-6


def _close_or_above(a: float, b: float) -> bool:
    """``a >= b`` up to :data:`TOL`."""
    return a >= b - TOL * max(1.0, abs(b))


@pytest.mark.parametrize("seed", (0, 1))
@pytest.mark.parametrize("kind, method", KIND_METHODS)
def test_top_level_follows_one_rule(kind: str, method: str, seed: int) -> None:
    d = decided(kind, method, seed)
    assert (d.kind, d.method) == (kind, method)
    assert d.gap == relative_gap(d.bound, d.objective)
    if method not in EXACT_METHODS:
        # a heuristic or baseline: no solver, its own objective as heuristic_objective
        assert d.status == "heuristic"
        assert d.bound is None and d.gap is None
        assert d.heuristic_objective == d.objective
        assert d.warm_start is False
        return
    assert d.status in ("optimal", "feasible", "heuristic-fallback")
    # every built-in exact method runs its kind's heuristic, before the solver or (a kind whose warm start does
    # not pay) after a solve not proven optimal, and is never worse than it
    if d.heuristic_objective is None:
        assert d.status == "optimal" and d.warm_start is False and "no warm start" in d.message
    else:
        assert _close_or_above(d.objective, d.heuristic_objective)
    if d.status in ("optimal", "feasible"):
        # a hint is the heuristic's decision; a heuristic run after the solver was no hint (policies/exact.py)
        assert not d.warm_start or d.heuristic_objective is not None
        assert d.bound is not None
    if d.bound is not None:
        assert _close_or_above(d.bound, d.objective)
    if d.status == "optimal":
        assert d.gap is not None and d.gap <= TOL

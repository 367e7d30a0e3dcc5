"""Lina's placement and the uniform baseline (optsched/heuristics/lina.py): first-fit decreasing gives
the textbook answer on small cases, popular experts are replicated by Eq. 4.1, unestimated experts
spread over free devices, and every plan is feasible."""

from __future__ import annotations

import numpy as np
import pytest
from experts_helpers import experts_round, minimums_round, random_small_round

from optsched.heuristics.lina import lina_plan, uniform_plan
from optsched.rounds.experts import generate
from optsched.rounds.experts.plan import makespan, violations


def _bins(plan: np.ndarray, loads: list[float]) -> list[list[float]]:
    return [sorted((loads[e] for e in np.flatnonzero(plan[:, d])), reverse=True) for d in range(plan.shape[1])]


@pytest.mark.parametrize(("loads", "devices", "expected"), [
    # capacity 10 (= W / D); FFD: 6 -> b0, 5 -> b1, 4 -> b0, 3 -> b1, 2 -> b1
    ([6, 5, 4, 3, 2], 2, [[6, 4], [5, 3, 2]]),
    # 7 -> b0, 6 -> b1, 5 -> b2, 4 -> b1, 3 -> b0, 2 -> b2, 2 -> b2, 1 -> b2
    ([7, 6, 5, 4, 3, 2, 2, 1], 3, [[7, 3], [6, 4], [5, 2, 2, 1]]),
    # input order does not matter (decreasing sort)
    ([2, 3, 6, 4, 5], 2, [[6, 4], [5, 3, 2]]),
])
def test_first_fit_decreasing_is_the_textbook_one(loads: list[float], devices: int, expected: list) -> None:
    r = experts_round(loads, devices)
    plan = lina_plan(r)
    assert violations(r, plan) == [] and _bins(plan.hosted, loads) == expected
    assert makespan(r, plan) == pytest.approx(10.0)


def test_eq_4_1_replicates_popular_experts() -> None:
    r = experts_round([30.0, 5.0, 5.0], 4)  # n = 4 x [0.75, 0.125, 0.125] = [3, 0.5, 0.5]
    plan = lina_plan(r)
    assert list(np.flatnonzero(plan.hosted[0])) == [0, 1, 2] and np.allclose(plan.share[0, :3], 1 / 3)
    assert plan.hosted[1, 3] and plan.hosted[2, 3] and makespan(r, plan) == pytest.approx(10.0)
    # a fractional count: 2.5 devices -> two whole pieces and a half piece
    r2 = experts_round([25.0, 10.0, 5.0], 4)
    p2 = lina_plan(r2)
    assert p2.replicas[0] == 3 and sorted(np.round(p2.share[0][p2.hosted[0]] * 25, 6)) == [5.0, 10.0, 10.0]


def test_piece_that_fits_nowhere_goes_where_it_finishes_first() -> None:
    r = experts_round([7.0, 7.0, 6.0], 2)  # capacity 10: 7 -> b0, 7 -> b1, 6 fits nowhere -> b0
    plan = lina_plan(r)
    assert _bins(plan.hosted, [7, 7, 6]) == [[7, 6], [7]] and makespan(r, plan) == 13.0


def test_replica_bounds_and_slots_are_kept() -> None:
    r = experts_round([30.0, 5.0, 5.0], 4, max_replicas=[2, None, None])
    plan = lina_plan(r)
    assert plan.replicas[0] == 2 and np.allclose(plan.share[0][plan.hosted[0]], 0.5) and violations(r, plan) == []
    tight = experts_round([30.0, 5.0, 5.0, 1.0], 2, slots=2)  # 3 + 1 + 1 + 1 pieces wanted, 4 slots
    plan = lina_plan(tight)
    assert violations(tight, plan) == [] and plan.hosted.sum() == 4


def test_experts_without_estimate_spread_over_free_devices() -> None:
    r = experts_round([10.0, 0.0, 0.0], 3, max_replicas=[1, None, None])
    plan = lina_plan(r)
    assert list(np.flatnonzero(plan.hosted[:, 0])) == [0] and plan.hosted[1, 1] and plan.hosted[2, 2]
    r2 = experts_round([10.0, 10.0, 0.0, 0.0], 4)  # no free device left: the emptiest slots, evenly
    p2 = lina_plan(r2)
    assert violations(r2, p2) == [] and p2.hosted[2:].sum(axis=0).max() == 1


def test_uniform_is_expert_parallelism() -> None:
    one = uniform_plan(experts_round([5.0, 1.0, 1.0, 1.0], 4))
    assert np.array_equal(one.hosted, np.eye(4, dtype=bool))
    two = uniform_plan(experts_round([5.0, 1.0], 4))  # 2 data-parallel copies each
    assert list(np.flatnonzero(two.hosted[0])) == [0, 2] and np.allclose(two.share[0][two.hosted[0]], 0.5)
    packed = uniform_plan(experts_round([1.0] * 8, 4))  # 2 experts per device
    assert list(packed.hosted.sum(axis=0)) == [2, 2, 2, 2]


@pytest.mark.parametrize("seed", range(6))
def test_generated_rounds_get_feasible_plans_and_lina_beats_uniform(seed: int) -> None:
    r = generate(seed=seed, experts=[12, 16][seed % 2], devices=[8, 12, 16][seed % 3], slots=[2, 4][seed % 2])
    lina, uni = lina_plan(r), uniform_plan(r)
    assert violations(r, lina) == [] and violations(r, uni) == []
    assert makespan(r, lina) <= makespan(r, uni) + 1e-9


@pytest.mark.parametrize(("specs", "devices", "slots"), [
    # the text's rule leaves expert 4 (no load, 2 replicas) with its two last slots on one device
    ([(634, 2, None), (766, 2, 3), (364, 2, None), (948, 1, None), (0, 2, 4), (846, 2, None)], 4, 3),
    # ... and expert 1's second piece with only devices that already host it
    ([(382, 1, 1), (933, 2, 3), (816, 1, 3), (876, 2, None), (589, 2, None)], 4, 2),
])
def test_replica_minimums_get_distinct_devices(specs: list, devices: int, slots: int) -> None:
    r = minimums_round(specs, devices, slots)
    assert violations(r, lina_plan(r)) == []


def test_lina_is_feasible_on_random_small_rounds() -> None:
    rounds = [r for r in map(random_small_round, range(1000)) if r is not None]
    assert len(rounds) > 400
    for r in rounds:
        assert violations(r, lina_plan(r)) == [], r.to_dict()["experts"]

"""The exact expert packing (optsched/formulations/expert_packing.py): the brute-force optimum on tiny
rounds, a valid bound, never worse than Lina's warm start, the MILP back end, and the share LP."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from experts_helpers import experts_round

from optsched.formulations import expert_packing
from optsched.heuristics.lina import lina_plan
from optsched.rounds.experts import generate
from optsched.rounds.experts.plan import lower_bound, makespan, violations


def _brute_force(r) -> float:  # noqa: ANN001
    """The optimum over every hosting matrix (shares by the LP)."""
    E, D = r.num_experts, r.num_devices
    best = np.inf
    for bits in itertools.product([False, True], repeat=E * D):
        hosted = np.array(bits).reshape(E, D)
        reps = hosted.sum(axis=1)
        if np.any(reps < r.min_replicas) or np.any(reps > r.max_replicas) or np.any(hosted.sum(axis=0) > r.slots):
            continue
        best = min(best, makespan(r, expert_packing.best_shares(r, hosted)))
    return float(best)


@pytest.mark.parametrize(("loads", "devices", "slots", "cost"), [
    ([7.0, 7.0, 6.0], 2, 2, 0.0),
    ([9.0, 2.0, 1.0], 2, 2, 0.5),
    ([5.0, 4.0, 3.0], 3, 1, 0.0),
    ([8.0, 1.0, 0.0], 2, 2, 1.0),
    ([4.0, 4.0, 3.0, 1.0], 2, 2, 0.0),
])
def test_exact_equals_the_brute_force_optimum(loads: list[float], devices: int, slots: int, cost: float) -> None:
    r = experts_round(loads, devices, slots=slots, replica_cost=cost)
    sol = expert_packing.solve(r, time_limit=10, hint=lina_plan(r))
    plan = sol.payload["plan"]
    assert sol.status == "optimal" and violations(r, plan) == []
    assert -sol.objective == pytest.approx(_brute_force(r), rel=1e-6)
    assert -sol.bound <= -sol.objective + 1e-9 and -sol.bound >= lower_bound(r) - 1e-9
    assert -sol.bound == pytest.approx(-sol.objective, rel=1e-4)


def test_packing_splits_a_piece_ffd_could_not_place() -> None:
    r = experts_round([7.0, 7.0, 6.0], 2)
    sol = expert_packing.solve(r, time_limit=10, hint=lina_plan(r))
    assert -sol.objective == pytest.approx(10.0) and makespan(r, lina_plan(r)) == 13.0


@pytest.mark.parametrize("seed", range(4))
def test_never_worse_than_lina_and_the_bound_holds(seed: int) -> None:
    r = generate(seed=seed, experts=12 + 4 * (seed % 2), devices=8 + 4 * (seed % 3), slots=2 + 2 * (seed % 2))
    hint = lina_plan(r)
    sol = expert_packing.solve(r, time_limit=1, hint=hint)
    assert sol.objective is not None and violations(r, sol.payload["plan"]) == []
    assert -sol.objective <= makespan(r, hint) + 1e-9 and -sol.bound <= -sol.objective + 1e-9
    assert -sol.bound >= lower_bound(r) - 1e-9 and sol.size.variables <= 2 * 16 * 16 + 1


def test_milp_back_end_agrees() -> None:
    r = generate(seed=1, experts=12, devices=6)
    a = expert_packing.solve(r, time_limit=10, hint=lina_plan(r))
    b = expert_packing.solve(r, time_limit=10, hint=lina_plan(r), backend="cbc")
    assert a.status == b.status == "optimal" and a.objective == pytest.approx(b.objective, rel=1e-6)


def test_share_lp_balances_a_fixed_hosting_and_drops_idle_replicas() -> None:
    r = experts_round([6.0, 2.0], 2)
    plan = expert_packing.best_shares(r, np.array([[True, True], [True, True]]))
    assert makespan(r, plan) == pytest.approx(4.0) and violations(r, plan) == []
    assert plan.hosted.sum() < 4  # a replica serving nothing is dropped


def test_exact_starts_no_model_it_cannot_build_within_the_limit() -> None:
    """Issue 26: 1,000 experts on 1,000 devices at ``--time-limit 1`` took 37 s (the model has two variables per
    (expert, device) pair: 19 s to build, 9 s to hint, 8 s for CP-SAT to load); the driver now asks the kind
    how long its model takes (``model_seconds``) and answers with the warm start when that does not fit."""
    import time

    import optsched
    from optsched.rounds.experts.generate import generate_experts_round

    problem = generate_experts_round(300, 300, seed=0, tokens=3000)  # 90,000 pairs: about 2 s of model
    t0 = time.perf_counter()
    d = optsched.solve(problem, "exact", 0.5, clock_start=t0)
    assert time.perf_counter() - t0 < 0.5 * 1.2
    assert d.status == "heuristic-fallback" and "build the model" in d.message

"""The exact reclaim selection equals brute force on small random rounds; the monolithic CP-SAT model
agrees; the policies' decisions are consistent and the exact one is never worse than the heuristic."""

from __future__ import annotations

import itertools

import pytest
from lyra_cases import figure_3_5

from optsched.formulations import lyra_reclaim as model
from optsched.heuristics.lyra_reclaim import lyra_reclaim
from optsched.policies import PolicyOptions, make_policy
from optsched.rounds.lyra_reclaim import ReclaimView, generate_reclaim_round


def _brute(v: ReclaimView, k: int) -> tuple[int, int]:
    best = None
    for combo in itertools.combinations(range(len(v.servers)), k):
        key = (len(v.outcome(combo).preempted), sum(v.flex_workers[s] for s in combo))
        best = key if best is None or key < best else best
    assert best is not None
    return best


@pytest.mark.parametrize("seed", range(8))
def test_exact_equals_brute_force(seed: int) -> None:
    p = generate_reclaim_round(seed=seed, servers=9, training=0, occupancy=0.95)
    v = ReclaimView(p)
    for k in range(1, len(v.servers) + 1):
        sol = model.solve(v, k)
        assert sol.status == "optimal"
        chosen = sol.payload["servers"]
        assert len(chosen) == k
        key = (len(v.outcome(chosen).preempted), sum(v.flex_workers[s] for s in chosen))
        assert key == _brute(v, k)
        assert sol.objective == sol.bound == len(v.jobs) - key[0]
        mono = model.solve_monolithic(v, k, hint=lyra_reclaim(v, k))
        assert mono.status == "optimal" and mono.objective == sol.objective


def test_wide_components_go_to_cpsat_and_stay_exact() -> None:
    p = generate_reclaim_round(seed=4, servers=9, training=0, occupancy=0.95)
    v = ReclaimView(p)
    for k in (2, 5):
        dp, cpsat = model.solve(v, k), model.solve(v, k, frontier_max=0)
        assert cpsat.size.variables > 0 and dp.size.variables == 0
        assert cpsat.objective == dp.objective and cpsat.status == "optimal"


@pytest.mark.parametrize("method", ["lyra", "random", "scf", "exact"])
def test_policies_decide_consistently(method: str) -> None:
    p = generate_reclaim_round(seed=2, servers=40, reclaim=12, occupancy=0.95)
    d = make_policy(method, PolicyOptions(time_limit=5), kind="lyra-reclaim").decide(p)
    v = ReclaimView(p)
    assert len(d.payload.servers) == 12 and set(d.payload.servers) <= set(p.on_loan)
    idx = [v.server_index[s] for s in d.payload.servers]
    assert d.payload == v.outcome(idx).payload()
    assert d.objective == len(v.jobs) - len(d.payload.preempted)


def test_exact_never_worse_and_proves_figure_3_5() -> None:
    d = make_policy("exact", kind="lyra-reclaim").decide(figure_3_5())
    assert d.status == "optimal" and d.payload.preempted == ("a",) and d.gap == 0
    for seed in range(4):
        p = generate_reclaim_round(seed=seed, servers=60, reclaim=25, occupancy=0.97)
        h = make_policy("lyra", kind="lyra-reclaim").decide(p)
        e = make_policy("exact", kind="lyra-reclaim").decide(p)
        assert e.objective >= h.objective and e.heuristic_objective == h.objective

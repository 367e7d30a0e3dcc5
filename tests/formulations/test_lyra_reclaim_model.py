"""The exact reclaim selection equals brute force on small random rounds (fewest preemptions, then the
fewest workers scaled in); the monolithic CP-SAT model agrees; the time limit covers the whole call; the
policies' decisions are consistent and the exact one is never worse than the heuristic."""

from __future__ import annotations

import itertools
import time

import pytest
from lyra_cases import figure_3_5

from optsched.core.job import Job
from optsched.rounds.lyra.cluster import two_pool_cluster, worker_allocation
from optsched.rounds.lyra_reclaim import LyraReclaimRound

from optsched.formulations import lyra_reclaim as model
from optsched.heuristics.lyra_reclaim import lyra_reclaim
from optsched.policies import PolicyOptions, make_policy
from optsched.rounds.lyra_reclaim import ReclaimView, generate_reclaim_round


def _key(v: ReclaimView, servers: object) -> tuple[int, int]:
    """The selection's order: jobs preempted, then workers scaled in (of jobs kept running)."""
    out = v.outcome(servers)  # type: ignore[arg-type]
    return len(out.preempted), sum(w for _, w in out.scaled_in)


def _brute(v: ReclaimView, k: int) -> tuple[int, int]:
    return min(_key(v, combo) for combo in itertools.combinations(range(len(v.servers)), k))


@pytest.mark.parametrize("seed", range(8))
def test_exact_equals_brute_force(seed: int) -> None:
    p = generate_reclaim_round(seed=seed, servers=9, training=0, occupancy=0.95)
    v = ReclaimView(p)
    for k in range(1, len(v.servers) + 1):
        sol = model.solve(v, k)
        assert sol.status == "optimal"
        chosen = sol.payload["servers"]
        assert len(chosen) == k
        key = _key(v, chosen)
        assert key == _brute(v, k)
        assert sol.objective == sol.bound == len(v.jobs) - key[0]
        mono = model.solve_monolithic(v, k, hint=lyra_reclaim(v, k))
        assert mono.status == "optimal" and mono.objective == sol.objective


@pytest.mark.parametrize("frontier_max", [model.FRONTIER_MAX, 0])
@pytest.mark.parametrize("seed", range(30))
def test_elastic_rounds_scale_in_fewest_workers_of_kept_jobs(seed: int, frontier_max: int) -> None:
    """Rounds with elastic jobs whose flexible workers share servers with other jobs' base workers: the
    dynamic program and CP-SAT both reach brute force's key, where a preempted job's flexible workers
    are not scaled in (seed 9, k 5: both preempt 3 jobs, none scaled in)."""
    p = generate_reclaim_round(seed=seed, servers=9, training=2, reclaim=1 + seed % 5, occupancy=0.9, elastic=0.5)
    v = ReclaimView(p)
    sol = model.solve(v, p.reclaim, frontier_max=frontier_max)
    assert sol.status == "optimal" and len(sol.payload["servers"]) == p.reclaim
    best = _brute(v, p.reclaim)
    assert _key(v, sol.payload["servers"]) == best
    assert sol.objective == sol.bound == len(v.jobs) - best[0]
    if frontier_max == 0:
        mono = model.solve_monolithic(v, p.reclaim)
        assert mono.status == "optimal" and _key(v, mono.payload["servers"]) == best


@pytest.mark.parametrize("seed", [9, 18, 28])
def test_split_components_keep_preemptions_exact(seed: int) -> None:
    """Components joined by flexible workers split by base workers (``merged_max`` 0): the preemptions
    stay those of brute force, the scaled-in workers at least its least, and the message says so."""
    p = generate_reclaim_round(seed=seed, servers=9, training=2, reclaim=1 + seed % 5, occupancy=0.9, elastic=0.5)
    v = ReclaimView(p)
    sol = model.solve(v, p.reclaim, frontier_max=0, merged_max=0)
    best = _brute(v, p.reclaim)
    key = _key(v, sol.payload["servers"])
    assert sol.status == "optimal" and key[0] == best[0] and key[1] >= best[1]
    assert "scaled-in workers bounded" in sol.size.encoding


def _elastic(name: str, base: int, top: int) -> Job:
    return Job(name, "resnet50", base, 1000, min_gpus=base, max_gpus=top, fungible=True)


def test_preempted_jobs_flexible_workers_are_not_charged() -> None:
    """inf-000: base and 3 flexible workers of x; inf-001: inelastic y and 1 flexible worker of z;
    inf-002: the base workers of z and of inelastic w. Returning one server preempts x (nothing scaled
    in), y (z scaled in by 1) or z and w: x's server is the optimum, though it holds the most flexible
    workers."""
    cluster = two_pool_cluster(0, 3)
    layout = {"x": {"inf-000": 4}, "y": {"inf-001": 1}, "z": {"inf-001": 1, "inf-002": 1}, "w": {"inf-002": 1}}
    jobs = (_elastic("x", 1, 4), Job("y", "resnet50", 1, 1000, fungible=True), _elastic("z", 1, 2),
            Job("w", "resnet50", 1, 1000, fungible=True))
    p = LyraReclaimRound(cluster=cluster, jobs=jobs, running=tuple(worker_allocation(j, s) for j, s in layout.items()),
                         inference_nodes=tuple(n.name for n in cluster.nodes), inference_factor=1.0,
                         flexible=(("x", (("inf-000", 3),)), ("z", (("inf-001", 1),))), reclaim=1)
    v = ReclaimView(p)
    for sol in (model.solve(v, 1), model.solve(v, 1, frontier_max=0), model.solve_monolithic(v, 1)):
        assert sol.status == "optimal" and sol.payload["servers"] == [0]
    d = make_policy("exact", kind="lyra-reclaim").decide(p)
    assert d.payload.preempted == ("x",) and d.payload.scaled_in == ()


def _dense(jobs: int = 30) -> LyraReclaimRound:
    """Two on-loan servers of 30 GPUs sharing ``jobs`` one-GPU-per-server jobs, and a third empty one:
    all the jobs open at once along any server order."""
    cluster = two_pool_cluster(0, 3, gpus_per_server=30)
    names = [f"j{i:02d}" for i in range(jobs)]
    return LyraReclaimRound(cluster=cluster, jobs=tuple(Job(n, "resnet50", 2, 1000, fungible=True) for n in names),
                            running=tuple(worker_allocation(n, {"inf-000": 1, "inf-001": 1}) for n in names),
                            inference_nodes=tuple(n.name for n in cluster.nodes), inference_factor=1.0, reclaim=2)


def test_many_open_jobs_go_to_cpsat_before_enumerating() -> None:
    """30 jobs open at one step exceed the frontier limit: CP-SAT solves the component (the dynamic
    program would enumerate 2^30 preemption sets) and the call stays within its time limit."""
    v = ReclaimView(_dense())
    t0 = time.perf_counter()
    sol = model.solve(v, 2, time_limit=2)
    assert time.perf_counter() - t0 < 10
    assert sol.status == "optimal" and sol.size.variables > 0
    assert len(sol.payload["servers"]) == 2 and 2 in sol.payload["servers"] and sol.objective == 0


def test_exact_policy_returns_within_its_time_limit() -> None:
    """The whole ``exact`` call comes back within (a generous margin of) its limit with a decision at
    least as good as the heuristic's; with no time at all the solve reports ``unknown``."""
    t0 = time.perf_counter()
    d = make_policy("exact", PolicyOptions(time_limit=2), kind="lyra-reclaim").decide(_dense())
    assert time.perf_counter() - t0 < 10
    assert d.status in ("optimal", "heuristic-fallback") and d.objective >= d.heuristic_objective
    p = generate_reclaim_round(seed=1, servers=60, reclaim=20, occupancy=0.97)
    assert model.solve(ReclaimView(p), 20, time_limit=1e-9).status == "unknown"


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

"""Every lyra-allocate method returns a feasible decision: whole-pool capacities respected, workers in
each job's range, running jobs keep their base; the exact method is never worse than the DP."""

from __future__ import annotations

import json

import pytest

from optsched.core.decision import Decision
from optsched.core.round import RoundProblem
from optsched.policies import PolicyOptions, make_policy, methods_of
from optsched.rounds.lyra.jobs import base_workers, max_workers
from optsched.rounds.lyra_allocate import generate_allocate_round
from optsched.rounds.lyra_allocate.capacity import available, current_pool


def _used(p, d) -> dict[str, int]:  # noqa: ANN001
    """Training GPUs each pool's available capacity must cover: new workers of queued jobs and flexible
    workers of running elastic jobs."""
    used = {"training": 0, "inference": 0}
    for c in d.payload.counts:
        job = p.job(c.job)
        held = p.workers_of(c.job) - (sum(g // p.worker_gpus(job, n) for n, g in p.flexible_of(c.job).items()))
        if c.workers:
            used[c.pool] += (c.workers - (held if p.current(c.job) else 0)) * job.gpus_per_worker
    return used


@pytest.mark.parametrize("seed", range(3))
def test_every_method_is_feasible(seed: int) -> None:
    p = generate_allocate_round(seed=seed, jobs=10, occupancy=0.6)
    cap = available(p)
    assert set(methods_of("lyra-allocate")) >= {"lyra", "exact", "afs", "gandiva", "sjf", "fifo"}
    for m in methods_of("lyra-allocate"):
        d = make_policy(m, PolicyOptions(time_limit=5), kind="lyra-allocate").decide(p)
        again = Decision.from_dict(json.loads(json.dumps(d.to_dict())))
        assert again.payload == d.payload
        used = _used(p, d)
        assert used["training"] <= cap["training"] and used["inference"] <= cap["inference"], m
        for c in d.payload.counts:
            job = p.job(c.job)
            if p.current(c.job) is not None:
                assert c.workers >= base_workers(job) and c.pool == current_pool(p, c.job)
            if c.workers:
                assert base_workers(job) <= c.workers <= max_workers(job)
                assert c.pool == "training" or job.fungible


def test_exact_never_worse_than_lyra_and_round_trips() -> None:
    for seed in range(4):
        p = generate_allocate_round(seed=seed, jobs=5, occupancy=0.5)
        assert RoundProblem.from_dict(json.loads(json.dumps(p.to_dict()))) == p
        h = make_policy("lyra", kind="lyra-allocate").decide(p)
        e = make_policy("exact", kind="lyra-allocate").decide(p)
        assert e.objective >= h.objective - 1e-3 and e.status == "optimal"
        assert e.heuristic_objective == pytest.approx(h.objective)
        assert make_policy("afs", kind="lyra-allocate").decide(p).objective <= h.objective + 1e-9


@pytest.mark.parametrize("kind", ["lyra-reclaim", "placement"])
def test_exact_methods_fall_back_when_no_time_is_left(kind: str) -> None:
    from optsched.core.kinds import round_kind
    p = round_kind(kind).generate(seed=1)
    d = make_policy("exact", PolicyOptions(time_limit=1e-6), kind=kind).decide(p)
    h = make_policy("lyra", kind=kind).decide(p)
    assert d.status == "heuristic-fallback" and d.objective == h.objective and "no time left" in d.message

"""Every lyra-allocate method returns a feasible decision: whole-pool capacities respected, workers in
each job's range, running jobs keep their base; the exact method is never worse than the DP."""

from __future__ import annotations

import dataclasses
import json

import pytest

from optsched.core.decision import Decision
from optsched.core.round import RoundProblem
from optsched.formulations import lyra_mckp
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


def _two_pool_round():  # noqa: ANN202
    """A generated round with flexible items in both pools."""
    from optsched.heuristics.lyra_allocate import phase_one
    from optsched.rounds.lyra_allocate.items import flexible_items
    for seed in range(40):
        p = generate_allocate_round(seed=seed, jobs=10, occupancy=0.5)
        first = phase_one(p)
        if all(flexible_items(p, {j: first.base[j] for j in first.elastic_in(p, pool)}).size
               for pool in ("training", "inference")):
            return p
    raise AssertionError("no generated round with flexible items in both pools")


def test_allocate_exact_shares_time_and_keeps_the_weaker_status(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each pool's solver gets its share of the time left (the training pool half of it), and a
    training pool answered by the dynamic program (the solver found nothing) leaves the whole plan
    ``heuristic-fallback`` though the inference pool is solved optimally."""
    real, limits = lyra_mckp.solve, []

    def first_fails(items, capacity, *, time_limit, **kw):  # noqa: ANN001, ANN003, ANN202
        limits.append(time_limit)
        sol = real(items, capacity, time_limit=time_limit, **kw)
        return dataclasses.replace(sol, status="unknown", objective=None, bound=None) if len(limits) == 1 else sol
    monkeypatch.setattr(lyra_mckp, "solve", first_fails)
    p = _two_pool_round()
    d = make_policy("exact", PolicyOptions(time_limit=20), kind="lyra-allocate").decide(p)
    assert len(limits) == 2 and limits[0] <= 10.0 and limits[1] > 10.0
    assert d.status == "heuristic-fallback" and d.bound is None
    h = make_policy("lyra", kind="lyra-allocate").decide(p)
    assert d.objective >= h.objective - 1e-6 and d.heuristic_objective == pytest.approx(h.objective)


def test_allocate_exact_falls_back_when_no_time_is_left() -> None:
    """No time left when phase two starts: the dynamic program's answer, ``heuristic-fallback``."""
    import time
    p = _two_pool_round()
    start = time.perf_counter() - 100.0
    d = make_policy("exact", PolicyOptions(time_limit=1, clock_start=start), kind="lyra-allocate").decide(p)
    h = make_policy("lyra", kind="lyra-allocate").decide(p)
    assert d.status == "heuristic-fallback" and "no time left" in d.message
    assert d.objective == pytest.approx(h.objective) and d.payload == h.payload

"""The Pollux-like baseline of the ``lyra`` kind (Lyra thesis Sec. 3.7.1, 3.7.4; optsched/heuristics/lyra_pollux.py):
its fitness on a hand-computed case, the genetic algorithm against brute force on a tiny round, feasibility of its
decisions by the round's own checks and an independent count, determinism for a seed, never worse than its initial
population, and the time limit as a property (generations stop when the deadline says so)."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest

from optsched.core.errors import ValidationError
from optsched.core.job import Job
from optsched.heuristics.lyra_pollux import _fitness, _genes, _repair, pollux_allocate
from optsched.policies import PolicyOptions, make_policy
from optsched.rounds.lyra.cluster import two_pool_cluster
from optsched.rounds.lyra.jobs import base_workers, max_workers
from optsched.rounds.lyra_sim import LyraSimRound, generate


def _tiny() -> LyraSimRound:
    # one 8-GPU training server; an elastic job (1..2 workers of 2 GPUs), an inelastic one of 4 GPUs, a 1-GPU one
    jobs = (Job("e", "bert", 2, 7200, min_gpus=2, max_gpus=4, gpus_per_worker=2),
            Job("i", "cnn", 4, 3600, gpus_per_worker=2, submit_time=1.0),
            Job("s", "cnn", 1, 600, submit_time=2.0))
    return LyraSimRound(cluster=two_pool_cluster(1, 0), jobs=jobs, time=10.0)


def test_fitness_by_hand() -> None:
    # Pollux's speedup of the elastic job on 2 workers over its base of 1: throughput 2x, efficiency
    # (r + 1) / (r + 2) = 5/6 at r = 4; scaled by its worker's share (2 GPUs of 8) times the 1 server, x 0.9 for
    # the start: 2 x 5/6 x 2/8 x 0.9 = 0.375; the 4-GPU job 1 x 2/8 x 0.9 = 0.225; the 1-GPU one 1 x 1/8 x 0.9
    g = _genes(_tiny())
    assert g.names == ("e", "s", "i")   # Pollux's order: by base workers, then submit time
    w = np.array([[2, 0, 0], [1, 0, 2], [1, 1, 2]])
    got = _fitness(g, w, "linear", servers=1, gpus=8, ratio=4.0)
    assert got == pytest.approx([0.375, 0.225 + 0.225, 0.225 + 0.1125 + 0.225])


def _brute_force(p: LyraSimRound) -> float:
    g = _genes(p)
    choices = [[0, *range(b, h + 1)] for b, h in zip(g.base, g.hi)]
    rows = np.array(list(itertools.product(*choices)))
    pools = np.zeros_like(rows)
    ok = (_repair(g, rows, pools) == rows).all(axis=1)   # the genomes within capacity
    return float(_fitness(g, rows[ok], p.scaling, 1, 8, 4.0).max())


def test_the_genetic_algorithm_finds_the_brute_force_optimum_of_a_tiny_round() -> None:
    p = _tiny()
    res = pollux_allocate(p, seed=0)
    assert res.fitness == pytest.approx(_brute_force(p))
    assert res.generations == 250 and not res.cut
    # the optimum: e on 2 workers and i (8 GPUs), s waits: 0.375 + 0.225 = 0.6, above starting all three (e on 1
    # worker): 0.225 + 0.225 + 0.1125 = 0.5625 (Sec. 3.7.4: Pollux "does not explicitly launch as many jobs as
    # possible")
    assert res.fitness == pytest.approx(0.6) and res.workers == {"e": 2, "i": 2}


def _independent_check(p: LyraSimRound, decision) -> None:  # noqa: ANN001
    """Feasible by the round's own rules (a round whose running jobs are the decision's: whole workers, one pool,
    fungible on inference, workers in range, no node over capacity) and by a count of our own."""
    allocs = tuple(d.allocation for d in decision.jobs if d.allocation is not None)
    dataclasses.replace(p, running=allocs, flexible=())   # raises on a broken rule
    used: dict[str, int] = {}
    for d in decision.jobs:
        cur = p.current(d.job)
        if cur is not None:
            assert d.allocation is not None, f"running job {d.job} lost its workers"
        if d.allocation is None:
            continue
        job = p.job(d.job)
        workers = 0
        for n, sh in d.allocation.placement.shares:
            used[n] = used.get(n, 0) + sh.gpus
            assert sh.gpus % p.worker_gpus(job, n) == 0
            workers += sh.gpus // p.worker_gpus(job, n)
        assert base_workers(job) <= workers <= max_workers(job)
    occupied = dict(p.occupied)
    for n in p.cluster.nodes:
        held = occupied[n.name].gpus if n.name in occupied else 0
        assert used.get(n.name, 0) + held <= n.num_gpus


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_decisions_are_feasible_deterministic_and_never_below_the_initial_population(seed: int) -> None:
    p = generate(seed=seed, jobs=40)
    pol = make_policy("pollux", PolicyOptions(time_limit=30, seed=3), kind="lyra")
    d = pol.decide(p)
    _independent_check(p, d)
    again = make_policy("pollux", PolicyOptions(time_limit=30, seed=3), kind="lyra").decide(p)
    assert [(x.job, x.allocation) for x in d.jobs] == [(x.job, x.allocation) for x in again.jobs]
    res = pollux_allocate(p, seed=3)
    assert res == pollux_allocate(p, seed=3)
    assert res.fitness >= res.initial_fitness
    assert res.fitness > res.initial_fitness or res.generations == 0   # it does search


class _Checks:
    """A deadline that expires after ``n`` looks (the GA looks once per generation)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.looks = 0

    def expired(self, reserve: float = 0.0) -> bool:
        self.looks += 1
        return self.looks > self.n


def test_the_time_limit_stops_the_generations() -> None:
    p = generate(seed=0, jobs=40)
    for n in (0, 7):
        res = pollux_allocate(p, seed=0, deadline=_Checks(n))  # type: ignore[arg-type]
        assert res.generations == n and res.cut
        assert res.fitness >= res.initial_fitness
    assert pollux_allocate(p, seed=0, deadline=_Checks(0)).fitness == res.initial_fitness   # none run: the start
    with pytest.raises(ValidationError, match="generations must be an integer >= 0"):
        pollux_allocate(p, generations=-1)


def test_a_cut_short_plan_is_partial_and_says_so() -> None:
    from optsched.policies.lyra import PolluxAllocator
    plan = PolluxAllocator(time_limit=5.0).plan(generate(seed=0, jobs=40), _Checks(3))  # type: ignore[arg-type]
    assert plan.status == "partial" and plan.message.startswith("partial: the time limit of 5 s stopped the genetic "
                                                               "algorithm after 3 of 250 generations")

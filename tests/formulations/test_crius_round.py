"""The exact Crius round (CP-SAT): equal to brute force on small rounds, never below Algorithm 1, every
answer feasible."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from crius_helpers import FAST, SLOW, alloc_on, brute_force, toy_cluster, toy_graph
from optsched.core import Cluster, Job, Node, NodeShare
from optsched.formulations import crius_round
from optsched.heuristics.crius import algorithm1
from optsched.rounds.crius import CriusRound, generate_crius_round
from optsched.rounds.crius.admission import admit
from optsched.rounds.crius.choice import counts, depth_bound
from optsched.rounds.crius.feasibility import violations
from optsched.rounds.crius.objective import objective
from optsched.rounds.crius.table import build_crius_table

MODELS = (("tiny", toy_graph("tiny")), ("poor", toy_graph("poor", flops=2e10, params=1e9)),
          ("wide", toy_graph("wide", flops=5e11, params=5e8, ops=6)))


def _small_round(seed: int) -> CriusRound:
    """2 fast nodes of 2 GPUs and 1 slow node of 4; 3-4 jobs of three toy models, some running."""
    rng = np.random.default_rng(seed)
    c = toy_cluster()
    n = int(rng.integers(3, 5))
    jobs = []
    for i in range(n):
        model = MODELS[int(rng.integers(0, 3))][0]
        jobs.append(Job(f"j{i}", model, int(rng.choice([1, 2])), 100, submit_time=float(i),
                        deadline=float(10 + rng.uniform(1, 5000)) if rng.random() < 0.3 else None))
    running = []
    if rng.random() < 0.7:
        running.append(alloc_on(c, "j1", "fast", {"f0": 2}, 1))
    if rng.random() < 0.5:
        running.append(alloc_on(c, "j2", "slow", {"s0": 2}, 2))
    return CriusRound(cluster=c, jobs=tuple(jobs), models=MODELS, time=10.0, running=tuple(running),
                      search_depth=int(rng.integers(0, 3)),
                      objective="deadline" if rng.random() < 0.3 else "throughput")


@pytest.mark.parametrize("seed", range(12))
def test_exact_equals_brute_force(seed: int) -> None:
    r = _small_round(seed)
    t = build_crius_table(r)
    adm = admit(r, t)
    sol = crius_round.solve(r, t, time_limit=20, admission=adm)
    assert sol.status == "optimal"
    assert sol.objective == pytest.approx(brute_force(r, t), abs=1e-6)
    assert violations(r, t, sol.payload["choices"], adm) == []


@pytest.mark.parametrize("jobs, seed", [(40, 0), (80, 3)])
def test_exact_is_never_below_the_heuristic(jobs: int, seed: int) -> None:
    r = generate_crius_round(jobs, seed=seed, deadline_fraction=0.2)
    for rr in (r, dataclasses.replace(r, objective="deadline", search_depth=1)):
        t = build_crius_table(rr)
        adm = admit(rr, t)
        h = algorithm1(rr, t, adm)
        sol = crius_round.solve(rr, t, time_limit=20, hint=h.choices, admission=adm)
        assert sol.objective >= objective(rr, t, h.choices) - 1e-9
        assert violations(rr, t, sol.payload["choices"], adm) == []
        # D per scheduling choice (Sec. 6.1), not per round
        assert counts(rr, t, sol.payload["choices"])[0] <= depth_bound(rr, t, sol.payload["choices"])
        assert sol.bound is None or sol.bound >= sol.objective - 1e-6


def test_identical_queued_jobs_are_one_class() -> None:
    c = toy_cluster()
    jobs = tuple(Job(f"q{i}", "tiny", 1, 100, submit_time=float(i)) for i in range(5))
    r = CriusRound(cluster=c, jobs=jobs, models=MODELS, time=10.0)
    t = build_crius_table(r)
    built = crius_round.build(r, t)
    protected = admit(r, t).protected
    assert protected == "q0"
    assert {len(g) for g in built.classes.values()} == {1, 4}  # the protected job alone, the other four counted
    sol = crius_round.solve(r, t, time_limit=10)
    assert sol.objective == pytest.approx(brute_force(r, t), abs=1e-6)
    # the earliest jobs of a class get its best Cells
    w = {n: t.weight[c.row] for n, c in sol.payload["choices"].items()}
    assert [w.get(f"q{i}", 0.0) for i in range(1, 5)] == sorted((w.get(f"q{i}", 0.0) for i in range(1, 5)),
                                                                 reverse=True)


def test_hint_is_a_feasible_start_and_the_lp_bound_bounds() -> None:
    r = generate_crius_round(30, seed=1)
    t = build_crius_table(r)
    adm = admit(r, t)
    h = algorithm1(r, t, adm)
    built = crius_round.build(r, t, admission=adm)
    values = crius_round._hint_values(built, h.choices)
    assert crius_round._decode(built, [values.get(i, 0) for i in range(max(values) + 1)]) is not None
    sol = crius_round.solve(r, t, time_limit=20, hint=h.choices, admission=adm)
    lp = crius_round.lp_relaxation_bound(r, t, adm)
    assert lp is not None and lp >= sol.objective - 1e-5


def test_a_class_of_identical_jobs_is_bounded_by_its_size_not_by_one() -> None:
    """Five identical 1-GPU jobs on four fast nodes of 2 GPUs: each Cell's variable counts up to four of
    them, so the fast type's capacity rows bind although the GPUs of its rows taken once each fit (the
    reviewer's 40 identical jobs: no solution, then a fallback 8% below the optimum)."""
    c = toy_cluster(fast_nodes=4, slow_gpus=2)
    jobs = tuple(Job(f"q{i}", "tiny", 1, 100, submit_time=float(i)) for i in range(5))
    r = CriusRound(cluster=c, jobs=jobs, models=MODELS, time=10.0)
    t = build_crius_table(r)
    sol = crius_round.solve(r, t, time_limit=10)
    assert sol.status == "optimal"
    assert violations(r, t, sol.payload["choices"]) == []
    assert sol.objective == pytest.approx(brute_force(r, t), abs=1e-6)


def test_held_nodes_count_only_their_free_slots() -> None:
    """Outside work (``occupied``) and running jobs on a node leave fewer slots than its GPU count: the
    capacity rows of its GPU type may only be left out when they cannot bind with every running job kept
    (reviewer's round: the exact model lost to Algorithm 1 with no solution at all)."""
    c = Cluster("fz", (Node("f0", "fast", 6, 24, 384.0), Node("f1", "fast", 2, 16, 128.0),
                       Node("f2", "fast", 3, 12, 192.0), Node("s0", "slow", 2, 16, 128.0)), (FAST, SLOW),
                100.0, 10.0, 16.0)
    jobs = (Job("j0", "tiny", 4, 100, submit_time=0.0, completed_iterations=20.0, deadline=1389.05),
            Job("j1", "wide", 4, 100, submit_time=2.0, completed_iterations=2.0),
            Job("j2", "poor", 2, 100, submit_time=1.0, completed_iterations=47.0),
            Job("j3", "wide", 1, 100, submit_time=0.0, completed_iterations=41.0, deadline=435.41),
            Job("j4", "wide", 2, 100, submit_time=1.0, completed_iterations=3.0, deadline=1105.09))
    running = (alloc_on(c, "j1", "slow", {"s0": 1}, 1), alloc_on(c, "j3", "fast", {"f1": 1}, 1),
               alloc_on(c, "j4", "fast", {"f0": 2}, 2))
    r = CriusRound(cluster=c, jobs=jobs, models=MODELS, time=10.0, running=running,
                   occupied=(("s0", NodeShare(1, 0, 28.95)),), search_depth=2, objective="deadline",
                   preempt_penalty=2.0)
    t = build_crius_table(r)
    adm = admit(r, t)
    sol = crius_round.solve(r, t, time_limit=20, hint=algorithm1(r, t, adm).choices, admission=adm)
    assert sol.status == "optimal"
    assert violations(r, t, sol.payload["choices"], adm) == []
    assert sol.objective == pytest.approx(brute_force(r, t), abs=1e-6)


def _grouped_round(seed: int) -> CriusRound:
    """A toy cluster (3 fast nodes of 2 GPUs, a slow one of 2) with a running job, one or two other queued jobs and three identical queued jobs
    (a class of at least two besides the protected job)."""
    rng = np.random.default_rng(1000 + seed)
    c = toy_cluster(fast_nodes=3, slow_gpus=2)
    model = MODELS[int(rng.integers(0, 3))][0]
    gpus = int(rng.choice([1, 2]))
    jobs = [Job("r0", MODELS[int(rng.integers(0, 3))][0], 2, 100, submit_time=float(rng.integers(0, 3)))]
    jobs += [Job(f"o{i}", MODELS[int(rng.integers(0, 3))][0], int(rng.choice([1, 2])), 100, submit_time=float(i))
             for i in range(int(rng.integers(1, 3)))]
    jobs += [Job(f"g{i}", model, gpus, 100, submit_time=1.0 + i) for i in range(3)]
    node, gtype = ("f0", "fast") if rng.random() < 0.5 else ("s0", "slow")
    running = (alloc_on(c, "r0", gtype, {node: 2}, 1),)
    return CriusRound(cluster=c, jobs=tuple(jobs), models=MODELS, time=10.0, running=running,
                      search_depth=int(rng.integers(0, 2)))


@pytest.mark.parametrize("seed", range(6))
def test_exact_equals_brute_force_with_classes_of_identical_jobs(seed: int) -> None:
    r = _grouped_round(seed)
    t = build_crius_table(r)
    adm = admit(r, t)
    built = crius_round.build(r, t, admission=adm)
    assert max(len(g) for g in built.classes.values()) >= 2
    sol = crius_round.solve(r, t, time_limit=20, admission=adm)
    assert sol.status == "optimal"
    assert violations(r, t, sol.payload["choices"], adm) == []
    assert sol.objective == pytest.approx(brute_force(r, t), abs=1e-6)


def test_only_opportunistic_dropped_or_late_running_jobs_are_suspended() -> None:
    """Crius suspends opportunistic jobs to launch the pending one (Sec. 6.1) and drops late deadline jobs
    (Sec. 8.5); every other running job keeps its Cell or is rescaled within the search depth. A reviewer's
    round: 120 jobs on the testbed, 90% of them running, depth 2, where the model used to suspend every
    running job to start small queued ones."""
    r = dataclasses.replace(generate_crius_round(120, 0, cluster="crius-testbed-64", running_fraction=0.9),
                            search_depth=2)
    t = build_crius_table(r)
    adm = admit(r, t)
    sol = crius_round.solve(r, t, time_limit=20, admission=adm, hint=algorithm1(r, t, adm).choices)
    assert sol.objective is not None
    choices = sol.payload["choices"]
    assert violations(r, t, choices, adm) == []
    running = [j.name for j in r.jobs if r.current(j.name) is not None]
    suspended = [n for n in running if n not in choices]
    assert set(suspended) <= adm.opportunistic | adm.dropped
    # the rule is checked: suspending a running job that is not opportunistic is a violation
    victim = next(n for n in running if n not in adm.opportunistic and n in choices)
    broken = {n: c for n, c in choices.items() if n != victim}
    assert any("is suspended" in v and repr(victim) in v for v in violations(r, t, broken, adm))

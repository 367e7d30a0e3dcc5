"""Crius Algorithm 1 (search depth, ScaleResource, opportunistic execution) and the baselines of
Crius Sec. 8.1 on Crius rounds."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from crius_helpers import alloc_on, late_deadline_round, toy_cluster, toy_graph
from optsched.core import Job
from optsched.heuristics.baselines import (schedule_elasticflow, schedule_elasticflow_ddl, schedule_fcfs,
                                           schedule_fcfs_backfill, schedule_gandiva, schedule_gavel)
from optsched.heuristics.baselines.cells import request_gpus
from optsched.heuristics.baselines.elasticflow import minimum_share
from optsched.heuristics.baselines.gavel import gavel_shares
from optsched.heuristics.crius import algorithm1
from optsched.rounds.crius import CriusRound, generate_crius_round
from optsched.rounds.crius.admission import admit
from optsched.rounds.crius.choice import counts, depth_bound, is_kept
from optsched.rounds.crius.feasibility import violations
from optsched.rounds.crius.objective import objective
from optsched.rounds.crius.table import build_crius_table

BASELINES = (schedule_fcfs, schedule_fcfs_backfill, schedule_gandiva, schedule_gavel, schedule_elasticflow,
             schedule_elasticflow_ddl)


@pytest.fixture(scope="module", params=[(20, 0), (60, 1), (120, 5)])
def case(request):
    n, seed = request.param
    r = generate_crius_round(n, seed=seed, deadline_fraction=0.2)
    return r, build_crius_table(r)


def test_algorithm1_is_feasible_and_bounded_by_the_depth(case) -> None:
    r, t = case
    for depth in (0, 1, 3):
        rr = dataclasses.replace(r, search_depth=depth)
        tt = build_crius_table(rr)
        s = algorithm1(rr, tt)
        assert s.complete and violations(rr, tt, s.choices, s.admission) == []
        # D per scheduling choice (Sec. 6.1), not per round: at most D x (choices) running jobs rescaled
        assert counts(rr, tt, s.choices)[0] <= depth_bound(rr, tt, s.choices)
        if depth == 0:
            assert counts(rr, tt, s.choices)[0] == 0
        if s.admission.protected:
            assert s.admission.protected in s.choices


def test_deadline_objective(case) -> None:
    r, _ = case
    rr = dataclasses.replace(r, objective="deadline")
    t = build_crius_table(rr)
    s = algorithm1(rr, t)
    assert violations(rr, t, s.choices, s.admission) == []
    assert not set(s.choices) & s.admission.dropped


def test_baselines_are_feasible(case) -> None:
    r, t = case
    for f in BASELINES:
        s = f(r, t)
        assert violations(r, t, s.choices, s.admission, search_depth=False, suspensions=False) == [], f.__name__


def _one_type_round(running_gpus: int, depth: int, queued_gpus: int = 2) -> CriusRound:
    """One fast node of 4 GPUs: a running job on ``running_gpus`` of them (a model that scales poorly:
    4 GPUs give it 1.8 times the throughput of 2) and a queued one."""
    c = toy_cluster(fast_nodes=1, fast_gpus=4, slow_nodes=0)
    jobs = (Job("big", "poor", 2, 100, submit_time=0.0), Job("wait", "tiny", queued_gpus, 100, submit_time=1.0))
    models = (("poor", toy_graph("poor", flops=2e10, params=1e9)), ("tiny", toy_graph("tiny")))
    # objective "normalised": the trade below (a poorly scaling job's GPUs for a small job) is worth it per
    # normalised throughput, not per raw samples/s (the paper's objective)
    return CriusRound(cluster=c, jobs=jobs, models=models, time=10.0, search_depth=depth, objective="normalised",
                      running=(alloc_on(c, "big", "fast", {"f0": running_gpus}, 1),))


def test_scale_resource_rescales_within_the_depth() -> None:
    # "big" runs 4 GPUs (2 N_G); "wait" needs 2: with depth 1 ScaleResource shrinks "big" to 2
    r = _one_type_round(4, depth=1)
    t = build_crius_table(r)
    s = algorithm1(r, t)
    assert "wait" in s.choices and not is_kept(r, t, 0, s.choices["big"]) and t.gpus[s.choices["big"].row] < 4
    assert violations(r, t, s.choices, s.admission) == []
    r0 = dataclasses.replace(r, search_depth=0)
    t0 = build_crius_table(r0)
    s0 = algorithm1(r0, t0)
    assert "wait" not in s0.choices and is_kept(r0, t0, 0, s0.choices["big"])


def test_opportunistic_execution_suspends_later_jobs() -> None:
    c = toy_cluster(fast_nodes=1, fast_gpus=4, slow_nodes=0)
    jobs = (Job("first", "tiny", 4, 100, submit_time=0.0), Job("later", "tiny", 4, 100, submit_time=5.0))
    r = CriusRound(cluster=c, jobs=jobs, models=(("tiny", toy_graph("tiny")),), time=10.0, search_depth=0,
                   running=(alloc_on(c, "later", "fast", {"f0": 4}, 1),))
    t = build_crius_table(r)
    adm = admit(r, t)
    assert adm.protected == "first" and adm.opportunistic == {"later"}
    s = algorithm1(r, t, adm)
    assert "first" in s.choices and "later" not in s.choices  # suspended to launch the pending job
    assert violations(r, t, s.choices, adm) == []


def test_fcfs_blocks_at_the_head() -> None:
    c = toy_cluster(fast_nodes=1, fast_gpus=4, slow_nodes=0)
    jobs = (Job("run", "tiny", 2, 100, submit_time=0.0), Job("head", "tiny", 4, 100, submit_time=1.0),
            Job("small", "tiny", 1, 100, submit_time=2.0))
    r = CriusRound(cluster=c, jobs=jobs, models=(("tiny", toy_graph("tiny")),), time=10.0,
                   running=(alloc_on(c, "run", "fast", {"f0": 2}, 1),))
    t = build_crius_table(r)
    assert request_gpus(r, t, 1) == 4
    s = schedule_fcfs(r, t)
    assert set(s.choices) == {"run"}                      # "head" does not fit, so "small" waits too
    assert set(schedule_gandiva(r, t).choices) == {"run", "small"}  # backfilling


def test_gavel_shares_and_elasticflow_minimum_share(case) -> None:
    r, t = case
    jobs = list(range(len(r.jobs)))
    types = sorted({n.gpu_type for n in r.cluster.nodes})
    y = gavel_shares(r, t, jobs, types)
    assert (y >= -1e-9).all() and (y.sum(axis=1) <= 1 + 1e-6).all()
    for b, ty in enumerate(types):
        cap = sum(n.num_gpus for n in r.cluster.nodes_of_type(ty))
        used = sum(y[a, b] * (request_gpus(r, t, j) or 0) for a, j in enumerate(jobs))
        assert used <= cap + 1e-6
    for j in jobs:
        for ty in types:
            m = minimum_share(t, j, ty)
            if m is None:
                continue
            rows = [k for k in t.rows_of(j) if t.best_stages[k] and t.gpu_type[k] == ty]
            fits = sorted(int(t.gpus[k]) for k in rows if t.dp_throughput[k] > 0)
            assert m == (fits[0] if fits else max(int(t.gpus[k]) for k in rows))
    assert np.isfinite(y).all()



@pytest.mark.parametrize("depth", [0, 1])
def test_a_running_job_late_on_its_cell_is_rescaled_or_suspended(depth: int) -> None:
    r = late_deadline_round(depth)
    t = build_crius_table(r)
    j0 = t.index_of("j0")
    assert not t.deadline_ok[t.current_row[j0]] and t.deadline_ok[t.rows_of(j0)].any()
    s = algorithm1(r, t)
    assert violations(r, t, s.choices, s.admission) == []
    if depth == 0:
        assert "j0" not in s.choices  # no rescale allowed: suspended
    else:
        assert t.deadline_ok[s.choices["j0"].row]  # rescaled onto a Cell that meets the deadline
    assert counts(r, t, s.choices)[0] <= depth


def test_baselines_keep_shapes_and_capacities_under_the_deadline_objective(case) -> None:
    r, _ = case
    rr = dataclasses.replace(r, objective="deadline")
    t = build_crius_table(rr)
    for f in BASELINES:
        s = f(rr, t)
        assert violations(rr, t, s.choices, s.admission, search_depth=False, deadline_rows=False,
                          suspensions=False) == [], f.__name__


def _two_node_round(depth: int) -> CriusRound:
    """Two fast nodes of 4 GPUs, each held by a running job ("a" on f0, "b" on f1: 4 GPUs of a model that
    scales poorly, N_G = 2) and two queued jobs "c", "d" (N_G = 2) submitted after them."""
    c = toy_cluster(fast_nodes=2, fast_gpus=4, slow_nodes=0)
    models = (("poor", toy_graph("poor", flops=2e10, params=1e9)), ("tiny", toy_graph("tiny")))
    jobs = (Job("a", "poor", 2, 100, submit_time=0.0), Job("b", "poor", 2, 100, submit_time=0.5),
            Job("c", "tiny", 2, 100, submit_time=1.0), Job("d", "tiny", 2, 100, submit_time=2.0))
    # objective "normalised" (with its rescale penalty): per raw samples/s "a" and "b" are worth more than c, d
    return CriusRound(cluster=c, jobs=jobs, models=models, time=10.0, search_depth=depth, objective="normalised",
                      running=(alloc_on(c, "a", "fast", {"f0": 4}, 1), alloc_on(c, "b", "fast", {"f1": 4}, 1)))


def test_search_depth_counts_per_scheduling_choice() -> None:
    """Crius Sec. 6.1: search depth is "the maximum job scaling times for generating a scheduling choice".

    Hand trace, objective "normalised", D = 1 (weights: "a"/"b" run 4 GPUs at 1.8062 and have a 2-GPU
    Cell of 1.0; "c"/"d" have Cells of 1 / 2 / 4 GPUs at 0.5062 / 1.0 / 1.9522; rescale penalty 0.05). No GPU is
    free and no running job was submitted after "c", so nobody is protected.

    * CellBasedSched(c): nothing fits as is. ScaleResource on c's 4-GPU Cell: one rescaling (a or b to 2
      GPUs) frees 2 GPUs of a node, not 4: fails. On its 2-GPU Cell: a -> 2 GPUs, gain
      1.0 - (1.8062 - 1.0 + 0.05) = 0.1438 (b -> 2 ties; the first found is kept); the 1-GPU Cell gains
      less. c runs 2 GPUs on f0 next to a's 2.
    * CellBasedSched(d), a choice of its own with its own depth 1: its 4-GPU Cell fails again; its 2-GPU
      Cell: b -> 2 GPUs gains 0.1438 (c -> 1 GPU would free only 1 GPU of f0). d runs 2 GPUs on f1.
    * CellBasedSched() (line 12): nothing free, nothing to upgrade.

    Two running jobs are rescaled with D = 1 (the bound is D x (2 started + 1) = 3); a depth counted once
    per round would have pended d. With D = 0 both wait. The objective is 4 x 1.0 - 2 x 0.05 = 3.9.
    """
    r = _two_node_round(1)
    t = build_crius_table(r)
    s = algorithm1(r, t)
    got = {n: (int(t.gpus[c.row]), c.parts) for n, c in s.choices.items()}
    assert got == {"a": (2, (("f0", 2),)), "b": (2, (("f1", 2),)), "c": (2, (("f0", 2),)), "d": (2, (("f1", 2),))}
    assert counts(r, t, s.choices) == (2, 0) and depth_bound(r, t, s.choices) == 3
    assert violations(r, t, s.choices, s.admission) == []
    assert abs(objective(r, t, s.choices) - 3.9) < 1e-9
    r0 = _two_node_round(0)
    t0 = build_crius_table(r0)
    assert set(algorithm1(r0, t0).choices) == {"a", "b"}


def test_jobs_placed_earlier_in_the_round_are_rescalable() -> None:
    """VirtualAlloc (Algorithm 1 line 19) applies a choice "virtually on running jobs": a job placed earlier
    in the round is rescaled like a running one.

    Hand trace, one fast node of 4 GPUs, no running job, D = 1: "a" (earliest, protected) takes its best
    Cell, 4 GPUs (weight 1.9522). CellBasedSched(b): nothing free; ScaleResource on b's 4-GPU Cell fails
    (rescaling a to 2 or 1 GPUs frees 2 or 3); on its 2-GPU Cell, a -> 2 GPUs gains 1.0 - (1.9522 - 1.0)
    = 0.0478 > 0 (a was queued: no rescale penalty): a and b run 2 GPUs each. With D = 0 b waits."""
    c = toy_cluster(fast_nodes=1, fast_gpus=4, slow_nodes=0)
    jobs = (Job("a", "tiny", 2, 100, submit_time=0.0), Job("b", "tiny", 2, 100, submit_time=1.0))
    for depth, want in ((1, {"a": 2, "b": 2}), (0, {"a": 4})):
        r = CriusRound(cluster=c, jobs=jobs, models=(("tiny", toy_graph("tiny")),), time=10.0, search_depth=depth)
        t = build_crius_table(r)
        s = algorithm1(r, t)
        assert {n: int(t.gpus[ch.row]) for n, ch in s.choices.items()} == want
        assert violations(r, t, s.choices, s.admission) == []

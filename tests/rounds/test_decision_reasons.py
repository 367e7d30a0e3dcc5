"""Decisions that explain themselves (issue 16, item 4): a reason for every job that does not run, the
penalty each job's action costs, and infeasibility errors that name the option which would defer."""

from __future__ import annotations

import pytest

import optsched
from optsched.core import InfeasibleError, Job, NodeShare, a800_cluster
from optsched.rounds.rubick.problem import RubickRound
from optsched.rounds.rubick.table import build_round_table

from helpers import best_row, row_alloc

CLUSTER = a800_cluster(2, 4)


def test_waiting_guaranteed_jobs_say_why() -> None:
    jobs = (Job("a", "vit", 2, 100, tenant="t", guaranteed=True),
            Job("b", "vit", 4, 100, tenant="t", guaranteed=True, submit_time=1.0),
            Job("c", "vit", 1, 100, tenant="u", guaranteed=True),
            Job("d", "bert", 4, 100, tenant="t", submit_time=2.0))
    problem = RubickRound(CLUSTER, jobs, quotas={"t": 4})
    d = optsched.solve(problem, "exact")
    assert d.job("b").reason == ("waiting for quota: tenant 't' quota 4 GPUs is used up (2 in use by jobs admitted "
                                 "before it, the job needs 4)")
    assert d.job("c").reason == ("waiting for quota: tenant 'u' has quota 0 (it has no entry in the round's quotas; "
                                 "once any quota is given, a tenant without one has quota 0); the job needs 1 GPUs")
    assert d.job("a").reason == "" and d.job("a").action == "start"
    zero = RubickRound(CLUSTER, jobs[2:3], quotas={"t": 4, "u": 0})
    assert optsched.solve(zero, "heuristic").job("c").reason == \
        "waiting for quota: tenant 'u' has quota 0; the job needs 1 GPUs"
    fifo = optsched.solve(RubickRound(a800_cluster(1, 4), jobs[1:2] + (Job("e", "vit", 4, 100, submit_time=5.0),)),
                          "fifo")
    assert fifo.job("e").reason == "no room: the free resources went to other jobs this round"
    fifo = optsched.solve(RubickRound(a800_cluster(1, 4), (Job("e", "vit", 4, 100),) + jobs[1:2]), "fifo")
    assert fifo.job("b").reason == ("no room: the free resources went to other jobs (fifo enforces no performance "
                                    "guarantees)")


def test_deferred_and_preempted_jobs_carry_reason_and_penalty() -> None:
    a, big = Job("a", "vit", 2, 1000, tenant="t", guaranteed=True), Job("big", "bert", 4, 1000, tenant="t",
                                                                         guaranteed=True, submit_time=5.0)
    table = build_round_table(RubickRound(CLUSTER, (a,)))
    running = (row_alloc(table, "a", best_row(table, "a", 2), ["n000"]),)
    occupied = (("n000", NodeShare(1)), ("n001", NodeShare(1)))
    problem = RubickRound(CLUSTER, (a, big), running, occupied=occupied, quotas={"t": 6}, preempt_penalty=0.3)
    with pytest.raises(InfeasibleError, match=r"\(to schedule the rest and defer such jobs this round instead: "
                                              r"optsched solve --defer-unreachable, defer_unreachable=true"):
        optsched.solve(problem, "heuristic")
    with pytest.raises(InfeasibleError, match="--defer-unreachable"):
        optsched.solve(problem, "exact")
    d = optsched.solve(problem, "exact", defer_unreachable_guarantees=True)
    assert d.job("big").action == "wait"
    assert d.job("big").reason.startswith("performance guarantee deferred this round: ")
    # a running best-effort job that loses its GPUs to a guaranteed one is charged the preemption penalty
    be = Job("be", "vit", 4, 1000)
    t2 = build_round_table(RubickRound(a800_cluster(1, 4), (be,)))
    g = Job("g", "bert", 4, 1000, guaranteed=True)
    p2 = RubickRound(a800_cluster(1, 4), (be, g), (row_alloc(t2, "be", best_row(t2, "be", 4), ["n000"]),),
                     preempt_penalty=0.3)
    d2 = optsched.solve(p2, "exact")
    assert (d2.job("be").action, d2.job("be").penalty) == ("preempt", 0.3)
    assert d2.job("be").reason == "no room: the free resources went to other jobs this round"
    assert d2.job("g").penalty == 0.0
    assert d2.objective == pytest.approx(sum(j.normalised - j.penalty for j in d2.jobs))


def test_penalties_add_up_to_the_objective_on_generated_rounds() -> None:
    from optsched.rounds.rubick.generate import generate_rubick_round
    for seed in range(3):
        problem = generate_rubick_round(4, 8, 24, seed=seed)
        for method in ("heuristic", "sia", "exact"):
            d = optsched.solve(problem, method, time_limit=10.0)
            assert d.objective == pytest.approx(sum(j.normalised - j.penalty for j in d.jobs))
            for j in d.jobs:
                assert (j.reason != "") == (j.action in ("wait", "preempt"))
                assert j.penalty == {"reconfigure": problem.reconfig_penalty,
                                     "preempt": problem.preempt_penalty}.get(j.action, 0.0)

"""The time limit holds for every method (issue "Scale and optimality gap", item 1): the budget covers
the table, the heuristic and the solver, and a method cut short returns a feasible decision of status
``partial`` that says what it left out. A property over limits and methods, with a generous margin
(wall-clock checks are benchmarks' business; this only catches a limit that is ignored)."""

from __future__ import annotations

import time

import pytest

import optsched
from optsched.core.capacity import NodeUsage
from optsched.core.decision import Decision
from optsched.rounds.rubick.admission import Admission
from optsched.rounds.rubick.decision import choices_of
from optsched.rounds.rubick.feasibility import violations
from optsched.rounds.rubick.generate import generate_rubick_round
from optsched.rounds.rubick.table import build_round_table

#: what a call may take beyond its limit here: the solver's least 0.1 s, assembling the decision, and
#: a loaded test machine
MARGIN_S = 1.5


@pytest.fixture(scope="module")
def slow_round() -> optsched.RubickRound:
    """A round whose table and heuristic take seconds: 160 nodes x 8 GPUs, 400 jobs."""
    return generate_rubick_round(160, 8, 400, 0)


def _feasible(problem: optsched.RubickRound, d: Decision) -> None:
    assert sorted(x.job for x in d.jobs) == sorted(j.name for j in problem.jobs)
    usage = NodeUsage()
    for x in d.jobs:
        if x.allocation is not None:
            usage.add_all(x.allocation.placement.shares)
        elif problem.current(x.job) is not None:
            assert x.action == "preempt"
    assert usage.overflows(problem.free, 1e-6) == []
    if d.method not in ("exact", "rubick"):
        return  # the others choose from tables of their own; capacity is what they can break
    table = build_round_table(problem)
    protected = {x.job: 0 for x in d.jobs if x.protected}
    assert violations(problem, table, choices_of(d, table, problem), Admission(protected, {})) == []


@pytest.mark.parametrize("method", ["exact", "rubick", "rubick-r", "sia", "synergy", "fifo", "antman"])
@pytest.mark.parametrize("limit", [0.05, 0.4])
def test_the_limit_holds_and_the_decision_is_feasible(slow_round: optsched.RubickRound, method: str,
                                                      limit: float) -> None:
    extras = {"defer_unreachable_guarantees": True} if method in ("exact", "rubick", "rubick-r") else {}
    t0 = time.perf_counter()
    d = optsched.solve(slow_round, method, limit, **extras)
    wall = time.perf_counter() - t0
    assert wall <= limit + MARGIN_S, (method, limit, wall)
    _feasible(slow_round, d)
    if d.status == "partial":
        assert d.message.startswith("partial:") or "partial:" in d.message


def test_a_generous_limit_finishes(slow_round: optsched.RubickRound) -> None:
    d = optsched.solve(slow_round, "rubick", 120.0, defer_unreachable_guarantees=True)
    assert d.status == "heuristic" and "partial" not in d.message


def test_a_tiny_limit_is_partial_and_keeps_running_jobs(slow_round: optsched.RubickRound) -> None:
    d = optsched.solve(slow_round, "rubick", 1e-6, defer_unreachable_guarantees=True)
    assert d.status == "partial" and "not considered" in d.message
    for x in d.jobs:  # nothing was scheduled: running jobs keep their allocation, queued ones wait
        cur = slow_round.current(x.job)
        assert (x.action, x.allocation) == (("keep", cur) if cur is not None else ("wait", None))


def test_clock_start_counts_time_spent_before_the_call(slow_round: optsched.RubickRound) -> None:
    d = optsched.solve(slow_round, "rubick", 5.0, clock_start=time.perf_counter() - 10.0,
                       defer_unreachable_guarantees=True)
    assert d.status == "partial"


@pytest.fixture(scope="module")
def long_queue() -> optsched.RubickRound:
    """One node of 8 GPUs and 20,000 jobs: every step that is linear in jobs (table, admission, sort
    keys, the decision) counts, and nothing can finish in the limit."""
    return generate_rubick_round(1, 8, 20_000, 0)


@pytest.mark.parametrize("method", ["exact", "rubick", "rubick-r", "sia", "synergy", "fifo", "antman"])
def test_the_limit_holds_on_a_long_queue(long_queue: optsched.RubickRound, method: str) -> None:
    extras = {"defer_unreachable_guarantees": True} if method in ("exact", "rubick", "rubick-r") else {}
    t0 = time.perf_counter()
    d = optsched.solve(long_queue, method, 0.5, **extras)
    wall = time.perf_counter() - t0
    assert wall <= 0.5 + MARGIN_S, (method, wall)
    assert d.status == "partial" and "partial:" in d.message
    assert len(d.jobs) == len(long_queue.jobs)
    usage = NodeUsage()
    for x in d.jobs:
        if x.allocation is not None:
            usage.add_all(x.allocation.placement.shares)
    assert usage.overflows(long_queue.free, 1e-6) == []

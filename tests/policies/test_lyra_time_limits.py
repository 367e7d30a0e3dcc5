"""The Lyra kinds hold their time limit on large rounds (issue 26, item 2: ``lyra-allocate``'s ``lyra``
took 1.7 s and ``exact`` 1.3 s at ``--time-limit 1`` on 20,000 jobs, the dynamic program alone 31 s on a
100,000-job round): a property over methods on a generated round of 12,000 jobs (about 9,000 in the
round, 3,800 servers) with a limit far below what the plain dynamic program needed. Each call returns
within 1.2 times its limit plus a margin for a loaded test machine, with a feasible decision whose status
says what happened (``partial`` with a ``partial:`` note when the limit cut a step short)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

import optsched
from optsched.core.decision import Decision
from optsched.policies import methods_of
from optsched.rounds.lyra.jobs import base_workers, max_workers, running_time
from optsched.rounds.lyra_allocate.capacity import available, current_pool

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from time_limits import scaled_round  # noqa: E402

LIMIT_S = 0.2
#: beyond 1.2 x the limit: a loaded test machine (the benchmark's table is the measurement). Late in the full
#: suite's process these calls run 2-3x slower than alone (placement ``exact`` at 0.2 s on 6,000 jobs: 0.45 s
#: there, 0.15-0.17 s alone), so the margin is what keeps the property checked without a flaky suite
MARGIN_S = 0.4


@pytest.fixture(scope="module")
def allocate_round() -> optsched.RoundProblem:
    return scaled_round("lyra-allocate", 12_000, 0)


def _feasible_allocation(p: optsched.RoundProblem, d: Decision) -> None:
    used = {"training": 0, "inference": 0}
    for c in d.payload.counts:
        job = p.job(c.job)
        held = p.workers_of(c.job) - sum(g // p.worker_gpus(job, n) for n, g in p.flexible_of(c.job).items())
        if p.current(c.job) is not None:
            assert c.workers >= base_workers(job) and c.pool == current_pool(p, c.job)
        if c.workers:
            assert base_workers(job) <= c.workers <= max_workers(job)
            used[c.pool] += (c.workers - (held if p.current(c.job) else 0)) * job.gpus_per_worker
    cap = available(p)
    assert used["training"] <= cap["training"] and used["inference"] <= cap["inference"]


def _within_limit(problem: optsched.RoundProblem, method: str) -> Decision:
    """``method``'s decision on ``problem`` at :data:`LIMIT_S`, checked to come within 1.2 x the limit (+ margin)."""
    t0 = time.perf_counter()
    d = optsched.solve(problem, method, LIMIT_S, clock_start=t0)
    wall = time.perf_counter() - t0
    assert wall <= 1.2 * LIMIT_S + MARGIN_S, (method, wall)
    return d


def _honest(d: Decision) -> None:
    if d.status == "partial":
        assert d.message.startswith("partial:")
    assert d.status in (("heuristic", "partial") if d.method != "exact" else
                        ("optimal", "feasible", "heuristic-fallback", "partial"))


@pytest.mark.parametrize("method", methods_of("lyra-allocate"))
def test_lyra_allocate_holds_a_tiny_limit(allocate_round: optsched.RoundProblem, method: str) -> None:
    d = _within_limit(allocate_round, method)
    _feasible_allocation(allocate_round, d)
    _honest(d)


def test_a_dynamic_program_cut_short_says_so_and_answers_as_the_greedy(
        allocate_round: optsched.RoundProblem) -> None:
    """With no time for the knapsack's dynamic program, ``lyra`` gives the AFS-like greedy's flexible
    workers, status ``partial``; with time, the program's (at least the greedy's value)."""
    cut = optsched.solve(allocate_round, "lyra", 0.01)
    afs = optsched.solve(allocate_round, "afs", 30.0)
    full = optsched.solve(allocate_round, "lyra", 30.0)
    assert cut.status == "partial" and "dynamic program" in cut.message and "AFS-like greedy" in cut.message
    assert cut.payload == afs.payload and cut.objective == afs.objective
    assert full.status == "heuristic" and full.objective >= afs.objective - 1e-6


@pytest.fixture(scope="module")
def sim_round() -> optsched.RoundProblem:
    """A ``lyra`` round of 6,000 jobs drawn (about 4,700 in the round, 2,400 servers)."""
    return scaled_round("lyra", 6_000, 0)


@pytest.mark.parametrize("method", ["lyra", "exact", "lyra-loan", "afs", "bfd", "fifo"])
def test_the_lyra_kind_holds_a_tiny_limit(sim_round: optsched.RoundProblem, method: str) -> None:
    """The placement stops at its deadline (the rest of the decision's work kept back): jobs not reached
    wait or keep what they hold, and the decision is ``partial``, saying so per job."""
    d = _within_limit(sim_round, method)
    assert sorted(x.job for x in d.jobs) == sorted(j.name for j in sim_round.jobs)
    usage: dict[str, int] = {}
    for x in d.jobs:
        if x.allocation is not None:
            for n, s in x.allocation.placement.shares:
                usage[n] = usage.get(n, 0) + s.gpus
        elif sim_round.current(x.job) is not None:
            assert x.action == "preempt"
    assert all(g <= sim_round.free(n).gpus for n, g in usage.items())
    if d.status == "partial":
        assert d.message.startswith("partial:")
    if "cut the placement short" in d.message:
        assert d.status == "partial"
        assert any(x.reason.startswith("not considered") for x in d.jobs if x.action == "wait")


def test_the_lyra_kind_with_time_enough_is_unchanged(sim_round: optsched.RoundProblem) -> None:
    d = optsched.solve(sim_round, "lyra", 60.0)
    assert d.status == "heuristic" and "not considered" not in d.message


@pytest.fixture(scope="module")
def placement_round() -> optsched.RoundProblem:
    return scaled_round("placement", 6_000, 0)


@pytest.mark.parametrize("method", methods_of("placement"))
def test_placement_holds_a_tiny_limit(placement_round: optsched.RoundProblem, method: str) -> None:
    from optsched.rounds.placement.evaluate import violations
    d = _within_limit(placement_round, method)
    assert violations(placement_round, d.payload) == []
    _honest(d)


def test_placement_exact_starts_no_model_it_cannot_build_in_time() -> None:
    """Issue 26: on a 2,000-job generated placement round (3,405 jobs, 2,400 servers) ``exact`` built a model of
    3.5 million variables for 130 s at a 1 s limit. The contract now tells the driver what its model costs
    (``model_seconds``: 50 us a (job to place, server) pair) and the driver answers with the warm start."""
    problem = scaled_round("placement", 600, 0)
    t0 = time.perf_counter()
    d = optsched.solve(problem, "exact", 1.0, clock_start=t0)
    assert time.perf_counter() - t0 < 1.2 + MARGIN_S
    assert d.status == "heuristic-fallback" and "to build the model" in d.message


@pytest.mark.parametrize("method", ["lyra", "exact", "lyra-loan", "bfd", "fifo"])
def test_the_lyra_kind_with_no_time_to_allocate_keeps_what_runs(sim_round: optsched.RoundProblem, method: str) -> None:
    """A limit that leaves no time to allocate and place (100,000 jobs at 1 s, here 1 ms spent before the call):
    every running job keeps its allocation (flexible workers too), every queued job waits, not considered; the
    objective is what the flexible workers held are worth (each elastic job's running time on its base workers
    less that on the workers it holds), with no bound."""
    d = optsched.solve(sim_round, method, 0.001, clock_start=time.perf_counter() - 0.01)
    assert d.status == "partial" and d.message.startswith("partial:") and "no time to allocate" in d.message
    assert d.bound is None and (d.heuristic_objective is None) == (method == "exact")
    p = sim_round
    worth = 0.0
    for x in d.jobs:
        cur = p.current(x.job)
        if cur is None:
            assert x.action == "wait" and x.reason.startswith("not considered")
            continue
        assert x.action == "keep" and x.allocation == cur
        job = p.job(x.job)
        held = sum(s.gpus // p.worker_gpus(job, n) for n, s in cur.placement.shares)
        if p.flexible_of(x.job) and held > base_workers(job):
            worth += running_time(job, base_workers(job), p.scaling) - running_time(job, held, p.scaling)
    assert any(p.flexible_of(a.job) for a in p.running)  # the round's running jobs hold flexible workers
    assert d.objective == pytest.approx(worth, rel=1e-9)

"""The ``lyra`` kind's decision (optsched/policies/lyra.py, LyraSimPolicy): its objective is the value of
the flexible workers it places, and its status and bound describe that decision (issue 26: ``exact``
reported ``optimal`` 194,008, the knapsack's value, while 7 jobs' workers were left unplaced)."""

from __future__ import annotations

import pytest

from optsched.policies import PolicyOptions, make_policy
from optsched.rounds.lyra.jobs import base_workers, is_elastic, running_time
from optsched.rounds.lyra_sim import LyraSimRound


def _round(servers: int, training: int, jobs: int, seed: int) -> LyraSimRound:
    from optsched.rounds.lyra_sim import generate  # the round `optsched gen-round --kind lyra` writes
    return generate(servers=servers, training=training, jobs=jobs, seed=seed)


def _placed_value(problem: LyraSimRound, decision) -> float:
    """JCT reduction of the workers each elastic job holds beyond its base (an independent count:
    running time at its base minus at the workers it holds; a running job without flexible workers holds
    all of its workers as base)."""
    total = 0.0
    for d in decision.jobs:
        job = problem.job(d.job)
        if d.allocation is None or not is_elastic(job):
            continue
        held = sum(sh.gpus // problem.worker_gpus(job, n) for n, sh in d.allocation.placement.shares)
        cur = problem.current(d.job)  # a running job with flexible workers re-decides them, as in phase one
        start = base_workers(job) if cur is None or problem.flexible_of(d.job) else problem.workers_of(d.job)
        if held > start:
            total += running_time(job, start, problem.scaling) - running_time(job, held, problem.scaling)
    return total


@pytest.mark.parametrize("method", ["exact", "lyra", "bfd"])
def test_the_objective_is_what_is_placed_and_optimal_means_it(method: str) -> None:
    problem = _round(32, 64, 100, 0)
    d = make_policy(method, PolicyOptions(time_limit=10.0), kind="lyra").decide(problem)
    assert "job(s) with workers left unplaced" in d.message
    assert d.objective == pytest.approx(_placed_value(problem, d), rel=1e-9)
    if d.bound is not None:
        assert d.bound >= d.objective and d.gap is not None and d.gap > 0
    if method == "exact":
        assert d.status == "feasible"  # the knapsack's optimum is not placed whole
        assert "placed" in d.message and "knapsack" in d.message
    else:
        assert d.status == "heuristic" and d.heuristic_objective == d.objective

"""Algorithm 1 and the baselines whose time limit has passed before they start (issue 26, item 2): :func:`_held`
and ``held_when_out_of_time`` give the outcome the engine would give, without building the engine.

The engine's outcome at an expired deadline is its start state: :func:`_privileged_phase` holds every running job
it may keep and times out every privileged job not holding a row that keeps its floor; the sort-by-slope phase
then stops at once. The rounds mix what decides who is held: guaranteed jobs over their tenant's quota (waiting),
jobs on draining nodes (must leave), running jobs with a deadline their current rate misses or meets (privileged
floors), hard constraints.
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
import pytest

from optsched.core.deadline import Deadline
from optsched.core.catalog import get_model
from optsched.heuristics.baselines.antman import antman_round
from optsched.heuristics.baselines.common import BaselineState
from optsched.heuristics.baselines.fifo import schedule_fifo
from optsched.heuristics.baselines.sia import schedule_sia
from optsched.heuristics.baselines.synergy import schedule_synergy
from optsched.heuristics.rubick import TIME_LIMIT_REASON, _algorithm1, _held, _privileged_phase, algorithm1
from optsched.rounds.rubick.admission import NO_GUARANTEES
from optsched.rounds.rubick.baseline_tables import request_table, sia_table, synergy_table
from optsched.rounds.rubick.deadlines import admit_round, privileged
from optsched.rounds.rubick.feasibility import violations
from optsched.rounds.rubick.generate import generate_rubick_round
from optsched.rounds.rubick.problem import RubickRound
from optsched.rounds.rubick.table import build_round_table


def _expired() -> Deadline:
    return Deadline(1e-9, time.perf_counter() - 1.0)


def _round(seed: int) -> RubickRound:
    """A generated round with constraints, some nodes draining, half its quotas and deadlines on some running jobs
    (from hopeless to lax for their current rate)."""
    rng = np.random.default_rng([seed, 26])
    base = generate_rubick_round(12, 8, 60, seed, tenants=3, guaranteed_fraction=0.5, running_fraction=0.6,
                                 constrained=0.3)
    states = {i: "draining" for i in range(len(base.cluster.nodes)) if rng.random() < 0.15}
    nodes = tuple(replace(n, state=states.get(i, n.state)) for i, n in enumerate(base.cluster.nodes))
    now = 1000.0
    jobs = []
    for job in base.jobs:
        cur = base.current(job.name)
        if cur is not None and rng.random() < 0.4:
            left = (job.total_iterations - job.completed_iterations) * get_model(job.model).global_batch
            rate = 100.0 * cur.plan.num_gpus * float(rng.uniform(0.2, 3.0))  # samples/s it would need
            job = replace(job, deadline=now + left / rate)
        jobs.append(job)
    quotas = tuple((tenant, int(q) // 2) for tenant, q in base.quotas)  # running guaranteed jobs over quota wait
    return replace(base, cluster=replace(base.cluster, nodes=nodes), jobs=tuple(jobs), time=now, quotas=quotas)


def _engine_outcome(problem: RubickRound, table: object, admission: object) -> tuple[dict, dict]:
    eng, _, failures, skipped = _privileged_phase(problem, table, admission, repack=False,  # type: ignore[arg-type]
                                                  deadline=_expired())
    assert not failures
    return eng.choices(), {eng.names[j]: TIME_LIMIT_REASON for j in skipped}


@pytest.mark.parametrize("seed", range(12))
def test_held_is_the_engines_outcome_at_an_expired_deadline(seed: int) -> None:
    problem = _round(seed)
    table = build_round_table(problem)
    admission = admit_round(problem, table)
    out = _held(problem, table, admission)
    choices, timed_out = _engine_outcome(problem, table, admission)
    assert out.choices == choices and list(out.choices) == list(choices)  # same choices, same order
    assert out.timed_out == timed_out and out.cut
    assert _algorithm1(problem, table, admission, _expired()) == out


def test_the_rounds_exercise_every_rule_that_keeps_a_running_job_from_being_held() -> None:
    """Not vacuous: across the seeds, running jobs are left out for each reason (quota, draining, short floor)
    and others are held."""
    seen = {"waiting": 0, "draining": 0, "floor": 0, "held": 0}
    for seed in range(12):
        problem = _round(seed)
        table = build_round_table(problem)
        admission = admit_round(problem, table)
        out = _held(problem, table, admission)
        floors = privileged(admission)
        draining = {n.name for n in problem.cluster.nodes if n.state == "draining"}
        for cur in problem.running:
            name = cur.job
            if name in out.choices:
                seen["held"] += 1
            elif name in admission.waiting:
                seen["waiting"] += 1
            elif any(n in draining and s.gpus > 0 for n, s in cur.placement.shares):
                seen["draining"] += 1
            else:
                assert name in floors and name in out.timed_out
                seen["floor"] += 1
    assert all(v > 0 for v in seen.values()), seen


@pytest.mark.parametrize("seed", range(4))
def test_the_held_schedule_is_feasible_for_its_admission(seed: int) -> None:
    problem = replace(_round(seed), jobs=tuple(replace(j, priority=0) for j in _round(seed).jobs))  # see _plain
    table = build_round_table(problem)
    schedule = algorithm1(problem, table, deadline=_expired())
    assert not schedule.complete and "time limit" in schedule.message
    assert violations(problem, table, schedule.choices, schedule.admission) == []


def _plain(problem: RubickRound) -> RubickRound:
    """``problem`` without deadlines (a baseline out of time starts nothing, where before it started the admitted
    deadline jobs first: held_when_out_of_time) and priorities (the priority rule is made to hold after every
    method: policies/rubick.py, _prioritised)."""
    return replace(problem, jobs=tuple(replace(j, deadline=None, priority=0) for j in problem.jobs))


def _baseline_state_holding(problem: RubickRound, table: object) -> dict:
    st = BaselineState(problem, table)  # type: ignore[arg-type]
    st.hold_running()
    return st.choices()


@pytest.mark.parametrize("seed", range(6))
def test_a_baseline_out_of_time_holds_what_its_state_would_hold(seed: int) -> None:
    problem = _plain(_round(seed))
    request = request_table(problem)
    expected = _baseline_state_holding(problem, request)
    assert expected  # running jobs are held (not those on draining nodes: the rounds have some, test above)
    for backfill in (False, True):
        assert schedule_fifo(problem, request, backfill=backfill, deadline=_expired()) == expected
    for bt, schedule in ((synergy_table(problem), lambda bt, d: schedule_synergy(problem, bt.table, options=bt.options,
                                                                                  deadline=d)),
                         (sia_table(problem), lambda bt, d: schedule_sia(problem, bt.table, ladders=bt.options,
                                                                         deadline=d))):
        got = schedule(bt, _expired())
        assert got == _baseline_state_holding(problem, bt.table)
        assert violations(problem, bt.table, got, NO_GUARANTEES) == []


@pytest.mark.parametrize("seed", range(6))
def test_antman_out_of_time_holds_and_protects_the_running_guaranteed_jobs_it_would(seed: int) -> None:
    problem = _plain(_round(seed))
    table = request_table(problem)
    cut = antman_round(problem, table, deadline=_expired())
    full = antman_round(problem, table)
    assert dict(cut.choices) == _baseline_state_holding(problem, table)
    running = {a.job for a in problem.running}
    assert cut.admission.protected == {k: v for k, v in full.admission.protected.items() if k in running}
    assert cut.admission.gpu_type == {k: v for k, v in full.admission.gpu_type.items() if k in running}
    assert not cut.admission.waiting and not cut.preempted

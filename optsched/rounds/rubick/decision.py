"""Decision assembly of a Rubick round: from choices (job -> table row and nodes) to a
:class:`~optsched.core.decision.Decision` with a :class:`~optsched.core.decision.JobAllocations`
payload, and back (:func:`choices_of`). The objective is recomputed here, so every method is scored
by the same function (:func:`~optsched.rounds.rubick.objective.objective`).

Per job: ``start`` (queued, now runs), ``keep`` (running, kept exactly), ``reconfigure`` (running,
another plan or placement), ``preempt`` (running, gets nothing) or ``wait`` (queued, gets nothing);
``protected`` says whether its performance guarantee was enforced (the admission's protected jobs).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Mapping

from optsched.core.allocation import Allocation
from optsched.core.decision import Decision, JobAllocations, JobDecision, relative_gap
from optsched.core.errors import ValidationError
from optsched.perf.coefficients import CoefficientTable
from optsched.rounds.rubick.admission import Admission, admit
from optsched.rounds.rubick.choice import Choice, is_kept, placement_of
from optsched.rounds.rubick.objective import objective
from optsched.rounds.rubick.problem import RubickRound


@dataclass(frozen=True)
class Schedule:
    """What a Rubick-kind heuristic returns: the ``choices`` of the jobs that run, the ``admission``
    they satisfy (who is protected, who waits), a ``message`` for the decision, and whether the
    heuristic finished (``complete``; False when its time limit cut it short)."""

    choices: Mapping[str, Choice]
    admission: Admission
    message: str = field(default="")
    complete: bool = True


def to_decision(problem: RubickRound, table: CoefficientTable, choices: Mapping[str, Choice], *, method: str,
                status: str, bound: float | None = None, solve_seconds: float = 0.0,
                heuristic_objective: float | None = None, warm_start: bool = False, message: str = "",
                admission: Admission | None = None) -> Decision:
    """A :class:`Decision` from ``choices`` (module docstring); ``admission`` defaults to
    :func:`~optsched.rounds.rubick.admission.admit`."""
    admission = admission or admit(problem, table)
    obj = objective(problem, table, choices)
    jobs: list[JobDecision] = []
    for j, name in enumerate(table.jobs):
        choice = choices.get(name)
        running = table.current_row[j] >= 0
        protected = name in admission.protected
        if choice is None:
            jobs.append(JobDecision(name, None, 0.0, 0.0, "preempt" if running else "wait", protected))
            continue
        alloc = Allocation(name, table.plans[choice.row], placement_of(problem, table, j, choice))
        action = "start" if not running else ("keep" if is_kept(problem, table, j, choice) else "reconfigure")
        thr = float(table.throughput[choice.row])
        jobs.append(JobDecision(name, alloc, thr, thr / float(table.reference_throughput[j]), action, protected))
    return Decision(problem.kind, method, status, obj, JobAllocations(tuple(jobs)), bound, relative_gap(bound, obj),
                    solve_seconds, heuristic_objective, warm_start, message)


def heuristic_decision(problem: RubickRound, table: CoefficientTable, schedule: Schedule, *, method: str,
                       started: float) -> Decision:
    """The :class:`Decision` of a heuristic's ``schedule`` (status ``heuristic``, or ``partial`` when the
    schedule is incomplete; its own objective as ``heuristic_objective``), timed from ``started`` (a
    ``time.perf_counter()`` reading)."""
    return to_decision(problem, table, schedule.choices, method=method,
                       status="heuristic" if schedule.complete else "partial",
                       solve_seconds=time.perf_counter() - started,
                       heuristic_objective=objective(problem, table, schedule.choices), message=schedule.message,
                       admission=schedule.admission)


def choices_of(decision: Decision, table: CoefficientTable, problem: RubickRound) -> dict[str, Choice]:
    """Recover table choices from a decision (the row with the decision's plan, shape, GPU type and
    CPUs; the current row for kept jobs). Raises ``ValidationError`` when a job's allocation matches
    no row."""
    out: dict[str, Choice] = {}
    for d in decision.jobs:
        if d.allocation is None:
            continue
        j = table.index_of(d.job)
        a = d.allocation
        parts = tuple((n, s.gpus) for n, s in a.placement.shares if s.gpus > 0)
        rows = table.configs_of(d.job)
        gtype = problem.cluster.node(parts[0][0]).gpu_type
        cand = [int(k) for k in rows if table.plans[k] == a.plan and table.gpus_per_node[k] == a.placement.gpus_per_node
                and table.gpu_type[k] == gtype]
        if d.action == "keep" and int(table.current_row[j]) in cand:
            out[d.job] = Choice(int(table.current_row[j]), parts)
            continue
        cand = [k for k in cand if table.cpus[k] == a.placement.total_cpus] or cand
        if not cand:
            raise ValidationError(f"decision of job {d.job!r}: plan {a.plan.label} on {a.placement.gpus_per_node} "
                                  "matches no configuration of the table")
        out[d.job] = Choice(max(cand, key=lambda k: table.throughput[k]), parts)
    return out


__all__ = ["Schedule", "choices_of", "heuristic_decision", "to_decision"]

"""Decision assembly of a Rubick round: from choices (job -> table row and nodes) to a
:class:`~optsched.core.decision.Decision` with a :class:`~optsched.core.decision.JobAllocations`
payload, and back (:func:`choices_of`). The objective is recomputed here, so every method is scored
by the same function (:func:`~optsched.rounds.rubick.objective.objective`).

Per job: ``start`` (queued, now runs), ``keep`` (running, kept exactly), ``trim`` (running, the same
plan and GPUs on the same nodes with other CPUs or memory: its limits change in place,
:func:`~optsched.rounds.rubick.choice.is_trim`), ``reconfigure`` (running, another plan or placement),
``preempt`` (running, gets nothing) or ``wait`` (queued, gets nothing); ``protected`` says whether its
performance guarantee was enforced (the admission's protected jobs); ``penalty`` is what the action
costs the job in the objective: its own trim, reconfiguration or preemption penalty
(:meth:`~optsched.rounds.rubick.problem.RubickRound.penalties`: the round's ``trim_penalty``,
``reconfig_penalty`` or ``preempt_penalty`` times its ``weight``, or derived from its restart
seconds), else 0, plus its topology cost when it runs with a preferred topology rule
(:func:`~optsched.rounds.rubick.objective.topology_cost`), so that the objective is the sum of
``weight x normalised - penalty`` over the jobs; ``reason`` (:func:`wait_reason`) says why a job that does
not run does not. The round's skipped jobs (``on_invalid_job: "skip"``) are the decision's ``skipped`` list, not per-job entries.
The jobs whose deadline the decision does not promise and the running jobs whose deadline has passed are
its ``deadline_at_risk`` and ``deadline_missed`` lists (:func:`~optsched.rounds.rubick.deadlines.reports`).

**No reconfiguration without a change that matters** (issue 16, item 5; the paper is silent). Before a
decision is assembled, :func:`keep_unchanged` gives a running job its current configuration back when its
choice runs the same plan on the same per-node GPUs but with another row (other CPUs or memory) that is
no faster, as long as the nodes still hold everything: a CPU or memory trim that frees nothing another job
uses, or a row differing only in memory rounding, would cost the trim penalty for nothing. A trim that
another job needs stays, as action ``trim`` with the round's ``trim_penalty`` (an in-place update of the
job's CPU and memory limits, no restart). This only raises the objective and keeps every decision
feasible; every method's decision passes through it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Mapping

from optsched.core.allocation import Allocation
from optsched.core.decision import Decision, JobAllocations, JobDecision, relative_gap
from optsched.core.errors import ValidationError
from optsched.perf.coefficients import CoefficientTable
from optsched.rounds.rubick.admission import NOT_CONSIDERED, Admission
from optsched.rounds.rubick.choice import Choice, change_penalty, is_kept, is_trim, placement_of
from optsched.rounds.rubick.deadlines import admit_round, reports
from optsched.rounds.rubick.constraints import new_work_mask, requires_topology
from optsched.rounds.rubick.feasibility import CAPACITY_TOL
from optsched.rounds.rubick.objective import objective, topology_cost
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
    #: why jobs that do not run do not, where the heuristic knows better than :func:`wait_reason`
    reasons: Mapping[str, str] = field(default_factory=dict)


def keep_unchanged(problem: RubickRound, table: CoefficientTable, choices: Mapping[str, Choice]
                   ) -> Mapping[str, Choice]:
    """``choices`` with running jobs restored to their current row where nothing that matters changes
    (module docstring): same plan, same per-node GPUs, no throughput lost, and the current shares fit the
    nodes next to every other choice. Returns ``choices`` itself when nothing is restored."""
    candidates = []
    for name, choice in choices.items():
        j = table.job_position.get(name)
        if j is None:
            continue
        cur_row = int(table.current_row[j])
        if cur_row < 0 or choice.row == cur_row or is_kept(problem, table, j, choice):
            continue
        cur = problem.current(name)
        assert cur is not None
        if (table.plans[choice.row] == cur.plan and table.throughput[cur_row] >= table.throughput[choice.row]
                and sorted(choice.parts) == sorted(cur.placement.gpu_parts)):
            candidates.append((name, j, choice, cur_row))
    if not candidates:
        return choices
    used: dict[str, list[float]] = {}  # CPUs and GiB held per node by all the choices
    for name, choice in choices.items():
        for node, share in placement_of(problem, table, table.index_of(name), choice).shares:
            u = used.setdefault(node, [0.0, 0.0])
            u[0] += share.cpus
            u[1] += share.mem_gib
    out = dict(choices)
    for name, j, choice, cur_row in candidates:
        kept = Choice(cur_row, choice.parts)
        delta: dict[str, list[float]] = {}
        for sign, c in ((-1, choice), (1, kept)):
            for node, share in placement_of(problem, table, j, c).shares:
                d = delta.setdefault(node, [0.0, 0.0])
                d[0] += sign * share.cpus
                d[1] += sign * share.mem_gib
        if any(used[node][0] + d[0] > problem.free(node).cpus + CAPACITY_TOL
               or used[node][1] + d[1] > problem.free(node).mem_gib + CAPACITY_TOL for node, d in delta.items()):
            continue  # another job uses what the trim freed
        for node, d in delta.items():
            used[node][0] += d[0]
            used[node][1] += d[1]
        out[name] = kept
    return out


def to_decision(problem: RubickRound, table: CoefficientTable, choices: Mapping[str, Choice], *, method: str,
                status: str, bound: float | None = None, solve_seconds: float = 0.0,
                heuristic_objective: float | None = None, warm_start: bool = False, message: str = "",
                admission: Admission | None = None, reasons: Mapping[str, str] | None = None) -> Decision:
    """A :class:`Decision` from ``choices`` (module docstring); ``admission`` defaults to
    :func:`~optsched.rounds.rubick.deadlines.admit_round`; ``reasons`` (job -> why it does not run) override
    :func:`wait_reason` for the jobs they name that do not run (e.g. evicted for a higher priority)."""
    admission = admission or admit_round(problem, table)
    choices = keep_unchanged(problem, table, choices)
    obj = objective(problem, table, choices)
    jobs: list[JobDecision] = []
    current_rows = table.current_row.tolist()
    reasons = reasons or {}
    # one pass, the cheap cases first (a 100,000-job round within a 1 s time limit, issue 26): a job that does
    # not run needs only its reason, and a kept one is its current allocation as it stands
    for j, name in enumerate(table.jobs):
        choice = choices.get(name)
        running = current_rows[j] >= 0
        protected = name in admission.protected
        if choice is None:
            why = reasons.get(name) or wait_reason(problem, table, admission, j, method)
            jobs.append(JobDecision.assembled(name, None, 0.0, 0.0, "preempt" if running else "wait", protected, why,
                                              problem.penalties(name).preempt if running else 0.0))
            continue
        kept = running and is_kept(problem, table, j, choice)
        if kept:
            alloc = problem.current(name)
            action, penalty = "keep", 0.0
        else:
            alloc = Allocation(name, table.plans[choice.row], placement_of(problem, table, j, choice))
            action = "start" if not running else "trim" if is_trim(problem, table, j, choice) else "reconfigure"
            penalty = change_penalty(problem, table, j, choice)
        thr = float(table.throughput[choice.row])
        jobs.append(JobDecision.assembled(name, alloc, thr, thr / float(table.reference_throughput[j]), action,
                                          protected, penalty=penalty + topology_cost(problem, problem.job(name),
                                                                                     (n for n, _ in choice.parts))))
    runs = {d.job: d.throughput for d in jobs if d.allocation is not None}
    at_risk, missed = reports(problem, table, admission, runs)
    return Decision(problem.kind, method, status, obj,
                    JobAllocations(tuple(jobs), deadline_at_risk=at_risk, deadline_missed=missed), bound,
                    relative_gap(bound, obj), solve_seconds, heuristic_objective, warm_start, message, problem.skipped)


def wait_reason(problem: RubickRound, table: CoefficientTable, admission: Admission, j: int, method: str) -> str:
    """Why job index ``j`` does not run: the admission's reason for a guaranteed job it keeps waiting
    (tenant quota 0 or exhausted, guarantee deferred as unreachable, no configuration reaching its
    request), no configuration considered when the time limit cut the table short, no domain of the
    level its topology rule requires with as many GPUs as its smallest configuration, else no room (the
    free resources went to other jobs; for a guaranteed job, also that ``method`` protects nobody when
    its admission is empty)."""
    name = table.jobs[j]
    if name in admission.waiting:
        return admission.waiting[name]
    if table.row_counts[j] == 0:
        return NOT_CONSIDERED
    job = problem.job(name)
    level = requires_topology(job)
    if level is not None:
        need = int(table.gpus[table.rows_of(j)].min())
        names = [n.name for n in problem.cluster.nodes]
        room: dict[str, int] = {}
        for node, ok in zip(names, new_work_mask(problem, job, names)):
            if ok:
                d = problem.cluster.node(node).domain(level)
                room[d] = room.get(d, 0) + problem.free(node).gpus  # type: ignore[index]
        most = max(room.values(), default=0)
        if most < need:
            return (f"no room: its topology rule requires one {level} domain, and none has {need} GPUs (the fewest of "
                    f"its configurations) on the nodes it may use (at most {most})")
    if job.guaranteed and not admission.protected and not admission.waiting:
        return f"no room: the free resources went to other jobs ({method} enforces no performance guarantees)"
    return "no room: the free resources went to other jobs this round"


def heuristic_decision(problem: RubickRound, table: CoefficientTable, schedule: Schedule, *, method: str,
                       started: float) -> Decision:
    """The :class:`Decision` of a heuristic's ``schedule`` (status ``heuristic``, or ``partial`` when the
    schedule is incomplete; its own objective as ``heuristic_objective``), timed from ``started`` (a
    ``time.perf_counter()`` reading)."""
    decision = to_decision(problem, table, schedule.choices, method=method,
                           status="heuristic" if schedule.complete else "partial",
                           solve_seconds=time.perf_counter() - started, message=schedule.message,
                           admission=schedule.admission, reasons=schedule.reasons)
    return replace(decision, heuristic_objective=decision.objective)


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
        parts = a.placement.gpu_parts
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


__all__ = ["Schedule", "choices_of", "heuristic_decision", "keep_unchanged", "to_decision", "wait_reason"]

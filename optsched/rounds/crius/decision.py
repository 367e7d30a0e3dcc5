"""Decision assembly of a Crius round: from choices (job -> table row and nodes) to a
:class:`~optsched.core.decision.Decision` with a :class:`~optsched.rounds.crius.payload.CriusAllocations`
payload. The objective is recomputed here (:func:`~optsched.rounds.crius.objective.objective`), so
every method is scored by the same function.

Per job: ``start`` (queued, now runs), ``keep`` (running, kept exactly), ``reconfigure`` (running,
rescaled), ``preempt`` (running, suspended) or ``wait``; ``protected`` marks the job opportunistic
execution protects and the jobs guaranteed their deadlines. Each running job's Cell is described by
the stage GPU counts of its partition (Sec. 4.2), the per-stage splits Cell-guided tuning chooses for
it (Sec. 5.2, memoised per Cell) and the estimates (:class:`~optsched.rounds.crius.payload.CellInfo`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Collection, Mapping

from optsched.core.allocation import Allocation
from optsched.core.decision import Decision, JobDecision, relative_gap
from optsched.core.errors import ValidationError
from optsched.perf.crius.stages import determine_stages
from optsched.perf.crius.tuning import cell_guided_tuning
from optsched.rounds.crius.admission import CriusAdmission, admit
from optsched.rounds.crius.choice import Choice, is_kept, placement_of
from optsched.rounds.crius.objective import objective
from optsched.rounds.crius.payload import CellInfo, CriusAllocations
from optsched.rounds.crius.problem import CriusRound
from optsched.rounds.crius.table import CriusTable


@dataclass(frozen=True)
class Schedule:
    """What a Crius-kind heuristic returns: the ``choices`` of the jobs that run, the ``admission`` they
    satisfy, a ``message``, whether the heuristic finished (``complete``) and the jobs the table left
    out when its time ran out (``left_out``)."""

    choices: Mapping[str, Choice]
    admission: CriusAdmission
    message: str = field(default="")
    complete: bool = True
    left_out: tuple[str, ...] = ()


#: the reason of a job that waits because none of its Cells passes the memory filter (Sec. 4.2)
NO_CELL = "no Cell passes the memory filter on this cluster"
#: the reason of a job that waits (or is preempted) because the round's choice gave the free GPUs to others
NO_ROOM = "no room: the free GPUs went to other jobs this round"


def idle_reason(table: CriusTable, admission: CriusAdmission, j: int, left_out: Collection[str] = ()) -> str:
    """Why job index ``j`` gets nothing: left out of the table (time limit), dropped (deadline objective),
    no Cell at all (:data:`NO_CELL`: such a job does not fail the round, it waits every round), else
    :data:`NO_ROOM` (the round's choice ran other jobs)."""
    name = table.jobs[j]
    if name in left_out:
        return "not considered: the time limit ran out while the round's table was built"
    if name in admission.dropped:
        return "dropped: no Cell meets its deadline"
    if table.rows_of(j).size == 0:
        return NO_CELL
    return NO_ROOM


def cell_info(problem: CriusRound, table: CriusTable, j: int, row: int) -> CellInfo:
    """The :class:`CellInfo` of job index ``j`` on ``row``."""
    est = table.estimator
    name = table.jobs[j]
    graph = problem.graph(problem.jobs[j].model)
    gpus, stages = int(table.gpus[row]), int(table.stages[row])
    cell = est.cell(graph, table.gpu_type[row], gpus, stages, table.coefficients.gpus_per_node[row])
    tuned = cell_guided_tuning(est, cell)
    estimate = est.estimate(cell)
    part = determine_stages(graph, gpus, stages)
    plan = tuned.plan
    return CellInfo(name, table.gpu_type[row], gpus, stages, part.gpus, () if plan is None else plan.splits,
                    () if plan is None else plan.remat, float(estimate.iteration_time_s) if estimate.feasible else None,
                    float(tuned.iteration_time_s) if plan is not None else None)


def to_decision(problem: CriusRound, table: CriusTable, choices: Mapping[str, Choice], *, method: str, status: str,
                bound: float | None = None, solve_seconds: float = 0.0, heuristic_objective: float | None = None,
                warm_start: bool = False, message: str = "", admission: CriusAdmission | None = None,
                left_out: Collection[str] = ()) -> Decision:
    """A :class:`Decision` from ``choices`` (module docstring); a job that gets nothing carries
    :func:`idle_reason` (``left_out``: the jobs the table left out)."""
    admission = admission or admit(problem, table)
    left_out = frozenset(left_out)  # tested once per idle job: a tuple made this quadratic (issue 26)
    obj = objective(problem, table, choices)
    jobs: list[JobDecision] = []
    cells: list[CellInfo] = []
    marked = admission.guaranteed | ({admission.protected} if admission.protected else set())
    for j, name in enumerate(table.jobs):
        choice = choices.get(name)
        running = table.current_row[j] >= 0
        if choice is None:
            jobs.append(JobDecision(name, None, 0.0, 0.0, "preempt" if running else "wait", name in marked,
                                    idle_reason(table, admission, j, left_out)))
            continue
        row = choice.row
        alloc = Allocation(name, table.coefficients.plans[row], placement_of(problem, table, j, choice))
        action = "start" if not running else ("keep" if is_kept(problem, table, j, choice) else "reconfigure")
        jobs.append(JobDecision(name, alloc, float(table.throughput[row]), float(table.weight[row]), action,
                                name in marked))
        cells.append(cell_info(problem, table, j, row))
    payload = CriusAllocations(tuple(jobs), tuple(cells), tuple(sorted(admission.dropped)))
    return Decision(problem.kind, method, status, obj, payload, bound, relative_gap(bound, obj), solve_seconds,
                    heuristic_objective, warm_start, message)


def heuristic_decision(problem: CriusRound, table: CriusTable, schedule: Schedule, *, method: str,
                       started: float) -> Decision:
    """The :class:`Decision` of a heuristic's ``schedule`` (status ``heuristic``, ``partial`` when it is
    incomplete), timed from ``started`` (a ``time.perf_counter()`` reading)."""
    return to_decision(problem, table, schedule.choices, method=method,
                       status="heuristic" if schedule.complete else "partial",
                       solve_seconds=time.perf_counter() - started,
                       heuristic_objective=objective(problem, table, schedule.choices), message=schedule.message,
                       admission=schedule.admission, left_out=schedule.left_out)


def choices_of(decision: Decision, table: CriusTable, problem: CriusRound) -> dict[str, Choice]:
    """Recover table choices from a decision: the current row for kept jobs, else the row of the
    allocation's GPU type, plan (GPUs and stages) and shape (a candidate or best-stage row first).
    ``ValidationError`` when an allocation matches no row."""
    out: dict[str, Choice] = {}
    for d in decision.jobs:
        if d.allocation is None:
            continue
        j = table.index_of(d.job)
        a = d.allocation
        parts = a.placement.gpu_parts
        if d.action == "keep" and table.current_row[j] >= 0:
            out[d.job] = Choice(int(table.current_row[j]), parts)
            continue
        gtype = problem.cluster.node(parts[0][0]).gpu_type
        cand = [int(k) for k in table.rows_of(j) if k != table.current_row[j] and table.gpu_type[k] == gtype
                and table.coefficients.plans[k] == a.plan
                and table.coefficients.gpus_per_node[k] == a.placement.gpus_per_node]
        if not cand:
            raise ValidationError(f"decision of job {d.job!r}: {a.plan.label} on {a.placement.gpus_per_node} {gtype} "
                                  "matches no Cell of the table")
        out[d.job] = Choice(max(cand, key=lambda k: (bool(table.candidate[k]), bool(table.best_stages[k]))), parts)
    return out


__all__ = ["NO_CELL", "NO_ROOM", "Schedule", "cell_info", "choices_of", "heuristic_decision", "idle_reason", "to_decision"]

"""Deadlines in Rubick rounds (issue "A round a real cluster scheduler can state", item 3), in the manner
of ElasticFlow's minimum satisfactory share.

ElasticFlow (Gu et al., "ElasticFlow: An Elastic Serverless Training Platform for Distributed Deep
Learning", ASPLOS'23) lets a user give a job a deadline instead of a GPU count: it computes the job's
*Minimum Satisfactory Share*, the least resources with which the job still finishes by its deadline
("to capture the resource usage of training jobs to meet deadlines"), and "performs admission control
based on it"; resources beyond the admitted jobs' shares go where they gain most (quoted from the
paper's abstract; the paper itself is not among the sources in ``../shared/papers``, where Crius Sec.
8.1 describes it as a baseline). Crius Sec. 8.5 extends Crius the same way ("strict deadline guarantees
for each scheduled job", jobs that cannot finish in time are dropped). ElasticFlow plans shares over
future time slots; a round here is one decision that the next round revisits, and it drops nobody. So,
per round:

* **Units.** A job with a deadline *needs* ``r = remaining_iterations x global_batch / (deadline - time)``
  samples/s, the throughput at which it finishes exactly at its deadline if it holds it from the round's
  ``time`` on. The coefficient table is in samples/s (``global_batch`` samples per iteration, the table's
  unit, :mod:`optsched.rounds.rubick.table`), so ``global_batch`` turns iterations into samples: the
  model's, as the round knows it (:meth:`~optsched.rounds.rubick.problem.RubickRound.samples_per_iteration`;
  a round that knows no global batch of a deadline job's model refuses the job).
* **Which jobs.** A job with ``deadline > time`` and iterations left. A *queued* job whose deadline is at
  or before ``time`` is invalid: the round refuses it naming the job (a
  :class:`~optsched.core.skip.JobError`: ``on_invalid_job: "skip"`` leaves it out). A *running* one is
  not an error: it is listed in the decision's ``deadline_missed`` and scheduled as a job without a
  deadline. A job with no iterations left needs nothing and is scheduled as a job without a deadline.
* **Rows meeting it**: the rows of the job in the method's table (for a baseline, the rows it may use)
  with throughput >= ``r`` (relative tolerance :data:`RATE_RTOL`); for a guaranteed job protected by
  quota admission, rows that also reach its guarantee. Its **minimum share** is the meeting row with the
  fewest GPUs (on several GPU types: the type where it needs fewest, then the one with most room, then
  the name).
* **Admission** (:func:`admit_deadlines`; ElasticFlow's admission control, earliest deadline first).
  Capacity is counted in GPUs per GPU type: the GPUs a job may get this round (free GPUs of ``ready``
  nodes, and on a ``cordoned`` node those running jobs hold there; none on ``draining`` nodes). The
  guaranteed jobs protected by quota admission (:func:`~optsched.rounds.rubick.admission.admit`) come first:
  each holds its minimum demand on the type of a fewest-GPU row reaching its guarantee (the type with
  most room left). Then the deadline jobs, running ones first, each group by deadline, submission time
  and name: a job is *admitted* when some row meets its need and its minimum share fits on its type
  beside everything held so far (a protected job with a deadline trades its minimum demand for its
  share); otherwise it is *at risk*, with the reason (no row is fast enough; the share does not fit;
  it waits for quota; no row was built in the time limit). A guaranteed job waiting for quota does not
  run, so its deadline is at risk. Admission counts GPUs, not node shapes, CPUs or memory.
* **What admission binds**, in every method, as a protected job's guarantee does (:func:`floor_ok` is
  the one rule; :func:`privileged` the jobs it binds): an admitted job runs on a row meeting its need.
  The exact model allows it only those rows and makes it run; Algorithm 1 and its ablations schedule it
  with the privileged jobs (lines 2-3: forced, shrunk only to rows that still meet it, never preempted
  for others); the baselines (:func:`~optsched.heuristics.baselines.common.run_deadline_jobs`) start with
  it: a running one keeps its configuration when that meets its need, else it and every queued
  admitted job get their cheapest meeting row, preempting running jobs the baseline may preempt for it
  (latest submitted first, the unneeded ones restored): in FIFO, Synergy and Sia, which protect nobody,
  any running job without an admitted deadline; in AntMan only best-effort ones, and there a guaranteed
  job takes an admitted deadline job's room when nothing else makes room. FIFO, Synergy and Sia admit
  deadline jobs beside nobody's guarantee (they protect none), AntMan beside the quota admission of its
  table.
  At-risk and missed jobs are scheduled as best-effort jobs by every method.
* **Placement.** Admission counts GPUs; node shapes may still leave an admitted job without a meeting
  row that fits. Deadlines never make a round infeasible: such a job is *demoted* to at risk with the
  reason and scheduled as best-effort (Algorithm 1: the jobs it cannot place are demoted and the round
  is run again; when a protected guaranteed job fails and the deadline jobs are in its way, they are
  demoted latest deadline first until it fits, before the guarantee's own rules, infeasible or
  ``defer_unreachable_guarantees``, apply; the exact method takes the heuristic's demotions; a baseline's
  admitted job left below its need is demoted after it ran, :func:`settle`). A protected job deferred
  for its guarantee does not run: its deadline is at risk too.
* **Reports** (:func:`reports`; the decision's ``deadline_at_risk`` and ``deadline_missed``). Per job at
  risk: its deadline, the reason, the samples/s it needs, ``best_finish`` = time + remaining samples /
  the best throughput of any of its rows in the method's table (the earliest it could finish on its
  fastest configuration from now; None without rows) and ``planned_finish`` = the same at the
  throughput the decision gives it (None when it does not run). A job with a deadline in neither list
  was admitted and runs at a throughput meeting it.
* **Partitioned solve** (:mod:`optsched.rounds.rubick.partition`): admission is done once on the whole
  round; an admitted job goes to a part with room for its minimum share (else the round is solved
  whole), at-risk and missed jobs go to the parts without their deadlines, and the merged decision
  reports the whole round's at-risk and missed jobs and any admitted job a part could not keep.

Cost: one pass over the rows of the deadline jobs (numpy per job), O(deadline jobs x GPU types).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping, Sequence

import numpy as np

from optsched.core.decision import DeadlineAtRisk, DeadlineMissed
from optsched.core.job import Job
from optsched.perf.coefficients import CoefficientTable
from optsched.rounds.rubick.admission import Admission, admit, reaches_guarantee
from optsched.rounds.rubick.choice import Choice, check_round_table
from optsched.rounds.rubick.deadline_admission import NO_DEADLINES, DeadlineAdmission, MinShare
from optsched.rounds.rubick.problem import RubickRound

#: relative tolerance of "meets the throughput its deadline needs"
RATE_RTOL = 1e-9

#: rows a method may give each job (a baseline's options); None: every row of the table
RowOptions = Mapping[str, Sequence[int]] | None


def remaining_samples(problem: RubickRound, job: Job) -> float:
    """The samples ``job`` has left: remaining iterations x its model's global batch (module docstring)."""
    batch = problem.samples_per_iteration(job)
    assert batch is not None, "the round refuses a deadline job without a known global batch"
    return job.remaining_iterations * batch


def needed_rate(problem: RubickRound, job: Job) -> float:
    """Samples/s ``job`` needs to finish by its deadline from the round's time on (module docstring)."""
    assert job.deadline is not None and job.deadline > problem.time
    return remaining_samples(problem, job) / (job.deadline - problem.time)


def usable_gpus(problem: RubickRound, by_node: bool = False) -> dict[str, int]:
    """GPUs per GPU type (``by_node``: per node) the round may give jobs (module docstring, "Admission"):
    free GPUs of ready nodes, on a cordoned node the GPUs running jobs hold there, none on a draining node."""
    held: dict[str, int] = {}
    for a in problem.running:
        for node, share in a.placement.shares:
            held[node] = held.get(node, 0) + share.gpus
    out: dict[str, int] = {}
    for n in problem.cluster.nodes:
        free = problem.free(n.name).gpus
        gpus = free if n.state == "ready" else min(free, held.get(n.name, 0)) if n.state == "cordoned" else 0
        key = n.name if by_node else n.gpu_type
        out[key] = out.get(key, 0) + gpus
    return out


def _rows(table: CoefficientTable, options: RowOptions, j: int) -> np.ndarray:
    name = table.jobs[j]
    if options is not None and name in options:
        return np.asarray(sorted({int(r) for r in options[name]}), dtype=np.int64)
    return table.rows_of(j)


def _fewest_by_type(table: CoefficientTable, rows: np.ndarray) -> dict[str, int]:
    """GPU type -> fewest GPUs of a row of ``rows`` on it."""
    out: dict[str, int] = {}
    for r in rows.tolist():
        t = table.gpu_type[r]
        g = int(table.gpus[r])
        if g < out.get(t, g + 1):
            out[t] = g
    return out


def _pick(fewest: Mapping[str, int], room: Mapping[str, int], fit: bool) -> MinShare | None:
    """The share of :func:`_fewest_by_type` to hold: fewest GPUs, then most room left, then type name;
    with ``fit`` only a share that fits ``room``."""
    cands = [(g, -room.get(t, 0), t) for t, g in fewest.items() if not fit or g <= room.get(t, 0)]
    if not cands:
        return None
    g, _, t = min(cands)
    return MinShare(t, g)


def _order_key(problem: RubickRound, job: Job) -> tuple:
    return problem.current(job.name) is None, job.deadline, job.submit_time, job.name


def admit_deadlines(problem: RubickRound, table: CoefficientTable, admission: Admission,
                    options: RowOptions = None) -> DeadlineAdmission:
    """The admission of ``problem``'s jobs with deadlines beside ``admission``'s protected guaranteed jobs,
    on ``table`` (the rows of ``options`` where given; module docstring, "Admission")."""
    check_round_table(problem, table, "deadline admission")
    with_deadline = [job for job in problem.jobs if job.deadline is not None]
    if not with_deadline:
        return NO_DEADLINES
    missed = tuple(job.name for job in with_deadline if problem.deadline_passed(job))
    needs = {job.name: needed_rate(problem, job) for job in with_deadline
             if not problem.deadline_passed(job) and job.remaining_iterations > 0}
    if not needs:
        return DeadlineAdmission({}, {}, {}, missed)
    room = usable_gpus(problem)
    held: dict[str, MinShare] = {}
    for name in admission.protected:  # the guaranteed jobs' minimum demands first
        rows = _rows(table, options, table.index_of(name))
        share = _pick(_fewest_by_type(table, rows[reaches_guarantee(table, rows)]), room, fit=False) \
            if rows.size else None
        if share is not None:
            held[name] = share
            room[share.gpu_type] = room.get(share.gpu_type, 0) - share.gpus
    admitted: dict[str, MinShare] = {}
    at_risk: dict[str, str] = {}
    for job in sorted((problem.job(n) for n in needs), key=lambda job: _order_key(problem, job)):
        name, need = job.name, needs[job.name]
        if name in admission.waiting:
            at_risk[name] = f"it does not run this round: {admission.waiting[name]}"
            continue
        rows = _rows(table, options, table.index_of(name))
        if rows.size == 0:
            at_risk[name] = "no configuration of it was considered (the time limit cut the table short)"
            continue
        ok = table.throughput[rows] >= need * (1.0 - RATE_RTOL)
        if name in admission.protected:
            ok &= reaches_guarantee(table, rows)
        if not ok.any():
            also = " and reaches its performance guarantee" if name in admission.protected else ""
            at_risk[name] = (f"no configuration meets the {need:.4g} samples/s its deadline needs{also} (the fastest "
                             f"runs {float(table.throughput[rows].max()):.4g} samples/s)")
            continue
        old = held.pop(name, None)
        if old is not None:
            room[old.gpu_type] += old.gpus
        fewest = _fewest_by_type(table, rows[ok])
        share = _pick(fewest, room, fit=True)
        if share is None:
            if old is not None:
                held[name] = old
                room[old.gpu_type] -= old.gpus
            want = ", ".join(f"{g} {t} GPUs ({max(room.get(t, 0), 0)} left)" for t, g in sorted(fewest.items()))
            at_risk[name] = (f"its minimum share meeting the {need:.4g} samples/s its deadline needs ({want}) does not "
                             "fit beside the guaranteed jobs and the deadline jobs admitted before it")
            continue
        held[name] = admitted[name] = share
        room[share.gpu_type] -= share.gpus
    return DeadlineAdmission(needs, admitted, at_risk, missed)


def with_deadlines(problem: RubickRound, table: CoefficientTable, admission: Admission,
                   options: RowOptions = None) -> Admission:
    """``admission`` with the admission of the round's deadline jobs beside it (:func:`admit_deadlines`)."""
    return replace(admission, deadlines=admit_deadlines(problem, table, admission, options))


def admit_round(problem: RubickRound, table: CoefficientTable) -> Admission:
    """The admission of a round: guaranteed jobs against quotas
    (:func:`~optsched.rounds.rubick.admission.admit`), then deadline jobs beside them."""
    return with_deadlines(problem, table, admit(problem, table))


def privileged(admission: Admission) -> dict[str, int]:
    """The jobs ``admission`` binds to a floor (module docstring, "What admission binds") -> the GPUs of
    their minimum: the protected guaranteed jobs (admission order), then the admitted deadline jobs
    (earliest deadline first); a protected job with an admitted deadline keeps its place and the larger
    minimum."""
    out = dict(admission.protected)
    dl = admission.deadlines
    if dl is not None:
        for name, share in dl.admitted.items():
            out[name] = max(out.get(name, 0), share.gpus)
    return out


def admitted_needs(table: CoefficientTable, admission: Admission) -> np.ndarray:
    """Per job index of ``table``: the samples/s its admitted deadline needs, 0 when it has none."""
    out = np.zeros(len(table.jobs))
    dl = admission.deadlines
    if dl is not None and dl.admitted:
        pos = table.job_position
        out[[pos[n] for n in dl.admitted]] = [dl.needs[n] for n in dl.admitted]
    return out


def floor_ok(table: CoefficientTable, admission: Admission, rows: np.ndarray | int | None = None) -> np.ndarray:
    """Per row of ``rows`` (default: every row): whether it keeps its job's floor under ``admission`` (module
    docstring): an admitted deadline job's row meets its need (and, protected, reaches its guarantee on its
    admission type); any other row whether it reaches its job's guarantee on its admission type
    (:meth:`~optsched.rounds.rubick.admission.Admission.meets_guarantee`, what binds a protected job). Costs
    O(jobs) besides the rows: call it once for many rows, not once per row."""
    rows = np.arange(len(table)) if rows is None else np.atleast_1d(np.asarray(rows, dtype=np.int64))
    ok = admission.meets_guarantee(table, rows) if rows.size else np.zeros(0, dtype=bool)
    dl = admission.deadlines
    if dl is None or not dl.admitted or not rows.size:
        return ok
    need = admitted_needs(table, admission)
    prot = np.zeros(len(table.jobs), dtype=bool)
    pos = table.job_position
    prot[[pos[n] for n in dl.admitted if n in admission.protected]] = True
    j = table.job_index[rows]
    meets = table.throughput[rows] >= need[j] * (1.0 - RATE_RTOL)
    return np.where(need[j] > 0, meets & (ok | ~prot[j]), ok)


def demote(admission: Admission, reasons: Mapping[str, str]) -> Admission:
    """``admission`` with the admitted deadline jobs of ``reasons`` demoted to at risk (module docstring,
    "Placement")."""
    if not reasons:
        return admission
    assert admission.deadlines is not None
    return replace(admission, deadlines=admission.deadlines.demote(reasons))


def set_aside(admission: Admission, reasons: Mapping[str, str]) -> Admission:
    """``admission`` with the privileged jobs of ``reasons`` (:func:`privileged`) set aside for the round:
    protected ones deferred (:meth:`~optsched.rounds.rubick.admission.Admission.defer`: they wait, their
    deadline at risk), deadline-only ones demoted (best-effort)."""
    protected = {n: why for n, why in reasons.items() if n in admission.protected}
    out = admission.defer(protected) if protected else admission
    return demote(out, {n: why for n, why in reasons.items() if n not in admission.protected})


def settle(table: CoefficientTable, admission: Admission, choices: Mapping[str, Choice], method: str) -> Admission:
    """``admission`` with every admitted deadline job that ``choices`` leave below its need demoted (module
    docstring, "Placement"; what a baseline's decision states)."""
    dl = admission.deadlines
    if dl is None or not dl.admitted:
        return admission
    late = {}
    names = [n for n in dl.admitted if n in choices]
    ok = dict(zip(names, floor_ok(table, admission, [choices[n].row for n in names]).tolist())) if names else {}
    for name in dl.admitted:
        if not ok.get(name, False):
            late[name] = (f"admitted, but {method} did not give it a configuration meeting the {dl.needs[name]:.4g} "
                          "samples/s its deadline needs this round (no room on the nodes, or the room went to a "
                          "guaranteed job)")
    return demote(admission, late)


def finish_at(problem: RubickRound, name: str, throughput: float) -> float | None:
    """When job ``name`` finishes at ``throughput`` samples/s from the round's time on; None for no
    throughput (module docstring, "Reports")."""
    if throughput <= 0:
        return None
    return problem.time + remaining_samples(problem, problem.job(name)) / throughput


def reports(problem: RubickRound, table: CoefficientTable, admission: Admission,
            throughput: Mapping[str, float]) -> tuple[tuple[DeadlineAtRisk, ...], tuple[DeadlineMissed, ...]]:
    """The decision's ``deadline_at_risk`` and ``deadline_missed`` entries (module docstring, "Reports"),
    given the samples/s each running job gets (``throughput``; a job not in it does not run)."""
    dl = admission.deadlines
    if dl is None:
        return (), ()
    at_risk = []
    for name, reason in dl.at_risk.items():
        deadline = problem.job(name).deadline
        assert deadline is not None
        rows = table.configs_of(name)
        best = float(table.throughput[rows].max()) if rows.size else 0.0
        at_risk.append(DeadlineAtRisk(name, deadline, reason, dl.needs[name], finish_at(problem, name, best),
                                      finish_at(problem, name, throughput.get(name, 0.0))))
    missed = []
    for name in dl.missed:
        deadline = problem.job(name).deadline
        assert deadline is not None
        missed.append(DeadlineMissed(name, deadline))
    return tuple(at_risk), tuple(missed)


__all__ = ["DeadlineAdmission", "MinShare", "NO_DEADLINES", "RATE_RTOL", "RowOptions", "admit_deadlines", "admit_round",
           "admitted_needs", "demote", "finish_at", "floor_ok", "needed_rate", "privileged", "remaining_samples",
           "reports", "set_aside", "settle", "usable_gpus", "with_deadlines"]

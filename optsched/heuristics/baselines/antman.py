"""AntMan-like multi-tenant scheduling (Xiao et al., OSDI'20), the baseline of Rubick's multi-tenant
trace (Sec. 7.3); shared rules in :mod:`optsched.heuristics.baselines.common`."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Callable, Mapping

import numpy as np

from optsched.core.deadline import Deadline
from optsched.core.job import Job
from optsched.heuristics.baselines.common import (BaselineState, check_request_rows, fifo_key, held_when_out_of_time,
                                                  out_of_time, preempt_until, run_deadline_jobs)
from optsched.perf.coefficients import CoefficientTable
from optsched.rounds.rubick.admission import Admission, reaches_guarantee
from optsched.rounds.rubick.choice import Choice, check_round_table
from optsched.rounds.rubick.problem import RubickRound
from optsched.rounds.rubick.quotas import QuotaLedger

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AntManResult:
    """An AntMan round: the ``choices``, the ``admission`` it stands for (protected = the guaranteed
    jobs it runs — started within quota, or running already and never preempted — whose row reaches
    the throughput of their request, bound to the GPU type they run on when their tenant's quota names
    a type; waiting = queued guaranteed jobs over their tenant's quota, with the reason) and the
    best-effort jobs ``preempted`` for guaranteed ones."""

    choices: Mapping[str, Choice]
    admission: Admission
    preempted: tuple[str, ...] = field(default=())


def antman_round(problem: RubickRound, table: CoefficientTable, *, deadline: Deadline | None = None,
                 admission: Admission | None = None) -> AntManResult:
    """AntMan-like multi-tenant scheduling (Xiao et al., OSDI'20; Rubick Sec. 7.3, MT trace).

    1. Running jobs keep their allocation; running guaranteed jobs are never preempted and count
       against their tenant's quota with their requested GPUs on the GPU type they run on (even when
       that exceeds the quota, e.g. after a quota cut: they keep running, the tenant admits nothing new).
    2. Queued guaranteed jobs, by ``(submit_time, name)``: a job's request may use the GPU types of its
       request rows where its requested GPUs fit its tenant's remaining quota (the round's rule of
       quotas per GPU type, :class:`~optsched.rounds.rubick.quotas.QuotaLedger`: the type's entry and
       ``"*"``; no quotas in the round = unlimited); with no such type it waits (the reason names each
       type and the entry used up). Else it gets exactly its request on one of those types when it
       fits; when it does not, running best-effort jobs on nodes of those types are preempted,
       latest-started first, until it fits; then the victims it turned out not to need are restored,
       earliest-started first ("fewest needed"). If it does not fit even with every such best-effort
       job gone, nothing is preempted and it waits, and later guaranteed jobs are still tried. Quota
       is consumed only by jobs that run, on the type they run on.
    3. Queued best-effort jobs take what is left, exactly their request, by ``(submit_time, name)``
       with backfilling (a job that does not fit is skipped). They never preempt anyone.

    Where the papers are silent: jobs carry no start time, so "latest-started" is the latest
    ``submit_time`` (then name), which is the start order under FIFO; AntMan's GPU-sharing of
    opportunistic jobs (co-located on the same GPU) is not modelled: a GPU holds one job.

    ``table`` is the request-only table (``build_round_table(problem, fixed_plan=True,
    fixed_resources=True)``). Past the ``deadline`` no more jobs are started
    (:func:`~optsched.heuristics.baselines.common.out_of_time`).

    Deadlines: the admitted deadline jobs of ``admission`` come before step 2
    (:func:`~optsched.heuristics.baselines.common.run_deadline_jobs`); like a guaranteed job they preempt
    only best-effort jobs. A guaranteed job preempts a best-effort job with an admitted deadline only when
    the other best-effort jobs do not make room (guarantees come first in admission; the policy then
    reports that deadline at risk)."""
    check_round_table(problem, table, "antman")
    check_request_rows(problem, table, "antman")
    ledger = problem.quota_ledger()
    held = held_when_out_of_time(problem, table, deadline)
    if held is not None:
        protected, bound = _running_guaranteed(problem, table, ledger, lambda j: _row(held.get(table.jobs[j])))
        return AntManResult(held, Admission(protected, {}, bound))
    st = BaselineState(problem, table)
    st.hold_running()
    dl = None if admission is None else admission.deadlines
    keep = set() if dl is None else set(dl.admitted)  # admitted deadline jobs are never victims
    preempted: list[str] = []
    if admission is not None:
        preempted.extend(run_deadline_jobs(st, admission, table.rows_of,
                                           lambda v: not st.jobs[st.names[v]].guaranteed))
    protected, bound = _running_guaranteed(problem, table, ledger, st.row_of)
    waiting: dict[str, str] = {}
    queued = st.queued()
    for j in (j for j in queued if st.jobs[st.names[j]].guaranteed):
        if out_of_time(deadline):
            break
        job = st.jobs[st.names[j]]
        rows = table.rows_of(j)
        ok = [ledger.fits(job.tenant, table.gpu_type[r], job.requested_gpus) for r in rows.tolist()]
        if not any(ok):
            waiting[job.name] = _quota_reason(problem, ledger, job, sorted({table.gpu_type[r] for r in rows.tolist()}))
            continue
        rows = rows[np.asarray(ok, dtype=bool)]
        if not st.place_any(j, rows):
            victims = _preempt_for(st, j, rows, keep)
            if victims is None:
                log.debug("antman: guaranteed job %r does not fit even without best-effort jobs", job.name)
                continue
            preempted.extend(victims)
        row = st.row_of(j)
        assert row is not None
        ledger.take(job.tenant, table.gpu_type[row], job.requested_gpus)
        if bool(reaches_guarantee(table, row)[0]):
            protected[job.name] = job.requested_gpus
            if ledger.typed(job.tenant):
                bound[job.name] = table.gpu_type[row]
    for j in (j for j in queued if not st.jobs[st.names[j]].guaranteed):
        if out_of_time(deadline):
            break
        st.place_any(j, table.rows_of(j))
    return AntManResult(st.choices(), Admission(protected, waiting, bound), tuple(preempted))


def _row(choice: Choice | None) -> int | None:
    return None if choice is None else choice.row


def _running_guaranteed(problem: RubickRound, table: CoefficientTable, ledger: QuotaLedger,
                        row_of: Callable[[int], int | None]) -> tuple[dict[str, int], dict[str, str]]:
    """Step 1 of :func:`antman_round` for the running guaranteed jobs, by ``(submit_time, name)``: each counts
    against its tenant's quota with its requested GPUs on the GPU type it runs on, and is protected (bound to
    that type when its tenant's quota names types) when the row it holds (``row_of(job index)``; None: none)
    reaches its guarantee. Returns (protected, bound); ``ledger`` is charged."""
    protected: dict[str, int] = {}
    bound: dict[str, str] = {}
    running = [problem.job(table.jobs[j]) for j in np.flatnonzero(table.current_row >= 0).tolist()]
    for job in sorted((job for job in running if job.guaranteed), key=fifo_key):
        cur = problem.current(job.name)
        assert cur is not None
        gtype = problem.cluster.node(cur.placement.shares[0][0]).gpu_type
        ledger.take(job.tenant, gtype, job.requested_gpus)
        row = row_of(table.index_of(job.name))
        if row is not None and bool(reaches_guarantee(table, row)[0]):
            protected[job.name] = job.requested_gpus
            if ledger.typed(job.tenant):
                bound[job.name] = table.gpu_type[row]
    return protected, bound


def _quota_reason(problem: RubickRound, ledger: QuotaLedger, job: Job, types: list[str]) -> str:
    """Why a queued guaranteed job waits: its requested GPUs fit its tenant's quota on none of the GPU
    ``types`` of its request rows (the old wording for a tenant whose quota names no GPU type)."""
    n = job.requested_gpus
    if not ledger.typed(job.tenant):
        quota = problem.quota_of(job.tenant)
        return f"tenant {job.tenant!r} quota {quota} GPUs: {ledger.used(job.tenant)} in use, job requests {n}"
    parts = []
    for t in types:
        short = ledger.shortfall(job.tenant, t, n)
        assert short is not None
        parts.append(f"on {t}: {short.describe(t)}")
    return f"tenant {job.tenant!r} has no quota room for the job's request of {n} GPUs on any GPU type: " + \
        "; ".join(parts)


def _preempt_for(st: BaselineState, j: int, rows: np.ndarray, keep: set[str]) -> list[str] | None:
    """Preempt running best-effort jobs, latest-started first, until guaranteed job ``j`` fits on one of
    ``rows``; restore the victims it does not need, earliest-started first
    (:func:`~optsched.heuristics.baselines.common.preempt_until`). The jobs of ``keep`` (admitted deadline
    jobs) only when the others do not make room. Returns the names of the preempted jobs (``j`` placed),
    or None (nothing changed, ``j`` unplaced)."""
    def best_effort(v: int) -> bool:
        return not st.jobs[st.names[v]].guaranteed

    def place() -> bool:
        return st.place_any(j, rows)

    out = preempt_until(st, j, rows, place, lambda v: best_effort(v) and st.names[v] not in keep)
    if out is None and keep:
        out = preempt_until(st, j, rows, place, best_effort)
    return out


def schedule_antman(problem: RubickRound, table: CoefficientTable) -> dict[str, Choice]:
    """The choices of :func:`antman_round`."""
    return dict(antman_round(problem, table).choices)


__all__ = ["AntManResult", "antman_round", "schedule_antman"]

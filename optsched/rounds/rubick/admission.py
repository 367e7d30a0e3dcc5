"""Who is protected by a performance guarantee in a Rubick round.

* **Admission** (Rubick Sec. 5, Algorithm 1 lines 2-3): a guaranteed job is *protected* — it must
  reach its reference throughput — when its tenant's remaining quota covers its minimum demand. The
  quota usage of a job is its minRes GPU count ("We consider the quota usage of each job as its
  minimum demand"), here the fewest GPUs of any table row reaching the reference throughput.
  Running guaranteed jobs are admitted first, then queued ones, each group by submission time and
  name. A guaranteed job that does not fit its quota is not scheduled this round (it waits, as in
  Algorithm 1, which only schedules privileged jobs within quota). Whether a usage fits is the rule of
  :class:`~optsched.rounds.rubick.quotas.QuotaLedger` (quotas per GPU type, issue 24, item 5).
* **Quotas per GPU type** (the paper has one GPU type; the choices below are ours, in the manner of
  Kueue's flavor assignment). A job runs on one GPU type. For a tenant whose quota names no GPU type
  (the integer form, or ``"*"`` alone) nothing changes: its jobs' usage is minRes over every type and
  counts against ``"*"``, and their guarantee may be met on any type. For a *typed* tenant (its object
  names a GPU type) each guaranteed job is admitted on one GPU type, its *admission type*
  (``Admission.gpu_type``): its usage is minRes on that type (the fewest GPUs of a row of that type
  reaching its reference throughput) and counts against the tenant's entry for that type (when named)
  and against ``"*"`` (when given), and its guarantee binds on that type only (the rows it may be
  protected on: :meth:`Admission.meets_guarantee`). The candidate types are those where some row reaches
  its reference throughput (only its pinned type for a job with ``gpu_type``, whose rows are all of
  it); among those where every entry the usage counts against has room, a running job keeps its current
  type, and any other job (or a running one whose type has no room or cannot reach its guarantee: the
  guarantee then moves it) gets the type of smallest minRes, ties by type name. A job with room on no
  candidate type waits; the reason names each type and the entry used up.
* **Deferral** (the paper is silent; :meth:`Admission.defer`): a protected job whose guarantee cannot
  be reached this round (node shapes, not GPU counts) may be *deferred*: it moves to ``waiting`` and
  is treated for the round exactly like a guaranteed job waiting for quota (does not run; a running
  one is preempted). Its quota share is not handed to the next guaranteed job in line: admission is
  not recomputed, so a later job cannot take the quota of a deferred one and keep it in later rounds
  (running jobs are admitted first).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from optsched.core.errors import ValidationError
from optsched.perf.coefficients import CoefficientTable
from optsched.rounds.rubick.choice import check_round_table
from optsched.rounds.rubick.deadline_admission import DeadlineAdmission
from optsched.rounds.rubick.problem import RubickRound
from optsched.rounds.rubick.quotas import QuotaLedger

#: relative tolerance of "reaches the reference throughput"
GUARANTEE_RTOL = 1e-9

#: the option of the kind's methods that defers guaranteed jobs whose guarantee no node shape can reach
#: instead of failing the round (:mod:`optsched.policies.rubick`, "Unreachable guarantees")
DEFER_OPTION = "defer_unreachable_guarantees"


def reaches_guarantee(table: CoefficientTable, rows: np.ndarray | int) -> np.ndarray:
    """Whether each row reaches its job's reference throughput."""
    rows = np.atleast_1d(np.asarray(rows, dtype=np.int64))
    ref = table.reference_throughput[table.job_index[rows]]
    return table.throughput[rows] >= ref * (1.0 - GUARANTEE_RTOL)


def min_demands(table: CoefficientTable) -> np.ndarray:
    """minRes GPU count of every job index, in one pass over the rows: the fewest GPUs of a row reaching
    the job's reference throughput, -1 for a job with no such row."""
    need = np.full(len(table.jobs), np.iinfo(np.int64).max, dtype=np.int64)
    if len(table):
        ok = reaches_guarantee(table, np.arange(len(table)))
        np.minimum.at(need, table.job_index[ok], table.gpus[ok])
    need[need == np.iinfo(np.int64).max] = -1
    return need


def type_demands(table: CoefficientTable) -> tuple[tuple[str, ...], np.ndarray]:
    """The GPU types of the table's rows (sorted) and minRes per job index and type: ``need[j, t]`` is the
    fewest GPUs of a row of type ``t`` reaching job ``j``'s reference throughput, -1 when none does."""
    types = tuple(sorted(set(table.gpu_type)))
    tid = {t: i for i, t in enumerate(types)}
    need = np.full((len(table.jobs), len(types)), np.iinfo(np.int64).max, dtype=np.int64)
    if len(table):
        ok = reaches_guarantee(table, np.arange(len(table)))
        row_type = np.fromiter((tid[t] for t in table.gpu_type), dtype=np.int64, count=len(table))
        np.minimum.at(need, (table.job_index[ok], row_type[ok]), table.gpus[ok])
    need[need == np.iinfo(np.int64).max] = -1
    return types, need


@dataclass(frozen=True)
class Admission:
    """Protected jobs (name -> quota GPUs), guaranteed jobs left waiting (name -> reason), the GPU type
    each protected job of a typed tenant is admitted on (``gpu_type``, name -> type; module docstring,
    "Quotas per GPU type": its guarantee binds there only; a protected job not in it may meet its
    guarantee on any type) and ``deadlines``: the admission of the jobs with deadlines beside them
    (:mod:`optsched.rounds.rubick.deadlines`; None: nobody's deadline is considered)."""

    protected: Mapping[str, int]
    waiting: Mapping[str, str]
    gpu_type: Mapping[str, str] = field(default_factory=dict)
    deadlines: DeadlineAdmission | None = None

    def meets_guarantee(self, table: CoefficientTable, rows: np.ndarray | int) -> np.ndarray:
        """Whether each row may stand for its job's guarantee: it reaches the job's reference throughput
        (:func:`reaches_guarantee`) and lies on the job's admission type when it has one. The one test of
        every reader that restricts a protected job's rows (the exact model, the heuristic, the
        feasibility check)."""
        rows = np.atleast_1d(np.asarray(rows, dtype=np.int64))
        ok = reaches_guarantee(table, rows)
        if self.gpu_type and ok.any():
            names, types, bound = table.jobs, table.gpu_type, self.gpu_type
            ok &= np.fromiter(((t := bound.get(names[j])) is None or types[k] == t
                               for k, j in zip(rows.tolist(), table.job_index[rows].tolist())),
                              dtype=bool, count=len(rows))
        return ok

    def defer(self, reasons: Mapping[str, str]) -> "Admission":
        """This admission with the protected jobs of ``reasons`` (job name -> why its guarantee cannot
        be reached this round) moved to ``waiting`` (module docstring, "Deferral"); the others keep
        their quota GPUs, nobody else is admitted. ``ValidationError`` for a job that is not protected."""
        unknown = sorted(name for name in reasons if name not in self.protected)
        if unknown:
            raise ValidationError(f"admission: cannot defer {', '.join(map(repr, unknown))}: only protected "
                                  f"guaranteed jobs can be deferred (protected: {', '.join(sorted(self.protected))})")
        protected = {name: need for name, need in self.protected.items() if name not in reasons}
        waiting = dict(self.waiting)
        waiting.update({name: f"performance guarantee deferred this round: {why}" for name, why in reasons.items()})
        deadlines = self.deadlines  # a deferred job does not run: its deadline is at risk
        if deadlines is not None:
            deadlines = deadlines.demote({name: waiting[name] for name in reasons if name in deadlines.admitted})
        return Admission(protected, waiting, {name: t for name, t in self.gpu_type.items() if name in protected},
                         deadlines)


#: the admission of policies without guarantees: nobody is protected, nobody waits for quota
NO_GUARANTEES = Admission({}, {})


def _quota_reason(problem: RubickRound, tenant: str, quota: int, used: int, need: int) -> str:
    """Why a guaranteed job of a tenant whose quota names no GPU type waits for quota: its tenant has
    quota 0 (saying when that is because the tenant has no entry in ``quotas``), or the quota is used up
    by jobs admitted before it."""
    if quota == 0:
        missing = "" if tenant in problem.quota_map else (" (it has no entry in the round's quotas; once any quota "
                                                          "is given, a tenant without one has quota 0)")
        return f"waiting for quota: tenant {tenant!r} has quota 0{missing}; the job needs {need} GPUs"
    return (f"waiting for quota: tenant {tenant!r} quota {quota} GPUs is used up ({used} in use by jobs admitted "
            f"before it, the job needs {need})")


def _typed_choice(ledger: QuotaLedger, tenant: str, options: list[tuple[int, str]], current: str | None
                  ) -> tuple[int, str] | str:
    """The admission type of a typed tenant's job (module docstring): ``options`` are its candidate types
    as ``(minRes there, type)``, ``current`` its running type (None when queued). Returns ``(minRes,
    type)``, or the waiting reason naming each type and the entry used up."""
    room = [(need, t) for need, t in options if ledger.fits(tenant, t, need)]
    if room:
        return next((o for o in room if o[1] == current), min(room))
    parts = []
    for need, t in options:
        short = ledger.shortfall(tenant, t, need)
        assert short is not None
        parts.append(f"on {t} it needs {need} GPUs and {short.describe(t)}")
    return (f"waiting for quota: tenant {tenant!r} has no room on a GPU type where the job reaches its reference "
            f"throughput (in use: by jobs admitted before it): " + "; ".join(parts))


#: why a job of a table cut short by its time limit has no row (``build_round_table``'s ``deadline``)
NOT_CONSIDERED = "not considered: the time limit ran out before its configurations were built"


def admit(problem: RubickRound, table: CoefficientTable) -> Admission:
    """Admission of guaranteed jobs against tenant quotas (module docstring)."""
    check_round_table(problem, table)
    guaranteed = [j for j in problem.jobs if j.guaranteed]
    order = sorted(guaranteed, key=lambda j: (problem.current(j.name) is None, j.submit_time, j.name))
    ledger = problem.quota_ledger()
    protected: dict[str, int] = {}
    waiting: dict[str, str] = {}
    bound: dict[str, str] = {}
    needs = min_demands(table)
    by_type = type_demands(table) if any(ledger.typed(j.tenant) for j in guaranteed) else None
    for job in order:
        j = table.index_of(job.name)
        need = int(needs[j])
        if need < 0:
            waiting[job.name] = (NOT_CONSIDERED if table.row_counts[j] == 0 else
                                 "no configuration of the table reaches the throughput of its request")
            continue
        if by_type is None or not ledger.typed(job.tenant):
            short = ledger.shortfall(job.tenant, None, need)
            if short is not None:
                waiting[job.name] = _quota_reason(problem, job.tenant, short.quota, short.used, need)
                continue
            ledger.take(job.tenant, None, need)
            protected[job.name] = need
            continue
        types, need_on = by_type
        options = [(int(need_on[j, i]), t) for i, t in enumerate(types) if need_on[j, i] >= 0]
        cur = problem.current(job.name)
        current = None if cur is None else problem.cluster.node(cur.placement.shares[0][0]).gpu_type
        choice = _typed_choice(ledger, job.tenant, options, current)
        if isinstance(choice, str):
            waiting[job.name] = choice
            continue
        need, gtype = choice
        ledger.take(job.tenant, gtype, need)
        protected[job.name] = need
        bound[job.name] = gtype
    return Admission(protected, waiting, bound)


__all__ = ["Admission", "DEFER_OPTION", "GUARANTEE_RTOL", "NO_GUARANTEES", "admit", "min_demands",
           "reaches_guarantee", "type_demands"]

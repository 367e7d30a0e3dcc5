"""Who is protected by a performance guarantee in a Rubick round.

* **Admission** (Rubick Sec. 5, Algorithm 1 lines 2-3): a guaranteed job is *protected* — it must
  reach its reference throughput — when its tenant's remaining quota covers its minimum demand. The
  quota usage of a job is its minRes GPU count ("We consider the quota usage of each job as its
  minimum demand"), here the fewest GPUs of any table row reaching the reference throughput.
  Running guaranteed jobs are admitted first, then queued ones, each group by submission time and
  name. A guaranteed job that does not fit its quota is not scheduled this round (it waits, as in
  Algorithm 1, which only schedules privileged jobs within quota).
* **Deferral** (the paper is silent; :meth:`Admission.defer`): a protected job whose guarantee cannot
  be reached this round (node shapes, not GPU counts) may be *deferred*: it moves to ``waiting`` and
  is treated for the round exactly like a guaranteed job waiting for quota (does not run; a running
  one is preempted). Its quota share is not handed to the next guaranteed job in line: admission is
  not recomputed, so a later job cannot take the quota of a deferred one and keep it in later rounds
  (running jobs are admitted first).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from optsched.core.errors import ValidationError
from optsched.perf.coefficients import CoefficientTable
from optsched.rounds.rubick.choice import check_round_table
from optsched.rounds.rubick.deadline_admission import DeadlineAdmission
from optsched.rounds.rubick.problem import RubickRound

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


@dataclass(frozen=True)
class Admission:
    """Protected jobs (name -> quota GPUs) and guaranteed jobs left waiting (name -> reason); ``deadlines``:
    the admission of the jobs with deadlines beside them (:mod:`optsched.rounds.rubick.deadlines`; None:
    nobody's deadline is considered)."""

    protected: Mapping[str, int]
    waiting: Mapping[str, str]
    deadlines: DeadlineAdmission | None = None

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
        return Admission(protected, waiting, deadlines)


#: the admission of policies without guarantees: nobody is protected, nobody waits for quota
NO_GUARANTEES = Admission({}, {})


def _quota_reason(problem: RubickRound, tenant: str, quota: int, used: int, need: int) -> str:
    """Why a guaranteed job waits for quota: its tenant has quota 0 (saying when that is because the
    tenant has no entry in ``quotas``), or the quota is used up by jobs admitted before it."""
    if quota == 0:
        missing = "" if tenant in problem.quota_map else (" (it has no entry in the round's quotas; once any quota "
                                                          "is given, a tenant without one has quota 0)")
        return f"waiting for quota: tenant {tenant!r} has quota 0{missing}; the job needs {need} GPUs"
    return (f"waiting for quota: tenant {tenant!r} quota {quota} GPUs is used up ({used} in use by jobs admitted "
            f"before it, the job needs {need})")


def admit(problem: RubickRound, table: CoefficientTable) -> Admission:
    """Admission of guaranteed jobs against tenant quotas (module docstring)."""
    check_round_table(problem, table)
    guaranteed = [j for j in problem.jobs if j.guaranteed]
    order = sorted(guaranteed, key=lambda j: (problem.current(j.name) is None, j.submit_time, j.name))
    used: dict[str, int] = {}
    protected: dict[str, int] = {}
    waiting: dict[str, str] = {}
    needs = min_demands(table)
    for job in order:
        need = int(needs[table.index_of(job.name)])
        if need < 0:
            waiting[job.name] = "no configuration of the table reaches the throughput of its request"
            continue
        quota = problem.quota_of(job.tenant)
        if quota is not None and used.get(job.tenant, 0) + need > quota:
            waiting[job.name] = _quota_reason(problem, job.tenant, quota, used.get(job.tenant, 0), need)
            continue
        used[job.tenant] = used.get(job.tenant, 0) + need
        protected[job.name] = need
    return Admission(protected, waiting)


__all__ = ["Admission", "DEFER_OPTION", "GUARANTEE_RTOL", "NO_GUARANTEES", "admit", "min_demands",
           "reaches_guarantee"]

"""The ``placement`` round (thesis Sec. 3.5.3): given the workers each job gets this round (the result
of an allocation, ``workers``: job -> count and, optionally, pool), which servers they go to.

Running jobs keep the workers they hold (scheduling is non-preemptive); a running elastic job whose
count is below what it holds is scaled in (flexible workers leave first), above it gets new flexible
workers; a queued job with a count gets all its workers placed, base demand first, or none when its
base demand does not fit. Counts must lie in each job's range (0 for a queued job: it waits; a running
job keeps at least the base workers it holds: every worker not named in ``flexible``) and a pool, when given, must be one the job may use (its current pool for a
running job, inference only for a fungible job). The common Lyra fields are in
:mod:`optsched.rounds.lyra.problem`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Mapping

from optsched.core.errors import ValidationError
from optsched.rounds.lyra.jobs import base_workers, max_workers
from optsched.rounds.lyra.problem import INFERENCE, LyraRound
from optsched.rounds.lyra_allocate.capacity import current_pool
from optsched.rounds.lyra_allocate.payload import WorkerCount, WorkerCounts


@dataclass(frozen=True)
class PlacementRound(LyraRound):
    """A placement round (module docstring)."""

    KIND: ClassVar[str] = "placement"
    FIELD_KEYS: ClassVar[tuple[str, ...]] = LyraRound.FIELD_KEYS + ("workers",)

    workers: tuple[WorkerCount, ...] = ()
    _targets: dict[str, WorkerCount] = field(init=False, repr=False, compare=False)

    @classmethod
    def of_round(cls, problem: LyraRound, workers: tuple[WorkerCount, ...]) -> "PlacementRound":
        """The placement round of ``problem``'s state (every common Lyra field, ``flexible`` included) with
        ``workers``: what building it field by field gives, but the state and the caches ``problem``
        made when it was checked are taken as they are and only the counts are checked (issue 26, item 2:
        checking a 20,000-job round again took a third of a second of the ``lyra`` kind's call)."""
        obj = object.__new__(cls)
        for f in fields(LyraRound):
            object.__setattr__(obj, f.name, getattr(problem, f.name))
        object.__setattr__(obj, "_free", {})
        object.__setattr__(obj, "workers", tuple(workers))
        obj._check_workers()
        return obj

    def _check_fields(self) -> None:
        super()._check_fields()
        self._check_workers()

    def _check_workers(self) -> None:
        counts = WorkerCounts(tuple(self.workers)).counts
        object.__setattr__(self, "workers", counts)
        object.__setattr__(self, "_targets", {c.job: c for c in counts})
        given = set(self._targets)
        for c in counts:
            job = self.job(c.job)
            where = f"round: workers of job {c.job!r}"
            cur = current_pool(self, c.job)
            base = base_workers(job)
            lo = base if cur is not None else 0
            if c.workers and not base <= c.workers <= max_workers(job) or c.workers < lo:
                raise ValidationError(f"{where}: {c.workers} is outside its range {lo}..{max_workers(job)}"
                                      + (" (a running job keeps its base)" if cur is not None else " (or 0)"))
            held = 0 if cur is None else sum(g // self.worker_gpus(job, n) for n, g in self.base_of(c.job).items())
            if cur is not None and c.workers < held:
                raise ValidationError(f"{where}: {c.workers} is below the {held} base workers it holds (a running "
                                      f"job keeps its base workers; only those named in flexible scale in)")
            if c.pool is not None and cur is not None and c.pool != cur:
                raise ValidationError(f"{where}: pool {c.pool!r}, but it runs on the {cur} pool")
            if c.pool == INFERENCE and not job.fungible:
                raise ValidationError(f"{where}: pool inference for a job that is not fungible")
        missing = sorted(a.job for a in self.running if a.job not in given)
        if missing:
            raise ValidationError(f"round: running job(s) {', '.join(map(repr, missing[:5]))} have no worker count")

    def target(self, job: str) -> WorkerCount | None:
        return self._targets.get(job)

    def _fields_to_dict(self) -> dict[str, Any]:
        return {**super()._fields_to_dict(), **{"workers": WorkerCounts(self.workers).to_dict()["workers"]}}

    @classmethod
    def _fields_from_dict(cls, data: Mapping[str, Any]) -> dict[str, Any]:
        return {**super()._fields_from_dict(data),
                "workers": WorkerCounts.from_dict({"workers": data.get("workers", {})}).counts}


__all__ = ["PlacementRound"]

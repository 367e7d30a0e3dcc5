"""The decision payload of worker counts: per job of the round the workers it runs with this round (0:
it waits) and the pool they are on. JSON: ``{"workers": {job: {"workers": n, "pool": p}}}`` with ``p``
``"training"``, ``"inference"`` or null (no workers)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Mapping

from optsched.core.checks import json_int, require_int, require_keys, require_name
from optsched.core.errors import UnknownNameError, ValidationError
from optsched.rounds.lyra.problem import INFERENCE, TRAINING

POOLS = (TRAINING, INFERENCE)


@dataclass(frozen=True)
class WorkerCount:
    """One job's workers and pool (None when ``workers`` is 0; in a placement round's counts, None also
    means "either pool the job may use"; an allocation decision always names it)."""

    job: str
    workers: int
    pool: str | None

    def __post_init__(self) -> None:
        require_name("worker count job", self.job)
        require_int(f"worker count of job {self.job!r}", "workers", self.workers, 0)
        if self.pool is not None and self.pool not in POOLS:
            raise UnknownNameError("pool", str(self.pool), POOLS)
        if self.pool is not None and self.workers == 0:
            raise ValidationError(f"worker count of job {self.job!r}: a pool goes with workers > 0 only")


@dataclass(frozen=True)
class WorkerCounts:
    """Worker counts of every job of a round (module docstring)."""

    KEYS: ClassVar[tuple[tuple[str, ...], tuple[str, ...]]] = (("workers",), ())

    counts: tuple[WorkerCount, ...]

    def __post_init__(self) -> None:
        counts = tuple(sorted(self.counts, key=lambda c: c.job))
        names = [c.job for c in counts]
        if len(set(names)) != len(names):
            raise ValidationError("worker counts: a job appears twice")
        object.__setattr__(self, "counts", counts)

    def as_dict(self) -> dict[str, WorkerCount]:
        return {c.job: c for c in self.counts}

    def to_dict(self) -> dict[str, Any]:
        return {"workers": {c.job: {"workers": c.workers, "pool": c.pool} for c in self.counts}}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "WorkerCounts":
        if not isinstance(data.get("workers"), dict):
            raise ValidationError("decision: workers must be a JSON object {job: {workers, pool}}")
        out = []
        for job, entry in data["workers"].items():
            require_keys(f"worker count of job {job!r}", entry, ("workers",), ("pool",))
            out.append(WorkerCount(job, json_int(entry["workers"]), entry.get("pool")))
        return cls(tuple(out))


__all__ = ["POOLS", "WorkerCount", "WorkerCounts"]

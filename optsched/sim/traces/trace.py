"""The :class:`Trace` value object (jobs to replay with their tenants' quotas) and the tenant rule of
the trace formats (``optsched.sim.traces`` docstring, "Tenants")."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from optsched.core.checks import require_int, require_name, require_number
from optsched.core.errors import ValidationError
from optsched.core.hardware import Cluster
from optsched.core.job import Job

#: ``tenant_of(job_name, guaranteed) -> tenant``
TenantFn = Callable[[str, bool], str]
#: tenant names and the quota rule of the multi-tenant trace (package docstring)
GUARANTEED_TENANT, BEST_EFFORT_TENANT, DEFAULT_TENANT = "A", "B", "default"


@dataclass(frozen=True)
class TraceDuration:
    """The duration a trace row gives for its job, independently of the work (``steps``): seconds the
    job ran at its requested configuration in the system that recorded the trace. ``row`` is the data
    row (1 = first after the header) for messages; :mod:`optsched.sim.trace_speed` turns it into the
    job's true speed."""

    job: str
    seconds: float
    row: int

    def __post_init__(self) -> None:
        require_name("TraceDuration", self.job)
        require_number(f"trace duration of job {self.job!r}", "seconds", self.seconds, 0.0)
        require_int(f"trace duration of job {self.job!r}", "row", self.row, 1)


@dataclass(frozen=True)
class Trace:
    """Jobs to replay, sorted by ``(submit_time, name)`` (sorted on construction), with unique names.

    ``quotas``: ``(tenant, GPUs)`` pairs sorted by tenant (empty: no quota enforced); ``source``:
    the file or ``synthetic(...)`` description, for logs; ``durations``: the rows' own durations
    where the format carries them next to the work (the Rubick workload format; at most one per
    job, each naming a job of the trace)."""

    name: str
    jobs: tuple[Job, ...]
    quotas: tuple[tuple[str, int], ...] = ()
    source: str = ""
    durations: tuple[TraceDuration, ...] = ()

    def __post_init__(self) -> None:
        require_name("Trace", self.name)
        owner = f"trace {self.name!r}"
        jobs = tuple(self.jobs)
        seen: set[str] = set()
        for j in jobs:
            if not isinstance(j, Job):
                raise ValidationError(f"{owner}: jobs must be Job objects, got {j!r}")
            if j.name in seen:
                raise ValidationError(f"{owner}: job name {j.name!r} used twice")
            seen.add(j.name)
        object.__setattr__(self, "jobs", tuple(sorted(jobs, key=lambda j: (j.submit_time, j.name))))
        quotas = tuple(tuple(q) for q in self.quotas)
        tenants: set[str] = set()
        for q in quotas:
            if len(q) != 2:
                raise ValidationError(f"{owner}: a quota is a (tenant, GPUs) pair, got {q!r}")
            require_name(owner + " quota tenant", q[0])
            require_int(f"{owner} quota of tenant {q[0]!r}", "GPUs", q[1], 0)
            if q[0] in tenants:
                raise ValidationError(f"{owner}: tenant {q[0]!r} has two quotas")
            tenants.add(q[0])
        object.__setattr__(self, "quotas", tuple(sorted(quotas)))
        if not isinstance(self.source, str):
            raise ValidationError(f"{owner}: source must be a string, got {self.source!r}")
        durations = tuple(self.durations)
        named: set[str] = set()
        for d in durations:
            if not isinstance(d, TraceDuration):
                raise ValidationError(f"{owner}: durations must be TraceDuration objects, got {d!r}")
            if d.job not in seen:
                raise ValidationError(f"{owner}: row {d.row} gives a duration for job {d.job!r}, which is not in the trace")
            if d.job in named:
                raise ValidationError(f"{owner}: job {d.job!r} has two durations")
            named.add(d.job)
        object.__setattr__(self, "durations", durations)

    def __len__(self) -> int:
        return len(self.jobs)

    @property
    def quota_map(self) -> dict[str, int]:
        return dict(self.quotas)

    @property
    def tenants(self) -> tuple[str, ...]:
        """Tenants of the jobs, sorted."""
        return tuple(sorted({j.tenant for j in self.jobs}))

    def round_fields(self) -> dict[str, Any]:
        """What the trace adds to every round of a simulation: the tenants' quotas (when it has any)."""
        return {"quotas": self.quotas} if self.quotas else {}


def tenancy(any_guaranteed: bool, cluster: Cluster, tenant_of: TenantFn | None = None,
            quotas: Mapping[str, int] | None = None) -> tuple[TenantFn, tuple[tuple[str, int], ...]]:
    """The tenant rule and quotas of a trace (``optsched.sim.traces`` docstring, "Tenants")."""
    if tenant_of is None:
        if any_guaranteed:
            def rule(name: str, guaranteed: bool) -> str:
                return GUARANTEED_TENANT if guaranteed else BEST_EFFORT_TENANT
            default_quotas: Mapping[str, int] = {GUARANTEED_TENANT: cluster.total_gpus}
        else:
            def rule(name: str, guaranteed: bool) -> str:
                return DEFAULT_TENANT
            default_quotas = {}
        tenant_of = rule
    else:
        if not callable(tenant_of):
            raise ValidationError(f"tenant_of must be a function (job name, guaranteed) -> tenant, got {tenant_of!r}")
        default_quotas = {}
    q = default_quotas if quotas is None else quotas
    if not isinstance(q, Mapping):
        raise ValidationError(f"quotas must be a mapping tenant -> GPUs, got {q!r}")
    for t, n in q.items():
        require_name("quota tenant", t)
        require_int(f"quota of tenant {t!r}", "GPUs", n, 0)
    return tenant_of, tuple(sorted(q.items()))


__all__ = ["BEST_EFFORT_TENANT", "DEFAULT_TENANT", "GUARANTEED_TENANT", "TenantFn", "Trace", "TraceDuration", "tenancy"]

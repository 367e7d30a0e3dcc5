"""A caller's own coefficients: candidate configurations of a job, measured or predicted by the caller,
carried in the round (issue 16, "self-contained rounds"). Where a job has such rows the solver uses
exactly those configurations for it and no performance model is involved.

The row format is shared by every round kind that places jobs on GPUs (the kind says how its methods
choose among the rows; ``docs/integration.md``, "Own coefficients"). In JSON a round's
``coefficients`` object maps a job's name to its list of rows::

    {"plan": {"dp": 4}, "gpu_type": "A800", "gpus_per_node": [4], "throughput": 10.5,
     "cpus": 16, "mem_gib": 64}

* ``plan``: an execution plan (the round's plan format); it must use ``sum(gpus_per_node)`` GPUs;
* ``gpu_type``: a GPU type of the round's cluster (and the job's pinned type when it has one);
* ``gpus_per_node``: the GPUs on each node the configuration uses (any order; stored largest first),
  each part at most the GPUs of the largest node of that type, no more parts than such nodes;
* ``throughput``: samples per second, > 0;
* ``cpus``: CPU cores in all (integer >= 0, default 0), ``mem_gib``: host memory in GiB in all
  (>= 0, default 0); a part of ``s`` GPUs gets its GPU-proportional share of both, and each part must
  fit the largest node of the type (else the row could never be placed).

Two rows of one job describing the same configuration (plan, GPU type, shape, CPUs, memory) are an
error. Every error names the job and the row (``coefficients['job'][i]``) and the rule.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from optsched.core.checks import json_int, require_int, require_keys, require_name, require_number
from optsched.core.errors import UnknownNameError, ValidationError
from optsched.core.hardware import Cluster
from optsched.core.job import Job
from optsched.core.plan import ExecutionPlan
from optsched.core.skip import job_errors

#: JSON keys of a row: required, then optional
ROW_KEYS: tuple[tuple[str, ...], tuple[str, ...]] = (("plan", "gpu_type", "gpus_per_node", "throughput"),
                                                      ("cpus", "mem_gib"))


@dataclass(frozen=True)
class CoefficientRow:
    """One configuration of a job given by the caller (module docstring): ``plan`` on
    ``gpus_per_node`` GPUs (largest first) of ``gpu_type`` with ``cpus`` CPUs and ``mem_gib`` GiB in
    all, at ``throughput`` samples/s."""

    plan: ExecutionPlan
    gpu_type: str
    gpus_per_node: tuple[int, ...]
    throughput: float
    cpus: int = 0
    mem_gib: float = 0.0

    def __post_init__(self) -> None:
        if not isinstance(self.plan, ExecutionPlan):
            raise ValidationError(f"coefficient row: plan must be an ExecutionPlan, got {self.plan!r}")
        require_name("coefficient row gpu_type", self.gpu_type)
        shape = self.gpus_per_node
        if isinstance(shape, (str, bytes)) or not isinstance(shape, (tuple, list)) or not shape:
            raise ValidationError(f"coefficient row: gpus_per_node must be a non-empty list of GPU counts, got "
                                  f"{shape!r}")
        for g in shape:
            require_int("coefficient row", "gpus_per_node entry", g, 1)
        object.__setattr__(self, "gpus_per_node", tuple(sorted(shape, reverse=True)))
        require_number("coefficient row", "throughput", self.throughput, 0.0, strict=True)
        object.__setattr__(self, "throughput", float(self.throughput))
        require_int("coefficient row", "cpus", self.cpus, 0)
        require_number("coefficient row", "mem_gib", self.mem_gib, 0.0)
        object.__setattr__(self, "mem_gib", float(self.mem_gib))
        if self.plan.num_gpus != self.gpus:
            raise ValidationError(f"coefficient row: plan {self.plan.label} uses {self.plan.num_gpus} GPUs but "
                                  f"gpus_per_node {list(self.gpus_per_node)} holds {self.gpus}")

    @property
    def gpus(self) -> int:
        return sum(self.gpus_per_node)

    def config_key(self) -> tuple:
        """What makes two rows the same configuration (everything but the throughput)."""
        return self.plan, self.gpu_type, self.gpus_per_node, self.cpus, self.mem_gib

    def to_dict(self) -> dict[str, Any]:
        return {"plan": self.plan.to_dict(), "gpu_type": self.gpu_type, "gpus_per_node": list(self.gpus_per_node),
                "throughput": self.throughput, "cpus": self.cpus, "mem_gib": self.mem_gib}

    @classmethod
    def from_dict(cls, data: Any) -> "CoefficientRow":
        require_keys("coefficient row", data, *ROW_KEYS)
        if not isinstance(data["gpus_per_node"], list):
            raise ValidationError("coefficient row: gpus_per_node must be a JSON array of GPU counts")
        return cls(ExecutionPlan.from_dict(data["plan"]), data["gpu_type"], tuple(map(json_int, data["gpus_per_node"])),
                   data["throughput"], json_int(data.get("cpus", 0)), data.get("mem_gib", 0.0))


#: a round's own coefficients: ((job name, its rows), ...) sorted by job name
Coefficients = tuple[tuple[str, tuple[CoefficientRow, ...]], ...]


def _where(job: str, i: int) -> str:
    return f"coefficients[{job!r}][{i}]"


def check_job_rows(job: Job, rows: Iterable[CoefficientRow], cluster: Cluster) -> None:
    """``ValidationError`` naming the job and row unless every row of ``job`` fits ``cluster``
    (module docstring): its GPU type is the cluster's (and the job's pinned one), its parts fit the
    type's nodes in number, GPUs, CPUs and memory, and no configuration comes twice."""
    seen: dict[tuple, int] = {}
    for i, row in enumerate(rows):
        where = _where(job.name, i)
        try:
            cluster.gpu_type(row.gpu_type)
        except UnknownNameError as e:
            raise ValidationError(f"{where}: {e}") from None
        if job.gpu_type is not None and row.gpu_type != job.gpu_type:
            raise ValidationError(f"{where}: GPU type {row.gpu_type} but the job is pinned to {job.gpu_type}")
        nodes = [n for n in cluster.nodes_of_type(row.gpu_type) if n.num_gpus > 0]
        if len(row.gpus_per_node) > len(nodes):
            raise ValidationError(f"{where}: {len(row.gpus_per_node)} parts {list(row.gpus_per_node)} but cluster "
                                  f"{cluster.name!r} has {len(nodes)} node(s) with {row.gpu_type} GPUs")
        biggest = max(n.num_gpus for n in nodes)
        top = row.gpus_per_node[0]
        if top > biggest:
            raise ValidationError(f"{where}: a part of {top} GPUs, but no {row.gpu_type} node of cluster "
                                  f"{cluster.name!r} has more than {biggest}")
        cpus = math.ceil(row.cpus * top / row.gpus - 1e-9)
        mem = row.mem_gib * top / row.gpus
        if not any(n.num_gpus >= top and n.num_cpus >= cpus and n.memory_gib >= mem - 1e-9 for n in nodes):
            raise ValidationError(f"{where}: its largest part ({top} GPUs, {cpus} CPUs, {mem:g} GiB) fits no "
                                  f"{row.gpu_type} node of cluster {cluster.name!r}, so it could never be placed")
        key = row.config_key()
        if key in seen:
            raise ValidationError(f"{where}: the same configuration as {_where(job.name, seen[key])} (plan "
                                  f"{row.plan.label} on {list(row.gpus_per_node)} {row.gpu_type}, {row.cpus} CPUs, "
                                  f"{row.mem_gib:g} GiB)")
        seen[key] = i


def check_coefficients(coefficients: Coefficients, jobs: Mapping[str, Job], cluster: Cluster) -> None:
    """Every job named has at least one row and is a job of the round; each job's rows pass
    :func:`check_job_rows`."""
    for name, rows in coefficients:
        with job_errors(name):  # each a rule of one job (optsched.core.skip)
            if name not in jobs:
                raise ValidationError(f"coefficients: job {name!r} is not among the round's jobs")
            if not rows:
                raise ValidationError(f"coefficients[{name!r}]: needs at least one row (omit the job to let the "
                                      "performance model predict it)")
            check_job_rows(jobs[name], rows, cluster)


def normalise_coefficients(value: Any) -> Coefficients:
    """``value`` (a mapping or pairs of job name -> rows) as sorted :data:`Coefficients`."""
    items = list(value.items()) if isinstance(value, Mapping) else list(value)
    out = []
    for entry in items:
        if not (isinstance(entry, tuple) and len(entry) == 2):
            raise ValidationError(f"coefficients: expected (job name, rows) pairs, got {entry!r}")
        name, rows = entry
        require_name("coefficients job", name)
        rows = tuple(rows)
        for i, row in enumerate(rows):
            if not isinstance(row, CoefficientRow):
                raise ValidationError(f"{_where(name, i)}: must be a CoefficientRow, got {row!r}")
        out.append((name, rows))
    names = [n for n, _ in out]
    if len(set(names)) != len(names):
        raise ValidationError("coefficients: a job is listed twice")
    return tuple(sorted(out, key=lambda kv: kv[0]))


def coefficients_from_dict(data: Any) -> Coefficients:
    """Parse a round's ``coefficients`` object ``{job: [row, ...]}``; errors name the job and row."""
    if not isinstance(data, dict):
        raise ValidationError("round: coefficients must be a JSON object {job name: [row, ...]}")
    out = []
    for name, rows in data.items():
        if not isinstance(rows, list):
            raise ValidationError(f"coefficients[{name!r}]: must be a JSON array of rows")
        parsed = []
        for i, row in enumerate(rows):
            try:
                parsed.append(CoefficientRow.from_dict(row))
            except ValidationError as e:
                raise ValidationError(f"{_where(name, i)}: {e}") from None
        out.append((name, tuple(parsed)))
    return normalise_coefficients(out)


def coefficients_to_dict(coefficients: Coefficients) -> dict[str, list[dict[str, Any]]]:
    return {name: [r.to_dict() for r in rows] for name, rows in coefficients}


__all__ = ["CoefficientRow", "Coefficients", "ROW_KEYS", "check_coefficients", "check_job_rows",
           "coefficients_from_dict", "coefficients_to_dict", "normalise_coefficients"]

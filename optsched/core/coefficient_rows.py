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
from optsched.core.hardware import Cluster, Node
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
        if type(data) is dict:  # a round holds tens of thousands of rows: a plain one is checked inline
            row = _plain_row(cls, data)
            if row is not None:
                return row
        require_keys("coefficient row", data, *ROW_KEYS)
        if not isinstance(data["gpus_per_node"], list):
            raise ValidationError("coefficient row: gpus_per_node must be a JSON array of GPU counts")
        return cls(ExecutionPlan.from_dict(data["plan"]), data["gpu_type"], tuple(map(json_int, data["gpus_per_node"])),
                   data["throughput"], json_int(data.get("cpus", 0)), data.get("mem_gib", 0.0))


#: a round's own coefficients: ((job name, its rows), ...) sorted by job name
Coefficients = tuple[tuple[str, tuple[CoefficientRow, ...]], ...]


def _plain_row(cls: type[CoefficientRow], data: dict[str, Any]) -> CoefficientRow | None:
    """The row of a plain JSON object (the four required members with a string GPU type, a list of positive
    ``int`` GPU counts, a positive finite ``float`` throughput, optional ``int`` CPUs and ``float`` GiB, a plan of
    the row's GPUs), built without the constructor's checks it has just made: the object the constructor makes.
    None for anything else, which the constructor then checks (and names what is wrong)."""
    shape, thr, gpu_type = data.get("gpus_per_node"), data.get("throughput"), data.get("gpu_type")
    cpus, mem = data.get("cpus", 0), data.get("mem_gib", 0.0)
    if not (len(data) == 4 + ("cpus" in data) + ("mem_gib" in data) and "plan" in data
            and type(gpu_type) is str and gpu_type.strip() and type(shape) is list and shape
            and all(type(g) is int and g >= 1 for g in shape) and type(thr) is float and 0.0 < thr < math.inf
            and type(cpus) is int and cpus >= 0 and type(mem) is float and 0.0 <= mem < math.inf):
        return None
    plan = ExecutionPlan.from_dict(data["plan"])
    if plan.num_gpus != sum(shape):
        return None
    row = object.__new__(cls)
    row.__dict__.update(plan=plan, gpu_type=gpu_type, gpus_per_node=tuple(sorted(shape, reverse=True)),
                        throughput=thr, cpus=cpus, mem_gib=mem)
    return row


def _where(job: str, i: int) -> str:
    return f"coefficients[{job!r}][{i}]"


def _gpu_nodes(cluster: Cluster, gpu_type: str) -> tuple[Node, ...]:
    """The nodes of ``gpu_type`` with GPUs, most GPUs first (once per cluster and type)."""
    key = ("gpu_nodes", gpu_type)
    found = cluster.memo.get(key)
    if found is None:
        found = cluster.memo[key] = tuple(sorted((n for n in cluster.nodes_of_type(gpu_type) if n.num_gpus > 0),
                                                 key=lambda n: -n.num_gpus))
    return found


def _part_fits(cluster: Cluster, gpu_type: str, gpus: int, cpus: int, mem: float) -> bool:
    """Whether a part of ``gpus`` GPUs, ``cpus`` CPUs and ``mem`` GiB fits some node of ``gpu_type`` alone (once
    per cluster and part: a round's rows repeat few parts)."""
    key = ("part_fits", gpu_type, gpus, cpus, mem)
    found = cluster.memo.get(key)
    if found is None:
        found = cluster.memo[key] = any(n.num_gpus >= gpus and n.num_cpus >= cpus and n.memory_gib >= mem - 1e-9
                                        for n in _gpu_nodes(cluster, gpu_type))
    return found


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
        nodes = _gpu_nodes(cluster, row.gpu_type)
        if len(row.gpus_per_node) > len(nodes):
            raise ValidationError(f"{where}: {len(row.gpus_per_node)} parts {list(row.gpus_per_node)} but cluster "
                                  f"{cluster.name!r} has {len(nodes)} node(s) with {row.gpu_type} GPUs")
        biggest = nodes[0].num_gpus
        top = row.gpus_per_node[0]
        if top > biggest:
            raise ValidationError(f"{where}: a part of {top} GPUs, but no {row.gpu_type} node of cluster "
                                  f"{cluster.name!r} has more than {biggest}")
        cpus = math.ceil(row.cpus * top / row.gpus - 1e-9)
        mem = row.mem_gib * top / row.gpus
        if not _part_fits(cluster, row.gpu_type, top, cpus, mem):
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
    :func:`check_job_rows` (once per job and rows objects on a cluster: a round derived from another, e.g. without
    its held jobs, does not check them again)."""
    for name, rows in coefficients:
        with job_errors(name):  # each a rule of one job (optsched.core.skip)
            if name not in jobs:
                raise ValidationError(f"coefficients: job {name!r} is not among the round's jobs")
            if not rows:
                raise ValidationError(f"coefficients[{name!r}]: needs at least one row (omit the job to let the "
                                      "performance model predict it)")
            job = jobs[name]
            key = ("rows_checked", id(job), id(rows))  # the same job and rows on this cluster: checked already
            hit = cluster.memo.get(key)
            if hit is None or hit[0] is not job or hit[1] is not rows:
                check_job_rows(job, rows, cluster)
                cluster.memo[key] = (job, rows)  # kept alive with the key, so the ids are not reused


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

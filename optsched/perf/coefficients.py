"""The coefficient table: every candidate configuration of every job with its predicted throughput and
resource needs, the only channel through which a formulation sees the performance model (DESIGN.md:
"A formulation takes a RoundProblem plus a CoefficientTable and never calls the performance model
itself"). A user with measured throughputs builds the same table by hand or with
:meth:`CoefficientTable.from_dict`.

:func:`build_coefficient_table` follows Rubick's reading of a job (Sec. 4-5): a configuration is a GPU
count on a packed placement (:func:`~optsched.core.pool.packed_placement`), a CPU count and an
execution plan; the plan is part of the decision (Sec. 3, "execution planning as a new scheduling
dimension"), memory is allocated per the chosen plan's estimate (Algorithm 1, ``AllocMem``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from types import MappingProxyType
from typing import Any, Mapping, Sequence

import numpy as np

from optsched.core.checks import json_int, require_int, require_keys, require_name
from optsched.core.errors import UnknownNameError, ValidationError
from optsched.core.hardware import Cluster
from optsched.core.plan import ExecutionPlan
from optsched.core.pool import gpu_pool, packed_placement
from optsched.perf.memory import config_host_gib, host_room
from optsched.perf.performance_model import PerformanceModel
from optsched.perf.plans import enumerate_plans

FORMAT = "optsched.coefficients/1"


def _placements(raw: Any) -> tuple[tuple[int, ...], ...]:
    """``gpus_per_node`` as tuples of positive ints, each distinct shape checked once;
    ``ValidationError`` naming the first bad row."""
    try:
        if all(type(pl) is tuple for pl in raw):
            distinct = set(raw)
            if all(pl and all(type(n) is int and n >= 1 for n in pl) for pl in distinct):
                return tuple(raw)  # the usual case: already tuples of positive ints
    except TypeError:  # an unhashable entry: checked row by row below
        pass
    out = []
    for i, pl in enumerate(raw):
        if isinstance(pl, (str, bytes)) or not isinstance(pl, Sequence) or not pl:
            raise ValidationError(f"CoefficientTable: gpus_per_node[{i}] must be a non-empty list of GPU counts")
        for n in pl:
            require_int(f"CoefficientTable gpus_per_node[{i}]", "GPU count", n, 1)
        out.append(tuple(int(n) for n in pl))
    return tuple(out)


def _readonly(a: np.ndarray) -> np.ndarray:
    a = np.array(a, copy=True)
    a.flags.writeable = False
    return a


def _int_array(field: str, values: Any, k: int | None) -> np.ndarray:
    try:
        a = np.asarray(values)
    except Exception:  # pragma: no cover - numpy raises many kinds
        raise ValidationError(f"CoefficientTable: {field} must be an array of integers") from None
    if a.ndim != 1 or (k is not None and a.shape[0] != k):
        raise ValidationError(f"CoefficientTable: {field} must have shape ({k},), got {a.shape}")
    if a.size and a.dtype.kind not in "iu":
        if a.dtype.kind == "f" and np.all(np.isfinite(a)) and np.all(a == np.round(a)):
            a = a.astype(np.int64)
        else:
            raise ValidationError(f"CoefficientTable: {field} must hold integers, got dtype {a.dtype}")
    return a.astype(np.int64)


def _float_array(field: str, values: Any, k: int) -> np.ndarray:
    try:
        a = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise ValidationError(f"CoefficientTable: {field} must be an array of numbers") from None
    if a.ndim != 1 or a.shape[0] != k:
        raise ValidationError(f"CoefficientTable: {field} must have shape ({k},), got {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValidationError(f"CoefficientTable: {field} must be finite")
    return a


@dataclass(frozen=True, eq=False)
class CoefficientTable:
    """K candidate configurations of the jobs of a round, one row per configuration.

    ``job_index[k]`` indexes ``jobs``; ``plans[k]`` runs on ``gpus_per_node[k]`` (GPUs on each node
    used, largest first) of type ``gpu_type[k]`` with ``gpus[k]`` GPUs, ``cpus[k]`` CPUs and
    ``mem_gib[k]`` GiB of host memory in total, at ``throughput[k]`` samples/s. Arrays are read-only;
    construction checks every shape and rule and raises ``ValidationError`` naming the field and row.
    A job may have no row (nothing fits); :meth:`configs_of` then returns an empty array.

    Two optional per-job arrays serve scheduling rounds: ``reference_throughput[j]`` is the
    throughput of job j's requested resources and plan (the normaliser of Rubick's objective and the
    target of its performance guarantee, > 0), ``current_row[j]`` the row describing job j's running
    configuration (-1 for a queued job)."""

    jobs: tuple[str, ...]
    job_index: np.ndarray
    plans: tuple[ExecutionPlan, ...]
    gpus_per_node: tuple[tuple[int, ...], ...]
    gpu_type: tuple[str, ...]
    gpus: np.ndarray
    cpus: np.ndarray
    mem_gib: np.ndarray
    throughput: np.ndarray
    reference_throughput: np.ndarray | None = None
    current_row: np.ndarray | None = None

    def __post_init__(self) -> None:
        # every rule is checked once per distinct value (plans, shapes and GPU types repeat over rows),
        # so a table of a million rows validates in well under a second
        jobs = tuple(self.jobs)
        bad_names = [n for n in jobs if not isinstance(n, str) or not n.strip()]
        if bad_names:
            require_name("CoefficientTable job", bad_names[0])
        if len(set(jobs)) != len(jobs):
            seen: set[str] = set()
            twice = next(n for n in jobs if n in seen or seen.add(n))  # type: ignore[func-returns-value]
            raise ValidationError(f"CoefficientTable: jobs: job {twice!r} listed twice")
        plans = tuple(self.plans)
        k = len(plans)
        if any(t is not ExecutionPlan for t in set(map(type, plans))):
            i = next(i for i, p in enumerate(plans) if not isinstance(p, ExecutionPlan))
            raise ValidationError(f"CoefficientTable: plans[{i}] must be an ExecutionPlan, got {plans[i]!r}")
        if isinstance(self.gpus_per_node, (str, bytes)) or len(self.gpus_per_node) != k:
            raise ValidationError(
                f"CoefficientTable: gpus_per_node must have {k} entries (one per plan), got "
                f"{len(self.gpus_per_node) if not isinstance(self.gpus_per_node, (str, bytes)) else '?'}")
        placements = _placements(self.gpus_per_node)
        types = tuple(self.gpu_type)
        if len(types) != k:
            raise ValidationError(f"CoefficientTable: gpu_type must have {k} entries, got {len(types)}")
        if set(map(type, types)) - {str} or any(not t.strip() for t in set(types)):
            i = next(i for i, t in enumerate(types) if not isinstance(t, str) or not t.strip())
            require_name(f"CoefficientTable gpu_type[{i}]", types[i])
        job_index = _int_array("job_index", self.job_index, k)
        if job_index.size and (job_index.min() < 0 or job_index.max() >= len(jobs)):
            raise ValidationError(
                f"CoefficientTable: job_index must lie in 0..{len(jobs) - 1}, got values "
                f"{int(job_index.min())}..{int(job_index.max())}")
        gpus = _int_array("gpus", self.gpus, k)
        cpus = _int_array("cpus", self.cpus, k)
        mem = _float_array("mem_gib", self.mem_gib, k)
        thr = _float_array("throughput", self.throughput, k)
        by_plan = {id(p): p.num_gpus for p in plans}
        plan_gpus = np.fromiter(map(by_plan.__getitem__, map(id, plans)), dtype=np.int64, count=k)
        by_shape = {pl: sum(pl) for pl in set(placements)}
        shape_gpus = np.fromiter(map(by_shape.__getitem__, placements), dtype=np.int64, count=k)
        bad = np.flatnonzero((gpus != plan_gpus) | (gpus != shape_gpus))
        if bad.size:
            i = int(bad[0])
            raise ValidationError(
                f"CoefficientTable: row {i}: gpus {int(gpus[i])}, plan {plans[i].label} "
                f"({plans[i].num_gpus} GPUs) and gpus_per_node {placements[i]} must agree")
        if cpus.size and cpus.min() < 0:
            raise ValidationError(f"CoefficientTable: cpus must be >= 0 (row {int(np.argmin(cpus))})")
        if mem.size and mem.min() < 0:
            raise ValidationError(f"CoefficientTable: mem_gib must be >= 0 (row {int(np.argmin(mem))})")
        if thr.size and thr.min() < 0:
            raise ValidationError(f"CoefficientTable: throughput must be >= 0 (row {int(np.argmin(thr))})")
        ref = self.reference_throughput
        if ref is not None:
            ref = _float_array("reference_throughput", ref, len(jobs))
            if ref.size and ref.min() <= 0:
                raise ValidationError(
                    f"CoefficientTable: reference_throughput of job {jobs[int(np.argmin(ref))]!r} must be > 0")
            object.__setattr__(self, "reference_throughput", _readonly(ref))
        cur = self.current_row
        if cur is not None:
            cur = _int_array("current_row", cur, len(jobs))
            ok = (cur >= -1) & (cur < k)
            on_row = ok & (cur >= 0)  # no lookup for -1 (a table may have no rows at all)
            ok[on_row] = job_index[cur[on_row]] == np.flatnonzero(on_row)
            if not ok.all():
                j = int(np.flatnonzero(~ok)[0])
                raise ValidationError(
                    f"CoefficientTable: current_row of job {jobs[j]!r} must be -1 or one of its rows, got {int(cur[j])}")
            object.__setattr__(self, "current_row", _readonly(cur))
        for name, value in (("jobs", jobs), ("plans", plans), ("gpus_per_node", tuple(placements)),
                            ("gpu_type", types), ("job_index", _readonly(job_index)), ("gpus", _readonly(gpus)),
                            ("cpus", _readonly(cpus)), ("mem_gib", _readonly(mem)),
                            ("throughput", _readonly(thr))):
            object.__setattr__(self, name, value)

    def __len__(self) -> int:
        return len(self.plans)

    @cached_property
    def job_position(self) -> Mapping[str, int]:
        """Job name -> its index in ``jobs`` (made on first use, so looking a job up is O(1))."""
        return MappingProxyType({name: j for j, name in enumerate(self.jobs)})

    def index_of(self, job: str) -> int:
        """Index of ``job`` in ``jobs``; ``UnknownNameError`` for a job not in the table."""
        j = self.job_position.get(job)
        if j is None:
            raise UnknownNameError("job", job, self.jobs)
        return j

    @cached_property
    def _rows_by_job(self) -> tuple[np.ndarray, np.ndarray]:
        order = np.argsort(self.job_index, kind="stable")
        return order, np.searchsorted(self.job_index[order], np.arange(len(self.jobs) + 1))

    @cached_property
    def row_counts(self) -> list[int]:
        """Per job index: how many rows it has (one count of the table on first use)."""
        return np.bincount(self.job_index, minlength=len(self.jobs)).tolist()

    def rows_of(self, j: int) -> np.ndarray:
        """Row indices of job index ``j`` (ascending; one sort of the table on first use, then O(rows of
        the job) per call)."""
        order, bounds = self._rows_by_job
        return order[bounds[j]:bounds[j + 1]]

    def configs_of(self, job: str) -> np.ndarray:
        """Row indices of ``job``'s configurations (ascending); ``UnknownNameError`` for a job not in
        the table."""
        return self.rows_of(self.index_of(job))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CoefficientTable):
            return NotImplemented
        return (self.jobs == other.jobs and self.plans == other.plans
                and self.gpus_per_node == other.gpus_per_node and self.gpu_type == other.gpu_type
                and all(np.array_equal(getattr(self, f), getattr(other, f))
                        for f in ("job_index", "gpus", "cpus", "mem_gib", "throughput"))
                and all((getattr(self, f) is None) == (getattr(other, f) is None)
                        and (getattr(self, f) is None or np.array_equal(getattr(self, f), getattr(other, f)))
                        for f in ("reference_throughput", "current_row")))

    __hash__ = None  # type: ignore[assignment]

    # -- JSON -----------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Column-wise JSON object (floats written exactly, so a round trip is lossless)."""
        return {"format": FORMAT, "jobs": list(self.jobs), "job_index": [int(x) for x in self.job_index],
                "plans": [p.to_dict() for p in self.plans],
                "gpus_per_node": [list(pl) for pl in self.gpus_per_node], "gpu_type": list(self.gpu_type),
                "gpus": [int(x) for x in self.gpus], "cpus": [int(x) for x in self.cpus],
                "mem_gib": [float(x) for x in self.mem_gib], "throughput": [float(x) for x in self.throughput],
                **({} if self.reference_throughput is None else
                   {"reference_throughput": [float(x) for x in self.reference_throughput]}),
                **({} if self.current_row is None else {"current_row": [int(x) for x in self.current_row]})}

    @classmethod
    def from_dict(cls, data: Any) -> "CoefficientTable":
        fields = ("jobs", "job_index", "plans", "gpus_per_node", "gpu_type", "gpus", "cpus", "mem_gib",
                  "throughput")
        require_keys("CoefficientTable", data, fields, ("format", "reference_throughput", "current_row"))
        if data.get("format", FORMAT) != FORMAT:
            raise ValidationError(f"CoefficientTable: unsupported format {data['format']!r}, expected {FORMAT}")
        for f in fields:
            if not isinstance(data[f], list):
                raise ValidationError(f"CoefficientTable: {f} must be a JSON array")
        for i, pl in enumerate(data["gpus_per_node"]):
            if not isinstance(pl, list):
                raise ValidationError(f"CoefficientTable: gpus_per_node[{i}] must be a JSON array")
        return cls(jobs=tuple(data["jobs"]), job_index=np.asarray(data["job_index"]),
                   plans=tuple(ExecutionPlan.from_dict(p) for p in data["plans"]),
                   gpus_per_node=tuple(tuple(map(json_int, pl)) for pl in data["gpus_per_node"]),
                   gpu_type=tuple(data["gpu_type"]), gpus=np.asarray(data["gpus"]),
                   cpus=np.asarray(data["cpus"]), mem_gib=np.asarray(data["mem_gib"], dtype=float),
                   throughput=np.asarray(data["throughput"], dtype=float),
                   reference_throughput=(None if data.get("reference_throughput") is None
                                         else np.asarray(data["reference_throughput"], dtype=float)),
                   current_row=None if data.get("current_row") is None else np.asarray(data["current_row"]))


# ---------------------------------------------------------------------------------------------------
def candidate_gpu_counts(gpus_per_node: int, cap: int) -> tuple[int, ...]:
    """GPU counts a job is offered: powers of two below a node (1, 2, 4, ...), a whole node, and
    multiples of a node, up to ``cap`` (8-GPU nodes, cap 32: 1, 2, 4, 8, 16, 24, 32)."""
    require_int("candidate_gpu_counts", "gpus_per_node", gpus_per_node, 1)
    require_int("candidate_gpu_counts", "cap", cap, 1)
    counts = {1 << i for i in range(gpus_per_node.bit_length()) if (1 << i) < gpus_per_node}
    counts.update(range(gpus_per_node, cap + 1, gpus_per_node))
    return tuple(sorted(g for g in counts if g <= cap))


def pareto_front(throughput: Sequence[float], mem_gib: Sequence[float]) -> list[int]:
    """Indices of the configurations no other one dominates (throughput >= and memory <=, one strictly),
    best throughput first; of exact ties the first index is kept. The highest-throughput index (least
    memory among those) is always first."""
    order = sorted(range(len(throughput)), key=lambda i: (-throughput[i], mem_gib[i], i))
    kept: list[int] = []
    best_mem = math.inf
    for i in order:
        if mem_gib[i] < best_mem:
            kept.append(i)
            best_mem = mem_gib[i]
    return kept


def _caps(jobs: Sequence[tuple[str, PerformanceModel]], max_gpus: Mapping[str, int] | int | None,
          total: int) -> dict[str, int]:
    names = [name for name, _ in jobs]
    if max_gpus is None:
        return {n: total for n in names}
    if isinstance(max_gpus, Mapping):
        unknown = sorted(set(max_gpus) - set(names))
        if unknown:
            raise ValidationError(f"max_gpus names job(s) not in the round: {', '.join(map(str, unknown))}")
        caps = {}
        for n in names:
            cap = max_gpus.get(n, total)
            require_int(f"max_gpus of job {n!r}", "cap", cap, 1)
            caps[n] = min(cap, total)
        return caps
    require_int("build_coefficient_table", "max_gpus", max_gpus, 1)
    return {n: min(max_gpus, total) for n in names}


def build_coefficient_table(jobs: Sequence[tuple[str, PerformanceModel]], cluster: Cluster, gpu_type: str, *,
                            max_gpus: Mapping[str, int] | int | None = None,
                            cpus_per_gpu_options: Sequence[int] = (2, 4, 8, 12)) -> CoefficientTable:
    """Candidate configurations of each ``(job name, performance model)`` on the ``gpu_type`` nodes of
    ``cluster``.

    With G the GPUs per node of that type (the largest such node) and the cap ``max_gpus`` (per job from a
    mapping, jobs missing from it uncapped; or one global int; default and upper limit: every GPU of
    that type):

    * GPU counts g in :func:`candidate_gpu_counts` (1, 2, 4, ... below G, then G, 2G, ... up to the cap),
      each on ``packed_placement(g, G)``;
    * CPUs g * c for each c in ``cpus_per_gpu_options`` not above the node's CPUs per GPU
      (``num_cpus / num_gpus``, the smallest over the nodes of that type);
    * plans: :func:`~optsched.perf.plans.enumerate_plans` with the host memory that remains per node
      per node (:func:`~optsched.perf.memory.host_room` of the smallest node of that type), so that a
      config's host memory ``mem_gib`` (:func:`~optsched.perf.memory.config_host_gib`) fits every node;
      of each (g, CPUs) only the Pareto-optimal plans over (throughput higher, host memory lower) are
      kept (:func:`pareto_front`), so the fastest plan always is.

    All throughputs of a job come from one vectorised :meth:`PerformanceModel.throughputs` call. Size:
    |GPU counts| x |CPU options| x Pareto plans rows per job, typically < 100 (an 8x8 cluster gives 11
    GPU counts x 4 CPU options x 1-2 plans); the solver's model grows linearly with it, so cap
    ``max_gpus`` on large clusters. Rows are grouped by job (input order), then GPUs, CPUs ascending,
    throughput descending. A job with no feasible configuration has no row."""
    pool = gpu_pool(cluster, gpu_type)
    names = [j[0] if isinstance(j, tuple) and len(j) == 2 else None for j in jobs]
    for entry, name in zip(jobs, names):
        if name is None or not isinstance(entry[1], PerformanceModel):
            raise ValidationError(f"jobs must be (name, PerformanceModel) pairs, got {entry!r}")
        require_name("CoefficientTable job", name)
        if entry[1].gpu_type != gpu_type:
            raise ValidationError(
                f"job {name!r}: its performance model is fitted on {entry[1].gpu_type} GPUs, not {gpu_type}")
    if len(set(names)) != len(names):
        raise ValidationError("build_coefficient_table: job names must be unique")
    options = sorted(set(cpus_per_gpu_options))
    for c in options:
        require_int("cpus_per_gpu_options", "option", c, 1)
    per_node, total, cpu_cap = pool.per_node, pool.total, pool.cpus_per_gpu
    cpu_options = [c for c in options if c <= cpu_cap + 1e-9]
    if not cpu_options:
        raise ValidationError(
            f"no CPU option of {tuple(options)} per GPU fits the {gpu_type} nodes of {cluster.name!r}, which "
            f"have {cpu_cap:g} CPUs per GPU")
    caps = _caps(jobs, max_gpus, total)

    job_index: list[int] = []
    plans: list[ExecutionPlan] = []
    placements: list[tuple[int, ...]] = []
    gpus: list[int] = []
    cpus: list[int] = []
    mem: list[float] = []
    thr: list[float] = []
    for j, (name, perf) in enumerate(jobs):
        configs: list[tuple[ExecutionPlan, tuple[int, ...], float]] = []
        groups: list[tuple[int, int, tuple[int, ...], list[tuple[ExecutionPlan, float]]]] = []
        for g in candidate_gpu_counts(per_node, caps[name]):
            pl = packed_placement(g, per_node)
            host_left = host_room(pool.host_gib, pl)
            if min(host_left) < 0:
                continue
            cand = [(p, config_host_gib(perf.model, p))
                    for p in enumerate_plans(perf.model, pl, pool.gpu_type, host_left)]
            for c in cpu_options:
                if cand:
                    groups.append((g, g * c, pl, cand))
                    configs.extend((p, pl, float(c)) for p, _ in cand)
        if not configs:
            continue
        predicted = perf.throughputs(configs)
        start = 0
        for g, n_cpus, pl, cand in groups:
            t = predicted[start:start + len(cand)]
            start += len(cand)
            for i in pareto_front(list(t), [m for _, m in cand]):
                if not t[i] > 0:
                    continue
                job_index.append(j)
                plans.append(cand[i][0])
                placements.append(pl)
                gpus.append(g)
                cpus.append(n_cpus)
                mem.append(cand[i][1])
                thr.append(float(t[i]))
    return CoefficientTable(jobs=tuple(names), job_index=np.array(job_index, dtype=np.int64), plans=tuple(plans),
                            gpus_per_node=tuple(placements), gpu_type=(gpu_type,) * len(plans),
                            gpus=np.array(gpus, dtype=np.int64), cpus=np.array(cpus, dtype=np.int64),
                            mem_gib=np.array(mem, dtype=float), throughput=np.array(thr, dtype=float))


__all__ = ["CoefficientTable", "build_coefficient_table", "candidate_gpu_counts",
           "pareto_front"]

"""Workload traces for the simulator: the :class:`Trace` value object and its CSV loaders
(Rubick Sec. 7.3, "Methodology").

Three formats, told apart by their header (:func:`load_trace`), see ``../shared/data/README.md``:

* **workload** -- the Rubick 406-job trace (``workload-{base,bp,mt}.csv``, ``naive.csv``), columns
  ``name,submission_time,duration,application,num_gpus,num_cpus,bandwidth,exec_plan,steps,is_sla``:
  :func:`load_workload_csv`. ``steps`` is the work, ``exec_plan`` the user's initial plan, parsed
  exactly like the measurement files (:func:`optsched.core.plan.parse_plan_code` with
  ``offload_gc=offload_runs_with_gc(model)``) so that trace plans equal measured-table plans.
* **philly** -- Microsoft Philly (Jeon et al., ATC'19), ``timestamp,duration,num_gpus,...``:
  :func:`load_philly_csv`.
* **itp** -- Microsoft ITP 2021, ``job_id,submission_time,duration,num_gpu``: :func:`load_itp_csv`.

The production traces carry no model names. Like Rubick Sec. 7.3 ("For each job, we select a model
from Table 1 randomly. In case the original GPU number is infeasible for the model, we use a
feasible one and adjust the duration to maintain the same GPU hours. ... we translate the job
duration to targeted minibatches using the measured throughput"), :func:`assign_jobs` -- the one
function shared by both loaders and :mod:`optsched.sim.synthetic` -- gives every job a model, a GPU
count, an initial plan and its work in iterations.

Choices where the paper is silent (all overridable by keyword arguments where it makes sense):

* **GPU type and packing.** Feasibility is judged on one GPU type (``gpu_type``; default the type
  with the most GPUs in the cluster, ties by name) and on the *packed* placement of the request
  (:func:`optsched.perf.sensitivity.packed_placement`: whole nodes of the largest node size of that
  type first, then the remainder on one node), with the host memory the coefficient table grants
  (the smallest node's memory minus ``HOST_BASE_GIB_PER_GPU`` per worker,
  :mod:`optsched.scheduling.rubick_table`), so every requested plan of a trace is accepted there. On
  a cluster with several GPU types each job is pinned (``Job.gpu_type``) to the type its plan and
  work were computed for.
* **Allowed initial plans** (:func:`allowed_plans`): the plans of
  :func:`optsched.perf.plans.enumerate_plans` on the packed placement, without TP/PP for vit,
  roberta, bert and t5 (:data:`NO_3D_MODELS`, "we disable TP and PP as they are mostly unnecessary
  for these relatively small models"), every feasible 3D plan for the others. A GPU count is
  *feasible* for a model when at least one allowed plan exists on it.
* **Nearest feasible GPU count**: the smallest feasible count above the original one, else the
  largest feasible count below it (a count above the GPUs of the type is never feasible). The
  duration is scaled by ``original / new`` to keep the GPU-hours.
* **Initial plan**: uniformly at random among the allowed plans (``plan_choice="random"``, the base
  trace) or the fastest one by ``iteration_time`` (``"best"``, the BP trace; ties by plan label).
* **Work**: ``ceil(duration / iteration_time(model, gpu_type, plan, gpus_per_node, cpus_per_gpu))``
  iterations with :data:`TRACE_CPUS_PER_GPU` = 8 CPUs per GPU (the 406-job trace's ratio), at least
  one (a job of duration 0 runs one iteration).
* **Randomness**: one ``numpy.random.Generator`` seeded with the caller's seed; models are drawn for
  all jobs first (one integer per job, in submit-time order), then one uniform number per job picks
  the plan, so the model assignment does not depend on ``plan_choice`` or ``iteration_time``.
* **Tenants** (:func:`tenancy`): when any job is guaranteed, guaranteed jobs belong to tenant ``A``
  and best-effort ones to ``B``, with quota ``A`` = the cluster's GPUs (Rubick's MT trace: "Tenant-A
  with a quota of 64 GPUs, and Tenant-B with no quota" on the 64-GPU cluster); otherwise every job
  is tenant ``default`` without quotas. ``tenant_of(name, guaranteed)`` and ``quotas`` override it;
  with a custom ``tenant_of`` and no ``quotas`` no quota is enforced.
* **Submit times**: kept as written for the workload format (it starts at 0); for Philly and ITP,
  seconds after the first kept job (rows may be unsorted; jobs are processed in (time, row) order).
  ``start``/``end`` keep rows with ``start <= time < end`` (Philly: timestamps, ITP: the file's
  seconds); ``max_jobs`` then keeps the earliest ones.
* **Validation.** Every row is checked; all broken rows are reported together (first
  :data:`MAX_REPORTED_ERRORS`), each as ``<file> row <n> (line <l>): <rule>``, row 1 being the first
  data row after the header (blank lines are skipped and not counted). With ``skip_invalid=True``
  (Philly and ITP) broken rows are skipped instead and one warning counts them per rule. The
  workload format's ``bandwidth`` column is optional and ignored (the performance model derives
  communication from the plan), as are Philly's ``gpu_time`` and ``cluster`` columns.
"""

from __future__ import annotations

import csv
import inspect
import logging
import math
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from optsched.core.catalog import MODELS, get_model
from optsched.core.checks import require_int, require_name
from optsched.core.errors import ValidationError
from optsched.core.hardware import Cluster, GPUType
from optsched.core.job import Job
from optsched.core.model import ModelSpec
from optsched.core.plan import ExecutionPlan, offload_runs_with_gc, parse_plan_code
from optsched.perf.coefficients import HOST_BASE_GIB_PER_GPU
from optsched.perf.defaults import default_performance_model
from optsched.perf.memory import memory_violation
from optsched.perf.performance_model import PerformanceModel
from optsched.perf.plans import enumerate_plans, topology_violation
from optsched.perf.sensitivity import packed_placement

log = logging.getLogger(__name__)

#: ``iteration_time(model_name, gpu_type, plan, gpus_per_node, cpus_per_gpu) -> seconds``
IterationTimeFn = Callable[[str, str, ExecutionPlan, tuple[int, ...], float], float]
#: ``tenant_of(job_name, guaranteed) -> tenant``
TenantFn = Callable[[str, bool], str]

#: models drawn for traces without model names: the seven catalogue models (Rubick Table 1)
TRACE_MODELS: tuple[str, ...] = tuple(MODELS)
#: models whose initial plans never use TP/PP (Rubick Sec. 7.3, base trace)
NO_3D_MODELS: frozenset[str] = frozenset({"vit", "roberta", "bert", "t5"})
#: CPUs per GPU a generated job requests (the ratio of the 406-job trace)
TRACE_CPUS_PER_GPU = 8
PLAN_CHOICES = ("random", "best")
#: tenant names and the quota rule of the multi-tenant trace (module docstring)
GUARANTEED_TENANT, BEST_EFFORT_TENANT, DEFAULT_TENANT = "A", "B", "default"
#: what :func:`load_workload_csv` does with a plan that cannot run on its packed GPUs
INFEASIBLE_PLAN_POLICIES = ("error", "unset", "skip")
#: row errors listed in one exception
MAX_REPORTED_ERRORS = 10

WORKLOAD_COLUMNS = ("name", "submission_time", "duration", "application", "num_gpus", "num_cpus",
                    "exec_plan", "steps", "is_sla")
PHILLY_COLUMNS = ("timestamp", "duration", "num_gpus")
ITP_COLUMNS = ("job_id", "submission_time", "duration", "num_gpu")


# ---------------------------------------------------------------------------------------------
# the value object
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Trace:
    """Jobs to replay, sorted by ``(submit_time, name)`` (sorted on construction), with unique names.

    ``quotas``: ``(tenant, GPUs)`` pairs sorted by tenant (empty: no quota enforced); ``source``:
    the file or ``synthetic(...)`` description, for logs."""

    name: str
    jobs: tuple[Job, ...]
    quotas: tuple[tuple[str, int], ...] = ()
    source: str = ""

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

    def __len__(self) -> int:
        return len(self.jobs)

    @property
    def quota_map(self) -> dict[str, int]:
        return dict(self.quotas)

    @property
    def tenants(self) -> tuple[str, ...]:
        """Tenants of the jobs, sorted."""
        return tuple(sorted({j.tenant for j in self.jobs}))


# ---------------------------------------------------------------------------------------------
# tenants
# ---------------------------------------------------------------------------------------------

def tenancy(any_guaranteed: bool, cluster: Cluster, tenant_of: TenantFn | None = None,
            quotas: Mapping[str, int] | None = None) -> tuple[TenantFn, tuple[tuple[str, int], ...]]:
    """The tenant rule and quotas of a trace (module docstring, "Tenants")."""
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


# ---------------------------------------------------------------------------------------------
# GPU pool, plans and iteration times (shared by the loaders and the synthetic generator)
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class GpuPool:
    """The GPUs of one type that trace jobs are checked against (module docstring)."""

    gpu_type: GPUType
    per_node: int
    total: int
    host_cap_gib: float

    def shape(self, gpus: int) -> tuple[int, ...]:
        """Packed placement of ``gpus`` GPUs (``gpus <= total``)."""
        return packed_placement(gpus, self.per_node)

    def host_left(self, shape: tuple[int, ...]) -> tuple[float, ...]:
        return tuple(self.host_cap_gib - n * HOST_BASE_GIB_PER_GPU for n in shape)


def gpu_pool(cluster: Cluster, gpu_type: str | None = None) -> GpuPool:
    """The pool of ``gpu_type`` (default: the type with the most GPUs, ties by name)."""
    if not isinstance(cluster, Cluster):
        raise ValidationError(f"cluster must be a Cluster, got {type(cluster).__name__}")
    counts: Counter[str] = Counter()
    for n in cluster.nodes:
        counts[n.gpu_type] += n.num_gpus
    if gpu_type is None:
        if not any(counts.values()):
            raise ValidationError(f"cluster {cluster.name!r} has no GPUs")
        gpu_type = min(counts, key=lambda t: (-counts[t], t))
    gtype = cluster.gpu_type(gpu_type)
    nodes = [n for n in cluster.nodes_of_type(gpu_type) if n.num_gpus > 0]
    if not nodes:
        raise ValidationError(f"cluster {cluster.name!r} has no node with {gpu_type} GPUs")
    return GpuPool(gtype, max(n.num_gpus for n in nodes), sum(n.num_gpus for n in nodes),
                   min(n.memory_gib for n in nodes))


def allowed_plans(model: ModelSpec, gpus: int, pool: GpuPool) -> tuple[ExecutionPlan, ...]:
    """Initial plans a trace job of ``model`` may get on ``gpus`` packed GPUs of ``pool`` (module
    docstring, "Allowed initial plans"); empty when none runs or ``gpus`` exceeds the pool."""
    if gpus < 1 or gpus > pool.total:
        return ()
    shape = pool.shape(gpus)
    host = pool.host_left(shape)
    if min(host) < 0:
        return ()
    plans = enumerate_plans(model, shape, pool.gpu_type, host)
    if model.name in NO_3D_MODELS:
        plans = tuple(p for p in plans if not p.is_3d)
    return plans


def plan_violation(model: ModelSpec, plan: ExecutionPlan, pool: GpuPool) -> str | None:
    """Why ``plan`` cannot run on its GPUs packed in ``pool`` (topology, then memory), or None."""
    g = plan.num_gpus
    if g > pool.total:
        return f"{g} GPUs exceed the {pool.total} {pool.gpu_type.name} GPUs of the cluster"
    shape = pool.shape(g)
    host = pool.host_left(shape)
    if min(host) < 0:
        return (f"a node of {shape[0]} GPUs has {pool.host_cap_gib:g} GiB of host memory, less than "
                f"{HOST_BASE_GIB_PER_GPU:g} GiB per worker")
    reason = topology_violation(model, plan, shape) or memory_violation(model, plan, pool.gpu_type, shape, host)
    if reason is None:
        return None
    return f"plan {plan.label} cannot run on the packed placement {shape} of {pool.gpu_type.name} GPUs: {reason}"


def default_iteration_time(cluster: Cluster) -> IterationTimeFn:
    """The built-in analytical model (:func:`optsched.perf.defaults.default_performance_model`) as an
    :data:`IterationTimeFn`, one performance model per (model, GPU type)."""
    cache: dict[tuple[str, str], PerformanceModel] = {}

    def iteration_time(model: str, gpu_type: str, plan: ExecutionPlan, gpus_per_node: tuple[int, ...],
                       cpus_per_gpu: float) -> float:
        key = (model, gpu_type)
        if key not in cache:
            cache[key] = default_performance_model(model, cluster, gpu_type)
        return cache[key].iteration_time(plan, gpus_per_node, cpus_per_gpu)
    return iteration_time


@dataclass(frozen=True)
class RawJob:
    """A trace row before model assignment: ``duration`` seconds on ``gpus`` GPUs; ``where`` names
    the row for error messages."""

    name: str
    submit_time: float
    duration: float
    gpus: int
    guaranteed: bool = False
    where: str = ""


class _Assigner:
    """Caches of one :func:`assign_jobs` call: plans per (model, GPUs), nearest feasible counts,
    iteration times per (model, plan)."""

    def __init__(self, pool: GpuPool, iteration_time: IterationTimeFn, cpus_per_gpu: int) -> None:
        self.pool = pool
        self.iteration_time = iteration_time
        self.cpus_per_gpu = cpus_per_gpu
        self._plans: dict[tuple[str, int], tuple[ExecutionPlan, ...]] = {}
        self._nearest: dict[tuple[str, int], int] = {}
        self._times: dict[tuple[str, ExecutionPlan], float] = {}
        self._best: dict[tuple[str, int], ExecutionPlan] = {}

    def plans(self, model: ModelSpec, gpus: int) -> tuple[ExecutionPlan, ...]:
        key = (model.name, gpus)
        if key not in self._plans:
            self._plans[key] = allowed_plans(model, gpus, self.pool)
        return self._plans[key]

    def nearest(self, model: ModelSpec, gpus: int) -> int:
        """The feasible count nearest to ``gpus`` (module docstring); raises when none exists."""
        key = (model.name, gpus)
        if key not in self._nearest:
            total = self.pool.total
            order = [gpus] if gpus <= total else []
            order += list(range(gpus + 1, total + 1)) + list(range(min(gpus - 1, total), 0, -1))
            found = next((g for g in order if self.plans(model, g)), None)
            if found is None:
                raise ValidationError(
                    f"model {model.name!r} has no feasible plan on any GPU count of the {self.pool.total} "
                    f"{self.pool.gpu_type.name} GPUs (packed on {self.pool.per_node}-GPU nodes); pass "
                    f"models= without it")
            self._nearest[key] = found
        return self._nearest[key]

    def time(self, model: ModelSpec, plan: ExecutionPlan, who: str) -> float:
        key = (model.name, plan)
        if key not in self._times:
            shape = self.pool.shape(plan.num_gpus)
            try:
                t = self.iteration_time(model.name, self.pool.gpu_type.name, plan, shape, float(self.cpus_per_gpu))
                t = float(t)
            except (TypeError, ValueError) as exc:
                raise ValidationError(f"{who}: iteration_time failed for model {model.name!r} plan "
                                      f"{plan.label} on {shape}: {exc}") from None
            if not math.isfinite(t) or t <= 0:
                raise ValidationError(f"{who}: iteration_time of model {model.name!r} plan {plan.label} on "
                                      f"{shape} must be a positive number of seconds, got {t!r}")
            self._times[key] = t
        return self._times[key]

    def best(self, model: ModelSpec, gpus: int, who: str) -> ExecutionPlan:
        key = (model.name, gpus)
        if key not in self._best:
            plans = self.plans(model, gpus)
            self._best[key] = min(plans, key=lambda p: (self.time(model, p, who), p.label))
        return self._best[key]


def _check_assign_args(plan_choice: str, models: Sequence[str] | None, cpus_per_gpu: Any,
                       iteration_time: Any) -> tuple[ModelSpec, ...]:
    if plan_choice not in PLAN_CHOICES:
        raise ValidationError(f"plan_choice must be one of {', '.join(PLAN_CHOICES)}, got {plan_choice!r}")
    require_int("trace", "cpus_per_gpu", cpus_per_gpu, 1)
    if not callable(iteration_time):
        raise ValidationError("iteration_time must be a function (model, gpu_type, plan, gpus_per_node, "
                              f"cpus_per_gpu) -> seconds, got {iteration_time!r}")
    names = TRACE_MODELS if models is None else tuple(models)
    if isinstance(models, str) or not names:
        raise ValidationError(f"models must be a non-empty sequence of model names, got {models!r}")
    if len(set(names)) != len(names):
        raise ValidationError(f"models lists a model twice: {names}")
    return tuple(get_model(n) for n in names)


def assign_jobs(raw: Sequence[RawJob], cluster: Cluster, rng: np.random.Generator,
                iteration_time: IterationTimeFn, *, plan_choice: str = "random",
                models: Sequence[str] | None = None, gpu_type: str | None = None,
                cpus_per_gpu: int = TRACE_CPUS_PER_GPU, tenant_of: TenantFn | None = None) -> list[Job]:
    """Give each row of a trace without model names a model, a feasible GPU count, an initial plan
    and its work in iterations (Rubick Sec. 7.3; choices in the module docstring).

    ``raw`` is processed in the given order (callers pass submit-time order): first one model index
    per job (``rng.integers``), then one uniform number per job for the plan. ``tenant_of`` defaults
    to every job in tenant ``default``."""
    specs = _check_assign_args(plan_choice, models, cpus_per_gpu, iteration_time)
    pool = gpu_pool(cluster, gpu_type)
    pin = pool.gpu_type.name if len({n.gpu_type for n in cluster.nodes if n.num_gpus > 0}) > 1 else None
    tenant = tenant_of or (lambda name, guaranteed: DEFAULT_TENANT)
    n = len(raw)
    model_idx = rng.integers(len(specs), size=n)
    plan_u = rng.random(n)
    cat = _Assigner(pool, iteration_time, cpus_per_gpu)
    jobs: list[Job] = []
    adjusted = 0
    for r, mi, u in zip(raw, model_idx, plan_u):
        who = r.where or f"job {r.name!r}"
        model = specs[int(mi)]
        gpus = cat.nearest(model, r.gpus)
        duration = r.duration
        if gpus != r.gpus:
            adjusted += 1
            duration = r.duration * r.gpus / gpus
        if plan_choice == "random":
            plans = cat.plans(model, gpus)
            plan = plans[min(int(u * len(plans)), len(plans) - 1)]
        else:
            plan = cat.best(model, gpus, who)
        iterations = max(1, math.ceil(duration / cat.time(model, plan, who)))
        try:
            jobs.append(Job(name=r.name, model=model.name, requested_gpus=gpus, total_iterations=iterations,
                            requested_cpus=cpus_per_gpu * gpus, requested_plan=plan,
                            tenant=tenant(r.name, r.guaranteed), guaranteed=r.guaranteed,
                            submit_time=float(r.submit_time), gpu_type=pin))
        except ValidationError as exc:
            raise ValidationError(f"{who}: {exc}") from None
    if adjusted:
        log.info("%d of %d jobs got the nearest feasible GPU count of their model (GPU-hours kept)", adjusted, n)
    return jobs


# ---------------------------------------------------------------------------------------------
# CSV reading and row validation
# ---------------------------------------------------------------------------------------------

class _RowError(Exception):
    """A broken row rule; ``rule`` is a short key for the skip summary."""

    def __init__(self, message: str, rule: str) -> None:
        super().__init__(message)
        self.rule = rule


@dataclass(frozen=True)
class _Row:
    number: int
    line: int
    values: dict[str, str]


def _read_csv(path: Path, required: Sequence[str], optional: Sequence[str] = ()) -> Iterator[_Row]:
    """Rows of ``path`` as stripped strings; raises for an unreadable or empty file and missing columns.
    A row with more or fewer fields than the header yields a row whose values mark the problem."""
    try:
        handle = path.open(newline="", encoding="utf-8-sig")
    except OSError as exc:
        raise ValidationError(f"{path}: cannot read file ({exc.strerror or exc})") from None
    with handle:
        try:
            yield from _rows(path, csv.reader(handle), required, optional)
        except (UnicodeDecodeError, csv.Error) as exc:
            raise ValidationError(f"{path}: not a readable UTF-8 CSV file ({exc})") from None


def _rows(path: Path, reader: Any, required: Sequence[str], optional: Sequence[str]) -> Iterator[_Row]:
    header: list[str] | None = None
    for fields in reader:
        if any(f.strip() for f in fields):
            header = [f.strip() for f in fields]
            break
    if header is None:
        raise ValidationError(f"{path}: empty file (no header, no rows)")
    missing = [c for c in required if c not in header]
    if missing:
        raise ValidationError(f"{path}: missing column(s) {', '.join(missing)}; header is {header}")
    dup = sorted(c for c, k in Counter(header).items() if k > 1 and c in (*required, *optional))
    if dup:
        raise ValidationError(f"{path}: column(s) {', '.join(dup)} appear twice in the header")
    number = 0
    for fields in reader:
        if not any(f.strip() for f in fields):
            continue  # blank line (e.g. at the end of philly.csv)
        number += 1
        values = {h: f.strip() for h, f in zip(header, fields)}
        if len(fields) != len(header):
            values["\0fields"] = f"{len(fields)} fields but the header has {len(header)} columns"
        yield _Row(number, reader.line_num, values)
    if number == 0:
        raise ValidationError(f"{path}: no data rows after the header")


def _field_count(row: _Row) -> None:
    if "\0fields" in row.values:
        raise _RowError(row.values["\0fields"], "wrong number of fields")


def _text(row: _Row, col: str) -> str:
    text = row.values.get(col, "")
    if not text:
        raise _RowError(f"{col} is empty", f"empty {col}")
    return text


def _number(row: _Row, col: str) -> float:
    text = _text(row, col)
    try:
        x = float(text)
    except ValueError:
        raise _RowError(f"{col} {text!r} is not a number", f"non-numeric {col}") from None
    if not math.isfinite(x):
        raise _RowError(f"{col} must be finite, got {text!r}", f"non-numeric {col}")
    return x


def _non_negative(row: _Row, col: str, what: str) -> float:
    x = _number(row, col)
    if x < 0:
        raise _RowError(f"{col} is a {what} and must be >= 0, got {row.values[col]}", f"negative {col}")
    return x


def _integer(row: _Row, col: str, minimum: int, rule: str) -> int:
    x = _number(row, col)
    if x != int(x):
        raise _RowError(f"{col} must be an integer, got {row.values[col]}", f"non-integer {col}")
    if x < minimum:
        raise _RowError(f"{col} must be >= {minimum} ({rule}), got {row.values[col]}", rule)
    return int(x)


def _gpus(row: _Row, col: str) -> int:
    x = _number(row, col)
    if x == 0:
        raise _RowError(f"{col} is 0: a job needs at least one GPU", "zero GPUs")
    if x != int(x) or x < 0:
        raise _RowError(f"{col} must be a positive integer, got {row.values[col]}", f"bad {col}")
    return int(x)


class _Errors:
    """Collects row errors of one file; raises them together, or skips them with one warning."""

    def __init__(self, path: Path, skip: bool) -> None:
        self.path = path
        self.skip = skip
        self.messages: list[str] = []
        self.rules: Counter[str] = Counter()

    def where(self, row: _Row) -> str:
        return f"{self.path} row {row.number} (line {row.line})"

    def add(self, row: _Row, exc: _RowError) -> None:
        self.messages.append(f"{self.where(row)}: {exc}")
        self.rules[exc.rule] += 1

    def finish(self, kept: int) -> None:
        if not self.messages:
            return
        if self.skip:
            summary = ", ".join(f"{k} x {r}" for r, k in sorted(self.rules.items()))
            log.warning("%s: skipped %d invalid row(s) (%s); first: %s", self.path, len(self.messages),
                        summary, self.messages[0])
            if kept == 0:
                raise ValidationError(f"{self.path}: every row is invalid ({summary})")
            return
        shown = self.messages[:MAX_REPORTED_ERRORS]
        more = len(self.messages) - len(shown)
        text = "\n  - ".join(shown) + (f"\n  - ... and {more} more" if more else "")
        head = f"{self.path}: {len(self.messages)} invalid row(s)"
        if len(self.messages) == 1:
            raise ValidationError(self.messages[0])
        raise ValidationError(f"{head}:\n  - {text}")


# ---------------------------------------------------------------------------------------------
# the Rubick workload format
# ---------------------------------------------------------------------------------------------

def load_workload_csv(path: str | Path, cluster: Cluster, *, tenant_of: TenantFn | None = None,
                      quotas: Mapping[str, int] | None = None, gpu_type: str | None = None,
                      infeasible_plans: str = "error", name: str | None = None) -> Trace:
    """Load a Rubick workload CSV (``workload-{base,bp,mt}.csv``, ``naive.csv``).

    Per row: ``steps`` (>= 1) is ``total_iterations``; ``exec_plan`` on ``num_gpus`` GPUs is parsed
    like the measurement files; ``is_sla`` 1 makes the job guaranteed; ``num_cpus`` is the requested
    CPUs; ``duration`` must be a number >= 0 and is not used (the work is ``steps``). Tenants and
    quotas: :func:`tenancy`. Raises ``ValidationError`` listing every broken row.

    A plan that parses but cannot run on its GPUs packed on the cluster (:func:`plan_violation`:
    topology, GPU and host memory) is handled by ``infeasible_plans``: ``"error"`` (default) reports
    the row like any broken row; ``"unset"`` keeps the job without a requested plan (the scheduler
    then takes the best plan on the request, which is also what the BP trace means by its plans) and
    ``"skip"`` drops the job, both with one warning naming the rows and reasons. (The BP trace's
    five gpt2 ``zero-dp`` rows on 2 GPUs need 81.9 GiB per GPU by :mod:`optsched.perf.memory`.)"""
    if infeasible_plans not in INFEASIBLE_PLAN_POLICIES:
        raise ValidationError(f"infeasible_plans must be one of {', '.join(INFEASIBLE_PLAN_POLICIES)}, "
                              f"got {infeasible_plans!r}")
    p = Path(path)
    pool = gpu_pool(cluster, gpu_type)
    pin = pool.gpu_type.name if len({n.gpu_type for n in cluster.nodes if n.num_gpus > 0}) > 1 else None
    errors = _Errors(p, skip=False)
    parsed: list[tuple[_Row, dict[str, Any]]] = []
    names: dict[str, int] = {}
    infeasible: list[str] = []
    for row in _read_csv(p, WORKLOAD_COLUMNS, ("bandwidth",)):
        try:
            d, reason = _workload_row(row, pool, names)
        except _RowError as exc:
            errors.add(row, exc)
            continue
        if reason is not None:
            if infeasible_plans == "error":
                errors.add(row, _RowError(reason + ' (infeasible_plans="unset" or "skip" loads it anyway)',
                                          "plan cannot run"))
                continue
            infeasible.append(f"row {row.number}: {reason}")
            if infeasible_plans == "skip":
                continue
            d["requested_plan"] = None
        parsed.append((row, d))
    errors.finish(len(parsed))
    if infeasible:
        log.warning("%s: %d plan(s) cannot run on their packed GPUs; %s: %s", p, len(infeasible),
                    "jobs skipped" if infeasible_plans == "skip" else "requested plan unset",
                    "; ".join(infeasible))
    if not parsed:
        raise ValidationError(f"{p}: no job left (every plan is infeasible)")
    any_guaranteed = any(d["guaranteed"] for _, d in parsed)
    rule, quota_pairs = tenancy(any_guaranteed, cluster, tenant_of, quotas)
    jobs = []
    for row, d in parsed:
        try:
            jobs.append(Job(tenant=rule(d["name"], d["guaranteed"]), gpu_type=pin, **d))
        except ValidationError as exc:
            raise ValidationError(f"{errors.where(row)}: {exc}") from None
    return Trace(name or p.stem, tuple(jobs), quota_pairs, str(p))


def _workload_row(row: _Row, pool: GpuPool, names: dict[str, int]) -> tuple[dict[str, Any], str | None]:
    """The Job fields of a row and, when its plan cannot run on the packed placement, why."""
    _field_count(row)
    job = _text(row, "name")
    if job in names:
        raise _RowError(f"duplicate job name {job!r} (first used in row {names[job]})", "duplicate job name")
    names[job] = row.number
    submit = _non_negative(row, "submission_time", "time")
    _non_negative(row, "duration", "duration")
    model_name = _text(row, "application")
    if model_name not in MODELS:
        raise _RowError(f"unknown model {model_name!r} in column application; known models: "
                        f"{', '.join(sorted(MODELS))}", "unknown model")
    model = MODELS[model_name]
    gpus = _gpus(row, "num_gpus")
    cpus = _integer(row, "num_cpus", 0, "negative num_cpus")
    steps = _integer(row, "steps", 1, "steps is the work in iterations")
    sla = _text(row, "is_sla")
    if sla not in ("0", "1"):
        raise _RowError(f"is_sla must be 0 or 1, got {sla!r}", "bad is_sla")
    if gpus > pool.total:
        raise _RowError(f"num_gpus {gpus} exceeds the {pool.total} {pool.gpu_type.name} GPUs of the cluster",
                        "too many GPUs")
    code = _text(row, "exec_plan")
    try:
        plan = parse_plan_code(code, gpus, model.global_batch, offload_gc=offload_runs_with_gc(model))
    except ValidationError as exc:
        raise _RowError(f"exec_plan: {exc}", "bad plan code") from None
    reason = plan_violation(model, plan, pool)
    fields = {"name": job, "model": model_name, "requested_gpus": gpus, "total_iterations": steps,
              "requested_cpus": cpus, "requested_plan": plan, "guaranteed": sla == "1", "submit_time": submit}
    return fields, None if reason is None else f"exec_plan {code!r} on {gpus} GPUs: {reason}"


# ---------------------------------------------------------------------------------------------
# production traces without model names: Philly and ITP
# ---------------------------------------------------------------------------------------------

def _select(rows: list[tuple[float, int, RawJob]], max_jobs: int | None) -> list[RawJob]:
    """Sort by (time, row), keep the first ``max_jobs``, rebase submit times to the first kept job."""
    rows.sort(key=lambda r: (r[0], r[1]))
    if max_jobs is not None:
        rows = rows[:max_jobs]
    if not rows:
        return []
    t0 = rows[0][0]
    return [RawJob(r.name, t - t0, r.duration, r.gpus, r.guaranteed, r.where) for t, _, r in rows]


def _finish(p: Path, raw: list[RawJob], cluster: Cluster, seed: int,
            iteration_time: IterationTimeFn | None, plan_choice: str, models: Sequence[str] | None,
            gpu_type: str | None, cpus_per_gpu: int, name: str | None) -> Trace:
    if not raw:
        raise ValidationError(f"{p}: no job left after the start/end/max_jobs selection")
    it = iteration_time if iteration_time is not None else default_iteration_time(cluster)
    rng = np.random.default_rng(seed)
    jobs = assign_jobs(raw, cluster, rng, it, plan_choice=plan_choice, models=models, gpu_type=gpu_type,
                       cpus_per_gpu=cpus_per_gpu)
    return Trace(name or p.stem, tuple(jobs), (), f"{p} (seed={seed}, plan_choice={plan_choice})")


def _check_loader_args(seed: Any, max_jobs: Any) -> None:
    require_int("trace loader", "seed", seed, 0)
    if max_jobs is not None:
        require_int("trace loader", "max_jobs", max_jobs, 1)


def _naive_utc(ts: datetime) -> datetime:
    """Time-zone-aware timestamps are converted to UTC; naive ones are taken as they are."""
    return ts if ts.tzinfo is None else ts.astimezone(timezone.utc).replace(tzinfo=None)


def _timestamp(value: str | datetime | None, what: str) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return _naive_utc(value)
    try:
        return _naive_utc(datetime.fromisoformat(str(value).strip()))
    except ValueError:
        raise ValidationError(f"{what} must be a timestamp YYYY-MM-DD HH:MM:SS, got {value!r}") from None


def load_philly_csv(path: str | Path, cluster: Cluster, *, seed: int, iteration_time: IterationTimeFn | None,
                    start: str | datetime | None = None, end: str | datetime | None = None,
                    max_jobs: int | None = None, plan_choice: str = "random",
                    models: Sequence[str] | None = None, gpu_type: str | None = None,
                    cpus_per_gpu: int = TRACE_CPUS_PER_GPU, skip_invalid: bool = False,
                    name: str | None = None) -> Trace:
    """Load a Philly CSV (``timestamp,duration,num_gpus[,gpu_time,cluster]``, timestamps
    ``YYYY-MM-DD HH:MM:SS``, rows in any order). Jobs are named ``philly-<row>``; submit times are
    seconds after the first kept job; models, GPU counts, plans and iterations come from
    :func:`assign_jobs` with ``numpy.random.default_rng(seed)``. ``iteration_time=None`` uses the
    built-in analytical model. Every row is validated (also those outside ``start``/``end``)."""
    p = Path(path)
    _check_loader_args(seed, max_jobs)
    t_start, t_end = _timestamp(start, "start"), _timestamp(end, "end")
    errors = _Errors(p, skip_invalid)
    kept: list[tuple[float, int, RawJob]] = []
    valid = 0
    epoch = datetime(1970, 1, 1)
    for row in _read_csv(p, PHILLY_COLUMNS, ("gpu_time", "cluster")):
        try:
            _field_count(row)
            text = _text(row, "timestamp")
            try:
                ts = _naive_utc(datetime.fromisoformat(text))
            except ValueError:
                raise _RowError(f"timestamp {text!r} is not YYYY-MM-DD HH:MM:SS", "bad timestamp") from None
            duration = _non_negative(row, "duration", "duration")
            gpus = _gpus(row, "num_gpus")
        except _RowError as exc:
            errors.add(row, exc)
            continue
        valid += 1
        if (t_start is not None and ts < t_start) or (t_end is not None and ts >= t_end):
            continue
        t = (ts - epoch).total_seconds()
        kept.append((t, row.number, RawJob(f"philly-{row.number}", t, duration, gpus, where=errors.where(row))))
    errors.finish(valid)
    return _finish(p, _select(kept, max_jobs), cluster, seed, iteration_time, plan_choice, models,
                   gpu_type, cpus_per_gpu, name)


def load_itp_csv(path: str | Path, cluster: Cluster, *, seed: int, iteration_time: IterationTimeFn | None,
                 start: float | None = None, end: float | None = None, max_jobs: int | None = None,
                 plan_choice: str = "random", models: Sequence[str] | None = None, gpu_type: str | None = None,
                 cpus_per_gpu: int = TRACE_CPUS_PER_GPU, skip_invalid: bool = False,
                 name: str | None = None) -> Trace:
    """Load a Microsoft ITP 2021 CSV (``job_id,submission_time,duration,num_gpu``, seconds). Jobs are
    named ``itp-<job_id>`` (a repeated ``job_id`` is an error); ``start``/``end`` are in the file's
    seconds; otherwise as :func:`load_philly_csv`."""
    p = Path(path)
    _check_loader_args(seed, max_jobs)
    for label, v in (("start", start), ("end", end)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)):
            raise ValidationError(f"{label} must be a number of seconds, got {v!r}")
    errors = _Errors(p, skip_invalid)
    kept: list[tuple[float, int, RawJob]] = []
    ids: dict[str, int] = {}
    valid = 0
    for row in _read_csv(p, ITP_COLUMNS):
        try:
            _field_count(row)
            job_id = _text(row, "job_id")
            submit = _non_negative(row, "submission_time", "time")
            duration = _non_negative(row, "duration", "duration")
            gpus = _gpus(row, "num_gpu")
            if job_id in ids:
                raise _RowError(f"duplicate job name 'itp-{job_id}' (job_id first used in row {ids[job_id]})",
                                "duplicate job name")
        except _RowError as exc:
            errors.add(row, exc)
            continue
        ids[job_id] = row.number
        valid += 1
        if (start is not None and submit < start) or (end is not None and submit >= end):
            continue
        kept.append((submit, row.number, RawJob(f"itp-{job_id}", submit, duration, gpus, where=errors.where(row))))
    errors.finish(valid)
    return _finish(p, _select(kept, max_jobs), cluster, seed, iteration_time, plan_choice, models,
                   gpu_type, cpus_per_gpu, name)


# ---------------------------------------------------------------------------------------------
# dispatch on the header
# ---------------------------------------------------------------------------------------------

#: trace formats by required header columns, in the order they are tried
FORMATS: dict[str, tuple[str, ...]] = {"workload": WORKLOAD_COLUMNS, "philly": PHILLY_COLUMNS,
                                       "itp": ITP_COLUMNS}
#: names :func:`load_trace` accepts instead of a path
BUILTIN_TRACES = ("synthetic",)


def detect_format(path: str | Path) -> str:
    """``workload``, ``philly`` or ``itp`` from the CSV header (first non-blank line); raises
    ``ValidationError`` listing the accepted headers otherwise."""
    p = Path(path)
    try:
        with p.open(newline="", encoding="utf-8-sig") as handle:
            header = next((r for r in csv.reader(handle) if any(f.strip() for f in r)), None)
    except OSError as exc:
        raise ValidationError(f"{p}: cannot read file ({exc.strerror or exc})") from None
    except (UnicodeDecodeError, csv.Error) as exc:
        raise ValidationError(f"{p}: not a UTF-8 CSV file ({exc})") from None
    if header is None:
        raise ValidationError(f"{p}: empty file (no header, no rows)")
    cols = {h.strip() for h in header}
    for fmt, needed in FORMATS.items():
        if set(needed) <= cols:
            return fmt
    accepted = "; ".join(f"{fmt}: {','.join(needed)}" for fmt, needed in FORMATS.items())
    raise ValidationError(f"{p}: unrecognised trace header {[h.strip() for h in header]}; accepted headers "
                          f"(columns that must be present) are {accepted}")


def load_trace(path_or_name: str | Path, cluster: Cluster, *, seed: int,
               iteration_time: IterationTimeFn | None = None, **kwargs: Any) -> Trace:
    """Load a trace file of any supported format (told by its header, :func:`detect_format`), or the
    built-in ``"synthetic"`` trace (:func:`optsched.sim.synthetic.synthetic_trace`). ``seed`` and
    ``iteration_time`` are used by the formats without model names and the synthetic trace (the
    workload format ignores them); other keyword arguments go to the loader."""
    if isinstance(path_or_name, str) and path_or_name in BUILTIN_TRACES:
        from optsched.sim.synthetic import synthetic_trace  # synthetic imports this module
        _check_options(synthetic_trace, kwargs, "synthetic trace")
        return synthetic_trace(cluster, seed=seed, iteration_time=iteration_time, **kwargs)
    p = Path(path_or_name)
    if not p.is_file():
        raise ValidationError(f"trace {str(path_or_name)!r} is neither a file nor a built-in trace "
                              f"({', '.join(BUILTIN_TRACES)})")
    fmt = detect_format(p)
    loader = {"workload": load_workload_csv, "philly": load_philly_csv, "itp": load_itp_csv}[fmt]
    _check_options(loader, kwargs, f"{p} ({fmt} trace)")
    if fmt == "workload":
        return load_workload_csv(p, cluster, **kwargs)
    return loader(p, cluster, seed=seed, iteration_time=iteration_time, **kwargs)


def _check_options(fn: Callable[..., Any], kwargs: Mapping[str, Any], who: str) -> None:
    """Raise ``ValidationError`` naming options ``fn`` does not take (they would be silently lost)."""
    params = inspect.signature(fn).parameters
    fixed = {"path", "cluster", "seed", "iteration_time"}
    unknown = sorted(k for k in kwargs if k not in params or k in fixed)
    if unknown:
        known = sorted(k for k, v in params.items() if v.kind is v.KEYWORD_ONLY and k not in fixed)
        raise ValidationError(f"{who}: unknown option(s) {', '.join(unknown)}; this format takes "
                              f"{', '.join(known)}")


__all__ = ["BUILTIN_TRACES", "FORMATS", "INFEASIBLE_PLAN_POLICIES", "NO_3D_MODELS", "PLAN_CHOICES",
           "TRACE_CPUS_PER_GPU", "TRACE_MODELS",
           "GpuPool", "IterationTimeFn", "RawJob", "TenantFn", "Trace", "allowed_plans", "assign_jobs",
           "default_iteration_time", "detect_format", "gpu_pool", "load_itp_csv", "load_philly_csv",
           "load_trace", "load_workload_csv", "plan_violation", "tenancy"]

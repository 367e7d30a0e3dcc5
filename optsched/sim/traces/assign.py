"""Turning trace rows without model names into jobs (Rubick Sec. 7.3; the choices are listed in the
``optsched.sim.traces`` docstring): a model per job, the nearest feasible GPU count with the GPU-hours
kept, an initial plan and the work in iterations. Shared by the Philly and ITP loaders and the
synthetic trace."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from optsched.core.catalog import MODELS, NO_3D_MODELS, get_model
from optsched.core.checks import require_int, require_seed
from optsched.core.errors import ValidationError
from optsched.core.hardware import Cluster
from optsched.core.job import DEFAULT_CPUS_PER_GPU, Job
from optsched.core.model import ModelSpec
from optsched.core.plan import ExecutionPlan
from optsched.core.pool import GpuPool, gpu_pool
from optsched.perf.defaults import default_performance_model
from optsched.perf.memory import host_room
from optsched.perf.performance_model import PerformanceModel
from optsched.perf.plans import enumerate_plans, plan_violation
from optsched.sim.traces.trace import DEFAULT_TENANT, TenantFn, Trace

log = logging.getLogger(__name__)

#: ``iteration_time(model_name, gpu_type, plan, gpus_per_node, cpus_per_gpu) -> seconds``
IterationTimeFn = Callable[[str, str, ExecutionPlan, tuple[int, ...], float], float]

#: models drawn for traces without model names: the seven catalogue models (Rubick Table 1)
TRACE_MODELS: tuple[str, ...] = tuple(MODELS)
PLAN_CHOICES = ("random", "best")


def allowed_plans(model: ModelSpec, gpus: int, pool: GpuPool) -> tuple[ExecutionPlan, ...]:
    """Initial plans a trace job of ``model`` may get on ``gpus`` packed GPUs of ``pool`` (module
    docstring, "Allowed initial plans"); empty when none runs or ``gpus`` exceeds the pool."""
    if gpus < 1 or gpus > pool.total:
        return ()
    shape = pool.shape(gpus)
    host = host_room(pool.host_gib, shape)
    if min(host) < 0:
        return ()
    plans = enumerate_plans(model, shape, pool.gpu_type, host)
    if model.name in NO_3D_MODELS:
        plans = tuple(p for p in plans if not p.is_3d)
    return plans


def packed_plan_violation(model: ModelSpec, plan: ExecutionPlan, pool: GpuPool) -> str | None:
    """Why ``plan`` cannot run on its GPUs packed in ``pool``
    (:func:`~optsched.perf.plans.plan_violation`: host room, topology, memory), or None."""
    g = plan.num_gpus
    if g > pool.total:
        return f"{g} GPUs exceed the {pool.total} {pool.gpu_type.name} GPUs of the cluster"
    shape = pool.shape(g)
    reason = plan_violation(model, plan, pool.gpu_type, shape, pool.host_gib)
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
                cpus_per_gpu: int = DEFAULT_CPUS_PER_GPU, tenant_of: TenantFn | None = None) -> list[Job]:
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


def select_jobs(rows: list[tuple[float, int, RawJob]], max_jobs: int | None) -> list[RawJob]:
    """Sort by (time, row), keep the first ``max_jobs``, rebase submit times to the first kept job."""
    rows.sort(key=lambda r: (r[0], r[1]))
    if max_jobs is not None:
        rows = rows[:max_jobs]
    if not rows:
        return []
    t0 = rows[0][0]
    return [RawJob(r.name, t - t0, r.duration, r.gpus, r.guaranteed, r.where) for t, _, r in rows]


def finish_trace(p: Path, raw: list[RawJob], cluster: Cluster, seed: int,
            iteration_time: IterationTimeFn | None, plan_choice: str, models: Sequence[str] | None,
            gpu_type: str | None, cpus_per_gpu: int, name: str | None) -> Trace:
    if not raw:
        raise ValidationError(f"{p}: no job left after the start/end/max_jobs selection")
    it = iteration_time if iteration_time is not None else default_iteration_time(cluster)
    require_seed("finish_trace", seed)
    rng = np.random.default_rng(seed)
    jobs = assign_jobs(raw, cluster, rng, it, plan_choice=plan_choice, models=models, gpu_type=gpu_type,
                       cpus_per_gpu=cpus_per_gpu)
    return Trace(name or p.stem, tuple(jobs), (), f"{p} (seed={seed}, plan_choice={plan_choice})")


def check_loader_args(seed: Any, max_jobs: Any) -> None:
    require_int("trace loader", "seed", seed, 0)
    if max_jobs is not None:
        require_int("trace loader", "max_jobs", max_jobs, 1)


__all__ = ["IterationTimeFn", "PLAN_CHOICES", "RawJob", "TRACE_MODELS", "allowed_plans", "assign_jobs",
           "check_loader_args", "default_iteration_time", "finish_trace", "packed_plan_violation", "select_jobs"]

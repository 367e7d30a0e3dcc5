"""The tables the baselines of the Rubick evaluation (Sec. 7.3, Table 4) choose from: FIFO,
Synergy-like, Sia-like and AntMan-like. This is where the baselines meet the performance model; their
schedulers (:mod:`optsched.heuristics.baselines`) read only these tables, and their policies
(:mod:`optsched.policies.rubick`) join the two.

* **FIFO, AntMan**: the request-only table, ``build_round_table(fixed_plan=True,
  fixed_resources=True)``: per job and GPU type its request (requested plan, or the best plan of the
  request when it gave none, on the packed requested GPUs with the requested CPUs), plus the running
  configuration.
* **Synergy** (:func:`synergy_table`): the request-only table plus, per job, its plan and placement at
  the CPU counts of :data:`SYNERGY_CPUS_PER_GPU` per GPU (and the GPU-proportional share), up to what
  one node holds for its largest part: for a queued job its requested plan on the packed requested
  GPUs, for a running job its current plan on its current nodes (Synergy never moves GPUs). Memory is
  the plan's (the table's rule), the same at every CPU count.
* **Sia** (:func:`sia_table`): the request-only table plus, per job, its *Sia plan* with the DP size
  scaled to every candidate GPU count up to the job's GPU cap
  (:func:`~optsched.rounds.rubick.table.job_gpu_cap`, the cap Rubick's table uses) at
  GPU-proportional CPUs. The Sia plan is the request's plan when it is data-parallel; for a 3D
  request, the fastest data-parallel-family plan (``dp``, ``ga``, ``gc``, ``zero-dp``,
  ``zero-offload`` with the model's offload-GC setting, :func:`~optsched.core.plan.parse_plan_code`)
  that runs on the requested GPUs, else the 3D plan itself on its requested GPUs only (Rubick
  footnote 2: "if a model cannot run using DP (even when ZeRO/GA/GC), the job fallbacks to a feasible
  3D-parallel plan with the resource scaling disabled"). Scaling keeps the plan's ZeRO mode and GC;
  since the global batch is fixed, the per-replica batch shrinks as DP grows and the GA steps drop to
  the largest divisor of it not above the plan's (the way ``parse_plan_code`` reads ``ga``); a GPU
  count whose DP size does not divide the global batch, or that breaks topology or memory, is skipped.

A job with its own coefficient rows (``RubickRound.coefficients``) gets, instead of rows from the
performance model, the given rows each baseline's rule picks (:func:`~optsched.rounds.rubick.own_rows.synergy_rows`,
:func:`~optsched.rounds.rubick.own_rows.sia_rows`); its request-only rows come from the round table.

With allowed configurations (a :class:`~optsched.perf.lookup.RestrictedLookup`) every extra row is
filtered like the round table's, and the request rows are the round table's (a stand-in request where
the request is not allowed; a Synergy ladder then climbs the stand-in's own placement).

The baseline policies keep a :class:`BaselineCache` (the round table's cache plus the extra rows per job), so a
simulator's rounds cost list work once the performance models are warm; the tables are the same with
or without it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Mapping

import numpy as np

from optsched.core.deadline import Deadline
from optsched.core.errors import ValidationError
from optsched.core.job import Job
from optsched.core.plan import ExecutionPlan, offload_runs_with_gc, parse_plan_code
from optsched.core.pool import GpuPool, gpu_pool, usable_gpu_types
from optsched.perf.coefficients import CoefficientTable, candidate_gpu_counts
from optsched.perf.lookup import PerfLookup, allowed_configs
from optsched.perf.memory import config_host_gib
from optsched.perf.performance_model import PerformanceModel
from optsched.perf.plans import plan_violation
from optsched.rounds.rubick import own_rows
from optsched.rounds.rubick.constraints import admissible_rows, constraint_key
from optsched.rounds.rubick.problem import RubickRound
from optsched.rounds.rubick.table import (DEFAULT_GROWTH, CandidateRow, RoundTableCache, build_round_table,
                                          host_memory_rows, job_gpu_cap, request_plan, restrict_rows, round_lookup)

#: CPUs per GPU a Synergy ladder offers (capped by one node's CPUs over the job's largest part)
SYNERGY_CPUS_PER_GPU: tuple[int, ...] = (1, 2, 3, 4, 6, 8, 10, 12, 16, 24, 32, 48, 64, 96)
#: data-parallel-family plan codes Sia falls back to for a 3D request (Rubick footnote 2)
SIA_DP_CODES: tuple[str, ...] = ("dp", "ga", "gc", "zero-dp", "zero-offload")


@dataclass
class BaselineCache:
    """What a baseline's tables reuse from one round to the next: the round table's cache
    (:class:`~optsched.rounds.rubick.table.RoundTableCache`) and each job's extra rows, keyed by
    everything they depend on (request, running configuration, table parameters). Cleared when the
    cluster or the performance lookup changes. Not thread-safe."""

    round: RoundTableCache = field(default_factory=RoundTableCache)
    rows: dict[tuple, list[CandidateRow]] = field(default_factory=dict)
    bound: tuple[Any, Any] = (None, None)

    def bind(self, problem: RubickRound, perf: PerfLookup | None) -> PerfLookup:
        lookup = self.round.bind(problem, perf)
        if self.bound[0] is not problem.cluster or self.bound[1] is not lookup:
            self.rows.clear()
            self.bound = (problem.cluster, lookup)
        return lookup


@dataclass(frozen=True)
class BaselineTable:
    """A round table and, per job name, the rows the baseline may choose from (ascending)."""

    table: CoefficientTable
    options: Mapping[str, tuple[int, ...]]


# -- rows from the performance model ---------------------------------------------------------------
def _request_plan(job: Job, pm: PerformanceModel, pool: GpuPool) -> ExecutionPlan | None:
    """The plan of the job's request on ``pool`` as the round table defines it
    (:func:`~optsched.rounds.rubick.table.request_plan`); None when the request does not run there."""
    found = request_plan(job, pm, pool, strict=False)
    return None if found is None else found[0]


def _scaled_rows(plan: ExecutionPlan, pm: PerformanceModel, pool: GpuPool, counts: tuple[int, ...],
                 cpus_per_gpu: int) -> list[CandidateRow]:
    """``plan`` with its DP size scaled to each count of ``counts`` it runs on (packed), at
    ``cpus_per_gpu`` CPUs per GPU; GA steps drop to the largest divisor of the per-replica batch not
    above the plan's (module docstring)."""
    configs: list[tuple[ExecutionPlan, tuple[int, ...], float]] = []
    for g in counts:
        if g % (plan.tp * plan.pp):
            continue
        shape = pool.shape(g)
        dp = g // (plan.tp * plan.pp)
        per_replica, rest = divmod(pm.model.global_batch, dp)
        if rest or per_replica == 0:
            continue
        ga = max(a for a in range(1, plan.ga_steps + 1) if per_replica % a == 0)
        scaled = replace(plan, dp=dp, ga_steps=ga)
        if plan_violation(pm.model, scaled, pool.gpu_type, shape, pool.host_gib) is None:
            configs.append((scaled, shape, float(cpus_per_gpu)))
    if not configs:
        return []
    thr = pm.throughputs(configs)
    return [CandidateRow(p, s, pool.gpu_type.name, p.num_gpus, cpus_per_gpu * p.num_gpus, config_host_gib(pm.model, p),
                         float(t)) for (p, s, _), t in zip(configs, thr)]


def _cpu_ladder(plan: ExecutionPlan, shape: tuple[int, ...], mem: float, pm: PerformanceModel, pool: GpuPool,
                grid: tuple[int, ...]) -> list[CandidateRow]:
    """``plan`` on ``shape`` at each CPU share of ``grid`` (plus the proportional one) that one node
    can give the largest part, all with host memory ``mem``."""
    top = pool.node_cpus // max(shape)
    shares = sorted({c for c in grid if c <= top} | {min(pool.proportional_cpus_per_gpu, max(top, 1))})
    shares = [c for c in shares if c >= 1]
    if not shares:
        return []
    g = sum(shape)
    thr = pm.throughputs([(plan, shape, float(c)) for c in shares])
    return [CandidateRow(plan, shape, pool.gpu_type.name, g, c * g, mem, float(t)) for c, t in zip(shares, thr)]


def _dp_fallback(job: Job, pm: PerformanceModel, pool: GpuPool, cpus_per_gpu: int) -> ExecutionPlan | None:
    """The fastest data-parallel-family plan (:data:`SIA_DP_CODES`) on the job's packed request, at
    ``cpus_per_gpu``; None when none runs."""
    g = job.requested_gpus
    shape = pool.shape(g)
    plans = []
    for code in SIA_DP_CODES:
        try:
            plan = parse_plan_code(code, g, pm.model.global_batch, offload_gc=offload_runs_with_gc(pm.model))
        except ValidationError:
            continue
        if plan not in plans and plan_violation(pm.model, plan, pool.gpu_type, shape, pool.host_gib) is None:
            plans.append(plan)
    if not plans:
        return None
    return plans[int(np.argmax(pm.throughputs([(p, shape, float(cpus_per_gpu)) for p in plans])))]


def sia_plan(job: Job, pm: PerformanceModel, pool: GpuPool,
             request_plan: ExecutionPlan | None = None) -> tuple[ExecutionPlan, bool] | None:
    """(Sia's plan for ``job`` on ``pool``, whether Sia may scale it) — module docstring; None when
    the request does not fit these nodes. ``request_plan``: the plan of the request when known (the
    request-only table's), else computed the way the round table does."""
    plan = request_plan if request_plan is not None else _request_plan(job, pm, pool)
    if plan is None:
        return None
    if not plan.is_3d:
        return plan, True
    dp = _dp_fallback(job, pm, pool, pool.proportional_cpus_per_gpu)
    return (dp, True) if dp is not None else (plan, False)


def _job_key(problem: RubickRound, job: Job, params: tuple) -> tuple:
    cur = problem.current(job.name)
    return (params, job.name, job.model, job.requested_gpus, job.requested_cpus, job.requested_mem_gib,
            job.requested_plan, job.max_gpus, job.gpu_type, None if cur is None else (cur.plan, cur.placement), problem.own_rows(job.name),
            constraint_key(job))


def _given_rows(problem: RubickRound, job: Job, pick: Any) -> list[CandidateRow] | None:
    """The rows ``pick(problem, job, rows)`` chooses among the job's own coefficient rows; None when the
    job has none (its rows come from the performance model)."""
    given = problem.own_rows(job.name)
    if given is None:
        return None
    return [CandidateRow(r.plan, r.gpus_per_node, r.gpu_type, r.gpus, r.cpus, r.mem_gib, r.throughput)
            for r in (given[i] for i in pick(problem, job, given))]


def _base_request_plans(base: CoefficientTable, j: int) -> dict[str, ExecutionPlan]:
    """Job index ``j``'s request plan per GPU type, read off the request-only table (every row but the
    current one is a request; a type whose request row was merged into the current row is absent)."""
    cur = int(base.current_row[j])
    return {base.gpu_type[r]: base.plans[r] for r in base.rows_of(j) if r != cur}


def _synergy_rows(problem: RubickRound, job: Job, perf: PerfLookup, grid: tuple[int, ...],
                  known: Mapping[str, ExecutionPlan]) -> list[CandidateRow]:
    given = _given_rows(problem, job, own_rows.synergy_rows)
    if given is not None:
        return given
    cur = problem.current(job.name)
    if cur is not None:
        gpu_type = problem.cluster.node(cur.placement.shares[0][0]).gpu_type
        return _cpu_ladder(cur.plan, cur.placement.gpus_per_node, cur.placement.total_mem_gib,
                           perf(job.model, gpu_type), gpu_pool(problem.cluster, gpu_type), grid)
    rows: list[CandidateRow] = []
    for gpu_type in usable_gpu_types(problem.cluster, job):
        pm = perf(job.model, gpu_type)
        pool = gpu_pool(problem.cluster, gpu_type)
        plan = known.get(gpu_type)
        if plan is None:
            plan = _request_plan(job, pm, pool)
        if plan is not None:
            rows.extend(_cpu_ladder(plan, pool.shape(plan.num_gpus), config_host_gib(pm.model, plan), pm, pool, grid))
    return rows


def _sia_rows(problem: RubickRound, job: Job, perf: PerfLookup, growth: int,
              known: Mapping[str, ExecutionPlan]) -> list[CandidateRow]:
    given = _given_rows(problem, job, own_rows.sia_rows)
    if given is not None:
        return given
    rows: list[CandidateRow] = []
    for gpu_type in usable_gpu_types(problem.cluster, job):
        pm = perf(job.model, gpu_type)
        pool = gpu_pool(problem.cluster, gpu_type)
        chosen = sia_plan(job, pm, pool, known.get(gpu_type))
        if chosen is None:
            continue
        plan, scalable = chosen
        counts = candidate_gpu_counts(pool.per_node, job_gpu_cap(job, pool.per_node, pool.total, growth)) \
            if scalable else (job.requested_gpus,)
        rows.extend(_scaled_rows(plan, pm, pool, counts, pool.proportional_cpus_per_gpu))
    return rows


def _extend(base: CoefficientTable, extra: list[list[CandidateRow]], include_base: list[list[int]]) -> BaselineTable:
    """``base`` with ``extra[j]`` appended for every job j (a row equal to one of the job's rows in
    plan, shape, type and CPUs is not added twice); options = ``include_base[j]`` + the extra rows."""
    cols: dict[str, list] = {"job_index": list(base.job_index), "plans": list(base.plans),
                             "gpus_per_node": list(base.gpus_per_node), "gpu_type": list(base.gpu_type),
                             "gpus": list(base.gpus), "cpus": list(base.cpus), "mem_gib": list(base.mem_gib),
                             "throughput": list(base.throughput)}
    options: dict[str, tuple[int, ...]] = {}
    for j, name in enumerate(base.jobs):
        if not extra[j]:
            options[name] = tuple(sorted(set(include_base[j]))) if include_base[j] else ()
            continue
        own = {(base.plans[r], base.gpus_per_node[r], base.gpu_type[r], int(base.cpus[r])): int(r)
               for r in base.rows_of(j)}
        picked = set(include_base[j])
        for row in extra[j]:
            key = (row.plan, row.gpus_per_node, row.gpu_type, row.cpus)
            if key in own:
                picked.add(own[key])
                continue
            own[key] = len(cols["plans"])
            picked.add(own[key])
            for f, v in (("plans", row.plan), ("gpus_per_node", row.gpus_per_node), ("gpu_type", row.gpu_type),
                         ("gpus", row.gpus), ("cpus", row.cpus), ("mem_gib", row.mem_gib),
                         ("throughput", row.throughput)):
                cols[f].append(v)
            cols["job_index"].append(j)
        options[name] = tuple(sorted(picked))
    table = CoefficientTable(jobs=base.jobs, job_index=np.array(cols["job_index"], dtype=np.int64),
                             plans=tuple(cols["plans"]), gpus_per_node=tuple(cols["gpus_per_node"]),
                             gpu_type=tuple(cols["gpu_type"]), gpus=np.array(cols["gpus"], dtype=np.int64),
                             cpus=np.array(cols["cpus"], dtype=np.int64),
                             mem_gib=np.array(cols["mem_gib"], dtype=float),
                             throughput=np.array(cols["throughput"], dtype=float),
                             reference_throughput=base.reference_throughput, current_row=base.current_row)
    return BaselineTable(table, MappingProxyType(options))


def _lookup(problem: RubickRound, perf: PerfLookup | None, cache: BaselineCache | None
            ) -> tuple[PerfLookup, dict[tuple, list[CandidateRow]]]:
    if cache is not None:
        return cache.bind(problem, perf), cache.rows
    return perf or round_lookup(problem), {}


def _expired(deadline: Deadline | None) -> bool:
    return deadline is not None and deadline.expired()


def _allowed(job: Job, lookup: PerfLookup, rows: list[CandidateRow]) -> list[CandidateRow]:
    """``rows`` restricted to the lookup's allowed configurations, when it has any (module docstring)."""
    allowed = allowed_configs(lookup)
    return rows if allowed is None else restrict_rows(job, rows, allowed)


def _base_table(problem: RubickRound, lookup: PerfLookup, cache: BaselineCache | None, deadline: Deadline | None,
                left_out: list[str] | None) -> tuple[CoefficientTable, set[int]]:
    """The request-only table and the indices of the jobs it left out for the ``deadline`` (they get no
    other rows either; their names are appended to ``left_out``)."""
    out: list[str] = []
    base = build_round_table(problem, lookup, fixed_plan=True, fixed_resources=True,
                             cache=None if cache is None else cache.round, deadline=deadline, left_out=out)
    if left_out is not None:
        left_out.extend(out)
    return base, {base.job_position[name] for name in out}


def request_table(problem: RubickRound, perf: PerfLookup | None = None, *, cache: BaselineCache | None = None,
                  deadline: Deadline | None = None, left_out: list[str] | None = None) -> CoefficientTable:
    """The request-only table of FIFO and AntMan (module docstring); ``deadline`` and ``left_out`` as
    for :func:`~optsched.rounds.rubick.table.build_round_table`."""
    lookup, _ = _lookup(problem, perf, cache)
    return build_round_table(problem, lookup, fixed_plan=True, fixed_resources=True,
                             cache=None if cache is None else cache.round, deadline=deadline, left_out=left_out)


def synergy_table(problem: RubickRound, perf: PerfLookup | None = None, *,
                  cpus_per_gpu: tuple[int, ...] = SYNERGY_CPUS_PER_GPU, cache: BaselineCache | None = None,
                  deadline: Deadline | None = None, left_out: list[str] | None = None) -> BaselineTable:
    """Synergy's table and each job's CPU ladder (module docstring). Options: a queued job's request
    rows and ladders; a running job's current row and the ladder of its current plan and nodes. Past
    the ``deadline`` jobs get no ladder (``left_out`` as for the request-only table)."""
    if not cpus_per_gpu or any(isinstance(c, bool) or not isinstance(c, int) or c < 1 for c in cpus_per_gpu):
        raise ValidationError(f"synergy_table: cpus_per_gpu must be positive integers, got {cpus_per_gpu!r}")
    lookup, memo = _lookup(problem, perf, cache)
    base, skipped = _base_table(problem, lookup, cache, deadline, left_out)
    extra, include = [], []
    for j, job in enumerate(problem.jobs):
        if j in skipped:
            extra.append([])
            include.append(base.rows_of(j).tolist())
            continue
        key = _job_key(problem, job, ("synergy", tuple(cpus_per_gpu)))
        if key not in memo and not _expired(deadline):
            memo[key] = admissible_rows(host_memory_rows(_allowed(job, lookup, _synergy_rows(
                problem, job, lookup, tuple(cpus_per_gpu), _base_request_plans(base, j))), job), job)
        extra.append(memo.get(key, []))
        cur = int(base.current_row[j])
        include.append([cur] if cur >= 0 else base.rows_of(j).tolist())
    return _extend(base, extra, include)


def sia_table(problem: RubickRound, perf: PerfLookup | None = None, *, growth: int = DEFAULT_GROWTH,
              cache: BaselineCache | None = None, deadline: Deadline | None = None,
              left_out: list[str] | None = None) -> BaselineTable:
    """Sia's table and each job's scaling ladder (module docstring). A job whose ladder is empty on
    every GPU type (its request cannot run at proportional CPUs) gets its request rows instead, and so
    does a job past the ``deadline`` (``left_out`` as for the request-only table)."""
    lookup, memo = _lookup(problem, perf, cache)
    base, skipped = _base_table(problem, lookup, cache, deadline, left_out)
    extra, include = [], []
    for j, job in enumerate(problem.jobs):
        if j in skipped:
            extra.append([])
            include.append(base.rows_of(j).tolist())
            continue
        key = _job_key(problem, job, ("sia", growth))
        if key not in memo and not _expired(deadline):
            memo[key] = admissible_rows(host_memory_rows(_allowed(job, lookup, _sia_rows(
                problem, job, lookup, growth, _base_request_plans(base, j))), job), job)
        rows = memo.get(key, [])
        extra.append(rows)
        own = [r for r in base.rows_of(j).tolist() if r != base.current_row[j]]
        include.append([] if rows else own)
    return _extend(base, extra, include)


__all__ = ["BaselineCache", "BaselineTable", "SIA_DP_CODES", "SYNERGY_CPUS_PER_GPU",
           "request_table", "sia_plan", "sia_table", "synergy_table"]

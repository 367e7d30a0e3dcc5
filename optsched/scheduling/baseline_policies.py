"""The baseline round policies of the Rubick evaluation (Sec. 7.3, Table 4): FIFO, Synergy-like,
Sia-like and AntMan-like, as :class:`~optsched.scheduling.solve.Policy` objects, plus the tables they
choose from.

Each policy builds its table, runs its scheduler from :mod:`optsched.heuristics.baselines` and returns
``to_decision(..., status="heuristic")``, scored by the same round objective as every other method.
:data:`BASELINE_POLICIES` maps method names to factories ``(time_limit, seed, perf,
defer_unreachable_guarantees=False) -> Policy``, the signature of
:data:`optsched.scheduling.solve.POLICIES` (the baselines ignore the time limit and the seed: they are
deterministic and run in milliseconds; and the deferral flag: no baseline fails a round on a
performance guarantee — only AntMan protects guaranteed jobs, and only those it can run).

Tables (this is where the baselines meet the performance model; the schedulers read only the table):

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
  (:func:`~optsched.scheduling.rubick_table.job_gpu_cap`, the cap Rubick's table uses) at
  GPU-proportional CPUs. The Sia plan is the request's plan when it is data-parallel; for a 3D
  request, the fastest data-parallel-family plan (``dp``, ``ga``, ``gc``, ``zero-dp``,
  ``zero-offload`` with the model's offload-GC setting, :func:`~optsched.core.plan.parse_plan_code`)
  that runs on the requested GPUs, else the 3D plan itself on its requested GPUs only (Rubick
  footnote 2: "if a model cannot run using DP (even when ZeRO/GA/GC), the job fallbacks to a feasible
  3D-parallel plan with the resource scaling disabled"). Scaling keeps the plan's ZeRO mode and GC;
  since the global batch is fixed, the per-replica batch shrinks as DP grows and the GA steps drop to
  the largest divisor of it not above the plan's (the way ``parse_plan_code`` reads ``ga``); a GPU
  count whose DP size does not divide the global batch, or that breaks topology or memory, is skipped.

The policies keep a :class:`BaselineCache` (the round table's cache plus the extra rows per job), so a
simulator's rounds cost list work once the performance models are warm; the tables are the same with
or without it.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Callable, Mapping

import numpy as np

from optsched.core.errors import ValidationError
from optsched.core.job import Job
from optsched.core.plan import ExecutionPlan, check_plan_for_model, offload_runs_with_gc, parse_plan_code
from optsched.core.round import Decision, RoundProblem
from optsched.heuristics.baselines import (NO_GUARANTEES, SYNERGY_TUNE_FRACTION, antman_round,
                                           proportional_cpus_per_gpu, schedule_fifo, schedule_sia, schedule_synergy)
from optsched.perf.coefficients import HOST_BASE_GIB_PER_GPU, CoefficientTable, candidate_gpu_counts
from optsched.perf.memory import estimate_memory, memory_violation
from optsched.perf.performance_model import PerformanceModel
from optsched.perf.plans import enumerate_plans, topology_violation
from optsched.perf.sensitivity import packed_placement
from optsched.scheduling.rubick_eval import Admission, Choice, heuristic_decision
from optsched.scheduling.rubick_table import (DEFAULT_GROWTH, PerfLookup, RoundTableCache, build_round_table,
                                              default_perf_lookup, job_gpu_cap, requested_cpus)

log = logging.getLogger(__name__)

#: CPUs per GPU a Synergy ladder offers (capped by one node's CPUs over the job's largest part)
SYNERGY_CPUS_PER_GPU: tuple[int, ...] = (1, 2, 3, 4, 6, 8, 10, 12, 16, 24, 32, 48, 64, 96)
#: data-parallel-family plan codes Sia falls back to for a 3D request (Rubick footnote 2)
SIA_DP_CODES: tuple[str, ...] = ("dp", "ga", "gc", "zero-dp", "zero-offload")

#: one row: (plan, GPUs per node, GPU type, GPUs, CPUs, host GiB, predicted throughput)
_Row = tuple[ExecutionPlan, tuple[int, ...], str, int, int, float, float]


@dataclass
class BaselineCache:
    """What a baseline's tables reuse from one round to the next: the round table's cache
    (:class:`~optsched.scheduling.rubick_table.RoundTableCache`) and each job's extra rows, keyed by
    everything they depend on (request, running configuration, table parameters). Cleared when the
    cluster or the performance lookup changes. Not thread-safe."""

    round: RoundTableCache = field(default_factory=RoundTableCache)
    rows: dict[tuple, list[_Row]] = field(default_factory=dict)
    bound: tuple[Any, Any] = (None, None)

    def bind(self, problem: RoundProblem, perf: PerfLookup | None) -> PerfLookup:
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
def _types(problem: RoundProblem, job: Job) -> list[str]:
    if job.gpu_type is not None:
        return [job.gpu_type]
    return sorted({n.gpu_type for n in problem.cluster.nodes if n.num_gpus > 0})


def _type_info(problem: RoundProblem, gpu_type: str) -> tuple[int, int, int, float, float]:
    """(GPUs per node, total GPUs, CPUs of the poorest node, its CPUs per GPU, host GiB of the poorest
    node) of the nodes of ``gpu_type`` (the round table's node model)."""
    nodes = [n for n in problem.cluster.nodes_of_type(gpu_type) if n.num_gpus > 0]
    return (max(n.num_gpus for n in nodes), sum(n.num_gpus for n in nodes), min(n.num_cpus for n in nodes),
            min(n.num_cpus / n.num_gpus for n in nodes), min(n.memory_gib for n in nodes))


def _host_left(host_gib: float, shape: tuple[int, ...]) -> tuple[float, ...]:
    return tuple(host_gib - n * HOST_BASE_GIB_PER_GPU for n in shape)


def _runs(pm: PerformanceModel, problem: RoundProblem, gpu_type: str, plan: ExecutionPlan,
          shape: tuple[int, ...], host_gib: float) -> bool:
    """Whether ``plan`` runs on ``shape`` (batch divisibility, topology, GPU and host memory)."""
    try:
        check_plan_for_model(plan, pm.model)
    except ValidationError:
        return False
    left = _host_left(host_gib, shape)
    return (min(left) >= 0 and topology_violation(pm.model, plan, shape) is None
            and memory_violation(pm.model, plan, problem.cluster.gpu_type(gpu_type), shape, left) is None)


def _mem(pm: PerformanceModel, plan: ExecutionPlan) -> float:
    return plan.num_gpus * (HOST_BASE_GIB_PER_GPU + estimate_memory(pm.model, plan).host_gib_per_gpu)


def _request_plan(job: Job, pm: PerformanceModel, problem: RoundProblem, gpu_type: str) -> ExecutionPlan | None:
    """The plan of the job's request on ``gpu_type`` as the round table defines it: the requested
    plan, or the fastest enumerated plan on the packed request at the requested CPUs; None when the
    request does not fit these nodes."""
    per_node, total, _, ratio, host = _type_info(problem, gpu_type)
    if job.requested_gpus > total:
        return None
    shape = packed_placement(job.requested_gpus, per_node)
    if job.requested_plan is not None:
        return job.requested_plan if _runs(pm, problem, gpu_type, job.requested_plan, shape, host) else None
    left = _host_left(host, shape)
    if min(left) < 0:
        return None
    plans = enumerate_plans(pm.model, shape, problem.cluster.gpu_type(gpu_type), left)
    if not plans:
        return None
    cpg = requested_cpus(job, ratio) / job.requested_gpus
    return plans[int(np.argmax(pm.throughputs([(p, shape, cpg) for p in plans])))]


def _scaled_rows(plan: ExecutionPlan, pm: PerformanceModel, problem: RoundProblem, gpu_type: str,
                 counts: tuple[int, ...], cpus_per_gpu: int) -> list[_Row]:
    """``plan`` with its DP size scaled to each count of ``counts`` it runs on (packed), at
    ``cpus_per_gpu`` CPUs per GPU; GA steps drop to the largest divisor of the per-replica batch not
    above the plan's (module docstring)."""
    per_node, _, _, _, host = _type_info(problem, gpu_type)
    configs: list[tuple[ExecutionPlan, tuple[int, ...], float]] = []
    for g in counts:
        if g % (plan.tp * plan.pp):
            continue
        shape = packed_placement(g, per_node)
        dp = g // (plan.tp * plan.pp)
        per_replica, rest = divmod(pm.model.global_batch, dp)
        if rest or per_replica == 0:
            continue
        ga = max(a for a in range(1, plan.ga_steps + 1) if per_replica % a == 0)
        scaled = replace(plan, dp=dp, ga_steps=ga)
        if _runs(pm, problem, gpu_type, scaled, shape, host):
            configs.append((scaled, shape, float(cpus_per_gpu)))
    if not configs:
        return []
    thr = pm.throughputs(configs)
    return [(p, s, gpu_type, p.num_gpus, cpus_per_gpu * p.num_gpus, _mem(pm, p), float(t))
            for (p, s, _), t in zip(configs, thr)]


def _cpu_ladder(plan: ExecutionPlan, shape: tuple[int, ...], mem: float, pm: PerformanceModel,
                problem: RoundProblem, gpu_type: str, grid: tuple[int, ...]) -> list[_Row]:
    """``plan`` on ``shape`` at each CPU share of ``grid`` (plus the proportional one) that one node
    can give the largest part, all with host memory ``mem``."""
    node_cpus = _type_info(problem, gpu_type)[2]
    top = node_cpus // max(shape)
    shares = sorted({c for c in grid if c <= top} | {min(proportional_cpus_per_gpu(problem, gpu_type), max(top, 1))})
    shares = [c for c in shares if c >= 1]
    if not shares:
        return []
    g = sum(shape)
    thr = pm.throughputs([(plan, shape, float(c)) for c in shares])
    return [(plan, shape, gpu_type, g, c * g, mem, float(t)) for c, t in zip(shares, thr)]


def _dp_fallback(job: Job, pm: PerformanceModel, problem: RoundProblem, gpu_type: str, cpus_per_gpu: int
                 ) -> ExecutionPlan | None:
    """The fastest data-parallel-family plan (:data:`SIA_DP_CODES`) on the job's packed request, at
    ``cpus_per_gpu``; None when none runs."""
    per_node, _, _, _, host = _type_info(problem, gpu_type)
    g = job.requested_gpus
    shape = packed_placement(g, per_node)
    plans = []
    for code in SIA_DP_CODES:
        try:
            plan = parse_plan_code(code, g, pm.model.global_batch, offload_gc=offload_runs_with_gc(pm.model))
        except ValidationError:
            continue
        if plan not in plans and _runs(pm, problem, gpu_type, plan, shape, host):
            plans.append(plan)
    if not plans:
        return None
    return plans[int(np.argmax(pm.throughputs([(p, shape, float(cpus_per_gpu)) for p in plans])))]


def sia_plan(job: Job, pm: PerformanceModel, problem: RoundProblem, gpu_type: str,
             request_plan: ExecutionPlan | None = None) -> tuple[ExecutionPlan, bool] | None:
    """(Sia's plan for ``job`` on ``gpu_type``, whether Sia may scale it) — module docstring; None when
    the request does not fit these nodes. ``request_plan``: the plan of the request when known (the
    request-only table's), else computed the way the round table does."""
    plan = request_plan if request_plan is not None else _request_plan(job, pm, problem, gpu_type)
    if plan is None:
        return None
    if not plan.is_3d:
        return plan, True
    dp = _dp_fallback(job, pm, problem, gpu_type, proportional_cpus_per_gpu(problem, gpu_type))
    return (dp, True) if dp is not None else (plan, False)


def _job_key(problem: RoundProblem, job: Job, params: tuple) -> tuple:
    cur = problem.current(job.name)
    return (params, job.name, job.model, job.requested_gpus, job.requested_cpus, job.requested_plan, job.max_gpus,
            job.gpu_type, None if cur is None else (cur.plan, cur.placement))


def _base_request_plans(base: CoefficientTable, j: int) -> dict[str, ExecutionPlan]:
    """Job index ``j``'s request plan per GPU type, read off the request-only table (every row but the
    current one is a request; a type whose request row was merged into the current row is absent)."""
    cur = int(base.current_row[j])
    return {base.gpu_type[r]: base.plans[r] for r in np.flatnonzero(base.job_index == j) if r != cur}


def _request_plan_of(known: Mapping[str, ExecutionPlan], job: Job, pm: PerformanceModel, problem: RoundProblem,
                     gpu_type: str) -> ExecutionPlan | None:
    plan = known.get(gpu_type)
    return plan if plan is not None else _request_plan(job, pm, problem, gpu_type)


def _synergy_rows(problem: RoundProblem, job: Job, perf: PerfLookup, grid: tuple[int, ...],
                  known: Mapping[str, ExecutionPlan]) -> list[_Row]:
    cur = problem.current(job.name)
    if cur is not None:
        gpu_type = problem.cluster.node(cur.placement.shares[0][0]).gpu_type
        return _cpu_ladder(cur.plan, cur.placement.gpus_per_node, cur.placement.total_mem_gib,
                           perf(job.model, gpu_type), problem, gpu_type, grid)
    rows: list[_Row] = []
    for gpu_type in _types(problem, job):
        pm = perf(job.model, gpu_type)
        plan = _request_plan_of(known, job, pm, problem, gpu_type)
        if plan is not None:
            shape = packed_placement(job.requested_gpus, _type_info(problem, gpu_type)[0])
            rows.extend(_cpu_ladder(plan, shape, _mem(pm, plan), pm, problem, gpu_type, grid))
    return rows


def _sia_rows(problem: RoundProblem, job: Job, perf: PerfLookup, growth: int,
              known: Mapping[str, ExecutionPlan]) -> list[_Row]:
    rows: list[_Row] = []
    for gpu_type in _types(problem, job):
        pm = perf(job.model, gpu_type)
        chosen = sia_plan(job, pm, problem, gpu_type, known.get(gpu_type))
        if chosen is None:
            continue
        plan, scalable = chosen
        per_node, total, _, _, _ = _type_info(problem, gpu_type)
        counts = candidate_gpu_counts(per_node, job_gpu_cap(job, per_node, total, growth)) if scalable \
            else (job.requested_gpus,)
        rows.extend(_scaled_rows(plan, pm, problem, gpu_type, counts, proportional_cpus_per_gpu(problem, gpu_type)))
    return rows


def _extend(base: CoefficientTable, extra: list[list[_Row]], include_base: list[list[int]]) -> BaselineTable:
    """``base`` with ``extra[j]`` appended for every job j (a row equal to one of the job's rows in
    plan, shape, type and CPUs is not added twice); options = ``include_base[j]`` + the extra rows."""
    cols: dict[str, list] = {"job_index": list(base.job_index), "plans": list(base.plans),
                             "gpus_per_node": list(base.gpus_per_node), "gpu_type": list(base.gpu_type),
                             "gpus": list(base.gpus), "cpus": list(base.cpus), "mem_gib": list(base.mem_gib),
                             "throughput": list(base.throughput)}
    options: dict[str, tuple[int, ...]] = {}
    for j, name in enumerate(base.jobs):
        own = {(base.plans[r], base.gpus_per_node[r], base.gpu_type[r], int(base.cpus[r])): int(r)
               for r in np.flatnonzero(base.job_index == j)}
        picked = set(include_base[j])
        for row in extra[j]:
            key = (row[0], row[1], row[2], row[4])
            if key in own:
                picked.add(own[key])
                continue
            own[key] = len(cols["plans"])
            picked.add(own[key])
            for f, v in zip(("plans", "gpus_per_node", "gpu_type", "gpus", "cpus", "mem_gib", "throughput"), row):
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


def _lookup(problem: RoundProblem, perf: PerfLookup | None, cache: BaselineCache | None
            ) -> tuple[PerfLookup, dict[tuple, list[_Row]]]:
    if cache is not None:
        return cache.bind(problem, perf), cache.rows
    return perf or default_perf_lookup(problem), {}


def request_table(problem: RoundProblem, perf: PerfLookup | None = None, *,
                  cache: BaselineCache | None = None) -> CoefficientTable:
    """The request-only table of FIFO and AntMan (module docstring)."""
    lookup, _ = _lookup(problem, perf, cache)
    return build_round_table(problem, lookup, fixed_plan=True, fixed_resources=True,
                             cache=None if cache is None else cache.round)


def synergy_table(problem: RoundProblem, perf: PerfLookup | None = None, *,
                  cpus_per_gpu: tuple[int, ...] = SYNERGY_CPUS_PER_GPU,
                  cache: BaselineCache | None = None) -> BaselineTable:
    """Synergy's table and each job's CPU ladder (module docstring). Options: a queued job's request
    rows and ladders; a running job's current row and the ladder of its current plan and nodes."""
    if not cpus_per_gpu or any(isinstance(c, bool) or not isinstance(c, int) or c < 1 for c in cpus_per_gpu):
        raise ValidationError(f"synergy_table: cpus_per_gpu must be positive integers, got {cpus_per_gpu!r}")
    lookup, memo = _lookup(problem, perf, cache)
    base = build_round_table(problem, lookup, fixed_plan=True, fixed_resources=True,
                             cache=None if cache is None else cache.round)
    extra, include = [], []
    for j, job in enumerate(problem.jobs):
        key = _job_key(problem, job, ("synergy", tuple(cpus_per_gpu)))
        if key not in memo:
            memo[key] = _synergy_rows(problem, job, lookup, tuple(cpus_per_gpu), _base_request_plans(base, j))
        extra.append(memo[key])
        cur = int(base.current_row[j])
        include.append([cur] if cur >= 0 else [int(r) for r in np.flatnonzero(base.job_index == j)])
    return _extend(base, extra, include)


def sia_table(problem: RoundProblem, perf: PerfLookup | None = None, *, growth: int = DEFAULT_GROWTH,
              cache: BaselineCache | None = None) -> BaselineTable:
    """Sia's table and each job's scaling ladder (module docstring). A job whose ladder is empty on
    every GPU type (its request cannot run at proportional CPUs) gets its request rows instead."""
    lookup, memo = _lookup(problem, perf, cache)
    base = build_round_table(problem, lookup, fixed_plan=True, fixed_resources=True,
                             cache=None if cache is None else cache.round)
    extra, include = [], []
    for j, job in enumerate(problem.jobs):
        key = _job_key(problem, job, ("sia", growth))
        if key not in memo:
            memo[key] = _sia_rows(problem, job, lookup, growth, _base_request_plans(base, j))
        extra.append(memo[key])
        own = [int(r) for r in np.flatnonzero(base.job_index == j) if r != base.current_row[j]]
        include.append([] if memo[key] else own)
    return _extend(base, extra, include)


# -- policies ----------------------------------------------------------------------------------------
def _decision(problem: RoundProblem, table: CoefficientTable, choices: Mapping[str, Choice], name: str,
              t0: float, admission: Admission, message: str = "") -> Decision:
    return heuristic_decision(problem, table, choices, method=name, started=t0, admission=admission,
                              message=message)


@dataclass(frozen=True)
class FifoPolicy:
    """:func:`~optsched.heuristics.baselines.schedule_fifo` on the request-only table (strict FIFO,
    or with ``backfill``)."""

    name: str = "fifo"
    backfill: bool = False
    perf: PerfLookup | None = field(default=None, compare=False)
    cache: BaselineCache = field(default_factory=BaselineCache, compare=False, repr=False)

    def table(self, problem: RoundProblem) -> CoefficientTable:
        return request_table(problem, self.perf, cache=self.cache)

    def decide(self, problem: RoundProblem) -> Decision:
        t0 = time.perf_counter()
        table = self.table(problem)
        return _decision(problem, table, schedule_fifo(problem, table, backfill=self.backfill), self.name, t0,
                         NO_GUARANTEES)


@dataclass(frozen=True)
class AntManPolicy:
    """:func:`~optsched.heuristics.baselines.antman_round` on the request-only table; the decision
    protects the guaranteed jobs AntMan runs at their request's throughput."""

    name: str = "antman"
    perf: PerfLookup | None = field(default=None, compare=False)
    cache: BaselineCache = field(default_factory=BaselineCache, compare=False, repr=False)

    def table(self, problem: RoundProblem) -> CoefficientTable:
        return request_table(problem, self.perf, cache=self.cache)

    def decide(self, problem: RoundProblem) -> Decision:
        t0 = time.perf_counter()
        table = self.table(problem)
        result = antman_round(problem, table)
        message = f"preempted for guaranteed jobs: {', '.join(result.preempted)}" if result.preempted else ""
        return _decision(problem, table, result.choices, self.name, t0, result.admission, message)


@dataclass(frozen=True)
class SynergyPolicy:
    """:func:`~optsched.heuristics.baselines.schedule_synergy` on :func:`synergy_table`."""

    name: str = "synergy"
    tune_fraction: float = SYNERGY_TUNE_FRACTION
    backfill: bool = True
    perf: PerfLookup | None = field(default=None, compare=False)
    cache: BaselineCache = field(default_factory=BaselineCache, compare=False, repr=False)

    def table(self, problem: RoundProblem) -> BaselineTable:
        return synergy_table(problem, self.perf, cache=self.cache)

    def decide(self, problem: RoundProblem) -> Decision:
        t0 = time.perf_counter()
        bt = self.table(problem)
        choices = schedule_synergy(problem, bt.table, options=bt.options, tune_fraction=self.tune_fraction,
                                   backfill=self.backfill)
        return _decision(problem, bt.table, choices, self.name, t0, NO_GUARANTEES)


@dataclass(frozen=True)
class SiaPolicy:
    """:func:`~optsched.heuristics.baselines.schedule_sia` on :func:`sia_table`."""

    name: str = "sia"
    growth: int = DEFAULT_GROWTH
    perf: PerfLookup | None = field(default=None, compare=False)
    cache: BaselineCache = field(default_factory=BaselineCache, compare=False, repr=False)

    def table(self, problem: RoundProblem) -> BaselineTable:
        return sia_table(problem, self.perf, growth=self.growth, cache=self.cache)

    def decide(self, problem: RoundProblem) -> Decision:
        t0 = time.perf_counter()
        bt = self.table(problem)
        return _decision(problem, bt.table, schedule_sia(problem, bt.table, ladders=bt.options), self.name, t0,
                         NO_GUARANTEES)


BaselinePolicy = FifoPolicy | AntManPolicy | SynergyPolicy | SiaPolicy

#: baseline method names -> factory(time_limit, seed, perf, defer_unreachable_guarantees=False), the
#: signature of ``solve.POLICIES`` (the flag is ignored: module docstring)
BASELINE_POLICIES: dict[str, Callable[[float, int, PerfLookup | None, bool], BaselinePolicy]] = {
    "fifo": lambda tl, seed, perf, defer=False: FifoPolicy("fifo", perf=perf),
    "fifo-backfill": lambda tl, seed, perf, defer=False: FifoPolicy("fifo-backfill", backfill=True, perf=perf),
    "synergy": lambda tl, seed, perf, defer=False: SynergyPolicy("synergy", perf=perf),
    "sia": lambda tl, seed, perf, defer=False: SiaPolicy("sia", perf=perf),
    "antman": lambda tl, seed, perf, defer=False: AntManPolicy("antman", perf=perf),
}


__all__ = ["AntManPolicy", "BASELINE_POLICIES", "BaselineCache", "BaselinePolicy", "BaselineTable", "FifoPolicy", "SIA_DP_CODES",
           "SYNERGY_CPUS_PER_GPU", "SiaPolicy", "SynergyPolicy", "request_table", "sia_plan", "sia_table",
           "synergy_table"]

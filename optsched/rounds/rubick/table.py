"""The coefficient table of a Rubick round: every job's candidate configurations (plan, GPUs per
node, CPUs, memory, predicted throughput), its reference throughput and its running configuration.

This is where a round meets the performance model; the heuristic and the exact formulation read only
the table this module builds (DESIGN.md, "A formulation takes a RoundProblem plus a CoefficientTable").

Rows of a job (per GPU type it may use: its pinned type, or every type in the cluster):

* the candidates of :func:`~optsched.perf.coefficients.build_coefficient_table` up to the job's GPU
  cap (computed once per model type, GPU type and cap, then shared by every job of that model type:
  Rubick Sec. 4.3, "reused across multiple jobs of the same model type");
* its **request**: the requested plan (or the best enumerated plan when the user gave none) on the
  packed placement of the requested GPUs with the requested CPUs;
* for a running job, its **current** configuration (plan, per-node GPUs, held CPUs and memory), so
  "keep running as is" is always a row (``current_row``).

Choices where the paper is silent:

* **GPU cap.** A job is offered at most ``job.max_gpus`` GPUs when set, else
  ``max(G, growth x requested)`` GPUs (G = GPUs per node, ``growth`` = 4 by default), never more than
  the GPUs of that type. Rubick grows jobs along their sensitivity curves; the cap keeps the table
  (and the exact model) linear in the number of jobs on large clusters.
* **Requested CPUs.** A job that requests 0 CPUs is taken to request ``min(8, node CPUs per GPU)``
  per GPU, the CPU share of the Rubick measurements (:meth:`~optsched.core.job.Job.cpus_or_default`).
* **Reference throughput** = the throughput of the request row, > 0 (the fastest over the GPU types
  the job may use). A requested plan that cannot run on its request (memory, topology, batch
  divisibility) on a GPU type gives no request row there (the job's other configurations on that type
  stay; a ``plan_fixed`` job then has none there); on every type it may use, an error naming the job.
* **Ablations** (Rubick Table 4). ``fixed_plan`` keeps each job's plan (its requested plan, or the
  best plan of its request when it gave none) and scales only its DP size with the GPU count, the
  way Sia and Rubick-R scale 3D jobs ("changes the DP size when scaling GPUs"); ``fixed_resources``
  offers only the requested GPUs (packed) and CPUs, with every enumerated plan. Both together leave
  the request alone (Rubick-N). The running configuration is offered in every variant.
* **Allowed configurations** (a :class:`~optsched.perf.lookup.RestrictedLookup`, e.g. ``optsched
  simulate --configs measured``): only rows the filter accepts stay (the running configuration always
  does). A job whose request is not allowed gets a *stand-in* request: the fastest allowed plan (by
  the policy's model, at the requested CPUs per GPU) on the packed placement of the requested GPUs, or
  of the nearest GPU count that has one (the smallest above, else the largest below), so that every
  policy, request-only baselines too, has an allowed row for it when one exists at all. The
  stand-in replaces the request: its throughput is the job's reference throughput (the
  normalisation, and a guaranteed job's performance guarantee).
* **Dominance.** A row is dropped when another row of the same job and GPU type needs no more GPUs,
  CPUs or memory and is at least as fast (ties: the earlier row stays); the current row is never
  dropped. This leaves roughly 10-25 rows per job on the 8x8 cluster.
* **Host memory** (issue 16, item 3). A row's host memory is at least the job's requested memory per
  requested GPU times the row's GPUs (the request is a minimum for every job: host memory is what a
  cluster enforces as a hard limit, so less than asked for can kill the job), and it is rounded up to a
  multiple of :data:`MEM_GRANULARITY_GIB` per GPU (1/16 GiB, 64 MiB), so every part of a row, and so every
  share in a decision, is a multiple of 1/16 GiB (:func:`host_memory_rows`). The current row keeps the
  memory the job holds. Requested CPUs are not a minimum: CPUs are a performance resource, the rows'
  throughputs account for them and a guaranteed job's guarantee is its request's throughput. A queued job
  none of whose rows fits the host memory of any node of its GPU type (e.g. ``requested_mem_gib: 1e300``)
  is an invalid job naming the memory it asks for and the most a node holds (:func:`check_memory_fits`).
* **Invalid jobs** (``on_invalid_job``, :mod:`optsched.core.skip`). Every error building a job's rows is
  the job's own (a model no lookup defines, a requested plan that cannot run on its request, a request no
  GPU type runs, own rows without the request or the running configuration), and every table variant
  (full, ablations, baselines) meets it while building the job's request and running rows, which
  the request-only block holds. :func:`invalid_jobs` builds that block for each job (shared through the
  cache with the request-only table) and returns each failing job with its error; in a round that skips
  invalid jobs every method first takes them out (:func:`valid_round`), so the tables never meet them
  and all methods report the same jobs skipped.
* **Own coefficients** (issue 16). A job the round gives its own rows (``RubickRound.coefficients``)
  gets a block made of those rows only, chosen per variant by :mod:`optsched.rounds.rubick.own_rows`
  (which also gives its reference throughput and matches its running configuration); no performance
  model is asked. Its rows come in the given order; dominance is applied only among rows of the same
  GPU type and shape (GPUs per node), since the caller's shapes need not be packed and a row that
  places where a faster one does not must stay.
"""

from __future__ import annotations

import itertools
import logging
import math
from dataclasses import dataclass, field, replace
from typing import Sequence

import numpy as np

from optsched.core.coefficient_rows import CoefficientRow
from optsched.core.deadline import Deadline
from optsched.core.errors import PlanInfeasibleError, ValidationError
from optsched.core.job import Job
from optsched.core.plan import ExecutionPlan
from optsched.core.pool import GpuPool, gpu_pool, usable_gpu_types
from optsched.core.skip import SkippedJob
from optsched.perf.coefficients import CoefficientTable, build_coefficient_table, candidate_gpu_counts
from optsched.perf.lookup import ConfigFilter, PerfLookup, allowed_configs, default_perf_lookup, round_perf_lookup
from optsched.perf.memory import config_host_gib, host_room
from optsched.perf.performance_model import PerformanceModel
from optsched.perf.plans import enumerate_plans, plan_violation
from optsched.rounds.rubick import own_rows
from optsched.rounds.rubick.constraints import admissible_rows, constraint_key
from optsched.rounds.rubick.problem import RubickRound

log = logging.getLogger(__name__)

#: default growth factor of the GPU cap (module docstring)
DEFAULT_GROWTH = 4
#: host memory of a row is a multiple of this many GiB per GPU (module docstring, "Host memory")
MEM_GRANULARITY_GIB = 1.0 / 16
#: default CPUs per GPU of the candidate rows (:func:`build_round_table`)
DEFAULT_CPUS_PER_GPU_OPTIONS: tuple[int, ...] = (2, 4, 8, 12)


@dataclass(frozen=True)
class CandidateRow:
    """One candidate configuration of a job before it joins the table: ``plan`` on ``gpus_per_node``
    GPUs of ``gpu_type`` (``gpus`` in all) with ``cpus`` CPUs and ``mem_gib`` GiB of host memory, at
    ``throughput`` samples/s."""

    plan: ExecutionPlan
    gpus_per_node: tuple[int, ...]
    gpu_type: str
    gpus: int
    cpus: int
    mem_gib: float
    throughput: float

    def same_config(self, other: "CandidateRow") -> bool:
        """Same plan, shape, GPU type, GPUs, CPUs and (to 1e-9 GiB) memory."""
        return (self.plan == other.plan and self.gpus_per_node == other.gpus_per_node
                and self.gpu_type == other.gpu_type and self.gpus == other.gpus and self.cpus == other.cpus
                and abs(self.mem_gib - other.mem_gib) < 1e-9)


def job_gpu_cap(job: Job, per_node: int, total: int, growth: int = DEFAULT_GROWTH) -> int:
    """GPU cap of ``job`` on nodes of ``per_node`` GPUs, ``total`` GPUs of the type (module docstring)."""
    cap = job.max_gpus if job.max_gpus is not None else max(per_node, growth * job.requested_gpus)
    return max(1, min(cap, total))


def request_plan(job: Job, perf: PerformanceModel, pool: GpuPool, *, strict: bool = True
                 ) -> tuple[ExecutionPlan, float] | None:
    """The plan of ``job``'s request on ``pool`` and its throughput: the requested plan, or the fastest
    enumerated plan on the packed request at the requested CPUs; None when the request does not fit
    these nodes (too many GPUs, or no plan runs). A requested plan that cannot run on its request
    raises ``PlanInfeasibleError`` naming the job (``strict=False``: None)."""
    if job.requested_gpus > pool.total:
        return None
    shape = pool.shape(job.requested_gpus)
    cpus_per_gpu = job.cpus_or_default(pool.cpus_per_gpu) / job.requested_gpus
    if job.requested_plan is not None:
        plan = job.requested_plan
        reason = plan_violation(perf.model, plan, pool.gpu_type, shape, pool.host_gib)
        if reason is not None:
            if not strict:
                return None
            raise PlanInfeasibleError(
                f"job {job.name!r}: requested plan {plan.label} cannot run on its requested {job.requested_gpus} "
                f"{pool.gpu_type.name} GPUs {shape}: {reason}")
        return plan, float(perf.throughput(plan, shape, cpus_per_gpu))
    room = host_room(pool.host_gib, shape)
    if min(room) < 0:
        return None
    plans = enumerate_plans(perf.model, shape, pool.gpu_type, room)
    if not plans:
        return None
    t = perf.throughputs([(p, shape, cpus_per_gpu) for p in plans])
    k = int(np.argmax(t))
    return plans[k], float(t[k])


def _request_row(job: Job, perf: PerformanceModel, pool: GpuPool) -> CandidateRow | None:
    """The row of the job's request on ``pool`` (:func:`request_plan` on the packed request with the
    requested CPUs); None when the request does not fit these nodes at all."""
    found = request_plan(job, perf, pool)
    if found is None:
        return None
    plan, thr = found
    shape = pool.shape(job.requested_gpus)
    return CandidateRow(plan, shape, pool.gpu_type.name, sum(shape), job.cpus_or_default(pool.cpus_per_gpu),
                        config_host_gib(perf.model, plan), thr)


def _fixed_plan_rows(plan: ExecutionPlan, pm: PerformanceModel, pool: GpuPool, counts: tuple[int, ...],
                     cpus_per_gpu: tuple[float, ...]) -> list[CandidateRow]:
    """``plan`` with its DP size scaled to each GPU count of ``counts`` that its TP x PP divides and on
    which it runs (batch divisibility, topology, memory), at each CPU share."""
    configs: list[tuple[ExecutionPlan, tuple[int, ...], float]] = []
    for g in counts:
        if g % (plan.tp * plan.pp):
            continue
        shape = pool.shape(g)
        scaled = replace(plan, dp=g // (plan.tp * plan.pp))
        if plan_violation(pm.model, scaled, pool.gpu_type, shape, pool.host_gib) is not None:
            continue
        configs.extend((scaled, shape, c) for c in cpus_per_gpu)
    if not configs:
        return []
    thr = pm.throughputs(configs)
    return [CandidateRow(p, shape, pool.gpu_type.name, p.num_gpus, int(round(c * p.num_gpus)),
                         config_host_gib(pm.model, p), float(t))
            for (p, shape, c), t in zip(configs, thr)]


def _fixed_resource_rows(job: Job, pm: PerformanceModel, pool: GpuPool) -> list[CandidateRow]:
    """Every enumerated plan on the job's requested GPUs (packed) and CPUs."""
    if job.requested_gpus > pool.total:
        return []
    shape = pool.shape(job.requested_gpus)
    cpus = job.cpus_or_default(pool.cpus_per_gpu)
    room = host_room(pool.host_gib, shape)
    if min(room) < 0:
        return []
    plans = enumerate_plans(pm.model, shape, pool.gpu_type, room)
    if not plans:
        return []
    thr = pm.throughputs([(p, shape, cpus / job.requested_gpus) for p in plans])
    return [CandidateRow(p, shape, pool.gpu_type.name, job.requested_gpus, cpus, config_host_gib(pm.model, p),
                         float(t)) for p, t in zip(plans, thr)]


def _dominated(gpus: np.ndarray, cpus: np.ndarray, mem: np.ndarray, thr: np.ndarray, keep: int | None) -> np.ndarray:
    """Mask of rows dominated by another (module docstring, "Dominance"); row ``keep`` never is. Rows are
    decided in order; a row already found dominated dominates nothing (its dominator does instead)."""
    n = len(thr)
    # better[k, i]: row k needs no more of anything than row i and is at least as fast, and beats it in
    # something or comes first (ties: the earlier row stays)
    better = ((gpus[:, None] <= gpus[None, :]) & (cpus[:, None] <= cpus[None, :]) & (mem[:, None] <= mem[None, :] + 1e-9)
              & (thr[:, None] >= thr[None, :] - 1e-12))
    strictly = ((gpus[:, None] < gpus[None, :]) | (cpus[:, None] < cpus[None, :]) | (mem[:, None] < mem[None, :] - 1e-9)
                | (thr[:, None] > thr[None, :] + 1e-12))
    idx = np.arange(n)
    better &= strictly | (idx[:, None] < idx[None, :])
    better[idx, idx] = False
    out = np.zeros(n, dtype=bool)
    for i in np.flatnonzero(better.any(axis=0)):
        if i != keep:
            col = better[:, i]
            out[i] = bool(col[i + 1:].any() or (col[:i] & ~out[:i]).any())
    return out


@dataclass
class RoundTableCache:
    """What a round table needs that does not change from one round to the next on the same cluster:
    the performance-model lookup, the shared candidate tables per (model type, GPU type, cap), and each
    job's finished block of rows keyed by everything the block depends on (the job's request, the
    ablation flags and its current configuration). A simulator or a long-running scheduler keeps one
    per policy so a round costs O(jobs) list work instead of re-running the performance model; the
    cache resets itself when it sees a different cluster object or another lookup. Not thread-safe."""

    cluster: object | None = None
    perf: PerfLookup | None = None
    shared: dict[tuple, CoefficientTable] = field(default_factory=dict)
    blocks: dict[tuple, "_Block"] = field(default_factory=dict)

    def bind(self, problem: RubickRound, perf: PerfLookup | None) -> PerfLookup:
        """The lookup to use for ``problem`` (``perf`` or the built-in one), clearing the memo when the
        cluster or the lookup changed."""
        if self.cluster is not problem.cluster:
            self.cluster = problem.cluster
            self.perf = None
            self.shared.clear()
            self.blocks.clear()
        if perf is not None:
            if perf is not self.perf:
                self.shared.clear()
                self.blocks.clear()
                self.perf = perf
        elif self.perf is None:
            self.perf = round_lookup(problem)
        return self.perf


def round_lookup(problem: RubickRound) -> PerfLookup:
    """The built-in lookup of ``problem``: the cluster's defaults, and the round's own models and fitted
    parameters when it has them (:func:`~optsched.perf.lookup.round_perf_lookup`)."""
    if problem.own_models or problem.perf_params:
        return round_perf_lookup(problem.cluster, None, problem.own_models, problem.perf_params)
    return default_perf_lookup(problem.cluster)


def _candidate_rows(problem: RubickRound, job: Job, perf: PerfLookup, growth: int,
                    cpus_per_gpu_options: tuple[int, ...], fixed_plan: bool, fixed_resources: bool,
                    shared: dict[tuple, CoefficientTable]) -> tuple[list[CandidateRow], float]:
    """Every row of ``job`` except its current one, and its reference throughput."""
    rows: list[CandidateRow] = []
    ref: float | None = None
    refused: list[PlanInfeasibleError] = []  # the types on which the requested plan cannot run
    for gpu_type in usable_gpu_types(problem.cluster, job):
        pm = perf(job.model, gpu_type)
        pool = gpu_pool(problem.cluster, gpu_type)
        cap = job_gpu_cap(job, pool.per_node, pool.total, growth)
        try:
            req = _request_row(job, pm, pool)
        except PlanInfeasibleError as e:  # no request row on this type; the others may run it
            refused.append(e)
            req = None
        if req is not None:
            ref = req.throughput if ref is None else max(ref, req.throughput)
            if fixed_plan and not fixed_resources:
                shares = tuple(c for c in cpus_per_gpu_options if c <= pool.cpus_per_gpu + 1e-9) or (pool.cpus_per_gpu,)
                rows.extend(_fixed_plan_rows(req.plan, pm, pool, candidate_gpu_counts(pool.per_node, cap), shares))
            elif fixed_resources and not fixed_plan:
                rows.extend(_fixed_resource_rows(job, pm, pool))
            rows.append(req)
        if fixed_plan or fixed_resources:
            continue
        key = (job.model, gpu_type, cap, cpus_per_gpu_options)
        if key not in shared:
            shared[key] = build_coefficient_table([(job.model, pm)], problem.cluster, gpu_type, max_gpus=cap,
                                                  cpus_per_gpu_options=cpus_per_gpu_options)
        t = shared[key]
        rows[:0] = [CandidateRow(t.plans[k], t.gpus_per_node[k], gpu_type, int(t.gpus[k]), int(t.cpus[k]),
                                 float(t.mem_gib[k]), float(t.throughput[k])) for k in range(len(t))]
    if ref is None:
        if refused:
            raise refused[0]
        raise PlanInfeasibleError(
            f"job {job.name!r}: no GPU type of cluster {problem.cluster.name!r} can run its request of "
            f"{job.requested_gpus} GPUs with any plan of model {job.model!r}")
    allowed = allowed_configs(perf)
    if allowed is not None:
        kept = restrict_rows(job, rows, allowed)
        requests = [r for r in rows if r.gpus == job.requested_gpus and (job.requested_plan is None
                                                                         or r.plan == job.requested_plan)]
        if not any(r in kept for r in requests):  # the request is not allowed: a stand-in replaces it
            stand_ins = [r for gpu_type in usable_gpu_types(problem.cluster, job)
                         if (r := stand_in_row(job, perf(job.model, gpu_type), gpu_pool(problem.cluster, gpu_type),
                                               allowed)) is not None]
            kept += stand_ins
            ref = max((r.throughput for r in stand_ins), default=ref)
        rows = kept
    return rows, ref


def restrict_rows(job: Job, rows: list[CandidateRow], allowed: ConfigFilter) -> list[CandidateRow]:
    """The rows of ``job`` the filter accepts (module docstring, "Allowed configurations")."""
    return [r for r in rows if allowed(job.model, r.gpu_type, r.plan, tuple(sorted(r.gpus_per_node, reverse=True)))]


def stand_in_row(job: Job, pm: PerformanceModel, pool: GpuPool, allowed: ConfigFilter) -> CandidateRow | None:
    """The stand-in request of ``job`` on ``pool`` (module docstring, "Allowed configurations"); None
    when no GPU count of the pool has an allowed plan."""
    g0 = job.requested_gpus
    counts = [g0] + list(range(g0 + 1, pool.total + 1)) + list(range(min(g0, pool.total + 1) - 1, 0, -1))
    cpus_per_gpu = job.cpus_or_default(pool.cpus_per_gpu) / g0
    for g in counts:
        shape = pool.shape(g)
        room = host_room(pool.host_gib, shape)
        if min(room) < 0:
            continue
        plans = [p for p in enumerate_plans(pm.model, shape, pool.gpu_type, room)
                 if allowed(job.model, pool.gpu_type.name, p, shape)]
        if plans:
            t = pm.throughputs([(p, shape, cpus_per_gpu) for p in plans])
            k = int(np.argmax(t))
            return CandidateRow(plans[k], shape, pool.gpu_type.name, g, max(g, int(round(cpus_per_gpu * g))),
                                config_host_gib(pm.model, plans[k]), float(t[k]))
    return None


def _job_block(problem: RubickRound, job: Job, perf: PerfLookup, growth: int,
               cpus_per_gpu_options: tuple[int, ...], fixed_plan: bool, fixed_resources: bool,
               shared: dict[tuple, CoefficientTable]) -> "_Block":
    """The job's rows after dominance pruning, its reference throughput and the index of its current
    row (None when queued)."""
    if problem.own_rows(job.name) is not None:
        return _own_block(problem, job, fixed_plan, fixed_resources)
    rows, ref = _candidate_rows(problem, job, perf, growth, cpus_per_gpu_options, fixed_plan, fixed_resources,
                                shared)
    rows = admissible_rows(host_memory_rows(rows, job), job)
    if problem.current(job.name) is None:
        check_memory_fits(problem, job, rows)
    cur_index = _with_current(rows, None if problem.current(job.name) is None else _current_row(problem, job, perf))
    gpus = np.array([r.gpus for r in rows])
    cpus = np.array([r.cpus for r in rows])
    mem = np.array([r.mem_gib for r in rows])
    thr_arr = np.array([r.throughput for r in rows])
    types = [r.gpu_type for r in rows]
    drop = np.zeros(len(rows), dtype=bool)
    for gt in set(types):
        idx = np.array([i for i, x in enumerate(types) if x == gt])
        keep = None if cur_index is None or types[cur_index] != gt else int(np.flatnonzero(idx == cur_index)[0])
        drop[idx] = _dominated(gpus[idx], cpus[idx], mem[idx], thr_arr[idx], keep)
    return _pruned_block(rows, drop, cur_index, ref)


def _with_current(rows: list[CandidateRow], current: CandidateRow | None) -> int | None:
    """Index of the running configuration ``current`` among ``rows`` (appended when no row is the same
    configuration); None for a queued job."""
    if current is None:
        return None
    same = [i for i, r in enumerate(rows) if r.same_config(current)]
    if same:
        return same[0]
    rows.append(current)
    return len(rows) - 1


def host_memory_rows(rows: list[CandidateRow], job: Job) -> list[CandidateRow]:
    """``rows`` of ``job`` with the host-memory rule (module docstring, "Host memory"): at least
    ``requested_mem_gib / requested_gpus`` GiB per GPU, rounded up to :data:`MEM_GRANULARITY_GIB` per GPU."""
    floor = job.requested_mem_gib / job.requested_gpus
    out = []
    for r in rows:
        per_gpu = max(r.mem_gib / r.gpus, floor)
        mem = math.ceil(per_gpu / MEM_GRANULARITY_GIB - 1e-9) * MEM_GRANULARITY_GIB * r.gpus
        out.append(r if mem == r.mem_gib else replace(r, mem_gib=mem))
    return out


def check_memory_fits(problem: RubickRound, job: Job, rows: list[CandidateRow]) -> None:
    """``PlanInfeasibleError`` naming ``job`` when none of its ``rows`` (after :func:`host_memory_rows`) has
    every part within the host memory of the largest node of its GPU type (module docstring, "Host
    memory"): its requested memory is more than the cluster can hold, so it could never start."""
    cap: dict[str, float] = {}
    for n in problem.cluster.nodes:
        cap[n.gpu_type] = max(cap.get(n.gpu_type, 0.0), n.memory_gib)
    if not rows or any(max(r.gpus_per_node) * r.mem_gib / r.gpus <= cap.get(r.gpu_type, 0.0) + 1e-9 for r in rows):
        return
    most = max((cap[t] for t in {r.gpu_type for r in rows} if t in cap), default=0.0)
    raise PlanInfeasibleError(
        f"job {job.name!r}: requests {job.requested_mem_gib:g} GiB of host memory for {job.requested_gpus} GPU(s) "
        f"({job.requested_mem_gib / job.requested_gpus:g} GiB per GPU, the least any configuration gives it), but no "
        f"node of cluster {problem.cluster.name!r} can hold any of its configurations (the most host memory a node "
        f"of its GPU types holds is {most:g} GiB; requested_mem_gib is in GiB)")


def _pruned_block(rows: list[CandidateRow], drop: np.ndarray, cur_index: int | None, ref: float) -> "_Block":
    """The block of ``rows`` without the ``drop``ped ones."""
    kept = [r for i, r in enumerate(rows) if not drop[i]]
    new_cur = None if cur_index is None else int(np.count_nonzero(~drop[:cur_index]))
    return _Block(tuple(r.plan for r in kept), tuple(r.gpus_per_node for r in kept), tuple(r.gpu_type for r in kept),
                  np.array([r.gpus for r in kept], dtype=np.int64), np.array([r.cpus for r in kept], dtype=np.int64),
                  np.array([r.mem_gib for r in kept], dtype=float), np.array([r.throughput for r in kept], dtype=float),
                  ref, new_cur)


def _given(r: CoefficientRow) -> CandidateRow:
    return CandidateRow(r.plan, r.gpus_per_node, r.gpu_type, r.gpus, r.cpus, r.mem_gib, r.throughput)


def _own_current(problem: RubickRound, job: Job, given: tuple[CoefficientRow, ...]) -> CandidateRow | None:
    """A running job's current row from its own rows: the matching row's throughput on the CPUs and
    memory it holds (:func:`~optsched.rounds.rubick.own_rows.current_index`)."""
    k = own_rows.current_index(problem, job, given)
    if k is None:
        return None
    cur = problem.current(job.name)
    assert cur is not None
    r = given[k]
    return CandidateRow(r.plan, r.gpus_per_node, r.gpu_type, r.gpus, cur.placement.total_cpus,
                        cur.placement.total_mem_gib, r.throughput)


def _own_block(problem: RubickRound, job: Job, fixed_plan: bool, fixed_resources: bool) -> "_Block":
    """The block of a job with its own coefficient rows (module docstring, "Own coefficients")."""
    given = problem.own_rows(job.name)
    assert given is not None
    request = own_rows.request_rows(problem, job, given)
    ref = own_rows.reference_throughput(given, request)
    rows = admissible_rows(host_memory_rows([_given(given[i]) for i in own_rows.table_rows(
        problem, job, given, request, fixed_plan, fixed_resources)], job), job)
    cur_index = _with_current(rows, _own_current(problem, job, given))
    drop = np.zeros(len(rows), dtype=bool)
    groups: dict[tuple, list[int]] = {}
    for i, r in enumerate(rows):
        groups.setdefault((r.gpu_type, r.gpus_per_node), []).append(i)
    for idx_list in groups.values():
        if len(idx_list) == 1:  # a row alone in its group has nothing to be dominated by
            continue
        idx = np.array(idx_list)
        keep = None if cur_index is None or cur_index not in idx_list else idx_list.index(cur_index)
        drop[idx] = _dominated(np.array([rows[i].gpus for i in idx]), np.array([rows[i].cpus for i in idx]),
                               np.array([rows[i].mem_gib for i in idx]), np.array([rows[i].throughput for i in idx]),
                               keep)
    return _pruned_block(rows, drop, cur_index, ref)


@dataclass(frozen=True)
class _Block:
    """One job's finished rows, column-wise (what :func:`build_round_table` concatenates)."""

    plans: tuple[ExecutionPlan, ...]
    gpus_per_node: tuple[tuple[int, ...], ...]
    gpu_type: tuple[str, ...]
    gpus: np.ndarray
    cpus: np.ndarray
    mem_gib: np.ndarray
    throughput: np.ndarray
    reference: float
    current: int | None


#: the block of a queued job the table had no time for: no row (it waits)
_NO_ROWS = _Block((), (), (), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros(0), 1.0,
                  None)


def _block_key(problem: RubickRound, job: Job, flags: tuple) -> tuple:
    """Everything a job's block depends on (not its name: identical requests share a block)."""
    cur = problem.current(job.name)
    return (job.model, job.requested_gpus, job.requested_cpus, job.requested_mem_gib, job.requested_plan,
            job.max_gpus, job.gpu_type, flags, None if cur is None else (cur.plan, cur.placement), problem.own_rows(job.name),
            constraint_key(job))


def _current_row(problem: RubickRound, job: Job, perf: PerfLookup) -> CandidateRow:
    """The row of a running job's current configuration (plan, per-node GPUs, held CPUs and memory)."""
    cur = problem.current(job.name)
    assert cur is not None
    node_type = problem.cluster.node(cur.placement.shares[0][0]).gpu_type
    shape = cur.placement.gpus_per_node
    thr = perf(job.model, node_type).throughput(cur.plan, shape, max(cur.placement.total_cpus, 1) / cur.plan.num_gpus)
    return CandidateRow(cur.plan, shape, node_type, cur.plan.num_gpus, cur.placement.total_cpus,
                        cur.placement.total_mem_gib, thr)


def _short_block(problem: RubickRound, job: Job, perf: PerfLookup) -> _Block:
    """The block of a job the table had no time for (``build_round_table``'s ``deadline``): a running
    job gets its current row only, its throughput standing in as the reference; a queued job no row."""
    if problem.current(job.name) is None:
        return _NO_ROWS
    given = problem.own_rows(job.name)
    r = _current_row(problem, job, perf) if given is None else _own_current(problem, job, given)
    assert r is not None
    return _Block((r.plan,), (r.gpus_per_node,), (r.gpu_type,), np.array([r.gpus], dtype=np.int64),
                  np.array([r.cpus], dtype=np.int64), np.array([r.mem_gib]), np.array([r.throughput]),
                  float(r.throughput), 0)


#: seconds :func:`_short_blocks` takes per running job (measured: 0.3-0.5 s for 9,686 running jobs of a 100,000-job
#: round); :func:`build_round_table` stops that much before its deadline per running job it has not done
SHORT_S_PER_RUNNING_JOB = 5e-5


def _short_blocks(problem: RubickRound, jobs: Sequence[Job], perf: PerfLookup) -> list[_Block]:
    """:func:`_short_block` of every job in ``jobs``, the current throughputs of the running jobs without
    own rows predicted in one vectorised batch per (model, GPU type) (the same numbers: the prediction is
    elementwise; about 30 us a running job instead of 200 us one at a time)."""
    out: list[_Block | None] = [None] * len(jobs)
    batches: dict[tuple[str, str], list[int]] = {}
    for i, job in enumerate(jobs):
        cur = problem.current(job.name)
        if cur is None:
            out[i] = _NO_ROWS
        elif problem.own_rows(job.name) is not None:
            out[i] = _short_block(problem, job, perf)
        else:
            node_type = problem.cluster.node(cur.placement.shares[0][0]).gpu_type
            batches.setdefault((job.model, node_type), []).append(i)
    for (model, node_type), members in batches.items():
        curs = [problem.current(jobs[i].name) for i in members]
        configs = [(c.plan, c.placement.gpus_per_node, max(c.placement.total_cpus, 1) / c.plan.num_gpus)
                   for c in curs if c is not None]
        thr = perf(model, node_type).throughputs(configs)
        for i, c, t in zip(members, curs, thr.tolist()):
            assert c is not None
            out[i] = _Block((c.plan,), (c.placement.gpus_per_node,), (node_type,),
                            np.array([c.plan.num_gpus], dtype=np.int64),
                            np.array([c.placement.total_cpus], dtype=np.int64),
                            np.array([c.placement.total_mem_gib]), np.array([t]), float(t), 0)
    return out  # type: ignore[return-value]


def _memo(problem: RubickRound, perf: PerfLookup | None, cache: RoundTableCache | None
          ) -> tuple[PerfLookup, dict[tuple, CoefficientTable], dict[tuple, _Block]]:
    """The lookup, shared candidate tables and block memo of a table of ``problem`` (``cache``'s, or fresh)."""
    if cache is not None:
        return cache.bind(problem, perf), cache.shared, cache.blocks
    return perf or round_lookup(problem), {}, {}


def invalid_jobs(problem: RubickRound, perf: PerfLookup | None = None, *,
                 cache: RoundTableCache | None = None) -> tuple[SkippedJob, ...]:
    """The jobs of ``problem`` whose rows cannot be built, each with its error (module docstring, "Invalid
    jobs"): the request-only block of every job, built as :func:`build_round_table` builds it (and kept
    in ``cache`` for it). No deadline: this is the validation of the round, about the cost of a
    request-only table."""
    perf, shared, memo = _memo(problem, perf, cache)
    flags = (DEFAULT_GROWTH, DEFAULT_CPUS_PER_GPU_OPTIONS, True, True)
    out = []
    for job in problem.jobs:
        key = _block_key(problem, job, flags)
        if key in memo:
            continue
        try:
            memo[key] = _job_block(problem, job, perf, DEFAULT_GROWTH, DEFAULT_CPUS_PER_GPU_OPTIONS, True, True,
                                   shared)
        except ValidationError as e:  # PlanInfeasibleError, UnknownNameError (the model) and own rows' errors
            out.append(SkippedJob(job.name, str(e)))
    return tuple(out)


def valid_round(problem: RubickRound, perf: PerfLookup | None = None, *,
                cache: RoundTableCache | None = None) -> RubickRound:
    """``problem`` without the jobs of :func:`invalid_jobs` when it skips invalid jobs (``on_invalid_job:
    "skip"``; they join its ``skipped`` list, a running one's allocation held as
    :meth:`~optsched.core.round.RoundProblem.without` says); ``problem`` itself otherwise. What every
    method of the kind does first."""
    if problem.on_invalid_job != "skip":
        return problem
    return problem.without(invalid_jobs(problem, perf, cache=cache))  # type: ignore[return-value]


def build_round_table(problem: RubickRound, perf: PerfLookup | None = None, *, growth: int = DEFAULT_GROWTH,
                      cpus_per_gpu_options: tuple[int, ...] = DEFAULT_CPUS_PER_GPU_OPTIONS, fixed_plan: bool = False,
                      fixed_resources: bool = False, cache: RoundTableCache | None = None,
                      deadline: Deadline | None = None, left_out: list[str] | None = None) -> CoefficientTable:
    """The :class:`CoefficientTable` of ``problem`` with ``reference_throughput`` and ``current_row``
    (module docstring). ``perf(model, gpu_type)`` supplies performance models (default: built-in).
    ``cache`` (optional) carries work over from earlier rounds (:class:`RoundTableCache`); the table is
    the same with or without it. Jobs with the same request (and no running configuration, or the same
    one) share one block of rows.

    With a ``deadline``, the running jobs are done first, then the queued ones in round order, and once
    it has passed (less :data:`SHORT_S_PER_RUNNING_JOB` for each running job not done) the jobs not done yet
    get a short block (a running job its current row only, with
    its current throughput standing in as its reference; a queued job no row, so it waits); their
    names are appended to ``left_out`` when given.

    Unknown model names raise ``UnknownNameError``; a job whose request fits no GPU type of the
    cluster, or whose requested plan cannot run on its request, raises ``PlanInfeasibleError``
    naming the job. Cost without a cache: one vectorised prediction batch per (model type, GPU type,
    cap) plus two single predictions per distinct request; with a warm cache, O(rows) list work."""
    perf, shared, memo = _memo(problem, perf, cache)
    flags = (growth, tuple(cpus_per_gpu_options), fixed_plan, fixed_resources)
    jobs = problem.jobs
    is_running = [problem.current(job.name) is not None for job in jobs]
    order = [i for i, r in enumerate(is_running) if r] + [i for i, r in enumerate(is_running) if not r]
    running = len(order) - is_running.count(False)
    blocks: list[_Block | None] = [None] * len(jobs)
    for at, i in enumerate(order):
        job = jobs[i]
        if deadline is not None and deadline.expired(SHORT_S_PER_RUNNING_JOB * max(running - at, 0)):
            for k, block in zip(order[at:], _short_blocks(problem, [jobs[k] for k in order[at:]], perf)):
                blocks[k] = block
            if left_out is not None:
                left_out.extend(jobs[k].name for k in order[at:])
            break
        key = _block_key(problem, job, flags)
        block = memo.get(key)
        if block is None:
            block = memo[key] = _job_block(problem, job, perf, growth, tuple(cpus_per_gpu_options), fixed_plan,
                                           fixed_resources, shared)
        blocks[i] = block
    done: list[_Block] = blocks  # type: ignore[assignment]
    sizes = np.array([len(b.plans) for b in done], dtype=np.int64)
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1])) if done else np.zeros(0, dtype=np.int64)
    current_row = np.array([-1 if b.current is None else int(st) + b.current for b, st in zip(done, starts)],
                           dtype=np.int64)

    filled = [b for b in done if b.plans]

    def cat(attr: str, dtype: type) -> np.ndarray:
        return np.concatenate([getattr(b, attr) for b in filled]).astype(dtype, copy=False) if filled \
            else np.zeros(0, dtype=dtype)
    log.debug("round table: %d jobs, %d rows", len(jobs), int(sizes.sum()))
    return CoefficientTable(jobs=tuple(j.name for j in jobs),
                            job_index=np.repeat(np.arange(len(done), dtype=np.int64), sizes),
                            plans=tuple(itertools.chain.from_iterable(b.plans for b in filled)),
                            gpus_per_node=tuple(itertools.chain.from_iterable(b.gpus_per_node for b in filled)),
                            gpu_type=tuple(itertools.chain.from_iterable(b.gpu_type for b in filled)),
                            gpus=cat("gpus", np.int64), cpus=cat("cpus", np.int64), mem_gib=cat("mem_gib", float),
                            throughput=cat("throughput", float),
                            reference_throughput=np.array([b.reference for b in done], dtype=float),
                            current_row=current_row)


__all__ = ["CandidateRow", "DEFAULT_CPUS_PER_GPU_OPTIONS", "DEFAULT_GROWTH", "MEM_GRANULARITY_GIB", "RoundTableCache",
           "host_memory_rows", "build_round_table", "check_memory_fits", "invalid_jobs", "job_gpu_cap", "request_plan",
           "round_lookup", "restrict_rows", "stand_in_row", "valid_round"]

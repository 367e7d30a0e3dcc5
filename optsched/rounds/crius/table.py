"""The Cells of a Crius round as a coefficient table (Crius Sec. 6.1, "Initializing Cells").

Per job, on every GPU type it may use (its pinned type, else every type), Cells of ``N_G / 2``, ``N_G``
and ``2 N_G`` GPUs (``N_G`` its requested GPUs; ``N_G / 2`` only when ``N_G >= 2``; never more GPUs
than the type has) with stage counts ``1, 2, 4, ...`` up to the GPUs, the model's operators and
:data:`MAX_STAGES` (Sec. 6.1: "log N_G choices ranging from 1 to N_G"); each Cell estimated by
:class:`~optsched.perf.crius.cell_estimator.CellEstimator` on the packed placement (whole
power-of-two parts of a node, :meth:`~optsched.perf.crius.cell_estimator.CellEstimator.node_unit`).
Cells whose every assembled plan fails the memory filter are left out. A running job also gets a row
for its current allocation as it is (its own shape, CPUs and memory; throughput 0 when the estimator
says it cannot run), its ``current_row``.

Columns (:class:`CriusTable`): the :class:`~optsched.perf.coefficients.CoefficientTable` of the rows
(plan = :func:`~optsched.perf.crius.cell_estimator.cell_plan`, packed ``gpus_per_node``, GPU type, GPUs,
CPUs and host memory in proportion to the GPUs (:func:`~optsched.rounds.crius.capacity.slot_rates`),
throughput = global batch / estimated iteration time, ``reference_throughput``, ``current_row``) and,
per row, the stage count, the estimated iteration time, the part size and number of parts, the
normalised ``weight`` (throughput / the job's reference), the data-parallel-only throughput of the
same (type, GPUs) on one stage (what the baselines schedule with, Sec. 8.1: "only allow them to
schedule jobs with data profiled from data parallelism"; 0 when it does not fit), whether the Cell
meets the job's deadline at the estimated speed, its ``value`` in the round's objective (raw
throughput under the paper's objectives, ``weight`` under ours, ``normalised*``;
:mod:`~optsched.rounds.crius.objective`), whether its stage count is the best of its (type,
GPUs) (``best_stages``: the Cell a job given that type and GPU count runs, e.g. under a baseline,
since adaptive parallelism picks its stages at run time) and whether it is a *candidate*.

**Reference throughput** of a job: the best Cell of ``N_G`` GPUs over its types; without one, its best
Cell; without any, its current row's throughput; else 1.

**Candidates** (what the heuristic and the exact model choose from): per (type, GPUs) only the best
stage count (the stage count changes no resource; ties: fewer stages), and of those per type only
Cells faster than every Cell of fewer GPUs of that type (a Cell of more GPUs that is not faster is
dominated). Per job at most 3 x types candidates.

**Deadline**: a row meets the deadline when ``remaining iterations x iteration time <= deadline -
time``; rows of jobs without a deadline always do.

Speed: Cells are estimated once per (model, type, GPUs, stages) and kept in the estimator; a job's
rows once per (model, requested GPUs, pinned type) and kept in :class:`CriusTableCache`, so a
simulator's rounds rebuild their tables from blocks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from optsched.core.deadline import Deadline
from optsched.core.hardware import Cluster
from optsched.core.job import Job
from optsched.core.plan import ExecutionPlan
from optsched.core.pool import usable_gpu_types
from optsched.perf.coefficients import CoefficientTable
from optsched.perf.crius.cell_estimator import CellEstimator, EstimatorParams, cell_plan, shared_estimator
from optsched.perf.crius.op_graph import OperatorGraph
from optsched.rounds.crius.capacity import slot_rates
from optsched.rounds.crius.problem import CriusRound

#: the most pipeline stages a Cell is offered
MAX_STAGES = 16
#: relative tolerance of the deadline test
DEADLINE_RTOL = 1e-9
#: job blocks a :class:`CriusTableCache` keeps before it starts again (rounds of new operator graphs)
MAX_BLOCKS = 20_000
#: cluster objects a :class:`CriusTableCache` keeps estimators for before it starts again (a caller that
#: parses every round anew, e.g. from JSON, brings a new cluster object each time)
MAX_CLUSTERS = 16


@dataclass(frozen=True)
class _Row:
    gpu_type: str
    gpus: int
    stages: int
    shape: tuple[int, ...]
    iteration_time: float
    throughput: float
    dp_throughput: float
    best_stages: bool
    candidate: bool


@dataclass(frozen=True, eq=False)
class CriusTable:
    """The Cells of a round (module docstring); ``coefficients`` holds the rows, the other arrays are
    per row."""

    coefficients: CoefficientTable
    stages: np.ndarray
    iteration_time: np.ndarray
    unit: np.ndarray
    parts: np.ndarray
    weight: np.ndarray
    dp_throughput: np.ndarray
    best_stages: np.ndarray
    candidate: np.ndarray
    deadline_ok: np.ndarray
    value: np.ndarray
    estimator: CellEstimator = field(repr=False)

    def __len__(self) -> int:
        return len(self.coefficients)

    @property
    def jobs(self) -> tuple[str, ...]:
        return self.coefficients.jobs

    @property
    def job_index(self) -> np.ndarray:
        return self.coefficients.job_index

    @property
    def current_row(self) -> np.ndarray:
        assert self.coefficients.current_row is not None
        return self.coefficients.current_row

    @property
    def gpus(self) -> np.ndarray:
        return self.coefficients.gpus

    @property
    def gpu_type(self) -> tuple[str, ...]:
        return self.coefficients.gpu_type

    @property
    def throughput(self) -> np.ndarray:
        return self.coefficients.throughput

    def index_of(self, job: str) -> int:
        return self.coefficients.index_of(job)

    def rows_of(self, j: int) -> np.ndarray:
        return self.coefficients.rows_of(j)

    @cached_property
    def _candidates(self) -> tuple[np.ndarray, ...]:
        """Per job index, its candidate rows, best weight first (ties: fewer GPUs, then row)."""
        out = []
        for j in range(len(self.jobs)):
            rows = self.rows_of(j)
            rows = rows[self.candidate[rows]]
            order = np.lexsort((rows, self.gpus[rows], -self.weight[rows]))
            out.append(rows[order])
        return tuple(out)

    def candidates_of(self, j: int) -> np.ndarray:
        """Candidate rows of job index ``j``, best weight first (module docstring)."""
        return self._candidates[j]


class CriusTableCache:
    """Estimators per cluster and job blocks per (cluster, model, requested GPUs, pinned type), kept
    across rounds, also when rounds alternate between clusters (module docstring). ``params`` are the estimator's (None: defaults, and then the estimator
    is the process-wide :func:`~optsched.perf.crius.cell_estimator.shared_estimator` of the cluster)."""

    def __init__(self, params: EstimatorParams | None = None) -> None:
        self.params = params
        self._estimators: dict[int, tuple[Cluster, CellEstimator]] = {}
        self._blocks: dict[tuple, tuple[OperatorGraph, Cluster, tuple[_Row, ...]]] = {}
        self._plans: dict[tuple[int, int], ExecutionPlan] = {}

    def estimator(self, cluster: Cluster) -> CellEstimator:
        got = self._estimators.get(id(cluster))
        if got is None or got[0] is not cluster:
            if len(self._estimators) >= MAX_CLUSTERS:  # the blocks hold their clusters too
                self._estimators.clear()
                self._blocks.clear()
            got = (cluster, shared_estimator(cluster) if self.params is None else CellEstimator(cluster, self.params))
            self._estimators[id(cluster)] = got
        return got[1]

    def plan(self, gpus: int, stages: int) -> ExecutionPlan:
        p = self._plans.get((gpus, stages))
        if p is None:
            p = self._plans[(gpus, stages)] = cell_plan(gpus, stages)
        return p

    def block(self, problem: CriusRound, job: Job, graph: OperatorGraph) -> tuple[_Row, ...]:
        cluster = problem.cluster
        key = (id(cluster), id(graph), job.model, job.requested_gpus, job.gpu_type)
        got = self._blocks.get(key)
        # the graph and the cluster are kept with their rows, so their ids stay their own
        if got is None or got[0] is not graph or got[1] is not cluster:
            if len(self._blocks) >= MAX_BLOCKS:
                self._blocks.clear()
            got = self._blocks[key] = (graph, cluster, _job_rows(self.estimator(cluster), problem, job, graph))
        return got[2]


def cell_gpu_counts(requested: int) -> tuple[int, ...]:
    """``N_G / 2, N_G, 2 N_G`` (the first only when ``N_G >= 2``; Sec. 6.1)."""
    return tuple(g for g in (requested // 2, requested, 2 * requested) if g >= 1)


def stage_counts(gpus: int, graph: OperatorGraph) -> tuple[int, ...]:
    """``1, 2, 4, ...`` up to ``gpus``, the graph's operators and :data:`MAX_STAGES`."""
    top = min(gpus, len(graph), MAX_STAGES)
    return tuple(1 << k for k in range(top.bit_length()) if (1 << k) <= top)


def _job_rows(est: CellEstimator, problem: CriusRound, job: Job, graph: OperatorGraph) -> tuple[_Row, ...]:
    totals: dict[str, int] = {}
    for n in problem.cluster.nodes:
        totals[n.gpu_type] = totals.get(n.gpu_type, 0) + n.num_gpus
    rows: list[_Row] = []
    for gtype in usable_gpu_types(problem.cluster, job):
        best_thr = 0.0
        for g in cell_gpu_counts(job.requested_gpus):
            if g > totals.get(gtype, 0):
                continue
            group = []
            for s in stage_counts(g, graph):
                e = est.estimate(est.cell(graph, gtype, g, s))
                if e.feasible:
                    group.append((e, s))
            if not group:
                continue
            dp = est.plan_latency(est.cell(graph, gtype, g, 1), [(g, 1)])
            dp_thr = graph.global_batch / dp if math.isfinite(dp) else 0.0
            best = max(group, key=lambda es: (es[0].throughput, -es[1]))
            cand_ok = best[0].throughput > best_thr
            if cand_ok:
                best_thr = best[0].throughput
            for e, s in group:
                rows.append(_Row(gtype, g, s, e.cell.gpus_per_node, e.iteration_time_s, e.throughput, dp_thr,
                                 e is best[0], cand_ok and e is best[0]))
    return tuple(rows)


def build_crius_table(problem: CriusRound, cache: CriusTableCache | None = None, *, deadline: Deadline | None = None,
                      left_out: list[str] | None = None) -> CriusTable:
    """The round's table (module docstring). With ``deadline``, jobs not reached when it expires get
    only their current row (running) or none (queued) and are listed in ``left_out``."""
    cache = cache or CriusTableCache()
    est = cache.estimator(problem.cluster)
    rates = slot_rates(problem.cluster)
    jobs = problem.jobs
    job_index: list[int] = []
    plans: list[ExecutionPlan] = []
    shapes: list[tuple[int, ...]] = []
    types: list[str] = []
    gpus: list[int] = []
    cpus: list[int] = []
    mem: list[float] = []
    thr: list[float] = []
    stages: list[int] = []
    it: list[float] = []
    dp: list[float] = []
    best_ns: list[bool] = []
    cand: list[bool] = []
    ref = np.ones(len(jobs))
    current = np.full(len(jobs), -1, dtype=np.int64)
    for j, job in enumerate(jobs):
        graph = problem.graph(job.model)
        cur = problem.current(job.name)
        if deadline is not None and deadline.expired():
            block: tuple[_Row, ...] = ()
            if left_out is not None:
                left_out.append(job.name)
        else:
            block = cache.block(problem, job, graph)
        for r in block:
            cpg, mpg = rates[r.gpu_type]
            job_index.append(j)
            plans.append(cache.plan(r.gpus, r.stages))
            shapes.append(r.shape)
            types.append(r.gpu_type)
            gpus.append(r.gpus)
            cpus.append(cpg * r.gpus)
            mem.append(mpg * r.gpus)
            thr.append(r.throughput)
            stages.append(r.stages)
            it.append(r.iteration_time)
            dp.append(r.dp_throughput)
            best_ns.append(r.best_stages)
            cand.append(r.candidate)
        at_request = [r.throughput for r in block if r.gpus == job.requested_gpus]
        if at_request or block:
            ref[j] = max(at_request) if at_request else max(r.throughput for r in block)
        if cur is not None:
            node0 = problem.cluster.node(next(n for n, s in cur.placement.shares if s.gpus > 0))
            gtype = node0.gpu_type
            g = cur.placement.total_gpus
            shape = cur.placement.gpus_per_node
            e = est.estimate(est.cell(graph, gtype, g, cur.plan.pp, shape))
            current[j] = len(plans)
            job_index.append(j)
            plans.append(cur.plan)
            shapes.append(shape)
            types.append(gtype)
            gpus.append(g)
            cpus.append(cur.placement.total_cpus)
            mem.append(cur.placement.total_mem_gib)
            thr.append(e.throughput)
            stages.append(cur.plan.pp)
            it.append(e.iteration_time_s)
            dp.append(0.0)
            best_ns.append(False)
            cand.append(False)
            if not block and e.throughput > 0:
                ref[j] = e.throughput
    coeff = CoefficientTable(jobs=tuple(j.name for j in jobs), job_index=np.array(job_index, dtype=np.int64),
                             plans=tuple(plans), gpus_per_node=tuple(shapes), gpu_type=tuple(types),
                             gpus=np.array(gpus, dtype=np.int64), cpus=np.array(cpus, dtype=np.int64),
                             mem_gib=np.array(mem, dtype=float), throughput=np.array(thr, dtype=float),
                             reference_throughput=ref, current_row=current)
    ji = coeff.job_index
    iters = np.array(it, dtype=float)
    units = np.array([s[0] for s in shapes], dtype=np.int64) if shapes else np.zeros(0, dtype=np.int64)
    nparts = np.array([len(s) for s in shapes], dtype=np.int64)
    remaining = np.array([j.remaining_iterations for j in jobs], dtype=float)
    window = np.array([math.inf if j.deadline is None else j.deadline - problem.time for j in jobs])
    with np.errstate(invalid="ignore"):
        ok = remaining[ji] * iters <= window[ji] * (1 + DEADLINE_RTOL) + 1e-9
    weight = coeff.throughput / ref[ji]
    return CriusTable(coeff, np.array(stages, dtype=np.int64), iters, units, nparts, weight,
                      np.array(dp, dtype=float), np.array(best_ns, dtype=bool), np.array(cand, dtype=bool), ok,
                      weight if problem.normalised else coeff.throughput, est)


__all__ = ["CriusTable", "CriusTableCache", "MAX_STAGES", "build_crius_table", "cell_gpu_counts", "stage_counts"]

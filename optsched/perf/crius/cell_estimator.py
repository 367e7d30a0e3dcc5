"""Agile Cell estimation (Crius Sec. 5.1): the iteration time of a Cell -- a job on ``N`` GPUs of one type
in ``Ns`` pipeline stages -- from per-stage computation and communication, without running it.

**Per stage** (stages from :func:`~optsched.perf.crius.stages.determine_stages`), for a split of its
``g`` GPUs into ``d`` data-parallel replicas of ``t`` tensor-parallel ranks (``d t = g``), one
micro-batch of ``m = b / B`` samples (``B = 4 Ns`` micro-batches, Crius follows GPipe; Fig. 10) costs
(each replica handles ``q = m / d`` samples, an integer):

* computation (the "computation operators"): ``3 q (F_sh / t + F_rest) / (peak x efficiency x
  tp_efficiency^log2(t))`` plus ``kernels x kernel_launch_s``, with ``F_sh`` the FLOPs tensor
  parallelism splits and ``F_rest`` the ones it repeats; ``efficiency`` is the GPU type's
  (:class:`~optsched.core.hardware.GPUType`, or :attr:`EstimatorParams.efficiency`), times an optional
  factor per (GPU type, model family);
* tensor-parallel communication operators: each operator's all-reduces and all-to-alls of its bytes
  per sample times ``q``, among ``t`` ranks, from the communication profile
  (:mod:`~optsched.perf.crius.comm_profile`), intra-node when every TP group lies in one node;
* the gradient all-reduce of data parallelism (``2 P / t`` bytes among ``d`` ranks), once an
  iteration, spread over the ``B`` micro-batches (Alpa's stage latencies include it the same way);
* the inter-stage communication operators from the previous stage (Fig. 8: send/recv between stages,
  all-gather into a tensor-parallel stage): the ``m x cut bytes`` activation goes point to point,
  over ``min(g_prev, g)`` parallel streams inside a node or ``min(nodes_prev, nodes)`` network links
  across nodes, then, when ``t > 1``, an all-gather of its ``1 / d`` part among the ``t`` ranks; twice
  (forward activation, backward gradient).

A stage's latency ``T_s`` is the sum; its communication ``C_s`` the inter-stage part.

**Pipeline latency** (Sec. 5.1, Fig. 10): ``L = sum_s T_s + (B - 1) (T_k - C_k)`` with ``k`` the
slowest stage (largest ``T_s``; of equally slow stages the one with the largest ``T_s - C_s``), the
first micro-batch going through every stage, the other ``B - 1`` dominated by the slowest stage
with its communication overlapped (:func:`pipeline_latency`).

**Memory filter** (Sec. 5.1, "If the memory usage exceeds the memory limit of the used GPU, the
corresponding parallelism plan is dropped for the stage"): per GPU ``16 P / t`` bytes of training
state plus ``q (A / t + R)`` activation bytes per micro-batch in flight (1F1B keeps ``min(B, Ns - s)``
in stage ``s``, counted from 0) plus ``workspace_gib`` must fit ``memory_headroom x`` the GPU's
memory. When the activations do not fit, the stage runs with gradient checkpointing (Alpa's
benchmarks, which Crius runs, use rematerialisation): it keeps only each operator's inputs per
micro-batch in flight plus one operator's activations, and pays a second forward pass (4 instead of 3
forward-pass costs); the plan records it (:attr:`PipelinePlan.remat`). A split that does not fit
even so is dropped, as is one where ``d`` does not divide ``m`` or ``t`` exceeds a stage operator's
``max_tp``.

**Assembly** (Sec. 5.1, Fig. 9): each stage is profiled data-parallel only (``d = g``) and
tensor-parallel only (``t = g``), and the ``2^Ns`` combinations are the assembled plans; the Cell's
estimate is the best of those passing the memory filter (:meth:`CellEstimator.estimate`). The best is
found exactly without listing the ``2^Ns`` plans (:func:`best_pipeline`: for every stage and pair of
options that could be the slowest, a Viterbi pass over the stages with the others kept at most as
slow; O(Ns^2 K^4) for K options a stage); :func:`enumerate_pipelines` lists them all (for tests and
small Ns). The same machinery explores any per-stage option lists (:mod:`optsched.perf.crius.tuning`).

GPUs of a Cell are ranked in stage order over its nodes, largest node first (the placement's
``gpus_per_node``; default the packed placement on the type's nodes).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping, Sequence

import numpy as np

from optsched.core.checks import require_int, require_number
from optsched.core.errors import ValidationError
from optsched.core.hardware import Cluster
from optsched.core.plan import ExecutionPlan
from optsched.core.pool import packed_placement
from optsched.perf.crius.comm_profile import CommProfile, default_comm_profile
from optsched.perf.crius.op_graph import (GRAD_BYTES_PER_PARAM, STATE_BYTES_PER_PARAM, TRAIN_FLOPS_FACTOR,
                                          OperatorGraph)
from optsched.perf.crius.stages import StagePartition, determine_stages, is_power_of_two

GIB = float(1 << 30)
#: GPipe's micro-batch count per stage (Crius Fig. 10: B = 4 x Ns)
MICRO_BATCHES_PER_STAGE = 4
#: efficiency of a GPU type that states none
DEFAULT_EFFICIENCY = 0.4
#: Cells an estimator remembers before it starts again
MAX_MEMO = 200_000


@dataclass(frozen=True)
class EstimatorParams:
    """The estimator's own numbers (module docstring). ``efficiency``: per GPU type, overriding the
    type's; ``family_factor``: a factor per (GPU type, model family), the family being the model name
    up to its first ``-``; ``tp_efficiency``: compute efficiency kept per doubling of the TP degree
    (smaller matrix products); ``kernel_launch_s``: cost of one kernel launch; ``memory_headroom``:
    usable fraction of GPU memory; ``workspace_gib``: memory every GPU reserves (context, buffers);
    ``comm_profile``: the communication profile (None: :func:`default_comm_profile` of the cluster)."""

    efficiency: Mapping[str, float] = field(default_factory=dict)
    family_factor: Mapping[tuple[str, str], float] = field(default_factory=dict)
    tp_efficiency: float = 0.94
    kernel_launch_s: float = 8e-6
    memory_headroom: float = 0.92
    workspace_gib: float = 1.0
    comm_profile: CommProfile | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        for k, v in self.efficiency.items():
            require_number(f"estimator efficiency of {k!r}", "value", v, 0.0, strict=True)
        for k, v in self.family_factor.items():
            require_number(f"estimator family factor of {k!r}", "value", v, 0.0, strict=True)
        require_number("EstimatorParams", "tp_efficiency", self.tp_efficiency, 0.0, strict=True)
        require_number("EstimatorParams", "kernel_launch_s", self.kernel_launch_s, 0.0)
        require_number("EstimatorParams", "memory_headroom", self.memory_headroom, 0.0, strict=True)
        require_number("EstimatorParams", "workspace_gib", self.workspace_gib, 0.0)
        if self.tp_efficiency > 1 or self.memory_headroom > 1:
            raise ValidationError("EstimatorParams: tp_efficiency and memory_headroom are fractions, <= 1")
        object.__setattr__(self, "efficiency", MappingProxyType(dict(self.efficiency)))
        object.__setattr__(self, "family_factor", MappingProxyType(dict(self.family_factor)))


# -- the pipeline formula and its exact optimisation ------------------------------------------------
def pipeline_latency(stage_times: Sequence[float], comm_times: Sequence[float], micro_batches: int) -> float:
    """Crius Sec. 5.1: ``sum T_s + (B - 1) (T_k - C_k)``, ``k`` the slowest stage (module docstring)."""
    t = np.asarray(stage_times, dtype=float)
    c = np.asarray(comm_times, dtype=float)
    if t.size == 0 or t.shape != c.shape:
        raise ValidationError("pipeline_latency: one stage time and one communication time per stage")
    slow = t == t.max()
    return float(t.sum() + (micro_batches - 1) * float(np.max((t - c)[slow])))


@dataclass(frozen=True)
class StageTable:
    """Per-stage options and their costs: ``own[s][o]`` is stage ``s``'s latency under option ``o``
    without the inter-stage part (inf: the option is dropped), ``xfer[s][p, o]`` the inter-stage
    communication into stage ``s`` (``s >= 1``) from option ``p`` of stage ``s - 1``."""

    own: tuple[np.ndarray, ...]
    xfer: tuple[np.ndarray, ...]
    micro_batches: int
    remat: tuple[np.ndarray, ...] = ()

    def latency(self, choice: Sequence[int]) -> float:
        t = [self.own[0][choice[0]]]
        c = [0.0]
        for s in range(1, len(self.own)):
            x = self.xfer[s][choice[s - 1], choice[s]]
            t.append(self.own[s][choice[s]] + x)
            c.append(x)
        if not all(math.isfinite(v) for v in t):
            return math.inf
        return pipeline_latency(t, c, self.micro_batches)


def enumerate_pipelines(table: StageTable) -> tuple[np.ndarray, list[tuple[int, ...]]]:
    """The latency of every combination of the stages' options (inf: dropped by the memory filter), in
    ``itertools.product`` order, and the combinations."""
    combos = list(itertools.product(*(range(len(o)) for o in table.own)))
    return np.array([table.latency(c) for c in combos]), combos


#: combinations of options up to which :func:`best_pipeline` lists them all (vectorised) instead of the
#: Viterbi passes (same answer; faster for few stages)
ENUMERATE_UP_TO = 64


def _best_by_enumeration(table: StageTable) -> tuple[float, tuple[int, ...]]:
    """:func:`best_pipeline` by listing every combination (vectorised; module docstring formula)."""
    S = len(table.own)
    grid = np.indices([len(o) for o in table.own]).reshape(S, -1).T  # combos x stages
    T = np.empty(grid.shape)
    C = np.zeros(grid.shape)
    T[:, 0] = table.own[0][grid[:, 0]]
    for s in range(1, S):
        C[:, s] = table.xfer[s][grid[:, s - 1], grid[:, s]]
        T[:, s] = table.own[s][grid[:, s]] + C[:, s]
    top = T.max(axis=1, keepdims=True)
    with np.errstate(invalid="ignore"):
        tail = np.where(T == top, T - C, -np.inf).max(axis=1)
        lat = T.sum(axis=1) + (table.micro_batches - 1) * tail
    lat = np.where(np.isfinite(top[:, 0]), lat, np.inf)
    k = int(np.argmin(lat))
    if not math.isfinite(lat[k]):
        return math.inf, ()
    return float(lat[k]), tuple(int(x) for x in grid[k])


def best_pipeline(table: StageTable) -> tuple[float, tuple[int, ...]]:
    """The least pipeline latency over every combination of options and the combination (inf and
    ``()`` when every combination is dropped): exact, by listing up to :data:`ENUMERATE_UP_TO`
    combinations, else by a Viterbi pass per candidate slowest stage (module docstring)."""
    if math.prod(len(o) for o in table.own) <= ENUMERATE_UP_TO:
        return _best_by_enumeration(table)
    return _best_by_viterbi(table)


def _best_by_viterbi(table: StageTable) -> tuple[float, tuple[int, ...]]:
    """:func:`best_pipeline` without listing the combinations: for each (stage k, option pair) that could
    be the slowest, with ``V = T_k`` and ``U = T_k - C_k``, a Viterbi pass minimises ``sum T_s`` over
    the combinations in which every other stage has ``T_s < V`` or ``T_s = V`` and ``T_s - C_s <= U``
    (so that the formula's bottleneck term is exactly ``U``); the least ``sum + (B - 1) U`` over the
    candidates is the optimum, since the optimum is feasible for its own slowest stage."""
    S = len(table.own)
    B = table.micro_batches
    # T_s(p, o) and C_s(p, o) as (K_prev, K) arrays; stage 0 has one virtual previous option
    T = [table.own[0][None, :]]
    C = [np.zeros_like(T[0])]
    for s in range(1, S):
        T.append(table.xfer[s] + table.own[s][None, :])
        C.append(table.xfer[s])
    cand_v, cand_u, cand_s, cand_p, cand_o = [], [], [], [], []
    for s in range(S):
        fin = np.isfinite(T[s])
        ps, os_ = np.nonzero(fin)
        cand_v.append(T[s][ps, os_])
        cand_u.append((T[s] - C[s])[ps, os_])
        cand_s.append(np.full(ps.size, s))
        cand_p.append(ps)
        cand_o.append(os_)
    V = np.concatenate(cand_v)
    if V.size == 0:
        return math.inf, ()
    U = np.concatenate(cand_u)
    KS = np.concatenate(cand_s)
    KP = np.concatenate(cand_p)
    KO = np.concatenate(cand_o)
    n = V.size
    rows = np.arange(n)
    back: list[np.ndarray] = []
    # stage 0
    t0 = T[0][0]
    ok = (t0[None, :] < V[:, None]) | ((t0[None, :] == V[:, None]) & (t0[None, :] <= U[:, None]))
    forced = KS == 0
    if forced.any():
        ok[forced] = False
        ok[rows[forced], KO[forced]] = True
    cost = np.where(ok, t0[None, :], np.inf)
    for s in range(1, S):
        ts, cs = T[s], C[s]
        ok = (ts[None] < V[:, None, None]) | ((ts[None] == V[:, None, None]) & ((ts - cs)[None] <= U[:, None, None]))
        forced = KS == s
        if forced.any():
            ok[forced] = False
            ok[rows[forced], KP[forced], KO[forced]] = True
        total = np.where(ok, cost[:, :, None] + ts[None], np.inf)
        arg = np.argmin(total, axis=1)
        cost = np.take_along_axis(total, arg[:, None, :], axis=1)[:, 0, :]
        back.append(arg)
    end = np.argmin(cost, axis=1)
    best = cost[rows, end] + (B - 1) * U
    c = int(np.argmin(best))
    if not math.isfinite(best[c]):
        return math.inf, ()
    choice = [int(end[c])]
    for s in range(S - 1, 0, -1):
        choice.append(int(back[s - 1][c, choice[-1]]))
    return float(best[c]), tuple(reversed(choice))


# -- the estimator ----------------------------------------------------------------------------------
Split = tuple[int, int]  # (dp, tp)


@dataclass(frozen=True)
class PipelinePlan:
    """A plan of a Cell: per stage its ``(dp, tp)`` split, the iteration time it takes, and per stage
    whether it runs with gradient checkpointing (``remat``; module docstring)."""

    splits: tuple[Split, ...]
    iteration_time_s: float
    remat: tuple[bool, ...] = ()

    @property
    def modes(self) -> tuple[str, ...]:
        """Per stage ``"dp"`` (data parallel only), ``"tp"`` (tensor parallel only), ``"dp+tp"``, or
        ``"-"`` on one GPU."""
        return tuple("-" if d * t == 1 else "dp" if t == 1 else "tp" if d == 1 else "dp+tp" for d, t in self.splits)


@dataclass(frozen=True)
class Cell:
    """A job with its resources and stages fixed (Crius Sec. 4.2): ``model`` on ``gpus`` GPUs of
    ``gpu_type`` laid out as ``gpus_per_node`` (largest first) in ``stages`` pipeline stages."""

    model: OperatorGraph
    gpu_type: str
    gpus: int
    stages: int
    gpus_per_node: tuple[int, ...]

    @property
    def micro_batches(self) -> int:
        return MICRO_BATCHES_PER_STAGE * self.stages


@dataclass(frozen=True)
class CellEstimate:
    """What the estimator says of a :class:`Cell`: its ``partition``, the best assembled ``plan``
    (None when every assembled plan fails the memory filter), how many of the ``2^Ns`` assembled
    plans pass it (``feasible_plans``)."""

    cell: Cell
    partition: StagePartition
    plan: PipelinePlan | None
    feasible_plans: int

    @property
    def iteration_time_s(self) -> float:
        return math.inf if self.plan is None else self.plan.iteration_time_s

    @property
    def throughput(self) -> float:
        """Samples a second (0 when the Cell cannot run)."""
        t = self.iteration_time_s
        return 0.0 if not math.isfinite(t) else self.cell.model.global_batch / t

    @property
    def feasible(self) -> bool:
        return self.plan is not None


def plan_of(table: StageTable, options: Sequence[Sequence[Split]], choice: Sequence[int],
            latency: float) -> PipelinePlan:
    """The :class:`PipelinePlan` of option ``choice[s]`` of every stage ``s`` of ``table``."""
    return PipelinePlan(tuple(tuple(options[s][o]) for s, o in enumerate(choice)), latency,  # type: ignore[misc]
                        tuple(bool(table.remat[s][o]) for s, o in enumerate(choice)) if table.remat else ())


def pure_splits(gpus: int) -> tuple[Split, Split]:
    """The two profiled plans of a stage of ``gpus`` GPUs: data parallel only, tensor parallel only."""
    return (gpus, 1), (1, gpus)


def all_splits(gpus: int) -> tuple[Split, ...]:
    """Every (dp, tp) split of a power of two of GPUs, from data parallel only to tensor parallel only."""
    k = gpus.bit_length() - 1
    return tuple((gpus >> j, 1 << j) for j in range(k + 1))


@dataclass(frozen=True)
class _StageAgg:
    """What the costs of a stage need from its operators: FLOPs split by tensor parallelism and not,
    parameters, activation bytes (sharded, replicated, kept under checkpointing), kernels, the
    largest TP degree, and its TP communication operators grouped by size (count per byte size)."""

    f_sh: float
    f_rest: float
    params: float
    act: float
    rep: float
    kept: float
    kernels: float
    max_tp: float
    op_act: np.ndarray
    op_rep: np.ndarray
    ar_bytes: np.ndarray
    ar_count: np.ndarray
    a2a_bytes: np.ndarray
    a2a_count: np.ndarray

    @classmethod
    def of(cls, g: OperatorGraph, ops: range) -> "_StageAgg":
        sl = slice(ops.start, ops.stop)
        flops = g.column("flops")[sl]
        f_sh = float((flops * g.column("shardable")[sl]).sum())

        def grouped(b: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            keep = (b > 0) & (n > 0)
            sizes, inverse = np.unique(b[keep], return_inverse=True)
            return sizes, np.bincount(inverse, weights=n[keep], minlength=sizes.size)

        ar = grouped(g.column("tp_allreduce_bytes")[sl], g.column("tp_allreduces")[sl])
        a2a = grouped(g.column("tp_alltoall_bytes")[sl], g.column("tp_alltoalls")[sl])
        return cls(f_sh, float(flops.sum()) - f_sh, float(g.column("params")[sl].sum()),
                   float(g.column("act_bytes")[sl].sum()), float(g.column("act_replicated_bytes")[sl].sum()),
                   float(g.input_bytes[sl].sum()), float(g.column("kernels")[sl].sum()),
                   float(g.column("max_tp")[sl].min()), g.column("act_bytes")[sl], g.column("act_replicated_bytes")[sl],
                   *ar, *a2a)

    def working(self, t: int) -> float:
        """Activation bytes of the largest operator on one of ``t`` TP ranks (checkpointing recomputes one
        operator at a time)."""
        return float(np.max(self.op_act / t + self.op_rep))


def cell_plan(gpus: int, stages: int) -> ExecutionPlan:
    """A Cell as an :class:`~optsched.core.plan.ExecutionPlan` (what an allocation carries): ``pp`` =
    the stage count, ``B = 4 Ns`` micro-batches (1 without pipelining), and ``dp = gpus / stages``,
    ``tp = 1`` standing for the Cell's GPUs per stage on average (the per-stage splits, which the
    Cell's tuner chooses, are not part of an ``ExecutionPlan``)."""
    require_int("Cell plan", "gpus", gpus, 1)
    require_int("Cell plan", "stages", stages, 1)
    if gpus % stages:
        raise ValidationError(f"Cell plan: {stages} stages do not divide {gpus} GPUs")
    return ExecutionPlan(dp=gpus // stages, pp=stages, micro_batches=MICRO_BATCHES_PER_STAGE * stages if stages > 1 else 1)


class CellEstimator:
    """Estimates Cells on ``cluster`` with ``params`` (module docstring). Stage tables and estimates
    are memoised per Cell, so repeated questions (every round of a simulation) are cheap."""

    def __init__(self, cluster: Cluster, params: EstimatorParams | None = None) -> None:
        if not isinstance(cluster, Cluster):
            raise ValidationError(f"CellEstimator: cluster must be a Cluster, got {type(cluster).__name__}")
        self.cluster = cluster
        self.params = params or EstimatorParams()
        self.profile = self.params.comm_profile or default_comm_profile(cluster)
        self._estimates: dict[tuple, CellEstimate] = {}
        self._unit: dict[str, int] = {}
        self._aggs: dict[tuple, tuple[OperatorGraph, tuple[_StageAgg, ...]]] = {}
        #: results derived from Cells by other modules (e.g. tuned plans), keyed as they choose
        self.memo: dict[tuple, object] = {}

    # -- cells ------------------------------------------------------------------------------------
    def node_unit(self, gpu_type: str) -> int:
        """GPUs of the largest power-of-two part of a node of ``gpu_type`` (the node size when it is a
        power of two): Cells of more GPUs take whole parts of this size on distinct nodes."""
        u = self._unit.get(gpu_type)
        if u is None:
            self.cluster.gpu_type(gpu_type)
            size = max((n.num_gpus for n in self.cluster.nodes_of_type(gpu_type)), default=0)
            if size < 1:
                raise ValidationError(f"cluster {self.cluster.name!r} has no node with {gpu_type} GPUs")
            u = self._unit[gpu_type] = 1 << (size.bit_length() - 1)
        return u

    def cell(self, model: OperatorGraph, gpu_type: str, gpus: int, stages: int,
             gpus_per_node: Sequence[int] | None = None) -> Cell:
        """A :class:`Cell`; ``gpus_per_node`` defaults to ``gpus`` packed on parts of :meth:`node_unit`."""
        require_int("Cell", "gpus", gpus, 1)
        require_int("Cell", "stages", stages, 1)
        if gpus_per_node is None:
            shape = packed_placement(gpus, self.node_unit(gpu_type))
        else:
            shape = tuple(sorted((int(x) for x in gpus_per_node), reverse=True))
            if sum(shape) != gpus or min(shape) < 1:
                raise ValidationError(f"Cell of {gpus} GPUs: placement {tuple(gpus_per_node)} must hold them all, at "
                                      "least one a node")
        return Cell(model, gpu_type, gpus, stages, shape)

    def estimate(self, cell: Cell) -> CellEstimate:
        """The best assembled plan of ``cell`` (module docstring); memoised."""
        key = (id(cell.model), cell.gpu_type, cell.gpus, cell.stages, cell.gpus_per_node)
        est = self._estimates.get(key)
        if est is None or est.cell.model is not cell.model:
            if len(self._estimates) >= MAX_MEMO:  # a long-lived estimator fed new graphs keeps a bounded memo
                self._estimates.clear()
                self._aggs.clear()
                self.memo.clear()
            part = determine_stages(cell.model, cell.gpus, cell.stages)
            options = [pure_splits(g) for g in part.gpus]
            table = self.stage_table(cell, part, options)
            latency, choice = best_pipeline(table)
            plan = None if not choice else plan_of(table, options, choice, latency)
            feasible = math.prod(sum(1 for v in o.tolist() if v < math.inf) for o in table.own)
            est = self._estimates[key] = CellEstimate(cell, part, plan, feasible)
        return est

    # -- stage costs ------------------------------------------------------------------------------
    def efficiency(self, gpu_type: str, model: OperatorGraph) -> float:
        g = self.cluster.gpu_type(gpu_type)
        base = self.params.efficiency.get(gpu_type, g.efficiency if g.efficiency is not None else DEFAULT_EFFICIENCY)
        return base * self.params.family_factor.get((gpu_type, model.name.split("-")[0]), 1.0)

    def _aggregates(self, model: OperatorGraph, part: StagePartition) -> tuple["_StageAgg", ...]:
        key = (id(model), part.starts)
        agg = self._aggs.get(key)
        if agg is None or agg[0] is not model:
            agg = (model, tuple(_StageAgg.of(model, part.ops_of(s)) for s in range(part.num_stages)))
            self._aggs[key] = agg
        return agg[1]

    def stage_table(self, cell: Cell, part: StagePartition, options: Sequence[Sequence[Split]]) -> StageTable:
        """Costs of ``options`` (per stage, (dp, tp) splits of its GPUs) for ``cell`` staged as ``part``
        (module docstring)."""
        if not is_power_of_two(cell.gpus) or part.num_gpus != cell.gpus or part.num_stages != cell.stages:
            raise ValidationError(f"stage table: partition of {part.num_gpus} GPUs in {part.num_stages} stages does "
                                  f"not match the Cell ({cell.gpus} GPUs, {cell.stages} stages)")
        g = cell.model
        p = self.params
        prof = self.profile
        gtype = cell.gpu_type
        gt = self.cluster.gpu_type(gtype)
        B = cell.micro_batches
        S = cell.stages
        if g.global_batch % B:
            return StageTable(tuple(np.full(len(o), np.inf) for o in options),
                              tuple(np.full((len(options[s - 1]) if s else 1, len(options[s])), np.inf)
                                    for s in range(S)), B, tuple(np.zeros(len(o), dtype=bool) for o in options))
        m = g.global_batch // B
        node = [i for i, n in enumerate(cell.gpus_per_node) for _ in range(n)]  # node of each rank
        first = [0]
        for n in part.gpus[:-1]:
            first.append(first[-1] + n)
        rate = gt.peak_tflops * 1e12 * self.efficiency(gtype, g)
        mem_cap = gt.memory_gib * p.memory_headroom * GIB - p.workspace_gib * GIB
        aggs = self._aggregates(g, part)

        def tp_link(s: int, d: int, t: int) -> str:
            lo = first[s]
            return "intra" if node[lo:lo + d * t:t] == node[lo + t - 1:lo + d * t:t] else "inter"

        own: list[np.ndarray] = []
        remat: list[np.ndarray] = []
        span: list[tuple[int, int]] = []
        for s in range(S):
            a = aggs[s]
            gs = part.gpus[s]
            lo, hi = node[first[s]], node[first[s] + gs - 1]
            span.append((lo, hi))
            inflight = min(B, S - s)
            costs = np.full(len(options[s]), np.inf)
            rm = np.zeros(len(options[s]), dtype=bool)
            for k, (d, t) in enumerate(options[s]):
                if d * t != gs or m % d or t > a.max_tp:
                    continue
                q = m // d
                states = STATE_BYTES_PER_PARAM * a.params / t
                passes = TRAIN_FLOPS_FACTOR
                if states + q * (a.act / t + a.rep) * inflight > mem_cap:
                    if states + q * (a.kept * inflight + a.working(t)) > mem_cap:
                        continue
                    passes += 1.0
                    rm[k] = True
                cost = passes * q * (a.f_sh / t + a.f_rest) / (rate * p.tp_efficiency ** (t.bit_length() - 1))
                cost += a.kernels * p.kernel_launch_s
                if t > 1:
                    link = tp_link(s, d, t)
                    for sizes, counts, coll in ((a.ar_bytes, a.ar_count, "all_reduce"),
                                                (a.a2a_bytes, a.a2a_count, "all_to_all")):
                        for b_, n_ in zip(sizes, counts):
                            cost += n_ * prof.seconds(gtype, link, coll, t, b_ * q)
                if d > 1:
                    cost += prof.seconds(gtype, "intra" if lo == hi else "inter", "all_reduce", d,
                                         GRAD_BYTES_PER_PARAM * a.params / t) / B
                costs[k] = cost
            own.append(costs)
            remat.append(rm)
        xfer: list[np.ndarray] = [np.zeros((1, len(options[0])))]
        for s in range(1, S):
            D = m * part.cut_bytes[s - 1]
            (plo, phi), (lo, hi) = span[s - 1], span[s]
            if plo == phi == lo == hi:
                p2p = prof.seconds(gtype, "intra", "send_recv", 2, D / min(part.gpus[s - 1], part.gpus[s]))
            else:
                p2p = prof.seconds(gtype, "inter", "send_recv", 2, D / min(phi - plo + 1, hi - lo + 1))
            x = np.empty((len(options[s - 1]), len(options[s])))
            for k, (d, t) in enumerate(options[s]):
                gather = prof.seconds(gtype, tp_link(s, d, t), "all_gather", t, D / d) if t > 1 else 0.0
                x[:, k] = 2.0 * (p2p + gather)
            xfer.append(x)
        return StageTable(tuple(own), tuple(xfer), B, tuple(remat))

    def plan_latency(self, cell: Cell, splits: Sequence[Split]) -> float:
        """Iteration time of ``cell`` run with ``splits`` (one per stage; inf when the memory filter or a
        rule drops one)."""
        part = determine_stages(cell.model, cell.gpus, cell.stages)
        if len(splits) != cell.stages:
            raise ValidationError(f"plan of {len(splits)} stages for a Cell of {cell.stages}")
        table = self.stage_table(cell, part, [[tuple(sp)] for sp in splits])
        return table.latency([0] * cell.stages)


_SHARED: dict[Cluster, CellEstimator] = {}
#: clusters whose default estimator :func:`shared_estimator` keeps
SHARED_ESTIMATORS = 8


def shared_estimator(cluster: Cluster) -> CellEstimator:
    """The process-wide estimator with default parameters for ``cluster`` (clusters equal by value share
    one, so every policy, generator and benchmark of a process reuses the Cells estimated so far; the
    last :data:`SHARED_ESTIMATORS` clusters are kept)."""
    est = _SHARED.get(cluster)
    if est is None:
        if len(_SHARED) >= SHARED_ESTIMATORS:
            _SHARED.pop(next(iter(_SHARED)))
        est = _SHARED[cluster] = CellEstimator(cluster)
    return est


__all__ = ["Cell", "CellEstimate", "CellEstimator", "SHARED_ESTIMATORS", "cell_plan", "shared_estimator", "DEFAULT_EFFICIENCY", "EstimatorParams",
           "MICRO_BATCHES_PER_STAGE", "PipelinePlan", "StageTable", "all_splits", "best_pipeline",
           "enumerate_pipelines", "pipeline_latency", "pure_splits"]

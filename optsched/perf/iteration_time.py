"""The Rubick/Morphling iteration-time model (Morphling Appendix A, Eq. 1), vectorised.

For a job with model shape (P, h, l, s, b), plan (d, t, p, m, a, GC, ZeRO mode), GPUs per node and
CPUs per GPU ``c`` on a cluster with bandwidths (B_intra, B_inter, B_pcie):

* ``T_fwd`` (A.1): the profiled forward time of one sample on one GPU, ``f`` (seconds, see
  :class:`PerfParams`), scaled linearly to the per-GPU micro-batch ``mb = b/(d a m)`` and to the
  tensor shard ``1/t``; with PP (1F1B) ``T_fwd = (f mb / t) / p * (m + p - 1)``; with GA the
  forward pass runs ``a`` times.
* ``T_bwd = k_bwd T_fwd``, plus one more ``T_fwd`` under gradient checkpointing (recompute).
* ``T_comm = V/B`` with B the bottleneck bandwidth of the group: B_intra of the GPU type inside a
  node; as soon as a group spans two nodes, the RDMA bandwidth its GPUs drive on its thinnest node.
  Choice (Appendix A only says "bottleneck bandwidth"): B_inter is a node's aggregate RDMA
  bandwidth, split evenly over its GPUs (GPU-affine NICs); a collective (DP all-reduce, TP) whose
  group has k members on its thinnest node runs k rings in parallel and gets k * B_inter/G, a PP
  hop between two stages gets one GPU's share B_inter/G. This is what makes a 4+4 placement
  faster than 1+1+...+1 in the Rubick measurements, as the paper's Fig. 2 shows. Volumes in bytes (fp16, 2 bytes a value):
  ``V_dp = 2 P 2(d-1)/(d t p)``, ``V_tp = 2 * 4*2 (t-1) b s h l/(d t)``,
  ``V_pp = 2 * 2 p b s h/(d t)``; zero when the size of that dimension is 1. Ranks follow Megatron
  order (TP fastest, then DP, then PP) over the nodes' GPUs, largest node first.
* ``T_cc = a T_fwd + (a-1) T_bwd + f_k_sync(T_bwd, T_dp) + T_tp + T_pp`` (3D, DP, ZeRO-DP; a = 1
  gives the 3D form of A.1).
* ``T_opt = k_opt P/x`` with x = t p for 3D/DP and x = d for ZeRO-DP; ``T_opt = k_opt_off P/(d c)``
  for ZeRO-Offload; P in billions of parameters so the k's are seconds per 10^9 parameters.
* ``T_off = 4 P/(d B_pcie)``: fp16 gradients to the host and fp16 parameters back (2 + 2 bytes).
* ``T_oo = f_k_off(T_dp, T_off) + f_k_swap(T_opt, T_off)`` for ZeRO-Offload, else ``T_opt``.
* ``T_iter = T_cc + T_oo + k_const`` (Eq. 1); throughput = b / T_iter.

Choices where Appendix A is silent (tested in ``tests/test_iteration_time.py``):
  1. Under ZeRO-Offload the DP gradient exchange is counted once, inside ``T_oo`` as the paper's
     T_oo formula says, so ``T_cc = a (T_fwd + T_bwd) + T_tp + T_pp`` there (no k_sync term).
  2. ``c`` is the number of CPU cores per GPU worker (each worker updates its own 1/d partition on
     its own cores, hence P/(d c)).
  3. ``f_k(x, y) = (x^k + y^k)^(1/k)`` is evaluated as ``M (1 + (min/M)^k)^(1/k)`` with M = max,
     which is exact and does not overflow for the large k the fit may choose.

Model v2 (:mod:`optsched.perf.model_v2`) adds terms for the placement shape, NIC pairs, micro-batch
efficiency, the DP-size scaling of ZeRO-Offload's CPU optimizer and per-family multipliers; with
their neutral values (the defaults of :class:`PerfParams`) :func:`breakdown` computes exactly the
Eq. 1 above. The multipliers scale the *GPU side* of an iteration only: everything but
``f_k_swap(T_opt, T_off)`` of ZeRO-Offload, the CPU optimizer step and the swap it overlaps, whose
dependence on the CPU cores is Appendix A's (see :mod:`optsched.perf.model_v2`).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import lru_cache
from typing import Any, Sequence

import numpy as np

from optsched.core.checks import require_keys, require_number
from optsched.core.errors import ValidationError
from optsched.core.hardware import Cluster
from optsched.core.model import ModelSpec
from optsched.core.plan import PLAN_FAMILIES, ExecutionPlan, ZeroMode
from optsched.perf.model_v2 import FAMILY_MULTIPLIERS, NEUTRAL, blend_pairs, family_factor, shape_values

BYTES_FP16 = 2.0
GB = 1e9


@dataclass(frozen=True)
class Bandwidths:
    """Environment constants of Table 5, GB/s."""

    intra_gbps: float
    inter_gbps: float
    pcie_gbps: float
    gpus_per_node: int = 8

    @property
    def inter_share_gbps(self) -> float:
        """Inter-node bandwidth one GPU drives: the node's RDMA bandwidth split over its GPUs
        (GPU-affine NICs, as in HGX servers)."""
        return self.inter_gbps / self.gpus_per_node

    @classmethod
    def of(cls, cluster: Cluster, gpu_type: str) -> "Bandwidths":
        nodes = cluster.nodes_of_type(gpu_type)
        per_node = max((n.num_gpus for n in nodes), default=cluster.max_gpus_per_node)
        return cls(cluster.intra_bandwidth(gpu_type), cluster.inter_node_gbps, cluster.pcie_gbps,
                   max(1, per_node))


@dataclass(frozen=True)
class PerfParams:
    """The seven fittable parameters of Table 5 plus ``fwd_s``, the profiled forward time of one
    sample through the whole model on one GPU (Appendix A.1 takes it from a profiler; when no
    profile is given, :mod:`optsched.perf.fitting` identifies it from the iteration times), then
    the terms of model v2 (:mod:`optsched.perf.model_v2`), which default to their neutral values.

    Units: k_opt, k_opt_off in seconds per 10^9 parameters (k_opt_off per CPU core), k_const and
    fwd_s in seconds; k_bwd a ratio; k_sync, k_off, k_swap overlap exponents (>= 1). v2: k_odd and
    k_odd_node ratios (>= 0), k_nic a weight in [0, 1], k_mb and k_cpu_dp exponents, m_* factors
    (m_single on jobs of one GPU, the others on a plan family).
    """

    k_bwd: float = 2.0
    k_sync: float = 2.0
    k_opt: float = 0.02
    k_opt_off: float = 1.0
    k_off: float = 2.0
    k_swap: float = 2.0
    k_const: float = 0.01
    fwd_s: float = 0.01
    k_odd: float = 0.0
    k_odd_node: float = 0.0
    k_nic: float = 0.0
    k_mb: float = 1.0
    k_cpu_dp: float = 1.0
    m_single: float = 1.0
    m_dp: float = 1.0
    m_ga: float = 1.0
    m_gc: float = 1.0
    m_zero_dp: float = 1.0
    m_zero_offload: float = 1.0
    m_3d: float = 1.0

    #: (lower, upper) bounds the fit respects; overlap exponents are >= 1 by definition of f_k
    BOUNDS = {"k_bwd": (0.5, 5.0), "k_sync": (1.0, 100.0), "k_opt": (0.0, 10.0),
              "k_opt_off": (0.0, 200.0), "k_off": (1.0, 100.0), "k_swap": (1.0, 100.0),
              "k_const": (0.0, 10.0), "fwd_s": (1e-6, 100.0),
              "k_odd": (0.0, 50.0), "k_odd_node": (0.0, 5.0), "k_nic": (0.0, 1.0), "k_mb": (0.3, 1.0),
              "k_cpu_dp": (0.0, 1.0), "m_single": (0.25, 4.0),
              **{m: (0.25, 4.0) for m in FAMILY_MULTIPLIERS.values()}}
    SEVEN = ("k_bwd", "k_sync", "k_opt", "k_opt_off", "k_off", "k_swap", "k_const")
    #: the parameters of plain Eq. 1: the seven and fwd_s
    EQ1 = SEVEN + ("fwd_s",)

    def __post_init__(self) -> None:
        for f in fields(self):
            lo, hi = self.BOUNDS[f.name]
            v = getattr(self, f.name)
            require_number("PerfParams", f.name, v, lo)
            if v > hi:
                raise ValidationError(f"PerfParams: {f.name} must be <= {hi}, got {v}")

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    def as_array(self) -> np.ndarray:
        return np.array([getattr(self, n) for n in self.names()], dtype=float)

    @classmethod
    def from_array(cls, values: Sequence[float]) -> "PerfParams":
        return cls(**{n: float(v) for n, v in zip(cls.names(), values)})

    def replace(self, **changes: float) -> "PerfParams":
        d = self.to_dict()
        d.update(changes)
        return PerfParams(**d)

    def to_dict(self) -> dict[str, float]:
        return {n: float(getattr(self, n)) for n in self.names()}

    @property
    def is_eq1(self) -> bool:
        """Whether every v2 term is neutral (the model is plain Eq. 1)."""
        return all(getattr(self, n) == v for n, v in NEUTRAL.items())

    @classmethod
    def from_dict(cls, data: Any) -> "PerfParams":
        require_keys("PerfParams", data, (), cls.names())
        return cls(**{k: float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v
                      for k, v in data.items()})


@dataclass(frozen=True)
class PlanFeatures:
    """Everything Eq. 1 needs that does not depend on the fitted parameters, one entry per sample
    (numpy arrays of equal length). Built once per sample set; prediction is then pure array math,
    which is what makes fitting with several starts and large coefficient tables cheap."""

    fwd_units: np.ndarray  # T_fwd / fwd_s for one accumulation step (mb/t, with the PP factor)
    ga_steps: np.ndarray
    gc: np.ndarray  # 0/1
    t_dp: np.ndarray  # seconds
    t_tp: np.ndarray
    t_pp: np.ndarray
    t_off: np.ndarray
    opt_units: np.ndarray  # P/x (3D/DP/ZeRO-DP) or P/(d c) (ZeRO-Offload), P in 10^9
    offload: np.ndarray  # bool
    # model v2 (optsched.perf.model_v2.shape_values)
    odd_span: np.ndarray  # 0/1: spans nodes with an odd GPU count on one, not ZeRO-Offload
    funnel: np.ndarray  # seconds: d x V_dp through one GPU's RDMA share (0 inside a node)
    largest_node: np.ndarray  # GPUs on the job's largest node
    t_dp_pair: np.ndarray  # t_dp with NIC-pair shares
    t_tp_pair: np.ndarray
    mb_rel: np.ndarray  # per-GPU micro-batch / (global batch / GPUs per node)
    family: np.ndarray  # index into PLAN_FAMILIES
    single: np.ndarray  # 0/1: the job runs on one GPU
    dp: np.ndarray  # DP size d
    cpus: np.ndarray  # CPU cores per GPU c

    def __len__(self) -> int:
        return int(self.fwd_units.shape[0])

    @staticmethod
    def concat(parts: Sequence["PlanFeatures"]) -> "PlanFeatures":
        return PlanFeatures(*(np.concatenate([getattr(p, f.name) for p in parts])
                              for f in fields(PlanFeatures)))


def _node_of_rank(gpus_per_node: Sequence[int]) -> np.ndarray:
    return np.repeat(np.arange(len(gpus_per_node)), np.asarray(gpus_per_node, dtype=int))


def group_node_spread(plan: ExecutionPlan, gpus_per_node: Sequence[int]) -> tuple[int, int, int]:
    """For the DP, TP and PP groups of ``plan``: 0 when every group lies inside one node, else the
    smallest number of members a spanning group has on one of its nodes (Megatron rank order:
    rank = tp_i + t (dp_i + d pp_i), ranks filled node by node, largest node first)."""
    gpn = tuple(sorted((int(g) for g in gpus_per_node), reverse=True))
    if sum(gpn) != plan.num_gpus:
        raise ValidationError(
            f"plan {plan.label} uses {plan.num_gpus} GPUs but the placement {gpn} has {sum(gpn)}")
    return _group_node_spread(plan.dp, plan.tp, plan.pp, gpn)


@lru_cache(maxsize=65536)
def _group_node_spread(dp: int, tp: int, pp: int, gpn: tuple[int, ...]) -> tuple[int, int, int]:
    """:func:`group_node_spread` on plain values, cached (the scheduler asks for the same shapes
    over and over)."""
    grid = _node_of_rank(gpn).reshape(pp, dp, tp)

    def spread(axis: int) -> int:
        groups = np.moveaxis(grid, axis, -1).reshape(-1, grid.shape[axis])
        spans = groups.min(axis=1) != groups.max(axis=1)
        worst = 0
        for g in groups[spans]:
            counts = np.bincount(g)
            k = int(counts[counts > 0].min())
            worst = k if worst == 0 else min(worst, k)
        return worst

    return spread(1), spread(2), spread(0)


def plan_features(model: ModelSpec, plan: ExecutionPlan, gpus_per_node: Sequence[int],
                  cpus_per_gpu: float, bw: Bandwidths) -> PlanFeatures:
    """Features of one (plan, placement, CPUs) sample; see the module docstring for each formula."""
    return features_of(model, [(plan, tuple(gpus_per_node), cpus_per_gpu)], bw)


def features_of(model: ModelSpec, configs: Sequence[tuple[ExecutionPlan, Sequence[int], float]],
                bw: Bandwidths) -> PlanFeatures:
    """Features of many (plan, placement, CPUs) samples, one row each (:func:`feature_values`)."""
    rows = [feature_values(model, plan, gpn if type(gpn) is tuple else tuple(int(g) for g in gpn), float(c), bw)
            for plan, gpn, c in configs]
    cols = list(zip(*rows))
    names = [f.name for f in fields(PlanFeatures)]
    return PlanFeatures(**{n: np.array(col, dtype=bool if n == "offload" else float) for n, col in zip(names, cols)})


@lru_cache(maxsize=1 << 18)
def feature_values(model: ModelSpec, plan: ExecutionPlan, gpus_per_node: tuple[int, ...], cpus_per_gpu: float,
                   bw: Bandwidths) -> tuple[float | bool, ...]:
    """The features of one sample as plain values, in :class:`PlanFeatures` field order; cached (the
    round tables ask for the same configurations over and over)."""
    if not cpus_per_gpu > 0 and plan.zero is ZeroMode.OFFLOAD:
        raise ValidationError(f"plan {plan.label} of model {model.name!r}: ZeRO-Offload needs CPUs (> 0 per GPU)")
    d, t, p, m, a = plan.dp, plan.tp, plan.pp, plan.micro_batches, plan.ga_steps
    b, s, h, l = model.global_batch, model.seq_len, model.hidden, model.layers
    P = float(model.num_params)
    dp_k, tp_k, pp_k = group_node_spread(plan, gpus_per_node)
    intra, share = bw.intra_gbps * GB, bw.inter_share_gbps * GB
    mb = b / (d * a * m)
    fwd_units = (mb / t) / p * (m + p - 1)
    v_dp = BYTES_FP16 * P * 2 * (d - 1) / (d * t * p)
    v_tp = BYTES_FP16 * 4 * 2 * (t - 1) * b * s * h * l / (d * t)
    v_pp = BYTES_FP16 * 2 * p * b * s * h / (d * t) if p > 1 else 0.0
    offload = plan.zero is ZeroMode.OFFLOAD
    if offload:
        opt_units = P / 1e9 / (d * cpus_per_gpu)
        t_off = 2 * BYTES_FP16 * P / (d * bw.pcie_gbps * GB)
    else:
        x = d if plan.zero is ZeroMode.DP else t * p
        opt_units = P / 1e9 / x
        t_off = 0.0
    t_dp = float(v_dp / (dp_k * share if dp_k else intra))
    t_tp = float(v_tp / (tp_k * share if tp_k else intra))
    return (float(fwd_units), float(a), 1.0 if plan.gc else 0.0, t_dp, t_tp,
            float(v_pp / (share if pp_k else intra)), float(t_off), float(opt_units), offload,
            *shape_values(plan, gpus_per_node, v_dp, share, dp_k, tp_k, t_dp, t_tp, mb, b / bw.gpus_per_node),
            float(d), float(cpus_per_gpu))


def overlap(k: float | np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``f_overlap^k(x, y) = (x^k + y^k)^(1/k)`` (Appendix A.3), evaluated stably."""
    hi = np.maximum(x, y)
    lo = np.minimum(x, y)
    safe = np.where(hi > 0, hi, 1.0)
    return np.where(hi > 0, hi * (1.0 + (lo / safe) ** k) ** (1.0 / k), 0.0)


@dataclass(frozen=True)
class IterationBreakdown:
    """The parts of Fig. 5 / Appendix A for a batch of samples (arrays), seconds."""

    t_fwd: np.ndarray
    t_bwd: np.ndarray
    t_dp: np.ndarray
    t_tp: np.ndarray
    t_pp: np.ndarray
    t_opt: np.ndarray
    t_off: np.ndarray
    t_cc: np.ndarray
    t_oo: np.ndarray
    t_iter: np.ndarray
    t_odd: np.ndarray  # model v2's odd-node time (0 under Eq. 1)
    t_cpu: np.ndarray  # ZeRO-Offload's CPU side f_k_swap(T_opt, T_off), never scaled by a family factor (else 0)


def breakdown(features: PlanFeatures, params: PerfParams) -> IterationBreakdown:
    """Evaluate Eq. 1 part by part for every sample in ``features``, with model v2's terms where
    ``params`` sets them (:mod:`optsched.perf.model_v2`; neutral terms leave Eq. 1 exactly).

    ``T_iter = m_family m_1 (T_cc + T_oo,gpu + k_const + T_odd) + T_cpu`` (``m_1 = m_single`` for a job
    on one GPU, else 1) where, under ZeRO-Offload,
    ``T_oo,gpu = f_k_off(T_dp, T_off)`` and ``T_cpu = f_k_swap(T_opt, T_off)`` (the two halves of
    A.2's T_oo), and otherwise ``T_oo,gpu = T_opt`` (the GPU optimizer step) and ``T_cpu = 0``. With
    every m = 1 this is Eq. 1."""
    f = features
    t_fwd = params.fwd_s * f.fwd_units
    if params.k_mb != 1.0:
        t_fwd = t_fwd * f.mb_rel ** (params.k_mb - 1.0)
    t_bwd = params.k_bwd * t_fwd + f.gc * t_fwd
    t_dp, t_tp = blend_pairs(f.t_dp, f.t_dp_pair, params.k_nic), blend_pairs(f.t_tp, f.t_tp_pair, params.k_nic)
    a = f.ga_steps
    cc_offload = a * (t_fwd + t_bwd) + t_tp + f.t_pp
    cc_sync = a * t_fwd + (a - 1) * t_bwd + overlap(params.k_sync, t_bwd, t_dp) + t_tp + f.t_pp
    t_cc = np.where(f.offload, cc_offload, cc_sync)
    k_opt_off = params.k_opt_off
    if params.k_cpu_dp != 1.0:
        k_opt_off = k_opt_off * f.dp ** (1.0 - params.k_cpu_dp)
    t_opt = np.where(f.offload, k_opt_off, params.k_opt) * f.opt_units
    t_cpu = np.where(f.offload, overlap(params.k_swap, t_opt, f.t_off), 0.0)
    t_oo_gpu = np.where(f.offload, overlap(params.k_off, t_dp, f.t_off), t_opt)
    t_oo = t_oo_gpu + t_cpu
    t_gpu = t_cc + t_oo_gpu + params.k_const
    t_odd = np.zeros_like(t_gpu)
    if params.k_odd:
        t_odd = params.k_odd * f.odd_span * f.funnel * (1.0 + params.k_odd_node * (f.largest_node - 1.0))
        t_gpu = t_gpu + t_odd
    multipliers = [getattr(params, FAMILY_MULTIPLIERS[fam]) for fam in PLAN_FAMILIES]
    if any(m != 1.0 for m in multipliers):
        t_gpu = t_gpu * family_factor(f.family, multipliers)
    if params.m_single != 1.0:
        t_gpu = t_gpu * np.where(f.single > 0, params.m_single, 1.0)
    t_iter = t_gpu + t_cpu
    return IterationBreakdown(t_fwd, t_bwd, t_dp, t_tp, f.t_pp, t_opt, f.t_off, t_cc, t_oo, t_iter, t_odd, t_cpu)


def predict_iteration_time(features: PlanFeatures, params: PerfParams) -> np.ndarray:
    return breakdown(features, params).t_iter


def iteration_time(model: ModelSpec, plan: ExecutionPlan, gpus_per_node: Sequence[int],
                   cpus_per_gpu: float, bw: Bandwidths, params: PerfParams) -> float:
    """T_iter (seconds) of one plan on one placement (Eq. 1)."""
    return float(predict_iteration_time(plan_features(model, plan, gpus_per_node, cpus_per_gpu, bw), params)[0])


def throughput(model: ModelSpec, plan: ExecutionPlan, gpus_per_node: Sequence[int],
               cpus_per_gpu: float, bw: Bandwidths, params: PerfParams) -> float:
    """Samples per second: b / T_iter."""
    return model.global_batch / iteration_time(model, plan, gpus_per_node, cpus_per_gpu, bw, params)

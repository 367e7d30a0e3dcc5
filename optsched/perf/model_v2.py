"""Performance model v2: Morphling's Eq. 1 (Appendix A) as the backbone, plus the terms the public
measurements (``../shared/data/morphling/placements``) show and Eq. 1 cannot express. Every term has
a *neutral* value at which the model is exactly Eq. 1 (:data:`NEUTRAL`); the fit
(:mod:`optsched.perf.fitting`) frees a term only when the fitted rows can identify it
(:mod:`optsched.perf.identifiability`) and holds it neutral otherwise, so a fit on few rows is
Eq. 1's fit.

Terms (parameters of :class:`~optsched.perf.iteration_time.PerfParams`):

* **Odd GPU counts on spanning jobs** (``k_odd`` >= 0, ``k_odd_node`` >= 0; neutral 0). A job that
  spans nodes with an *odd* number of its GPUs on some node is systematically slower outside
  ZeRO-Offload: ViT GA on 8 GPUs takes 0.27-0.45 s with an odd node against 0.066-0.083 s on ``44``,
  ``26``, ``2222``; T5 GA 0.895 s on ``233`` against 0.685 s on ``224``. The extra time grows with
  the DP size (ViT ZeRO-DP, one GPU per node: +0.03 s on 2 GPUs, +0.09 s on 4, +0.17 s on 8, about
  d - 1) and with the GPUs of the largest node (ViT GC on 8 GPUs: 0.22 s on ``11111111``, 0.35 s on
  ``1133``, 0.53 s on ``17``), and not with the thinnest node (``35`` is as slow as ``17``). Reading:
  with an odd count the node's GPUs cannot be paired with its NICs, and the gradient traffic of the
  whole ring funnels through one GPU's share of the node's RDMA bandwidth. So
  ``T_odd = k_odd x F x (1 + k_odd_node (n_max - 1))`` with the *funnel time*
  ``F = d x V_dp / (B_inter / G)`` (all d ranks' all-reduce volume through one GPU's share) and
  ``n_max`` the largest node's GPUs. ZeRO-Offload rows show no such effect (ViT ZeRO-Offload: 0.098-
  0.133 s on every 8-GPU placement), nor do 3D plans without data parallelism (GPT-2 ``251``-``651``
  on nodes of 5: 1.05-1.07 s), for which F = 0.
* **NIC pairs** (``k_nic`` in [0, 1]; neutral 0). Eq. 1 as implemented gives a collective whose
  thinnest node holds k of its members k GPU-shares of that node's RDMA bandwidth. The measurements
  move in pairs: T5's sync time is about 550 ms with 1-2 GPUs on the thinnest node and 310-330 ms
  with 3-4, RoBERTa GA on 8 GPUs costs the same 0.07-0.08 s over one node with k = 1 and k = 2, and
  0.02 s with k = 3 and 4, as if one NIC served two GPUs. The DP and TP bandwidth uses
  ``k_eff = (1 - k_nic) k + k_nic 2 ceil(k/2)`` shares (k_nic = 1: whole NIC pairs).
* **Micro-batch efficiency** (``k_mb`` in [0.3, 1]; neutral 1: a larger micro-batch is never less
  efficient per sample). Appendix A scales the forward time linearly
  with the per-GPU micro-batch; GPUs are more efficient on larger ones (RoBERTa ZeRO-DP: 0.684 s for
  64 samples on one GPU, 0.698 s for 32 samples per GPU on two). T_fwd is multiplied by
  ``(mb / mb0)^(k_mb - 1)`` with mb0 = global batch / GPUs per node (one node's data-parallel
  micro-batch, where profiles are taken).
* **DP-size scaling of ZeRO-Offload's CPU optimizer** (``k_cpu_dp`` in [0, 1]; neutral 1). Appendix
  A.2 divides the CPU optimizer step by the DP size, ``T_opt = k_opt_off P / (d c)``. The measured
  ``optimize`` column of the ZeRO-Offload rows falls much more slowly: BERT 274, 198, 153 and 118 ms
  on 1, 2, 4 and 8 GPUs of one node (and 109 ms on ``11111111``, one GPU on each of 8 nodes, so it is
  not the node's memory bandwidth), GPT-2 1068 to 460 ms, RoBERTa 287 to 113 ms: about d^-0.4
  (d^-0.29 to d^-0.54 over the models). So ``T_opt = k_opt_off P / (d^k_cpu_dp c)``: the step still
  scales with the cores as A.2 says, only the share of it that partitioning removes is fitted.
* **One-GPU jobs** (``m_single`` > 0; neutral 1) on the GPU side of a job that runs on one GPU. A
  one-GPU job has no data-parallel machinery at all (no gradient bucketing, no collective, no ZeRO
  partitioning), which Eq. 1 only sees as T_dp = 0. RoBERTa shows that this can be worth far more
  than the missing all-reduce: two GPUs of one node take as long as one (GA 0.705 s on ``1``, 0.737 s
  on ``11``; ZeRO-DP 0.684 s on ``1``, 0.698 s on ``2``; ZeRO-Offload 1.101 s on ``1``, 0.921 s on
  ``2``), while from 2 to 4 to 8 GPUs the time halves as Eq. 1 says (GA 0.737, 0.373, 0.234 s); per
  GPU and sample the one-GPU runs take 11.0 ms against 21.8-29.3 ms on 2 to 8 GPUs, and the
  ``overlap_sync`` column is the same on ``1`` and ``2`` (0.652 and 0.650 s for ZeRO-DP) while the
  per-micro-step ``forward`` column is 0.02 s everywhere. No smooth function of the micro-batch
  gives that step (a fit with ``k_mb`` misses these rows by 20-70% held out), a factor on one-GPU
  jobs does. Fitted on every row: RoBERTa 0.56; ViT 1.29, BERT 1.09, T5 0.96, GPT-2 1.06 (their
  one-GPU rows are close to Eq. 1). Freed only by two one-GPU rows of families that also have rows
  on more GPUs (:mod:`optsched.perf.identifiability`), so a family factor cannot stand in for it.
* **Per-family multipliers** (``m_dp``, ``m_ga``, ``m_gc``, ``m_zero_dp``, ``m_zero_offload``,
  ``m_3d`` > 0; neutral 1) on the *GPU side* of a plan family's iteration, for the efficiency of
  each implementation that Eq. 1's shared constants miss (T5 ZeRO-DP on ``11`` needs 320 ms of
  optimizer step against GA's 83 ms; the profiled forward times are about half of what the
  iterations show, hence factors of about 2). Only freed for a family with at least three fitted
  rows; the other families get the geometric mean of the fitted factors
  (:func:`optsched.perf.fitting.fit`), since part of every factor is shared.

**The CPU side of ZeRO-Offload** (Appendix A.2: ``f_k_swap(T_opt, T_off)``, the optimizer step on the
CPU cores and the PCIe swap it overlaps) is never multiplied by a family factor: a factor corrects
the GPU kernels' efficiency, and the CPU step is where the cores act (T_opt ~ 1/c; Rubick Sec. 7.2,
Fig. 7: LLaMA-2-7B with ZeRO-Offload on one A800 runs 1.7x faster with twice the CPUs). Every public
measurement row runs with the same CPUs per GPU, so the rows cannot tell ZeRO-Offload's GPU side
from its CPU side: a free ``m_zero_offload`` absorbed the CPU step and the fit drove ``k_opt_off`` to
zero (BERT, GPT-2 and T5 ZeRO-Offload then ran as fast on 2 CPUs per GPU as on 32). So
``m_zero_offload`` is *tied* (:func:`optsched.perf.identifiability.identify`): ZeRO-Offload is ZeRO-2
with the optimizer moved to the CPU (Ren et al., ZeRO-Offload, ATC'21), so its GPU side takes the
ZeRO-DP factor (the geometric mean of the ZeRO-DP and GC factors where the Offload rows run with
GC), as Appendix A shares one set of GPU-side parameters between all plans; the Offload rows then
identify k_opt_off as what their GPU side does not explain. It is freed only by a measurement at
another CPU count: Offload rows at two CPU counts per GPU, or a published speed-up
(:mod:`optsched.perf.cpu_anchor`, Rubick Fig. 7 for LLaMA-2-7B on A800), which the fit then meets
as a prior. For the same reason ``k_swap`` is held at its prior: at one CPU count T_opt and T_off
both scale as 1/d, so the rows fix the size of ``f_k_swap(T_opt, T_off)`` but not how it splits
into CPU and PCIe time.

**Extrapolation** stays sane (:meth:`optsched.perf.performance_model.PerformanceModel.iteration_times`
with ``form="v2"``): every term is positive or a positive factor, so predictions are positive; and a
DP-family plan spanning nodes is never predicted faster per GPU than the best single-node rate of the
model's DP-family plans (:func:`single_node_rate`) scaled by its GPUs.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Protocol, Sequence

import numpy as np

from optsched.core.errors import ValidationError
from optsched.core.model import ModelSpec
from optsched.core.plan import PLAN_FAMILIES, ExecutionPlan, ZeroMode, offload_runs_with_gc, parse_plan_code

#: the forms of the model a fit may produce: plain Appendix A, or with the terms above
MODEL_FORMS = ("eq1", "v2")
#: the form ``optsched fit`` and the built-in defaults use
DEFAULT_FORM = "v2"
#: the v2 shape and efficiency terms (not the family multipliers)
SHAPE_TERMS = ("k_odd", "k_odd_node", "k_nic", "k_mb", "k_cpu_dp", "m_single")
#: the multiplier parameter of each plan family (:data:`optsched.core.plan.PLAN_FAMILIES`)
FAMILY_MULTIPLIERS: dict[str, str] = {"dp": "m_dp", "ga": "m_ga", "gc": "m_gc", "zero-dp": "m_zero_dp",
                                      "zero-offload": "m_zero_offload", "3d": "m_3d"}
#: every v2 parameter and its neutral value (at which the model is Eq. 1)
NEUTRAL: dict[str, float] = {"k_odd": 0.0, "k_odd_node": 0.0, "k_nic": 0.0, "k_mb": 1.0, "k_cpu_dp": 1.0,
                             "m_single": 1.0, **{m: 1.0 for m in FAMILY_MULTIPLIERS.values()}}
#: the DP-family plan codes the extrapolation floor compares with
DP_FAMILY_CODES = ("dp", "ga", "gc", "zero-dp", "zero-offload")


def check_form(form: str) -> str:
    """``form`` if it is one of :data:`MODEL_FORMS`, else ``ValidationError``."""
    if form not in MODEL_FORMS:
        raise ValidationError(f"unknown model form {form!r}; known: {', '.join(MODEL_FORMS)}")
    return form


def shape_values(plan: ExecutionPlan, gpus_per_node: tuple[int, ...], v_dp: float, share_bps: float,
                 dp_k: int, tp_k: int, t_dp: float, t_tp: float, micro_batch: float, mb0: float
                 ) -> tuple[float, float, float, float, float, float, float, float]:
    """The v2 features of one sample (:class:`~optsched.perf.iteration_time.PlanFeatures` fields
    ``odd_span, funnel, largest_node, t_dp_pair, t_tp_pair, mb_rel, family, single``): the odd-node
    flag, the funnel time F (seconds), the largest node's GPUs, the DP and TP times with NIC-pair
    shares, the micro-batch relative to mb0, the family's index in ``PLAN_FAMILIES``, and whether the
    job runs on one GPU."""
    spans = len(gpus_per_node) > 1
    odd = spans and any(g % 2 for g in gpus_per_node) and plan.zero is not ZeroMode.OFFLOAD
    funnel = plan.dp * v_dp / share_bps if spans else 0.0
    return (1.0 if odd else 0.0, float(funnel), float(max(gpus_per_node)), _pair_time(t_dp, dp_k),
            _pair_time(t_tp, tp_k), float(micro_batch / mb0), float(PLAN_FAMILIES.index(plan.family)),
            1.0 if plan.num_gpus == 1 else 0.0)


def _pair_time(t: float, k: int) -> float:
    """A collective's time with 2 ceil(k/2) GPU-shares instead of k (k = 0: inside one node)."""
    return t if k <= 0 else t * k / (2 * math.ceil(k / 2))


def blend_pairs(t: np.ndarray, t_pair: np.ndarray, w: float) -> np.ndarray:
    """The collective time with ``(1 - w) k + w 2 ceil(k/2)`` shares: the bandwidths blend linearly,
    so the times blend harmonically (equal inputs give themselves back)."""
    if w == 0.0:
        return t
    safe = np.where(t > 0, t, 1.0)
    safe_pair = np.where(t_pair > 0, t_pair, 1.0)
    return np.where(t > 0, 1.0 / ((1.0 - w) / safe + w / safe_pair), 0.0)


def family_factor(family: np.ndarray, multipliers: Sequence[float]) -> np.ndarray:
    """The multiplier of each sample's plan family (``multipliers`` in ``PLAN_FAMILIES`` order)."""
    return np.asarray(multipliers, dtype=float)[family.astype(np.int64)]


class _NodeSize(Protocol):
    """The GPUs per node of :class:`~optsched.perf.iteration_time.Bandwidths`."""

    @property
    def gpus_per_node(self) -> int: ...


class FormulaModel(Protocol):
    """What :func:`single_node_rate` reads of a performance model
    (:class:`~optsched.perf.performance_model.PerformanceModel` is one): its model, the GPUs per node of
    its bandwidths and its formula's times of (plan, GPUs per node, CPUs per GPU) configurations."""

    @property
    def model(self) -> ModelSpec: ...

    @property
    def bandwidths(self) -> _NodeSize: ...

    def raw_iteration_times(self, configs: Sequence[tuple[ExecutionPlan, tuple[int, ...], float]]) -> np.ndarray: ...


def single_node_rate(pm: FormulaModel, cpus_per_gpu: float) -> float:
    """The best samples per second per GPU of ``pm``'s DP-family plans on one node (1 to G GPUs),
    as ``pm`` predicts them without the floor; 0 when none parses (cached)."""
    return _single_node_rate(pm, float(cpus_per_gpu))


@lru_cache(maxsize=4096)
def _single_node_rate(pm: FormulaModel, cpus_per_gpu: float) -> float:
    model = pm.model
    configs = []
    for g in range(1, pm.bandwidths.gpus_per_node + 1):
        for code in DP_FAMILY_CODES:
            try:
                plan = parse_plan_code(code, g, model.global_batch, offload_gc=offload_runs_with_gc(model))
            except ValidationError:
                continue
            configs.append((plan, (g,), cpus_per_gpu))
    if not configs:
        return 0.0
    times = pm.raw_iteration_times(configs)
    gpus = np.array([p.num_gpus for p, _, _ in configs], dtype=float)
    return float(np.max(model.global_batch / (times * gpus)))


__all__ = ["DEFAULT_FORM", "DP_FAMILY_CODES", "FAMILY_MULTIPLIERS", "FormulaModel", "MODEL_FORMS", "NEUTRAL",
           "SHAPE_TERMS", "blend_pairs", "check_form", "family_factor", "shape_values", "single_node_rate"]

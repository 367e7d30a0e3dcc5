"""Built-in performance models: fitted parameters of the seven catalogue models on the A800
cluster, so that optsched runs on a fresh machine without any measurement file.

The numbers in :data:`DEFAULT_PARAMS` are *our fit results* (not measurements): they were produced
by ``python benchmarks/fit_default_params.py`` (RMSLE fit of model v2, :mod:`optsched.perf.model_v2`,
with :mod:`optsched.perf.fitting` on every row of the public Rubick measurements, 12 starts, seed 0)
and pasted here; the built-in models have form :data:`~optsched.perf.model_v2.DEFAULT_FORM` (v2), so
predictions outside the measured table (the simulator's calibrated ground truth included) use v2.
``fwd_s`` is not fitted where a profile exists: it is :data:`PROFILED_FWD_S`, the per-sample forward
time we derived from the artifact's profiling runs (:func:`optsched.perf.measurements.read_profile_forward_s`),
as Appendix A.1 takes T_fwd from a profiler; the other parameters are fitted around it (the family
multipliers of about 2 say the profiled forward time is about half of what the iterations show).
Every ViT row is used: v2's odd-node term explains the multi-node rows that Eq. 1 had to leave out.
LLaMA-30B has six rows, all 3D plans: they identify k_sync, k_opt, k_const and fwd_s, and no v2 term
(its parameters are Eq. 1's; its ZeRO-Offload parameters are the Table 5 prior).

ZeRO-Offload's CPU side (:mod:`optsched.perf.model_v2`): every row runs 8 CPUs per GPU, so
``m_zero_offload`` is tied to the ZeRO-DP (and GC) factor and ``k_swap`` held at 2, and the Offload
rows identify the CPU optimizer step as what their GPU side does not explain; LLaMA-2-7B's fit meets
the published CPU anchor (Rubick Fig. 7: 8 -> 16 CPUs, 1.7x, :mod:`optsched.perf.cpu_anchor`). The
comment after each entry gives the resulting speed-up of ZeRO-Offload on one GPU from 8 to 16 CPUs.

For another GPU type the forward time is scaled by the ratio of peak TFLOPs (a first-order
assumption; fit on measurements of that type when you have them).
"""

from __future__ import annotations

from optsched.core.catalog import GPU_TYPES, get_cluster, get_gpu_type, get_model
from optsched.core.hardware import Cluster
from optsched.core.model import ModelSpec
from optsched.perf.iteration_time import Bandwidths, PerfParams
from optsched.perf.model_v2 import DEFAULT_FORM
from optsched.perf.performance_model import PerformanceModel

REFERENCE_GPU = "A800"

#: Per-sample forward time (s) on one A800, derived by ``read_profile_forward_s`` from the Rubick
#: artifact's profiling runs (median over its data-parallel runs of forward_time / samples per GPU).
#: LLaMA-30B is absent: its profile files are a copy of LLaMA-7B's (a known defect of the artifact),
#: so its fwd_s is fitted with the other parameters.
PROFILED_FWD_S: dict[str, float] = {
    "vit": 0.000625, "roberta": 0.0075, "bert": 0.007875, "t5": 0.02275, "gpt2": 0.071, "llama7": 0.3745,
}

#: fitted on the A800 8x8 cluster with model v2 (see module docstring); pasted output of
#: ``python benchmarks/fit_default_params.py`` (every row, 12 starts, seed 0)
DEFAULT_PARAMS: dict[str, PerfParams] = {
    "vit": PerfParams(k_bwd=0.5, k_sync=2.16437, k_opt=0, k_opt_off=1.71367, k_off=3.01173, k_swap=2, k_const=0.0109213, fwd_s=0.000625, k_odd=0.283699, k_odd_node=0.226366, k_nic=0.498244, k_mb=0.780001, k_cpu_dp=0, m_dp=2.61031, m_ga=2.41677, m_gc=2.51823, m_zero_dp=2.92245, m_zero_offload=2.92245, m_3d=2.61031),  # RMSLE 0.124 on 65 rows; ZeRO-Offload 1 GPU 8->16 CPUs 1.03x
    "roberta": PerfParams(k_bwd=0.667873, k_sync=1.71839, k_opt=0, k_opt_off=4.01073, k_off=1, k_swap=2, k_const=0, fwd_s=0.0075, k_odd=0.00179025, k_nic=1, k_mb=0.654681, k_cpu_dp=0.716471, m_dp=2.0384, m_ga=1.80777, m_gc=1.88194, m_zero_dp=2.48954, m_zero_offload=2.48954, m_3d=2.0384),  # RMSLE 0.078 on 89 rows; ZeRO-Offload 1 GPU 8->16 CPUs 1.06x
    "bert": PerfParams(k_bwd=0.504832, k_sync=1, k_opt=0.00740788, k_opt_off=5.21687, k_off=1.33856, k_swap=2, k_const=0.0183968, fwd_s=0.007875, k_odd=0.00529744, k_nic=0.746383, k_mb=0.834182, k_cpu_dp=0.368228, m_dp=1.94643, m_ga=1.92571, m_gc=1.83578, m_zero_dp=2.08597, m_zero_offload=2.08597, m_3d=1.94643),  # RMSLE 0.040 on 53 rows; ZeRO-Offload 1 GPU 8->16 CPUs 1.12x
    "t5": PerfParams(k_bwd=1.09535, k_sync=1, k_opt=0, k_opt_off=2.06008, k_off=1, k_swap=2, k_const=0.0735526, fwd_s=0.02275, k_odd=0.0300314, k_odd_node=0.199584, k_nic=0.908125, k_mb=0.85989, k_cpu_dp=0, m_dp=2.0052, m_ga=1.59861, m_gc=1.56478, m_zero_dp=1.61578, m_zero_offload=1.59007, m_3d=4),  # RMSLE 0.060 on 66 rows; ZeRO-Offload 1 GPU 8->16 CPUs 1.05x
    "gpt2": PerfParams(k_bwd=0.5, k_sync=1, k_opt=0.00150237, k_opt_off=2.04004, k_off=9.46196, k_swap=2, k_const=0.0549852, fwd_s=0.071, k_odd_node=0.516097, k_nic=0.759722, k_mb=0.885553, k_cpu_dp=0, m_dp=1.95609, m_ga=1.91753, m_gc=1.75485, m_zero_dp=1.84182, m_zero_offload=1.79781, m_3d=2.36226),  # RMSLE 0.031 on 47 rows; ZeRO-Offload 1 GPU 8->16 CPUs 1.03x
    "llama7": PerfParams(k_bwd=0.5, k_sync=1.03423, k_opt=0.0232521, k_opt_off=55.2741, k_off=1.11132, k_swap=2, k_const=0, fwd_s=0.3745, k_mb=0.939558, k_cpu_dp=0.873088, m_dp=1.53927, m_ga=1.53927, m_gc=1.53927, m_zero_dp=1.53927, m_zero_offload=1.24658, m_3d=1.90069),  # RMSLE 0.024 on 31 rows; ZeRO-Offload 1 GPU 8->16 CPUs 1.70x
    "llama30": PerfParams(k_bwd=2, k_sync=1, k_opt=0.0761154, k_opt_off=1, k_off=2, k_swap=2, k_const=0.473527, fwd_s=1.36159),  # RMSLE 0.062 on 6 rows; ZeRO-Offload 1 GPU 8->16 CPUs 1.02x
}

#: prior MFU used to start a fit from the model's FLOPs
PRIOR_MFU = 0.25


def prior_performance_model(model: ModelSpec, cluster: Cluster, gpu_type: str) -> PerformanceModel:
    """Unfitted starting point: Table 5 defaults and a forward time from the model's FLOPs at
    :data:`PRIOR_MFU` of the GPU's peak."""
    peak = cluster.gpu_type(gpu_type).peak_tflops
    fwd = model.forward_flops_per_sample / (peak * 1e12 * PRIOR_MFU)
    return PerformanceModel(model, gpu_type, Bandwidths.of(cluster, gpu_type), PerfParams(fwd_s=fwd),
                            peak_tflops=peak)


def default_performance_model(model_name: str, cluster: Cluster | None = None,
                              gpu_type: str = REFERENCE_GPU) -> PerformanceModel:
    """The built-in fitted model of a catalogue model on ``gpu_type`` GPUs of ``cluster``
    (default: the A800 8x8 cluster). Raises ``UnknownNameError`` for unknown names."""
    model = get_model(model_name)
    cluster = cluster or get_cluster("a800-8x8")
    peak = cluster.gpu_type(gpu_type).peak_tflops
    params = DEFAULT_PARAMS[model.name]
    ref_peak = get_gpu_type(REFERENCE_GPU).peak_tflops
    if gpu_type != REFERENCE_GPU:
        params = params.replace(fwd_s=params.fwd_s * ref_peak / peak)
    return PerformanceModel(model, gpu_type, Bandwidths.of(cluster, gpu_type), params, peak_tflops=peak,
                            form=DEFAULT_FORM)


__all__ = ["DEFAULT_PARAMS", "GPU_TYPES", "PRIOR_MFU", "PROFILED_FWD_S", "default_performance_model", "prior_performance_model"]

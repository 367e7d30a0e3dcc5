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

For another GPU type (:func:`peak_scaling`) the forward time is scaled by the ratio of peak TFLOPs,
the other parameters stay as fitted on A800 and the bandwidths are the cluster's for that type (a
first-order assumption; fit on measurements of that type when you have them). A decision predicted so
says it in its message (:func:`optsched.perf.lookup.prediction_notes`).
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
    "vit": PerfParams(k_bwd=0.5, k_sync=1.79011, k_opt=0, k_opt_off=1.74121, k_off=2.94515, k_swap=2, k_const=0.0108136, fwd_s=0.000625, k_odd=0.280949, k_odd_node=0.227971, k_nic=0.488544, k_mb=0.669341, k_cpu_dp=0, m_single=1.28708, m_dp=2.61485, m_ga=2.39884, m_gc=2.5323, m_zero_dp=2.94324, m_zero_offload=2.94324, m_3d=2.61485),  # RMSLE 0.121 on 65 rows; ZeRO-Offload 1 GPU 8->16 CPUs 1.02x
    "roberta": PerfParams(k_bwd=0.5, k_sync=1.53655, k_opt=0, k_opt_off=5.49029, k_off=1, k_swap=2, k_const=0.0296629, fwd_s=0.0075, k_odd=0.00591587, k_nic=1, k_mb=0.9251, k_cpu_dp=0.591688, m_single=0.564159, m_dp=1.77726, m_ga=1.73964, m_gc=1.59299, m_zero_dp=2.02573, m_zero_offload=2.02573, m_3d=1.77726),  # RMSLE 0.038 on 89 rows; ZeRO-Offload 1 GPU 8->16 CPUs 1.12x
    "bert": PerfParams(k_bwd=0.625429, k_sync=1, k_opt=0.0103174, k_opt_off=4.99138, k_off=1.24128, k_swap=2, k_const=0.0133045, fwd_s=0.007875, k_odd=0.00487001, k_nic=0.735251, k_mb=0.773181, k_cpu_dp=0.356977, m_single=1.08899, m_dp=1.94498, m_ga=1.88161, m_gc=1.85062, m_zero_dp=2.113, m_zero_offload=2.113, m_3d=1.94498),  # RMSLE 0.038 on 53 rows; ZeRO-Offload 1 GPU 8->16 CPUs 1.11x
    "t5": PerfParams(k_bwd=0.997553, k_sync=1, k_opt=0, k_opt_off=2.05559, k_off=1, k_swap=2, k_const=0.072246, fwd_s=0.02275, k_odd=0.0294634, k_odd_node=0.203395, k_nic=0.922997, k_mb=0.886713, k_cpu_dp=0, m_single=0.962359, m_dp=2.03244, m_ga=1.63853, m_gc=1.5838, m_zero_dp=1.64382, m_zero_offload=1.61353, m_3d=4),  # RMSLE 0.060 on 66 rows; ZeRO-Offload 1 GPU 8->16 CPUs 1.05x
    "gpt2": PerfParams(k_bwd=0.5, k_sync=1, k_opt=0.000200512, k_opt_off=2.01165, k_off=7.16754, k_swap=2, k_const=0.0488326, fwd_s=0.071, k_odd_node=3.42511, k_nic=0.769265, k_mb=0.85854, k_cpu_dp=0, m_single=1.06408, m_dp=2.00231, m_ga=1.93333, m_gc=1.78892, m_zero_dp=1.87046, m_zero_offload=1.82924, m_3d=2.48472),  # RMSLE 0.029 on 47 rows; ZeRO-Offload 1 GPU 8->16 CPUs 1.03x
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


def peak_scaling(cluster: Cluster, gpu_type: str) -> tuple[float, float]:
    """(peak TFLOPs of the catalogue's :data:`REFERENCE_GPU`, peak TFLOPs of ``gpu_type`` on ``cluster``):
    the built-in forward time on ``gpu_type`` is the fitted one times the first over the second
    (module docstring; :func:`default_performance_model`). The other parameters stay as fitted on
    :data:`REFERENCE_GPU`; the bandwidths are ``cluster``'s for ``gpu_type``."""
    return get_gpu_type(REFERENCE_GPU).peak_tflops, cluster.gpu_type(gpu_type).peak_tflops


def default_performance_model(model_name: str, cluster: Cluster | None = None,
                              gpu_type: str = REFERENCE_GPU) -> PerformanceModel:
    """The built-in fitted model of a catalogue model on ``gpu_type`` GPUs of ``cluster``
    (default: the A800 8x8 cluster), its forward time scaled by :func:`peak_scaling` off
    :data:`REFERENCE_GPU`. Raises ``UnknownNameError`` for unknown names."""
    model = get_model(model_name)
    cluster = cluster or get_cluster("a800-8x8")
    params = DEFAULT_PARAMS[model.name]
    ref_peak, peak = peak_scaling(cluster, gpu_type)
    if gpu_type != REFERENCE_GPU:
        params = params.replace(fwd_s=params.fwd_s * ref_peak / peak)
    return PerformanceModel(model, gpu_type, Bandwidths.of(cluster, gpu_type), params, peak_tflops=peak,
                            form=DEFAULT_FORM)


__all__ = ["DEFAULT_PARAMS", "GPU_TYPES", "PRIOR_MFU", "PROFILED_FWD_S", "REFERENCE_GPU", "default_performance_model",
           "peak_scaling", "prior_performance_model"]

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
(its parameters are Eq. 1's).

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
    "vit": PerfParams(k_bwd=0.5, k_sync=2.59776, k_opt=0, k_opt_off=0.122573, k_off=2.16281, k_swap=65.9324, k_const=0.0133042, fwd_s=0.000625, k_odd=0.301775, k_odd_node=0.227022, k_nic=0.449876, k_mb=0.786668, m_dp=2.56705, m_ga=2.25871, m_gc=2.36611, m_zero_dp=2.73714, m_zero_offload=2.96856, m_3d=2.56705),  # RMSLE 0.128 on 65 rows
    "roberta": PerfParams(k_bwd=0.640679, k_sync=1.96647, k_opt=0, k_opt_off=0.12197, k_off=1, k_swap=1.02817, k_const=0, fwd_s=0.0075, k_odd=0.00149315, k_nic=1, k_mb=0.645809, m_dp=2.21748, m_ga=1.84647, m_gc=1.94862, m_zero_dp=2.58174, m_zero_offload=2.60292, m_3d=2.21748),  # RMSLE 0.078 on 89 rows
    "bert": PerfParams(k_bwd=0.5, k_sync=1, k_opt=0, k_opt_off=0.266371, k_off=1, k_swap=17.8966, k_const=0.0311881, fwd_s=0.007875, k_odd=0.0052624, k_nic=0.719965, k_mb=0.847205, m_dp=1.92936, m_ga=1.79649, m_gc=1.72474, m_zero_dp=1.88805, m_zero_offload=2.3686, m_3d=1.92936),  # RMSLE 0.048 on 53 rows
    "t5": PerfParams(k_bwd=1.46489, k_sync=1, k_opt=0, k_opt_off=8.07041e-07, k_off=4.04908, k_swap=93.1004, k_const=0.0742067, fwd_s=0.02275, k_odd=0.0351018, k_odd_node=0.140463, k_nic=0.995131, k_mb=0.783411, m_dp=1.99444, m_ga=1.49993, m_gc=1.5257, m_zero_dp=1.55049, m_zero_offload=2.2235, m_3d=4),  # RMSLE 0.066 on 66 rows
    "gpt2": PerfParams(k_bwd=0.5, k_sync=1.30947, k_opt=0, k_opt_off=0.398297, k_off=1, k_swap=69.8784, k_const=0.0467338, fwd_s=0.071, k_odd_node=0.17327, k_nic=0.773904, k_mb=0.797715, m_dp=2.1614, m_ga=1.99111, m_gc=2.01773, m_zero_dp=2.02642, m_zero_offload=2.13726, m_3d=2.71101),  # RMSLE 0.045 on 47 rows
    "llama7": PerfParams(k_bwd=0.507262, k_sync=1.05771, k_opt=0.0131425, k_opt_off=8.66354, k_off=1, k_swap=97.6692, k_const=0, fwd_s=0.3745, k_mb=0.911907, m_dp=2.79832, m_ga=2.79832, m_gc=2.79832, m_zero_dp=2.79832, m_zero_offload=4, m_3d=1.95764),  # RMSLE 0.028 on 31 rows
    "llama30": PerfParams(k_bwd=2, k_sync=1, k_opt=0.0761154, k_opt_off=1, k_off=2, k_swap=2, k_const=0.473527, fwd_s=1.36159),  # RMSLE 0.062 on 6 rows
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

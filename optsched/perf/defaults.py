"""Built-in performance models: fitted parameters of the seven catalogue models on the A800
cluster, so that optsched runs on a fresh machine without any measurement file.

The numbers in :data:`DEFAULT_PARAMS` are *our fit results* (not measurements): they were produced
by ``python benchmarks/fit_default_params.py`` (RMSLE fit of :mod:`optsched.perf.fitting` on every
row of the public Rubick measurements, 12 starts, seed 0) and pasted here. ``fwd_s`` is not fitted
where a profile exists: it is :data:`PROFILED_FWD_S`, the per-sample forward time we derived from
the artifact's profiling runs (:func:`optsched.perf.measurements.read_profile_forward_s`), as
Appendix A.1 takes T_fwd from a profiler; the other seven parameters are fitted around it. For ViT
the fit uses the single-node rows and the ZeRO-Offload rows only: its multi-node DP/GA/GC/ZeRO-DP
rows are 3-6x slower than ZeRO-Offload on the same nodes, which exchanges the same gradients, an
effect Appendix A cannot express and which otherwise drives the fit to a model without compute. LLaMA-30B has only six rows
(one fewer than the seven the user-facing fit demands); its defaults come from those six.

For another GPU type the forward time is scaled by the ratio of peak TFLOPs (a first-order
assumption; fit on measurements of that type when you have them).
"""

from __future__ import annotations

from optsched.core.catalog import GPU_TYPES, get_cluster, get_gpu_type, get_model
from optsched.core.hardware import Cluster
from optsched.core.model import ModelSpec
from optsched.perf.iteration_time import Bandwidths, PerfParams
from optsched.perf.performance_model import PerformanceModel

REFERENCE_GPU = "A800"

#: Per-sample forward time (s) on one A800, derived by ``read_profile_forward_s`` from the Rubick
#: artifact's profiling runs (median over its data-parallel runs of forward_time / samples per GPU).
#: LLaMA-30B is absent: its profile files are a copy of LLaMA-7B's (a known defect of the artifact),
#: so its fwd_s is fitted with the other parameters.
PROFILED_FWD_S: dict[str, float] = {
    "vit": 0.000625, "roberta": 0.0075, "bert": 0.007875, "t5": 0.02275, "gpt2": 0.071, "llama7": 0.3745,
}

#: fitted on the A800 8x8 cluster (see module docstring); pasted output of fit_default_params.py
DEFAULT_PARAMS: dict[str, PerfParams] = {
    "vit": PerfParams(k_bwd=1.16028, k_sync=69.8724, k_opt=0, k_opt_off=16.8965, k_off=1, k_swap=44.6925, k_const=0.0490194, fwd_s=0.000625),  # RMSLE 0.142 on 21 rows
    "roberta": PerfParams(k_bwd=0.801788, k_sync=1.83658, k_opt=0, k_opt_off=12.9607, k_off=1, k_swap=1.41181, k_const=0.141847, fwd_s=0.0075),  # RMSLE 0.120 on 89 rows
    "bert": PerfParams(k_bwd=0.854241, k_sync=1, k_opt=0, k_opt_off=12.0013, k_off=1, k_swap=51.4105, k_const=0.125147, fwd_s=0.007875),  # RMSLE 0.089 on 53 rows
    "t5": PerfParams(k_bwd=2.54932, k_sync=99.9991, k_opt=0, k_opt_off=2.86284, k_off=1, k_swap=5.63614, k_const=0.415654, fwd_s=0.02275),  # RMSLE 0.244 on 66 rows
    "gpt2": PerfParams(k_bwd=1.23114, k_sync=1.38607, k_opt=0.0264742, k_opt_off=9.08958, k_off=1, k_swap=2.90846, k_const=0.40196, fwd_s=0.071),  # RMSLE 0.096 on 47 rows
    "llama7": PerfParams(k_bwd=1.48009, k_sync=1, k_opt=0.111136, k_opt_off=60.4621, k_off=1, k_swap=30.4515, k_const=0.213751, fwd_s=0.3745),  # RMSLE 0.073 on 31 rows
    "llama30": PerfParams(k_bwd=0.500061, k_sync=1, k_opt=0.0761153, k_opt_off=1, k_off=2, k_swap=2, k_const=0.473527, fwd_s=2.72308),  # RMSLE 0.062 on 6 rows
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
    return PerformanceModel(model, gpu_type, Bandwidths.of(cluster, gpu_type), params, peak_tflops=peak)


__all__ = ["DEFAULT_PARAMS", "GPU_TYPES", "PRIOR_MFU", "PROFILED_FWD_S", "default_performance_model", "prior_performance_model"]

"""Built-in performance models: fitted parameters of the seven catalogue models on the A800
cluster, so that optsched runs on a fresh machine without any measurement file.

The numbers in :data:`DEFAULT_PARAMS` are *our fit results* (not measurements): they were produced
by ``python benchmarks/fit_default_params.py`` (RMSLE fit of :mod:`optsched.perf.fitting` on every
row of the public Rubick measurements, 12 starts, seed 0) and pasted here. For ViT the fit uses the
single-node rows and the ZeRO-Offload rows only: its multi-node DP/GA/GC/ZeRO-DP rows are 3-6x slower
than ZeRO-Offload on the same nodes, which exchanges the same gradients, an effect Appendix A cannot
express and which otherwise drives the fit to a model without compute. LLaMA-30B has only six rows
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

#: fitted on the A800 8x8 cluster (see module docstring); pasted output of fit_default_params.py
DEFAULT_PARAMS: dict[str, PerfParams] = {
    "vit": PerfParams(k_bwd=1.27813, k_sync=85.4314, k_opt=0, k_opt_off=16.8121, k_off=1, k_swap=2.67135, k_const=0.049038, fwd_s=0.000597237),  # RMSLE 0.142 on 21 rows
    "roberta": PerfParams(k_bwd=1.22093, k_sync=1.5991, k_opt=0, k_opt_off=13.2175, k_off=1, k_swap=3.43996, k_const=0.141172, fwd_s=0.00617584),  # RMSLE 0.119 on 89 rows
    "bert": PerfParams(k_bwd=0.798148, k_sync=1, k_opt=0, k_opt_off=12.0491, k_off=1, k_swap=66.7198, k_const=0.125088, fwd_s=0.00809027),  # RMSLE 0.089 on 53 rows
    "t5": PerfParams(k_bwd=5, k_sync=9.45922, k_opt=0, k_opt_off=3.23182, k_off=1, k_swap=2.27548, k_const=0.434085, fwd_s=0.0130222),  # RMSLE 0.239 on 66 rows
    "gpt2": PerfParams(k_bwd=1.16469, k_sync=1.39505, k_opt=0.0252769, k_opt_off=8.97369, k_off=1, k_swap=78.8059, k_const=0.404038, fwd_s=0.0727983),  # RMSLE 0.096 on 47 rows
    "llama7": PerfParams(k_bwd=0.543779, k_sync=1, k_opt=0.111136, k_opt_off=58.3048, k_off=1, k_swap=74.9179, k_const=0.213751, fwd_s=0.601637),  # RMSLE 0.073 on 31 rows
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


__all__ = ["DEFAULT_PARAMS", "GPU_TYPES", "PRIOR_MFU", "default_performance_model", "prior_performance_model"]

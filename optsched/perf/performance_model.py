"""A fitted performance model of one model type on one GPU type: the object every consumer of
predictions (sensitivity curves, coefficient tables, the simulator's ground truth) holds."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from optsched.core.checks import json_int, require_int, require_keys
from optsched.core.errors import ValidationError
from optsched.core.model import ModelSpec
from optsched.core.plan import ExecutionPlan
from optsched.perf.iteration_time import (Bandwidths, IterationBreakdown, PerfParams, PlanFeatures,
                                          breakdown, features_of, predict_iteration_time)
from optsched.perf.model_v2 import check_form, single_node_rate

#: one prediction request: (plan, GPUs per node, CPU cores per GPU)
Config = tuple[ExecutionPlan, tuple[int, ...], float]


@dataclass(frozen=True)
class PerformanceModel:
    """Morphling's Eq. 1 (``form="eq1"``) or model v2 (``form="v2"``, :mod:`optsched.perf.model_v2`)
    with fitted parameters for ``model`` on ``gpu_type`` GPUs.

    ``rmsle``/``n_samples``/``identified`` describe the fit that produced ``params`` (``identified``
    lists the parameters the samples could determine; the others were held at their prior values or
    tied to others, ``reasons`` says why, as (parameter, reason) pairs).
    An ``eq1`` model must have every v2 term neutral. A ``v2`` model never predicts a DP-family plan
    spanning nodes faster per GPU than the best single-node rate of its DP-family plans
    (:func:`~optsched.perf.model_v2.single_node_rate`) scaled by its GPUs.
    """

    model: ModelSpec
    gpu_type: str
    bandwidths: Bandwidths
    params: PerfParams
    rmsle: float | None = None
    n_samples: int = 0
    identified: tuple[str, ...] = ()
    peak_tflops: float | None = None
    form: str = "eq1"
    reasons: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        check_form(self.form)
        if self.form == "eq1" and not self.params.is_eq1:
            raise ValidationError(f"performance model of {self.model.name!r}: form 'eq1' with v2 terms set; "
                                  "use form 'v2' or neutral values")

    @property
    def min_fwd_s(self) -> float:
        """Physical lower bound of ``fwd_s``: the forward FLOPs of one sample at the GPU's peak
        (model FLOPs utilisation <= 100%); 0 when the peak is unknown."""
        if self.peak_tflops is None:
            return 0.0
        return self.model.forward_flops_per_sample / (self.peak_tflops * 1e12)

    def features(self, configs: Sequence[Config]) -> PlanFeatures:
        if not configs:
            raise ValidationError("no configurations to predict")
        return features_of(self.model, configs, self.bandwidths)

    def iteration_times(self, configs: Sequence[Config]) -> np.ndarray:
        """T_iter in seconds for every configuration (vectorised Eq. 1, or v2 with its floor)."""
        t = self.raw_iteration_times(configs)
        if self.form == "v2":
            t = self._floored(configs, t)
        return t

    def raw_iteration_times(self, configs: Sequence[Config]) -> np.ndarray:
        """T_iter from the formula alone (no extrapolation floor)."""
        return predict_iteration_time(self.features(configs), self.params)

    def _floored(self, configs: Sequence[Config], t: np.ndarray) -> np.ndarray:
        """v2's extrapolation floor: a DP-family plan on several nodes takes at least
        ``b / (g x best single-node rate per GPU)`` (class docstring)."""
        spans = [i for i, (plan, gpn, _) in enumerate(configs) if len(gpn) > 1 and not plan.is_3d]
        if not spans:
            return t
        rates = np.array([single_node_rate(self, configs[i][2]) for i in spans])
        gpus = np.array([configs[i][0].num_gpus for i in spans], dtype=float)
        floor = np.where(rates > 0, self.model.global_batch / (gpus * np.where(rates > 0, rates, 1.0)), 0.0)
        out = t.copy()
        out[spans] = np.maximum(t[spans], floor)
        return out

    def throughputs(self, configs: Sequence[Config]) -> np.ndarray:
        """Samples per second, b / T_iter."""
        return self.model.global_batch / self.iteration_times(configs)

    def iteration_time(self, plan: ExecutionPlan, gpus_per_node: Sequence[int], cpus_per_gpu: float) -> float:
        return float(self.iteration_times([(plan, tuple(gpus_per_node), cpus_per_gpu)])[0])

    def throughput(self, plan: ExecutionPlan, gpus_per_node: Sequence[int], cpus_per_gpu: float) -> float:
        return float(self.throughputs([(plan, tuple(gpus_per_node), cpus_per_gpu)])[0])

    def breakdown(self, plan: ExecutionPlan, gpus_per_node: Sequence[int], cpus_per_gpu: float) -> IterationBreakdown:
        return breakdown(self.features([(plan, tuple(gpus_per_node), cpus_per_gpu)]), self.params)

    def with_params(self, params: PerfParams, **meta: Any) -> "PerformanceModel":
        return PerformanceModel(self.model, self.gpu_type, self.bandwidths, params,
                                meta.get("rmsle", self.rmsle), meta.get("n_samples", self.n_samples),
                                tuple(meta.get("identified", self.identified)), self.peak_tflops,
                                meta.get("form", self.form), tuple(meta.get("reasons", self.reasons)))

    # -- JSON -----------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        bw = self.bandwidths
        return {"format": "optsched.perf-params/1", "model": self.model.to_dict(), "gpu_type": self.gpu_type,
                "peak_tflops": self.peak_tflops, "bandwidths": {"intra_gbps": bw.intra_gbps, "inter_gbps": bw.inter_gbps,
                               "pcie_gbps": bw.pcie_gbps, "gpus_per_node": bw.gpus_per_node},
                "form": self.form, "params": self.params.to_dict(),
                "fit": {"rmsle": self.rmsle, "n_samples": self.n_samples, "identified": list(self.identified),
                        "held": [n for n in self.params.names() if n not in self.identified
                                 and (self.form == "v2" or n in PerfParams.EQ1)],
                        **({"reasons": dict(self.reasons)} if self.reasons else {})}}

    @classmethod
    def from_dict(cls, data: Any) -> "PerformanceModel":
        require_keys("perf params file", data, ("format", "model", "gpu_type", "bandwidths", "params"),
                     ("fit", "peak_tflops", "form"))
        if data["format"] != "optsched.perf-params/1":
            raise ValidationError(f"perf params file: unsupported format {data['format']!r}")
        bw = data["bandwidths"]
        require_keys("perf params file: bandwidths", bw, ("intra_gbps", "inter_gbps", "pcie_gbps", "gpus_per_node"))
        fit = data.get("fit") or {}
        gpus_per_node, n_samples = json_int(bw["gpus_per_node"]), json_int(fit.get("n_samples", 0))
        require_int("perf params file: bandwidths", "gpus_per_node", gpus_per_node, 1)
        require_int("perf params file: fit", "n_samples", n_samples, 0)
        return cls(ModelSpec.from_dict(data["model"]), str(data["gpu_type"]),
                   Bandwidths(float(bw["intra_gbps"]), float(bw["inter_gbps"]), float(bw["pcie_gbps"]), gpus_per_node),
                   PerfParams.from_dict(data["params"]), fit.get("rmsle"), n_samples,
                   tuple(fit.get("identified", ())), data.get("peak_tflops"), str(data.get("form", "eq1")),
                   tuple((str(k), str(v)) for k, v in (fit.get("reasons") or {}).items()))

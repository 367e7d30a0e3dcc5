"""Fitting the seven parameters of Morphling's model by RMSLE (Appendix A.3, "Continuous model
fitting") and refitting online when predictions drift.

* :func:`fit` minimises ``sqrt(mean((log T_pred - log T_meas)^2))`` with
  ``scipy.optimize.least_squares`` (trust-region reflective, bounded by ``PerfParams.BOUNDS``),
  from the prior plus ``starts - 1`` log-uniform random starts drawn from an explicit seeded
  generator, so the result is deterministic. It needs at least seven samples; the three
  offload-only parameters (k_opt_off, k_off, k_swap) are identified only when at least three
  samples use ZeRO-Offload, otherwise they keep their prior value and are reported as not
  identified. ``fwd_s`` (the profiled per-sample forward time) is fixed when given and otherwise
  fitted with the others: the paper reads it from a profiler, the measurement files do not carry it
  for every plan.
* :class:`OnlineRefitter` keeps the observations of running jobs and refits when the relative error
  of a new observation exceeds a threshold (Sec. 4.3).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
from scipy.optimize import least_squares

from optsched.core.errors import ValidationError
from optsched.core.plan import ZeroMode
from optsched.perf.iteration_time import PerfParams, PlanFeatures, predict_iteration_time
from optsched.perf.performance_model import Config, PerformanceModel

log = logging.getLogger(__name__)

MIN_SAMPLES = 7
MIN_OFFLOAD_SAMPLES = 3
OFFLOAD_ONLY = ("k_opt_off", "k_off", "k_swap")


def rmsle(predicted: np.ndarray, measured: np.ndarray) -> float:
    """Root mean squared logarithmic error."""
    return float(np.sqrt(np.mean((np.log(predicted) - np.log(measured)) ** 2)))


def _free_names(configs: Sequence[Config], fix_fwd: bool) -> tuple[str, ...]:
    n_off = sum(1 for p, _, _ in configs if p.zero is ZeroMode.OFFLOAD)
    names = [n for n in PerfParams.SEVEN if n_off >= MIN_OFFLOAD_SAMPLES or n not in OFFLOAD_ONLY]
    if not any(p.dp > 1 for p, _, _ in configs):
        names.remove("k_sync")  # no gradient synchronisation observed
    if not any(p.zero is not ZeroMode.OFFLOAD for p, _, _ in configs):
        names.remove("k_opt")
    if not fix_fwd:
        names.append("fwd_s")
    return tuple(names)


def fit_params(features: PlanFeatures, measured: np.ndarray, free: Sequence[str],
               prior: PerfParams, seed: int = 0, starts: int = 8,
               min_fwd_s: float = 0.0) -> tuple[PerfParams, float]:
    """Minimise RMSLE over the ``free`` parameters, the others fixed at ``prior``; ``fwd_s`` is
    kept above ``min_fwd_s`` (forward FLOPs at peak: no fit may claim more than 100% MFU)."""
    y = np.asarray(measured, dtype=float)
    if y.shape[0] != len(features):
        raise ValidationError(f"{len(features)} configurations but {y.shape[0]} measurements")
    if np.any(~np.isfinite(y)) or np.any(y <= 0):
        raise ValidationError("measured iteration times must be positive finite numbers")
    names = PerfParams.names()
    idx = np.array([names.index(n) for n in free], dtype=int)
    lo = np.array([max(PerfParams.BOUNDS[n][0], min_fwd_s) if n == "fwd_s" else PerfParams.BOUNDS[n][0]
                   for n in free])
    hi = np.array([PerfParams.BOUNDS[n][1] for n in free])
    base = prior.as_array()
    log_y = np.log(y)

    def full(x: np.ndarray) -> PerfParams:
        v = base.copy()
        v[idx] = x
        return PerfParams.from_array(v)

    def residuals(x: np.ndarray) -> np.ndarray:
        return np.log(predict_iteration_time(features, full(x))) - log_y

    rng = np.random.default_rng(seed)
    log_lo, log_hi = np.log(np.maximum(lo, 1e-4)), np.log(hi)
    best_x, best_cost = None, np.inf
    for k in range(max(1, starts)):
        x0 = np.clip(base[idx] if k == 0 else np.exp(rng.uniform(log_lo, log_hi)), lo, hi)
        res = least_squares(residuals, x0, bounds=(lo, hi), x_scale="jac", max_nfev=2000)
        if res.cost < best_cost:
            best_x, best_cost = res.x, res.cost
    assert best_x is not None
    best_x = np.where(best_x - lo < 1e-9 * (1.0 + np.abs(lo)), lo, best_x)  # snap to the bound it sits on
    params = full(best_x)
    return params, rmsle(predict_iteration_time(features, params), y)


def fit(base: PerformanceModel, configs: Sequence[Config], measured: Sequence[float], *,
        fwd_s: float | None = None, seed: int = 0, starts: int = 8,
        min_samples: int = MIN_SAMPLES) -> PerformanceModel:
    """Fit ``base``'s parameters to measured iteration times (seconds) of ``configs``.

    Raises ``ValidationError`` with fewer than ``min_samples`` samples (the paper's seven; a
    benchmark replaying a file with fewer rows, e.g. LLaMA-30B's six, may lower it). Returns a new model carrying the
    fitted parameters, the RMSLE on the samples and which parameters were identified.
    """
    if len(configs) != len(measured):
        raise ValidationError(f"{len(configs)} configurations but {len(measured)} measurements")
    if len(configs) < min_samples:
        raise ValidationError(
            f"fitting the 7-parameter model of {base.model.name!r} needs at least {min_samples} samples, "
            f"got {len(configs)}")
    prior = base.params if fwd_s is None else base.params.replace(fwd_s=fwd_s)
    if prior.fwd_s < base.min_fwd_s:
        prior = prior.replace(fwd_s=base.min_fwd_s)
    free = _free_names(configs, fix_fwd=fwd_s is not None)
    features = base.features(configs)
    params, err = fit_params(features, np.asarray(measured, float), free, prior, seed, starts,
                             base.min_fwd_s)
    log.info("fitted %s on %d samples: RMSLE %.4f, free %s", base.model.name, len(configs), err, free)
    return base.with_params(params, rmsle=err, n_samples=len(configs), identified=free)


@dataclass
class OnlineRefitter:
    """Online refitting (Sec. 4.3): ``observe`` records a measured iteration time of a running job;
    when its relative prediction error exceeds ``threshold`` and at least seven observations are
    known, the model is refitted on all of them (warm-started from the current parameters).

    ``model`` always holds the current model; ``refits`` counts the refits done.
    """

    model: PerformanceModel
    threshold: float = 0.10
    seed: int = 0
    starts: int = 2
    max_observations: int = 256
    configs: list[Config] = field(default_factory=list)
    measured: list[float] = field(default_factory=list)
    refits: int = 0

    def __post_init__(self) -> None:
        if not 0 < self.threshold:
            raise ValidationError(f"OnlineRefitter: threshold must be > 0, got {self.threshold}")

    def observe(self, config: Config, iter_time: float) -> bool:
        """Record one observation; return True when it triggered a refit."""
        if not iter_time > 0:
            raise ValidationError(f"observed iteration time must be > 0, got {iter_time}")
        predicted = self.model.iteration_time(*config)
        self.configs.append(config)
        self.measured.append(float(iter_time))
        if len(self.configs) > self.max_observations:
            self.configs.pop(0)
            self.measured.pop(0)
        error = abs(predicted / iter_time - 1.0)
        if error <= self.threshold or len(self.configs) < MIN_SAMPLES:
            return False
        self.model = fit(self.model, self.configs, self.measured, seed=self.seed, starts=self.starts)
        self.refits += 1
        log.info("refit %s after a %.1f%% error (%d observations)", self.model.model.name, 100 * error,
                 len(self.configs))
        return True

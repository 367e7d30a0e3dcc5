"""Fitting the seven parameters of Morphling's model by RMSLE (Appendix A.3, "Continuous model
fitting") and refitting online when predictions drift.

* :func:`fit` minimises ``sqrt(mean((log T_pred - log T_meas)^2))`` with
  ``scipy.optimize.least_squares`` (trust-region reflective, bounded by ``PerfParams.BOUNDS``),
  from the prior plus ``starts - 1`` log-uniform random starts drawn from an explicit seeded
  generator, so the result is deterministic. Only the parameters the rows identify are fitted
  (:func:`optsched.perf.identifiability.identify`: e.g. the three offload-only parameters need three
  ZeRO-Offload rows); the others keep their prior value and are reported as held. The rows must
  number at least the identified parameters + 1. ``fwd_s`` (the profiled per-sample forward time)
  is fixed when given and otherwise fitted with the others: the paper reads it from a profiler, the
  measurement files do not carry it for every plan.
* ``form="v2"`` (:mod:`optsched.perf.model_v2`) fits in two stages: Eq. 1's parameters first, then
  those together with the v2 terms the rows identify, from the stage-1 result and the same starts. Least
  squares never ends above its start, so a v2 fit's RMSLE on its rows is never above the Eq. 1 fit's,
  and with too few rows for any v2 term it *is* the Eq. 1 fit. Without a profiled ``fwd_s`` the v2 stage
  holds the forward time the Eq. 1 stage fitted (``forward="eq1"``, the default) and frees the
  reference family's multiplier instead, exactly as with a profiled one. Why: v2's family multipliers
  scale the forward time of each family, so in the v2 stage ``fwd_s`` trades against them (and
  ``k_bwd``, whose only evidence, the lone recomputed forward pass of GC rows, ``m_gc`` absorbs), and
  a joint fit lets it drift. T5 under nested cross-validation (``benchmarks/perf_model_accuracy.py
  --nested``, 5 outer folds, docs/perf_model.md): the five fits on the outer-training rows gave fwd_s
  0.047 to 0.280 s jointly and 0.011 to 0.014 s from the Eq. 1 stage; the held-out rows were predicted
  with 8.7% mean / 20.5% p95 error jointly, 6.3 / 15.3 from the Eq. 1 stage and 6.9 / 18.6 with the
  profiled 0.02275 s. In Eq. 1 no multiplier absorbs the GC rows' extra forward pass, so they
  separate forward from backward there. ``forward="joint"`` keeps the joint fit. Tied parameters
  (``m_zero_offload``, :func:`~optsched.perf.identifiability.identify`) follow their sources at every step.
* :func:`forward_warning` says (a logged warning naming the model and the reason) when the fit cannot
  identify the forward time: no profile and no GC row, or ``forward="joint"`` with family factors.
* **CPU anchors** (:mod:`optsched.perf.cpu_anchor`; by default the published ones of the model and GPU
  type) are priors of a v2 fit: each frees ``m_zero_offload`` and adds the residual
  ``sqrt(n) (log T(cpus_from) - log T(cpus_to) - log speedup)`` for its two configurations, n the
  number of rows, i.e. as much weight as all rows together. They are not rows: ``n_samples`` and the
  RMSLE count the rows only.
* :class:`OnlineRefitter` keeps the observations of running jobs and refits when the relative error
  of a new observation exceeds a threshold (Sec. 4.3).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np
from scipy.optimize import least_squares

from optsched.core.errors import ValidationError
from optsched.perf.cpu_anchor import CpuAnchor, published_cpu_anchors
from optsched.perf.identifiability import MIN_OFFLOAD_ROWS, Identification, identify
from optsched.perf.iteration_time import PerfParams, PlanFeatures, predict_iteration_time
from optsched.perf.model_v2 import FAMILY_MULTIPLIERS, check_form
from optsched.perf.performance_model import Config, PerformanceModel

log = logging.getLogger(__name__)

#: observations the online refitter waits for (the paper's seven profiling runs)
MIN_SAMPLES = 7
MIN_OFFLOAD_SAMPLES = MIN_OFFLOAD_ROWS
#: where a v2 fit without a profiled forward time takes ``fwd_s`` from (:func:`fit`)
FORWARD_MODES = ("eq1", "joint")


def rmsle(predicted: np.ndarray, measured: np.ndarray) -> float:
    """Root mean squared logarithmic error."""
    return float(np.sqrt(np.mean((np.log(predicted) - np.log(measured)) ** 2)))


def tie(params: PerfParams, tied: Mapping[str, Sequence[str]]) -> PerfParams:
    """``params`` with every tied parameter set to the geometric mean of its sources."""
    if not tied:
        return params
    return params.replace(**{t: math.exp(math.fsum(math.log(getattr(params, s)) for s in src) / len(src))
                             for t, src in tied.items()})


@dataclass(frozen=True)
class SpeedupPrior:
    """Prior residuals of a fit: ``weight (log T(slow[i]) - log T(fast[i]) - log_speedup[i])`` for the
    feature rows ``slow`` and ``fast`` (CPU anchors, module docstring)."""

    slow: PlanFeatures
    fast: PlanFeatures
    log_speedup: np.ndarray
    weight: float


def fit_params(features: PlanFeatures, measured: np.ndarray, free: Sequence[str],
               prior: PerfParams, seed: int = 0, starts: int = 8,
               min_fwd_s: float = 0.0, extra_starts: Sequence[PerfParams] = (),
               tied: Mapping[str, Sequence[str]] | None = None,
               speedups: SpeedupPrior | None = None) -> tuple[PerfParams, float]:
    """Minimise RMSLE over the ``free`` parameters, the others fixed at ``prior``; ``fwd_s`` is
    kept above ``min_fwd_s`` (forward FLOPs at peak: no fit may claim more than 100% MFU).
    ``tied`` parameters are the geometric mean of their sources at every step; ``speedups`` adds its
    prior residuals (the returned RMSLE is on the rows only).
    Starts: ``prior``, then ``extra_starts`` (their values of the free parameters), then log-uniform
    random points for the Eq. 1 parameters with the v2 terms at the prior's values."""
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
        return tie(PerfParams.from_array(v), tied or {})

    def residuals(x: np.ndarray) -> np.ndarray:
        params = full(x)
        r = np.log(predict_iteration_time(features, params)) - log_y
        if speedups is None:
            return r
        gain = (np.log(predict_iteration_time(speedups.slow, params))
                - np.log(predict_iteration_time(speedups.fast, params)))
        return np.concatenate([r, speedups.weight * (gain - speedups.log_speedup)])

    rng = np.random.default_rng(seed)
    log_lo, log_hi = np.log(np.maximum(lo, 1e-4)), np.log(hi)
    eq1 = np.array([n in PerfParams.EQ1 for n in free])
    points = [base[idx]] + [s.as_array()[idx] for s in extra_starts]
    for _ in range(max(1, starts) - 1):
        points.append(np.where(eq1, np.exp(rng.uniform(log_lo, log_hi)), base[idx]))
    best_x, best_cost = None, np.inf
    for x0 in points:
        x0 = np.clip(x0, lo, hi)
        res = least_squares(residuals, x0, bounds=(lo, hi), x_scale="jac", max_nfev=2000)
        if res.cost < best_cost:
            best_x, best_cost = res.x, res.cost
    assert best_x is not None
    best_x = np.where(best_x - lo < 1e-9 * (1.0 + np.abs(lo)), lo, best_x)  # snap to the bound it sits on
    params = full(best_x)
    return params, rmsle(predict_iteration_time(features, params), y)


def fit(base: PerformanceModel, configs: Sequence[Config], measured: Sequence[float], *,
        fwd_s: float | None = None, seed: int = 0, starts: int = 8,
        min_samples: int | None = None, form: str | None = None,
        cpu_anchors: Sequence[CpuAnchor] | None = None, forward: str = "eq1") -> PerformanceModel:
    """Fit ``base``'s parameters to measured iteration times (seconds) of ``configs`` under ``form``
    (``"eq1"`` or ``"v2"``; default ``base.form``).

    Fits the parameters the rows identify (:func:`~optsched.perf.identifiability.identify`) and holds
    the others at ``base``'s values (or ties them); raises ``ValidationError`` naming what is missing
    when the rows are fewer than the identified parameters + 1 (or than ``min_samples`` when given,
    e.g. the paper's seven). ``cpu_anchors`` (v2 only; default: the published ones of the model on
    ``base``'s GPU type, ``()`` for none) are priors on ZeRO-Offload's CPU scaling (module
    docstring). Returns a new model carrying the fitted parameters, the RMSLE on the samples, which
    parameters were identified and why the others were held.

    ``forward`` (v2 without ``fwd_s`` only; :data:`FORWARD_MODES`): ``"eq1"`` (default) takes the forward
    time from the Eq. 1 stage and holds it in the v2 stage (module docstring); ``"joint"`` fits it in
    both stages with everything else (the behaviour before issue 25).
    """
    form = check_form(base.form if form is None else form)
    if forward not in FORWARD_MODES:
        raise ValidationError(f"forward must be one of {', '.join(FORWARD_MODES)}, got {forward!r}")
    if len(configs) != len(measured):
        raise ValidationError(f"{len(configs)} configurations but {len(measured)} measurements")
    prior = base.params if fwd_s is None else base.params.replace(fwd_s=fwd_s)
    if prior.fwd_s < base.min_fwd_s:
        prior = prior.replace(fwd_s=base.min_fwd_s)
    features = base.features(configs)
    anchors = _anchors(base, form, cpu_anchors)
    ident = _identify(base, configs, features, fwd_s, form, min_samples, bool(anchors))
    y = np.asarray(measured, float)
    eq1_free = [n for n in ident.free if n in PerfParams.EQ1]
    params, err = fit_params(features, y, eq1_free, prior, seed, starts, base.min_fwd_s)
    stage1 = ident
    if fwd_s is None and forward == "eq1" and len(eq1_free) < len(ident.free):
        ident = _forward_from_eq1(base, configs, features, params.fwd_s, form, min_samples, bool(anchors))
        prior = prior.replace(fwd_s=params.fwd_s)
    if len(eq1_free) < len(stage1.free):
        speedups = _speedup_prior(base, anchors, len(configs)) if "m_zero_offload" in ident.free else None
        params, err = fit_params(features, y, ident.free, prior, seed, starts, base.min_fwd_s, extra_starts=[params],
                                 tied=ident.tied, speedups=speedups)
        params = _unseen_families(params, ident, {p.family for p, _, _ in configs})
    elif ident.tied and tie(params, ident.tied) != params:  # every source held: the tie is a constant
        params = tie(params, ident.tied)
        err = rmsle(predict_iteration_time(features, params), y)
    if ident is not stage1 and "fwd_s" not in ident.free:
        ident = _with_fwd_fitted(ident)
    warning = forward_warning(base, ident, fwd_s=fwd_s, form=form, forward=forward)
    if warning:
        log.warning("%s", warning)
    log.info("fitted %s (%s) on %d samples: RMSLE %.4f, free %s, held %s", base.model.name, form, len(configs), err,
             ident.free, ident.held)
    return base.with_params(params, rmsle=err, n_samples=len(configs), identified=ident.free, form=form,
                            reasons=tuple(ident.reasons.items()))


def forward_warning(base: PerformanceModel, ident: Identification, *, fwd_s: float | None, form: str,
                    forward: str = "eq1") -> str | None:
    """Why the forward time a fit of ``base`` with ``ident`` finds is not identified, or None when it is:
    profiled (``fwd_s`` given) or separated from the backward pass by GC rows (and, in v2, not left to
    trade against the family factors by ``forward="joint"``)."""
    if fwd_s is not None:
        return None
    name = base.model.name
    if "k_bwd" not in ident.free:
        return (f"{name}: the forward time is not identified: no gc row (whose recomputed forward pass is the "
                f"only one without its backward pass) separates it from the backward pass, so fwd_s is the "
                f"compute time divided by 1 + k_bwd with k_bwd held at {base.params.k_bwd:g}; give --profile or "
                f"--fwd-s, or add gc rows")
    if form == "v2" and forward == "joint" and any(m in ident.free for m in FAMILY_MULTIPLIERS.values()):
        return (f"{name}: the forward time is weakly identified: fitted jointly with the family factors, which scale "
                f"it (the gc rows' extra forward pass goes into m_gc); use --forward eq1 or --profile")
    return None


def _forward_from_eq1(base: PerformanceModel, configs: Sequence[Config], features: PlanFeatures, fwd_s: float,
                      form: str, min_samples: int | None, anchored: bool) -> Identification:
    """The v2 stage's identification with the Eq. 1 stage's forward time ``fwd_s`` held (as if profiled)."""
    return _identify(base, configs, features, fwd_s, form, min_samples, anchored)


def _with_fwd_fitted(ident: Identification) -> Identification:
    """``ident`` listing ``fwd_s`` as fitted (by the Eq. 1 stage) rather than held."""
    names = PerfParams.names()
    free = tuple(n for n in names if n in ident.free or n == "fwd_s")
    return Identification(free, tuple(n for n in ident.held if n != "fwd_s"),
                          {k: v for k, v in ident.reasons.items() if k != "fwd_s"}, len(free) + 1, ident.reference,
                          ident.tied)


def _anchors(base: PerformanceModel, form: str, anchors: Sequence[CpuAnchor] | None) -> tuple[CpuAnchor, ...]:
    """The CPU anchors a fit of ``base`` under ``form`` uses (v2 only; default: the published ones)."""
    if form != "v2":
        return ()
    return published_cpu_anchors(base.model.name, base.gpu_type) if anchors is None else tuple(anchors)


def _identify(base: PerformanceModel, configs: Sequence[Config], features: PlanFeatures, fwd_s: float | None,
              form: str, min_samples: int | None, anchored: bool) -> Identification:
    try:
        return identify([p for p, _, _ in configs], features, fix_fwd=fwd_s is not None, form=form,
                        min_rows=min_samples, anchored=anchored)
    except ValidationError as exc:
        raise ValidationError(f"fitting {base.model.name!r} ({form}): {exc}") from None


def _speedup_prior(base: PerformanceModel, anchors: Sequence[CpuAnchor], rows: int) -> SpeedupPrior | None:
    """The anchors' prior residuals, weighted as all ``rows`` together (module docstring)."""
    if not anchors:
        return None
    pairs = [a.configs(base.model) for a in anchors]
    return SpeedupPrior(base.features([p[0] for p in pairs]), base.features([p[1] for p in pairs]),
                        np.log([a.speedup for a in anchors]), math.sqrt(rows))


def _unseen_families(params: PerfParams, ident: Identification, present: set[str]) -> PerfParams:
    """Model v2's factor for the plan families without any fitted row: the geometric mean of the
    identified factors (and of the reference family's 1). The factors share a part that belongs to
    no family (e.g. a profiled forward time off by a constant: the built-in fits' factors are
    1.5-4), and a family must not be predicted faster for never having been measured (LLaMA-2-7B
    ZeRO-DP came out 2x faster than its measured 3D plans with a factor of 1). A family with one or
    two rows keeps factor 1: its own Eq. 1 parameters were fitted to them (LLaMA-2-7B's Offload rows
    in cross-validation: 2.9% mean error so, 6.1% with the mean factor). With no identified factor
    nothing changes (Eq. 1)."""
    fitted = [m for m in FAMILY_MULTIPLIERS.values() if m in ident.free]
    if not fitted:
        return params
    seen = fitted + ([ident.reference] if ident.reference else [])
    scale = math.exp(math.fsum(math.log(getattr(params, m)) for m in seen) / len(seen))
    return params.replace(**{m: scale for fam, m in FAMILY_MULTIPLIERS.items() if fam not in present})


def identification(base: PerformanceModel, configs: Sequence[Config], *, fwd_s: float | None = None,
                   form: str | None = None, cpu_anchors: Sequence[CpuAnchor] | None = None,
                   forward: str = "eq1") -> Identification:
    """What :func:`fit` would fit and hold on ``configs`` (and why), without fitting."""
    form = check_form(base.form if form is None else form)
    features = base.features(configs)
    anchored = bool(_anchors(base, form, cpu_anchors))
    ident = identify([p for p, _, _ in configs], features, fix_fwd=fwd_s is not None, form=form, anchored=anchored)
    if fwd_s is None and forward == "eq1" and any(n not in PerfParams.EQ1 for n in ident.free):
        ident = _with_fwd_fitted(_forward_from_eq1(base, configs, features, base.params.fwd_s, form, None, anchored))
    return ident


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
        try:
            self.model = fit(self.model, self.configs, self.measured, seed=self.seed, starts=self.starts)
        except ValidationError as exc:  # too few distinct rows for what they identify: wait for more
            log.info("no refit of %s yet: %s", self.model.model.name, exc)
            return False
        self.refits += 1
        log.info("refit %s after a %.1f%% error (%d observations)", self.model.model.name, 100 * error,
                 len(self.configs))
        return True

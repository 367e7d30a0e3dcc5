"""A ground truth for unmeasured configurations that does not use the policies' model: measured-neighbour
interpolation with a stated pessimism (issue 25, item 4; ground-truth spec ``neighbours:DIR``).

Why: Rubick's simulator "use[s] real performance measurement to estimate the jobs execution time"
(Rubick Sec. 7.4), but the measured tables hold a few hundred configurations and a simulation chooses
many more. :class:`~optsched.sim.ground_truth.MeasuredGroundTruth` answers those with calibrated Eq. 1
(rule M3), the same model family the Rubick policies plan with, so a policy's choices on unmeasured
configurations confirm themselves. :class:`NeighbourGroundTruth` answers them from the *measured times of
neighbouring configurations* only; Eq. 1 never sets a time here, except through the named exceptions N0
and N4 below.

**Rule for a request** (model m, GPU type g, plan p on placement n with G = p.num_gpus GPUs, CPUs per GPU
c); ``w_L(k)`` is the *slowest* measured time among m's measured configurations of neighbour level L on k
GPUs (duplicates merged into their median first, as in MeasuredGroundTruth):

  N0. m has no table, or g is not the measured GPU type (A800): the analytical source's value (source
      ``analytical``), as rule M1. In the Rubick evaluation (seven models, all measured on A800) this
      never happens.
  N1. (p, n) is a measured key: the measurement (``measured``; when c != 8 CPUs per GPU, scaled as rule
      M2: ``measured-cpu-scaled``).
  N2. Otherwise the configuration must be feasible by the analytical source's rules (A2: topology and
      memory); ``PlanInfeasibleError`` when not. Only *whether* it runs comes from there, never how fast.
  N3. Otherwise the first neighbour level L that has a measured configuration, in this order:
      ``plan`` (the same plan on other placements), ``shape`` (the same family and the same TP and PP
      sizes: another DP size, other accumulation steps or micro-batches), ``family`` (the same plan family,
      :data:`~optsched.core.plan.PLAN_FAMILIES`), ``model`` (any of m's measured configurations). The time
      is ``I_L(G) * cpu(c)`` (source ``neighbour-<L>``) with the interpolation over GPU counts
      k_1 < ... < k_r that level L measured:

      * G = k_i: ``w_L(k_i)``;
      * k_i < G < k_i+1: the power law through the two bracketing counts,
        ``w_L(k_i) * (w_L(k_i+1) / w_L(k_i)) ** (log(G / k_i) / log(k_i+1 / k_i))``;
      * G > k_r: ``w_L(k_r)`` (no gain from GPUs beyond the largest measured count);
      * G < k_1: ``w_L(k_1) * k_1 / G`` (fewer GPUs than the smallest measured count lose linearly: the
        work of k_1 GPUs on G, without the communication saved).

      ``cpu(c)`` = analytical(c) / analytical(8) as in M2 (Eq. 1 lets CPUs act only through
      ZeRO-Offload's CPU optimizer, so it is 1 for every other plan; the tables hold no other CPU share).
  N4. The named **pessimism** (:data:`PESSIMISM`): the slowest measured placement at each count
      (placement-blind: a request on one node is charged the slowest measured spread of that count), the
      slowest plan of the level at each count, no gain beyond the largest measured count, linear loss
      below the smallest. The interpolation between two measured counts is not bounded either way.

The levels and the pessimism are our own (the paper's simulator had measurements for what it ran);
Coverage counts every call by its source (``interpolated`` = every ``neighbour-*`` answer;
:meth:`NeighbourGroundTruth.sources` gives each level). Answers are memoised per request, as in the other
sources.
"""

from __future__ import annotations

import bisect
import logging
import math
from collections.abc import Mapping, Sequence
from typing import Any

from optsched.core.errors import PlanInfeasibleError, ValidationError
from optsched.core.hardware import Cluster
from optsched.core.plan import ExecutionPlan
from optsched.perf.measurements import MEASURED_CPUS_PER_GPU, Measurement
from optsched.sim.ground_truth import (MEASURED_GPU_TYPE, Coverage, GroundTruth,
                                       MeasuredGroundTruth, _check_name, _check_time, _Infeasible, _normalise)

log = logging.getLogger(__name__)

#: neighbour levels of rule N3, nearest first
LEVELS = ("plan", "shape", "family", "model")
#: the stated pessimism of rule N4 (printed by describe())
PESSIMISM = ("slowest measured placement and plan per GPU count; no gain beyond the largest measured count; "
             "linear loss below the smallest")


def _shape(plan: ExecutionPlan) -> tuple[str, int, int]:
    return plan.family, plan.tp, plan.pp


def _level_key(level: str, plan: ExecutionPlan) -> Any:
    if level == "plan":
        return plan
    if level == "shape":
        return _shape(plan)
    if level == "family":
        return plan.family
    return None


def interpolate(curve: Mapping[int, float], gpus: int) -> float:
    """Rule N3's interpolation of ``curve`` {GPU count: seconds} at ``gpus`` (module docstring)."""
    counts = sorted(curve)
    if not counts:
        raise ValidationError("neighbour interpolation: no measured GPU count")
    if gpus in curve:
        return curve[gpus]
    if gpus > counts[-1]:
        return curve[counts[-1]]
    if gpus < counts[0]:
        return curve[counts[0]] * counts[0] / gpus
    i = bisect.bisect_left(counts, gpus)
    lo, hi = counts[i - 1], counts[i]
    frac = math.log(gpus / lo) / math.log(hi / lo)
    return curve[lo] * (curve[hi] / curve[lo]) ** frac


class NeighbourGroundTruth:
    """Measured times where measured, measured-neighbour interpolation elsewhere (module docstring,
    N0-N4), over the tables of ``measured``; its analytical fallback decides feasibility, the CPU factor
    and models without a table, never the time of a measured model's configuration."""

    name = "neighbours"

    def __init__(self, measured: MeasuredGroundTruth) -> None:
        if not isinstance(measured, MeasuredGroundTruth):
            raise ValidationError(f"ground truth (neighbours): needs a MeasuredGroundTruth (its tables and its "
                                  f"analytical fallback), got {type(measured).__name__}")
        #: the measured source: merged tables, rules N0/N1 (its M1/M2); its fallback is the analytical source
        self._measured = measured
        self.analytical: GroundTruth = measured.fallback
        self.cluster = measured.cluster
        self.gpu_type = measured.gpu_type
        self.origin = measured.origin
        self._curves: dict[tuple[str, str, Any], dict[int, float]] = {}
        self._cache: dict[Any, tuple[float, str] | _Infeasible] = {}
        self._counts: dict[str, int] = {}

    @classmethod
    def from_measurements(cls, cluster: Cluster, measurements: Mapping[str, Sequence[Measurement]], *,
                          analytical: GroundTruth | None = None, gpu_type: str = MEASURED_GPU_TYPE,
                          origin: str = "<in memory>") -> "NeighbourGroundTruth":
        """From measured rows, as :class:`MeasuredGroundTruth` takes them; ``analytical`` (default
        ``AnalyticalGroundTruth(cluster)``) decides feasibility, the CPU factor and unmeasured models."""
        return cls(MeasuredGroundTruth(cluster, measurements, fallback=analytical, gpu_type=gpu_type, origin=origin))

    @classmethod
    def from_directory(cls, path: Any, cluster: Cluster, *,
                       gpu_type: str = MEASURED_GPU_TYPE) -> "NeighbourGroundTruth":
        """Read ``<path>/<model>.csv`` as :meth:`MeasuredGroundTruth.from_directory` does."""
        return cls(MeasuredGroundTruth.from_directory(path, cluster, gpu_type=gpu_type))

    # -- look-ups ------------------------------------------------------------------------------
    @property
    def models(self) -> tuple[str, ...]:
        return self._measured.models

    def measured(self, model: str) -> dict[tuple[ExecutionPlan, tuple[int, ...]], float]:
        return self._measured.measured(model)

    def is_measured(self, model: str, plan: ExecutionPlan, gpus_per_node: Sequence[int],
                    gpu_type: str | None = None) -> bool:
        """Whether the configuration is a measured key (as MeasuredGroundTruth.is_measured)."""
        return self._measured.is_measured(model, plan, gpus_per_node, gpu_type)

    def curve(self, model: str, level: str, plan: ExecutionPlan) -> dict[int, float]:
        """{GPU count: slowest measured seconds} of ``model``'s measured configurations of neighbour
        ``level`` of ``plan`` (empty when it has none); rule N3/N4."""
        if level not in LEVELS:
            raise ValidationError(f"neighbour level {level!r}: known levels are {', '.join(LEVELS)}")
        key = (model, level, _level_key(level, plan))
        cached = self._curves.get(key)
        if cached is None:
            cached = {}
            for (p, _gpn), t in self._measured.measured(model).items():
                if level == "model" or _level_key(level, p) == key[2]:
                    k = p.num_gpus
                    cached[k] = max(cached.get(k, 0.0), t)
            self._curves[key] = cached
        return dict(cached)

    def iteration_time(self, model: str, gpu_type: str, plan: ExecutionPlan,
                       gpus_per_node: tuple[int, ...], cpus_per_gpu: float) -> float:
        """The ground-truth iteration time by rules N0-N4 (memoised; counted in :meth:`coverage`)."""
        t, src = self._lookup(model, gpu_type, plan, gpus_per_node, cpus_per_gpu)
        self._counts[src] = self._counts.get(src, 0) + 1
        return t

    def source(self, model: str, gpu_type: str, plan: ExecutionPlan, gpus_per_node: tuple[int, ...],
               cpus_per_gpu: float) -> str:
        """Which rule answers this request (``measured``, ``measured-cpu-scaled``, ``neighbour-<level>``
        or ``analytical``); not counted."""
        return self._lookup(model, gpu_type, plan, gpus_per_node, cpus_per_gpu)[1]

    def _lookup(self, model: str, gpu_type: str, plan: Any, gpus_per_node: Any,
                cpus_per_gpu: Any) -> tuple[float, str]:
        try:
            hit = self._cache[(model, gpu_type, plan, gpus_per_node, cpus_per_gpu)]
        except (KeyError, TypeError):
            _check_name("model", model)
            _check_name("GPU type", gpu_type)
            counts, cpus = _normalise(plan, gpus_per_node, cpus_per_gpu)
            try:
                hit = self._answer(model, gpu_type, plan, counts, cpus)
            except PlanInfeasibleError as exc:
                hit = _Infeasible(str(exc))
            try:
                self._cache[(model, gpu_type, plan, gpus_per_node, cpus_per_gpu)] = hit
            except TypeError:
                pass
        if type(hit) is tuple:
            return hit
        raise PlanInfeasibleError(hit.message)  # type: ignore[union-attr]

    def _answer(self, model: str, gpu_type: str, plan: ExecutionPlan, counts: tuple[int, ...],
                cpus: float) -> tuple[float, str]:
        if model not in self._measured.models or gpu_type != self.gpu_type or self.is_measured(
                model, plan, counts, gpu_type):  # N0, N1: the measured source's rules M1, M2
            t, src = self._measured._lookup(model, gpu_type, plan, counts, cpus)
            return t, src.value
        predicted = self.analytical.iteration_time(model, gpu_type, plan, counts, cpus)  # N2: raises if infeasible
        cpu = 1.0
        if cpus != MEASURED_CPUS_PER_GPU:
            cpu = predicted / self.analytical.iteration_time(model, gpu_type, plan, counts, MEASURED_CPUS_PER_GPU)
        for level in LEVELS:  # N3
            curve = self.curve(model, level, plan)
            if curve:
                t = interpolate(curve, plan.num_gpus) * cpu
                return _check_time(self.name, model, plan, counts, t), f"neighbour-{level}"
        raise ValidationError(f"ground truth ({self.name}): model {model!r} has an empty table")  # pragma: no cover

    # -- coverage ------------------------------------------------------------------------------
    def sources(self) -> dict[str, int]:
        """Calls answered by each source (``neighbour-<level>`` separately) so far."""
        return dict(sorted(self._counts.items()))

    def coverage(self) -> Coverage:
        """Calls by source; ``interpolated`` counts every neighbour answer (rule N3)."""
        c = self._counts
        return Coverage(measured=c.get("measured", 0), cpu_scaled=c.get("measured-cpu-scaled", 0),
                        analytical=c.get("analytical", 0),
                        interpolated=sum(v for k, v in c.items() if k.startswith("neighbour-")))

    def reset_coverage(self) -> None:
        self._counts = {}

    def clear_cache(self) -> None:
        self._cache.clear()
        self._measured.clear_cache()

    def describe(self) -> str:
        n = len(self._measured.models)
        return (f"neighbours:{self.origin} ({n} model{'' if n == 1 else 's'}, {self._measured.n_rows} rows on "
                f"{self.gpu_type}; elsewhere measured-neighbour interpolation, pessimism: {PESSIMISM}; "
                f"feasibility and unmeasured models: {self.analytical.describe()})")


__all__ = ["LEVELS", "NeighbourGroundTruth", "PESSIMISM", "interpolate"]

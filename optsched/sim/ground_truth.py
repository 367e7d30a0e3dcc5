"""Ground-truth iteration times: what the simulator advances jobs by (Rubick Sec. 7.4; DESIGN.md,
"Ground truth vs. what the scheduler believes").

Rubick's simulator "use[s] real performance measurement to estimate the jobs execution time" (Sec. 7.4)
while its policies decide from the fitted model (Morphling Sec. 4.3). Keeping the two sources apart is
what makes prediction error, online refitting and optimality-gap studies honest. Every source implements
:class:`GroundTruth`: ``iteration_time(model, gpu_type, plan, gpus_per_node, cpus_per_gpu)`` returns the
seconds of one iteration of the model's global batch and raises

* ``UnknownNameError`` for an unknown model or GPU type (naming it and the known ones);
* ``PlanInfeasibleError`` naming the model, plan and placement when the plan cannot run there;
* ``ValidationError`` for a malformed request (a non-plan, GPU counts that are not positive integers,
  a CPU share that is not a finite number >= 0).

Two sources:

:class:`AnalyticalGroundTruth` evaluates the performance model (Morphling Appendix A, Eq. 1, or model v2,
:mod:`optsched.perf.model_v2`, whichever form the model has) with its *own* parameters: a given
:class:`~optsched.perf.performance_model.PerformanceModel` per model (or per (model, GPU type)), else the
built-in :func:`~optsched.perf.defaults.default_performance_model`. Choices where the papers are silent:

  A1. Resolution order for (model, GPU type): the model keyed ``(model, gpu_type)``; else the model keyed
      by name, used as given when it was fitted on that GPU type and otherwise *transferred* to it the
      way the built-in defaults are (forward time scaled by the ratio of peak TFLOPs, bandwidths of the
      cluster for that type; :mod:`optsched.perf.defaults`); else the built-in default. A given model
      keeps its own bandwidths (those of the cluster it was fitted on).
  A2. Feasibility uses the rules of the policies' plan enumeration (:mod:`optsched.perf.plans`): the
      topology rules of :func:`~optsched.perf.plans.topology_violation` (GPU count, batch divisibility,
      tp | heads, pp <= layers, tp <= smallest node) and the GPU-memory estimate of
      :func:`~optsched.perf.memory.memory_violation`; host memory (ZeRO-Offload states) is checked
      against the *largest* host memory of a node of that GPU type in the cluster, since the ground truth
      does not see the job's host-memory share (the simulator owns that); ZeRO-Offload needs
      ``cpus_per_gpu > 0``. That the placement's nodes exist in the cluster is the simulator's business.
  A3. ``gpus_per_node`` is sorted largest first before use (the order carries no meaning; the perf model
      lays ranks out largest node first).

:class:`MeasuredGroundTruth` answers from measured tables (``<dir>/<model>.csv`` in the placements format
of ``../shared/data/README.md``, A800 measurements) and falls back to an analytical source, by default
``AnalyticalGroundTruth(cluster)``. **Rule for a request** (model m, GPU type g, plan p, placement n,
CPUs per GPU c):

  M1. m has no table, or g is not the GPU type the tables were measured on (``A800``, see
      :data:`MEASURED_GPU_TYPE`): the fallback's value (source ``analytical``). Measurements of one GPU
      type say nothing reliable about another, so they are not transferred.
  M2. (p, n) is a measured key of m: the measured time; when c differs from the
      :data:`~optsched.perf.measurements.MEASURED_CPUS_PER_GPU` = 8 CPUs per GPU the rows were taken at,
      it is multiplied by ``fallback(c) / fallback(8)`` (source ``measured-cpu-scaled``; Eq. 1 lets CPUs
      act only through ZeRO-Offload's CPU optimizer, so for every other plan the ratio is exactly 1 and
      the source stays ``measured``). A measured key is returned even when the memory estimate would
      reject it: a measurement proves the plan runs (a warning is logged when the tables are loaded).
  M3. otherwise (not measured): ``fallback(p, n, c) * F(m, family(p))`` (source ``calibrated``), with the
      calibration factor ``F`` = geometric mean of measured / fallback-predicted (both at 8 CPUs per GPU)
      over m's measured configurations of the same plan family (``ExecutionPlan.family``: dp, ga, gc,
      zero-dp, zero-offload, 3d); when m has none of that family, over all of m's measured
      configurations; 1 for a model without a table. Each distinct configuration counts once (after
      merging duplicates), so a configuration measured three times does not weigh three times. Rows the
      fallback itself calls infeasible are left out of the mean (with a warning). ``F`` is computed once
      per (model, family) and cached (:meth:`MeasuredGroundTruth.calibration`).

Duplicates: several rows of one key (same plan and sorted placement) are merged into their **median**,
and a warning names the rows. Coverage: :meth:`MeasuredGroundTruth.coverage` counts every call by the
source that answered it (measured, measured-cpu-scaled, calibrated, analytical), so a simulation can
report how often it extrapolated; :meth:`MeasuredGroundTruth.is_measured` and
:meth:`MeasuredGroundTruth.source` tell it for one key.

Speed: both sources memoise every answer (including "infeasible") per (model, GPU type, plan,
gpus_per_node, cpus_per_gpu) in an unbounded dict; the keys a simulation produces are bounded by
models x plans x placements x CPU shares. :meth:`clear_cache` empties it.
"""

from __future__ import annotations

import enum
import logging
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, Union, runtime_checkable

from optsched.core.catalog import GPU_TYPES, MODELS, get_model
from optsched.core.errors import PlanInfeasibleError, UnknownNameError, ValidationError
from optsched.core.hardware import Cluster
from optsched.core.jsonio import read_json
from optsched.core.model import ModelSpec
from optsched.core.plan import PLAN_FAMILIES, ExecutionPlan, ZeroMode
from optsched.perf.defaults import default_performance_model
from optsched.perf.iteration_time import Bandwidths
from optsched.perf.measurements import MEASURED_CPUS_PER_GPU, Measurement, read_placements_csv
from optsched.perf.memory import memory_violation, require_gpus_per_node
from optsched.perf.performance_model import PerformanceModel
from optsched.perf.plans import plan_violation, topology_violation

log = logging.getLogger(__name__)

#: GPU type the placements measurements of ``../shared/data/morphling`` were taken on
MEASURED_GPU_TYPE = "A800"

#: key of a given performance model: a model name, or (model name, GPU type)
ModelKey = Union[str, tuple[str, str]]


@runtime_checkable
class GroundTruth(Protocol):
    """A source of true iteration times for the simulator (see the module docstring)."""

    name: str

    def iteration_time(self, model: str, gpu_type: str, plan: ExecutionPlan,
                       gpus_per_node: tuple[int, ...], cpus_per_gpu: float) -> float:
        """Seconds per iteration of ``model``'s global batch under ``plan`` on ``gpus_per_node``
        (largest first) GPUs of ``gpu_type`` with ``cpus_per_gpu`` CPU cores per GPU."""
        ...

    def describe(self) -> str:
        """A short description for logs and summaries."""
        ...


class Source(str, enum.Enum):
    """Which rule answered a request (module docstring, M1-M3)."""

    MEASURED = "measured"
    CPU_SCALED = "measured-cpu-scaled"
    CALIBRATED = "calibrated"
    ANALYTICAL = "analytical"


@dataclass(frozen=True)
class Coverage:
    """Calls answered by each source since construction (or the last reset); ``interpolated`` counts the
    measured-neighbour answers of :class:`~optsched.sim.neighbour_truth.NeighbourGroundTruth`."""

    measured: int = 0
    cpu_scaled: int = 0
    calibrated: int = 0
    analytical: int = 0
    interpolated: int = 0

    @property
    def total(self) -> int:
        return self.measured + self.cpu_scaled + self.calibrated + self.analytical + self.interpolated

    @property
    def extrapolated(self) -> int:
        """Calls not answered from a measured row (calibrated, interpolated or purely analytical)."""
        return self.calibrated + self.analytical + self.interpolated

    @property
    def measured_fraction(self) -> float:
        """Share of calls answered from a measured row (CPU-scaled included); 0 before any call."""
        return (self.measured + self.cpu_scaled) / self.total if self.total else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"measured": self.measured, "measured_cpu_scaled": self.cpu_scaled,
                "calibrated": self.calibrated, "analytical": self.analytical, "interpolated": self.interpolated,
                "total": self.total,
                "measured_fraction": self.measured_fraction}


@dataclass(frozen=True)
class Calibration:
    """Calibration factor of (model, plan family), rule M3: ``basis`` is ``family`` (mean over that
    family's measured configurations), ``model`` (over all of the model's) or ``none`` (factor 1);
    ``n_configs`` is the number of configurations averaged."""

    model: str
    family: str
    factor: float
    basis: str
    n_configs: int


@dataclass(frozen=True)
class _Infeasible:
    """A memoised "cannot run" answer (the message of the PlanInfeasibleError to raise again)."""

    message: str


def _normalise(plan: Any, gpus_per_node: Any, cpus_per_gpu: Any) -> tuple[tuple[int, ...], float]:
    """Validate a request; returns the GPU counts sorted largest first and the CPU share as float."""
    if not isinstance(plan, ExecutionPlan):
        raise ValidationError(f"ground truth: plan must be an ExecutionPlan, got {plan!r}")
    counts = require_gpus_per_node(gpus_per_node)
    if (isinstance(cpus_per_gpu, bool) or not isinstance(cpus_per_gpu, (int, float))
            or not math.isfinite(cpus_per_gpu) or cpus_per_gpu < 0):
        raise ValidationError(f"ground truth: cpus_per_gpu must be a finite number >= 0, got {cpus_per_gpu!r}")
    return tuple(sorted(counts, reverse=True)), float(cpus_per_gpu)


def _check_name(kind: str, value: Any) -> None:
    if not isinstance(value, str):
        raise ValidationError(f"ground truth: {kind} must be a string, got {value!r}")


def _infeasible_message(source: str, model: str, gpu_type: str, plan: ExecutionPlan,
                        counts: tuple[int, ...], reason: str) -> str:
    return (f"ground truth ({source}): model {model!r} cannot run plan {plan.label} on placement "
            f"{counts} of {gpu_type} GPUs: {reason}")


def _check_time(source: str, model: str, plan: ExecutionPlan, counts: tuple[int, ...], t: float) -> float:
    if not math.isfinite(t) or t <= 0:
        raise ValidationError(f"ground truth ({source}): model {model!r} plan {plan.label} on {counts}: "
                              f"iteration time {t!r} is not a positive finite number of seconds")
    return t


# -- analytical ------------------------------------------------------------------------------------
class AnalyticalGroundTruth:
    """Eq. 1 of Morphling Appendix A with its own parameters (module docstring, A1-A3).

    ``models`` maps a model name or a ``(model, gpu_type)`` pair to the :class:`PerformanceModel` that is
    the truth for it; every other (model, GPU type) uses ``default_performance_model(model, cluster,
    gpu_type)``. ``origin`` only feeds :meth:`describe` (e.g. the params file it came from)."""

    name = "analytical"

    def __init__(self, cluster: Cluster, models: Mapping[ModelKey, PerformanceModel] | None = None, *,
                 origin: str | None = None) -> None:
        if not isinstance(cluster, Cluster):
            raise ValidationError(f"ground truth: cluster must be a Cluster, got {type(cluster).__name__}")
        self.cluster = cluster
        self.origin = origin
        self._by_name: dict[str, PerformanceModel] = {}
        self._by_pair: dict[tuple[str, str], PerformanceModel] = {}
        for key, pm in (models or {}).items():
            self._add_model(key, pm)
        self._resolved: dict[tuple[str, str], PerformanceModel] = {}
        self._host_gib = {g.name: max((n.memory_gib for n in cluster.nodes_of_type(g.name)), default=None)
                          for g in cluster.gpu_types}
        self._cache: dict[Any, float | _Infeasible] = {}
        self._calls = 0

    def _add_model(self, key: Any, pm: Any) -> None:
        if not isinstance(pm, PerformanceModel):
            raise ValidationError(f"ground truth: the model given for {key!r} must be a PerformanceModel, "
                                  f"got {type(pm).__name__}")
        if isinstance(key, str):
            if pm.model.name != key:
                raise ValidationError(f"ground truth: the performance model given for {key!r} is a model of "
                                      f"{pm.model.name!r}")
            self._by_name[key] = pm
        elif isinstance(key, tuple) and len(key) == 2 and all(isinstance(k, str) for k in key):
            if (pm.model.name, pm.gpu_type) != key:
                raise ValidationError(f"ground truth: the performance model given for {key!r} is a model of "
                                      f"{(pm.model.name, pm.gpu_type)!r}")
            self.cluster.gpu_type(key[1])  # unknown GPU type on this cluster -> UnknownNameError
            self._by_pair[key] = pm
        else:
            raise ValidationError(f"ground truth: model keys are a model name or (model, gpu_type), got {key!r}")

    @classmethod
    def from_params_json(cls, path: str | Path | Sequence[str | Path], cluster: Cluster) -> "AnalyticalGroundTruth":
        """Ground truth from fitted parameter files (see :func:`read_params_json` for the two formats);
        ``path`` may be a list of files, one model appearing in at most one of them. Each model is keyed
        by its name (rule A1: used as given on its own GPU type, transferred to the others)."""
        paths = [path] if isinstance(path, (str, Path)) else list(path)
        if not paths:
            raise ValidationError("ground truth: no params file given")
        models: dict[str, PerformanceModel] = {}
        seen: dict[str, Path] = {}
        for p in paths:
            for name, pm in read_params_json(p).items():
                if name in models:
                    raise ValidationError(f"{p}: model {name!r} is already given by {seen[name]}")
                models[name], seen[name] = pm, Path(p)
        return cls(cluster, models, origin=", ".join(str(p) for p in paths))

    # -- resolution --------------------------------------------------------------------------------
    def performance_model(self, model: str, gpu_type: str) -> PerformanceModel:
        """The model that is the truth for (model, GPU type), rule A1. Raises ``UnknownNameError``."""
        _check_name("model", model)
        _check_name("GPU type", gpu_type)
        key = (model, gpu_type)
        pm = self._resolved.get(key)
        if pm is None:
            pm = self._resolve(model, gpu_type)
            self._resolved[key] = pm
        return pm

    def _resolve(self, model: str, gpu_type: str) -> PerformanceModel:
        known = set(MODELS) | set(self._by_name) | {m for m, _ in self._by_pair}
        if model not in known:
            raise UnknownNameError("model", model, sorted(known))
        target = self.cluster.gpu_type(gpu_type)
        if (model, gpu_type) in self._by_pair:
            return self._by_pair[(model, gpu_type)]
        pm = self._by_name.get(model)
        if pm is None:
            return default_performance_model(model, self.cluster, gpu_type)
        if pm.gpu_type == gpu_type:
            return pm
        src_peak = pm.peak_tflops or (GPU_TYPES[pm.gpu_type].peak_tflops if pm.gpu_type in GPU_TYPES else None)
        if src_peak is None:
            raise ValidationError(
                f"ground truth: the performance model of {model!r} was fitted on GPU type {pm.gpu_type!r}, whose "
                f"peak TFLOPs is unknown, so it cannot be transferred to {gpu_type!r}; give a model for "
                f"({model!r}, {gpu_type!r})")
        log.info("ground truth: transferring the %s model of %r to %s (forward time x %.4g)",
                 pm.gpu_type, model, gpu_type, src_peak / target.peak_tflops)
        params = pm.params.replace(fwd_s=pm.params.fwd_s * src_peak / target.peak_tflops)
        return PerformanceModel(pm.model, gpu_type, Bandwidths.of(self.cluster, gpu_type), params,
                                peak_tflops=target.peak_tflops, form=pm.form)

    # -- prediction --------------------------------------------------------------------------------
    def iteration_time(self, model: str, gpu_type: str, plan: ExecutionPlan,
                       gpus_per_node: tuple[int, ...], cpus_per_gpu: float) -> float:
        """Eq. 1 for the request (memoised); see :class:`GroundTruth` for the errors."""
        try:
            hit = self._cache[(model, gpu_type, plan, gpus_per_node, cpus_per_gpu)]
        except (KeyError, TypeError):
            hit = self._compute(model, gpu_type, plan, gpus_per_node, cpus_per_gpu)
        if type(hit) is float:
            self._calls += 1
            return hit
        raise PlanInfeasibleError(hit.message)  # type: ignore[union-attr]

    def _compute(self, model: str, gpu_type: str, plan: Any, gpus_per_node: Any,
                 cpus_per_gpu: Any) -> float | _Infeasible:
        pm = self.performance_model(model, gpu_type)
        counts, cpus = _normalise(plan, gpus_per_node, cpus_per_gpu)
        norm_key = (model, gpu_type, plan, counts, cpus)
        hit = self._cache.get(norm_key)
        if hit is None:
            reason = self.violation(pm.model, gpu_type, plan, counts, cpus)
            if reason is not None:
                hit = _Infeasible(_infeasible_message(self.name, model, gpu_type, plan, counts, reason))
            else:
                hit = _check_time(self.name, model, plan, counts, float(pm.iteration_time(plan, counts, cpus)))
            self._cache[norm_key] = hit
        try:
            self._cache[(model, gpu_type, plan, gpus_per_node, cpus_per_gpu)] = hit
        except TypeError:  # e.g. gpus_per_node given as a list: only the normalised key is stored
            pass
        return hit

    def violation(self, spec: ModelSpec, gpu_type: str, plan: ExecutionPlan, gpus_per_node: tuple[int, ...],
                  cpus_per_gpu: float) -> str | None:
        """Why ``plan`` cannot run (rule A2), or ``None``."""
        reason = topology_violation(spec, plan, gpus_per_node)
        if reason is None:
            host = self._host_gib.get(gpu_type)
            reason = memory_violation(spec, plan, self.cluster.gpu_type(gpu_type), gpus_per_node,
                                      None if host is None else (host,) * len(gpus_per_node))
        if reason is None and plan.zero is ZeroMode.OFFLOAD and cpus_per_gpu <= 0:
            reason = "ZeRO-Offload runs the optimizer on the CPU and needs cpus_per_gpu > 0, got 0"
        return reason

    def coverage(self) -> Coverage:
        """Every successful call is analytical here."""
        return Coverage(analytical=self._calls)

    def reset_coverage(self) -> None:
        self._calls = 0

    def clear_cache(self) -> None:
        self._cache.clear()

    def describe(self) -> str:
        given = sorted(set(self._by_name) | {f"{m}@{g}" for m, g in self._by_pair})
        if not given:
            return "analytical (built-in models)"
        where = f" from {self.origin}" if self.origin else ""
        return f"analytical (given models for {', '.join(given)}{where}; built-in otherwise)"


def read_params_json(path: str | Path) -> dict[str, PerformanceModel]:
    """Read fitted performance models from a JSON file, keyed by model name. Two formats:

    * one model, as written by ``optsched fit`` (``PerformanceModel.to_dict()``, with
      ``"format": "optsched.perf-params/1"``);
    * an object mapping model names to such models (``{"bert": {...}, "gpt2": {...}}``); each entry's
      model must carry the name it is filed under.

    A malformed file raises ``ValidationError`` naming the file and the entry."""
    p = Path(path)
    data = read_json(p)
    expected = ("expected one fitted model (as written by 'optsched fit', with \"format\": "
                "\"optsched.perf-params/1\") or a JSON object mapping model names to such models")
    if not isinstance(data, dict) or not data:
        raise ValidationError(f"{p}: {expected}, got {type(data).__name__ if data else 'an empty value'}")
    entries: list[tuple[str | None, Any]] = [(None, data)] if "format" in data else list(data.items())
    out: dict[str, PerformanceModel] = {}
    for name, entry in entries:
        where = str(p) if name is None else f"{p}: entry {name!r}"
        if not isinstance(entry, dict):
            raise ValidationError(f"{where}: {expected}; the entry is a {type(entry).__name__}")
        try:
            pm = PerformanceModel.from_dict(entry)
        except ValidationError as exc:
            raise ValidationError(f"{where}: {exc}") from None
        except (TypeError, ValueError, KeyError, AttributeError) as exc:
            raise ValidationError(f"{where}: malformed performance model ({type(exc).__name__}: {exc})") from None
        if name is not None and pm.model.name != name:
            raise ValidationError(f"{where}: the entry is a model of {pm.model.name!r}, not of {name!r}")
        out[pm.model.name] = pm
    return out


# -- measured --------------------------------------------------------------------------------------
class MeasuredGroundTruth:
    """Measured iteration times with calibrated analytical extrapolation (module docstring, M1-M3).

    ``measurements`` maps a model name to its measured rows (``read_placements_csv``), each taken at
    :data:`MEASURED_CPUS_PER_GPU` CPUs per GPU on ``gpu_type`` GPUs. ``fallback`` (default
    ``AnalyticalGroundTruth(cluster)``) answers whatever the tables do not contain."""

    name = "measured"

    def __init__(self, cluster: Cluster, measurements: Mapping[str, Sequence[Measurement]], *,
                 fallback: GroundTruth | None = None, gpu_type: str = MEASURED_GPU_TYPE,
                 origin: str = "<in memory>") -> None:
        if not isinstance(cluster, Cluster):
            raise ValidationError(f"ground truth: cluster must be a Cluster, got {type(cluster).__name__}")
        if fallback is not None and not isinstance(fallback, GroundTruth):
            raise ValidationError(f"ground truth: fallback must implement GroundTruth (name, iteration_time, "
                                  f"describe), got {type(fallback).__name__}")
        _check_name("GPU type", gpu_type)
        self.cluster = cluster
        self.gpu_type = gpu_type
        self.origin = origin
        self.fallback: GroundTruth = fallback if fallback is not None else AnalyticalGroundTruth(cluster)
        self._tables: dict[str, dict[tuple[ExecutionPlan, tuple[int, ...]], float]] = {}
        self.n_rows = 0
        #: (model, plan label, gpus_per_node, rows) of every key measured more than once
        self.duplicates: list[tuple[str, str, tuple[int, ...], tuple[int, ...]]] = []
        for model, rows in measurements.items():
            self._tables[model] = self._merge(model, rows)
        if self._tables and not any(g.name == gpu_type for g in cluster.gpu_types):
            log.warning("ground truth: cluster %r has no %s GPUs, so the measurements of %s are never used",
                        cluster.name, gpu_type, origin)
        self._check_measured_rows()
        self._cache: dict[Any, tuple[float, Source] | _Infeasible] = {}
        self._ratios: dict[str, list[tuple[str, float]]] = {}
        self._calibrations: dict[tuple[str, str], Calibration] = {}
        self._counts: dict[Source, int] = dict.fromkeys(Source, 0)

    def _merge(self, model: str, rows: Sequence[Measurement]) -> dict[tuple[ExecutionPlan, tuple[int, ...]], float]:
        _check_name("model", model)
        groups: dict[tuple[ExecutionPlan, tuple[int, ...]], list[Measurement]] = {}
        for r in rows:
            if not isinstance(r, Measurement):
                raise ValidationError(f"ground truth: rows of model {model!r} must be Measurements, got {r!r}")
            where = f"{self.origin}: model {model!r} row {r.row}"
            if r.iter_time is None:
                raise ValidationError(f"{where}: no iter_time")
            if r.cpus_per_gpu != MEASURED_CPUS_PER_GPU:
                raise ValidationError(f"{where}: measured rows must be taken at {MEASURED_CPUS_PER_GPU:g} CPUs "
                                      f"per GPU, got {r.cpus_per_gpu:g}")
            gpn = tuple(sorted(r.gpus_per_node, reverse=True))
            groups.setdefault((r.plan, gpn), []).append(r)
        if not groups:
            raise ValidationError(f"{self.origin}: model {model!r} has no measured rows")
        table = {}
        for (plan, gpn), group in groups.items():
            times = [float(r.iter_time) for r in group]  # type: ignore[arg-type]
            table[(plan, gpn)] = float(statistics.median(times))
            if len(group) > 1:
                ids = tuple(r.row for r in group)
                self.duplicates.append((model, plan.label, gpn, ids))
                log.warning("ground truth: %s: model %r plan %s on %s measured %d times (rows %s, %s s): "
                            "using the median %.6g s", self.origin, model, plan.label, gpn, len(group),
                            ", ".join(map(str, ids)), ", ".join(f"{t:.6g}" for t in times), table[(plan, gpn)])
        self.n_rows += len(rows)
        return table

    def _check_measured_rows(self) -> None:
        """Warn (measurements win, rule M2) about measured keys our feasibility rules would reject."""
        if not any(g.name == self.gpu_type for g in self.cluster.gpu_types):
            return
        gtype = self.cluster.gpu_type(self.gpu_type)
        for model, table in self._tables.items():
            spec = MODELS.get(model)
            if spec is None:
                continue
            for plan, gpn in table:
                reason = plan_violation(spec, plan, gtype, gpn)
                if reason is not None:
                    log.warning("ground truth: %s: measured configuration is rejected by the feasibility "
                                "rules; the measurement wins: %s", self.origin, reason)

    @classmethod
    def from_directory(cls, path: str | Path, cluster: Cluster, *, fallback: GroundTruth | None = None,
                       gpu_type: str = MEASURED_GPU_TYPE) -> "MeasuredGroundTruth":
        """Read ``<path>/<model>.csv`` for every catalogue model that has one (placements format, parsed
        by ``read_placements_csv``; a malformed row raises ``ValidationError`` naming file and row). Other
        ``*.csv`` files are ignored with a warning; a directory without any model file is an error."""
        d = Path(path)
        if not d.is_dir():
            raise ValidationError(f"{d}: measured ground truth needs a directory of <model>.csv files")
        measurements: dict[str, list[Measurement]] = {}
        for name in sorted(MODELS):
            f = d / f"{name}.csv"
            if f.is_file():
                measurements[name] = read_placements_csv(f, get_model(name))
        others = sorted(f.name for f in d.glob("*.csv") if f.stem not in MODELS)
        if others:
            log.warning("ground truth: %s: ignoring %s (not named after a catalogue model: %s)", d,
                        ", ".join(others), ", ".join(sorted(MODELS)))
        if not measurements:
            raise ValidationError(f"{d}: no <model>.csv file for any catalogue model ({', '.join(sorted(MODELS))})")
        return cls(cluster, measurements, fallback=fallback, gpu_type=gpu_type, origin=str(d))

    # -- look-ups ----------------------------------------------------------------------------------
    @property
    def models(self) -> tuple[str, ...]:
        """Models with a measured table."""
        return tuple(sorted(self._tables))

    def measured(self, model: str) -> dict[tuple[ExecutionPlan, tuple[int, ...]], float]:
        """A copy of ``model``'s table {(plan, gpus_per_node): seconds} (duplicates merged); empty when
        the model has no table."""
        return dict(self._tables.get(model, {}))

    def is_measured(self, model: str, plan: ExecutionPlan, gpus_per_node: Sequence[int],
                    gpu_type: str | None = None) -> bool:
        """Whether (plan, placement) of ``model`` on ``gpu_type`` (default: the measured type) is a
        measured key; the placement's order does not matter."""
        if (gpu_type or self.gpu_type) != self.gpu_type:
            return False
        table = self._tables.get(model)
        return table is not None and (plan, tuple(sorted(gpus_per_node, reverse=True))) in table

    def iteration_time(self, model: str, gpu_type: str, plan: ExecutionPlan,
                       gpus_per_node: tuple[int, ...], cpus_per_gpu: float) -> float:
        """The ground-truth iteration time by rules M1-M3 (memoised; each call is counted in
        :meth:`coverage`); see :class:`GroundTruth` for the errors."""
        t, src = self._lookup(model, gpu_type, plan, gpus_per_node, cpus_per_gpu)
        self._counts[src] += 1
        return t

    def source(self, model: str, gpu_type: str, plan: ExecutionPlan, gpus_per_node: tuple[int, ...],
               cpus_per_gpu: float) -> Source:
        """Which rule answers this request (not counted in :meth:`coverage`)."""
        return self._lookup(model, gpu_type, plan, gpus_per_node, cpus_per_gpu)[1]

    def _lookup(self, model: str, gpu_type: str, plan: ExecutionPlan, gpus_per_node: Any,
                cpus_per_gpu: Any) -> tuple[float, Source]:
        try:
            hit = self._cache[(model, gpu_type, plan, gpus_per_node, cpus_per_gpu)]
        except (KeyError, TypeError):
            hit = self._compute(model, gpu_type, plan, gpus_per_node, cpus_per_gpu)
        if type(hit) is tuple:
            return hit
        raise PlanInfeasibleError(hit.message)  # type: ignore[union-attr]

    def _compute(self, model: str, gpu_type: str, plan: Any, gpus_per_node: Any,
                 cpus_per_gpu: Any) -> tuple[float, Source] | _Infeasible:
        _check_name("model", model)
        _check_name("GPU type", gpu_type)
        counts, cpus = _normalise(plan, gpus_per_node, cpus_per_gpu)
        norm_key = (model, gpu_type, plan, counts, cpus)
        hit = self._cache.get(norm_key)
        if hit is None:
            try:
                hit = self._answer(model, gpu_type, plan, counts, cpus)
            except PlanInfeasibleError as exc:
                hit = _Infeasible(str(exc))
            self._cache[norm_key] = hit
        try:
            self._cache[(model, gpu_type, plan, gpus_per_node, cpus_per_gpu)] = hit
        except TypeError:
            pass
        return hit

    def _answer(self, model: str, gpu_type: str, plan: ExecutionPlan, counts: tuple[int, ...],
                cpus: float) -> tuple[float, Source]:
        table = self._tables.get(model)
        if table is None or gpu_type != self.gpu_type:  # M1
            return self.fallback.iteration_time(model, gpu_type, plan, counts, cpus), Source.ANALYTICAL
        self.cluster.gpu_type(gpu_type)  # the measured type must exist on the simulated cluster
        measured = table.get((plan, counts))
        if measured is not None:  # M2
            if cpus == MEASURED_CPUS_PER_GPU:
                return measured, Source.MEASURED
            ratio = (self.fallback.iteration_time(model, gpu_type, plan, counts, cpus)
                     / self.fallback.iteration_time(model, gpu_type, plan, counts, MEASURED_CPUS_PER_GPU))
            if ratio == 1.0:
                return measured, Source.MEASURED
            return _check_time(self.name, model, plan, counts, measured * ratio), Source.CPU_SCALED
        predicted = self.fallback.iteration_time(model, gpu_type, plan, counts, cpus)  # M3
        factor = self.calibration(model, plan.family).factor
        return _check_time(self.name, model, plan, counts, predicted * factor), Source.CALIBRATED

    def calibration(self, model: str, family: str) -> Calibration:
        """The calibration factor of rule M3 for ``model`` and plan ``family`` (computed once, cached)."""
        key = (model, family)
        cal = self._calibrations.get(key)
        if cal is not None:
            return cal
        if family not in PLAN_FAMILIES:
            raise ValidationError(f"ground truth: unknown plan family {family!r}; known: {', '.join(PLAN_FAMILIES)}")
        if model not in self._tables:
            cal = Calibration(model, family, 1.0, "none", 0)
        else:
            ratios = self._log_ratios(model)
            same = [r for f, r in ratios if f == family]
            chosen, basis = (same, "family") if same else ([r for _, r in ratios], "model")
            if chosen:
                cal = Calibration(model, family, math.exp(math.fsum(chosen) / len(chosen)), basis, len(chosen))
            else:
                cal = Calibration(model, family, 1.0, "none", 0)
            log.info("ground truth: calibration of %r %s plans: factor %.4g (%s, %d configurations)",
                     model, family, cal.factor, cal.basis, cal.n_configs)
        self._calibrations[key] = cal
        return cal

    def _log_ratios(self, model: str) -> list[tuple[str, float]]:
        """(family, log(measured / fallback-predicted)) of every measured configuration of ``model``."""
        cached = self._ratios.get(model)
        if cached is not None:
            return cached
        out = []
        for (plan, gpn), measured in self._tables[model].items():
            try:
                predicted = self.fallback.iteration_time(model, self.gpu_type, plan, gpn, MEASURED_CPUS_PER_GPU)
            except PlanInfeasibleError as exc:
                log.warning("ground truth: %s: leaving model %r plan %s on %s out of the calibration: %s",
                            self.origin, model, plan.label, gpn, exc)
                continue
            out.append((plan.family, math.log(measured / predicted)))
        self._ratios[model] = out
        return out

    def coverage(self) -> Coverage:
        """Calls answered by each source so far."""
        c = self._counts
        return Coverage(c[Source.MEASURED], c[Source.CPU_SCALED], c[Source.CALIBRATED], c[Source.ANALYTICAL])

    def reset_coverage(self) -> None:
        self._counts = dict.fromkeys(Source, 0)

    def clear_cache(self) -> None:
        self._cache.clear()

    def describe(self) -> str:
        n = len(self._tables)
        return (f"measured:{self.origin} ({n} model{'' if n == 1 else 's'}, {self.n_rows} rows on {self.gpu_type}; "
                f"elsewhere calibrated {self.fallback.describe()})")


def parse_ground_truth_spec(spec: str) -> tuple[str, str]:
    """``(kind, argument)`` of a ground-truth spec: ``analytical`` (the built-in model),
    ``measured:DIR`` (placements CSVs; calibrated Eq. 1 elsewhere), ``neighbours:DIR`` (the same CSVs;
    measured-neighbour interpolation elsewhere, :mod:`optsched.sim.neighbour_truth`) or
    ``params:FILE.json`` (fitted parameters as truth); ``ValidationError`` naming the spec otherwise.
    :func:`optsched.sim.truth_spec.ground_truth_from_spec` builds the source a spec names."""
    kind, _, arg = spec.partition(":")
    if (kind == "analytical" and not arg) or (kind in ("measured", "neighbours", "params") and arg):
        return kind, arg
    raise ValidationError(f"ground truth spec {spec!r}: expected 'analytical', 'measured:DIR', 'neighbours:DIR' "
                          f"or 'params:FILE.json'")


__all__ = ["AnalyticalGroundTruth", "Calibration", "Coverage", "GroundTruth", "MEASURED_GPU_TYPE",
           "MeasuredGroundTruth", "Source", "parse_ground_truth_spec", "read_params_json"]

"""Which performance model answers for a (model, GPU type): the caller's fitted models first, the
built-in fitted defaults of the cluster (:func:`~optsched.perf.defaults.default_performance_model`)
for the rest. Every round table asks through a :data:`PerfLookup`."""

from __future__ import annotations

from typing import Callable, Mapping

from optsched.core.plan import ExecutionPlan

from optsched.core.errors import ValidationError
from optsched.core.hardware import Cluster
from optsched.perf.defaults import default_performance_model
from optsched.perf.performance_model import PerformanceModel

#: ``lookup(model name, GPU type) -> PerformanceModel``
PerfLookup = Callable[[str, str], PerformanceModel]
#: fitted models keyed by model name or by (model name, GPU type)
FittedModels = Mapping[str, PerformanceModel] | Mapping[tuple[str, str], PerformanceModel]
#: ``allowed(model name, GPU type, plan, GPUs per node largest first) -> bool``: which configurations a
#: policy may offer (e.g. only those a measured table contains, ``optsched simulate --configs measured``)
ConfigFilter = Callable[[str, str, ExecutionPlan, tuple[int, ...]], bool]


class RestrictedLookup:
    """A :data:`PerfLookup` that also says which configurations its users may offer: the round tables
    (:mod:`optsched.rounds.rubick.table`, ``baseline_tables``) keep only rows ``allowed`` accepts (see
    :func:`allowed_configs`). The performance models themselves are the inner lookup's."""

    def __init__(self, inner: PerfLookup, allowed: ConfigFilter) -> None:
        if not callable(allowed):
            raise ValidationError(f"allowed configurations must be a function (model, GPU type, plan, GPUs per node) "
                                  f"-> bool, got {allowed!r}")
        self.inner = inner
        self.allowed = allowed

    def __call__(self, model: str, gpu_type: str) -> PerformanceModel:
        return self.inner(model, gpu_type)


def allowed_configs(perf: PerfLookup | None) -> ConfigFilter | None:
    """The configuration filter of a :class:`RestrictedLookup`, None for any other lookup."""
    return perf.allowed if isinstance(perf, RestrictedLookup) else None


def default_perf_lookup(cluster: Cluster) -> PerfLookup:
    """Built-in fitted models for ``cluster``, cached per (model, GPU type)."""
    cache: dict[tuple[str, str], PerformanceModel] = {}

    def lookup(model: str, gpu_type: str) -> PerformanceModel:
        key = (model, gpu_type)
        if key not in cache:
            cache[key] = default_performance_model(model, cluster, gpu_type)
        return cache[key]
    return lookup


def perf_lookup_from(models: FittedModels, cluster: Cluster) -> PerfLookup:
    """Look models up in ``models`` (keyed by model name, or by (model name, GPU type); a model keyed
    by name answers only for the GPU type it was fitted on), falling back to the built-in defaults of
    ``cluster``."""
    fallback = default_perf_lookup(cluster)

    def lookup(model: str, gpu_type: str) -> PerformanceModel:
        for key in ((model, gpu_type), model):
            pm = models.get(key)  # type: ignore[call-overload]
            if pm is not None and pm.gpu_type == gpu_type:
                return pm
        return fallback(model, gpu_type)
    return lookup


class PerfSource:
    """The performance models a policy plans with: ``fitted`` ones (or none) over the built-in
    defaults, and optionally which configurations it may offer (``allowed``, a
    :class:`RestrictedLookup`). :meth:`lookup` returns the same lookup object for the same cluster
    object, so that round-table caches keyed on it stay warm across rounds."""

    def __init__(self, fitted: FittedModels | None = None, allowed: ConfigFilter | None = None) -> None:
        if fitted is not None and not isinstance(fitted, Mapping):
            raise ValidationError(f"perf_models must be a mapping (model name or (model, GPU type)) -> "
                                  f"PerformanceModel, got {type(fitted).__name__}")
        for key, pm in (fitted or {}).items():
            if not isinstance(pm, PerformanceModel):
                raise ValidationError(f"perf_models[{key!r}] must be a PerformanceModel, got {type(pm).__name__}")
        self.fitted = dict(fitted or {})
        self.allowed = allowed
        self._cluster: Cluster | None = None
        self._lookup: PerfLookup | None = None

    def lookup(self, cluster: Cluster) -> PerfLookup:
        if self._lookup is None or self._cluster is not cluster:
            self._cluster = cluster
            self._lookup = perf_lookup_from(self.fitted, cluster) if self.fitted else default_perf_lookup(cluster)
            if self.allowed is not None:
                self._lookup = RestrictedLookup(self._lookup, self.allowed)
        return self._lookup


__all__ = ["ConfigFilter", "FittedModels", "PerfLookup", "PerfSource", "RestrictedLookup", "allowed_configs",
           "default_perf_lookup", "perf_lookup_from"]

"""Which performance model answers for a (model, GPU type): the caller's fitted models first, the
built-in fitted defaults of the cluster (:func:`~optsched.perf.defaults.default_performance_model`)
for the rest. Every round table asks through a :data:`PerfLookup`.

**Self-contained rounds** (issue 16; :func:`round_perf_lookup`). A round may bring its own model objects
and fitted parameters (params-file objects, :meth:`PerformanceModel.from_dict`). For a (model, GPU
type) the answer is, in this order (:func:`prediction_source` names it):

1. ``fitted``: a model given to the policy (``perf_models=``, ``optsched solve --params``);
2. ``round``: fitted parameters carried in the round (``perf_params``). When the policy was also given
   a model for the same (model, GPU type) and the two differ, that is a ``ValidationError`` naming
   both: there is no silent precedence between the round and the caller's options;
3. ``built-in``: a catalogue model's built-in parameters (fitted on A800; on another GPU type the
   forward time scales by the ratio of peak TFLOPs, :func:`~optsched.perf.defaults.peak_scaling`:
   ``built-in-scaled``, and ``built-in-scaled, unknown GPU type`` for a GPU type the catalogue does not
   have, e.g. an ``H100`` the cluster defines);
4. ``prior``: a model the round (or some params file) defines but for which no parameters are given on
   that GPU type: the unfitted prior of :func:`~optsched.perf.defaults.prior_performance_model`
   (Table 5 defaults, forward time from the model's FLOPs at 25% of the GPU's peak).

A model none of these knows is an ``UnknownNameError`` that says how to define it. Everything but
``fitted``, ``round`` and ``built-in`` is named in the decision's message (:func:`prediction_notes`):
a prediction for a GPU type from numbers not fitted on it is never silent.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

from optsched.core.catalog import GPU_TYPES, MODELS
from optsched.core.errors import UnknownNameError, ValidationError
from optsched.core.hardware import Cluster
from optsched.core.jsonio import read_json
from optsched.core.model import ModelSpec
from optsched.core.plan import ExecutionPlan
from optsched.perf.defaults import REFERENCE_GPU, default_performance_model, peak_scaling, prior_performance_model
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
            if model not in MODELS:
                raise unknown_model_error(model)
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


def _fitted_for(models: FittedModels | None, model: str, gpu_type: str) -> PerformanceModel | None:
    """The model of ``models`` answering for (``model``, ``gpu_type``) (:func:`perf_lookup_from`'s rule)."""
    for key in ((model, gpu_type), model):
        pm = (models or {}).get(key)  # type: ignore[call-overload]
        if pm is not None and pm.gpu_type == gpu_type:
            return pm
    return None


def check_round_params(params: tuple[PerformanceModel, ...], cluster: Cluster, models: tuple[ModelSpec, ...]
                       ) -> None:
    """Fitted parameters carried in a round: each for a GPU type of ``cluster``, at most one per (model,
    GPU type), and each params model of the same shape as the round's (or the catalogue's) model of
    that name. ``ValidationError`` naming ``perf_params[i]`` and the rule."""
    seen: dict[tuple[str, str], int] = {}
    own = {m.name: m for m in models}
    for i, pm in enumerate(params):
        where = f"perf_params[{i}] ({pm.model.name!r} on {pm.gpu_type})"
        if not isinstance(pm, PerformanceModel):
            raise ValidationError(f"perf_params[{i}] must be a PerformanceModel, got {type(pm).__name__}")
        try:
            cluster.gpu_type(pm.gpu_type)
        except UnknownNameError as e:
            raise ValidationError(f"{where}: fitted for a GPU type the cluster does not have: {e}") from None
        key = (pm.model.name, pm.gpu_type)
        if key in seen:
            raise ValidationError(f"{where}: a second set of parameters for the same model and GPU type "
                                  f"(first: perf_params[{seen[key]}])")
        seen[key] = i
        known = own.get(pm.model.name) or MODELS.get(pm.model.name)
        if known is not None and known != pm.model:
            raise ValidationError(f"{where}: its model object differs from the round's model {pm.model.name!r}; "
                                  "parameters are fitted for one model shape")


def _check_no_conflict(fitted: FittedModels | None, params: tuple[PerformanceModel, ...]) -> None:
    for i, pm in enumerate(params):
        other = _fitted_for(fitted, pm.model.name, pm.gpu_type)
        if other is not None and other != pm:
            raise ValidationError(
                f"perf_params[{i}]: the round carries parameters for {pm.model.name!r} on {pm.gpu_type} and the "
                "caller gave different ones (--params / perf_models); give them in one place only")


def prediction_source(model: str, gpu_type: str, fitted: FittedModels | None = None,
                      models: tuple[ModelSpec, ...] = (), params: tuple[PerformanceModel, ...] = ()) -> str:
    """What predicts (``model``, ``gpu_type``) (module docstring): ``fitted``, ``round``, ``built-in``,
    ``built-in-scaled``, ``built-in-scaled, unknown GPU type``, ``prior`` or ``unknown``."""
    if _fitted_for(fitted, model, gpu_type) is not None:
        return "fitted"
    if any(pm.model.name == model and pm.gpu_type == gpu_type for pm in params):
        return "round"
    if model in MODELS:
        if gpu_type == REFERENCE_GPU:
            return "built-in"
        return "built-in-scaled" if gpu_type in GPU_TYPES else "built-in-scaled, unknown GPU type"
    if _spec_of(model, fitted, models, params) is not None:
        return "prior"
    return "unknown"


def prediction_notes(pairs: set[tuple[str, str]], cluster: Cluster, fitted: FittedModels | None = None,
                     models: tuple[ModelSpec, ...] = (), params: tuple[PerformanceModel, ...] = ()) -> list[str]:
    """Notes for a decision's message on the (model, GPU type) ``pairs`` a round predicted with something
    other than parameters fitted on that GPU type (:func:`prediction_source`): one per model predicted by
    the unfitted prior, and one per GPU type whose catalogue models are predicted from the built-in
    :data:`~optsched.perf.defaults.REFERENCE_GPU` parameters (``built-in-scaled``, with or without
    ``unknown GPU type``: :func:`_scaled_note`). ``built-in`` (the reference type itself), ``fitted`` and
    ``round`` pairs have none."""
    prior: dict[str, list[str]] = {}
    scaled: dict[str, list[str]] = {}
    for model, gpu_type in sorted(pairs):
        source = prediction_source(model, gpu_type, fitted, models, params)
        if source == "prior":
            prior.setdefault(model, []).append(gpu_type)
        elif source.startswith("built-in-scaled"):
            scaled.setdefault(gpu_type, []).append(model)
    notes = [f"model {m!r} on {', '.join(types)}: no fitted parameters (round perf_params or --params), predicted by "
             f"the unfitted prior (Table 5 defaults, forward time from its FLOPs at 25% of the GPU's peak)"
             for m, types in prior.items()]
    notes += [_scaled_note(t, ms, cluster) for t, ms in sorted(scaled.items())]
    return notes


def _scaled_note(gpu_type: str, models: Sequence[str], cluster: Cluster) -> str:
    """The note on catalogue ``models`` predicted on ``gpu_type`` from their built-in
    :data:`~optsched.perf.defaults.REFERENCE_GPU` parameters: which type, which models, and the scaling
    :func:`~optsched.perf.defaults.default_performance_model` applies (:func:`~optsched.perf.defaults.peak_scaling`)."""
    ref, peak = peak_scaling(cluster, gpu_type)
    names = ", ".join(models)
    if gpu_type in GPU_TYPES:
        head = (f"GPU type {gpu_type!r}: no fitted parameters for {names} (round perf_params or --params); their "
                f"built-in {REFERENCE_GPU} parameters")
    else:
        head = f"GPU type {gpu_type!r} is not in the catalogue: the built-in {REFERENCE_GPU} parameters of {names}"
    return (f"{head} are used with the forward time scaled by peak TFLOPs ({ref:g} -> {peak:g}) and the cluster's "
            f"bandwidths for {gpu_type}; fit on measurements of {gpu_type} (optsched fit) or give the jobs own "
            f"coefficients for better predictions")


def notes_needed(gpu_types: Iterable[str], models: tuple[ModelSpec, ...] = (),
                 params: tuple[PerformanceModel, ...] = ()) -> bool:
    """Whether :func:`prediction_notes` can say anything of a round on ``gpu_types`` with its own
    ``models`` and ``params``: False (the caller may skip computing its pairs) when the round has
    neither and every type is the reference type the built-in parameters were fitted on."""
    return bool(models or params) or any(t != REFERENCE_GPU for t in gpu_types)


def _spec_of(model: str, fitted: FittedModels | None, models: tuple[ModelSpec, ...],
             params: tuple[PerformanceModel, ...]) -> ModelSpec | None:
    """The shape of a model the catalogue does not have: a round's model object, else the model of
    any fitted parameters of that name."""
    for m in models:
        if m.name == model:
            return m
    for pm in (*params, *(fitted or {}).values()):
        if pm.model.name == model:
            return pm.model
    return None


def round_perf_lookup(cluster: Cluster, fitted: FittedModels | None = None, models: tuple[ModelSpec, ...] = (),
                      params: tuple[PerformanceModel, ...] = ()) -> PerfLookup:
    """The lookup of a round with its own ``models`` and ``params`` over the caller's ``fitted`` models
    (module docstring), cached per (model, GPU type). Conflicting parameters (round vs caller) are a
    ``ValidationError``; a model nothing defines an ``UnknownNameError`` saying how to define it."""
    _check_no_conflict(fitted, params)
    by_key = {(pm.model.name, pm.gpu_type): pm for pm in params}
    base = perf_lookup_from(fitted, cluster) if fitted else default_perf_lookup(cluster)
    cache: dict[tuple[str, str], PerformanceModel] = {}

    def lookup(model: str, gpu_type: str) -> PerformanceModel:
        key = (model, gpu_type)
        pm = cache.get(key)
        if pm is not None:
            return pm
        pm = _fitted_for(fitted, model, gpu_type) or by_key.get(key)
        if pm is None:
            if model in MODELS:
                pm = base(model, gpu_type)
            else:
                spec = _spec_of(model, fitted, models, params)
                if spec is None:
                    raise unknown_model_error(model)
                pm = prior_performance_model(spec, cluster, gpu_type)
        cache[key] = pm
        return pm
    return lookup


def unknown_model_error(model: str) -> UnknownNameError:
    """The error of a model nothing defines, saying how a round can define it."""
    return UnknownNameError("model", model, list(MODELS),
                            context="(not in the catalogue: give the job's model as an object {name, num_params, "
                                    "hidden, layers, seq_len, global_batch, num_heads}, fitted parameters for it "
                                    "(the round's perf_params, or optsched solve --params), or the job's own "
                                    "coefficients)")


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
        self._round_memo: tuple[Cluster, tuple, PerfLookup] | None = None

    def lookup(self, cluster: Cluster) -> PerfLookup:
        if self._lookup is None or self._cluster is not cluster:
            self._cluster = cluster
            self._lookup = perf_lookup_from(self.fitted, cluster) if self.fitted else default_perf_lookup(cluster)
            if self.allowed is not None:
                self._lookup = RestrictedLookup(self._lookup, self.allowed)
        return self._lookup

    def lookup_for(self, cluster: Cluster, models: tuple[ModelSpec, ...] = (),
                   params: tuple[PerformanceModel, ...] = ()) -> PerfLookup:
        """The lookup of a round with its own ``models`` and fitted ``params`` (:func:`round_perf_lookup`).
        A round without either gets :meth:`lookup` (the same object round after round, so table caches
        stay warm); one with them the same object as long as the cluster object and both are unchanged."""
        if not models and not params:
            return self.lookup(cluster)
        key = (models, params)
        memo = self._round_memo
        if memo is not None and memo[0] is cluster and memo[1] == key:
            return memo[2]
        found = round_perf_lookup(cluster, self.fitted or None, models, params)
        if self.allowed is not None:
            found = RestrictedLookup(found, self.allowed)
        self._round_memo = (cluster, key, found)
        return found


def load_params(path: str | Path) -> PerformanceModel:
    """The fitted model of a params JSON (the output of ``optsched fit``)."""
    return PerformanceModel.from_dict(read_json(path))


def fitted_models(paths: Sequence[str], cluster: Cluster) -> dict[tuple[str, str], PerformanceModel]:
    """The fitted models of params files (``--params``) keyed by (model, GPU type); each must be for a
    GPU type the cluster has, and no (model, GPU type) may come twice."""
    models: dict[tuple[str, str], PerformanceModel] = {}
    types = {n.gpu_type for n in cluster.nodes}
    for path in paths:
        pm = load_params(path)
        key = (pm.model.name, pm.gpu_type)
        if pm.gpu_type not in types:
            raise ValidationError(f"--params {path}: fitted for GPU type {pm.gpu_type!r}, but cluster {cluster.name!r} "
                                  f"has only {', '.join(sorted(types))}")
        if key in models:
            raise ValidationError(f"--params {path}: a second fitted model for {key[0]!r} on {key[1]!r}")
        models[key] = pm
    return models


__all__ = ["ConfigFilter", "FittedModels", "fitted_models", "load_params", "PerfLookup", "PerfSource", "RestrictedLookup", "allowed_configs",
           "check_round_params", "default_perf_lookup", "notes_needed", "perf_lookup_from", "prediction_notes",
           "prediction_source", "round_perf_lookup", "unknown_model_error"]

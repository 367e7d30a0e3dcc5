"""Lina's popularity-estimation study (thesis Sec. 4.7.3.1 "Two-phase scheduling" and "Overhead
analysis", Sec. 4.7.3.2, Table 4.5) on routing traces, and the partition-size sweep of the
communication scheduler (Sec. 4.7.2.2, Fig. 4.15).

**Input.** A profiling trace and a test trace of one model (:class:`~optsched.perf.moe_routing.RoutingTrace`:
recorded routing read with :func:`~optsched.perf.moe_routing.read_routing_csv`, or a synthetic router's
two samples). The profile is Lina's (:func:`~optsched.perf.expert_popularity.profile_paths`, top-1 paths
of ``path_length`` layers); every batch of the test trace is one inference request.

**Accuracy and phase two** (Sec. 4.7.3.2: "We resort to the same definition used in Lina's phase two
scheduling: if the top-2 (recall k = 1 in inference) estimated experts are identical to the actual routing
decision, we consider the estimation accurate"). For every batch and every estimated layer ``i + 1``
(``path_length <= i + 1 < layers``: "Lina starts to schedule from the fourth layer" with ``l = 3``), the
estimate :func:`~optsched.perf.expert_popularity.estimate_popularity` (top-``k`` per path, ``k = 1`` in
inference) is compared with the batch's actual top-1 loads by
:func:`~optsched.perf.expert_popularity.estimate_accurate` under both readings of "identical" (``"set"``
and ``"ordered"``); phase two runs where the ``rule`` in use finds them different. By that definition
the phase-two share is ``1 -`` accuracy; the thesis's 58.41% accuracy beside its 23% phase two (and Table
4.5's 60.4% beside 25.7%, 31.6% beside 76.5%) are not complements, so no one reading reproduces both.

**Inference time of a batch** (what "without estimation" and "without fine-tuning" cost, Sec. 4.7.3.1).
Per MoE layer, a placement of the experts on ``devices`` devices (``slots`` experts at most each, Sec.
4.7.1: "the maximum number of experts packed on a device is 4") serves the layer's actual tokens, and
the layer takes :class:`~optsched.perf.moe_layer_time.MoELayerTime` of the devices' tokens (the model the
``experts`` kind's benchmark uses: two all-to-alls set by the busiest device, its expert FFN, a fixed
part) plus the scheduler's blocking time; the batch adds the layers and a fixed non-MoE time. Schemes:

* ``ideal``: every device serves ``tokens / devices`` (Fig. 4.16's Ideal, "a perfectly balanced load");
* ``baseline``: DeepSpeed's expert parallelism (:func:`~optsched.heuristics.lina.uniform_plan`);
* ``lina``: the baseline placement up to the first estimated layer, then phase one
  (:func:`~optsched.heuristics.lina.lina_plan` on the estimate, overlapped: no blocking time) and phase two:
  ``check_ms`` when the top-2k agree ("The overhead of phase two without fine-tuning is merely 1.45ms"),
  else ``schedule_ms`` and Lina's placement of the actual loads ("The scheduling time for both phases
  averages at ~6.2 ms");
* ``no-estimation``: "scheduling using the actual routing decision computed by the gating network": Lina's
  placement of the actual loads at every MoE layer, each blocked ``schedule_ms`` ("the scheduling overhead
  manifests at each MoE layer");
* ``no-fine-tuning``: phase one only, no phase-two time.

**Time scale.** The routing fixes who is busiest, not how many tokens a real batch carries, so device
tokens are scaled by one factor for all schemes such that the baseline's two all-to-alls average
``baseline_a2a_ms`` per MoE layer, and the non-MoE time is such that the baseline's all-to-alls are
``baseline_a2a_share`` of its inference time: Table 4.1's component measurements of the 16-expert,
12-layer (419M) Transformer-XL inference, 102 ms of all-to-all per batch, 32.5% of it. The headline ratios
(+24%, +26.7-33.1%) are what the model predicts, never inputs.

**Layer and request times** (Sec. 4.7.1, "Inference time: Time to complete one batch of inference", "MoE
layer time: Time to complete one MoE layer of computation and communication"; Sec. 4.7.3.1, "With Lina,
MoE layer time includes gate computation, phase two of scheduling, two all-to-all, and expert
computation"): ``layer_ms[scheme]`` (batches x layers) is a layer's model time plus its blocking time,
``a2a_ms[scheme]`` its two all-to-alls, and a request's time is the non-MoE time plus its layers
(:func:`request_times`, the one place of that sum). Median and p95 are :func:`statistic`'s;
:meth:`EstimationStudy.reduction` is the thesis's "reduced by 1.45x" (baseline's time over Lina's).

**Partition size** (:func:`partition_sweep`): the ``lina`` policy of the ``moe-comm`` kind with tensor
partitions of 10-200 MB, step time relative to the 30 MB of Sec. 4.7.1. Fig. 4.15 gives no numbers in
the text: "a partition size beyond 50MB slows down Transformer-XL and BERT2GPT2 compared with 30 MB" and
"small partitions (below 10MB) may cause heavy transmission overhead".
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from optsched.core.checks import require_int, require_number
from optsched.core.errors import ValidationError
from optsched.heuristics.lina import lina_plan, uniform_plan
from optsched.heuristics.moe_comm import POLICIES
from optsched.perf.expert_popularity import (DEFAULT_PATH_LENGTH, DEFAULT_TOPK_RULE, TOPK_RULES, estimate_accurate,
                                             estimate_popularity, profile_paths)
from optsched.perf.moe_layer_time import MoELayerTime
from optsched.perf.moe_routing import RoutingTrace
from optsched.rounds.experts import ExpertSpec, ExpertsRound
from optsched.rounds.experts.generate import lina_cluster
from optsched.rounds.experts.plan import ReplicaPlan, device_loads
from optsched.rounds.moe_comm import MoECommRound

#: the schemes of an inference batch (module docstring)
SCHEMES = ("ideal", "baseline", "lina", "no-estimation", "no-fine-tuning")
#: the statistics of inference time (Sec. 4.7.3.1: "the median and 95% inference time"), see :func:`statistic`
STATISTICS = ("median", "p95")
#: what a reduction compares (:meth:`EstimationStudy.reduction`): a request's time, a MoE layer's, its all-to-alls
MEASURES = ("request", "layer", "a2a")
#: Sec. 4.7.1: "the maximum number of experts packed on a device is 4"
SLOTS = 4
#: Sec. 4.7.2.2 / Fig. 4.15: partition sizes of the sweep (MB) and the evaluation's 30 MB (Sec. 4.7.1)
PARTITIONS_MB = (10.0, 20.0, 30.0, 50.0, 100.0, 200.0)
REFERENCE_PARTITION_MB = 30.0


@dataclass(frozen=True)
class SchedulerCosts:
    """The thesis's measured times the study charges (module docstring)."""

    #: Sec. 4.7.3.1: "The scheduling time for both phases averages at ~6.2 ms"
    schedule_ms: float = 6.2
    #: Sec. 4.7.3.1: "The overhead of phase two without fine-tuning is merely 1.45ms"
    check_ms: float = 1.45
    #: Table 4.1: 102 ms of all-to-all per inference batch of the 16-expert, 12-MoE-layer model
    baseline_a2a_ms: float = 102.0 / 12
    #: Table 4.1: all-to-all is 32.5% of that inference time
    baseline_a2a_share: float = 0.325

    def __post_init__(self) -> None:
        for name in ("schedule_ms", "check_ms"):
            require_number("scheduler costs", name, getattr(self, name), 0.0)
        require_number("scheduler costs", "baseline_a2a_ms", self.baseline_a2a_ms, 0.0, strict=True)
        if not 0.0 < self.baseline_a2a_share <= 1.0:
            raise ValidationError(f"scheduler costs: baseline_a2a_share must be in (0, 1], got "
                                  f"{self.baseline_a2a_share}")


def statistic(values: np.ndarray | Sequence[float], stat: str) -> float:
    """``stat`` of ``values``: ``"median"`` or ``"p95"``, the 95th percentile with linear interpolation between
    order statistics (numpy's default: rank ``0.95 (n - 1)`` of the sorted values; the thesis's "95%ile" does
    not say which percentile rule it uses). E.g. p95 of 10, 20, 30 is 20 + 0.9 x 10 = 29."""
    if stat not in STATISTICS:
        raise ValidationError(f"inference time: stat must be one of {', '.join(STATISTICS)}, got {stat!r}")
    v = np.asarray(values, dtype=float).ravel()
    if v.size == 0 or not np.all(np.isfinite(v)):
        raise ValidationError(f"inference time: the {stat} needs at least one value, all finite")
    return float(np.median(v) if stat == "median" else np.percentile(v, 95))


def request_times(layer_ms: np.ndarray, other_ms: float) -> np.ndarray:
    """Each request's (batch's) inference time, ms: ``other_ms`` (the non-MoE part of the model, the same for
    every request) plus the times of its MoE layers (``layer_ms``: requests x layers, ms, blocking included).
    E.g. layers [[1, 2], [3, 4]] and 10 ms of the rest give requests of 13 and 17 ms."""
    owner = "request times"
    require_number(owner, "other_ms", other_ms, 0.0)
    t = np.asarray(layer_ms, dtype=float)
    if t.ndim != 2 or not np.all(np.isfinite(t)) or np.any(t < 0):
        raise ValidationError(f"{owner}: layer_ms must be a (requests x layers) array of finite times >= 0, got "
                              f"shape {t.shape}")
    return other_ms + t.sum(axis=1)


@dataclass(frozen=True, eq=False)
class EstimationStudy:
    """The result of :func:`estimation_study`: per estimated (batch, layer) whether the top-2k agree as a
    set and as an ordered list (``same_set``, ``same_order``: batches x estimated layers), per batch the
    inference time of every scheme (``times[scheme]``, ms), the calibration (``token_scale``,
    ``other_ms``), and per batch and MoE layer each scheme's layer time and all-to-all time (``layer_ms``,
    ``a2a_ms``: batches x layers, ms; module docstring, "Layer and request times")."""

    path_length: int
    k: int
    rule: str
    first_layer: int
    same_set: np.ndarray
    same_order: np.ndarray
    times: dict[str, np.ndarray] = field(repr=False)
    token_scale: float
    other_ms: float
    layer_ms: dict[str, np.ndarray] = field(repr=False, default_factory=dict)
    a2a_ms: dict[str, np.ndarray] = field(repr=False, default_factory=dict)

    def accuracy(self, rule: str | None = None) -> float:
        """Share of estimated layers whose top-2k agree under ``rule`` (default: the study's)."""
        return float(np.mean(self.same_order if (rule or self.rule) == "ordered" else self.same_set))

    @property
    def phase_two_share(self) -> float:
        """Share of estimated layers where phase two re-schedules (under the study's rule)."""
        return 1.0 - self.accuracy()

    def accuracy_by_layer(self, rule: str | None = None) -> np.ndarray:
        """Accuracy of each estimated layer (Fig. 4.19), layers ``first_layer ..``."""
        return np.mean(self.same_order if (rule or self.rule) == "ordered" else self.same_set, axis=0)

    def median(self, scheme: str) -> float:
        return statistic(self.times[scheme], "median")

    def p95(self, scheme: str) -> float:
        return statistic(self.times[scheme], "p95")

    def _values(self, measure: str, scheme: str) -> np.ndarray:
        if measure not in MEASURES:
            raise ValidationError(f"estimation study: measure must be one of {', '.join(MEASURES)}, got {measure!r}")
        if scheme not in SCHEMES:
            raise ValidationError(f"estimation study: scheme must be one of {', '.join(SCHEMES)}, got {scheme!r}")
        return {"request": self.times, "layer": self.layer_ms, "a2a": self.a2a_ms}[measure][scheme]

    def reduction(self, stat: str = "median", measure: str = "request", scheme: str = "lina",
                  over: str = "baseline") -> float:
        """How many times ``scheme`` shortens ``over``'s ``stat`` time: ``over``'s over ``scheme``'s (Sec.
        4.7.3.1: "Compared to Baseline, median inference time is reduced by 1.54x", i.e. baseline time / Lina
        time). ``measure``: ``"request"`` (a batch's inference time), ``"layer"`` (every MoE layer of every
        batch pooled, Fig. 4.17) or ``"a2a"`` (their all-to-alls, pooled)."""
        return statistic(self._values(measure, over), stat) / statistic(self._values(measure, scheme), stat)

    def layer_reductions(self, stat: str = "p95", measure: str = "a2a", scheme: str = "lina",
                         over: str = "baseline") -> np.ndarray:
        """:meth:`reduction` of each MoE layer separately (``stat`` over the batches; Fig. 4.18's "tail
        all-to-all time reduction of different layers"), layers ``0 ..``; ``measure`` ``"layer"`` or ``"a2a"``."""
        if measure == "request":
            raise ValidationError("estimation study: a request has no layers; measure must be layer or a2a")
        a, b = self._values(measure, over), self._values(measure, scheme)
        return np.array([statistic(a[:, j], stat) / statistic(b[:, j], stat) for j in range(a.shape[1])])

    def worse(self, scheme: str, than: str = "lina", stat: str = "median") -> float:
        """How much longer ``scheme``'s ``stat`` ("median" or "p95") inference time is than ``than``'s
        (0.24 = 24% longer; Sec. 4.7.3.1's "worsened by 24.0%", "prolonged by 26.7%")."""
        f = self.median if stat == "median" else self.p95
        return f(scheme) / f(than) - 1.0


def _round(loads: np.ndarray, devices: int, slots: int) -> ExpertsRound:
    return ExpertsRound(cluster=lina_cluster(devices), experts=tuple(ExpertSpec(float(w)) for w in loads), slots=slots)


def estimation_study(profile: RoutingTrace, test: RoutingTrace, *, path_length: int = DEFAULT_PATH_LENGTH,
                     k: int = 1, rule: str = DEFAULT_TOPK_RULE, devices: int | None = None, slots: int = SLOTS,
                     costs: SchedulerCosts = SchedulerCosts(), timer: MoELayerTime = MoELayerTime()) -> EstimationStudy:
    """Run the study of the module docstring: profile ``profile`` with ``path_length``, estimate every
    batch of ``test`` with top-``k`` paths, compare under ``rule`` and time the schemes on ``devices``
    devices (default: one per expert) with ``slots`` experts at most per device."""
    owner = "estimation study"
    if rule not in TOPK_RULES:
        raise ValidationError(f"{owner}: rule must be one of {', '.join(TOPK_RULES)}, got {rule!r}")
    if (profile.num_experts, profile.num_layers) != (test.num_experts, test.num_layers):
        raise ValidationError(f"{owner}: the profiling trace ({profile.num_experts} experts, {profile.num_layers} "
                              f"layers) and the test trace ({test.num_experts} experts, {test.num_layers} layers) must "
                              f"come from one model")
    E, L = test.num_experts, test.num_layers
    devices = E if devices is None else devices
    require_int(owner, "devices", devices, 1)
    require_int(owner, "slots", slots, 1)
    require_int(owner, "k", k, 1)
    if E > devices * slots:
        raise ValidationError(f"{owner}: {E} experts do not fit {devices} devices x {slots} slots")
    prof = profile_paths(profile, path_length)
    first = prof.first_estimated_layer
    batches = test.batches()
    same_set = np.zeros((len(batches), L - first), dtype=bool)
    same_order = np.zeros_like(same_set)
    # per batch and layer, each scheme's device tokens (unscaled) and blocking time
    tokens: dict[str, list[list[np.ndarray]]] = {s: [] for s in SCHEMES}
    blocked: dict[str, np.ndarray] = {s: np.zeros((len(batches), L)) for s in SCHEMES}
    for b, idx in enumerate(batches):
        top1 = test.top1[idx]
        for s in SCHEMES:
            tokens[s].append([])
        for layer in range(L):
            actual = np.bincount(top1[:, layer], minlength=E).astype(float)
            r_act = _round(actual, devices, slots)
            base = uniform_plan(r_act)
            tokens["ideal"][b].append(np.full(devices, actual.sum() / devices))
            tokens["baseline"][b].append(device_loads(r_act, base, actual))
            exact = lina_plan(r_act)
            tokens["no-estimation"][b].append(device_loads(r_act, exact, actual))
            blocked["no-estimation"][b, layer] = costs.schedule_ms
            if layer < first:
                for s in ("lina", "no-fine-tuning"):
                    tokens[s][b].append(device_loads(r_act, base, actual))
                continue
            estimate = idx.size * estimate_popularity(prof, top1, layer - 1, k=k)
            phase1: ReplicaPlan = lina_plan(_round(estimate, devices, slots))
            j = layer - first
            same_set[b, j] = estimate_accurate(estimate, actual, k, "set")
            same_order[b, j] = estimate_accurate(estimate, actual, k, "ordered")
            agree = same_order[b, j] if rule == "ordered" else same_set[b, j]
            tokens["no-fine-tuning"][b].append(device_loads(r_act, phase1, actual))
            tokens["lina"][b].append(device_loads(r_act, phase1 if agree else exact, actual))
            blocked["lina"][b, layer] = costs.check_ms if agree else costs.schedule_ms
    base_a2a = np.mean([timer.all_to_all_ms(t) for per in tokens["baseline"] for t in per])
    scale = costs.baseline_a2a_ms / base_a2a if base_a2a > 0 else 1.0
    shape = (len(batches), L)
    layer_ms = {s: np.array([[timer.ms(scale * t) for t in per] for per in tokens[s]]).reshape(shape) + blocked[s]
                for s in SCHEMES}
    a2a_ms = {s: np.array([[timer.all_to_all_ms(scale * t) for t in per] for per in tokens[s]]).reshape(shape)
              for s in SCHEMES}
    a2a_total = costs.baseline_a2a_ms * L
    other = max(0.0, a2a_total / costs.baseline_a2a_share - float(np.mean(layer_ms["baseline"].sum(axis=1))))
    times = {s: request_times(layer_ms[s], other) for s in SCHEMES}
    return EstimationStudy(path_length, k, rule, first, same_set, same_order, times, float(scale), other,
                           layer_ms, a2a_ms)


def partition_sweep(rounds: Sequence[MoECommRound], partitions_mb: Sequence[float] = PARTITIONS_MB,
                    policy: str = "lina") -> dict[float, float]:
    """Mean over ``rounds`` of the ``policy`` step time at each partition size relative to
    :data:`REFERENCE_PARTITION_MB` (module docstring, "Partition size")."""
    if policy not in POLICIES:
        raise ValidationError(f"partition sweep: policy must be one of {', '.join(POLICIES)}, got {policy!r}")
    if not rounds:
        raise ValidationError("partition sweep: no rounds")
    sizes = sorted(set(float(x) for x in partitions_mb) | {REFERENCE_PARTITION_MB})
    ratios: dict[float, list[float]] = {mb: [] for mb in sizes}
    for r in rounds:
        step = {mb: POLICIES[policy].schedule(dataclasses.replace(r, partition_mb=mb)).step_ms for mb in sizes}
        for mb in sizes:
            ratios[mb].append(step[mb] / step[REFERENCE_PARTITION_MB])
    return {mb: float(np.mean(v)) for mb, v in ratios.items()}


__all__ = ["EstimationStudy", "MEASURES", "PARTITIONS_MB", "REFERENCE_PARTITION_MB", "SCHEMES", "SLOTS", "STATISTICS",
           "SchedulerCosts", "estimation_study", "partition_sweep", "request_times", "statistic"]

"""Adaptive gating's training-time result (thesis Ch. 5, Sec. 5.3.2, 5.4.3-5.4.6; Tables 5.1, 5.3, 5.5, 5.6):
per threshold ``T``, the share of tokens routed to two experts and the training step time relative to
top-2 gating, with the curriculum order of Sec. 5.3.2 and without it (a random data loader).

**The step model** (:class:`StepModel`). "We convert the FFN layers to MoE layers" (Sec. 5.4.2), so
every Transformer layer of the model is a MoE layer plus the rest of the layer (attention, norms,
embeddings spread over the layers). A batch's step time is the sum over layers of

* the MoE layer, :class:`~optsched.perf.adaptive_gating.LayerCost` (the project's layer-time model of
  adaptive gating, calibrated on Table 5.1's "Top-1 ... Norm. MoE Layer Running Time 0.67"):
  ``fixed + per_expert x (1 + max_d r_d)``: the expert computation and the all-to-all volume grow with
  the tokens sent to experts, and the batch waits for its most complex sample, Sec. 5.3.2: "The MoE
  experts operate on individual tokens, while the Attention layer requires input in the form of a
  complete sentence. As a result, although the processing time for a large portion of tokens is reduced
  by half in the MoE layer, we still need to wait until the remaining tokens (in the same data batch)
  complete their top-2 processing";
* the non-MoE part, ``non_moe_ms`` a layer, the same for every gating.

Top-2 gating is ``r_d = 1`` for every sample, top-1 ``r_d = 0``. The step time of a scheme over a
data set is the sum over its batches (``batch`` consecutive samples of the order); the ratio to top-2
is what Tables 5.3 and 5.5 normalise ("We normalize the training time with reference to the performance
of top-2 gating MoE") except that theirs is the *training time to the same loss* ("All the schemes in
the same task converge to the same loss"), which also counts how many steps each scheme needs. The model
has no convergence: it predicts the time of the same number of steps. Top-1 gating shows the
difference: the thesis measures 0.93-1.14x, "top-1 gating ... makes training more difficult to converge
to the same loss value"; its step time here is the MoE layer's 0.67 diluted by the non-MoE part.

**The MoE share of a step.** The text gives no time breakdown of its models' steps. By default it is
taken from Table 5.3's computation FLOPs: dense and top-1 models have the same FLOPs, top-2 adds one
expert FFN, so an expert FFN is ``F = top2 - top1`` and the rest of the model ``R = top1 - F``; the
non-MoE time a layer is ``R / F x per_expert`` (the rest of the layer runs at the time per FLOP of the
MoE layer's per-token part). ``moe_share`` (the MoE layers' share of the top-2 step time) overrides it and
is swept.

**Settings** (:data:`TASKS`, from the text, never from the training-time results): Table 5.2's models
(MoE layers = Transformer layers: 12, 6 + 6, 12, 12 + 12, 24, 24), 16 experts ("we set the number of
FFNs (i.e. experts) to 16 for all evaluated tasks"), ``T = 0.1`` ("set the threshold T to 0.1"), the
batch sizes of Sec. 5.4.3 (BERT-Base 24, GPT-2 8, DialoGPT-medium 64 samples; FSMT and BART-Large
"maximum number of tokens ... 4096": ``4096 // tokens_per_sample`` samples), Table 5.3's FLOPs, and the
share of tokens routed to two experts that Sec. 5.4.4 states per task (11.3%, 25.6%, 16.4%, 21.8%,
23.4%; summarization has none in the text: 20%, from its FLOPs as ``(adaptive - top1) / (top2 - top1)``.
Translation's FLOPs give 17%, not the 25.6% the text states; the text is used).

**Gate probabilities** (not given by the thesis beyond Fig. 5.1's four tokens and "these
significantly-biased distribution accounts for at least 55% of all the tokens"): the project's synthetic
generator :func:`~optsched.perf.adaptive_gating.synthetic_gate_probs` (softmax of normal logits, a
per-sample sharpness ``exp(spread N(0, 1))``, a per-layer factor), with its ``sharpness`` set per task
so that the share of two-expert tokens at ``T = 0.1`` is the task's share above (bisection on a
calibration draw, :func:`calibrate_sharpness`): that share is a routing statistic the text reports, not a
result of the model. Everything else about the distribution is a named parameter and swept:
``spread`` (how much samples differ in complexity; the curriculum only helps when they differ),
``tokens_per_sample`` (the text gives no sequence lengths). The shares at the other thresholds follow
from the generator, not from the text. "We normalize the expert probability in adaptive gating" is not
defined further; the rule is applied to the softmax probabilities (Eq. 5.2) as
:func:`~optsched.perf.adaptive_gating.adaptive_route` reads Sec. 5.3.1.

**Orders.** ``curriculum``: :func:`~optsched.perf.adaptive_gating.curriculum_order` (Sec. 5.3.2: the
sample with the fewest two-expert tokens first, then by cosine similarity of the complexity vectors,
Eq. 5.5), computed on the routing of the same pass (the thesis reorders "before each epoch", from
routing it does not date; the model uses the current one, the best case). ``random``: a seeded
permutation ("use the random data loader to feed the training set", Sec. 5.4.6). Table 5.6's "Training
Time Inflation" is read as ``random / curriculum - 1``. ``sorted`` (by two-expert tokens summed over the
layers; not the thesis's rule) is a what-if: how much an order can gain when it groups by how complex a
sample is, which cosine similarity ignores.

**The table** (:func:`thesis_rows`, the ``gating`` rows of ``benchmarks/moe.py --thesis``): Tables 5.1,
5.3, 5.5, 5.6 beside the thesis, the what-if, and sweeps of the parameters the text does not give
(``spread`` 0-3, tokens per sample 32-512, ``moe_share`` 0.5-1 on sentiment analysis; every task at
``spread`` :data:`SWEPT_SPREAD`). Measured numbers and what differs: ``docs/rounds.md``, "Adaptive gating
training time".

**Table 5.1** (:func:`forced_top1_layer_time`): the MoE layer alone with a fixed percentage of a batch's
tokens forced to top-1, "Tokens are randomly selected from the data batch ... averaged from 40 runs".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional, Sequence

import numpy as np

from optsched.core.checks import require_int, require_number
from optsched.core.errors import ValidationError
from optsched.perf.adaptive_gating import (LayerCost, adaptive_route, adaptive_routes, batch_time, check_threshold,
                                           complexity_vectors, curriculum_order, layer_factors, synthetic_gate_probs)

#: Sec. 5.4.3: "we set the number of FFNs (i.e. experts) to 16 for all evaluated tasks"
EXPERTS = 16
#: Sec. 5.4.3: "set the threshold T to 0.1"
THRESHOLD = 0.1
#: Table 5.5's thresholds
TABLE_5_5_THRESHOLDS = (0.05, 0.2, 0.3, 0.4)
#: Sec. 5.4.3: FSMT and BART-Large: "The maximum number of tokens ... is 4096"
BATCH_TOKENS = 4096
#: the sequence length of a sample when none is given (the text gives none)
TOKENS_PER_SAMPLE = 128
#: the per-sample spread of the synthetic gate (its default in :func:`synthetic_gate_probs`)
SPREAD = 0.6
#: the spread at which every task is also run in the sweep (two-expert tokens concentrated in few samples)
SWEPT_SPREAD = 2.0
#: samples drawn at once (memory)
CHUNK = 32
#: the calibration draw of :func:`calibrate_sharpness`: many samples (the per-sample sharpness is what
#: varies most), few tokens each (tokens of a sample are drawn independently)
CALIBRATION_SAMPLES, CALIBRATION_TOKENS, CALIBRATION_SEED = 1024, 4, 9_001


@dataclass(frozen=True)
class GatingTask:
    """One task of Table 5.2 with the settings the text gives (module docstring)."""

    name: str
    layers: int
    #: samples per batch (Sec. 5.4.3), or None when the batch is ``BATCH_TOKENS`` tokens
    batch_samples: Optional[int]
    #: share of tokens routed to two experts at T = 0.1 (Sec. 5.4.4) and where it comes from
    two_share: float
    share_source: str
    #: Table 5.3 computation FLOPs of top-1, top-2 and adaptive gating (any unit)
    flops: tuple[float, float, float]

    def __post_init__(self) -> None:
        require_int(f"gating task {self.name}", "layers", self.layers, 1)
        if self.batch_samples is not None:
            require_int(f"gating task {self.name}", "batch_samples", self.batch_samples, 1)
        require_number(f"gating task {self.name}", "two_share", self.two_share, 0.0, strict=True)
        if self.two_share >= 1.0:
            raise ValidationError(f"gating task {self.name}: two_share must be below 1, got {self.two_share}")
        top1, top2, _ = self.flops
        if not 0 < top1 < top2 < 2 * top1:
            raise ValidationError(f"gating task {self.name}: FLOPs must satisfy 0 < top-1 < top-2 < 2 x top-1 "
                                  f"(top-2 adds one expert FFN), got {self.flops}")

    def samples_per_batch(self, tokens_per_sample: int) -> int:
        """Sec. 5.4.3's batch size in samples."""
        if self.batch_samples is not None:
            return self.batch_samples
        return max(1, BATCH_TOKENS // tokens_per_sample)

    @property
    def non_moe_ratio(self) -> float:
        """Non-expert over one expert FFN's FLOPs (Table 5.3): ``(2 top1 - top2) / (top2 - top1)``."""
        top1, top2, _ = self.flops
        return (2 * top1 - top2) / (top2 - top1)


#: Table 5.2 / Sec. 5.4.3 / Table 5.3 / Sec. 5.4.4
TASKS: tuple[GatingTask, ...] = (
    GatingTask("Sentiment analysis", 12, 24, 0.113, "Sec. 5.4.4: 11.3%", (2.18, 3.28, 2.30)),
    GatingTask("Translation", 12, None, 0.256, "Sec. 5.4.4: 25.6% (FLOPs give 17%)", (10.6, 15.9, 11.5)),
    GatingTask("Question and Answer", 12, 24, 0.164, "Sec. 5.4.4: 16.4%", (2.18, 3.27, 2.36)),
    GatingTask("Summarization", 24, None, 0.2, "Table 5.3 FLOPs: (87 - 79) / (119 - 79)", (79.0, 119.0, 87.0)),
    GatingTask("Text completion", 24, 8, 0.218, "Sec. 5.4.4: 21.8%", (3.4, 4.9, 3.73)),
    GatingTask("Dialogue response", 24, 64, 0.234, "Sec. 5.4.4: 23.4%", (3.4, 4.9, 3.76)),
)


def task_named(name: str) -> GatingTask:
    """The task of :data:`TASKS` called ``name``."""
    for t in TASKS:
        if t.name == name:
            return t
    raise ValidationError(f"adaptive gating training: unknown task {name!r}; one of {[t.name for t in TASKS]}")


@dataclass(frozen=True)
class StepModel:
    """Step time of a batch (module docstring): per layer, the MoE layer's :class:`LayerCost` plus
    ``non_moe_ms``."""

    cost: LayerCost = field(default_factory=LayerCost)
    non_moe_ms: float = 0.0

    def __post_init__(self) -> None:
        require_number("step model", "non_moe_ms", self.non_moe_ms, 0.0)

    @classmethod
    def for_task(cls, task: GatingTask, moe_share: float | None = None, cost: LayerCost | None = None) -> "StepModel":
        """The task's model: non-MoE time from its FLOPs, or such that the MoE layers are ``moe_share``
        (in (0, 1]) of the top-2 step."""
        c = cost or LayerCost()
        if moe_share is None:
            return cls(c, task.non_moe_ratio * c.per_expert_ms)
        require_number("step model", "moe_share", moe_share, 0.0, strict=True)
        if moe_share > 1.0:
            raise ValidationError(f"step model: moe_share must be in (0, 1], got {moe_share}")
        return cls(c, c.top2_ms * (1.0 - moe_share) / moe_share)

    @property
    def moe_share(self) -> float:
        """The MoE layers' share of the top-2 step time."""
        return self.cost.top2_ms / (self.cost.top2_ms + self.non_moe_ms)

    def time(self, vectors: np.ndarray, order: np.ndarray, batch: int) -> float:
        """Time of the batches of ``batch`` consecutive samples of ``order`` (complexity vectors: samples
        x layers, Eq. 5.5)."""
        c = np.asarray(vectors, dtype=float)
        moe, _ = batch_time(c, order, batch, self.cost)
        return moe + math.ceil(c.shape[0] / batch) * c.shape[1] * self.non_moe_ms

    def relative(self, vectors: np.ndarray, order: np.ndarray, batch: int) -> float:
        """:meth:`time` over top-2 gating's (every ``r = 1``) on the same batches."""
        c = np.asarray(vectors, dtype=float)
        return self.time(c, order, batch) / self.time(np.ones_like(c), order, batch)

    def top1_relative(self) -> float:
        """Top-1 gating's step time over top-2's."""
        return (self.cost.time(np.array(0.0)).item() + self.non_moe_ms) / (self.cost.top2_ms + self.non_moe_ms)


def _check_distribution(tokens_per_sample: int, spread: float, seed: int) -> None:
    require_int("adaptive gating training", "tokens_per_sample", tokens_per_sample, 1)
    require_number("adaptive gating training", "spread", spread, 0.0)
    require_int("adaptive gating training", "seed", seed, 0)


def calibrate_sharpness(task: GatingTask, *, seed: int = 0, spread: float = SPREAD, experts: int = EXPERTS,
                        tolerance: float = 1e-3) -> float:
    """The ``sharpness`` of :func:`synthetic_gate_probs` at which the share of two-expert tokens at
    :data:`THRESHOLD` is ``task.two_share`` on a calibration draw of :data:`CALIBRATION_SAMPLES` samples
    of :data:`CALIBRATION_TOKENS` tokens through the layers of model ``seed`` (its
    :func:`layer_factors`), to within ``tolerance`` (bisection on the logarithm of the sharpness; the
    share falls as the sharpness grows). The share does not depend on the tokens per sample."""
    _check_distribution(1, spread, seed)
    factor = layer_factors(task.layers, seed)

    def share(sharpness: float) -> float:
        p = synthetic_gate_probs(CALIBRATION_SAMPLES, CALIBRATION_TOKENS, task.layers, experts, CALIBRATION_SEED,
                                 sharpness=sharpness, spread=spread, layer_factor=factor)
        return adaptive_route(p, THRESHOLD).two_share

    lo, hi = math.log(1e-2), math.log(1e3)
    if not share(math.exp(hi)) < task.two_share < share(math.exp(lo)):
        raise ValidationError(f"adaptive gating training: no sharpness in [0.01, 1000] gives {task.name}'s "
                              f"two-expert share {task.two_share}")
    for _ in range(60):
        mid = (lo + hi) / 2
        s = share(math.exp(mid))
        if abs(s - task.two_share) <= tolerance:
            break
        lo, hi = (mid, hi) if s > task.two_share else (lo, mid)
    return math.exp(mid)


def complexity(task: GatingTask, thresholds: Sequence[float], samples: int, *, sharpness: float, seed: int,
               tokens_per_sample: int = TOKENS_PER_SAMPLE, spread: float = SPREAD,
               experts: int = EXPERTS) -> tuple[np.ndarray, np.ndarray]:
    """(share of two-expert tokens per threshold, complexity vectors: thresholds x samples x layers) of
    ``samples`` synthetic samples drawn from ``seed`` in chunks of :data:`CHUNK` samples that share the
    model's per-layer factors."""
    _check_distribution(tokens_per_sample, spread, seed)
    require_int("adaptive gating training", "samples", samples, 1)
    ts = [check_threshold(t) for t in thresholds]
    factor = layer_factors(task.layers, seed)
    vectors = np.empty((len(ts), samples, task.layers))
    for start in range(0, samples, CHUNK):
        n = min(CHUNK, samples - start)
        p = synthetic_gate_probs(n, tokens_per_sample, task.layers, experts, seed * 100_003 + start + 1,
                                 sharpness=sharpness, spread=spread, layer_factor=factor)
        for i, d in enumerate(adaptive_routes(p, ts)):
            vectors[i, start: start + n] = complexity_vectors(d.two)
    return vectors.mean(axis=(1, 2)), vectors


@dataclass(frozen=True)
class TaskResult:
    """Per threshold: share of two-expert tokens and step time over top-2's in the curriculum order, the
    random order and (not the thesis's rule, for comparison) sorted by two-expert tokens; top-1's step
    time over top-2's; the model's MoE share and the calibrated sharpness."""

    task: str
    thresholds: tuple[float, ...]
    share: tuple[float, ...]
    curriculum: tuple[float, ...]
    random: tuple[float, ...]
    sorted: tuple[float, ...]
    #: share of samples with no two-expert token at any layer (how concentrated the two-expert tokens are)
    no_two: tuple[float, ...]
    top1: float
    moe_share: float
    sharpness: float

    def at(self, threshold: float) -> tuple[float, float, float]:
        """(share, curriculum, random) at ``threshold``."""
        i = self.thresholds.index(threshold)
        return self.share[i], self.curriculum[i], self.random[i]

    def at_no_two(self, threshold: float) -> float:
        """Share of samples with no two-expert token at ``threshold``."""
        return self.no_two[self.thresholds.index(threshold)]

    def inflation(self, threshold: float = THRESHOLD, against: str = "curriculum") -> float:
        """Table 5.6's "Training Time Inflation" without the curriculum, %: ``random / curriculum - 1``
        (``against="sorted"``: over the order sorted by two-expert tokens instead)."""
        i = self.thresholds.index(threshold)
        if against not in ("curriculum", "sorted"):
            raise ValidationError(f"adaptive gating training: against must be 'curriculum' or 'sorted', "
                                  f"got {against!r}")
        return 100.0 * (self.random[i] / getattr(self, against)[i] - 1.0)


def training_time(task: GatingTask, thresholds: Sequence[float] = (THRESHOLD, *TABLE_5_5_THRESHOLDS), *,
                  batches: int = 32, seed: int = 0, tokens_per_sample: int = TOKENS_PER_SAMPLE,
                  spread: float = SPREAD, moe_share: float | None = None,
                  sharpness: float | None = None) -> TaskResult:
    """The model of the module docstring on ``batches`` batches of ``task`` (Sec. 5.4.3's batch size)."""
    require_int("adaptive gating training", "batches", batches, 1)
    ts = tuple(check_threshold(t) for t in thresholds)
    if not ts:
        raise ValidationError("adaptive gating training: at least one threshold T is needed")
    model = StepModel.for_task(task, moe_share)
    sharp = calibrate_sharpness(task, seed=seed, spread=spread) if sharpness is None else sharpness
    batch = task.samples_per_batch(tokens_per_sample)
    share, vectors = complexity(task, ts, batches * batch, sharpness=sharp, seed=seed,
                                tokens_per_sample=tokens_per_sample, spread=spread)
    rand = np.random.default_rng(seed).permutation(batches * batch)
    cur = [model.relative(v, curriculum_order(v), batch) for v in vectors]
    rnd = [model.relative(v, rand, batch) for v in vectors]
    srt = [model.relative(v, np.argsort(v.sum(axis=1), kind="stable"), batch) for v in vectors]
    none = [float(np.mean(~v.any(axis=1))) for v in vectors]
    return TaskResult(task.name, ts, tuple(float(s) for s in share), tuple(cur), tuple(rnd), tuple(srt), tuple(none),
                      model.top1_relative(), model.moe_share, sharp)


def forced_top1_layer_time(top1_share: float, *, samples: int = 24, tokens_per_sample: int = TOKENS_PER_SAMPLE,
                           runs: int = 40, seed: int = 0, cost: LayerCost | None = None) -> float:
    """Table 5.1's set-up: in a batch of ``samples`` x ``tokens_per_sample`` tokens, ``top1_share`` of them
    (chosen at random) go to one expert and the rest to two; the MoE layer's time over top-2's, mean of
    ``runs`` batches."""
    require_number("forced top-1", "top1_share", top1_share, 0.0)
    if top1_share > 1.0:
        raise ValidationError(f"forced top-1: top1_share must be in [0, 1], got {top1_share}")
    for name, value in (("samples", samples), ("tokens_per_sample", tokens_per_sample), ("runs", runs)):
        require_int("forced top-1", name, value, 1)
    c = cost or LayerCost()
    rng = np.random.default_rng(seed)
    n = samples * tokens_per_sample
    two_tokens = n - round(top1_share * n)
    out = []
    for _ in range(runs):
        two = np.zeros(n, dtype=bool)
        two[rng.choice(n, two_tokens, replace=False)] = True
        r = two.reshape(samples, tokens_per_sample).mean(axis=1)
        out.append(c.time(r.max()).item() / c.top2_ms)
    return float(np.mean(out))


#: Table 5.3: task -> (adaptive, top-1) normalised training time
TABLE_5_3 = {"Sentiment analysis": (0.77, 0.99), "Translation": (0.79, 1.04), "Question and Answer": (0.86, 1.07),
             "Summarization": (0.86, 1.06), "Text completion": (0.89, 1.14), "Dialogue response": (0.82, 0.93)}
#: Table 5.5: task -> normalised training time at T = 0.05, 0.2, 0.3, 0.4 ("Text generation" = text completion)
TABLE_5_5 = {"Sentiment analysis": (1.02, 0.77, 0.92, 1.01), "Translation": (0.88, 0.83, 0.83, 0.88),
             "Question and Answer": (0.92, 0.87, 0.93, 0.96), "Summarization": (0.98, 1.02, 1.05, 1.04),
             "Text completion": (0.95, 0.93, 0.99, 1.01), "Dialogue response": (0.93, 0.91, 1.01, 1.01)}
#: Table 5.6: task -> training time inflation without the curriculum, %; Sec. 5.4.6: "an average increase of 13.7%"
TABLE_5_6 = {"Sentiment analysis": 22.0, "Translation": 14.0, "Question and Answer": 9.0, "Summarization": 14.0,
             "Text completion": 12.0, "Dialogue response": 11.0}
#: Table 5.1: top-1 share of tokens -> norm. MoE layer running time
TABLE_5_1 = {0.8: 0.76, 0.5: 0.92, 0.2: 0.97}

#: one row of the thesis table: table, setting, the thesis's number (None: none in the text), ours
Row = tuple[str, str, Optional[float], float]


def _mean(results: list[TaskResult], get) -> float:  # type: ignore[no-untyped-def]
    return float(np.mean([get(r) for r in results]))


def thesis_rows(seeds: int = 3, batches: int = 32, *, sweeps: bool = True) -> list[Row]:
    """The ``gating`` table of ``benchmarks/moe.py --thesis``: every task at the thesis's settings
    (means over ``seeds`` seeds of ``batches`` batches), Tables 5.1, 5.3, 5.5, 5.6, and (``sweeps``) the
    unknown parameters swept on sentiment analysis."""
    require_int("adaptive gating training", "seeds", seeds, 1)
    rows: list[Row] = []
    for top1, thesis in TABLE_5_1.items():
        rows.append(("gating", f"Table 5.1: MoE layer time / top-2, {100 * top1:.0f}% of tokens forced to top-1 "
                     f"at random (24 samples x {TOKENS_PER_SAMPLE} tokens, 40 runs)", thesis,
                     forced_top1_layer_time(top1)))
    by_task: dict[str, list[TaskResult]] = {}
    for task in TASKS:
        by_task[task.name] = [training_time(task, batches=batches, seed=s) for s in range(seeds)]
    for name, res in by_task.items():
        adaptive, top1 = TABLE_5_3[name]
        rows.append(("gating", f"Table 5.3 {name}: two-expert token share at T=0.1 (calibrated: "
                     f"{task_named(name).share_source})", task_named(name).two_share,
                     _mean(res, lambda r: r.at(THRESHOLD)[0])))
        rows.append(("gating", f"Table 5.3 {name}: step time adaptive (T=0.1, curriculum) / top-2 "
                     f"[thesis: training time to the same loss]", adaptive, _mean(res, lambda r: r.at(THRESHOLD)[1])))
        rows.append(("gating", f"Table 5.3 {name}: step time top-1 / top-2 [thesis: training time to the same "
                     f"loss, includes slower convergence]", top1, res[0].top1))
    best = min(_mean(res, lambda r: r.at(THRESHOLD)[1]) for res in by_task.values())
    rows.append(("gating", "largest training time reduction over the six tasks, % (1 - min adaptive/top-2) "
                 "[Sec. 5.1: at most 22.5%]", 22.5, 100.0 * (1.0 - best)))
    for name, res in by_task.items():
        for i, t in enumerate(TABLE_5_5_THRESHOLDS):
            rows.append(("gating", f"Table 5.5 {name}: two-expert token share at T={t:g} [no number in the text]",
                         None, _mean(res, lambda r: r.at(t)[0])))
            rows.append(("gating", f"Table 5.5 {name}: step time adaptive (T={t:g}, curriculum) / top-2 "
                         f"[thesis: training time]", TABLE_5_5[name][i], _mean(res, lambda r: r.at(t)[1])))
    for name, res in by_task.items():
        rows.append(("gating", f"Table 5.6 {name}: no curriculum (random order), step time inflation over the "
                     f"curriculum order, % [thesis: training time]", TABLE_5_6[name],
                     _mean(res, lambda r: r.inflation())))
    rows.append(("gating", "Table 5.6 average inflation without curriculum, % [Sec. 5.4.6: 13.7%]", 13.7,
                 float(np.mean([_mean(res, lambda r: r.inflation()) for res in by_task.values()]))))
    for name, res in by_task.items():
        rows.append(("gating", f"what-if {name}: random order's step time over the order sorted by two-expert tokens "
                     f"(not the thesis's cosine rule), % [no number in the text]", None,
                     _mean(res, lambda r: r.inflation(against="sorted"))))
        rows.append(("gating", f"{name}: samples with no two-expert token at T=0.1, % [no number in the text]", None,
                     100.0 * _mean(res, lambda r: r.at_no_two(THRESHOLD))))
    if sweeps:
        rows += _sweeps(seeds, batches)
    return rows


def _sweeps(seeds: int, batches: int) -> list[Row]:
    """Sentiment analysis at T = 0.1 with one unknown parameter changed at a time."""
    task = TASKS[0]
    rows: list[Row] = []
    cases: list[tuple[str, dict]] = [(f"spread {s:g}", {"spread": s}) for s in (0.0, 0.3, 1.0, 2.0, 3.0)]
    cases += [(f"tokens per sample {n}", {"tokens_per_sample": n}) for n in (32, 512)]
    cases += [(f"MoE share of the top-2 step {m:g}", {"moe_share": m}) for m in (0.5, 1.0)]
    for label, kw in cases:
        res = [training_time(task, (THRESHOLD,), batches=batches, seed=s, **kw) for s in range(seeds)]
        rows.append(("gating", f"sweep {task.name}, {label}: step time adaptive (T=0.1, curriculum) / top-2",
                     TABLE_5_3[task.name][0], _mean(res, lambda r: r.curriculum[0])))
        rows.append(("gating", f"sweep {task.name}, {label}: no-curriculum inflation, %", TABLE_5_6[task.name],
                     _mean(res, lambda r: r.inflation())))
        rows.append(("gating", f"sweep {task.name}, {label}: samples with no two-expert token, % [no number in the "
                     f"text]", None, 100.0 * _mean(res, lambda r: r.no_two[0])))
    for other in TASKS[1:]:
        res = [training_time(other, (THRESHOLD,), batches=batches, seed=s, spread=SWEPT_SPREAD) for s in range(seeds)]
        rows.append(("gating", f"sweep {other.name}, spread {SWEPT_SPREAD:g}: step time adaptive (T=0.1, curriculum) "
                     f"/ top-2", TABLE_5_3[other.name][0], _mean(res, lambda r: r.curriculum[0])))
        rows.append(("gating", f"sweep {other.name}, spread {SWEPT_SPREAD:g}: no-curriculum inflation, %",
                     TABLE_5_6[other.name], _mean(res, lambda r: r.inflation())))
    return rows


__all__ = ["BATCH_TOKENS", "EXPERTS", "GatingTask", "StepModel", "TABLE_5_1", "TABLE_5_3", "TABLE_5_5", "TABLE_5_6",
           "TABLE_5_5_THRESHOLDS", "TASKS", "THRESHOLD", "TOKENS_PER_SAMPLE", "TaskResult", "calibrate_sharpness",
           "complexity", "forced_top1_layer_time", "task_named", "thesis_rows", "training_time"]

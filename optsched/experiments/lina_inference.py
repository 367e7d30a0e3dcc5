"""Lina's inference against the baseline (thesis Sec. 4.5, Sec. 4.7.3.1, Figs. 4.16-4.18): median and p95
request and MoE layer times, on the model of :mod:`optsched.experiments.lina_estimation` (its ``lina`` and
``baseline`` schemes: two-phase popularity-based scheduling against DeepSpeed's expert parallelism).

**Metrics** (Sec. 4.7.1): "Inference time: Time to complete one batch of inference" (a request: one batch
through every MoE layer plus the non-MoE part of the model, :func:`~.lina_estimation.request_times`); "MoE
layer time: Time to complete one MoE layer of computation and communication" ("With Lina, MoE layer time
includes gate computation, phase two of scheduling, two all-to-all, and expert computation", Sec. 4.7.3.1);
all-to-all time. The thesis's reductions are the baseline's time over Lina's ("Compared to Baseline, median
inference time is reduced by 1.54x"), :meth:`~.lina_estimation.EstimationStudy.reduction`.

**Settings from the text.** Inference models: "Transformer-XL [29]: The inference task is text generation
with Enwik8" and "BERT-Large [32]: a 12-layer decoder model", both "12-layer MoE models" (Fig. 4.9), top-1
gating ("k = 1 in inference", Sec. 4.7.1), "the number of devices equals the number of experts" (Eq. 4.1),
"The path length l in popularity estimation is 3; the maximum number of experts packed on a device is 4"
(Sec. 4.7.1). Expert counts: 4 and 16 (median, Fig. 4.16), 16 (p95, Fig. 4.16), 8 and 16 (MoE layer p95,
Fig. 4.17), 16 (all-to-all per layer, Fig. 4.18). The time scale of a setting is Table 4.1's inference row of
the 12-layer Transformer-XL with as many experts (:data:`SETTINGS`): 4 experts 73 ms of all-to-all, 27.4% of
the inference time; 16 experts 102 ms, 32.5%. Table 4.1 has no 8-expert row, so the 8-expert layer
times of Fig. 4.17 are left out. The text gives no inference batch size and nothing that tells the two
models' routing apart: both models' rows carry one value of ours per expert count (one synthetic router,
:class:`~optsched.perf.moe_routing.TypedRouter`, per seed).

**The headline** (abstract, Sec. 4.1: "The median and 95%ile inference time is reduced by 1.45x and 1.63x";
"reduces the 95%ile inference time by an average of 1.63x"): the mean of the four settings' reductions
(the text's four medians, 1.54, 1.45, 1.36, 1.46, average 1.45; the 4-expert p95s are only in Fig. 4.16), so
ours is the mean over 4 and 16 experts of each model.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from optsched.core.checks import require_int
from optsched.core.errors import ValidationError
from optsched.experiments.lina_estimation import EstimationStudy, SchedulerCosts, estimation_study
from optsched.perf.expert_popularity import DEFAULT_PATH_LENGTH
from optsched.perf.moe_routing import TypedRouter

#: Table 4.1, inference of the 12-layer Transformer-XL: experts -> (all-to-all ms per batch, share of inference time)
TABLE_4_1_INFERENCE = {4: (73.0, 0.274), 16: (102.0, 0.325)}
#: "12-layer MoE models" (Fig. 4.9; Table 4.1's 12L rows)
LAYERS = 12
#: the time scale of each expert count the inference study runs (module docstring)
SETTINGS = {e: SchedulerCosts(baseline_a2a_ms=ms / LAYERS, baseline_a2a_share=share)
            for e, (ms, share) in TABLE_4_1_INFERENCE.items()}
MODELS = ("Transformer-XL", "BERT-Large")
#: Sec. 4.7.3.1: median inference time reduction over the baseline, (experts, model) -> x
MEDIAN_REQUEST = {(4, "Transformer-XL"): 1.54, (16, "Transformer-XL"): 1.45, (4, "BERT-Large"): 1.36,
                  (16, "BERT-Large"): 1.46}
#: Sec. 4.7.3.1: "The 95%ile inference time is reduced by 1.82x for 16-expert Transformer-XL and 1.68x for
#: 16-expert BERT-Large" (the 4-expert p95s are only in Fig. 4.16)
P95_REQUEST = {(16, "Transformer-XL"): 1.82, (16, "BERT-Large"): 1.68}
#: Sec. 4.7.3.1 / Fig. 4.17: "The 95%ile MoE layer time is reduced by 1.87x and 1.77x in 8- and 16-expert
#: Transformer-XL ... and by 1.58x and 1.81x in 8- and 16-expert BERT-Large" (8 experts: no Table 4.1 row)
P95_LAYER = {(16, "Transformer-XL"): 1.77, (16, "BERT-Large"): 1.81}
#: Fig. 4.18 (16 experts, both models): "The average and maximum improvements are 1.96x and 2.50x"
A2A_LAYER = {"mean": 1.96, "max": 2.50}
#: abstract / Sec. 4.1: "The median and 95%ile inference time is reduced by 1.45x and 1.63x"
HEADLINE = {"median": 1.45, "p95": 1.63}
#: Table 4.5, l = 3 (16 experts): Lina's (median, p95) inference time over Ideal's, per model
LINA_OVER_IDEAL = {"Transformer-XL": (1.16, 1.04), "BERT-Large": (1.07, 1.04)}

#: one row of ``moe_thesis.csv``: table, setting, the thesis's number (None: the text gives none), ours
Row = tuple[str, str, Optional[float], float]


def inference_studies(experts: int, seeds: int, batches: int, *, layers: int = LAYERS, profile_batches: int = 64,
                      tokens: int = 2048, path_length: int = DEFAULT_PATH_LENGTH) -> list[EstimationStudy]:
    """One :func:`~.lina_estimation.estimation_study` per seed ``0 .. seeds-1``: a
    :class:`~optsched.perf.moe_routing.TypedRouter` of ``experts`` experts and ``layers`` layers, profiled on
    ``profile_batches`` batches and tested on ``batches`` requests of ``tokens`` tokens (sample seeds ``seed +
    500`` and ``seed + 1000``), one device per expert, at :data:`SETTINGS`'s time scale."""
    owner = "inference study"
    if experts not in SETTINGS:
        raise ValidationError(f"{owner}: experts must be one of {', '.join(map(str, SETTINGS))} (the expert counts "
                              f"of Table 4.1's inference rows, the time scale), got {experts!r}")
    for name, value in (("seeds", seeds), ("batches", batches), ("profile_batches", profile_batches),
                        ("tokens", tokens), ("layers", layers)):
        require_int(owner, name, value, 1)
    if path_length >= layers:
        raise ValidationError(f"{owner}: path_length {path_length} leaves no layer to estimate in {layers} layers")
    out = []
    for seed in range(seeds):
        router = TypedRouter.create(experts, layers, seed)
        profile = router.sample(profile_batches, tokens, seed + 500)
        test = router.sample(batches, tokens, seed + 1000)
        out.append(estimation_study(profile, test, path_length=path_length, costs=SETTINGS[experts]))
    return out


def _mean(studies: list[EstimationStudy], stat: str, measure: str = "request", over: str = "baseline") -> float:
    return float(np.mean([s.reduction(stat, measure, scheme="lina", over=over) for s in studies]))


def thesis_rows(seeds: int, batches: int, **study: int) -> list[Row]:
    """Table ``inference`` of ``benchmarks/moe.py --thesis``: per expert count of :data:`SETTINGS` and model,
    Lina's reduction of the median and p95 request time and MoE layer time over the baseline (baseline /
    Lina, mean over ``seeds`` routers of ``batches`` requests), the headline averages, Fig. 4.18's per-layer
    p95 all-to-all reduction (mean and max over the scheduled layers), and the baseline's time over Ideal's
    the thesis implies (its reduction times Table 4.5's Lina / Ideal). ``study``: :func:`inference_studies`'s
    keyword arguments."""
    rows: list[Row] = []
    by_experts = {e: inference_studies(e, seeds, batches, **study) for e in SETTINGS}
    ours = {(e, stat, measure): _mean(st, stat, measure) for e, st in by_experts.items()
            for stat in ("median", "p95") for measure in ("request", "layer")}
    for e in SETTINGS:
        for model in MODELS:
            tag = f"{e} experts, {model}"
            rows.append(("inference", f"median request (inference) time, baseline / Lina [{tag}, Sec. 4.7.3.1]",
                         MEDIAN_REQUEST.get((e, model)), ours[e, "median", "request"]))
            rows.append(("inference", f"p95 request (inference) time, baseline / Lina [{tag}, Sec. 4.7.3.1, "
                         f"Fig. 4.16]", P95_REQUEST.get((e, model)), ours[e, "p95", "request"]))
            rows.append(("inference", f"median MoE layer time, baseline / Lina [{tag}, no number in the text]",
                         None, ours[e, "median", "layer"]))
            rows.append(("inference", f"p95 MoE layer time, baseline / Lina [{tag}, Fig. 4.17]",
                         P95_LAYER.get((e, model)), ours[e, "p95", "layer"]))
    for stat in ("median", "p95"):
        mean = float(np.mean([ours[e, stat, "request"] for e in SETTINGS]))
        rows.append(("inference", f"{stat} request time, baseline / Lina, mean of 4 and 16 experts x 2 models "
                     f"[headline, Sec. 4.1]", HEADLINE[stat], mean))
    main = by_experts[max(SETTINGS)]
    per_layer = np.array([s.layer_reductions("p95", "a2a")[s.first_layer:] for s in main])
    for name, f in (("mean", np.mean), ("max", np.max)):
        rows.append(("inference", f"p95 all-to-all time per scheduled layer, baseline / Lina, {name} over layers "
                     f"[16 experts, Fig. 4.18]", A2A_LAYER[name], float(f(np.mean(per_layer, axis=0)))))
    for model, (median, p95) in LINA_OVER_IDEAL.items():
        for stat, thesis in (("median", MEDIAN_REQUEST[16, model] * median), ("p95", P95_REQUEST[16, model] * p95)):
            ideal = float(np.mean([s.reduction(stat, "request", scheme="ideal", over="baseline") for s in main]))
            rows.append(("inference", f"{stat} request time, baseline / Ideal [16 experts, {model}: implied, Sec. "
                         f"4.7.3.1's reduction x Table 4.5's Lina / Ideal at l=3]", thesis, ideal))
    return rows


__all__ = ["A2A_LAYER", "HEADLINE", "LAYERS", "MEDIAN_REQUEST", "MODELS", "P95_LAYER", "P95_REQUEST", "SETTINGS",
           "TABLE_4_1_INFERENCE", "inference_studies", "thesis_rows"]

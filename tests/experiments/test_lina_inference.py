"""Lina's inference against the baseline (optsched/experiments/lina_inference.py, thesis Sec. 4.7.3.1): the
request-time sum and its median / p95 by hand, the reductions as the thesis defines them (baseline / Lina),
the ``inference`` table of ``benchmarks/moe.py --thesis``, and bad input."""

from __future__ import annotations

import csv
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from optsched.core.errors import ValidationError
from optsched.experiments.lina_estimation import SCHEMES, EstimationStudy, request_times, statistic
from optsched.experiments.lina_inference import (A2A_LAYER, HEADLINE, MEDIAN_REQUEST, P95_LAYER, P95_REQUEST,
                                                 SETTINGS, inference_studies, thesis_rows)

TINY = dict(layers=5, profile_batches=4, tokens=128)


def _study(layers: dict[str, list[list[float]]], other: float) -> EstimationStudy:
    lm = {s: np.array(v, dtype=float) for s, v in layers.items()}
    times = {s: request_times(t, other) for s, t in lm.items()}
    flags = np.ones((len(next(iter(lm.values()))), 1), dtype=bool)
    return EstimationStudy(1, 1, "set", 1, flags, flags, times, 1.0, other, lm, lm)


def test_request_times_and_their_median_and_p95_by_hand() -> None:
    """Three requests of two MoE layers and 10 ms of the rest of the model.

    Baseline layers [1, 2], [3, 4], [10, 20] -> requests 13, 17, 40 ms: median 17; p95 at rank 0.95 x 2 = 1.9 of
    the sorted times, 17 + 0.9 x (40 - 17) = 37.7. Lina layers [1, 1], [2, 2], [5, 5] -> 12, 14, 20: median 14,
    p95 14 + 0.9 x 6 = 19.4. Reductions (baseline / Lina): median 17/14, p95 37.7/19.4.
    Layers pooled: baseline 1, 2, 3, 4, 10, 20, p95 at rank 0.95 x 5 = 4.75: 10 + 0.75 x 10 = 17.5; Lina 1, 1, 2, 2,
    5, 5: 5; reduction 3.5. Per layer (p95 over the three requests): layer 0, baseline 1, 3, 10 -> 3 + 0.9 x 7 =
    9.3, Lina 1, 2, 5 -> 2 + 0.9 x 3 = 4.7; layer 1, baseline 2, 4, 20 -> 4 + 0.9 x 16 = 18.4, Lina 4.7."""
    base, lina = [[1, 2], [3, 4], [10, 20]], [[1, 1], [2, 2], [5, 5]]
    assert request_times(np.array(base), 10.0).tolist() == [13.0, 17.0, 40.0]
    assert statistic([13, 17, 40], "median") == 17.0 and statistic([13, 17, 40], "p95") == pytest.approx(37.7)
    study = _study({s: lina if s == "lina" else base for s in SCHEMES}, 10.0)
    assert study.median("baseline") == 17.0 and study.p95("lina") == pytest.approx(19.4)
    assert study.reduction("median") == pytest.approx(17 / 14)
    assert study.reduction("p95") == pytest.approx(37.7 / 19.4)
    assert study.reduction("p95", "layer") == pytest.approx(17.5 / 5)
    assert study.layer_reductions("p95", "a2a") == pytest.approx([9.3 / 4.7, 18.4 / 4.7])
    assert study.reduction("median", scheme="baseline") == 1.0


def test_the_inference_table_has_its_rows_and_finite_ratios() -> None:
    rows = thesis_rows(1, 3, **TINY)
    assert {r[0] for r in rows} == {"inference"}
    settings = [r[1] for r in rows]
    assert len(settings) == len(set(settings)) == len(SETTINGS) * 2 * 4 + 2 + 2 + 4
    for e, model in MEDIAN_REQUEST:
        row = next(r for r in rows
                   if r[1].startswith("median request (inference) time") and f"[{e} experts, {model}," in r[1])
        assert row[2] == MEDIAN_REQUEST[e, model]
    thesis = {r[2] for r in rows if r[2] is not None}
    assert {*P95_REQUEST.values(), *P95_LAYER.values(), *A2A_LAYER.values(), *HEADLINE.values()} <= thesis
    for _, setting, paper, ours in rows:
        assert math.isfinite(ours) and ours > 0, setting
        assert paper is None or math.isfinite(ours / paper)
    headline = next(r for r in rows if r[1].startswith("median request time, baseline / Lina, mean"))
    per_experts = [r[3] for r in rows if r[1].startswith("median request (inference)") and "Transformer-XL" in r[1]]
    assert headline[3] == pytest.approx(np.mean(per_experts))


def test_the_thesis_benchmark_writes_the_inference_table(tmp_path, monkeypatch) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import moe  # noqa: PLC0415  (benchmarks/moe.py)

    assert moe.thesis_inference in moe.THESIS_TABLES
    monkeypatch.setattr(moe, "THESIS_TABLES", [moe.thesis_inference])
    monkeypatch.setattr(moe, "PROFILE_BATCHES", 4)
    monkeypatch.setattr(moe, "THESIS_TOKENS", 128)
    assert moe.main(["--thesis", "--seeds", "1", "--thesis-batches", "3", "--out", str(tmp_path)]) == 0
    with open(tmp_path / "moe_thesis.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert {r["table"] for r in rows} == {"inference"}
    assert any("p95 request" in r["setting"] for r in rows) and any("median request" in r["setting"] for r in rows)
    for r in rows:
        if r["thesis"] != "-":
            assert math.isfinite(float(r["ratio"]))


@pytest.mark.parametrize("call,message", [
    (lambda: statistic([1.0, 2.0], "p99"), "stat must be one of median, p95, got 'p99'"),
    (lambda: statistic([], "median"), "the median needs at least one value"),
    (lambda: statistic([1.0, float("nan")], "p95"), "all finite"),
    (lambda: request_times(np.array([1.0, 2.0]), 0.0), r"layer_ms must be a \(requests x layers\) array"),
    (lambda: request_times(np.array([[1.0, -2.0]]), 0.0), "finite times >= 0"),
    (lambda: request_times(np.array([[1.0]]), -1.0), "other_ms must be >= 0"),
    (lambda: inference_studies(8, 1, 1, **TINY), "experts must be one of 4, 16 .*Table 4.1.*got 8"),
    (lambda: inference_studies(16, 0, 1, **TINY), "seeds must be >= 1"),
    (lambda: inference_studies(16, 1, 1, layers=3, profile_batches=4, tokens=128), "path_length 3 leaves no layer"),
    (lambda: thesis_rows(1, 0, **TINY), "batches must be >= 1"),
])
def test_bad_input_is_rejected(call, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        call()


def test_bad_measures_and_schemes_are_rejected() -> None:
    study = _study({s: [[1.0]] for s in SCHEMES}, 0.0)
    with pytest.raises(ValidationError, match="measure must be one of request, layer, a2a, got 'step'"):
        study.reduction("median", "step")
    with pytest.raises(ValidationError, match="scheme must be one of .*got 'tutel'"):
        study.reduction("median", scheme="tutel")
    with pytest.raises(ValidationError, match="a request has no layers"):
        study.layer_reductions("p95", "request")

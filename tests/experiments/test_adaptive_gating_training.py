"""Adaptive gating's training-time model (optsched/experiments/adaptive_gating_training.py, thesis Sec. 5.3.2,
5.4.3-5.4.6): the step model on a hand-computed case, the curriculum order against random orders on a property
case, the settings taken from the text, bad input, and the ``gating`` table of ``benchmarks/moe.py --thesis``."""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

import numpy as np
import pytest

from optsched.core.errors import ValidationError
from optsched.experiments.adaptive_gating_training import (TASKS, THRESHOLD, GatingTask, StepModel,
                                                           calibrate_sharpness, complexity, forced_top1_layer_time,
                                                           task_named, training_time)
from optsched.perf.adaptive_gating import LayerCost, adaptive_route, complexity_vectors, curriculum_order

#: 4 samples x 2 tokens x 1 layer x 3 experts (gaps top-1 - top-2 in the comments)
PROBS = np.array([
    [[[0.5, 0.4, 0.1]], [[0.8, 0.1, 0.1]]],      # sample 0: gap 0.1 (two), 0.7 (one) -> r = 1/2
    [[[0.6, 0.3, 0.1]], [[0.7, 0.2, 0.1]]],      # sample 1: 0.3, 0.5 -> r = 0
    [[[0.45, 0.35, 0.2]], [[0.4, 0.4, 0.2]]],    # sample 2: 0.1, 0.0 -> r = 1
    [[[0.9, 0.05, 0.05]], [[0.6, 0.3, 0.1]]],    # sample 3: 0.85, 0.3 -> r = 0
])


def test_two_expert_share_and_step_time_by_hand() -> None:
    """T = 0.2: tokens with gap <= 0.2 take two experts: 3 of 8, share 0.375; complexity vectors
    [0.5], [0], [1], [0]. Step model: LayerCost(per_expert 1, fixed 1) (MoE layer 1 + (1 + max r)), non-MoE
    1 a layer, batches of 2 samples, 1 layer.

    * given order 0,1 | 2,3: (1 + 1.5 + 1) + (1 + 2 + 1) = 7.5; top-2 (r = 1): 2 x (1 + 2 + 1) = 8 -> 0.9375;
    * curriculum: anchor sample 1 (fewest two-expert tokens, lowest index), a zero vector: similarity 1 to
      the other zero vector (sample 3), 0 to the rest, which follow by two-expert tokens (0 then 2): order
      1, 3, 0, 2; batches 1,3 | 0,2: (1 + 1 + 1) + (1 + 2 + 1) = 7 -> 0.875;
    * top-1 (r = 0): 2 x (1 + 1 + 1) / 8 = 0.75; the MoE share of the top-2 step: 3 / 4."""
    d = adaptive_route(PROBS, 0.2)
    assert d.two_share == 0.375
    vectors = complexity_vectors(d.two)
    assert vectors.ravel().tolist() == [0.5, 0.0, 1.0, 0.0]
    model = StepModel(LayerCost(per_expert_ms=1.0, fixed_ms=1.0), non_moe_ms=1.0)
    assert model.time(vectors, np.arange(4), 2) == pytest.approx(7.5)
    assert model.relative(vectors, np.arange(4), 2) == pytest.approx(0.9375)
    order = curriculum_order(vectors)
    assert order.tolist() == [1, 3, 0, 2]
    assert model.relative(vectors, order, 2) == pytest.approx(0.875)
    assert model.top1_relative() == pytest.approx(0.75) and model.moe_share == pytest.approx(0.75)


def test_moe_share_from_the_flops_of_table_5_3() -> None:
    """Sentiment analysis: top-1 2.18G, top-2 3.28G: an expert FFN 1.10G, the rest 1.08G; with Table 5.1's
    calibration (fixed = 1.0303 x per_expert) the MoE layers are (1.0303 + 2) / (1.0303 + 2 + 1.08/1.10) of
    the top-2 step; ``moe_share`` overrides it."""
    task = task_named("Sentiment analysis")
    model = StepModel.for_task(task)
    fixed = (2 * 0.67 - 1) / (1 - 0.67)
    assert model.moe_share == pytest.approx((fixed + 2) / (fixed + 2 + 1.08 / 1.10))
    assert StepModel.for_task(task, moe_share=0.5).moe_share == pytest.approx(0.5)
    assert StepModel.for_task(task, moe_share=1.0).top1_relative() == pytest.approx(0.67)


@pytest.mark.parametrize("seed", range(5))
def test_curriculum_never_worse_than_random_on_proportional_profiles(seed: int) -> None:
    """Property: when every sample's complexity vector is a multiple of one profile over the layers (some
    zero), cosine similarity ties and the curriculum order is by two-expert tokens, i.e. every layer sorted;
    with full batches a sorted order minimises the sum of batch maxima, so no random order is faster."""
    rng = np.random.default_rng(seed)
    profile = rng.uniform(0.2, 1.0, 3)
    scale = rng.uniform(0.0, 1.0, 24) * (rng.uniform(size=24) > 0.2)
    vectors = scale[:, None] * profile[None, :] / profile.max()
    model = StepModel(LayerCost(), non_moe_ms=0.5)
    cur = model.time(vectors, curriculum_order(vectors), 6)
    for _ in range(20):
        assert cur <= model.time(vectors, rng.permutation(24), 6) + 1e-12


def test_task_settings_come_from_the_text() -> None:
    names = [t.name for t in TASKS]
    assert names == ["Sentiment analysis", "Translation", "Question and Answer", "Summarization", "Text completion",
                     "Dialogue response"]
    assert [t.layers for t in TASKS] == [12, 12, 12, 24, 24, 24]
    assert [t.samples_per_batch(128) for t in TASKS] == [24, 32, 24, 32, 8, 64]
    assert task_named("Summarization").two_share == pytest.approx((87 - 79) / (119 - 79))


def test_calibrated_share_and_threshold_sweep() -> None:
    """The calibrated generator gives the task's share at T = 0.1 (within sampling noise) and more two-expert
    tokens, a slower step, at larger thresholds; the random order is never faster here than the curriculum."""
    task = task_named("Sentiment analysis")
    sharp = calibrate_sharpness(task)
    share, _ = complexity(task, (THRESHOLD,), 64, sharpness=sharp, seed=0, tokens_per_sample=32)
    assert share[0] == pytest.approx(task.two_share, abs=0.02)
    r = training_time(task, (0.05, 0.1, 0.3), batches=2, seed=0, tokens_per_sample=32, sharpness=sharp)
    assert r.share[0] < r.share[1] < r.share[2] and r.curriculum[0] < r.curriculum[2] < 1.0
    assert r.top1 < min(r.curriculum)
    assert r.inflation(0.1) == pytest.approx(100 * (r.random[1] / r.curriculum[1] - 1))
    assert r.inflation(0.1, against="sorted") == pytest.approx(100 * (r.random[1] / r.sorted[1] - 1))
    assert r.no_two[0] >= r.no_two[1] >= r.no_two[2]  # fewer samples free of two-expert tokens at larger T


def test_table_5_1_forced_top1() -> None:
    """All tokens top-1: the calibration point 0.67; none: top-2 (1.0); in between, above the computation."""
    assert forced_top1_layer_time(1.0, runs=2) == pytest.approx(0.67)
    assert forced_top1_layer_time(0.0, runs=2) == pytest.approx(1.0)
    assert 0.6 < forced_top1_layer_time(0.8, runs=5) < 1.0


def test_bad_input() -> None:
    task = TASKS[0]
    with pytest.raises(ValidationError, match="tokens_per_sample must be >= 1"):
        training_time(task, batches=1, tokens_per_sample=0)
    with pytest.raises(ValidationError, match="threshold T must be in"):
        training_time(task, (1.5,), batches=1)
    with pytest.raises(ValidationError, match="at least one threshold"):
        training_time(task, (), batches=1)
    with pytest.raises(ValidationError, match="moe_share must be in"):
        StepModel.for_task(task, moe_share=1.5)
    with pytest.raises(ValidationError, match="moe_share must be > 0"):
        StepModel.for_task(task, moe_share=0.0)
    with pytest.raises(ValidationError, match="spread must be >= 0"):
        calibrate_sharpness(task, spread=-1.0)
    with pytest.raises(ValidationError, match="unknown task 'Chat'"):
        task_named("Chat")
    with pytest.raises(ValidationError, match="FLOPs must satisfy"):
        GatingTask("x", 12, 24, 0.1, "x", (3.0, 2.0, 2.5))
    with pytest.raises(ValidationError, match="two_share must be below 1"):
        GatingTask("x", 12, 24, 1.0, "x", (2.0, 3.0, 2.5))
    with pytest.raises(ValidationError, match="top1_share must be in"):
        forced_top1_layer_time(1.2)
    r = training_time(task, (0.1,), batches=1, tokens_per_sample=8)
    with pytest.raises(ValidationError, match="against must be 'curriculum' or 'sorted'"):
        r.inflation(against="random")


def test_the_thesis_benchmark_writes_the_gating_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``benchmarks/moe.py --thesis`` with the ``gating`` builder (quick: 1 seed, 4 batches): columns
    table,setting,thesis,ours,ratio; Tables 5.1, 5.3, 5.5, 5.6 present; ratio = ours / thesis."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import moe  # noqa: PLC0415  (benchmarks/moe.py)

    assert moe.thesis_gating in moe.THESIS_TABLES
    monkeypatch.setattr(moe, "THESIS_TABLES", [moe.thesis_gating])
    path = moe.thesis(argparse.Namespace(seeds=1, quick=True, out=tmp_path))
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == ["table", "setting", "thesis", "ours", "ratio"]
    assert {r["table"] for r in rows} == {"gating"}
    for table in ("Table 5.1", "Table 5.3", "Table 5.5", "Table 5.6"):
        assert any(r["setting"].startswith(table) for r in rows), table
    for r in rows:
        if r["thesis"] != "-":
            assert float(r["ratio"]) == pytest.approx(float(r["ours"]) / float(r["thesis"]), rel=2e-3)

"""Lina's estimation study (optsched/experiments/lina_estimation.py, thesis Sec. 4.7.3): accuracy and phase
two on routers with a known answer (deterministic paths, a hand-traced profile), the time calibration of
Table 4.1, and the partition sweep of Fig. 4.15."""

from __future__ import annotations

import numpy as np
import pytest

from optsched.core.errors import ValidationError
from optsched.experiments.lina_estimation import SchedulerCosts, estimation_study, partition_sweep
from optsched.perf.moe_layer_time import MoELayerTime
from optsched.perf.moe_routing import RoutingTrace, TypedRouter
from optsched.rounds.moe_comm import fig47_round


def _trace(paths: list[tuple[tuple[int, ...], int]], batch: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rows = [p for p, n in paths for _ in range(n)]
    return np.array(rows, dtype=np.int64), np.full(len(rows), batch, dtype=np.int64)


#: hand-traced (expert at layers 0, 1, 2; tokens): types A (0,0,1), B (1,0,2), C (2,2,0)
PROFILE = _trace([((0, 0, 1), 3), ((1, 0, 2), 1), ((2, 2, 0), 2)])
TEST = _trace([((0, 0, 1), 1), ((1, 0, 2), 3), ((2, 2, 0), 1)])


@pytest.mark.parametrize("length,same_set,same_order", [
    # l = 1. Layer 1 from layer 0: each layer-0 expert has one profiled next expert, estimate [4, 0, 1] / 5 =
    # actual. Layer 2 from layer 1: path (0) -> {1: 3/4, 2: 1/4}, (2) -> {0: 1}; k = 1 keeps 3/4 on expert 1
    # for the 4 tokens at expert 0 and 1 on expert 0 for C: [1, 3, 0] / 5, top-2 (1, 0); actual [1, 1, 3] / 5,
    # top-2 (2, 0): neither the set nor the order agrees.
    (1, [[True, False]], [[True, False]]),
    # l = 2: the two-layer path names the type, the estimate is the actual popularity.
    (2, [[True]], [[True]]),
])
def test_estimation_on_a_hand_traced_profile(length: int, same_set: list[list[bool]],
                                             same_order: list[list[bool]]) -> None:
    profile, test = RoutingTrace(*PROFILE, 3), RoutingTrace(*TEST, 3)
    study = estimation_study(profile, test, path_length=length)
    assert study.first_layer == length
    assert study.same_set.tolist() == same_set and study.same_order.tolist() == same_order
    assert study.phase_two_share == pytest.approx(1.0 - np.mean(same_set))


def test_deterministic_paths_are_estimated_exactly_and_phase_two_only_checks() -> None:
    """fidelity 1, one type per expert: a token's expert at any layer names its type, so the estimate of
    every layer is the batch's actual popularity: accuracy 1 under both rules, no phase two, and Lina's
    time is phase one's plus the 1.45 ms check at each estimated layer."""
    E, L = 6, 5
    rng = np.random.default_rng(0)
    preferred = np.stack([rng.permutation(E) for _ in range(L)])
    router = TypedRouter(np.arange(1, E + 1, dtype=float), preferred, E, fidelity=1.0, second=0.0,
                         concentration=0.5)
    profile, test = router.sample(4, 300, seed=1), router.sample(6, 300, seed=2)
    costs = SchedulerCosts()
    study = estimation_study(profile, test, path_length=2, costs=costs)
    assert study.accuracy("set") == study.accuracy("ordered") == 1.0 and study.phase_two_share == 0.0
    assert np.allclose(study.times["lina"] - study.times["no-fine-tuning"], costs.check_ms * (L - 2))
    assert np.all(study.times["ideal"] <= study.times["baseline"] + 1e-9)


def test_the_time_scale_is_table_4_1s_all_to_all() -> None:
    """The baseline's all-to-alls average 102/12 ms a layer and are 32.5% of its inference time (Table 4.1);
    no scheme beats Ideal's MoE time, and without estimation every layer pays the 6.2 ms scheduling."""
    router = TypedRouter.create(8, 6, seed=0)
    study = estimation_study(router.sample(8, 512, seed=1), router.sample(6, 512, seed=2), path_length=2)
    assert np.mean(study.times["baseline"]) * 0.325 == pytest.approx(102.0 / 12 * 6)
    moe = {s: t - study.other_ms for s, t in study.times.items()}
    assert all(np.all(moe["ideal"] <= moe[s] + 1e-9) for s in moe)
    assert np.all(moe["no-estimation"] >= moe["ideal"] + 6 * 6.2 - 1e-9)


def test_layer_time_parts_by_hand() -> None:
    t = MoELayerTime()
    a2a = 2 * 100 * 1024 * 2 / 12.5e6  # the busiest device's 100 tokens of 1,024 fp16 values, both ways
    ffn = 100 * 16 * 1024 ** 2 / (312e12 * 0.4) * 1e3
    assert t.all_to_all_ms([100, 50]) == pytest.approx(a2a)
    assert t.ms([100, 50]) == pytest.approx(0.2 + a2a + ffn)


def test_partition_sweep_on_the_fig_4_7_pass() -> None:
    """Fig. 4.15's text: "a partition size beyond 50MB slows down ... compared with 30 MB"."""
    ratios = partition_sweep([fig47_round()], (30.0, 100.0, 200.0))
    assert ratios[30.0] == 1.0 and ratios[100.0] > 1.0 and ratios[200.0] > 1.0


def test_bad_study_input() -> None:
    profile, test = RoutingTrace(*PROFILE, 3), RoutingTrace(*TEST, 3)
    with pytest.raises(ValidationError, match="rule must be one of set, ordered"):
        estimation_study(profile, test, path_length=1, rule="list")
    with pytest.raises(ValidationError, match="must come from one model"):
        estimation_study(profile, RoutingTrace(*TEST, 4), path_length=1)
    with pytest.raises(ValidationError, match="path length 3 leaves no layer"):
        estimation_study(profile, test, path_length=3)
    with pytest.raises(ValidationError, match="policy must be one of"):
        partition_sweep([fig47_round()], policy="best")


def test_the_thesis_benchmark_writes_the_estimation_table(tmp_path, monkeypatch) -> None:
    """``python benchmarks/moe.py --thesis --out DIR`` (tiny: 1 seed, 3 test batches): DIR/moe_thesis.csv has the
    issue's columns, the ``estimation`` table, a ``phase`` row, and ratio = ours / thesis."""
    import csv
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import moe  # noqa: PLC0415  (benchmarks/moe.py)

    monkeypatch.setattr(moe, "THESIS_TABLES", [moe.thesis_estimation])  # the other tables have their own tests
    assert moe.main(["--thesis", "--seeds", "1", "--thesis-batches", "3", "--out", str(tmp_path)]) == 0
    with open(tmp_path / "moe_thesis.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == ["table", "setting", "thesis", "ours", "ratio"]
    assert "estimation" in {r["table"] for r in rows}
    phase = [r for r in rows if "phase" in r["setting"]]
    assert phase and all(float(r["thesis"]) > 0 for r in phase)
    for r in rows:
        if r["thesis"] != "-":
            assert float(r["ratio"]) == pytest.approx(float(r["ours"]) / float(r["thesis"]), rel=2e-3)
        else:
            assert r["ratio"] == "-"

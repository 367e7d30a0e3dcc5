"""Full exploration and Cell-guided tuning (Crius Sec. 5.2, Fig. 11)."""

from __future__ import annotations

import math

import pytest

from optsched.core import get_cluster
from optsched.perf.crius.cell_estimator import CellEstimator, all_splits
from optsched.perf.crius.models import crius_model
from optsched.perf.crius.tuning import cell_guided_tuning, full_exploration, half_space


def test_half_spaces() -> None:
    assert all_splits(8) == ((8, 1), (4, 2), (2, 4), (1, 8))
    assert half_space(8, (8, 1)) == ((8, 1), (4, 2))
    assert half_space(8, (1, 8)) == ((2, 4), (1, 8))
    assert half_space(4, (4, 1)) == ((4, 1), (2, 2)) and half_space(4, (1, 4)) == ((2, 2), (1, 4))
    assert half_space(2, (1, 2)) == ((1, 2),) and half_space(1, (1, 1)) == ((1, 1),)
    assert half_space(16, (16, 1)) == ((16, 1), (8, 2), (4, 4))


@pytest.mark.parametrize("model, gtype, gpus, stages", [
    ("bert-2.6b", "A100-40G", 16, 2), ("wresnet-4b", "V100-32G", 32, 4), ("moe-10b", "A40", 16, 8),
    ("bert-0.76b", "A10", 8, 1)])
def test_tuning_sits_between_the_estimate_and_the_optimum(model: str, gtype: str, gpus: int, stages: int) -> None:
    est = CellEstimator(get_cluster("crius-sim-1280"))
    cell = est.cell(crius_model(model), gtype, gpus, stages)
    e = est.estimate(cell)
    full = full_exploration(est, cell)
    tuned = cell_guided_tuning(est, cell, e)
    assert full.iteration_time_s <= tuned.iteration_time_s + 1e-12
    assert tuned.iteration_time_s <= e.iteration_time_s + 1e-12
    assert full.plans_evaluated == math.prod(len(all_splits(g)) for g in e.partition.gpus)
    assert tuned.plans_evaluated == math.prod(len(half_space(g, f)) for g, f in zip(e.partition.gpus, e.plan.splits))
    assert tuned.plans_evaluated <= full.plans_evaluated


def test_a_cell_without_assembled_plan_is_tuned_over_the_full_space() -> None:
    est = CellEstimator(get_cluster("crius-sim-1280"))
    cell = est.cell(crius_model("moe-27b"), "A10", 4, 1)
    assert not est.estimate(cell).feasible
    assert cell_guided_tuning(est, cell).plans_evaluated == full_exploration(est, cell).plans_evaluated

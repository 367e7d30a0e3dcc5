"""The measured-neighbour ground truth (optsched.sim.neighbour_truth, rules N0-N4): measurements returned as
measured, hand-computed unmeasured answers at every neighbour level, the interpolation's pessimism and
monotonicity, independence of the analytical model's times, feasibility, the spec. Tiny hand-written tables
in tmp_path; one test reads the shared measurements (skipped when ``../shared/data`` is absent)."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest

from optsched.core.catalog import get_cluster
from optsched.core.errors import PlanInfeasibleError, ValidationError
from optsched.core.plan import ExecutionPlan, ZeroMode
from optsched.perf.plans import enumerate_plans
from optsched.sim.ground_truth import AnalyticalGroundTruth, Coverage, MeasuredGroundTruth, parse_ground_truth_spec
from optsched.sim.truth_spec import ground_truth_from_spec
from optsched.sim.neighbour_truth import NeighbourGroundTruth, interpolate

CLUSTER = get_cluster("a800-8x8")
HEADER = "exec_plan,placement,iter_time,forward,overlap_sync,optimize\n"
# bert, global batch 32: "ga" on 2 GPUs is dp=2, a=2; DP codes are dp = #GPUs
TABLE = (HEADER + "ga,11,0.50,0,0,0\n"
                  "ga,2,0.40,0,0,0\n"
                  "gc,4,0.31,0,0,0\n"
                  "zero-offload,1,2.0,0,0,0\n"
                  "zero-dp,2,0.45,0,0,0\n"
                  "zero-dp,44,0.30,0,0,0\n"
                  "zero-dp,71,0.36,0,0,0\n")
MEASURED = {(ExecutionPlan(dp=2, ga_steps=2), (1, 1)): 0.50, (ExecutionPlan(dp=2, ga_steps=2), (2,)): 0.40,
            (ExecutionPlan(dp=4, gc=True), (4,)): 0.31, (ExecutionPlan(dp=1, zero=ZeroMode.OFFLOAD), (1,)): 2.0,
            (ExecutionPlan(dp=2, zero=ZeroMode.DP), (2,)): 0.45, (ExecutionPlan(dp=8, zero=ZeroMode.DP), (4, 4)): 0.30,
            (ExecutionPlan(dp=8, zero=ZeroMode.DP), (7, 1)): 0.36}


def table_dir(tmp_path: Path) -> Path:
    (tmp_path / "bert.csv").write_text(TABLE, encoding="utf-8")
    return tmp_path


@pytest.fixture
def truth(tmp_path: Path) -> NeighbourGroundTruth:
    return NeighbourGroundTruth.from_directory(table_dir(tmp_path), CLUSTER)


def test_measured_configurations_return_the_measurements(truth: NeighbourGroundTruth) -> None:
    for (plan, gpn), t in MEASURED.items():
        assert truth.iteration_time("bert", "A800", plan, gpn, 8.0) == t
        assert truth.source("bert", "A800", plan, gpn, 8.0) == "measured"
        assert truth.is_measured("bert", plan, gpn)
    assert truth.coverage() == Coverage(measured=len(MEASURED))


def test_hand_computed_unmeasured_configurations(truth: NeighbourGroundTruth) -> None:
    # plan level: zero-dp dp=8 was measured on (4,4) at 0.30 and (7,1) at 0.36; on one node the slowest, 0.36
    assert truth.iteration_time("bert", "A800", ExecutionPlan(dp=8, zero=ZeroMode.DP), (8,), 8.0) == 0.36
    assert truth.source("bert", "A800", ExecutionPlan(dp=8, zero=ZeroMode.DP), (8,), 8.0) == "neighbour-plan"
    # shape level, between the measured counts 2 (0.45) and 8 (slowest 0.36): the power law at 4 GPUs,
    # 0.45 * (0.36 / 0.45) ** (log 2 / log 4) = sqrt(0.45 * 0.36)
    z4 = ExecutionPlan(dp=4, zero=ZeroMode.DP)
    assert truth.iteration_time("bert", "A800", z4, (4,), 8.0) == pytest.approx(math.sqrt(0.45 * 0.36), rel=1e-12)
    assert truth.source("bert", "A800", z4, (2, 2), 8.0) == "neighbour-shape"
    # shape level below the smallest count: 0.45 * 2 / 1 (linear loss)
    assert truth.iteration_time("bert", "A800", ExecutionPlan(dp=1, zero=ZeroMode.DP), (1,), 8.0) == pytest.approx(0.90)
    # shape level above the largest count: no gain, the slowest at 8
    assert truth.iteration_time("bert", "A800", ExecutionPlan(dp=16, zero=ZeroMode.DP), (8, 8), 8.0) == 0.36
    # shape level: ga with a = 4 on 2 GPUs shares the shape of the measured ga a = 2 (slowest 0.50)
    assert truth.iteration_time("bert", "A800", ExecutionPlan(dp=2, ga_steps=4), (2,), 8.0) == 0.50
    # model level: plain DP has no measured plan of its family; the slowest of all at 4 GPUs is gc's 0.31,
    # at 2 GPUs max(0.50, 0.40, 0.45) = 0.50; at 16 GPUs no gain beyond 8 (slowest 0.36)
    assert truth.iteration_time("bert", "A800", ExecutionPlan(dp=4), (4,), 8.0) == 0.31
    assert truth.iteration_time("bert", "A800", ExecutionPlan(dp=2), (1, 1), 8.0) == 0.50
    assert truth.source("bert", "A800", ExecutionPlan(dp=16), (8, 8), 8.0) == "neighbour-model"
    assert truth.iteration_time("bert", "A800", ExecutionPlan(dp=16), (8, 8), 8.0) == 0.36
    assert truth.sources()["neighbour-model"] == 3
    assert truth.coverage().interpolated == 8


def test_interpolation_by_hand() -> None:
    curve = {2: 1.0, 8: 0.25}
    assert interpolate(curve, 2) == 1.0
    assert interpolate(curve, 4) == pytest.approx(0.5)  # the power law through (2, 1.0) and (8, 0.25)
    assert interpolate(curve, 16) == 0.25  # no gain beyond 8
    assert interpolate(curve, 1) == 2.0  # linear loss below 2
    with pytest.raises(ValidationError, match="no measured GPU count"):
        interpolate({}, 4)


def test_interpolation_properties() -> None:
    """On random decreasing curves: the interpolation is non-increasing in the GPU count, stays between the
    bracketing measured values, never beats the largest count's time and loses at least linearly below the
    smallest."""
    rng = random.Random(7)
    for _ in range(200):
        counts = sorted(rng.sample([1, 2, 4, 8, 16, 32, 64], rng.randint(1, 4)))
        times = sorted((rng.uniform(0.1, 5.0) for _ in counts), reverse=True)
        curve = dict(zip(counts, times))
        values = [interpolate(curve, g) for g in range(1, 65)]
        assert all(a >= b - 1e-12 for a, b in zip(values, values[1:]))
        assert all(v >= curve[counts[-1]] - 1e-12 for v in values)
        for g in range(1, counts[0]):
            assert values[g - 1] == pytest.approx(curve[counts[0]] * counts[0] / g)
        for lo, hi in zip(counts, counts[1:]):
            for g in range(lo, hi + 1):
                assert curve[hi] - 1e-12 <= values[g - 1] <= curve[lo] + 1e-12


class Warped:
    """An analytical source whose times are distorted unevenly (x (1 + GPUs)): a different policy model."""

    name = "warped"

    def __init__(self) -> None:
        self.inner = AnalyticalGroundTruth(CLUSTER)

    def iteration_time(self, model, gpu_type, plan, gpn, cpus):  # type: ignore[no-untyped-def]
        return self.inner.iteration_time(model, gpu_type, plan, gpn, cpus) * (1 + plan.num_gpus)

    def describe(self) -> str:
        return "warped"


def test_unmeasured_times_do_not_depend_on_the_analytical_model(tmp_path: Path) -> None:
    """Every feasible bert plan on a few placements: the neighbour answers are the same whatever the
    analytical source's times, where the calibrated rule M3 of MeasuredGroundTruth moves with them."""
    d = table_dir(tmp_path)
    rows = MeasuredGroundTruth.from_directory(d, CLUSTER)
    plain = NeighbourGroundTruth(rows)
    warped = NeighbourGroundTruth(MeasuredGroundTruth(CLUSTER, _rows(d), fallback=Warped()))
    calibrated_plain = rows
    calibrated_warped = MeasuredGroundTruth(CLUSTER, _rows(d), fallback=Warped())
    moved = 0
    checked = 0
    for gpn in ((1,), (2,), (4,), (2, 2), (8,), (8, 8)):
        for plan in enumerate_plans(_model("bert"), gpn, CLUSTER.gpu_type("A800")):
            try:
                a = plain.iteration_time("bert", "A800", plan, gpn, 8.0)
            except PlanInfeasibleError:
                with pytest.raises(PlanInfeasibleError):
                    warped.iteration_time("bert", "A800", plan, gpn, 8.0)
                continue
            assert warped.iteration_time("bert", "A800", plan, gpn, 8.0) == a
            checked += 1
            if calibrated_plain.iteration_time("bert", "A800", plan, gpn, 8.0) != pytest.approx(
                    calibrated_warped.iteration_time("bert", "A800", plan, gpn, 8.0)):
                moved += 1
    assert checked > 20 and moved > 10


def _model(name: str):  # type: ignore[no-untyped-def]
    from optsched.core.catalog import get_model
    return get_model(name)


def _rows(d: Path):  # type: ignore[no-untyped-def]
    from optsched.perf.measurements import read_placements_csv
    return {"bert": read_placements_csv(d / "bert.csv", _model("bert"))}


def test_infeasible_unmeasured_models_and_cpus(truth: NeighbourGroundTruth) -> None:
    analytical = AnalyticalGroundTruth(CLUSTER)
    with pytest.raises(PlanInfeasibleError, match="bert"):  # 32 is not divisible by dp = 3
        truth.iteration_time("bert", "A800", ExecutionPlan(dp=3), (3,), 8.0)
    # a model without a table: the analytical source (rule N0)
    gpt2 = ExecutionPlan(dp=4, zero=ZeroMode.DP)
    assert truth.iteration_time("gpt2", "A800", gpt2, (4,), 8.0) == analytical.iteration_time("gpt2", "A800", gpt2,
                                                                                              (4,), 8.0)
    assert truth.source("gpt2", "A800", gpt2, (4,), 8.0) == "analytical"
    # ZeRO-Offload on 2 GPUs at 4 CPUs per GPU: the shape's 2.0 s at 1 GPU (no gain beyond it) times Eq. 1's
    # CPU factor analytical(4) / analytical(8)
    off2 = ExecutionPlan(dp=2, zero=ZeroMode.OFFLOAD)
    factor = (analytical.iteration_time("bert", "A800", off2, (2,), 4.0)
              / analytical.iteration_time("bert", "A800", off2, (2,), 8.0))
    assert factor > 1
    assert truth.iteration_time("bert", "A800", off2, (2,), 4.0) == pytest.approx(2.0 * factor)
    assert truth.iteration_time("bert", "A800", off2, (2,), 8.0) == 2.0


def test_spec(tmp_path: Path) -> None:
    d = table_dir(tmp_path)
    assert parse_ground_truth_spec(f"neighbours:{d}") == ("neighbours", str(d))
    gt = ground_truth_from_spec(f"neighbours:{d}", CLUSTER)
    assert isinstance(gt, NeighbourGroundTruth) and gt.models == ("bert",)
    assert "measured-neighbour interpolation" in gt.describe() and "slowest measured placement" in gt.describe()
    with pytest.raises(ValidationError, match="'neighbours:DIR'"):
        parse_ground_truth_spec("neighbours")
    with pytest.raises(ValidationError, match="MeasuredGroundTruth"):
        NeighbourGroundTruth(AnalyticalGroundTruth(CLUSTER))  # type: ignore[arg-type]


def test_shared_tables_answered_from_measurements(shared_data: Path) -> None:
    """On the shared tables every measured row gives its (median-merged) measurement, and no unmeasured
    configuration of a measured model on A800 falls back to the analytical model."""
    gt = NeighbourGroundTruth.from_directory(shared_data / "morphling" / "placements", CLUSTER)
    for model in gt.models:
        for (plan, gpn), t in gt.measured(model).items():
            assert gt.iteration_time(model, "A800", plan, gpn, 8.0) == t
        for plan in enumerate_plans(_model(model), (8,), CLUSTER.gpu_type("A800")):
            try:
                assert gt.source(model, "A800", plan, (8,), 8.0) != "analytical"
            except PlanInfeasibleError:
                pass

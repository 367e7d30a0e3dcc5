"""Ground-truth sources of the simulator (optsched.sim.ground_truth): analytical Eq. 1 with its own
parameters, measured tables with the documented extrapolation rule (M1-M3), memoisation, coverage and
every error. Small CSV/JSON files are hand-written into tmp_path; one test reads the shared measurements
(skipped when ``../shared/data`` is absent)."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path

import pytest

from optsched.core.catalog import GPU_TYPES, get_cluster, get_model
from optsched.core.errors import PlanInfeasibleError, UnknownNameError, ValidationError
from optsched.core.hardware import Cluster, Node
from optsched.core.plan import ExecutionPlan, ZeroMode
from optsched.core.pool import packed_placement
from optsched.perf.defaults import default_performance_model
from optsched.perf.iteration_time import Bandwidths
from optsched.perf.measurements import read_placements_csv
from optsched.perf.performance_model import PerformanceModel
from optsched.perf.plans import enumerate_plans
from optsched.sim.ground_truth import (AnalyticalGroundTruth, Coverage, GroundTruth, MeasuredGroundTruth, Source,
                                       read_params_json)

from helpers import fixed_perf

CLUSTER = get_cluster("a800-8x8")
MIXED = Cluster("mixed", (Node("a0", "A800", 8, 96, 1600.0), Node("b0", "A40", 8, 96, 1600.0)),
                (GPU_TYPES["A800"], GPU_TYPES["A40"]), intra_node_gbps=150.0, inter_node_gbps=80.0, pcie_gbps=20.0)
HEADER = "exec_plan,placement,iter_time,forward,overlap_sync,optimize\n"

# bert (global batch 32): parse_plan_code turns "ga" into a = 2 and every DP code into dp = #GPUs
GA2_11 = (ExecutionPlan(dp=2, ga_steps=2), (1, 1))
GA2_2 = (ExecutionPlan(dp=2, ga_steps=2), (2,))
GC_4 = (ExecutionPlan(dp=4, gc=True), (4,))
OFF_1 = (ExecutionPlan(dp=1, zero=ZeroMode.OFFLOAD), (1,))
ZDP_2 = (ExecutionPlan(dp=2, zero=ZeroMode.DP), (2,))
ZDP_31 = (ExecutionPlan(dp=4, zero=ZeroMode.DP), (3, 1))
#: the configurations of the tiny table and their (median-merged) measured times
TINY = {GA2_11: 0.50, GA2_2: 0.40, GC_4: 0.31, OFF_1: 2.0, ZDP_2: 0.45, ZDP_31: 0.70}
TINY_CSV = (HEADER + "ga,11,0.50,0,0,0\n"
                     "ga,2,0.40,0,0,0\n"
                     "gc,4,0.30,0,0,0\n"
                     "gc,4,0.36,0,0,0\n"
                     "gc,4,0.31,0,0,0\n"
                     "zero-offload,1,2.0,0,0,0\n"
                     "zero-dp,2,0.45,0,0,0\n"
                     "zero-dp,13,0.70,0,0,0\n")


def tiny_dir(tmp_path: Path, text: str = TINY_CSV, name: str = "bert.csv") -> Path:
    (tmp_path / name).write_text(text, encoding="utf-8")
    return tmp_path


def default(model: str, plan: ExecutionPlan, gpn: tuple[int, ...], cpus: float = 8.0, gpu: str = "A800",
            cluster: Cluster = CLUSTER) -> float:
    return default_performance_model(model, cluster, gpu).iteration_time(plan, gpn, cpus)


class Spy:
    """A fallback that records every call it answers."""

    name = "spy"

    def __init__(self, inner: GroundTruth) -> None:
        self.inner = inner
        self.calls: list[tuple] = []

    def iteration_time(self, *args):  # type: ignore[no-untyped-def]
        self.calls.append(args)
        return self.inner.iteration_time(*args)

    def describe(self) -> str:
        return "spy"


# -- analytical -----------------------------------------------------------------------------------
@pytest.mark.parametrize("model,plan,gpn,cpus", [
    ("bert", ExecutionPlan(dp=4, ga_steps=2), (2, 2), 8.0),
    ("t5", ExecutionPlan(dp=2, tp=2, pp=2), (8,), 8.0),
    ("llama7", ExecutionPlan(dp=8, zero=ZeroMode.OFFLOAD, gc=True), (8,), 12.0),
    ("vit", ExecutionPlan(dp=8, zero=ZeroMode.DP), (4, 4), 4.0),
    ("gpt2", ExecutionPlan(dp=16, gc=True), (8, 8), 8.0),
])
def test_analytical_equals_the_default_performance_model(model, plan, gpn, cpus):
    gt = AnalyticalGroundTruth(CLUSTER)
    assert gt.iteration_time(model, "A800", plan, gpn, cpus) == default(model, plan, gpn, cpus)
    assert isinstance(gt, GroundTruth) and gt.name == "analytical"


def test_analytical_on_another_gpu_type_uses_that_types_default():
    gt = AnalyticalGroundTruth(MIXED)
    plan, gpn = ExecutionPlan(dp=4, ga_steps=2), (4,)
    a40 = gt.iteration_time("bert", "A40", plan, gpn, 8)
    assert a40 == default("bert", plan, gpn, gpu="A40", cluster=MIXED)
    assert a40 > gt.iteration_time("bert", "A800", plan, gpn, 8)  # slower card, slower iteration


def test_analytical_uses_given_models_by_name_and_by_pair():
    slow = default_performance_model("bert", MIXED, "A800")
    slow = slow.with_params(slow.params.replace(k_const=0.5))
    pair = default_performance_model("gpt2", MIXED, "A40")
    pair = pair.with_params(pair.params.replace(k_const=1.0))
    gt = AnalyticalGroundTruth(MIXED, {"bert": slow, ("gpt2", "A40"): pair})
    plan, gpn = ExecutionPlan(dp=2, ga_steps=2), (2,)
    assert gt.iteration_time("bert", "A800", plan, gpn, 8) == slow.iteration_time(plan, gpn, 8)
    dp8 = ExecutionPlan(dp=8)
    assert gt.iteration_time("gpt2", "A40", ExecutionPlan(dp=8, gc=True), (8,), 8) == \
        pair.iteration_time(ExecutionPlan(dp=8, gc=True), (8,), 8)
    assert gt.iteration_time("gpt2", "A800", dp8, (8,), 8) == default("gpt2", dp8, (8,), cluster=MIXED)
    # rule A1: a name-keyed A800 model is transferred to the A40 (forward time x peak ratio, A40 bandwidths)
    moved = PerformanceModel(slow.model, "A40", Bandwidths.of(MIXED, "A40"),
                             slow.params.replace(fwd_s=slow.params.fwd_s * 312.0 / 149.7), peak_tflops=149.7,
                             form=slow.form)
    assert gt.iteration_time("bert", "A40", plan, gpn, 8) == pytest.approx(moved.iteration_time(plan, gpn, 8), rel=1e-12)
    assert "bert" in gt.describe() and "gpt2@A40" in gt.describe()


def test_analytical_rejects_mismatched_model_keys():
    pm = default_performance_model("bert")
    with pytest.raises(ValidationError, match="'gpt2'.*'bert'"):
        AnalyticalGroundTruth(CLUSTER, {"gpt2": pm})
    with pytest.raises(ValidationError, match="PerformanceModel"):
        AnalyticalGroundTruth(CLUSTER, {"bert": "fast"})  # type: ignore[dict-item]
    with pytest.raises(UnknownNameError, match="A40"):
        AnalyticalGroundTruth(CLUSTER, {("bert", "A40"): default_performance_model("bert", MIXED, "A40")})


def test_analytical_memoises_and_normalises_the_placement(monkeypatch):
    calls = []
    original = PerformanceModel.iteration_time

    def counting(self, plan, gpn, cpus):  # type: ignore[no-untyped-def]
        calls.append((plan, tuple(gpn), cpus))
        return original(self, plan, gpn, cpus)

    monkeypatch.setattr(PerformanceModel, "iteration_time", counting)
    gt = AnalyticalGroundTruth(CLUSTER)
    plan = ExecutionPlan(dp=8, zero=ZeroMode.DP)
    first = gt.iteration_time("roberta", "A800", plan, (6, 2), 8)
    for _ in range(5):
        assert gt.iteration_time("roberta", "A800", plan, (6, 2), 8.0) == first
    assert gt.iteration_time("roberta", "A800", plan, (2, 6), 8) == first  # sorted largest first (A3)
    assert gt.iteration_time("roberta", "A800", plan, [6, 2], 8) == first  # unhashable list is accepted
    assert calls == [(plan, (6, 2), 8.0)]
    assert gt.coverage() == Coverage(analytical=8)


@pytest.mark.parametrize("model,plan,gpn,cpus,rule", [
    ("llama7", ExecutionPlan(dp=1), (1,), 8, "GiB per GPU"),               # memory
    ("bert", ExecutionPlan(dp=3), (3,), 8, "not divisible"),               # batch 32 % 3
    ("bert", ExecutionPlan(dp=1, tp=4), (2, 2), 8, "smallest node"),       # topology
    ("bert", ExecutionPlan(dp=4), (2, 1), 8, "uses 4 GPUs"),               # GPU count
    ("bert", ExecutionPlan(dp=1, zero=ZeroMode.OFFLOAD), (1,), 0, "cpus_per_gpu > 0"),
])
def test_plan_that_cannot_run_raises_plan_infeasible(tmp_path, model, plan, gpn, cpus, rule):
    for gt in (AnalyticalGroundTruth(CLUSTER), MeasuredGroundTruth.from_directory(tiny_dir(tmp_path), CLUSTER)):
        for _ in range(2):  # the memoised "infeasible" answer raises again
            with pytest.raises(PlanInfeasibleError) as info:
                gt.iteration_time(model, "A800", plan, gpn, cpus)
            msg = str(info.value)
            assert repr(model) in msg and plan.label in msg and str(gpn) in msg and rule in msg


@pytest.mark.parametrize("make", [lambda d: AnalyticalGroundTruth(CLUSTER),
                                  lambda d: MeasuredGroundTruth.from_directory(d, CLUSTER)])
def test_unknown_model_and_gpu_type_are_named(tmp_path, make):
    gt = make(tiny_dir(tmp_path))
    with pytest.raises(UnknownNameError, match="'gpt5'.*bert"):
        gt.iteration_time("gpt5", "A800", ExecutionPlan(dp=1), (1,), 8)
    for model in ("bert", "gpt2"):  # with and without a measured table
        with pytest.raises(UnknownNameError, match="'H100'"):
            gt.iteration_time(model, "H100", ExecutionPlan(dp=2, ga_steps=2), (2,), 8)


def test_bad_requests_are_validation_errors():
    gt = AnalyticalGroundTruth(CLUSTER)
    with pytest.raises(ValidationError, match="ExecutionPlan"):
        gt.iteration_time("bert", "A800", "ga", (1,), 8)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="positive integer"):
        gt.iteration_time("bert", "A800", ExecutionPlan(dp=2), (2, 0), 8)
    with pytest.raises(ValidationError, match="cpus_per_gpu"):
        gt.iteration_time("bert", "A800", ExecutionPlan(dp=2), (2,), float("nan"))


# -- params JSON ------------------------------------------------------------------------------------
def test_from_params_json_reads_a_fit_file_and_a_mapping(tmp_path):
    bert = default_performance_model("bert")
    bert = bert.with_params(bert.params.replace(k_const=0.5, k_bwd=2.0))
    gpt2 = default_performance_model("gpt2")
    gpt2 = gpt2.with_params(gpt2.params.replace(k_const=0.9))
    fit_file = tmp_path / "bert.json"  # what `optsched fit --out` writes
    fit_file.write_text(json.dumps(bert.to_dict(), indent=2) + "\n")
    mapping = tmp_path / "truth.json"
    mapping.write_text(json.dumps({"gpt2": gpt2.to_dict()}))
    plan, gpn = ExecutionPlan(dp=8, gc=True), (8,)
    one = AnalyticalGroundTruth.from_params_json(fit_file, CLUSTER)
    assert one.iteration_time("bert", "A800", plan, gpn, 8) == bert.iteration_time(plan, gpn, 8)
    assert one.iteration_time("gpt2", "A800", plan, gpn, 8) == default("gpt2", plan, gpn)
    both = AnalyticalGroundTruth.from_params_json([fit_file, mapping], CLUSTER)
    assert both.iteration_time("bert", "A800", plan, gpn, 8) == bert.iteration_time(plan, gpn, 8)
    assert both.iteration_time("gpt2", "A800", plan, gpn, 8) == gpt2.iteration_time(plan, gpn, 8)
    assert str(mapping) in both.describe()
    assert set(read_params_json(mapping)) == {"gpt2"}


def test_malformed_params_json_gets_a_clear_error(tmp_path):
    bert = default_performance_model("bert").to_dict()

    def rejected(content: str, *expected: str) -> None:
        p = tmp_path / "p.json"
        p.write_text(content)
        with pytest.raises(ValidationError) as info:
            AnalyticalGroundTruth.from_params_json(p, CLUSTER)
        for e in (str(p),) + expected:
            assert e in str(info.value)

    rejected("{not json", "malformed JSON", "line 1")
    rejected("[1, 2]", "expected one fitted model")
    rejected("{}", "expected one fitted model")
    rejected(json.dumps({"gpt2": bert}), "entry 'gpt2'", "not of 'gpt2'")
    rejected(json.dumps({"bert": 3}), "entry 'bert'")
    rejected(json.dumps({"bert": {k: v for k, v in bert.items() if k != "params"}}), "entry 'bert'", "params")
    rejected(json.dumps({**bert, "format": "other/9"}), "unsupported format")
    rejected(json.dumps({**bert, "bandwidths": {**bert["bandwidths"], "intra_gbps": "fast"}}), "malformed")
    rejected(json.dumps({**bert, "params": {**bert["params"], "k_bwd": -1}}), "k_bwd")
    good = tmp_path / "good.json"
    good.write_text(json.dumps(bert))
    with pytest.raises(ValidationError, match="already given"):
        AnalyticalGroundTruth.from_params_json([good, good], CLUSTER)


# -- measured ---------------------------------------------------------------------------------------
def test_measured_returns_exact_rows_and_the_median_of_duplicates(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="optsched.sim.ground_truth"):
        gt = MeasuredGroundTruth.from_directory(tiny_dir(tmp_path), CLUSTER)
    for (plan, gpn), t in TINY.items():
        assert gt.iteration_time("bert", "A800", plan, gpn, 8) == t
        assert gt.is_measured("bert", plan, gpn) and gt.source("bert", "A800", plan, gpn, 8) is Source.MEASURED
    assert gt.iteration_time("bert", "A800", ZDP_31[0], (1, 3), 8) == 0.70  # placement order is irrelevant
    assert gt.is_measured("bert", ZDP_31[0], (1, 3))
    assert gt.measured("bert") == TINY
    assert gt.duplicates == [("bert", GC_4[0].label, (4,), (3, 4, 5))]
    assert "measured 3 times (rows 3, 4, 5" in caplog.text and "median 0.31" in caplog.text
    assert gt.describe().startswith(f"measured:{tmp_path} (1 model, 8 rows on A800")


def test_missing_plan_is_calibrated_by_its_family_then_by_the_model(tmp_path):
    gt = MeasuredGroundTruth.from_directory(tiny_dir(tmp_path), CLUSTER)
    # family "ga" has two measured configurations: F = sqrt(0.50/pred(ga,11) * 0.40/pred(ga,2))
    f_ga = math.sqrt(0.50 / default("bert", *GA2_11) * 0.40 / default("bert", *GA2_2))
    plan = ExecutionPlan(dp=4, ga_steps=2)
    assert not gt.is_measured("bert", plan, (4,))
    assert gt.iteration_time("bert", "A800", plan, (4,), 8) == pytest.approx(default("bert", plan, (4,)) * f_ga, rel=1e-12)
    assert gt.source("bert", "A800", plan, (4,), 8) is Source.CALIBRATED
    cal = gt.calibration("bert", "ga")
    assert (cal.basis, cal.n_configs) == ("family", 2) and cal.factor == pytest.approx(f_ga, rel=1e-12)
    # "3d" was never measured: geometric mean over all six configurations (the duplicate counts once)
    f_all = math.exp(sum(math.log(t / default("bert", p, g)) for (p, g), t in TINY.items()) / 6)
    tp2 = ExecutionPlan(dp=1, tp=2)
    assert gt.iteration_time("bert", "A800", tp2, (2,), 4) == pytest.approx(default("bert", tp2, (2,), 4) * f_all, rel=1e-12)
    assert gt.calibration("bert", "3d").basis == "model"
    assert f_all != pytest.approx(f_ga)  # the two rules give different answers here
    # a model without a file: the analytical value itself (factor 1)
    dp8 = ExecutionPlan(dp=8)
    assert gt.iteration_time("gpt2", "A800", dp8, (8,), 8) == default("gpt2", dp8, (8,))
    assert gt.calibration("gpt2", "3d").factor == 1.0 and gt.source("gpt2", "A800", dp8, (8,), 8) is Source.ANALYTICAL
    with pytest.raises(ValidationError, match="plan family"):
        gt.calibration("bert", "4d")


def test_calibration_is_computed_once_per_model_and_family(tmp_path):
    spy = Spy(AnalyticalGroundTruth(CLUSTER))
    gt = MeasuredGroundTruth.from_directory(tiny_dir(tmp_path), CLUSTER, fallback=spy)
    assert spy.calls == []
    gt.iteration_time("bert", "A800", ExecutionPlan(dp=4, ga_steps=2), (4,), 8)
    assert len(spy.calls) == 1 + len(TINY)  # the request + one prediction per measured configuration
    first = gt.calibration("bert", "ga")
    gt.iteration_time("bert", "A800", ExecutionPlan(dp=8, ga_steps=2), (8,), 8)  # same family: no new ratios
    gt.iteration_time("bert", "A800", ExecutionPlan(dp=8, gc=True), (8,), 8)  # other family: ratios reused
    gt.iteration_time("bert", "A800", ExecutionPlan(dp=4, ga_steps=2), (4,), 8)  # memoised: no call at all
    assert len(spy.calls) == 3 + len(TINY)
    assert gt.calibration("bert", "ga") is first
    assert "spy" in gt.describe()


def test_cpu_share_scales_an_offload_row_and_nothing_else(tmp_path):
    # a CPU-sensitive fallback with fixed parameters (the public rows all run 8 CPUs per GPU, so the
    # fitted defaults need not be CPU-sensitive)
    pm = fixed_perf("bert", CLUSTER)
    gt = MeasuredGroundTruth.from_directory(tiny_dir(tmp_path), CLUSTER,
                                            fallback=AnalyticalGroundTruth(CLUSTER, {"bert": pm}))
    plan, gpn = OFF_1
    ratio = pm.iteration_time(plan, gpn, 4) / pm.iteration_time(plan, gpn, 8)
    assert ratio > 1.01  # fewer CPU cores, slower CPU optimizer
    assert gt.iteration_time("bert", "A800", plan, gpn, 4) == pytest.approx(2.0 * ratio, rel=1e-12)
    assert gt.source("bert", "A800", plan, gpn, 4) is Source.CPU_SCALED
    assert gt.iteration_time("bert", "A800", plan, gpn, 8) == 2.0
    assert gt.iteration_time("bert", "A800", *GA2_11, 4) == 0.50  # CPUs do not act on a GA plan (Eq. 1)
    assert gt.source("bert", "A800", *GA2_11, 4) is Source.MEASURED


def test_other_gpu_type_uses_the_analytical_model_only(tmp_path):
    gt = MeasuredGroundTruth.from_directory(tiny_dir(tmp_path), MIXED)
    plan, gpn = GA2_2
    assert gt.iteration_time("bert", "A800", plan, gpn, 8) == 0.40
    assert gt.iteration_time("bert", "A40", plan, gpn, 8) == default("bert", plan, gpn, gpu="A40", cluster=MIXED)
    assert not gt.is_measured("bert", plan, gpn, gpu_type="A40")
    assert gt.source("bert", "A40", plan, gpn, 8) is Source.ANALYTICAL


def test_coverage_counts_every_call_by_source(tmp_path):
    gt = MeasuredGroundTruth.from_directory(tiny_dir(tmp_path), CLUSTER)
    gt.iteration_time("bert", "A800", *GA2_11, 8)
    gt.iteration_time("bert", "A800", *GA2_11, 8)
    gt.iteration_time("bert", "A800", *OFF_1, 6)
    for _ in range(3):
        gt.iteration_time("bert", "A800", ExecutionPlan(dp=8, gc=True), (8,), 8)
    gt.iteration_time("gpt2", "A800", ExecutionPlan(dp=8), (8,), 8)
    with pytest.raises(PlanInfeasibleError):
        gt.iteration_time("bert", "A800", ExecutionPlan(dp=3), (3,), 8)  # failures are not counted
    gt.source("bert", "A800", *GA2_2, 8)  # neither are source() queries
    cov = gt.coverage()
    assert cov == Coverage(measured=2, cpu_scaled=1, calibrated=3, analytical=1)
    assert (cov.total, cov.extrapolated, cov.measured_fraction) == (7, 4, pytest.approx(3 / 7))
    assert cov.to_dict()["calibrated"] == 3
    gt.reset_coverage()
    assert gt.coverage().total == 0


def test_malformed_csv_row_is_named_with_its_row_number(tmp_path):
    bad = HEADER + "ga,11,0.5,0,0,0\nga,2,abc,0,0,0\n"
    with pytest.raises(ValidationError, match=r"bert\.csv row 2: iter_time 'abc'"):
        MeasuredGroundTruth.from_directory(tiny_dir(tmp_path, bad), CLUSTER)
    bad = HEADER + "ga,11,0.5,0,0,0\nga,2,0.4,0,0,0\nxyz,4,0.3,0,0,0\n"
    with pytest.raises(ValidationError, match=r"bert\.csv row 3: unknown plan code 'xyz'"):
        MeasuredGroundTruth.from_directory(tiny_dir(tmp_path, bad), CLUSTER)


def test_directory_errors(tmp_path, caplog):
    with pytest.raises(ValidationError, match="directory"):
        MeasuredGroundTruth.from_directory(tmp_path / "absent", CLUSTER)
    with pytest.raises(ValidationError, match="no <model>.csv"):
        MeasuredGroundTruth.from_directory(tmp_path, CLUSTER)
    tiny_dir(tmp_path, HEADER + "ga,2,0.4,0,0,0\n", name="bert-large.csv")
    tiny_dir(tmp_path)
    with caplog.at_level(logging.WARNING, logger="optsched.sim.ground_truth"):
        gt = MeasuredGroundTruth.from_directory(tmp_path, CLUSTER)
    assert "ignoring bert-large.csv" in caplog.text and gt.models == ("bert",)


# -- the shared measurements ------------------------------------------------------------------------
def test_real_measurements_are_returned_exactly_and_extrapolation_is_finite(shared_data):
    directory = shared_data / "morphling" / "placements"
    if not directory.is_dir():
        pytest.skip(f"shared measurements not found at {directory} (read-only data, not in the repo)")
    gt = MeasuredGroundTruth.from_directory(directory, CLUSTER)
    assert gt.models == tuple(sorted(["vit", "roberta", "bert", "t5", "gpt2", "llama7", "llama30"]))
    a800 = CLUSTER.gpu_type("A800")
    n_rows = 0
    for model in gt.models:
        spec = get_model(model)
        for r in read_placements_csv(directory / f"{model}.csv", spec):
            assert gt.iteration_time(model, "A800", r.plan, r.gpus_per_node, 8) == r.iter_time, (model, r.row)
            n_rows += 1
        for g in (1, 2, 4, 8, 16):
            gpn = packed_placement(g, 8)
            for plan in enumerate_plans(spec, gpn, a800, (1600.0,) * len(gpn)):
                n_rows += gt.is_measured(model, plan, gpn)
                t = gt.iteration_time(model, "A800", plan, gpn, 8)
                assert math.isfinite(t) and t > 0, (model, plan.label, gpn, t)
    cov = gt.coverage()
    assert cov.measured == n_rows and cov.calibrated > 0 and cov.cpu_scaled == cov.analytical == 0

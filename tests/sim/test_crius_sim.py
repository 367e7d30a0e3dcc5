"""Crius jobs in the simulator: the ground truth with its own parameters, Philly-derived and synthetic
Crius traces, and end-to-end runs of the crius policies."""

from __future__ import annotations

import math

import pytest

from optsched.core import PlanInfeasibleError, UnknownNameError, ValidationError, get_cluster
from optsched.experiments.compare import run_policies
from optsched.perf.crius.cell_estimator import cell_plan, shared_estimator
from optsched.perf.crius.models import crius_model
from optsched.perf.crius.stages import is_power_of_two
from optsched.perf.crius.tuning import full_exploration
from optsched.sim.config import SimConfig
from optsched.sim.crius_truth import CriusGroundTruth
from optsched.sim.traces.crius import crius_philly_trace, crius_synthetic_trace, offered


@pytest.fixture(scope="module")
def cluster():
    return get_cluster("crius-testbed-64")


@pytest.fixture(scope="module")
def truth(cluster):
    return CriusGroundTruth(cluster)


def test_truth_is_the_cells_optimum_with_other_parameters(cluster, truth) -> None:
    t = truth.iteration_time("bert-1.3b@256", "A40", cell_plan(8, 2), (2, 2, 2, 2), 0.0)
    cell = truth.estimator.cell(crius_model("bert-1.3b@256"), "A40", 8, 2, (2, 2, 2, 2))
    assert t == full_exploration(truth.estimator, cell).iteration_time_s
    predicted = shared_estimator(cluster)
    p = predicted.estimate(predicted.cell(crius_model("bert-1.3b@256"), "A40", 8, 2))
    assert p.iteration_time_s != pytest.approx(t, rel=1e-3)  # prediction and truth are kept apart
    # memory agrees: a Cell the estimator lets run runs in truth
    for model in ("moe-10b@256", "wresnet-4b@512", "bert-6.7b@128"):
        for g in (4, 8, 16):
            for s in (1, 2, 4):
                e = predicted.estimate(predicted.cell(crius_model(model), "A10", g, s))
                if e.feasible:
                    assert math.isfinite(truth.iteration_time(model, "A10", cell_plan(g, s),
                                                              e.cell.gpus_per_node, 0.0))


def test_truth_errors(truth) -> None:
    with pytest.raises(PlanInfeasibleError, match="moe-27b.*fits the memory"):
        truth.iteration_time("moe-27b", "A10", cell_plan(1, 1), (1,), 0.0)
    with pytest.raises(UnknownNameError, match="Crius model 'gpt'"):
        truth.iteration_time("gpt", "A10", cell_plan(1, 1), (1,), 0.0)
    with pytest.raises(UnknownNameError, match="GPU type 'H100'"):
        truth.iteration_time("bert-1.3b", "H100", cell_plan(1, 1), (1,), 0.0)


def test_synthetic_trace(cluster, truth) -> None:
    a = crius_synthetic_trace(cluster, truth, num_jobs=25, seed=3, load=1.2)
    b = crius_synthetic_trace(cluster, truth, num_jobs=25, seed=3, load=1.2)
    assert a == b and len(a) == 25
    assert all(is_power_of_two(j.requested_gpus) and j.total_iterations >= 1 for j in a.jobs)
    assert all(j.requested_plan is None or j.requested_plan.num_gpus == j.requested_gpus for j in a.jobs)
    with pytest.raises(ValidationError, match="load"):
        crius_synthetic_trace(cluster, truth, num_jobs=5, load=0.0)


def test_philly_trace(shared_data, truth) -> None:
    c = get_cluster("crius-sim-1280")
    t = CriusGroundTruth(c)
    path = shared_data / "traces" / "philly" / "philly_busiest12h.csv"
    plain = crius_philly_trace(path, c, t, seed=0, max_jobs=40)
    scaled = crius_philly_trace(path, c, t, seed=0, max_jobs=40, load=2.0)
    assert [j.name for j in plain.jobs] == [j.name for j in scaled.jobs] and plain.jobs[0].name.startswith("philly-")
    from optsched.sim.traces.philly import philly_rows
    rows = philly_rows(path, max_jobs=40)
    assert offered(scaled.jobs, rows, c) == pytest.approx(2.0)


def test_policies_run_a_trace_to_the_end(cluster, truth) -> None:
    trace = crius_synthetic_trace(cluster, truth, num_jobs=30, seed=1, load=1.5)
    cfg = SimConfig(rounds_on_events=False)
    results = run_policies(cluster, trace.jobs, truth, ["crius", "exact", "fcfs", "gandiva", "gavel", "elasticflow"],
                           cfg, kind="crius", time_limit=5)
    for name, r in results.items():
        s = r.summary()
        assert s["unfinished"] == 0 and s["failed_rounds"] == 0, name
        assert not r.messages, (name, r.messages[:2])
        assert s["avg_throughput"] > 0


def test_trace_rows_draw_only_models_the_cluster_runs(cluster, truth) -> None:
    """crius-testbed-64 cannot run every model of Table 2 (e.g. moe-27b@512): a row drawing one draws
    again instead of failing the trace (seed 0 drew moe-27b@512 at row 9)."""
    from optsched.sim.traces.crius import crius_jobs
    from optsched.sim.traces.assign import RawJob
    rows = [RawJob(f"r{i:02d}", float(i), 600.0, 1) for i in range(12)]
    jobs = crius_jobs(rows, cluster, truth, seed=0)
    assert [j.name for j in jobs] == [r.name for r in rows]


@pytest.mark.parametrize("seed", [-1, 2 ** 31, 1.5])
def test_seeds_out_of_range_are_named(cluster, truth, seed) -> None:
    from optsched.rounds.crius import generate_crius_round
    with pytest.raises(ValidationError, match="seed"):
        generate_crius_round(3, seed=seed)
    with pytest.raises(ValidationError, match="crius_synthetic_trace: seed"):
        crius_synthetic_trace(cluster, truth, num_jobs=3, seed=seed)

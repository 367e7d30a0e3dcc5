"""Lyra traces and ground truth: jobs of the Basic scenario from Philly or synthetic rows; work and
speed in training-GPU-seconds, T4 workers twice the GPUs, sub-linear scaling."""

from __future__ import annotations

from pathlib import Path

import pytest

from optsched.core.errors import ValidationError
from optsched.core.job import Job
from optsched.core.plan import ExecutionPlan
from optsched.rounds.lyra.jobs import is_elastic
from optsched.sim.lyra_truth import LyraGroundTruth
from optsched.sim.traces.lyra import lyra_jobs, philly_rows, synthetic_rows


def test_lyra_jobs_follow_the_basic_scenario() -> None:
    jobs = lyra_jobs(synthetic_rows(2000, seed=1), seed=1)
    elastic = [j for j in jobs if is_elastic(j)]
    assert len(elastic) == 100 and all(j.fungible and j.max_gpus == 2 * j.min_gpus for j in elastic)
    share = sum(j.total_iterations for j in elastic) / sum(j.total_iterations for j in jobs)
    assert share > 0.2   # drawn by GPU time: far more than their 5% count
    inelastic = [j for j in jobs if not is_elastic(j)]
    assert 0.17 < sum(j.fungible for j in inelastic) / len(inelastic) < 0.25
    assert all(j.gpus_per_worker == (2 if j.requested_gpus % 2 == 0 else 1) for j in jobs)
    assert lyra_jobs(synthetic_rows(50, seed=1), seed=1) == lyra_jobs(synthetic_rows(50, seed=1), seed=1)
    with pytest.raises(ValidationError, match="fungible must lie in"):
        lyra_jobs(synthetic_rows(5), fungible=2.0)


def test_philly_rows(tmp_path: Path, shared_data: Path) -> None:
    path = shared_data / "traces" / "philly" / "philly_busiest12h.csv"
    if not path.exists():
        pytest.skip(f"{path} is not there")
    rows = philly_rows(path, max_jobs=100)
    assert len(rows) == 100 and rows[0][0] == 0.0 and all(a[0] <= b[0] for a, b in zip(rows, rows[1:]))
    bad = tmp_path / "bad.csv"
    bad.write_text("timestamp,duration,num_gpus\n2017-10-04 20:41:55,74.0,0\n")
    with pytest.raises(ValidationError, match="num_gpus is 0"):
        philly_rows(bad)


def test_ground_truth_speeds() -> None:
    truth = LyraGroundTruth(frozenset({"T4"}))
    job = Job("e", "bert", 4, 1000, min_gpus=4, max_gpus=12, gpus_per_worker=2, fungible=True)
    v100 = truth.job_iteration_time(job, "V100-32G", ExecutionPlan(dp=8), (8,), 0.0)
    t4 = truth.job_iteration_time(job, "T4", ExecutionPlan(dp=16), (8, 8), 0.0)
    assert v100 == pytest.approx(1 / 8) and t4 == pytest.approx(1 / 8)   # 4 workers either way
    sub = LyraGroundTruth(frozenset({"T4"}), scaling="sublinear")
    assert sub.job_iteration_time(job, "V100-32G", ExecutionPlan(dp=8), (8,), 0.0) == pytest.approx(1 / (2 * 3.6))


def test_the_lyra_simulation_says_how_many_trace_jobs_it_left_out_and_why(tmp_path, capsys) -> None:
    """Issue 26: ``simulate --kind lyra`` on the default 120-job synthetic trace runs 119 jobs; the trace line
    says that one was left out because it asks for more GPUs than the 2 training servers hold."""
    from optsched import cli
    from optsched.sim.lyra_setup import lyra_simulation
    sim = lyra_simulation(jobs=120)
    assert len(sim.jobs) == 119 and sim.dropped == 1 and sim.max_gpus == 16
    assert "1 of the trace's 120 jobs left out: they ask for more than the 16 GPUs" in sim.describe_dropped()
    assert lyra_simulation(jobs=120, training=4).describe_dropped() == ""
    assert cli.main(["simulate", "--kind", "lyra", "--jobs", "120", "--policy", "lyra", "--no-plots", "--no-progress",
                     "--out", str(tmp_path / "out")]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("trace "))
    assert "119 jobs" in line and "1 of the trace's 120 jobs left out" in line

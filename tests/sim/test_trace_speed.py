"""Simulation fidelity (issue 17): a trace's own durations as the jobs' true speed, the first-start
cost, the settings presets and the measured share."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from optsched.core import ExecutionPlan, Job, a800_cluster
from optsched.core.errors import UnknownNameError, ValidationError
from optsched.perf.measurements import Measurement
from optsched.sim.config import SimConfig
from optsched.sim.engine import simulate
from optsched.sim.ground_truth import MeasuredGroundTruth
from optsched.sim.presets import PRESETS, get_preset
from optsched.sim.trace_speed import requested_configuration, trace_speeds
from optsched.sim.traces import Trace, load_workload_csv
from optsched.sim.traces.trace import TraceDuration

from helpers import REPO_ROOT, InverseGPUs
from test_sim_engine import Scripted, fifo_request  # same folder (pytest puts it on the path)

ONE_NODE = a800_cluster(1, 8)
HEADER = "name,submission_time,duration,application,num_gpus,num_cpus,bandwidth,exec_plan,steps,is_sla\n"


def _trace(tmp_path: Path, *rows: str) -> Trace:
    path = tmp_path / "trace.csv"
    path.write_text(HEADER + "".join(r + "\n" for r in rows))
    return load_workload_csv(path, ONE_NODE)


# -- trace durations ---------------------------------------------------------------------------------
def test_workload_loader_keeps_each_rows_duration(tmp_path) -> None:
    trace = _trace(tmp_path, "a,0,1500,bert,4,32,0,ga,300,0", "b,10,0,bert,1,8,0,ga,1,0")
    assert trace.durations == (TraceDuration("a", 1500.0, 1), TraceDuration("b", 0.0, 2))


def test_a_job_runs_at_its_traces_speed_on_its_request_and_scales_elsewhere(tmp_path) -> None:
    # Ground truth 8 s / GPUs: 2 s per iteration on the requested 4 GPUs. The trace says 1500 s for
    # 300 steps, 5 s per iteration: factor 2.5.
    trace = _trace(tmp_path, "a,0,1500,bert,4,32,0,ga,300,0")
    speeds = trace_speeds(trace, InverseGPUs(), ONE_NODE)
    assert speeds.scales == {"a": pytest.approx(2.5)} and speeds.anchored == 1 and speeds.with_duration == 1
    anchored = simulate(ONE_NODE, trace.jobs, Scripted(fifo_request), InverseGPUs(), time_scale=speeds.scales)
    assert anchored.jobs[0].jct_s == pytest.approx(1500.0)  # 300 x 5 s: the trace's own duration
    ignored = simulate(ONE_NODE, trace.jobs, Scripted(fifo_request), InverseGPUs())
    assert ignored.jobs[0].jct_s == pytest.approx(600.0)  # 300 x 2 s: the ground truth alone
    # Grown to 8 GPUs at the 100 s round: 20 iterations done, 78 s reconfiguration, then the ground
    # truth's 1 s per iteration times 2.5: 280 x 2.5 = 700 s -> finished at 878 s.
    grow = Scripted(lambda p, j: 4 if p.time < 100 else 8)
    moved = simulate(ONE_NODE, trace.jobs, grow, InverseGPUs(), SimConfig(round_interval_s=100.0),
                     time_scale=speeds.scales)
    assert moved.jobs[0].finish_s == pytest.approx(878.0) and moved.jobs[0].reconfigurations == 1
    # normalised throughput stays relative to the request: 1.0 on 4 GPUs, 2.0 on 8
    assert max(s.throughput for s in moved.samples) == pytest.approx(2.0)


def test_implausible_rows_are_named_and_keep_the_ground_truth(tmp_path, caplog) -> None:
    # b: 0.01 s per iteration against 2 s (200x faster); c: 50 s against 2 s (25x slower);
    # d: duration 0; e: 10.5x faster is still out, f: 9.5x faster is in
    trace = _trace(tmp_path, "a,0,1500,bert,4,32,0,ga,300,0", "b,0,1,bert,4,32,0,ga,100,0",
                   "c,0,5000,bert,4,32,0,ga,100,0", "d,0,0,bert,4,32,0,ga,100,0",
                   "e,0,19.04,bert,4,32,0,ga,100,0", "f,0,21.06,bert,4,32,0,ga,100,0")
    with caplog.at_level(logging.WARNING, logger="optsched.sim.trace_speed"):
        speeds = trace_speeds(trace, InverseGPUs(), ONE_NODE)
    assert set(speeds.scales) == {"a", "f"} and speeds.zero_duration == 1
    assert [row for row, *_ in speeds.implausible] == [2, 3, 5]
    message = caplog.text
    assert "row 2 (b: 0.01 s/iteration, ground truth 2)" in message and "row 3 (c: 50" in message
    assert "row 5 (e:" in message and "row 6" not in message
    assert speeds.to_dict()["implausible_rows"] == [2, 3, 5]
    assert "2 of 6 jobs run at their trace's own speed" in speeds.describe()


def test_jobs_without_a_runnable_request_are_counted_not_anchored() -> None:
    job = Job("x", "bert", 4, 100, requested_plan=None)
    trace = Trace("t", (job,), durations=(TraceDuration("x", 10.0, 1),))
    speeds = trace_speeds(trace, InverseGPUs(), ONE_NODE)
    assert speeds.anchored == 0 and speeds.no_request == 1
    assert requested_configuration(job, ONE_NODE) is None


def test_trace_durations_must_name_jobs_once() -> None:
    job = Job("x", "bert", 1, 10, requested_plan=ExecutionPlan(dp=1))
    with pytest.raises(ValidationError, match="'y', which is not in the trace"):
        Trace("t", (job,), durations=(TraceDuration("y", 1.0, 1),))
    with pytest.raises(ValidationError, match="two durations"):
        Trace("t", (job,), durations=(TraceDuration("x", 1.0, 1), TraceDuration("x", 2.0, 2)))
    with pytest.raises(ValidationError, match="seconds must be >= 0"):
        TraceDuration("x", -1.0, 1)
    with pytest.raises(ValidationError, match="time_scale of job 'x' must be a positive"):
        simulate(ONE_NODE, [job], Scripted(fifo_request), InverseGPUs(), time_scale={"x": 0.0})


# -- first-start cost ----------------------------------------------------------------------------------
def _one_job() -> Job:
    return Job("a", "bert", 4, 300, requested_cpus=4, requested_plan=ExecutionPlan(dp=4), submit_time=50.0)


def test_first_start_cost_on_a_one_job_trace() -> None:
    # submitted and placed at 50 s, 260 s start, 300 iterations x 2 s: finished at 910 s, JCT 860 s
    r = simulate(ONE_NODE, [_one_job()], Scripted(fifo_request), InverseGPUs(), SimConfig(start_overhead_s=260.0))
    (rec,) = r.jobs
    assert rec.start_s == 50.0 and rec.finish_s == pytest.approx(910.0) and rec.jct_s == pytest.approx(860.0)
    assert rec.overhead_s == pytest.approx(260.0) and rec.queue_s == 0.0


def test_first_start_and_restart_costs_are_separate() -> None:
    # start at 50 with 100 s: progress from 150; preempted at the 300 s round after 75 iterations;
    # placed again at 600 s with the 63 s restart: 225 x 2 s from 663 -> 1113 s
    run_between = Scripted(lambda p, j: 0 if 300 <= p.time < 600 else 4)
    config = SimConfig(round_interval_s=300.0, start_overhead_s=100.0)
    (rec,) = simulate(ONE_NODE, [_one_job()], run_between, InverseGPUs(), config).jobs
    assert rec.preemptions == 1 and rec.finish_s == pytest.approx(1113.0)
    assert rec.overhead_s == pytest.approx(163.0)


# -- presets -------------------------------------------------------------------------------------------
def _documented_presets() -> dict[str, dict[str, object]]:
    """The preset table of docs/simulation.md, as SimConfig values."""
    text = (REPO_ROOT / "docs" / "simulation.md").read_text()
    rows = re.findall(r"^\| ((?:rubick|crius)-[a-z-]+|lyra-thesis) \| (\d+) \| (yes|no) \| (\d+) \| (\d+) \| (\d+) \|$",
                      text, re.M)
    return {name: {"round_interval_s": float(tick), "rounds_on_events": events == "yes",
                   "start_overhead_s": float(start), "reconfig_overhead_s": float(reconf),
                   "preempt_restart_s": float(restart)}
            for name, tick, events, start, reconf, restart in rows}


def test_presets_set_exactly_the_documented_values() -> None:
    documented = _documented_presets()
    assert set(documented) == set(PRESETS) == {"rubick-paper", "rubick-artifact", "crius-paper", "crius-paper-rate",
                                                    "lyra-thesis"}
    for name, values in documented.items():
        config = get_preset(name).config()
        assert {k: getattr(config, k) for k in values} == values, name
        settings = dict(get_preset(name).settings)
        assert {k: settings[k] for k in values} == values
        if name.startswith("rubick"):
            assert settings == values
    artifact = get_preset("rubick-artifact").config()
    assert (artifact.round_interval_s, artifact.rounds_on_events, artifact.start_overhead_s,
            artifact.reconfig_overhead_s, artifact.preempt_restart_s) == (60.0, False, 260.0, 260.0, 260.0)
    paper = get_preset("rubick-paper").config()
    assert paper == SimConfig()  # our defaults are the paper's settings
    assert get_preset("rubick-artifact").config(reconfig_overhead_s=10.0, round_interval_s=None).reconfig_overhead_s == 10.0
    with pytest.raises(UnknownNameError,
                       match="known simulation presets: crius-paper, crius-paper-rate, lyra-thesis, rubick-artifact, "
                             "rubick-paper"):
        get_preset("slurm")


def test_artifact_preset_runs_rounds_only_on_its_tick() -> None:
    # submitted at 50 s: waits for the 60 s tick, 260 s start, 600 s of work -> 920 s
    policy = Scripted(fifo_request)
    (rec,) = simulate(ONE_NODE, [_one_job()], policy, InverseGPUs(), get_preset("rubick-artifact").config()).jobs
    assert rec.start_s == 60.0 and rec.finish_s == pytest.approx(920.0)
    assert policy.calls[:2] == [60.0, 120.0]


# -- measured share ------------------------------------------------------------------------------------
def test_measured_share_is_the_job_time_on_measured_configurations() -> None:
    row = Measurement(1, "ga", "4", ExecutionPlan(dp=4), (4,), 0.5)
    truth = MeasuredGroundTruth(ONE_NODE, {"bert": [row]})
    assert truth.is_measured("bert", ExecutionPlan(dp=4), (4,))
    jobs = [Job("m", "bert", 4, 100, requested_cpus=32, requested_plan=ExecutionPlan(dp=4)),
            Job("u", "bert", 2, 100, requested_cpus=16, requested_plan=ExecutionPlan(dp=2))]
    r = simulate(ONE_NODE, jobs, Scripted(fifo_request), truth)
    m, u = r.jobs
    assert m.measured_s == pytest.approx(m.held_s) == pytest.approx(50.0)  # 100 x 0.5 s, all measured
    assert u.measured_s == 0.0 and u.held_s > 0
    assert r.summary()["measured_share"] == pytest.approx(50.0 / (50.0 + u.held_s), abs=1e-6)
    assert "measured_share" not in simulate(ONE_NODE, jobs, Scripted(fifo_request), InverseGPUs()).summary()

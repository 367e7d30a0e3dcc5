"""Why the Lyra simulation preempts (issue 25; docs/simulation.md, "Lyra in the thesis' setting"): the inference
usage series' 5-minute burst (thesis Sec. 3.7.1), elastic jobs on inference servers (Sec. 3.5.3) and preemptions
per inference server per day beside the preemption ratio."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest

from lyra_cases import lent_servers_reclaimed

from optsched.cli import main
from optsched.core.errors import ValidationError
from optsched.core.job import Job
from optsched.experiments.compare import summary_document
from optsched.policies import PolicyOptions, make_policy
from optsched.rounds.lyra.cluster import inference_name, two_pool_cluster
from optsched.rounds.lyra.jobs import is_elastic
from optsched.rounds.lyra_sim import LyraSimRound
from optsched.sim.loaning import BURST_TOLERANCE, median_burst, synthetic_usage
from optsched.sim.lyra_setup import lyra_simulation, preemptions_per_server_day
from optsched.sim.traces.lyra import elastic_on_inference


def test_median_burst_by_hand() -> None:
    # changes 0.1, 0.3, 0.05, 0.2 (absolute): median (0.1 + 0.2) / 2
    assert median_burst([0.5, 0.6, 0.3, 0.35, 0.55]) == pytest.approx(0.15)
    # at a 60 s step the five-minute change is over five points
    assert median_burst(np.arange(20) * 0.01, step_s=60.0) == pytest.approx(0.05)
    assert median_burst([0.4]) == 0.0


@pytest.mark.parametrize("burst", [0.02, 0.05])
def test_the_usage_series_has_the_burst_asked(burst: float) -> None:
    plain = synthetic_usage(9, seed=3, start_hour=5.0)
    assert median_burst(plain.values) < 0.005   # today's series moves about 0.3%
    got = synthetic_usage(9, seed=3, start_hour=5.0, burst=burst)
    assert abs(median_burst(got.values) - burst) <= BURST_TOLERANCE
    assert all(0.0 <= v <= 1.0 for v in got.values)
    # the diurnal shape is kept: the daily means stay those of the plain series
    days = np.array(got.values).reshape(9, -1).mean(1)
    assert np.allclose(days, np.array(plain.values).reshape(9, -1).mean(1), atol=0.01)
    assert synthetic_usage(9, seed=3, start_hour=5.0, burst=burst) == got   # seeded


def test_without_the_option_the_series_is_unchanged() -> None:
    assert synthetic_usage(2, seed=1) == synthetic_usage(2, seed=1, burst=None)
    sim = lyra_simulation("synthetic", jobs=10, seed=1, usage_days=2.0)
    assert sim.usage == synthetic_usage(2.0, seed=1)


@pytest.mark.parametrize("bad", [-0.01, math.nan, 1.5, "0.02", True, math.inf])
def test_a_bad_burst_is_refused_naming_the_option(bad: object) -> None:
    with pytest.raises(ValidationError, match=r"usage_burst \(the median 5-minute change .*\) must be a number in "
                                              r"\[0, 1\]"):
        synthetic_usage(1, burst=bad)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="usage_burst"):
        lyra_simulation("synthetic", jobs=5, usage_burst=bad)  # type: ignore[arg-type]


def test_a_burst_out_of_reach_is_refused() -> None:
    with pytest.raises(ValidationError, match=r"usage_burst 0.0001: the synthetic series already moves"):
        synthetic_usage(2, burst=0.0001)
    with pytest.raises(ValidationError, match="usage_burst 0.9: noise clipped"):
        synthetic_usage(2, burst=0.9)
    with pytest.raises(ValidationError, match="usage_burst shapes the synthetic usage series only"):
        lyra_simulation("synthetic", jobs=5, usage="none", usage_burst=0.02)


def _cli(tmp_path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, dict, str]:
    out = tmp_path / "o"
    code = main(["simulate", "--kind", "lyra", "--jobs", "20", "--no-plots", "--no-progress", "--out", str(out),
                 "--policy", "lyra", *extra])
    text = capsys.readouterr()
    doc = json.loads((out / "summary.json").read_text()) if code == 0 else {}
    return code, doc, text.out + text.err


def test_usage_burst_from_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, doc, out = _cli(tmp_path, capsys, "--usage-burst", "0.02")
    assert code == 0, out
    assert abs(doc["usage_median_burst"] - 0.02) <= BURST_TOLERANCE and "median 5-minute change 2.00%" in out
    code, doc, out = _cli(tmp_path, capsys)
    assert code == 0 and doc["usage_median_burst"] < 0.005
    code, _, out = _cli(tmp_path, capsys, "--usage-burst", "-1")
    assert code != 0 and "usage_burst" in out
    code, _, out = _cli(tmp_path, capsys, "--usage-burst", "x")
    assert code != 0 and "--usage-burst" in out
    # the preset's burst is dropped with another series; given explicitly it is refused
    code, doc, out = _cli(tmp_path, capsys, "--preset", "lyra-thesis", "--window-days", "0.25", "--usage", "none",
                          "--policy", "fifo", "lyra", "lyra-loan")
    assert code == 0, out
    code, _, out = _cli(tmp_path, capsys, "--usage", "none", "--usage-burst", "0.02")
    assert code != 0 and "usage_burst shapes the synthetic usage series only" in out


def _placed(elastic_on: bool) -> dict[str, dict[str, int]]:
    """GPUs per node of each job in one ``lyra`` round: one 8-GPU training server, two loaned inference servers;
    an inelastic 6-GPU job and an elastic non-fungible one (1..2 workers of 2 GPUs) queued."""
    jobs = [Job("blk", "cnn", 6, 6 * 600, gpus_per_worker=2, submit_time=0.0),
            Job("el", "bert", 2, 2 * 7200, min_gpus=2, max_gpus=4, gpus_per_worker=2, submit_time=1.0)]
    if elastic_on:
        jobs, made = elastic_on_inference(jobs)
        assert made == 1
    inf = (inference_name(0), inference_name(1))
    p = LyraSimRound(cluster=two_pool_cluster(1, 2), jobs=tuple(jobs), inference_nodes=inf, time=10.0)
    d = make_policy("lyra", PolicyOptions(time_limit=5), kind="lyra").decide(p)
    return {jd.job: {n: s.gpus for n, s in jd.allocation.placement.shares} for jd in d.payload.jobs if jd.allocation}


def test_elastic_jobs_on_inference_servers_by_the_option() -> None:
    # off: the elastic job is not fungible, so it takes the 2 GPUs the training server has left and cannot scale
    assert _placed(False) == {"blk": {"train-000": 6}, "el": {"train-000": 2}}
    # on: Sec. 3.5.3, elastic jobs prefer inference servers: its base worker (2 training GPUs = 4 T4 GPUs) on one
    # loaned server and its flexible worker on the other (separate groups)
    assert _placed(True) == {"blk": {"train-000": 6}, "el": {"inf-000": 4, "inf-001": 4}}


def _sim_jobs(path: Path, on: bool) -> tuple[Job, ...]:
    sim = lyra_simulation(path, training=4, inference=4, seed=0, fungible_load=0.21, elastic_load=0.36,
                          elastic_count=0.2, elastic_on_inference="yes" if on else "no", usage="none")
    assert (sim.elastic_allowed is not None) == on and ("may use inference servers" in sim.describe_elastic()) == on
    return sim.jobs


def test_elastic_on_inference_touches_elastic_jobs_only(tmp_path: Path) -> None:
    csv = tmp_path / "p.csv"
    csv.write_text("timestamp,duration,num_gpus\n" + "".join(
        f"2017-10-01 {i // 60:02d}:{i % 60:02d}:00,3600,{(1, 2, 4, 8)[i % 4]}\n" for i in range(200)))
    off, on = _sim_jobs(csv, False), _sim_jobs(csv, True)
    changed = [(a, b) for a, b in zip(off, on) if a != b]
    assert changed and all(is_elastic(a) and not a.fungible and b == dataclasses.replace(a, fungible=True)
                           for a, b in changed)
    assert all(b.fungible for b in on if is_elastic(b)) and not all(a.fungible for a in off if is_elastic(a))


def test_elastic_on_inference_refuses_other_values() -> None:
    with pytest.raises(ValidationError, match="elastic_on_inference must be yes or no, got 'maybe'"):
        lyra_simulation("synthetic", jobs=5, elastic_on_inference="maybe")


def test_preemptions_per_inference_server_day_of_a_tiny_run() -> None:
    # lyra_cases.lent_servers_reclaimed: 2 preemptions. Over 4 inference servers and a quarter of a day: 2 / (4 x 0.25)
    res, cfg = lent_servers_reclaimed()
    doc = summary_document({"lyra": res}, cfg, policy_summary=lambda s: {
        "preemptions_per_inference_server_day": preemptions_per_server_day(s["preemptions"], 4, 0.25)})
    pol = doc["policies"]["lyra"]
    assert pol["preemptions"] == 2 and pol["preemptions_per_inference_server_day"] == pytest.approx(2.0)
    keys = list(pol)
    assert keys[keys.index("preemption_ratio") + 1] == "preemptions_per_inference_server_day"   # beside the ratio
    assert preemptions_per_server_day(0, 4, 15.0) == 0.0 and preemptions_per_server_day(3, 0, 1.0) is None
    # the thesis' figure (Table 3.5 row 2, Sec. 3.7.1, 3.1): 12.24% x 50,390 jobs / (520 servers x 15 days)
    assert preemptions_per_server_day(0.1224 * 50390, 4160 // 8, 15.0) == pytest.approx(0.7908, abs=1e-4)
    for bad in (-1, math.nan, "2"):
        with pytest.raises(ValidationError, match="preemptions must be a number >= 0"):
            preemptions_per_server_day(bad, 4, 1.0)  # type: ignore[arg-type]


def test_trace_days_and_summary_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    csv = tmp_path / "p.csv"
    csv.write_text("timestamp,duration,num_gpus\n2017-10-01 00:00:00,600,1\n2017-10-01 03:00:00,600,2\n"
                   "2017-10-01 06:00:00,600,1\n")
    assert lyra_simulation(csv, usage="none").trace_days == pytest.approx(0.25)   # first to last submission
    assert lyra_simulation(csv, usage="none", window_days=2.0).trace_days == 2.0  # the window
    code, doc, out = _cli(tmp_path, capsys, "--usage-burst", "0.05", "--inference", "3", "--policy", "fifo")
    assert code == 0, out
    assert doc["inference_servers"] == 3 and doc["trace_days"] > 0
    for pol in doc["policies"].values():
        assert pol["preemptions_per_inference_server_day"] == pytest.approx(
            pol["preemptions"] / (3 * doc["trace_days"]), abs=1e-6)

"""The Crius evaluation setting (issue 25 item 2): the crius-paper preset (Crius Sec. 8.1, 8.4, Fig. 16), the
synthetic trace at an arrival rate, deadlines (Sec. 8.5) and the deadline satisfactory ratio in summary.json."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pytest

from optsched.cli import simulate as sim_cli
from optsched.core import ValidationError, get_cluster
from optsched.rounds.crius import CriusRound
from optsched.sim.crius_truth import CriusGroundTruth
from optsched.sim.metrics import JobRecord
from optsched.sim.presets import (CRIUS_ARRIVALS_PER_HOUR, CRIUS_DAY_JOBS, CRIUS_WEEK_ARRIVALS_PER_HOUR,
                                  CRIUS_WEEK_JOBS, get_preset)
from optsched.sim.setups.crius import SETUP, max_duration_s
from optsched.sim.setup import SimulationRequest
from optsched.sim.traces.crius import DEFAULT_MAX_DURATION_S, DEFAULT_MIN_DURATION_S, crius_synthetic_trace


@pytest.fixture(scope="module")
def cluster():
    return get_cluster("crius-testbed-64")


def test_the_presets_take_the_papers_numbers() -> None:
    week, rate = get_preset("crius-paper"), get_preset("crius-paper-rate")
    # Fig. 16's one-week trace: the busiest 7 days of the public Philly trace, 14,185 jobs in 168 h
    assert CRIUS_WEEK_ARRIVALS_PER_HOUR == pytest.approx(14_185 / 168, abs=0.01) and CRIUS_WEEK_JOBS == 14_185
    assert dict(week.request) == {"trace": "synthetic", "jobs": 14_185, "arrival_rate": CRIUS_WEEK_ARRIVALS_PER_HOUR,
                                  "max_duration": 168.0, "search_depth": 3}
    # Sec. 8.1's two weeks of 13,000 jobs, one day of them, durations clipped at our default day
    assert CRIUS_ARRIVALS_PER_HOUR == pytest.approx(13_000 / 336, abs=0.01) and CRIUS_DAY_JOBS == 929
    assert dict(rate.request) == {"trace": "synthetic", "jobs": 929, "arrival_rate": CRIUS_ARRIVALS_PER_HOUR,
                                  "max_duration": 24.0, "search_depth": 3}
    for p in (week, rate):
        assert (p.kind, p.settings["round_interval_s"], p.settings["rounds_on_events"]) == ("crius", 300.0, False)


def _offered(source: str) -> float:
    return float(source.split("offered load ")[1].split(",")[0].rstrip(")"))


def test_the_week_preset_is_contended_and_the_day_preset_is_not() -> None:
    """The trace of crius-paper offers most of the 1,280 GPUs' time over its week (0.98 at seed 0); the clip is
    what makes it: the same arrivals clipped at a day offer about half of that. crius-paper-rate offers 0.25."""
    cluster = get_cluster("crius-sim-1280")
    truth = CriusGroundTruth(cluster)
    loads = {}
    for name, clip in (("crius-paper", None), ("crius-paper", 24.0), ("crius-paper-rate", None)):
        req = get_preset(name).request
        t = crius_synthetic_trace(cluster, truth, num_jobs=req["jobs"], seed=0, load=None,
                                  arrival_rate=req["arrival_rate"] / 3600,
                                  max_duration=3600 * (clip or req["max_duration"]))
        loads[name, clip] = _offered(t.source)
    assert loads["crius-paper", None] > 0.8
    assert loads["crius-paper", 24.0] < 0.6 and loads["crius-paper-rate", None] < 0.3


def test_max_duration_clips_the_trace_and_refuses_bad_values(cluster) -> None:
    # lambda = 1: each deadline is submission + the row's duration clipped to [600 s, max_duration]
    def spans(hours: float) -> list[float]:
        req = SimulationRequest(jobs=60, seed=1, cluster="crius-testbed-64",
                                options={"arrival_rate": 30.0, "deadline_range": "1,1", "max_duration": hours})
        inputs = SETUP.build(req)
        assert f"durations clipped at {hours:g} h" in inputs.heading
        return [j.deadline - j.submit_time for j in inputs.jobs]
    day, hour = spans(24.0), spans(1.0)
    assert max(hour) == pytest.approx(3600.0) and min(hour) == pytest.approx(DEFAULT_MIN_DURATION_S)
    assert max(day) > 3600.0 and [min(d, 3600.0) for d in day] == pytest.approx(hour)
    assert SETUP.option(SimulationRequest(), "max_duration") * 3600 == DEFAULT_MAX_DURATION_S  # default unchanged
    for bad in (0.1, 0, -5, float("nan"), True, "2"):
        with pytest.raises(ValidationError, match="--max-duration must be a number of hours >= 0.166667"):
            max_duration_s(bad)
    with pytest.raises(ValidationError, match="--max-duration"):
        SETUP.build(SimulationRequest(jobs=5, cluster="crius-testbed-64", options={"max_duration": 0.0}))


def _args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser()
    sim_cli.add_arguments(ap)
    return ap.parse_args(argv)


def test_the_preset_fills_what_the_command_line_leaves_and_binds_its_kind() -> None:
    req = sim_cli._request(_args(["--kind", "crius", "--preset", "crius-paper"]))
    assert req.jobs == 14_185 and dict(req.options) == {"arrival_rate": CRIUS_WEEK_ARRIVALS_PER_HOUR,
                                                        "max_duration": 168.0, "search_depth": 3}
    req = sim_cli._request(_args(["--kind", "crius", "--preset", "crius-paper-rate", "--max-duration", "48"]))
    assert req.jobs == 929 and dict(req.options) == {"arrival_rate": CRIUS_ARRIVALS_PER_HOUR, "max_duration": 48.0,
                                                     "search_depth": 3}
    req = sim_cli._request(_args(["--kind", "crius", "--preset", "crius-paper", "--jobs", "50",
                                  "--search-depth", "1"]))
    assert req.jobs == 50 and req.options["search_depth"] == 1           # given flags win
    req = sim_cli._request(_args(["--kind", "crius", "--preset", "crius-paper", "--load", "2"]))
    assert req.load == 2.0 and "arrival_rate" not in req.options          # --load replaces the rate
    with pytest.raises(ValidationError, match="--preset crius-paper applies to --kind crius only"):
        sim_cli._request(_args(["--kind", "rubick", "--preset", "crius-paper"]))


def test_arrival_rate_and_deadlines(cluster) -> None:
    truth = CriusGroundTruth(cluster)
    rate = 10 / 3600
    t = crius_synthetic_trace(cluster, truth, num_jobs=40, seed=3, load=None, arrival_rate=rate,
                              deadline_range=(0.5, 1.5))
    gaps = np.diff([0.0] + [j.submit_time for j in t.jobs])
    assert 0.5 / rate < gaps.mean() < 1.5 / rate       # Poisson arrivals at the rate (mean gap 1 / rate)
    assert "arrival_rate=10/h" in t.source
    # the same rows without deadlines: same jobs; lambda = (deadline - submit) / clipped duration in [0.5, 1.5]
    plain = crius_synthetic_trace(cluster, truth, num_jobs=40, seed=3, load=None, arrival_rate=rate)
    assert [j.submit_time for j in plain.jobs] == [j.submit_time for j in t.jobs]
    from optsched.sim.traces.synthetic import sample_philly_jobs
    _, durations = sample_philly_jobs(np.random.default_rng(3), 40)
    lam = [(j.deadline - j.submit_time) / min(max(d, DEFAULT_MIN_DURATION_S), DEFAULT_MAX_DURATION_S)
           for j, d in zip(t.jobs, durations)]
    assert all(0.5 <= x <= 1.5 for x in lam) and max(lam) - min(lam) > 0.5
    with pytest.raises(ValidationError, match="either load or arrival_rate"):
        crius_synthetic_trace(cluster, truth, num_jobs=5, load=1.0, arrival_rate=rate)


def test_a_past_deadline_is_an_error_unless_the_round_accepts_it(cluster) -> None:
    from optsched.core import Job
    job = Job("a", "bert-0.76b@128", 2, 100, submit_time=0.0, deadline=5.0)
    with pytest.raises(ValidationError, match="deadline 5 s is before the round's time 10 s"):
        CriusRound(cluster=cluster, jobs=(job,), time=10.0)
    r = CriusRound(cluster=cluster, jobs=(job,), time=10.0, objective="deadline", past_deadlines="accept")
    assert CriusRound.from_dict(json.loads(json.dumps(r.to_dict()))).past_deadlines == "accept"
    from optsched.rounds.crius.admission import admit
    from optsched.rounds.crius.table import build_crius_table
    assert admit(r, build_crius_table(r)).dropped == {"a"}  # it can no longer meet it: dropped


def test_deadline_satisfactory_ratio_counts_jobs_finished_by_their_deadline() -> None:
    def rec(name: str, finish: float | None, deadline: float | None) -> JobRecord:
        return JobRecord(name, "m", "t", False, 1, 0.0, 0.0 if finish else None, finish, 0.0, 1, 0, 0, 0.0, 0.0, "",
                         deadline_s=deadline)
    from optsched.sim.metrics import SimResult
    jobs = (rec("a", 10.0, 10.0), rec("b", 11.0, 10.0), rec("c", None, 10.0), rec("d", 5.0, None))
    s = SimResult("p", "t", "c", "g", jobs, (), 1, 0, 0.0, 0.0, ()).summary()
    assert (s["deadline_jobs"], s["deadlines_met"], s["deadline_satisfactory_ratio"]) == (3, 1, round(1 / 3, 6))
    assert "deadline_satisfactory_ratio" not in SimResult("p", "t", "c", "g", jobs[3:], (), 1, 0, 0.0, 0.0,
                                                          ()).summary()


def test_a_deadline_simulation_end_to_end(tmp_path) -> None:
    out = tmp_path / "ddl"
    args = _args(["--kind", "crius", "--preset", "crius-paper", "--cluster", "crius-testbed-64", "--jobs", "8",
                  "--arrival-rate", "20", "--deadline-range", "0.5,1.5", "--policy", "crius", "elasticflow-ddl",
                  "--no-progress", "--no-plots", "--out", str(out)])
    assert sim_cli.run(args) == 0
    d = json.loads((out / "summary.json").read_text())
    for p in ("crius", "elasticflow-ddl"):
        s = d["policies"][p]
        assert s["deadline_jobs"] == 8 and 0 <= s["deadlines_met"] <= 8
        assert s["deadline_satisfactory_ratio"] == round(s["deadlines_met"] / 8, 6)

"""``benchmarks/rubick_table4.py``'s ground-truth mode (issue 25 item 4): setting labels, the smaller trace,
and one tiny run (8 jobs of the base trace) under the calibrated and the measured-neighbour ground truths,
which writes both settings with each policy's measured share."""

from __future__ import annotations

import csv
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import report  # noqa: E402
import rubick_table4  # noqa: E402

from optsched.core import ExecutionPlan, Job  # noqa: E402
from optsched.sim.traces import Trace  # noqa: E402
from optsched.sim.traces.trace import TraceDuration  # noqa: E402


def test_setting_names() -> None:
    assert rubick_table4.setting_name("rubick-paper", "ignore") == "paper/ignore"
    assert rubick_table4.setting_name("rubick-paper", "use", "measured", "neighbours") == "paper/use/measured/nb"
    assert rubick_table4.setting_name("rubick-artifact", "use", "all", "calibrated") == "artifact/use"


def test_first_jobs_keeps_quotas_and_the_kept_jobs_durations() -> None:
    jobs = [Job(n, "bert", 1, 10, requested_plan=ExecutionPlan(dp=1), submit_time=t, tenant="A")
            for n, t in (("c", 30.0), ("a", 10.0), ("b", 20.0))]
    trace = Trace("t", tuple(jobs), (("A", 8),), "file.csv",
                  tuple(TraceDuration(j.name, 100.0, i + 1) for i, j in enumerate(jobs)))
    small = rubick_table4.first_jobs(trace, 2)
    assert [j.name for j in small.jobs] == ["a", "b"] and small.quotas == (("A", 8),)
    assert sorted(d.job for d in small.durations) == ["a", "b"] and "first 2 jobs" in small.source


def test_a_tiny_run_under_both_truths(tmp_path: Path, monkeypatch: Any, shared_data: Path) -> None:
    monkeypatch.setattr(report, "OUT", tmp_path)
    assert rubick_table4.main(["--traces", "base", "--presets", "rubick-paper", "--durations", "ignore",
                               "--configs", "all", "--truths", "calibrated", "neighbours", "--max-jobs", "6",
                               "--profiling", "210", "--data", str(shared_data / "morphling")]) == 0
    with open(tmp_path / "rubick_table4.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert {r["setting"] for r in rows} == {"paper/ignore", "paper/ignore/nb"}
    assert all(r["jobs"] == "6" and 0.0 <= float(r["measured_share"]) <= 1.0 for r in rows)
    policies = {s: sorted(r["policy"] for r in rows if r["setting"] == s) for s in ("paper/ignore", "paper/ignore/nb")}
    assert policies["paper/ignore"] == policies["paper/ignore/nb"] and "rubick" in policies["paper/ignore"]

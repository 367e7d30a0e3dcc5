"""``optsched simulate`` fidelity options (issue 17): ``--trace-durations``, ``--start-overhead``,
``--preset`` and what they write to ``summary.json``."""

from __future__ import annotations

import json

import pytest

from optsched.cli import main

HEADER = "name,submission_time,duration,application,num_gpus,num_cpus,bandwidth,exec_plan,steps,is_sla\n"


def _simulate(tmp_path, capsys, rows: str, *argv: str) -> tuple[dict, str]:
    trace = tmp_path / "t.csv"
    trace.write_text(HEADER + rows)
    out_dir = tmp_path / "o"
    code = main(["simulate", "--trace", str(trace), "--policy", "fifo", "--out", str(out_dir), "--no-plots",
                 "--no-progress", *argv])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads((out_dir / "summary.json").read_text()), out


def test_trace_durations_are_used_by_default_and_can_be_ignored(tmp_path, capsys) -> None:
    # one BERT job, 100 steps recorded as 200 s: it runs at 2 s per step whatever the model says
    rows = "a,0,200,bert,1,8,0,ga,100,0\n"
    used, out = _simulate(tmp_path, capsys, rows)
    assert used["policies"]["fifo"]["avg_jct_s"] == pytest.approx(200.0, abs=0.01)
    assert used["trace_durations"]["anchored"] == 1 and used["preset"] is None
    assert "trace durations: 1 of 1 jobs run at their trace's own speed" in out
    ignored, out = _simulate(tmp_path, capsys, rows, "--trace-durations", "ignore")
    assert ignored["trace_durations"] is None and "ignored" in out
    assert ignored["policies"]["fifo"]["avg_jct_s"] != pytest.approx(200.0, abs=1.0)


def test_preset_start_overhead_and_explicit_flags(tmp_path, capsys) -> None:
    rows = "a,0,200,bert,1,8,0,ga,100,0\n"
    doc, _ = _simulate(tmp_path, capsys, rows, "--preset", "rubick-artifact")
    c = doc["config"]
    assert (c["round_interval_s"], c["rounds_on_events"], c["start_overhead_s"], c["reconfig_overhead_s"],
            c["preempt_restart_s"]) == (60.0, False, 260.0, 260.0, 260.0)
    assert doc["preset"] == "rubick-artifact"
    assert doc["policies"]["fifo"]["avg_jct_s"] == pytest.approx(520.0, abs=0.01)  # first tick 60 s + 260 + 200
    doc, _ = _simulate(tmp_path, capsys, rows, "--preset", "rubick-artifact", "--start-overhead", "0",
                       "--round-interval", "120")
    assert doc["config"]["start_overhead_s"] == 0.0 and doc["config"]["round_interval_s"] == 120.0
    assert doc["config"]["reconfig_overhead_s"] == 260.0
    doc, _ = _simulate(tmp_path, capsys, rows, "--start-overhead", "30")
    assert doc["config"]["reconfig_overhead_s"] == 78.0 and doc["config"]["start_overhead_s"] == 30.0
    assert doc["policies"]["fifo"]["avg_jct_s"] == pytest.approx(230.0, abs=0.01)


def test_bad_fidelity_options_exit_2(tmp_path, capsys) -> None:
    for argv, needle in ((["--preset", "slurm"], "invalid choice"), (["--start-overhead", "-1"], "start_overhead_s"),
                         (["--trace-durations", "maybe"], "invalid choice")):
        code = main(["simulate", "--jobs", "4", "--no-progress", "--out", str(tmp_path / "x"), *argv])
        _, err = capsys.readouterr()
        assert code == 2 and needle in err and "Traceback" not in err, (argv, err)


def test_trim_overhead_flag(tmp_path, capsys) -> None:
    """``--trim-overhead`` sets ``SimConfig.trim_overhead_s`` (issue 16, item 5); the summary counts trims."""
    rows = "a,0,200,bert,1,8,0,ga,100,0\n"
    doc, _ = _simulate(tmp_path, capsys, rows, "--trim-overhead", "5")
    assert doc["config"]["trim_overhead_s"] == 5.0 and doc["policies"]["fifo"]["trims"] == 0
    code = main(["simulate", "--jobs", "4", "--no-progress", "--out", str(tmp_path / "x"), "--trim-overhead", "-1"])
    _, err = capsys.readouterr()
    assert code == 2 and "trim_overhead_s" in err and "Traceback" not in err


def test_profiling_flags(tmp_path, capsys) -> None:
    """``--profiling`` / ``--profiling-scope`` set ``SimConfig.profiling_s`` / ``profiling_scope``: fifo is
    charged only under scope 'all' (one job: 210 s profile + 200 s of work)."""
    rows = "a,0,200,bert,1,8,0,ga,100,0\n"
    doc, _ = _simulate(tmp_path, capsys, rows, "--profiling", "210")
    assert doc["config"]["profiling_s"] == 210.0 and doc["config"]["profiling_scope"] == "rubick"
    assert doc["policies"]["fifo"]["avg_jct_s"] == pytest.approx(200.0, abs=0.01)
    doc, _ = _simulate(tmp_path, capsys, rows, "--profiling", "210", "--profiling-scope", "all")
    assert doc["policies"]["fifo"]["avg_jct_s"] == pytest.approx(410.0, abs=0.01)

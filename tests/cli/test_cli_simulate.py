"""``optsched simulate``: the README's main job on built-in defaults (scaled down), the files it
writes, trace/cluster/ground-truth options, and one-line errors for bad input."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from optsched.cli import main
from optsched.core import a800_cluster

from helpers import shared_data_dir

DATA = shared_data_dir() / "morphling"
HEADER = "name,submission_time,duration,application,num_gpus,num_cpus,bandwidth,exec_plan,steps,is_sla\n"


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_synthetic_default_run_writes_summary_jobs_and_timeline(tmp_path, capsys) -> None:
    out_dir = tmp_path / "out"
    code, out, err = _run(capsys, "simulate", "--jobs", "12", "--policy", "rubick", "fifo", "--out", str(out_dir),
                          "--no-plots", "--no-progress")
    assert code == 0, err
    assert "rubick" in out and "fifo" in out and "1.00x" in out
    header = next(line for line in out.splitlines() if line.startswith("policy"))
    # each ratio column says what it divides: the row's value over the first policy's
    assert "avg JCT / rubick's" in header and "p99 JCT / rubick's" in header and "makespan / rubick's" in header
    assert " ratio " not in f" {header} "
    doc = json.loads((out_dir / "summary.json").read_text())
    assert list(doc["policies"]) == ["rubick", "fifo"]
    for s in doc["policies"].values():
        for key in ("avg_jct_s", "p50_jct_s", "p99_jct_s", "makespan_s", "avg_queue_s", "reconfigurations",
                    "preemptions", "gpu_utilisation", "guaranteed", "best_effort"):
            assert key in s
        assert s["jobs"] == 12 and s["unfinished"] == 0
    assert doc["config"]["reconfig_overhead_s"] == 78.0 and doc["config"]["preempt_restart_s"] == 63.0
    with (out_dir / "jobs.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 24 and {r["policy"] for r in rows} == {"rubick", "fifo"}
    fifo = [r for r in rows if r["policy"] == "fifo"]
    assert all(float(r["jct_s"]) >= float(r["queue_s"]) >= 0 for r in fifo)
    avg = sum(float(r["jct_s"]) for r in fifo) / 12
    assert avg == pytest.approx(doc["policies"]["fifo"]["avg_jct_s"], abs=0.01)
    assert (out_dir / "timeline.csv").read_text().startswith("policy,time_s,busy_gpus")


def test_same_seed_same_summary(tmp_path, capsys) -> None:
    docs = []
    for k in range(2):
        code, _, err = _run(capsys, "simulate", "--jobs", "10", "--seed", "3", "--policy", "rubick", "--out",
                            str(tmp_path / str(k)), "--no-plots", "--no-progress")
        assert code == 0, err
        doc = json.loads((tmp_path / str(k) / "summary.json").read_text())
        for s in doc["policies"].values():
            s.pop("wall_seconds")
            s.pop("policy_seconds")
        docs.append(doc)
    assert docs[0] == docs[1]


def test_workload_trace_with_malformed_row_names_the_row(tmp_path, capsys) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text(HEADER + "a,0,10,bert,2,16,0,zero-dp,100,0\n" + "b,5,10,bert,two,16,0,zero-dp,100,0\n")
    code, out, err = _run(capsys, "simulate", "--trace", str(trace), "--policy", "fifo", "--out",
                          str(tmp_path / "o"), "--no-progress")
    assert code == 2 and out == ""
    assert "row 2" in err and "num_gpus" in err and "Traceback" not in err


def test_workload_trace_runs_and_counts_jobs(tmp_path, capsys) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text(HEADER + "a,0,10,bert,2,16,0,zero-dp,300,1\n" + "b,5,10,vit,4,32,0,ga,500,0\n")
    code, out, err = _run(capsys, "simulate", "--trace", str(trace), "--policy", "antman", "rubick", "--out",
                          str(tmp_path / "o"), "--no-plots", "--no-progress")
    assert code == 0, err
    doc = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert doc["policies"]["antman"]["guaranteed"]["finished"] == 1
    assert doc["policies"]["rubick"]["best_effort"]["finished"] == 1
    assert "guar." in out and "BE" in out


def test_cluster_file_and_bad_options_exit_2(tmp_path, capsys) -> None:
    cluster = tmp_path / "c.json"
    cluster.write_text(json.dumps(a800_cluster(2, 8, name="mini").to_dict()))
    code, out, err = _run(capsys, "simulate", "--jobs", "6", "--cluster", str(cluster), "--policy", "sia", "--out",
                          str(tmp_path / "o"), "--no-plots", "--no-progress")
    assert code == 0, err
    assert "mini (16 GPUs)" in out
    for argv, needle in ((["--policy", "nope"], "invalid choice"), (["--ground-truth", "oracle"], "--ground-truth"),
                         (["--cluster", "nowhere.json"], "nowhere.json"), (["--cluster", "tiny"], "unknown cluster"),
                         (["--trace", str(tmp_path / "missing.csv")], "missing.csv"),
                         (["--round-interval", "0"], "round_interval_s"), (["--jobs", "0"], "num_jobs")):
        code, out, err = _run(capsys, "simulate", "--no-progress", "--out", str(tmp_path / "x"), *argv)
        assert code == 2 and needle in err and "Traceback" not in err, (argv, err)


@pytest.mark.skipif(not (DATA / "placements").is_dir(), reason="../shared/data/morphling is absent")
def test_naive_workload_with_measured_ground_truth(tmp_path, capsys) -> None:
    code, out, err = _run(capsys, "simulate", "--trace", str(DATA / "workloads" / "naive.csv"), "--ground-truth",
                          f"measured:{DATA / 'placements'}", "--policy", "rubick", "rubick-n", "--out",
                          str(tmp_path / "o"), "--no-plots", "--no-progress")
    assert code == 0, err
    doc = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert doc["ground_truth"].startswith("measured:")
    assert all(s["unfinished"] == 0 and s["jobs"] == 10 for s in doc["policies"].values())
    assert doc["policies"]["rubick"]["avg_jct_s"] <= doc["policies"]["rubick-n"]["avg_jct_s"]


def _slowed(base):
    """A fitted model like ``base`` with a 5x forward time and 1 s more per iteration."""
    return base.with_params(base.params.replace(fwd_s=base.params.fwd_s * 5, k_const=base.params.k_const + 1.0))


def _slow_bert_file(tmp_path: Path, gpu_type: str = "A800", name: str = "slow-bert.json") -> Path:
    """:func:`_slowed` built-in bert as a params file, claiming to be fitted on ``gpu_type``."""
    from optsched.core import get_cluster
    from optsched.perf.defaults import default_performance_model
    data = _slowed(default_performance_model("bert", get_cluster("a800-8x8"), "A800")).to_dict()
    data["gpu_type"] = gpu_type
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def test_policies_plan_with_the_given_fitted_model() -> None:
    """make_policy with PolicyOptions(perf_models=) (what --params feeds): the decision's predicted
    throughput of every bert job is the fitted model's, the other jobs keep the built-in ones."""
    from optsched.perf.defaults import default_performance_model
    from optsched.policies.options import PolicyOptions
    from optsched.policies.registry import make_policy
    from optsched.rounds.rubick.generate import generate_rubick_round
    problem = generate_rubick_round(2, 8, 6, seed=1)
    slow = _slowed(default_performance_model("bert", problem.cluster, "A800"))
    with_fit = make_policy("rubick", PolicyOptions(perf_models={"bert": slow})).decide(problem)
    built_in = make_policy("rubick").decide(problem)
    checked = 0
    for d in with_fit.jobs:
        job = problem.job(d.job)
        if d.allocation is None:
            continue
        pm = slow if job.model == "bert" else default_performance_model(job.model, problem.cluster, "A800")
        shares = [s for _, s in d.allocation.placement.shares]
        gpn = tuple(s.gpus for s in shares if s.gpus)
        cpg = sum(s.cpus for s in shares) / sum(gpn)
        assert d.throughput == pytest.approx(pm.throughput(d.allocation.plan, gpn, cpg), rel=1e-6), d.job
        checked += job.model == "bert"
    assert checked >= 1
    assert with_fit.job("job1").throughput < built_in.job("job1").throughput


def test_simulate_params_option(tmp_path, capsys) -> None:
    good = _slow_bert_file(tmp_path)
    common = ["simulate", "--jobs", "8", "--policy", "rubick", "--no-plots", "--no-progress"]
    code, out, err = _run(capsys, *common, "--params", str(good), "--out", str(tmp_path / "o"))
    assert code == 0, err
    assert "policies plan with fitted models: bert on A800" in out
    wrong = _slow_bert_file(tmp_path, gpu_type="T4", name="t4.json")
    for extra, needle in ((["--params", str(wrong)], "GPU type 'T4'"),
                          (["--params", str(good), "--params", str(good)], "second fitted model"),
                          (["--params", str(tmp_path / "none.json")], "none.json")):
        code, out, err = _run(capsys, *common, "--out", str(tmp_path / "x"), *extra)
        assert code == 2 and needle in err and "Traceback" not in err, (extra, err)


def test_without_matplotlib_the_commands_say_plots_were_skipped(tmp_path, capsys, monkeypatch) -> None:
    """Issue 26: with no matplotlib, ``simulate`` (unless --no-plots) and ``gap --plots`` say on stderr that the
    plots were skipped and how to install it (the ``plot`` extra)."""
    import importlib.util
    import json

    from optsched import cli
    from optsched.rounds.rubick.generate import generate_rubick_round
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a))
    line = ("plots skipped: matplotlib is not installed (install the plot extra: pip install -e \".[plot]\" in the "
            "repository)")
    base = ["simulate", "--kind", "lyra", "--jobs", "10", "--policy", "lyra", "--no-progress"]
    assert cli.main([*base, "--out", str(tmp_path / "a")]) == 0
    assert line in capsys.readouterr().err
    assert cli.main([*base, "--no-plots", "--out", str(tmp_path / "b")]) == 0
    assert "plots skipped" not in capsys.readouterr().err
    round_file = tmp_path / "r.json"
    round_file.write_text(json.dumps(generate_rubick_round(1, 8, 4, 0).to_dict()))
    assert cli.main(["gap", str(round_file), "--time-limit", "5", "--plots", str(tmp_path / "plots")]) == 0
    assert line in capsys.readouterr().err

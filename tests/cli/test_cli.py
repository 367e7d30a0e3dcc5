"""The ``optsched`` command line: fit / predict / curves through ``main([...])``.

Synthetic measurement files are generated here from a known performance model (the shared data is
only read, by one test that skips when it is absent)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from optsched.cli import main, sample_rows
from optsched.core import ZeroMode, get_cluster, get_model
from optsched.core.jsonio import read_json
from optsched.perf.defaults import prior_performance_model
from optsched.perf.measurements import read_placements_csv
from optsched.perf.performance_model import PerformanceModel

#: (exec_plan, placement) rows of the synthetic file: every DP family on 1..8 GPUs, multi-node
#: placements, and a few 3D codes
ROWS = [("ga", "1"), ("ga", "2"), ("ga", "44"), ("ga", "2222"),
        ("gc", "1"), ("gc", "4"), ("gc", "11"), ("gc", "8"),
        ("zero-dp", "2"), ("zero-dp", "8"), ("zero-dp", "44"), ("zero-dp", "11"),
        ("zero-offload", "1"), ("zero-offload", "2"), ("zero-offload", "4"), ("zero-offload", "2222"),
        ("zero-offload", "8"), ("142", "8"), ("211", "2"), ("221", "4")]


@pytest.fixture(scope="module")
def truth() -> PerformanceModel:
    """bert on the A800 cluster with chosen (not prior) parameters."""
    base = prior_performance_model(get_model("bert"), get_cluster("a800-8x8"), "A800")
    params = base.params.replace(k_bwd=2.3, k_sync=3.0, k_opt=0.05, k_opt_off=3.0, k_off=1.5,
                                 k_swap=2.5, k_const=0.02, fwd_s=base.params.fwd_s * 1.4)
    return base.with_params(params)


def synthetic_csv(path: Path, perf: PerformanceModel, rows=ROWS) -> list[float]:
    """Write rows in the measurement format with iteration times predicted by ``perf``."""
    path.write_text("exec_plan,placement\n" + "".join(f"{c},{p}\n" for c, p in rows), encoding="utf-8")
    parsed = read_placements_csv(path, perf.model, require_iter_time=False)
    times = [float(t) for t in perf.iteration_times([(r.plan, r.gpus_per_node, r.cpus_per_gpu) for r in parsed])]
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["exec_plan", "placement", "iter_time", "forward", "overlap_sync", "optimize"])
        for (c, p), t in zip(rows, times):
            w.writerow([c, p, repr(t), 0, 0, 0])
    return times


def read_predictions(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def fitted(tmp_path_factory, truth):
    """(directory, measured csv, params json, true times) after one ``optsched fit``."""
    d = tmp_path_factory.mktemp("fit")
    data = d / "bert.csv"
    times = synthetic_csv(data, truth)
    params = d / "params.json"
    rc = main(["fit", "--placements", str(data), "--model", "bert", "--starts", "2", "--out", str(params)])
    assert rc == 0
    return d, data, params, times


def test_fit_writes_loadable_params_and_summary(fitted, capsys):
    _, _, params, _ = fitted
    perf = PerformanceModel.from_dict(read_json(params))
    assert perf.model.name == "bert" and perf.n_samples == len(ROWS)
    assert perf.rmsle is not None and perf.rmsle < 0.01
    assert set(perf.identified) >= {"k_bwd", "k_opt_off", "k_off", "fwd_s"}
    # every row of a placements CSV runs at one CPU count: k_swap is held, and the file says why
    assert "k_swap" not in perf.identified and "CPU counts" in dict(perf.reasons)["k_swap"]


def test_fit_prints_summary(tmp_path, truth, capsys):
    data = tmp_path / "bert.csv"
    synthetic_csv(data, truth)
    rc = main(["fit", "--placements", str(data), "--model", "bert", "--starts", "1",
               "--samples", "9", "--seed", "3", "--out", str(tmp_path / "p.json")])
    out, err = capsys.readouterr()
    assert rc == 0
    assert "RMSLE" in out and "k_bwd" in out and "identified:" in out
    assert "using 9 of 20 rows" in err


def test_fit_then_predict_reproduces_generating_times(fitted, tmp_path, capsys):
    _, data, params, times = fitted
    out = tmp_path / "pred.csv"
    assert main(["predict", "--params", str(params), "--placements", str(data), "--out", str(out)]) == 0
    pred = read_predictions(out)
    assert list(pred[0]) == ["exec_plan", "placement", "predicted_iter_time", "predicted_throughput", "plan"]
    assert [(r["exec_plan"], r["placement"]) for r in pred] == ROWS  # input order, one row per row
    for r, t in zip(pred, times):
        assert float(r["predicted_iter_time"]) == pytest.approx(t, rel=0.01)
        assert float(r["predicted_throughput"]) == pytest.approx(32 / float(r["predicted_iter_time"]), rel=1e-4)
    assert pred[0]["plan"].startswith("ga(dp=1") and pred[-1]["plan"].startswith("3d(pp=2,tp=2,dp=1")


def test_predict_two_column_input_keeps_order(fitted, tmp_path, capsys):
    _, _, params, _ = fitted
    rows = [("zero-offload", "2222"), ("ga", "1"), ("142", "8"), ("ga", "1"), ("gc", "11")]
    src = tmp_path / "two.csv"
    src.write_text("exec_plan,placement\n" + "".join(f"{c},{p}\n" for c, p in rows), encoding="utf-8")
    out = tmp_path / "pred.csv"
    assert main(["predict", "--params", str(params), "--placements", str(src), "--out", str(out)]) == 0
    pred = read_predictions(out)
    assert [(r["exec_plan"], r["placement"]) for r in pred] == rows
    assert pred[1]["predicted_iter_time"] == pred[3]["predicted_iter_time"]
    assert all(float(r["predicted_iter_time"]) > 0 for r in pred)


def test_predict_ignores_measured_columns(fitted, tmp_path, capsys):
    """Measured columns play no part: the same plans with other iter_time values predict the same."""
    _, data, params, _ = fitted
    other = tmp_path / "other.csv"
    lines = data.read_text(encoding="utf-8").splitlines()
    other.write_text("\n".join([lines[0]] + [",".join(ln.split(",")[:2] + ["9.5", "1", "2", "3"])
                                             for ln in lines[1:]]) + "\n", encoding="utf-8")
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    assert main(["predict", "--params", str(params), "--placements", str(data), "--out", str(a)]) == 0
    assert main(["predict", "--params", str(params), "--placements", str(other), "--out", str(b)]) == 0
    assert a.read_text() == b.read_text()


def test_unknown_model_exits_2(tmp_path, truth, capsys):
    data = tmp_path / "x.csv"
    synthetic_csv(data, truth)
    rc = main(["fit", "--placements", str(data), "--model", "gpt5", "--out", str(tmp_path / "p.json")])
    _, err = capsys.readouterr()
    assert rc == 2
    assert err.strip().splitlines()[-1].startswith("optsched: error:")
    assert "unknown model" in err and "Traceback" not in err
    assert not (tmp_path / "p.json").exists()
    rc = main(["curves", "--model", "gpt5"])
    assert rc == 2 and "unknown model" in capsys.readouterr().err


def test_malformed_csv_exits_2_naming_row(tmp_path, capsys):
    bad = tmp_path / "bad.csv"
    bad.write_text("exec_plan,placement,iter_time\nga,1,0.4\ngc,2,0.3\n248,44,0.2\n", encoding="utf-8")
    rc = main(["fit", "--placements", str(bad), "--model", "bert", "--out", str(tmp_path / "p.json")])
    err = capsys.readouterr().err
    assert rc == 2
    last = err.strip().splitlines()[-1]
    assert last.startswith("optsched: error:") and "row 3" in last
    assert "Traceback" not in err


def test_fit_too_few_rows_and_bad_samples_exit_2(tmp_path, truth, capsys):
    data = tmp_path / "few.csv"
    synthetic_csv(data, truth, ROWS[:3])  # ga rows identify k_opt, k_const, fwd_s (+ k_sync): 4 rows needed
    assert main(["fit", "--placements", str(data), "--model", "bert", "--out", str(tmp_path / "p.json")]) == 2
    assert "at least 4 rows are needed" in capsys.readouterr().err
    synthetic_csv(data, truth)
    assert main(["fit", "--placements", str(data), "--model", "bert", "--samples", "99",
                 "--out", str(tmp_path / "p.json")]) == 2
    assert "exceeds the 20 rows" in capsys.readouterr().err


def test_usage_errors_exit_2_with_one_line(capsys):
    for argv in (["fit", "--model", "bert"], ["nonsense"], [], ["curves", "--model", "bert", "--resource", "tpu"],
                 ["curves", "--model", "bert", "--max-gpus", "many"]):
        rc = main(argv)
        err = capsys.readouterr().err
        assert rc == 2, argv
        assert err.strip().splitlines()[-1].startswith("optsched: error: "), argv
        assert "Traceback" not in err


def test_missing_params_file_exits_2(tmp_path, capsys):
    src = tmp_path / "two.csv"
    src.write_text("exec_plan,placement\nga,1\n", encoding="utf-8")
    rc = main(["predict", "--params", str(tmp_path / "none.json"), "--placements", str(src),
               "--out", str(tmp_path / "o.csv")])
    assert rc == 2 and "cannot read" in capsys.readouterr().err


def test_help_returns_0(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "fit" in out and "predict" in out and "curves" in out


def test_sample_rows_reproducible_and_keeps_offload(tmp_path, truth):
    data = tmp_path / "s.csv"
    synthetic_csv(data, truth)
    rows = read_placements_csv(data, truth.model)
    for seed in range(10):
        a = sample_rows(rows, 7, seed)
        assert [r.row for r in a] == [r.row for r in sample_rows(rows, 7, seed)]
        assert len({r.row for r in a}) == 7 and [r.row for r in a] == sorted(r.row for r in a)
        assert sum(r.plan.zero is ZeroMode.OFFLOAD for r in a) >= 3
    assert len({tuple(r.row for r in sample_rows(rows, 7, s)) for s in range(10)}) > 1
    no_off = [r for r in rows if r.plan.zero is not ZeroMode.OFFLOAD]
    assert len(sample_rows(no_off, 7, 0)) == 7


def test_curves_table(capsys):
    assert main(["curves", "--model", "bert"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) >= 8
    assert "samples/s" in lines[1] and "best plan" in lines[1]


def test_curves_json_and_cpu(capsys):
    assert main(["curves", "--model", "bert", "--max-gpus", "16", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    pts = doc["points"]
    assert doc["resource"] == "gpu" and len(pts) >= 2 and max(p["amount"] for p in pts) <= 16
    assert all(p["throughput"] >= 0 for p in pts)
    assert main(["curves", "--model", "gpt2", "--resource", "cpu", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["resource"] == "cpu" and len(doc["points"]) >= 2


def test_curves_with_params_file(fitted, capsys):
    _, _, params, _ = fitted
    assert main(["curves", "--model", "bert", "--params", str(params), "--max-gpus", "8"]) == 0
    assert len(capsys.readouterr().out.strip().splitlines()) >= 4
    assert main(["curves", "--model", "gpt2", "--params", str(params)]) == 2
    assert "not of 'gpt2'" in capsys.readouterr().err


def test_fit_samples_on_shared_bert(tmp_path, capsys, shared_data):
    data = shared_data / "morphling" / "placements" / "bert.csv"
    if not data.is_file():
        pytest.skip(f"shared measurement data not found at {data}")
    out = tmp_path / "bert.json"
    rc = main(["fit", "--placements", str(data), "--model", "bert", "--samples", "7", "--seed", "0",
               "--starts", "2", "--out", str(out)])
    assert rc == 0, capsys.readouterr().err
    perf = PerformanceModel.from_dict(read_json(out))
    assert perf.model.name == "bert" and perf.n_samples == 7
    # >= 3 ZeRO-Offload rows drawn identify the offload parameters, but 7 rows for 8 parameters (fwd_s
    # fitted) hold the overlap exponents k_swap and k_off
    assert "k_opt_off" in perf.identified and not {"k_off", "k_swap"} & set(perf.identified)


def test_fit_with_fixed_forward_time_keeps_it(tmp_path, truth, capsys):
    data = tmp_path / "bert.csv"
    synthetic_csv(data, truth)
    out = tmp_path / "p.json"
    fwd = truth.params.fwd_s
    assert main(["fit", "--placements", str(data), "--model", "bert", "--starts", "2", "--fwd-s", repr(fwd),
                 "--out", str(out)]) == 0
    perf = PerformanceModel.from_dict(read_json(out))
    assert perf.params.fwd_s == fwd and "fwd_s" not in perf.identified
    assert perf.rmsle < 0.01  # the true forward time lets the seven k's reproduce the data
    assert "forward time fixed" in capsys.readouterr().err


def test_fit_forward_time_from_profile_directory(tmp_path, truth, capsys):
    data = tmp_path / "bert.csv"
    synthetic_csv(data, truth)
    prof = tmp_path / "profile"
    prof.mkdir()
    # two data-parallel runs on 1 node x 4 GPUs (8 samples per GPU at bert's batch 32): 80 and 96 ms forward,
    # the second with GC (strategy 2x: forward counted twice) -> 10 and 6 ms per sample; median 8 ms
    (prof / "config.csv").write_text("\ufeffnodes,gpus,parameter_size,batch_size,seq_hid,num_cpu_threads,zero_type,"
                                     "is_tp,is_pp\n1,4,336,1,512,8,0,0,0\n1,4,336,1,512,8,0,0,0\n", encoding="utf-8")
    (prof / "data.csv").write_text("\ufeffforward_time,Tcc,Topt,iter_time,strategy\n80,1,1,1,11\n96,1,1,1,21\n",
                                   encoding="utf-8")
    out = tmp_path / "p.json"
    assert main(["fit", "--placements", str(data), "--model", "bert", "--starts", "1", "--profile", str(prof),
                 "--out", str(out)]) == 0
    assert PerformanceModel.from_dict(read_json(out)).params.fwd_s == pytest.approx(0.008)


@pytest.mark.parametrize("value, rule", [("-1", "positive"), ("1e-9", "peak")])
def test_fit_bad_forward_time_exits_2(tmp_path, truth, capsys, value, rule):
    data = tmp_path / "bert.csv"
    synthetic_csv(data, truth)
    assert main(["fit", "--placements", str(data), "--model", "bert", "--fwd-s", value,
                 "--out", str(tmp_path / "p.json")]) == 2
    assert rule in capsys.readouterr().err

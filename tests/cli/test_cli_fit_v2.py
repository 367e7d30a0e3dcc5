"""``optsched fit`` with model v2 and the identifiability rules (issue 11): LLaMA-30B's six 3D rows
fit, and the output and the params JSON say which parameters were held and why."""

from __future__ import annotations

import pytest

from optsched.cli import main
from optsched.core.jsonio import read_json
from optsched.perf.performance_model import PerformanceModel

from helpers import shared_data_dir

PLACEMENTS = shared_data_dir() / "morphling" / "placements"


@pytest.mark.skipif(not (PLACEMENTS / "llama30.csv").is_file(), reason="../shared/data is absent")
def test_llama30_fits_and_says_which_parameters_were_held(tmp_path, capsys) -> None:
    out = tmp_path / "p.json"
    assert main(["fit", "--placements", str(PLACEMENTS / "llama30.csv"), "--model", "llama30", "--starts", "2",
                 "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "fitted llama30 (v2)" in text and "6 of 6 rows" in text
    assert "k_bwd           2          held: needs a gc row or a profiled forward time" in text
    assert "k_opt_off       1          held: needs a zero-offload row" in text
    assert "identified: k_sync, k_opt, k_const, fwd_s" in text
    doc = read_json(out)
    assert doc["form"] == "v2" and doc["fit"]["identified"] == ["k_sync", "k_opt", "k_const", "fwd_s"]
    assert {"k_bwd", "k_opt_off", "k_odd", "m_3d"} <= set(doc["fit"]["held"])
    pm = PerformanceModel.from_dict(doc)
    assert pm.form == "v2" and pm.params.is_eq1  # six rows identify no v2 term
    assert main(["fit", "--placements", str(PLACEMENTS / "llama30.csv"), "--model", "llama30", "--starts", "2",
                 "--model-form", "eq1", "--out", str(out)]) == 0
    assert read_json(out)["form"] == "eq1"
    assert "k_odd" not in capsys.readouterr().out


def test_too_few_rows_name_what_is_missing(tmp_path, capsys) -> None:
    rows = tmp_path / "two.csv"
    rows.write_text("exec_plan,placement,iter_time\n524,88888,2.66\n642,888888,2.74\n")
    assert main(["fit", "--placements", str(rows), "--model", "llama30", "--out", str(tmp_path / "p.json")]) == 2
    err = capsys.readouterr().err
    assert "2 row(s) of family 3d cannot fit" in err and "at least 4 rows are needed" in err
    assert "k_bwd (needs a gc row" in err and "Traceback" not in err


def _bert_rows(path, codes: tuple[str, ...]) -> None:
    """A placements CSV of BERT rows of plans ``codes`` on five placements, timed by the built-in model."""
    from optsched.core import get_cluster, get_model
    from optsched.perf.defaults import default_performance_model
    from optsched.perf.measurements import read_placements_csv

    lines = [(c, g) for c in codes for g in ("1", "2", "4", "8", "44")]
    path.write_text("exec_plan,placement,iter_time\n" + "".join(f"{c},{g},1.0\n" for c, g in lines))
    model = get_model("bert")
    rows = read_placements_csv(path, model)
    times = default_performance_model("bert", get_cluster("a800-8x8"), "A800").iteration_times(
        [(r.plan, r.gpus_per_node, r.cpus_per_gpu) for r in rows])
    body = "".join(f"{c},{g},{t:.6f}\n" for (c, g), t in zip(lines, times))
    path.write_text("exec_plan,placement,iter_time\n" + body)


def test_fit_warns_when_no_row_separates_the_forward_time(tmp_path, capsys) -> None:
    """Issue 25: without a profile and without gc rows the forward time is not identified: a warning names
    the model and the reason; with gc rows, or with --fwd-s, there is none."""
    no_gc, gc = tmp_path / "no_gc.csv", tmp_path / "gc.csv"
    _bert_rows(no_gc, ("ga", "zero-dp"))
    _bert_rows(gc, ("ga", "zero-dp", "gc"))
    args = ["fit", "--model", "bert", "--model-form", "eq1", "--starts", "1", "--out"]
    assert main(["fit", "--placements", str(no_gc), *args[1:], str(tmp_path / "a.json")]) == 0
    err = capsys.readouterr().err
    assert "WARNING optsched.perf.fitting: bert: the forward time is not identified: no gc row" in err
    assert "k_bwd held at 2" in err and err.count("forward time is not identified") == 1
    for extra, csv in (([], gc), (["--fwd-s", "0.01"], no_gc)):
        assert main(["fit", "--placements", str(csv), *extra, *args[1:], str(tmp_path / "b.json")]) == 0
        assert "WARNING" not in capsys.readouterr().err

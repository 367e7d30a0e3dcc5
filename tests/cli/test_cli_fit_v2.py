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

"""The Lyra kinds through the command line: gen-round with --servers/--reclaim, solve, gap, and bad
input as one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from optsched import cli


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_gen_round_solve_and_gap_reclaim(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    r = tmp_path / "r.json"
    code, _, err = _run(capsys, "gen-round", "--kind", "lyra-reclaim", "--servers", "20", "--reclaim", "6",
                        "--seed", "3", "--out", str(r))
    assert code == 0, err
    data = json.loads(r.read_text())
    assert data["kind"] == "lyra-reclaim" and data["reclaim"] == 6 and len(data["inference_nodes"]) == 20
    out_file = tmp_path / "d.json"
    code, _, err = _run(capsys, "solve", str(r), "--method", "exact", "--out", str(out_file))
    assert code == 0, err
    d = json.loads(out_file.read_text())
    assert d["status"] == "optimal" and len(d["servers"]) == 6
    code, out, err = _run(capsys, "gap", str(r), "--time-limit", "5")
    assert code == 0, err and "lyra-reclaim" in out


def test_bad_reclaim_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    r = tmp_path / "r.json"
    assert _run(capsys, "gen-round", "--kind", "lyra-reclaim", "--servers", "4", "--out", str(r))[0] == 0
    data = json.loads(r.read_text())
    data["reclaim"] = 9
    r.write_text(json.dumps(data))
    code, _, err = _run(capsys, "solve", str(r), "--method", "lyra")
    assert code == 2
    assert err.strip().count("\n") == 0 and "reclaim asks for 9 servers but only 4" in err


def test_gen_round_refuses_flags_of_other_kinds(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "gen-round", "--kind", "rubick", "--servers", "4")
    assert code == 2 and "does not take --servers" in err


def test_gen_round_and_solve_allocate(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    r = tmp_path / "a.json"
    code, _, err = _run(capsys, "gen-round", "--kind", "lyra-allocate", "--servers", "4", "--training", "6",
                        "--jobs", "5", "--seed", "1", "--out", str(r))
    assert code == 0, err
    out_file = tmp_path / "d.json"
    assert _run(capsys, "solve", str(r), "--method", "exact", "--out", str(out_file))[0] == 0
    d = json.loads(out_file.read_text())
    assert d["kind"] == "lyra-allocate" and d["status"] == "optimal" and set(d["workers"]) == \
        {j["name"] for j in json.loads(r.read_text())["jobs"]}


def test_gen_round_solve_and_gap_placement(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    r = tmp_path / "p.json"
    assert _run(capsys, "gen-round", "--kind", "placement", "--servers", "4", "--training", "4", "--jobs", "6",
                "--out", str(r))[0] == 0
    out_file = tmp_path / "d.json"
    code, _, err = _run(capsys, "solve", str(r), "--method", "exact", "--out", str(out_file))
    assert code == 0, err
    d = json.loads(out_file.read_text())
    assert d["kind"] == "placement" and "placements" in d and d["status"] in ("optimal", "feasible")
    code, out, err = _run(capsys, "gap", str(r), "--time-limit", "5")
    assert code == 0, err

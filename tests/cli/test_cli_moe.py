"""The command line on the MoE round kinds: ``gen-round --kind experts`` writes rounds that ``solve``
and ``gap`` take, and bad input ends with one error line and exit code 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from optsched import cli


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_experts_round_from_gen_round_to_solve_and_gap(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "experts.json"
    code, _, err = _run(capsys, "gen-round", "--kind", "experts", "--seed", "3", "--experts", "12", "--devices", "8",
                        "--out", str(path))
    assert code == 0, err
    data = json.loads(path.read_text())
    assert data["kind"] == "experts" and len(data["experts"]) == 12
    objectives = {}
    for method in ("uniform", "lina", "exact"):
        code, out, err = _run(capsys, "solve", str(path), "--method", method, "--time-limit", "5")
        assert code == 0, err
        d = json.loads(out)
        assert d["kind"] == "experts" and d["objective"] == -d["makespan"] and len(d["devices"]) == 8
        objectives[method] = d["objective"]
    assert objectives["exact"] >= objectives["lina"] >= objectives["uniform"] - 1e-9
    code, out, err = _run(capsys, "gap", str(path), "--time-limit", "2")
    assert code == 0, err
    assert "experts" in out and "optimal" in out


@pytest.mark.parametrize(("argv", "message"), [
    (("gen-round", "--kind", "experts", "--jobs", "3"), "gen-round --kind experts does not take --jobs"),
    (("gen-round", "--kind", "experts", "--experts", "40", "--devices", "2"), "40 experts do not fit 2 devices"),
])
def test_bad_generator_flags(capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], message: str) -> None:
    code, _, err = _run(capsys, *argv)
    assert code == 2 and err.count("\n") == 1 and message in err


def test_bad_round_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    code, _, _ = _run(capsys, "gen-round", "--kind", "experts", "--experts", "4", "--devices", "2", "--slots", "2",
                      "--out", str(path))
    assert code == 0
    data = json.loads(path.read_text())
    data["experts"][0]["min_replicas"] = 2
    data["experts"][1]["min_replicas"] = 2
    path.write_text(json.dumps(data))
    code, _, err = _run(capsys, "solve", str(path))
    assert code == 2 and err.count("\n") == 1
    assert "need at least 6 replicas, more than the 2 devices x 2 slots" in err


def test_moe_comm_round_from_gen_round_to_solve(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "comm.json"
    code, _, err = _run(capsys, "gen-round", "--kind", "moe-comm", "--seed", "1", "--moe-layers", "1", "--out",
                        str(path))
    assert code == 0, err
    steps = {}
    for method in ("fair", "lina", "exact"):
        code, out, err = _run(capsys, "solve", str(path), "--method", method, "--time-limit", "3")
        assert code == 0, err
        d = json.loads(out)
        assert d["kind"] == "moe-comm" and d["objective"] == -d["step_ms"] and d["tasks"]
        steps[method] = d["step_ms"]
    assert steps["exact"] <= min(steps["fair"], steps["lina"]) + 1e-9
    code, _, err = _run(capsys, "gen-round", "--kind", "moe-comm", "--experts", "4")
    assert code == 2 and "does not take --experts" in err

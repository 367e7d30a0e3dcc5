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


# -- optsched simulate --kind lyra ---------------------------------------------------------------------
def _simulate(capsys: pytest.CaptureFixture[str], out: Path, *extra: str) -> tuple[int, str, str]:
    return _run(capsys, "simulate", "--kind", "lyra", "--jobs", "30", "--training", "1", "--inference", "2",
                "--no-plots", "--no-progress", "--out", str(out), *extra)


def test_simulate_lyra_runs_a_small_synthetic_trace(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, err = _simulate(capsys, tmp_path / "sim", "--policy", "lyra", "fifo", "opportunistic")
    assert code == 0, err
    assert "30 jobs on lyra-1t-2i (1 training + 2 inference servers), usage synthetic" in out
    summary = json.loads((tmp_path / "sim" / "summary.json").read_text())
    assert list(summary["policies"]) == ["lyra", "fifo", "opportunistic"]
    assert summary["cluster"] == "lyra-1t-2i" and summary["ground_truth"] == "LyraGroundTruth"
    for policy in summary["policies"].values():
        assert policy["jobs"] == 30 and policy["finished"] == 30 and policy["failed_rounds"] == 0
    # Lyra scales elastic jobs (reconfigurations); the Baseline never does
    assert summary["policies"]["lyra"]["reconfigurations"] > 0 == summary["policies"]["fifo"]["reconfigurations"]
    rows = (tmp_path / "sim" / "jobs.csv").read_text().splitlines()
    assert len(rows) == 1 + 3 * 30


def test_simulate_lyra_usage_from_a_csv_or_none(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    usage = tmp_path / "usage.csv"
    usage.write_text("time_s,usage\n0,1.0\n300,1.0\n")  # inference needs every server: nothing is lent
    code, _, err = _simulate(capsys, tmp_path / "a", "--usage", str(usage), "--policy", "lyra")
    assert code == 0, err
    held = json.loads((tmp_path / "a" / "summary.json").read_text())["policies"]["lyra"]
    code, _, err = _simulate(capsys, tmp_path / "b", "--usage", "none", "--policy", "lyra")
    assert code == 0, err
    none = json.loads((tmp_path / "b" / "summary.json").read_text())["policies"]["lyra"]
    assert {k: held[k] for k in ("avg_jct_s", "makespan_s")} == {k: none[k] for k in ("avg_jct_s", "makespan_s")}
    code, _, err = _simulate(capsys, tmp_path / "c", "--policy", "lyra")
    assert code == 0, err
    lent = json.loads((tmp_path / "c" / "summary.json").read_text())["policies"]["lyra"]
    assert lent["avg_jct_s"] < none["avg_jct_s"]  # loaned inference servers shorten the queue


@pytest.mark.parametrize("extra, message", [
    (("--policy", "sia"), "--kind lyra: sia is no lyra method"),
    (("--cluster", "a800-8x8"), "--kind lyra: --cluster does not apply to its simulations"),
    (("--load", "2", "--ground-truth", "measured:x"), "--kind lyra: --load, --ground-truth do not apply"),
    (("--usage", "none", "--policy", "opportunistic"), "opportunistic baseline needs an inference usage series"),
    (("--usage", "missing.csv"), "usage CSV missing.csv: cannot be read"),
])
def test_simulate_lyra_bad_input_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                             extra: tuple[str, ...], message: str) -> None:
    code, _, err = _simulate(capsys, tmp_path / "sim", *extra)
    assert code == 2
    assert err.startswith("optsched: error:") and message in err and len(err.strip().splitlines()) == 1

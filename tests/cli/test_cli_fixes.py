"""Command-line behaviour a new user relies on (issue "One round layer for four systems", item 6):
repeated flags accumulate, bad files and outputs fail early with one line, the version, help texts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from optsched import __version__, cli


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "--version")
    assert code == 0 and out.strip() == f"optsched {__version__}"


def test_repeated_policy_flags_accumulate(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, err = _run(capsys, "simulate", "--jobs", "6", "--policy", "rubick", "--policy", "sia", "fifo",
                          "--no-plots", "--no-progress", "--out", str(tmp_path / "sim"))
    assert code == 0, err
    summary = json.loads((tmp_path / "sim" / "summary.json").read_text())
    assert list(summary["policies"]) == ["rubick", "sia", "fifo"]
    rows = [line.split()[0] for line in out.splitlines() if line.split()[:1] and line.split()[0] in
            ("rubick", "sia", "fifo")]
    assert rows == ["rubick", "sia", "fifo"]


@pytest.mark.parametrize("command", [("fit", "--model", "bert", "--out", "{tmp}/p.json"),
                                     ("predict", "--params", "{params}", "--out", "{tmp}/o.csv")])
def test_non_utf8_csv_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path, command: tuple[str, ...]) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_bytes(b"exec_plan,placement,iter_time\n\xff\xfe,1,2\n")
    params = tmp_path / "params.json"
    from optsched.perf.defaults import default_performance_model
    params.write_text(json.dumps(default_performance_model("bert").to_dict()))
    argv = [a.format(tmp=tmp_path, params=params) for a in command] + ["--placements", str(bad)]
    code, _, err = _run(capsys, *argv)
    assert code == 2
    assert err.strip() == f"optsched: error: {bad}: not a readable UTF-8 CSV file ('utf-8' codec can't decode " \
                          "byte 0xff in position 30: invalid start byte)"


def test_outputs_are_checked_before_any_work(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    code, _, err = _run(capsys, "simulate", "--out", str(a_file))
    assert code == 2 and err.strip() == f"optsched: error: --out {a_file}: exists and is not a directory"
    round_file = tmp_path / "r.json"
    assert _run(capsys, "gen-round", "--nodes", "1", "--jobs", "2", "--out", str(round_file))[0] == 0
    code, out, err = _run(capsys, "solve", str(round_file), "--out", str(tmp_path))
    assert code == 2 and err.strip() == f"optsched: error: --out {tmp_path}: is a directory; give a file name"
    code, _, err = _run(capsys, "solve", str(round_file), "--out", str(tmp_path / "missing" / "d.json"))
    assert code == 2 and "does not exist" in err
    code, _, err = _run(capsys, "fit", "--placements", "nope.csv", "--model", "bert", "--out", str(tmp_path))
    assert code == 2 and "is a directory" in err  # before the missing CSV is even read


def test_a_bad_cluster_file_is_named_once(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{bad")
    code, _, err = _run(capsys, "simulate", "--cluster", str(bad), "--out", str(tmp_path / "o"))
    assert code == 2 and err.count(str(bad)) == 1 and "malformed JSON at line 1, column 2" in err
    bad.write_text('{"name": "c"}')
    code, _, err = _run(capsys, "simulate", "--cluster", str(bad), "--out", str(tmp_path / "o"))
    assert code == 2 and err.count(str(bad)) == 1 and "missing field(s)" in err


def test_curves_on_a_gpu_type_the_cluster_lacks(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "curves", "--model", "bert", "--gpu-type", "T4")
    assert code == 2
    assert err.strip() == ("optsched: error: cluster 'a800-8x8' has no T4 GPUs (its GPU types: A800); pick "
                           "--gpu-type A800 or another --cluster")
    code, _, err = _run(capsys, "curves", "--model", "bert", "--gpu-type", "H999")
    assert code == 2 and "unknown GPU type 'H999'; known GPU types:" in err


def test_help_texts_say_what_the_commands_do(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = _run(capsys, "fit", "--help")
    assert "at random" not in out and "farthest in placement shape" in out
    _, out, _ = _run(capsys, "solve", "--help")
    assert "kind rubick: exact, rubick-exact, heuristic" in " ".join(out.split())


def test_solve_names_the_methods_of_the_round_kind(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    round_file = tmp_path / "r.json"
    assert _run(capsys, "gen-round", "--nodes", "1", "--jobs", "2", "--out", str(round_file))[0] == 0
    code, _, err = _run(capsys, "solve", str(round_file), "--method", "simplex")
    assert code == 2 and err.startswith("optsched: error: unknown method 'simplex' for round kind 'rubick'; known")
    code, out, err = _run(capsys, "solve", str(round_file), "--method", "sia")
    assert code == 0 and json.loads(out)["method"] == "sia"


def test_gen_round_takes_only_the_options_of_its_kind(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, _ = _run(capsys, "gen-round", "--seed", "2")
    data = json.loads(out)
    assert code == 0 and len(data["jobs"]) == 40 and len(data["cluster"]["nodes"]) == 8  # the kind's defaults
    from optsched.core import kinds
    from optsched.rounds.rubick import KIND

    def few_options(*, seed: int = 0, jobs: int = 3):  # a kind whose generator takes no --nodes
        return KIND.generate(seed=seed, nodes=1, jobs=jobs)
    monkeypatch.setitem(kinds._KINDS, "rubick", type(KIND)(KIND.name, KIND.problem, KIND.payload, few_options,
                                                             KIND.summary))
    code, out, _ = _run(capsys, "gen-round", "--jobs", "5")
    assert code == 0 and len(json.loads(out)["jobs"]) == 5 and len(json.loads(out)["cluster"]["nodes"]) == 1
    code, _, err = _run(capsys, "gen-round", "--experts", "4")
    assert code == 2 and err.strip() == "optsched: error: gen-round --kind rubick does not take --experts"
    # the flags are the registered generators' options: no kind takes --nodes now
    code, _, err = _run(capsys, "gen-round", "--nodes", "4")
    assert code == 2 and err.strip().endswith("optsched: error: unrecognized arguments: --nodes 4")


@pytest.mark.parametrize("command", [("gen-round",), ("simulate", "--jobs", "2", "--no-plots", "--no-progress")])
@pytest.mark.parametrize("seed", ["-1", "2147483648"])
def test_seeds_out_of_range_are_one_line(capsys: pytest.CaptureFixture[str], command: tuple[str, ...],
                                         seed: str) -> None:
    code, _, err = _run(capsys, *command, "--seed", seed)
    assert code == 2 and err.strip() == (f"optsched: error: --seed: seed must be an integer in [0, 2**31) (what CP-SAT "
                                         f"and numpy take), got {seed}")

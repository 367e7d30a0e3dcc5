"""Bad input a hostile or careless user gives the command line (issue 26, "Smaller"): one clear line naming
the item and the rule, exit code 2, never a traceback, and nothing done or left behind before the check."""

from __future__ import annotations

from pathlib import Path

import pytest

from optsched import cli


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000, '{"a": ' * 100_000 + "1" + "}" * 100_000],
                         ids=["arrays", "objects"])
def test_deeply_nested_json_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str) -> None:
    path = tmp_path / "deep.json"
    path.write_text(text)
    code, _, err = _run(capsys, "solve", str(path))
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert err.startswith(f"optsched: error: {path}: JSON nested too deeply")


@pytest.mark.parametrize(("flag", "value", "rule"), [
    ("--experts", "100000", "experts must be at most 1,024"),
    ("--devices", "100000000", "devices must be at most 4,096"),
    ("--tokens", "10000000000", "tokens must be at most 1,000,000"),
])
def test_experts_generator_sizes_are_checked_up_front(capsys: pytest.CaptureFixture[str], flag: str, value: str,
                                                      rule: str) -> None:
    """``--experts 100000`` used to die allocating 74.5 GiB (the router's experts x experts matrices), ``--devices
    100000000`` to build 25 million nodes, ``--tokens 10**10`` to allocate the batch: refused before any work."""
    code, out, err = _run(capsys, "gen-round", "--kind", "experts", flag, value)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert err.startswith(f"optsched: error: generate_experts_round: {rule}")


def test_an_unwritable_out_fails_before_the_solve(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """``--out /sys/x.json`` passed the ``os.access`` check as root (root may write anywhere, says access) and
    failed only after the solve; the file is now opened for writing before any work (and removed again)."""
    import optsched.cli.solve as solve_cmd

    round_file = tmp_path / "r.json"
    assert _run(capsys, "gen-round", "--nodes", "2", "--jobs", "4", "--out", str(round_file))[0] == 0

    def no_solve(*args: object, **kwargs: object) -> None:
        raise AssertionError("solved before the output was checked")

    monkeypatch.setattr(solve_cmd, "solve", no_solve)
    code, out, err = _run(capsys, "solve", str(round_file), "--out", "/sys/optsched-x.json")
    assert code == 2 and out == ""
    assert err.strip() in ("optsched: error: --out /sys/optsched-x.json: not writable (Permission denied)",
                           "optsched: error: --out /sys/optsched-x.json: not writable")
    # a writable --out is left as it was: no new file, an existing one not truncated
    monkeypatch.undo()
    fresh, kept = tmp_path / "fresh.json", tmp_path / "kept.json"
    kept.write_text("old")
    from optsched.cli.common import check_output_file
    check_output_file(fresh)
    check_output_file(kept)
    assert not fresh.exists() and kept.read_text() == "old"


def test_a_failing_simulate_leaves_no_out_directory(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """``simulate --out DIR`` created DIR (and its parents) in the output check, so a run that then failed left
    them behind, empty; the check now removes what it created, and the outputs' writer creates DIR."""
    out_dir = tmp_path / "new" / "sim"
    code, _, err = _run(capsys, "simulate", "--jobs", "4", "--trace", str(tmp_path / "missing.csv"), "--no-plots",
                        "--no-progress", "--out", str(out_dir))
    assert code == 2 and "missing.csv: cannot read file" in err
    assert not (tmp_path / "new").exists()
    code, _, err = _run(capsys, "simulate", "--jobs", "4", "--policy", "fifo", "--no-plots", "--no-progress",
                        "--out", str(out_dir))
    assert code == 0, err
    assert (out_dir / "summary.json").is_file()


@pytest.mark.parametrize("kind", ["lyra", "lyra-allocate"])
@pytest.mark.parametrize("value", ["inf", "nan", "-1", "0"])
def test_gen_round_load_must_be_finite_and_positive(capsys: pytest.CaptureFixture[str], kind: str,
                                                     value: str) -> None:
    """``--load inf`` used to be accepted (every drawn job queued); simulate already refused it."""
    code, out, err = _run(capsys, "gen-round", "--kind", kind, "--load", value)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert err.startswith(f"optsched: error: gen-round {kind}: load must be ")


def test_partitions_1_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """``--partitions 1`` used to be accepted and solve the round unpartitioned without a word; K must be >= 2
    (leave the option out for an unpartitioned solve), as docs/cli.md says."""
    round_file = tmp_path / "r.json"
    assert _run(capsys, "gen-round", "--nodes", "2", "--jobs", "4", "--out", str(round_file))[0] == 0
    code, out, err = _run(capsys, "solve", str(round_file), "--partitions", "1")
    assert code == 2 and out == ""
    assert err.strip() == ("optsched: error: partitions must be an integer >= 2 (leave it out for an unpartitioned "
                           "solve), got 1")


@pytest.mark.parametrize("kind", ["rubick", "crius", "lyra"])
@pytest.mark.parametrize(("value", "rule"), [
    ("-1", "--max-jobs must be an integer >= 1, got -1"),
    ("5", "--max-jobs applies to Philly and ITP trace files (it keeps their first N jobs); the synthetic trace "
          "has --jobs N jobs"),
])
def test_max_jobs_is_checked_and_refused_on_synthetic_traces(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                            kind: str, value: str, rule: str) -> None:
    """``simulate --max-jobs -1`` (or any N) on the synthetic trace used to be ignored without a word."""
    code, out, err = _run(capsys, "simulate", "--kind", kind, "--jobs", "4", "--max-jobs", value, "--no-plots",
                          "--no-progress", "--out", str(tmp_path / "sim"))
    assert code == 2 and out == ""
    assert err.strip() == f"optsched: error: {rule}"


@pytest.mark.parametrize("backend", ["highs", "cbc"])
@pytest.mark.parametrize("kind", ["lyra", "lyra-allocate", "lyra-reclaim", "placement"])
def test_a_backend_the_method_does_not_use_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                      kind: str, backend: str) -> None:
    round_file = tmp_path / "r.json"
    assert _run(capsys, "gen-round", "--kind", kind, "--out", str(round_file))[0] == 0
    code, out, err = _run(capsys, "solve", str(round_file), "--backend", backend)
    assert code == 2 and out == ""
    assert err.startswith(f"optsched: error: method 'exact' of round kind '{kind}' does not use backend "
                          f"'{backend}'")
    assert "rubick: exact, rubick-exact" in err


def test_solve_counts_its_time_limit_from_the_call_not_after_importing_the_solve_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 26: ``solve``'s clock started after its module had imported the solve path (0.8 s of OR-Tools,
    SciPy and the policies), so ``--time-limit 1`` took 1.8-2.0 s; it now starts when :func:`cli.main` is
    called, before the subcommand is imported."""
    import time

    import optsched.cli.solve as solve_cli

    round_file = tmp_path / "r.json"
    assert cli.main(["gen-round", "--jobs", "6", "--nodes", "2", "--out", str(round_file)]) == 0
    seen: dict[str, float] = {}
    real = solve_cli.solve

    def spy(*args: object, **kwargs: object) -> object:
        seen["clock_start"] = float(kwargs["clock_start"])  # type: ignore[arg-type]
        seen["called"] = time.perf_counter()
        return real(*args, **kwargs)
    monkeypatch.setattr(solve_cli, "solve", spy)
    before = time.perf_counter()
    assert cli.main(["solve", str(round_file), "--method", "heuristic", "--out", str(tmp_path / "d.json")]) == 0
    assert before <= seen["clock_start"] < seen["called"]


def test_the_command_flushes_its_output_and_exit_code_before_it_ends_the_process(tmp_path: Path) -> None:
    """``python -m optsched.cli`` (and the ``optsched`` script) ends with ``os._exit`` to skip the interpreter's
    teardown (0.24 s past the limit after a 2,000-job solve): what it wrote and its exit code still arrive."""
    import subprocess
    import sys

    ok = subprocess.run([sys.executable, "-m", "optsched.cli", "gen-round", "--jobs", "4", "--nodes", "2"],
                        capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0 and ok.stdout.strip().startswith("{") and ok.stdout.strip().endswith("}")
    bad = subprocess.run([sys.executable, "-m", "optsched.cli", "solve", str(tmp_path / "missing.json")],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and bad.stderr.strip().endswith("(No such file or directory)")

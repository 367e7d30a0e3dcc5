"""Adding a round kind touches no file of the package: a toy kind (``tests/toy_kind_source.py``) written
into a temporary module registers its problem, generator, heuristic, exact contract and simulation
setup, and ``optsched gen-round``, ``solve``, ``gap`` and ``simulate`` take it from the registries
(docs/architecture.md, "A new round kind"). The registries are restored afterwards."""

from __future__ import annotations

import csv
import importlib
import json
import sys
from pathlib import Path
from typing import Iterator

import pytest

import optsched  # noqa: F401  (the built-in kinds)
from optsched.cli import main
from optsched.core import kinds
from optsched.core.round import RoundProblem
from optsched.policies import exact, registry
from optsched.sim import setup as sim_setup

from toy_kind_source import SOURCE


@pytest.fixture()
def toy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    sim_setup.simulation_kinds()  # the built-in setups registered first, so that the copies hold them
    for module, name in ((kinds, "_KINDS"), (registry, "_METHODS"), (exact, "_CONTRACTS"),
                         (sim_setup, "_SETUPS")):
        monkeypatch.setattr(module, name, dict(getattr(module, name)))
    (tmp_path / "toy_kind_module.py").write_text(SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.import_module("toy_kind_module")
    yield
    sys.modules.pop("toy_kind_module", None)


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code = main(list(argv))
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return captured.out


def test_a_toy_kind_runs_through_every_command(toy: None, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    round_file = tmp_path / "toy.json"
    _run(capsys, "gen-round", "--kind", "toy-gang", "--nodes", "2", "--jobs", "7", "--seed", "3",
         "--out", str(round_file))
    problem = RoundProblem.from_dict(json.loads(round_file.read_text()))
    assert problem.kind == "toy-gang" and len(problem.jobs) == 7 and len(problem.cluster.nodes) == 2

    heuristic = json.loads(_run(capsys, "solve", str(round_file), "--method", "first-fit"))
    decision = json.loads(_run(capsys, "solve", str(round_file), "--time-limit", "5"))
    assert decision["kind"] == "toy-gang" and decision["status"] == "optimal"
    assert decision["objective"] >= heuristic["objective"] and decision["heuristic_objective"] == heuristic["objective"]
    placed = [j for j in decision["jobs"] if j["placement"]]
    assert placed and all(len(j["placement"]) == 1 for j in placed)  # one node per gang

    gap_csv = tmp_path / "gap.csv"
    _run(capsys, "gap", str(round_file), "--time-limit", "5", "--out", str(gap_csv))
    row = next(csv.DictReader(gap_csv.open()))
    assert row["kind"] == "toy-gang" and row["status"] == "optimal"
    assert float(row["exact_objective"]) == decision["objective"]

    printed = _run(capsys, "simulate", "--kind", "toy-gang", "--jobs", "6", "--no-plots", "--no-progress",
                   "--out", str(tmp_path / "sim"))
    assert "toy trace: 6 jobs" in printed and "first-fit" in printed and "exact" in printed
    summary = json.loads((tmp_path / "sim" / "summary.json").read_text())
    assert set(summary["policies"]) == {"first-fit", "exact"}
    assert all(p["finished"] == 6 for p in summary["policies"].values())


def test_the_toy_kind_is_gone_afterwards() -> None:
    assert "toy-gang" not in kinds.round_kinds() and "toy-gang" not in exact.exact_kinds()
    assert "toy-gang" not in sim_setup.simulation_kinds()

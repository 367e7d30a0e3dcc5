"""Gap studies (optsched/experiments/gap.py, ``optsched gap``): the measured quantities are consistent
(bound >= exact >= heuristic, gaps from them, LP bound >= optimum), the growth-exponent fit recovers a
known exponent, and the command prints and writes the table."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from optsched import cli
from optsched.core import ValidationError
from optsched.experiments.gap import gap_row, growth_exponent, median_by
from optsched.rounds.rubick.generate import generate_rubick_round


@pytest.fixture(scope="module")
def row() -> dict:
    return gap_row(generate_rubick_round(4, 8, 16, 2), time_limit=20.0, label="small")


def test_a_row_is_consistent(row: dict) -> None:
    assert row["kind"] == "rubick" and row["gpus"] == 32 and row["jobs"] == 16 and row["instance"] == "small"
    assert row["status"] == "optimal" and row["gap"] == pytest.approx(0.0, abs=1e-6)
    assert row["bound"] >= row["exact_objective"] - 1e-6 >= row["heuristic_objective"] - 1e-6
    assert row["heuristic_gap"] == pytest.approx((row["bound"] - row["heuristic_objective"]) / abs(row["bound"]))
    assert row["lp_bound"] >= row["exact_objective"] - 1e-6
    for label in ("warm", "cold"):  # proven optimal, so both reached 1% and a first solution
        assert 0 < row[f"first_{label}_s"] <= row[f"gap1_{label}_s"] + 1e-9 <= row["exact_s"] * 3 + 1.0


def test_growth_exponent_and_medians() -> None:
    sizes = [8, 16, 32, 64, 128]
    assert growth_exponent(sizes, [0.5 * s ** 1.5 for s in sizes]) == pytest.approx(1.5)
    assert growth_exponent([8, 8], [1.0, 2.0]) is None
    assert growth_exponent(sizes, [None, 0.0, 1.0, None, None]) is None
    rows = [{"g": 1, "v": 3.0}, {"g": 1, "v": 1.0}, {"g": 2, "v": None}, {"g": 2, "v": 5.0}]
    assert median_by(rows, "g", "v") == {1: 2.0, 2: 5.0}


def test_unknown_kind_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from optsched.experiments import gap
    monkeypatch.setattr(gap, "probe_of", lambda kind: None)
    with pytest.raises(ValidationError, match="no gap study for rounds of kind 'rubick'"):
        gap_row(generate_rubick_round(1, 8, 3, 0))


def test_gap_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    round_file = tmp_path / "r.json"
    round_file.write_text(json.dumps(generate_rubick_round(2, 8, 8, 1).to_dict()))
    out = tmp_path / "gap.csv"
    assert cli.main(["gap", str(round_file), "--time-limit", "10", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "r.json" in printed and "optimal" in printed
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 1 and rows[0]["instance"] == "r.json" and rows[0]["status"] == "optimal"
    assert cli.main(["gap", str(round_file), "--time-limit", "0"]) == 2


def test_gap_points_run_as_a_sweep_with_the_rows_of_a_serial_run() -> None:
    from optsched.experiments.gap import GapPoint, run_gap_point
    from optsched.experiments.sweep import run_sweep
    points = [GapPoint("rubick", (("jobs", 6), ("nodes", 2)), seed, 10.0) for seed in (0, 1)]
    assert points[0].label == "rubick-jobs6-nodes2-s0"
    serial = run_sweep(points, "local", workers=1, fn=run_gap_point)
    pooled = run_sweep(points, "local", workers=2, fn=run_gap_point)
    assert [r["instance"] for r in pooled] == ["rubick-jobs6-nodes2-s0", "rubick-jobs6-nodes2-s1"]
    same = ("instance", "gpus", "jobs", "status", "heuristic_objective", "exact_objective", "bound", "lp_bound")
    assert [{k: r[k] for k in same} for r in serial] == [{k: r[k] for k in same} for r in pooled]
    assert all(r["status"] == "optimal" for r in serial)


@pytest.mark.parametrize("kwargs, words", [
    ({"kind": "nope"}, ["no gap study", "'nope'"]),
    ({"kind": "rubick", "options": (("racks", 2),)}, ["no option(s) racks", "nodes"]),
    ({"kind": "rubick", "seed": -1}, ["seed must be an integer >= 0"]),
    ({"kind": "rubick", "time_limit": 0}, ["time limit must be a positive number"]),
])
def test_bad_gap_points_name_the_item(kwargs: dict, words: list[str]) -> None:
    from optsched.experiments.gap import GapPoint
    with pytest.raises(ValidationError) as err:
        GapPoint(**kwargs)
    for w in words:
        assert w in str(err.value)


def test_each_kind_has_its_size_measure() -> None:
    """Gap studies grow each kind along its own size: GPUs, jobs for crius (its cluster is fixed),
    experts x devices for experts, operations for moe-comm."""
    from optsched.core.kinds import round_kind
    from optsched.experiments.gap import size_of
    crius = round_kind("crius").generate(seed=0, jobs=30)
    assert size_of(crius) == ("jobs", 30)
    experts = round_kind("experts").generate(seed=0, experts=12, devices=6)
    assert size_of(experts) == ("experts x devices", 72)
    comm = round_kind("moe-comm").generate(seed=0)
    assert size_of(comm) == ("operations", len(comm.stream) + len(comm.allreduces))
    rubick = round_kind("rubick").generate(seed=0, nodes=3, jobs=5)
    assert size_of(rubick) == ("GPUs", 24)


def test_gap_says_when_it_deferred_a_guarantee_solve_would_refuse(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 26: a round ``solve`` calls infeasible (``big``'s guarantee needs 4 GPUs on one node, no node has
    4 free) is studied with the guarantee deferred, and the row and the command's output say so."""
    from optsched.core import Job, NodeShare, a800_cluster
    from optsched.rounds.rubick.problem import RubickRound
    from optsched.rounds.rubick.table import build_round_table
    from helpers import best_row, row_alloc
    cluster = a800_cluster(2, 4)
    a = Job("a", "vit", 2, 1000, tenant="t", guaranteed=True, submit_time=0.0)
    big = Job("big", "bert", 4, 1000, tenant="t", guaranteed=True, submit_time=5.0)
    table = build_round_table(RubickRound(cluster, (a,)))
    running = row_alloc(table, "a", best_row(table, "a", 2), ["n000"])
    problem = RubickRound(cluster, (a, big), (running,), occupied=(("n000", NodeShare(1, 0, 0.0)),
                                                                  ("n001", NodeShare(1, 0, 0.0))), quotas=(("t", 6),))
    round_file = tmp_path / "frag.json"
    round_file.write_text(json.dumps(problem.to_dict()))
    assert cli.main(["solve", str(round_file)]) == 2  # the default contract refuses the round
    capsys.readouterr()
    row = gap_row(problem, time_limit=5.0, label="frag")
    assert row["deferred"] == 1 and row["deferred_jobs"] == "big" and "infeasible" in row["note"]
    assert cli.main(["gap", str(round_file), "--time-limit", "5"]) == 0
    printed = capsys.readouterr().out
    assert "frag.json: deferred the unreachable performance guarantee of 1 job(s) (big)" in printed
    assert "solve without it reports this round infeasible" in printed
    clean = gap_row(generate_rubick_round(2, 8, 8, 1), time_limit=10.0)
    assert clean["deferred"] == 0 and clean["note"] == ""

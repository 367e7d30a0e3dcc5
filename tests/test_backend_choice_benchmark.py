"""``benchmarks/backend_choice.py`` (issue 29, item 3): one small run writes both tables, every back end reaches the
same optimum on the small rounds, and the summary's median and max are those of the rows."""

from __future__ import annotations

import csv
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import pytest  # noqa: E402

import backend_choice as bc  # noqa: E402


def test_a_small_run_writes_both_tables(tmp_path: Path) -> None:
    assert bc.main(["--families", "peer-hard-64,crius-12", "--seeds", "0-1", "--backends", "cpsat,switch",
                    "--limit", "20", "--out", str(tmp_path)]) == 0
    with open(tmp_path / "backend_choice.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2 * 2 * 2
    assert all(r["status"] == "optimal" and float(r["objective"]) == float(r["best"]) for r in rows)
    assert {r["ran"] for r in rows if r["backend"] == "switch"} == {"cpsat"}  # small rounds: proven within budget
    with open(tmp_path / "backend_choice_summary.csv", newline="") as f:
        summary = list(csv.DictReader(f))
    assert len(summary) == 4
    for s in summary:
        secs = sorted(float(r["seconds"]) for r in rows if r["family"] == s["family"] and r["backend"] == s["backend"])
        assert float(s["max_s"]) == secs[-1] and int(s["optimal"]) == 2 and int(s["below_best"]) == 0


def test_seeds_and_unknown_families() -> None:
    assert bc.seeds_of("3") == [3] and bc.seeds_of("0-2") == [0, 1, 2]
    with pytest.raises(SystemExit, match="unknown family 'nope-5'"):
        bc.family_round("nope-5", 0)

"""``benchmarks/service_load.py`` (issue 26, item 3: the service's load table): its counting rules, and one small
run against a real server (one level of one client, one hang-up) that writes the table."""

from __future__ import annotations

import csv
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("uvicorn", reason="the service needs the 'serve' extra (uvicorn)")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import report  # noqa: E402
import service_load  # noqa: E402


def test_percentiles_and_empty_partials() -> None:
    assert service_load.percentile([3.0, 1.0, 2.0, 4.0], 50) == 2.0
    assert service_load.percentile([3.0, 1.0, 2.0, 4.0], 95) == 4.0
    placed = {"status": "partial", "objective": 1.5, "jobs": [{"job": "a", "placement": {"n0": {"gpus": 1}}}]}
    assert not service_load.empty_partial(placed)
    assert service_load.empty_partial({**placed, "objective": 0.0})
    assert service_load.empty_partial({**placed, "jobs": [{"job": "a", "placement": {}}]})
    assert not service_load.empty_partial({**placed, "status": "optimal", "objective": 0.0})
    r = service_load.row("load", 2, [(200, {**placed, "objective": 0, "queued_seconds": 0.25}, 1.0),
                                     (503, {"error": "x", "queued_seconds": 1.5}, 2.0), (0, None, 3.0)])
    assert dict(zip(service_load.HEADER, r)) == {
        "scenario": "load", "clients": 2, "requests": 3, "p50_s": "2.00", "p95_s": "3.00", "http_200": 1,
        "http_503": 1, "http_other": 1, "optimal": 0, "feasible": 0, "partial": 1, "heuristic": 0, "fallback": 0,
        "empty_partial": 1, "max_queued_s": "1.50"}


def test_a_small_run_writes_the_table(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setattr(report, "OUT", tmp_path)
    assert service_load.main(["--clients", "1", "--seconds", "1", "--requests", "2", "--hang-ups", "1"]) == 0
    with open(tmp_path / "service_load.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["scenario"] for r in rows] == ["load", "after 1 hang-ups"]
    assert rows[0]["http_other"] == "0" and int(rows[0]["http_200"]) >= 1 and rows[0]["empty_partial"] == "0"
    assert rows[1]["http_200"] == "1" and float(rows[1]["p50_s"]) < 8.0  # not held up by the abandoned solve

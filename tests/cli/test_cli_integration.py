"""``optsched solve`` for external schedulers (issue 16): the round on standard input, self-contained rounds,
errors that say how to fix the round."""

from __future__ import annotations

import io
import json
import sys
from typing import Any

from helpers import chosen_row_is_given, own_coefficients_round

from optsched.cli import main


def _stdin(monkeypatch: Any, text: str) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode("utf-8"))))


def test_solve_reads_the_round_from_standard_input(monkeypatch: Any, capsys: Any) -> None:
    data = own_coefficients_round()
    _stdin(monkeypatch, json.dumps(data))
    assert main(["solve", "-", "--method", "heuristic"]) == 0
    chosen_row_is_given(data, json.loads(capsys.readouterr().out))
    _stdin(monkeypatch, '{"kind": ')
    assert main(["solve", "-"]) == 2
    assert capsys.readouterr().err.strip().endswith(
        "optsched: error: standard input: malformed JSON at line 1, column 10: Expecting value")


def test_unknown_model_error_mentions_how_to_define_it(monkeypatch: Any, capsys: Any) -> None:
    data = {"kind": "rubick", "cluster": "a800-8x8",
            "jobs": [{"name": "x", "model": "my-13b", "requested_gpus": 2, "total_iterations": 10}]}
    _stdin(monkeypatch, json.dumps(data))
    assert main(["solve", "-", "--method", "heuristic"]) == 2
    err = capsys.readouterr().err
    assert "unknown model 'my-13b'" in err and "--params" in err and "perf_params" in err

"""Issue 26: a job with no work left is refused naming it (every kind; ``on_invalid_job: skip`` skips it in a
``rubick`` round), and a job submitted after the round's time is scheduled with a warning naming it
(optsched/core/round.py, "Finished and future jobs"; docs/rounds.md, "Invalid jobs")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from optsched import cli
from optsched.core import ValidationError
from optsched.core.kinds import round_kind
from optsched.core.round import RoundProblem
from optsched.policies.solve import solve

KINDS = ("rubick", "crius", "lyra", "lyra-allocate", "placement")


def _round(kind: str, *, finished: bool = False, future: bool = False) -> tuple[dict, str]:
    data = round_kind(kind).generate(seed=0).to_dict()
    job = data["jobs"][0]
    if finished:
        job["completed_iterations"] = job["total_iterations"]
    if future:
        job["submit_time"] = data.get("time", 0.0) + 1000.0
    return data, job["name"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_finished_job_is_refused_naming_it(kind: str) -> None:
    data, name = _round(kind, finished=True)
    with pytest.raises(ValidationError, match=f"job '{name}' has no work left .*a finished job is not scheduled"):
        RoundProblem.from_dict(data)


def test_a_finished_job_is_skipped_under_skip_and_the_rest_solved() -> None:
    data, name = _round("rubick", finished=True)
    problem = RoundProblem.from_dict(data, on_invalid_job="skip")
    assert [s.job for s in problem.skipped] == [name] and "no work left" in problem.skipped[0].reason
    decision = solve(problem, "heuristic")
    assert name not in {j.job for j in decision.jobs}
    assert [s.job for s in decision.skipped] == [name]


def test_the_cli_refuses_a_finished_job_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data, name = _round("crius", finished=True)
    path = tmp_path / "r.json"
    path.write_text(json.dumps(data))
    assert cli.main(["solve", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"'{name}' has no work left" in err


@pytest.mark.parametrize("kind", ("rubick", "crius", "lyra"))
def test_a_job_submitted_after_the_round_time_is_named_in_a_warning(kind: str) -> None:
    data, name = _round(kind, future=True)
    problem = RoundProblem.from_dict(data)
    warned = [w for w in problem.warnings() if "submit_time after the round's time" in w]
    assert len(warned) == 1 and f"'{name}'" in warned[0]
    method = "bfd" if kind == "lyra" else "heuristic"
    assert f"'{name}'" in solve(problem, method).message
    assert not [w for w in RoundProblem.from_dict(_round(kind)[0]).warnings() if "submit_time" in w]

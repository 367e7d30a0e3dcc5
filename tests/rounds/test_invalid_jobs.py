"""One bad job never sinks the round (``on_invalid_job``; docs/rounds.md, "Invalid jobs";
:mod:`optsched.core.skip`): with ``"skip"`` every job that fails validation, at parsing, at construction
or when the tables are built, is left out with its error as the reason, every method of the kind (the
partitioned solve too) reports the same ``skipped`` list and a feasible decision for the rest; with
``"error"`` (the default) the same round fails with the one-line error of today. A skipped running job's
allocation stays held where it fits. And every ``wait`` or ``preempt`` of every method carries a reason."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

import optsched
from optsched.cli import main
from optsched.core.capacity import NodeUsage
from optsched.core.decision import Decision, JobAllocations
from optsched.core.errors import OptschedError, ValidationError
from optsched.core.kinds import round_kind, round_kinds
from optsched.core.round import RoundProblem
from optsched.core.skip import SkippedJob
from optsched.policies.registry import methods_of
from optsched.rounds.rubick.generate import generate_rubick_round
from optsched.rounds.rubick.table import valid_round

#: job name -> (its JSON fields over a valid queued job, words its reason must hold: the rule it broke)
INVALID: dict[str, tuple[dict[str, Any], tuple[str, ...]]] = {
    "bad-tp": ({"model": "gpt2", "requested_gpus": 2, "requested_plan": {"dp": 1, "tp": 2, "pp": 1}},
               ("requested plan", "tp=2 does not divide the 25 attention heads")),
    "no-gpu-type": ({"requested_gpus": 64}, ("no GPU type of cluster", "64 GPUs")),
    "unknown-model": ({"model": "nope-7b"}, ("unknown model 'nope-7b'",)),
    "outside-range": ({"requested_gpus": 4, "min_gpus": 1, "max_gpus": 2}, ("requests 4 GPUs, outside its range",)),
    "bad-field-type": ({"requested_gpus": "four"}, ("jobs[", "requested_gpus must be an integer")),
}


def _round(*names: str) -> dict[str, Any]:
    """A generated 2x8 round (6 jobs, one running) plus the invalid jobs ``names`` of :data:`INVALID`."""
    data = generate_rubick_round(2, 8, 6, 1).to_dict()
    template = {k: v for k, v in data["jobs"][1].items() if k != "completed_iterations"}
    for name in names:
        data["jobs"].append({**copy.deepcopy(template), "name": name, **INVALID[name][0]})
    return json.loads(json.dumps(data))


def _fits(problem: RoundProblem, decision: Decision) -> None:
    """The decision's allocations and the round's occupied shares fit every node."""
    usage = NodeUsage()
    usage.add_all(problem.occupied)
    for a in decision.allocations.values():
        usage.add_all(a.placement.shares)
    cap = {n.name: n for n in problem.cluster.nodes}
    from optsched.core.allocation import NodeShare
    assert usage.overflows(lambda n: NodeShare(cap[n].num_gpus, cap[n].num_cpus, float(cap[n].memory_gib)), 1e-6) == []


def _check_reasons(skipped: tuple[SkippedJob, ...], names: tuple[str, ...]) -> None:
    assert sorted(s.job for s in skipped) == sorted(names)
    for s in skipped:
        for words in INVALID[s.job][1]:
            assert words in s.reason, (s.job, s.reason)


@pytest.mark.parametrize("name", sorted(INVALID))
def test_each_invalid_job_fails_the_round_by_default(name: str) -> None:
    data = _round(name)
    with pytest.raises(ValidationError) as error:
        optsched.solve(RoundProblem.from_dict(data), "heuristic", 5.0)
    for words in INVALID[name][1]:
        assert words in str(error.value)
    assert "\n" not in str(error.value)
    with pytest.raises(ValidationError):  # the round's field "error" is the default
        optsched.solve(RoundProblem.from_dict({**data, "on_invalid_job": "error"}, on_invalid_job="skip"),
                       "heuristic", 5.0)


@pytest.mark.parametrize("method", methods_of("rubick"))
def test_every_method_skips_the_invalid_jobs_and_solves_the_rest(method: str) -> None:
    names = tuple(sorted(INVALID))
    problem = RoundProblem.from_dict({**_round(*names), "on_invalid_job": "skip"})
    decision = optsched.solve(problem, method, 5.0)
    _check_reasons(decision.skipped, names)
    assert {d.job for d in decision.jobs} == {f"job{i}" for i in range(6)}
    _fits(valid_round(problem), decision)  # type: ignore[arg-type]
    assert Decision.from_dict(json.loads(json.dumps(decision.to_dict()))) == decision
    clean = optsched.solve(RoundProblem.from_dict(_round()), method, 5.0)
    assert decision.objective == pytest.approx(clean.objective, rel=1e-6) or method in ("exact", "rubick-exact")


def test_partitioned_solve_reports_the_same_skipped_list() -> None:
    names = tuple(sorted(INVALID))
    problem = RoundProblem.from_dict(_round(*names), on_invalid_job="skip")
    whole = optsched.solve(problem, "heuristic", 5.0)
    parts = optsched.solve(problem, "heuristic", 5.0, partitions=2)
    assert parts.skipped == whole.skipped and {d.job for d in parts.jobs} == {d.job for d in whole.jobs}


def test_the_rounds_field_wins_over_the_option_and_other_kinds_refuse_skip() -> None:
    data = _round("outside-range")
    assert RoundProblem.from_dict(data, on_invalid_job="skip").skipped[0].job == "outside-range"
    with pytest.raises(ValidationError, match="outside its range"):
        RoundProblem.from_dict({**data, "on_invalid_job": "error"}, on_invalid_job="skip")
    with pytest.raises(ValidationError, match="on_invalid_job"):
        RoundProblem.from_dict({**data, "on_invalid_job": "sometimes"})
    skipping = RoundProblem.from_dict({**data, "on_invalid_job": "skip"})
    assert skipping.to_dict()["on_invalid_job"] == "skip" and "on_invalid_job" not in RoundProblem.from_dict(
        _round()).to_dict()
    for kind in round_kinds():
        if round_kind(kind).problem.SKIPS_INVALID_JOBS:
            continue
        other = round_kind(kind).generate(seed=0).to_dict()
        with pytest.raises(ValidationError, match="on_invalid_job 'skip' is not supported by"):
            RoundProblem.from_dict({**other, "on_invalid_job": "skip"})
        with pytest.raises(ValidationError, match="on_invalid_job 'skip' is not supported by"):
            RoundProblem.from_dict(other, on_invalid_job="skip")
        assert RoundProblem.from_dict({**other, "on_invalid_job": "error"}).to_dict() == RoundProblem.from_dict(
            other).to_dict()


def test_a_skipped_running_job_keeps_its_gpus_held() -> None:
    data = _round()
    run = data["running"][0]
    job = next(j for j in data["jobs"] if j["name"] == run["job"])
    job["max_gpus"] = 0  # breaks its own constraints: skipped, its allocation held as occupied
    problem = RoundProblem.from_dict(data, on_invalid_job="skip")
    assert [s.job for s in problem.skipped] == [run["job"]] and "released" not in problem.skipped[0].reason
    assert problem.current(run["job"]) is None
    for node, share in run["placement"].items():
        assert dict(problem.occupied)[node].gpus == share["gpus"]
    decision = optsched.solve(problem, "exact", 5.0)
    _fits(problem, decision)
    assert run["job"] not in {d.job for d in decision.jobs}


def test_an_overflowing_running_allocation_is_skipped_and_released() -> None:
    data = _round()
    node = next(iter(data["running"][0]["placement"]))
    data["occupied"] = {node: {"gpus": 8, "cpus": 0, "mem_gb": 0.0}}
    with pytest.raises(ValidationError, match="over capacity in GPUs"):
        RoundProblem.from_dict(data)
    problem = RoundProblem.from_dict(data, on_invalid_job="skip")
    (skip,) = problem.skipped
    assert skip.job == data["running"][0]["job"] and "over capacity in GPUs" in skip.reason
    assert "its running allocation is released" in skip.reason
    assert dict(problem.occupied)[node].gpus == 8
    _fits(problem, optsched.solve(problem, "heuristic", 5.0))


def test_duplicate_names_and_unreadable_entries_are_per_job() -> None:
    data = _round()
    data["jobs"].append(dict(data["jobs"][2]))
    data["jobs"].append({"name": "no-model", "requested_gpus": 1})
    data["jobs"].append(["not", "a", "job"])
    problem = RoundProblem.from_dict(data, on_invalid_job="skip")
    reasons = {s.job: s.reason for s in problem.skipped}
    assert set(reasons) == {"job2", "no-model", f"jobs[{len(data['jobs']) - 1}]"}
    assert "used twice" in reasons["job2"] and "missing field(s) model" in reasons["no-model"]
    assert "job2" not in {j.name for j in problem.jobs}
    bad_cluster = {**data, "cluster": {"name": "x"}}
    with pytest.raises(ValidationError):  # a malformed cluster is the round's, not a job's
        RoundProblem.from_dict(bad_cluster, on_invalid_job="skip")


def test_decision_skipped_field_rules() -> None:
    d = optsched.solve(RoundProblem.from_dict(_round("no-gpu-type"), on_invalid_job="skip"), "fifo", 5.0)
    data = d.to_dict()
    assert data["skipped"] == [{"job": "no-gpu-type", "reason": d.skipped[0].reason}]
    plain = optsched.solve(RoundProblem.from_dict(_round()), "fifo", 5.0).to_dict()
    assert "skipped" not in plain
    for bad in ({**data, "skipped": [{"job": "no-gpu-type"}]}, {**data, "skipped": [{"job": "job0", "reason": "x"}]},
                {**data, "skipped": data["skipped"] * 2}, {**data, "skipped": {"job": "a"}}):
        with pytest.raises(ValidationError):
            Decision.from_dict(bad)


def test_cli_on_invalid_job(tmp_path: Path, capsys: Any) -> None:
    path = tmp_path / "round.json"
    path.write_text(json.dumps(_round("unknown-model")), encoding="utf-8")
    assert main(["solve", str(path), "--method", "heuristic"]) == 2
    assert "unknown model 'nope-7b'" in capsys.readouterr().err.strip().splitlines()[-1]
    out = tmp_path / "decision.json"
    assert main(["solve", str(path), "--method", "heuristic", "--on-invalid-job", "skip", "--out", str(out)]) == 0
    decision = json.loads(out.read_text())
    assert [s["job"] for s in decision["skipped"]] == ["unknown-model"]


# -- every wait carries a reason ------------------------------------------------------------------------
def _rounds_with_jobs() -> list[tuple[str, RoundProblem]]:
    out: list[tuple[str, RoundProblem]] = [("rubick", generate_rubick_round(n, 8, j, s))
                                           for n, j, s in ((2, 20, 0), (4, 40, 1), (8, 80, 2))]
    # rounds where some jobs wait (crius: 250 jobs; at 150 Algorithm 1, its depth per scheduling choice, runs them all)
    busy = {"crius": {"jobs": 250}, "lyra": {"jobs": 80, "occupancy": 0.9}}
    for kind in round_kinds():
        if kind == "rubick":
            continue
        for seed in (0, 1):
            problem = round_kind(kind).generate(seed=seed, **busy.get(kind, {}))
            if problem.jobs:
                out.append((kind, problem))
    return out


ROUNDS = _rounds_with_jobs()


@pytest.mark.parametrize("kind, method", [(k, m) for k in round_kinds() for m in methods_of(k)
                                          if any(kind == k for kind, _ in ROUNDS)])
def test_every_wait_and_preempt_carries_a_reason(kind: str, method: str) -> None:
    seen = 0
    for k, problem in ROUNDS:
        if k != kind:
            continue
        extras = {"defer_unreachable_guarantees": True} if kind == "rubick" and method not in (
            "fifo", "fifo-backfill", "synergy", "sia", "antman") else {}
        try:
            decision = optsched.solve(problem, method, 2.0, **extras)
        except OptschedError:
            continue
        if not isinstance(decision.payload, JobAllocations):
            return  # the kind's decisions have no per-job actions
        for d in decision.jobs:
            if d.action in ("wait", "preempt"):
                seen += 1
                assert d.reason.strip(), (kind, method, d.job, d.action)
    assert seen > 0 or (kind, method) == ("crius", "elasticflow")  # ElasticFlow runs every job it admits

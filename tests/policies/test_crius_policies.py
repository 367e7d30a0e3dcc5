"""The crius methods: registry, the exact policy never below the heuristic, time limits, the CLI and
gap studies."""

from __future__ import annotations

import json

import pytest

import optsched
from crius_helpers import brute_force, late_deadline_round
from optsched.cli import main
from optsched.core import ValidationError
from optsched.experiments.gap import GapPoint, gap_row, run_gap_point
from optsched.formulations import crius_round
from optsched.perf.crius.cell_estimator import EstimatorParams
from optsched.policies.registry import methods_of
from optsched.rounds.crius import generate_crius_round
from optsched.heuristics.baselines.cells import NO_ADMISSION
from optsched.rounds.crius.decision import choices_of
from optsched.rounds.crius.feasibility import violations
from optsched.rounds.crius.objective import objective
from optsched.rounds.crius.table import build_crius_table
from optsched.rounds.rubick.generate import generate_rubick_round

METHODS = ("exact", "crius-exact", "crius", "heuristic", "fcfs", "fcfs-backfill", "gandiva", "gavel", "elasticflow",
           "elasticflow-ddl", "crius-na", "crius-nh")


@pytest.fixture(scope="module")
def problem():
    return generate_crius_round(50, seed=7)


def test_methods_are_registered() -> None:
    assert methods_of("crius") == METHODS


def test_every_method_decides_feasibly(problem) -> None:
    table = build_crius_table(problem)
    exact = optsched.solve(problem, "exact", time_limit=30)
    heur = optsched.solve(problem, "crius", time_limit=30)
    assert exact.objective >= heur.objective - 1e-9 and exact.heuristic_objective == pytest.approx(heur.objective)
    assert exact.status in ("optimal", "feasible", "heuristic-fallback")
    for m in METHODS:
        d = optsched.solve(problem, m, time_limit=30)
        crius = m in ("exact", "crius-exact", "crius", "heuristic")
        admission = None if crius else NO_ADMISSION
        assert violations(problem, table, choices_of(d, table, problem), admission, search_depth=crius) == [], m
        assert d.objective == pytest.approx(objective(problem, table, choices_of(d, table, problem)))


def test_wrong_kind_and_bad_extra(problem) -> None:
    with pytest.raises(ValidationError, match="solves crius rounds"):
        optsched.make_policy("crius", kind="crius").decide(generate_rubick_round(2, 8, 4, 0))
    with pytest.raises(ValidationError, match="estimator_params must be an EstimatorParams"):
        optsched.solve(problem, "crius", estimator_params="fast")
    slower = optsched.solve(problem, "crius", estimator_params=EstimatorParams(tp_efficiency=0.5))
    assert slower.kind == "crius"


def test_a_tiny_time_limit_still_answers(problem) -> None:
    d = optsched.solve(problem, "exact", time_limit=0.05)
    assert d.status in ("partial", "heuristic-fallback", "optimal", "feasible")
    assert len(d.jobs) == len(problem.jobs)


def test_cli_gen_round_and_solve(tmp_path, capsys) -> None:
    path = tmp_path / "r.json"
    assert main(["gen-round", "--kind", "crius", "--jobs", "12", "--seed", "2", "--out", str(path)]) == 0
    data = json.loads(path.read_text())
    assert data["kind"] == "crius" and len(data["jobs"]) == 12 and data["cluster"]["name"] == "crius-sim-1280"
    assert main(["solve", str(path), "--method", "exact", "--time-limit", "20"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["kind"] == "crius" and out["cells"] and out["status"] in ("optimal", "feasible")
    assert main(["gen-round", "--kind", "crius", "--nodes", "3"]) == 2
    assert "does not take --nodes" in capsys.readouterr().err
    data["jobs"][0]["deadline"] = 1.0
    path.write_text(json.dumps(data))
    assert main(["solve", str(path)]) == 2
    assert "deadline 1 s is before the round's time" in capsys.readouterr().err


def test_gap_study_covers_the_kind() -> None:
    row = gap_row(generate_crius_round(20, seed=3), time_limit=10)
    assert row["kind"] == "crius" and row["exact_objective"] >= row["heuristic_objective"] - 1e-9
    assert row["lp_bound"] >= row["exact_objective"] - 1e-5
    assert run_gap_point(GapPoint("crius", (("jobs", 8),), seed=1, time_limit=5))["jobs"] == 8


def test_cli_simulate_crius(tmp_path, capsys) -> None:
    out = tmp_path / "sim"
    assert main(["simulate", "--kind", "crius", "--cluster", "crius-testbed-64", "--jobs", "10", "--policy", "crius",
                 "fcfs", "--out", str(out), "--no-plots", "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert "crius-testbed-64" in text and "fcfs" in text
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["policies"]) == {"crius", "fcfs"}
    assert main(["simulate", "--kind", "crius", "--policy", "rubick", "--out", str(tmp_path / "x")]) == 2
    assert "rubick is no crius method" in capsys.readouterr().err


def test_exact_never_falls_back_to_a_decision_that_breaks_the_rules() -> None:
    """The reviewer's round (a running deadline job late on its Cell, depth 0): the exact optimum (-0.25,
    the job suspended) is returned, not a heuristic answer keeping the late job."""
    r = late_deadline_round(0)
    t = build_crius_table(r)
    for method in ("exact", "crius"):
        d = optsched.solve(r, method, time_limit=20)
        assert violations(r, t, choices_of(d, t, r)) == [], method
    d = optsched.solve(r, "exact", time_limit=20)
    assert d.status == "optimal" and d.objective == pytest.approx(brute_force(r, t), abs=1e-6)



def test_exact_reports_rather_than_returns_a_rule_breaking_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    """When the solver finds nothing and Algorithm 1's answer breaks the round's rules (here: a patched
    Algorithm 1 that keeps the late job), ``exact`` raises a clear error instead of returning it."""
    import optsched.policies.crius as crius_policies
    from optsched.core.errors import InfeasibleError
    from optsched.formulations.solution import ModelSize, Solution
    from optsched.rounds.crius.choice import keep_choice
    from optsched.rounds.crius.decision import Schedule

    r = late_deadline_round(0)

    def keep_all(problem, table, admission=None, **_):  # noqa: ANN001, ANN202
        choices = {j.name: keep_choice(problem, table, table.index_of(j.name)) for j in problem.jobs
                   if problem.current(j.name) is not None}
        return Schedule(choices, admission)

    monkeypatch.setattr(crius_policies, "algorithm1", keep_all)
    monkeypatch.setattr(crius_round, "solve", lambda *a, **k: Solution(
        "unknown", None, None, 0.0, True, ModelSize(0, 0, "unbuilt"), {}))
    with pytest.raises(InfeasibleError, match="breaks the round's rules"):
        optsched.make_policy("exact", kind="crius").decide(r)

def test_a_job_no_cell_fits_waits_under_every_method() -> None:
    """A moe-27b@256 job on one A10 (pinned): its table has no row; every method answers, the job waits
    with the reason (alone, and next to a job that runs)."""
    from optsched.core import Job
    from optsched.rounds.crius import CriusRound
    from optsched.core.catalog import get_cluster
    from optsched.rounds.crius.decision import NO_CELL
    big = Job("big", "moe-27b@256", 1, 100, gpu_type="A10")
    c = get_cluster("crius-sim-1280")
    for jobs in ((big,), (big, Job("small", "bert-0.76b@128", 2, 100, submit_time=1.0))):
        r = CriusRound(cluster=c, jobs=jobs, time=0.0)
        for method in METHODS:
            d = optsched.solve(r, method, time_limit=10)
            assert d.jobs[0].action == "wait" and d.jobs[0].reason == NO_CELL, method
            assert (d.objective > 0) == (len(jobs) == 2), method

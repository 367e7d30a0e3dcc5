"""The objective of a Crius round: the paper's raw cluster throughput by default (Crius Sec. 2.2, 6), its
deadline variant (Sec. 8.5), and our normalised objectives as named options binding in every method."""

from __future__ import annotations

import dataclasses
import json

import pytest

import optsched
from crius_helpers import alloc_on, brute_force, toy_cluster, toy_graph
from optsched.core import Job, ValidationError
from optsched.core.round import RoundProblem
from optsched.formulations import crius_round
from optsched.policies.registry import methods_of
from optsched.rounds.crius import CriusRound, generate_crius_round
from optsched.rounds.crius.admission import admit
from optsched.rounds.crius.choice import keep_choice
from optsched.rounds.crius.decision import choices_of
from optsched.rounds.crius.objective import objective
from optsched.rounds.crius.problem import OBJECTIVES
from optsched.rounds.crius.table import build_crius_table

MODELS = (("poor", toy_graph("poor", flops=2e10, params=1e9)), ("tiny", toy_graph("tiny")))


def _round(**kw) -> CriusRound:
    """Two fast nodes of 4 GPUs held by "a" and "b" (4 GPUs of "poor", N_G = 2); "c" (N_G = 2) waits."""
    c = toy_cluster(fast_nodes=2, fast_gpus=4, slow_nodes=0)
    jobs = (Job("a", "poor", 2, 100, submit_time=0.0), Job("b", "poor", 2, 100, submit_time=0.5),
            Job("c", "tiny", 2, 100, submit_time=1.0))
    return CriusRound(cluster=c, jobs=jobs, models=MODELS, time=10.0, search_depth=1,
                      running=(alloc_on(c, "a", "fast", {"f0": 4}, 1), alloc_on(c, "b", "fast", {"f1": 4}, 1)), **kw)


def test_the_default_objective_is_the_papers_raw_cluster_throughput() -> None:
    """Crius Sec. 2.2: "we use the sum of all training jobs' throughput as the cluster throughput".

    "a" and "b" each run 4 GPUs at 792.192 samples/s (weight 1.8062 of their 2-GPU reference, 438.588);
    "c" has a 2-GPU Cell of 47.014 samples/s (weight 1.0). Keeping both: 1584.384 raw; normalised 3.6125.
    Shrinking "a" to 2 GPUs for "c": raw 792.192 + 438.588 + 47.014 = 1277.794 (worse), normalised
    1.8062 + 1.0 + 1.0 - 0.05 = 3.7562 (better; Algorithm 1's choice). The exact optimum under
    "normalised" shrinks both to 2 GPUs on f1 and gives "c" 4 GPUs (1.9522) on f0: 3.8522 (two
    rescalings with D = 1: two scheduling choices, c's and line 12's). Under the raw objective both
    methods keep "a" and "b": the objectives choose differently, and each method follows the round's."""
    r = _round()
    t = build_crius_table(r)
    keep = {n: keep_choice(r, t, t.index_of(n)) for n in ("a", "b")}
    assert objective(r, t, keep) == pytest.approx(2 * 792.192, abs=1e-2)
    rn = dataclasses.replace(r, objective="normalised")
    tn = build_crius_table(rn)
    assert objective(rn, tn, keep) == pytest.approx(2 * 1.8062, abs=1e-3)
    for method in ("exact", "crius"):
        assert set(optsched.solve(r, method, time_limit=10).allocations) == {"a", "b"}, method
        d = optsched.solve(rn, method, time_limit=10)
        want = 3.8522 if method == "exact" else 3.7562
        assert set(d.allocations) == {"a", "b", "c"} and d.objective == pytest.approx(want, abs=1e-3), method


def _tiny(objective_name: str) -> CriusRound:
    """The toy cluster (2 fast nodes of 2 GPUs, a slow node of 4): j0 (deadline) waits, j1 runs 2 fast GPUs,
    j2 (deadline) runs 2 slow GPUs, j3 waits."""
    c = toy_cluster()
    jobs = (Job("j0", "tiny", 2, 100, submit_time=0.0, deadline=900.0), Job("j1", "poor", 2, 100, submit_time=1.0),
            Job("j2", "tiny", 2, 100, submit_time=2.0, completed_iterations=50.0, deadline=400.0),
            Job("j3", "tiny", 1, 100, submit_time=3.0))
    return CriusRound(cluster=c, jobs=jobs, models=MODELS, time=10.0, search_depth=1, objective=objective_name,
                      running=(alloc_on(c, "j1", "fast", {"f0": 2}, 1), alloc_on(c, "j2", "slow", {"s0": 2}, 1)))


@pytest.mark.parametrize("objective_name", OBJECTIVES)
def test_exact_equals_brute_force_under_every_objective(objective_name: str) -> None:
    r = _tiny(objective_name)
    t = build_crius_table(r)
    adm = admit(r, t)
    sol = crius_round.solve(r, t, time_limit=20, admission=adm)
    assert sol.status == "optimal" and sol.objective == pytest.approx(brute_force(r, t), rel=1e-9, abs=1e-6)


@pytest.mark.parametrize("objective_name", OBJECTIVES)
def test_the_objective_binds_in_every_method(objective_name: str) -> None:
    """Every method of the kind reports the round's objective of its own decision (the field is read by
    every method: none is refused)."""
    r = dataclasses.replace(generate_crius_round(12, seed=1, deadline_fraction=0.3), objective=objective_name)
    t = build_crius_table(r)
    for method in methods_of("crius"):
        d = optsched.solve(r, method, time_limit=10)
        assert d.objective == pytest.approx(objective(r, t, choices_of(d, t, r)), rel=1e-9, abs=1e-9), method


@pytest.mark.parametrize("field, value, objective_name", [("rescale_penalty", 0.1, "throughput"),
                                                          ("preempt_penalty", 0.1, "deadline"),
                                                          ("deadline_bonus", 5.0, "throughput"),
                                                          ("deadline_bonus", 5.0, "normalised")])
def test_a_penalty_under_an_objective_without_one_is_refused_naming_it(field: str, value: float,
                                                                       objective_name: str) -> None:
    with pytest.raises(ValidationError, match=f"round: {field} applies to the objective"):
        _round(objective=objective_name, **{field: value})


def test_normalised_objective_round_trips_with_its_penalties() -> None:
    r = _round(objective="normalised-deadline", rescale_penalty=0.1, deadline_bonus=3.0)
    data = json.loads(json.dumps(r.to_dict()))
    assert data["objective"] == "normalised-deadline" and data["rescale_penalty"] == 0.1
    assert "preempt_penalty" not in data
    back = RoundProblem.from_dict(data)
    assert back.to_dict() == r.to_dict()
    assert back.rescale_cost == 0.1 and back.preempt_cost == 0.25 and back.bonus == 3.0
    assert "rescale_penalty" not in _round().to_dict() and _round().rescale_cost == 0.0



#: the baselines of Sec. 8.1, which the deadline rules do not bind (optsched/heuristics/baselines/cells.py)
BASELINES = ("fcfs", "fcfs-backfill", "gandiva", "gavel", "elasticflow")


@pytest.mark.parametrize("objective_name", ["deadline", "normalised-deadline"])
def test_past_deadlines_accept_binds_in_every_method(objective_name: str) -> None:
    """``past_deadlines: "accept"`` (a simulated round, where deadlines pass while jobs wait): a queued job whose
    deadline has passed is accepted instead of refused; the methods under Crius's deadline rules (Sec. 8.5) never
    start it (no Cell meets its deadline: the rules drop it), the Sec. 8.1 baselines schedule for throughput as they
    always do; every decision keeps the rules that bind its method, its objective is the round's, and its status and
    bound describe it."""
    from optsched.heuristics.baselines.cells import NO_ADMISSION
    from optsched.rounds.crius.feasibility import violations

    base = dataclasses.replace(generate_crius_round(12, seed=1, deadline_fraction=0.3), objective=objective_name)
    late = next(j for j in base.jobs if base.current(j.name) is None)
    jobs = tuple(dataclasses.replace(j, deadline=base.time - 1.0) if j.name == late.name else j for j in base.jobs)
    with pytest.raises(ValidationError, match=f"{late.name}.*before the round's time"):
        dataclasses.replace(base, jobs=jobs)
    r = dataclasses.replace(base, jobs=jobs, past_deadlines="accept")
    t = build_crius_table(r)
    assert late.name in admit(r, t).dropped
    for method in methods_of("crius"):
        d = optsched.solve(r, method, time_limit=10)
        choices = choices_of(d, t, r)
        baseline = method in BASELINES
        assert baseline or late.name not in choices, method
        rules = {"search_depth": False, "deadline_rows": False, "suspensions": False} if baseline else {}
        assert violations(r, t, choices, NO_ADMISSION if baseline else admit(r, t), **rules) == [], method
        assert d.objective == pytest.approx(objective(r, t, choices), rel=1e-9, abs=1e-9), method
        if d.status in ("optimal", "feasible"):
            assert d.bound is not None and d.bound >= d.objective - 1e-9 * max(1.0, abs(d.objective)), method
        else:
            assert d.status in ("heuristic", "heuristic-fallback", "partial"), method

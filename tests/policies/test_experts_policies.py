"""The experts methods through the registry and optsched.solve (optsched/policies/experts.py): every
decision feasible, exact never worse than Lina, the time limit honoured with a fallback, and a round of
another kind refused."""

from __future__ import annotations

import time

import numpy as np
import pytest
from experts_helpers import minimums_round, random_small_round

import optsched
from optsched.core.errors import ValidationError
from optsched.policies.registry import describe_methods, make_policy
from optsched.heuristics.lina import uniform_plan
from optsched.policies import experts as experts_policies
from optsched.rounds.experts import generate
from optsched.rounds.experts.decision import plan_of
from optsched.rounds.experts.plan import ReplicaPlan, makespan, violations
from optsched.rounds.rubick.generate import generate_rubick_round


def test_methods_are_registered() -> None:
    assert set(describe_methods()["experts"]) == {"exact", "lina", "heuristic", "uniform"}


@pytest.mark.parametrize("seed", range(3))
def test_exact_is_never_worse_than_lina_and_every_decision_is_feasible(seed: int) -> None:
    r = generate(seed=seed, experts=16, devices=12, slots=2 + seed)
    decisions = {m: optsched.solve(r, method=m, time_limit=1, seed=0) for m in ("uniform", "lina", "exact")}
    for m, d in decisions.items():
        assert d.kind == "experts" and d.method == m and violations(r, plan_of(r, d)) == []
        assert d.objective == -d.payload.makespan
    exact = decisions["exact"]
    assert exact.objective >= decisions["lina"].objective - 1e-9
    assert exact.heuristic_objective == pytest.approx(decisions["lina"].objective)
    assert exact.warm_start and exact.status in ("optimal", "feasible", "heuristic-fallback")
    assert exact.bound is not None and exact.bound >= exact.objective - 1e-9
    assert decisions["lina"].status == "heuristic" and decisions["lina"].bound is None


def test_no_time_left_returns_lina() -> None:
    r = generate(seed=0, experts=12)
    d = optsched.solve(r, method="exact", time_limit=0.5, clock_start=time.perf_counter() - 1.0)
    assert d.status == "heuristic-fallback" and "no time left" in d.message
    assert d.objective == optsched.solve(r, method="lina").objective


def test_a_round_of_another_kind_is_refused() -> None:
    with pytest.raises(ValidationError, match="solves experts rounds, got a round of kind 'rubick'"):
        make_policy("exact", kind="experts").decide(generate_rubick_round(1, 8, 2, seed=0))


def test_exact_falls_back_to_a_feasible_plan_without_time_for_the_solver() -> None:
    r = minimums_round([(634, 2, None), (766, 2, 3), (364, 2, None), (948, 1, None), (0, 2, 4), (846, 2, None)], 4, 3)
    d = optsched.solve(r, method="exact", time_limit=0.001)
    assert violations(r, plan_of(r, d)) == []
    assert optsched.solve(r, method="exact", time_limit=10).objective == pytest.approx(-889.5)  # the optimum


def test_exact_warm_starts_from_uniform_when_lina_breaks_the_round(monkeypatch: pytest.MonkeyPatch) -> None:
    r = generate(seed=0, experts=6, devices=4, slots=2)
    lonely = ReplicaPlan(np.eye(6, 4, dtype=bool), np.eye(6, 4))  # experts 4 and 5 hosted nowhere
    monkeypatch.setattr(experts_policies, "lina_plan", lambda problem: lonely)
    for limit, clock in ((0.5, time.perf_counter() - 1.0), (5.0, None)):
        d = optsched.solve(r, method="exact", time_limit=limit, clock_start=clock)
        assert violations(r, plan_of(r, d)) == [] and "uniform (Lina's plan breaks the round: expert 4" in d.message
        assert d.heuristic_objective == -makespan(r, uniform_plan(r))


@pytest.mark.parametrize("seed", range(0, 1000, 25))
def test_exact_is_feasible_on_random_small_rounds(seed: int) -> None:
    r = random_small_round(seed)
    if r is not None:
        d = optsched.solve(r, method="exact", time_limit=5)
        assert violations(r, plan_of(r, d)) == [] and d.objective >= optsched.solve(r, method="lina").objective - 1e-9

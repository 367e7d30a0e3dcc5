"""Very large Rubick rounds (formulations/rubick_prices.py; issue 29, item 4): the price bound bounds the exact
optimum, the price-guided greedy's decision keeps every rule and is close to the optimum, and the exact method
answers by them when the model would not fit the time limit (then without running Algorithm 1 after)."""

from __future__ import annotations

import pytest

from optsched.core.deadline import Deadline
from optsched.core.round import RoundProblem
from optsched.formulations import rubick_prices, rubick_round
from optsched.policies import rubick as rubick_policy
from optsched.policies.exact import ExactPolicy
from optsched.policies.rubick import RubickExact
from optsched.rounds.rubick.feasibility import violations
from optsched.rounds.rubick.generate import generate_rubick_round

from test_pooled_encoding import _brute_force, _prepared, _round


@pytest.mark.parametrize("seed, running", [(0, False), (1, False), (0, True), (2, True)])
def test_the_price_bound_bounds_the_brute_force_optimum_and_the_greedy_keeps_every_rule(seed: int,
                                                                                      running: bool) -> None:
    ctx = _prepared(_round(seed, running=running))
    best = _brute_force(ctx)
    sol = rubick_prices.price_solve(ctx.problem, ctx.table, ctx.admission,
                                    rubick_round.allowed_rows(ctx.table, ctx.admission), time_limit=10.0)
    assert sol.size.encoding == "prices" and sol.status in ("optimal", "feasible")
    assert sol.bound >= best - 1e-6 and sol.objective <= best + 1e-9
    assert violations(ctx.problem, ctx.table, sol.payload["choices"], ctx.admission) == []


@pytest.mark.parametrize("seed", range(3))
def test_on_generated_rounds_the_price_answer_is_feasible_close_to_the_optimum_and_bounds_it(seed: int) -> None:
    problem = generate_rubick_round(16, 8, 60, seed)
    kind = RubickExact()
    ctx = kind.prepare(kind.round_of(problem, "exact"), Deadline(30.0))
    exact = rubick_round.solve(ctx.problem, ctx.table, time_limit=30, admission=ctx.admission)
    sol = rubick_prices.price_solve(ctx.problem, ctx.table, ctx.admission,
                                    rubick_round.allowed_rows(ctx.table, ctx.admission), time_limit=10.0)
    assert exact.status == "optimal"
    assert sol.bound >= exact.objective - 1e-6 and sol.objective <= exact.objective + 1e-9
    assert violations(ctx.problem, ctx.table, sol.payload["choices"], ctx.admission) == []
    # on rounds of many jobs the LP is nearly integral: its choice, placed, is within 1% of the optimum (measured
    # 0-0.12% on these three), its bound within 2% (1.0-1.3%)
    assert sol.objective >= 0.99 * exact.objective and sol.bound <= 1.02 * exact.objective


def test_the_exact_method_answers_by_prices_when_the_model_would_not_fit_its_limit(monkeypatch) -> None:
    data = _round(1, running=True)
    monkeypatch.setattr(rubick_policy, "MODEL_S_PER_ROW2", 10.0)  # every round "too slow" for the model
    decision = ExactPolicy(RubickExact(), time_limit=10.0).decide(RoundProblem.from_dict(data))
    assert "encoding=prices" in decision.message
    assert decision.status in ("optimal", "feasible") and decision.bound >= decision.objective
    # Algorithm 1 does not run after the price path (RubickExact.warm_start_after)
    assert decision.heuristic_objective is None and not decision.warm_start


def test_rounds_with_node_rules_are_left_to_the_model() -> None:
    assert rubick_prices.applies(generate_rubick_round(4, 8, 10, 0))
    assert not rubick_prices.applies(generate_rubick_round(4, 8, 10, 0, constrained=0.5))


def test_the_cutting_plane_bound_meets_the_lp_bound(monkeypatch) -> None:
    """Above ``LP_ROWS`` the bound comes from cutting planes on the prices: on a generated round it is the LP's
    optimum up to the method's tolerance, and the decision at its prices keeps every rule."""
    problem = generate_rubick_round(16, 8, 60, 0)
    kind = RubickExact()
    ctx = kind.prepare(kind.round_of(problem, "exact"), Deadline(30.0))
    allowed = rubick_round.allowed_rows(ctx.table, ctx.admission)
    lp = rubick_prices.price_solve(ctx.problem, ctx.table, ctx.admission, allowed, time_limit=10.0)
    monkeypatch.setattr(rubick_prices, "LP_ROWS", 0)
    cut = rubick_prices.price_solve(ctx.problem, ctx.table, ctx.admission, allowed, time_limit=10.0)
    assert cut.bound == pytest.approx(lp.bound, rel=1e-4) and cut.bound >= lp.bound - 1e-6
    assert violations(ctx.problem, ctx.table, cut.payload["choices"], ctx.admission) == []
    assert cut.objective <= cut.bound


def test_a_milp_back_end_asked_for_solves_the_model_not_the_price_path(monkeypatch) -> None:
    """The price path serves the default back end only: a caller who names CBC gets the model solved by CBC."""
    data = _round(1, running=True)
    monkeypatch.setattr(rubick_policy, "MODEL_S_PER_ROW2", 10.0)
    decision = ExactPolicy(RubickExact(backend="cbc"), time_limit=20.0, backend="cbc").decide(
        RoundProblem.from_dict(data))
    assert "encoding=prices" not in decision.message and decision.status == "optimal"

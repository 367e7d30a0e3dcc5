"""The one exact-with-fallback driver (optsched/policies/exact.py) on a scripted contract: which answer
it returns, with which status, bound and message, when it falls back and when it refuses; and that
every kind's exact method is the driver over its registered contract."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pytest

from optsched.core.deadline import Deadline
from optsched.core.decision import Decision, JobAllocations, relative_gap
from optsched.core.errors import InfeasibleError, ValidationError
from optsched.core.kinds import round_kinds
from optsched.core.round import RoundProblem
from optsched.formulations.solution import ModelSize, Solution
from optsched.policies import PolicyOptions, make_policy
from optsched.policies.exact import (TOLERANCE, ExactKind, ExactPolicy, Outcome, WarmStart, exact_contract,
                                     exact_kinds, hint_of, not_worse)
from optsched.rounds.rubick.generate import generate_rubick_round
from optsched.rounds.rubick.problem import RubickRound

PROBLEM = generate_rubick_round(1, 8, 2, 0)


@dataclass
class Scripted(ExactKind[RubickRound, str, str]):
    """A contract whose heuristic and solver answer what the test says: answers are names, objectives
    numbers; it records the hint the solver got."""

    problem_type: ClassVar[type[RoundProblem]] = RubickRound
    answer_key: ClassVar[str] = "answer"

    warm: WarmStart[str] | None = None
    heuristic_error: InfeasibleError | None = None
    solution: Solution | None = None
    broken: list[str] = field(default_factory=list)
    infeasible_error: InfeasibleError | None = None
    hints: list[Any] = field(default_factory=list)

    def prepare(self, problem: RubickRound, deadline: Deadline) -> str:
        return "ctx"

    def warm_start(self, ctx: str, deadline: Deadline) -> WarmStart[str]:
        if self.heuristic_error is not None:
            raise self.heuristic_error
        assert self.warm is not None
        return self.warm

    def solve(self, ctx: str, warm: WarmStart[str] | None, *, time_limit: float, seed: int, workers: int,
              backend: str, cold: bool = False, trace: list[tuple[float, float, float]] | None = None) -> Solution:
        self.hints.append(hint_of(warm, cold))
        assert self.solution is not None
        return self.solution

    def violations(self, ctx: str, warm: WarmStart[str]) -> list[str]:
        return self.broken

    def infeasible(self, ctx: str, warm: WarmStart[str] | None) -> InfeasibleError | None:
        return self.infeasible_error

    def assemble(self, ctx: str, warm: WarmStart[str] | None, answer: str, outcome: Outcome, method: str) -> Decision:
        objective = warm.objective if answer == "heur" and warm is not None else float(answer.split("=")[1])
        return Decision("rubick", method, outcome.status, objective, JobAllocations(()), bound=outcome.bound,
                        gap=relative_gap(outcome.bound, objective), solve_seconds=outcome.solve_seconds,
                        heuristic_objective=outcome.heuristic_objective, warm_start=outcome.warm_start,
                        message=f"{answer}|{outcome.message}")


def solution(objective: float | None, bound: float | None = 12.0, status: str = "feasible") -> Solution:
    payload = {} if objective is None else {"answer": f"sol={objective}"}
    return Solution(status, objective, bound, 0.01, True, ModelSize(3, 2, "toy"), payload)


def run(contract: Scripted, **kw: Any) -> Decision:
    return ExactPolicy(contract, "exact", **kw).decide(PROBLEM)


def test_the_solver_wins_when_not_worse_within_the_tolerance() -> None:
    c = Scripted(WarmStart("heur", 10.0, hint="h", message="carried"), solution=solution(10.0 - 5 * TOLERANCE))
    d = run(c)
    assert d.message.startswith("sol=") and d.status == "feasible" and d.bound == 12.0
    assert d.heuristic_objective == 10.0 and c.hints == ["h"] and "carried" in d.message
    assert "model variables=3 constraints=2" in d.message


def test_a_worse_solver_answer_falls_back_to_the_warm_start_with_the_solver_bound() -> None:
    c = Scripted(WarmStart("heur", 10.0), solution=solution(9.0, bound=11.0))
    d = run(c)
    assert d.message.startswith("heur|") and d.status == "heuristic-fallback" and d.bound == 11.0
    assert "the solver's best (9) is below the heuristic's" in d.message
    assert c.hints == ["heur"]  # no separate hint: the answer itself warm-starts the model


def test_no_solver_answer_falls_back_and_says_so() -> None:
    d = run(Scripted(WarmStart("heur", 10.0), solution=solution(None, bound=None, status="unknown")))
    assert d.status == "heuristic-fallback" and "the solver found no solution within 10 s" in d.message


def test_an_incomplete_warm_start_is_partial_and_skips_the_solver() -> None:
    c = Scripted(WarmStart("heur", 10.0, complete=False, message="cut"), solution=solution(20.0))
    d = run(c)
    assert d.status == "partial" and d.message == "heur|cut" and c.hints == []


def test_no_time_left_returns_the_warm_start() -> None:
    c = Scripted(WarmStart("heur", 10.0), solution=solution(20.0))
    d = run(c, time_limit=0.5, clock_start=time.perf_counter() - 1.0)
    assert d.status == "heuristic-fallback" and "no time left for the solver within 0.5 s" in d.message
    assert c.hints == [] and d.bound is None


def test_a_warm_start_breaking_a_rule_never_wins_and_is_never_returned() -> None:
    worse = Scripted(WarmStart("heur", 10.0), solution=solution(3.0), broken=["job x on two nodes"])
    assert run(worse).message.startswith("sol=3.0")
    none = Scripted(WarmStart("heur", 10.0), solution=solution(None), broken=["job x on two nodes"])
    with pytest.raises(InfeasibleError, match="breaks the round's rules: job x on two nodes"):
        run(none)


def test_without_a_warm_start_the_solver_decides_or_the_heuristic_error_is_raised() -> None:
    err = InfeasibleError("no node fits", ("job a",))
    c = Scripted(heuristic_error=err, solution=solution(4.0))
    d = run(c)
    assert d.message.startswith("sol=4.0") and d.heuristic_objective is None and c.hints == [None]
    with pytest.raises(InfeasibleError, match="no feasible decision found within 10 s; the heuristic reported: "
                                              "no node fits"):
        run(Scripted(heuristic_error=err, solution=solution(None)))


def test_a_proven_infeasible_model_raises_the_kind_report_unless_the_warm_start_keeps_every_rule() -> None:
    report = InfeasibleError("round infeasible: guarantees")
    broken = Scripted(WarmStart("heur", 10.0), solution=solution(None, status="infeasible"), infeasible_error=report,
                      broken=["guaranteed job a does not run"])
    with pytest.raises(InfeasibleError, match="round infeasible: guarantees"):
        run(broken)
    with pytest.raises(InfeasibleError, match="round infeasible: guarantees"):
        run(Scripted(heuristic_error=InfeasibleError("no node fits"), solution=solution(None, status="infeasible"),
                     infeasible_error=report))
    # a warm start that keeps every rule outweighs the model's proof (a choice the model does not state)
    kept = run(Scripted(WarmStart("heur", 10.0), solution=solution(None, status="infeasible"),
                        infeasible_error=report))
    assert kept.status == "heuristic-fallback" and "the model was proven infeasible although" in kept.message
    quiet = Scripted(WarmStart("heur", 10.0), solution=solution(None, status="infeasible"))
    assert run(quiet).status == "heuristic-fallback"  # a kind without a report falls back


def test_the_tolerance_is_relative_above_one_and_absolute_below() -> None:
    assert not_worse(1e6 - 1e-4, 1e6) and not not_worse(1e6 - 1e-2, 1e6)
    assert not_worse(-2.2e-16, 0.0) and not not_worse(-1e-6, 0.0)


def test_every_kind_with_an_exact_method_registers_a_contract() -> None:
    assert set(exact_kinds()) == {"rubick", "crius", "experts", "moe-comm", "lyra-reclaim", "placement",
                                 "training-packing"}
    assert set(exact_kinds()) <= set(round_kinds())
    for kind in exact_kinds():
        policy = make_policy("exact", PolicyOptions(time_limit=3, seed=1), kind=kind)
        assert isinstance(policy, ExactPolicy) and policy.kind == kind and policy.time_limit == 3.0
        assert exact_contract(kind).kind == kind
    with pytest.raises(ValidationError, match="has no exact contract"):
        exact_contract("lyra-allocate")


def test_a_round_of_another_kind_is_refused_naming_the_policy() -> None:
    from optsched.rounds.experts.generate import generate_experts_round
    with pytest.raises(ValidationError, match="policy 'exact' solves rubick rounds, got a round of kind 'experts'"):
        make_policy("exact").decide(generate_experts_round(4, 4, 0))


def test_a_bound_below_the_objective_within_the_tolerance_is_the_objective() -> None:
    """Issue 26: placement's exact proved the optimum 0.0 with a bound -2.2e-16 (float noise)."""
    d = run(Scripted(WarmStart("heur", 0.0), solution=solution(0.0, bound=-2.220446049250313e-16, status="optimal")))
    assert d.status == "optimal" and d.objective == 0.0 and d.bound == 0.0 and d.gap == 0.0


def test_a_bound_below_the_decision_is_no_bound() -> None:
    """A fallback whose warm start lies outside the model's space (the solver's bound 9.5 under the
    heuristic's 10): the bound does not bound the decision, so none is reported, and the message says so."""
    d = run(Scripted(WarmStart("heur", 10.0), solution=solution(9.0, bound=9.5)))
    assert d.status == "heuristic-fallback" and d.objective == 10.0 and d.bound is None and d.gap is None
    assert "the solver's bound (9.5) is below this decision's objective (10)" in d.message
    d = run(Scripted(heuristic_error=InfeasibleError("none"), solution=solution(10.0, bound=9.0, status="optimal")))
    assert d.status == "feasible" and d.bound is None and "outside the model's space" in d.message


# -- a kind whose heuristic runs after the solver (module docstring, step 2) ----------------------------
@dataclass
class Later(Scripted):
    """:class:`Scripted` whose heuristic runs after a solve not proven optimal, with ``reserve`` seconds kept for
    it; records the order of the calls and the solver's time limit."""

    reserve: float = 0.0
    calls: list[str] = field(default_factory=list)
    limits: list[float] = field(default_factory=list)

    def warm_start_first(self, ctx: str) -> bool:
        return False

    def warm_start_seconds(self, ctx: str, time_left: float) -> float:
        return self.reserve

    def warm_start(self, ctx: str, deadline: Deadline) -> WarmStart[str]:
        self.calls.append("heuristic")
        return super().warm_start(ctx, deadline)

    def solve(self, ctx: str, warm: WarmStart[str] | None, *, time_limit: float, seed: int, workers: int,
              backend: str, cold: bool = False, trace: list[tuple[float, float, float]] | None = None) -> Solution:
        self.calls.append("solver")
        self.limits.append(time_limit)
        return super().solve(ctx, warm, time_limit=time_limit, seed=seed, workers=workers, backend=backend)


def test_an_optimal_solve_needs_no_heuristic_when_it_runs_after() -> None:
    c = Later(warm=WarmStart("heur", 9.0), solution=solution(10.0, 10.0, "optimal"), reserve=2.0)
    d = run(c, time_limit=10.0)
    assert c.calls == ["solver"] and c.hints == [None]
    assert c.limits[0] <= 10.0 - 2.0  # the heuristic's share is kept
    assert (d.status, d.objective, d.heuristic_objective, d.warm_start) == ("optimal", 10.0, None, False)
    assert "no warm start" in d.message


@pytest.mark.parametrize("objective, status, answer", [(10.5, "feasible", "sol=10.5"), (8.0, "feasible", "heur"),
                                                        (None, "unknown", "heur")])
def test_a_solve_not_proven_optimal_is_compared_with_the_heuristic_run_after_it(objective: float | None, status: str,
                                                                                 answer: str) -> None:
    c = Later(warm=WarmStart("heur", 9.0), solution=solution(objective, 12.0, status), reserve=1.0)
    d = run(c, time_limit=10.0)
    assert c.calls == ["solver", "heuristic"] and c.limits[0] <= 9.0
    assert d.heuristic_objective == 9.0 and d.message.startswith(answer)
    assert d.status == ("feasible" if answer.startswith("sol") else "heuristic-fallback")


def test_too_little_time_for_both_gives_the_solver_all_and_the_heuristic_only_without_an_answer() -> None:
    c = Later(warm=WarmStart("heur", 9.0), solution=solution(10.5, 12.0, "feasible"), reserve=50.0)
    d = run(c, time_limit=10.0)
    assert c.calls == ["solver"] and c.limits[0] > 9.0
    assert (d.status, d.objective, d.heuristic_objective) == ("feasible", 10.5, None)
    c = Later(warm=WarmStart("heur", 9.0), solution=solution(None, 12.0, "unknown"), reserve=50.0)
    d = run(c, time_limit=10.0)
    assert c.calls == ["solver", "heuristic"]
    assert (d.status, d.objective, d.heuristic_objective) == ("heuristic-fallback", 9.0, 9.0)

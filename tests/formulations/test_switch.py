"""The ``switch`` back end (formulations/switch.py, issue 29 item 3): CP-SAT alone when it proves within its
deterministic stall budget, HiGHS after a stall; the answer is the brute-force optimum either way, and the choice of
back ends is the same for a given round and seed."""

from __future__ import annotations

import itertools
import time

import numpy as np
import pytest
from ortools.sat.python import cp_model

from optsched.core import ValidationError
from optsched.formulations import crius_round, rubick_round, switch
from optsched.formulations.cpsat import cp_solver
from optsched.policies.options import PolicyOptions
from optsched.policies.registry import make_policy
from optsched.policies.solve import solve
from optsched.rounds.crius.generate import generate_crius_round
from optsched.rounds.crius.table import build_crius_table
from optsched.rounds.rubick.feasibility import violations
from optsched.rounds.rubick.generate import generate_rubick_round
from optsched.rounds.rubick.table import build_round_table

#: a budget no search spends less than: CP-SAT always stalls
NO_BUDGET = 1e-9


def _random_model(seed: int, maximize: bool) -> tuple[cp_model.CpModel, list[cp_model.IntVar], np.ndarray,
                                                       np.ndarray, np.ndarray]:
    """Eight 0/1 variables, two knapsack rows, one at-least row; objective with an offset."""
    rng = np.random.default_rng(seed)
    m = cp_model.CpModel()
    x = [m.new_bool_var(f"x{i}") for i in range(8)]
    a = rng.integers(1, 10, size=(2, 8))
    cap = a.sum(axis=1) // 2
    for row, c in zip(a, cap):
        m.add(sum(int(v) * xi for v, xi in zip(row, x)) <= int(c))
    m.add(sum(x) >= 2)
    w = rng.integers(-3, 12, size=8)
    expr = sum(int(v) * xi for v, xi in zip(w, x)) + 5
    m.maximize(expr) if maximize else m.minimize(expr)
    return m, x, a, cap, w


def _brute(a: np.ndarray, cap: np.ndarray, w: np.ndarray, maximize: bool) -> int:
    best = None
    for bits in itertools.product((0, 1), repeat=8):
        v = np.array(bits)
        if (a @ v <= cap).all() and v.sum() >= 2:
            val = int(w @ v) + 5
            best = val if best is None or (val > best if maximize else val < best) else best
    assert best is not None
    return best


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("maximize", [True, False])
def test_after_a_stall_highs_reaches_the_brute_force_optimum(seed: int, maximize: bool) -> None:
    model, x, a, cap, w = _random_model(seed, maximize)
    best = _brute(a, cap, w, maximize)
    answer = switch.solve_switching(cp_solver(10.0, 0, 1), model, time.perf_counter() + 10.0, budget=NO_BUDGET)
    assert answer.stalled and answer.backends == ("cpsat", "highs")
    assert answer.status == "OPTIMAL" and answer.objective == pytest.approx(best)
    assert answer.bound == pytest.approx(best)
    values = np.array([answer.values[v.index] for v in x])
    assert (a @ values <= cap).all() and values.sum() >= 2 and int(w @ values) + 5 == best


@pytest.mark.parametrize("seed", range(3))
def test_within_its_budget_cpsat_alone_answers(seed: int) -> None:
    model, _, a, cap, w = _random_model(seed, True)
    answer = switch.solve_switching(cp_solver(10.0, 0, 1), model, time.perf_counter() + 10.0)
    assert not answer.stalled and answer.backends == ("cpsat",)
    assert answer.status == "OPTIMAL" and answer.objective == pytest.approx(_brute(a, cap, w, True))


def test_an_infeasible_model_is_reported_by_either_back_end() -> None:
    m = cp_model.CpModel()
    x = [m.new_bool_var(f"x{i}") for i in range(4)]
    m.add(sum(x) >= 3)
    m.add(sum(x) <= 2)
    m.maximize(sum(x))
    for budget in (None, NO_BUDGET):
        answer = switch.solve_switching(cp_solver(10.0, 0, 1), m, time.perf_counter() + 10.0, budget=budget)
        assert answer.status == "INFEASIBLE" and answer.values is None


def test_a_highs_run_past_the_limit_leaves_cpsats_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    import scipy.optimize

    def slow(*args: object, **kwargs: object) -> None:
        time.sleep(3.0)

    monkeypatch.setattr(scipy.optimize, "milp", slow)
    model, _, a, cap, w = _random_model(0, True)
    t0 = time.perf_counter()
    answer = switch.solve_switching(cp_solver(10.0, 0, 1), model, t0 + 0.4, budget=NO_BUDGET)
    assert time.perf_counter() - t0 < 1.5  # returned at the limit, not after HiGHS's 3 s
    assert answer.backends == ("cpsat", "highs") and answer.status in ("FEASIBLE", "UNKNOWN", "OPTIMAL")
    if answer.values is not None:  # CP-SAT's incumbent, whatever it is, is feasible
        assert answer.objective <= _brute(a, cap, w, True)


def _rubick() -> tuple[object, object]:
    problem = generate_rubick_round(2, 10, 8, 3)
    return problem, build_round_table(problem)


def test_rubick_switch_equals_cpsat_within_the_budget_and_after_a_stall(monkeypatch: pytest.MonkeyPatch) -> None:
    problem, table = _rubick()
    cpsat = rubick_round.solve(problem, table, time_limit=20, backend="cpsat")
    same = rubick_round.solve(problem, table, time_limit=20, backend="switch")
    assert cpsat.status == same.status == "optimal" and same.payload["backends"] == "cpsat"
    assert same.payload["choices"] == cpsat.payload["choices"]
    monkeypatch.setattr(switch, "STALL_DTIME_MIN", NO_BUDGET)
    monkeypatch.setattr(switch, "STALL_DTIME_PER_VAR", 0.0)
    stalled = rubick_round.solve(problem, table, time_limit=20, backend="switch")
    assert stalled.payload["backends"] == "cpsat+highs" and stalled.status == "optimal"
    assert stalled.objective == pytest.approx(cpsat.objective, abs=1e-6)
    assert violations(problem, table, stalled.payload["choices"]) == []


def _dtime(problem: object, table: object, seed: int) -> float:
    """CP-SAT's deterministic time to prove the round's per-node model, by a solve of its own."""
    built = rubick_round.build(problem, table, encoding="per-node")
    solver = cp_solver(30.0, seed, 1)
    solver.parameters.linearization_level = 2
    assert solver.solve(built.model) == cp_model.OPTIMAL
    return solver.deterministic_time


@pytest.mark.parametrize("seed", [0, 7])
def test_the_choice_of_back_ends_is_deterministic_for_a_round_and_seed(seed: int,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """At a budget half what CP-SAT needs on this round and seed it always switches; at twice, never; each of three
    solves returns the same back ends and the same decision."""
    problem, table = _rubick()
    need = _dtime(problem, table, seed)
    monkeypatch.setattr(switch, "STALL_DTIME_PER_VAR", 0.0)
    for factor, backends in ((0.5, "cpsat+highs"), (2.0, "cpsat")):
        monkeypatch.setattr(switch, "STALL_DTIME_MIN", factor * need)
        runs = [rubick_round.solve(problem, table, time_limit=30, seed=seed, encoding="per-node", backend="switch")
                for _ in range(3)]
        assert {r.payload["backends"] for r in runs} == {backends}
        assert all(r.status == "optimal" and r.payload["choices"] == runs[0].payload["choices"] for r in runs)


def test_crius_switch_gives_cpsats_optimum(monkeypatch: pytest.MonkeyPatch) -> None:
    problem = generate_crius_round(12, seed=1)
    table = build_crius_table(problem)
    cpsat = crius_round.solve(problem, table, time_limit=20, backend="cpsat")
    monkeypatch.setattr(switch, "STALL_DTIME_MIN", NO_BUDGET)
    monkeypatch.setattr(switch, "STALL_DTIME_PER_VAR", 0.0)
    stalled = crius_round.solve(problem, table, time_limit=20, backend="switch")
    assert cpsat.status == stalled.status == "optimal" and stalled.payload["backends"] == "cpsat+highs"
    assert stalled.objective == pytest.approx(cpsat.objective, rel=1e-9)


def test_the_policy_names_the_back_ends_and_other_kinds_refuse_switch() -> None:
    problem, _ = _rubick()
    decision = solve(problem, "exact", 20.0, backend="switch")
    assert decision.status == "optimal" and "back ends cpsat" in decision.message
    with pytest.raises(ValidationError, match="does not use backend 'switch'.*rubick: exact, rubick-exact"):
        make_policy("exact", PolicyOptions(backend="switch"), kind="experts")


@pytest.mark.parametrize(("kind", "name", "expected"), [
    ("rubick", "exact", "switch"), ("rubick", "rubick-exact", "switch"), ("crius", "exact", "switch"),
    ("experts", "exact", "cpsat"), ("moe-comm", "exact", "cpsat")])
def test_auto_is_each_methods_default(kind: str, name: str, expected: str) -> None:
    assert PolicyOptions().backend == "auto"
    assert make_policy(name, PolicyOptions(), kind=kind).backend == expected
    make_policy("heuristic" if kind == "rubick" else name, PolicyOptions(backend="auto"), kind=kind)  # never refused

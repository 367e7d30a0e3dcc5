"""A CP-SAT search made inside a cancel scope stops once the scope's event is set (optsched/formulations/cpsat.py;
issue 26: a solve whose client hangs up is cancelled), and is the same search while it is not."""

from __future__ import annotations

import random
import threading
import time

from ortools.sat.python import cp_model

from optsched.core.deadline import cancel_scope
from optsched.formulations.cpsat import CancellableSolver, cp_solver


def _market_split(n: int, seed: int = 0) -> cp_model.CpModel:
    """A market split instance (Cornuejols and Dawande): 4 equalities over ``n`` binaries, hard for n = 30."""
    rng = random.Random(seed)
    model = cp_model.CpModel()
    x = [model.new_bool_var(f"x{j}") for j in range(n)]
    for _ in range(4):
        row = [rng.randrange(100) for _ in range(n)]
        model.add(sum(a * v for a, v in zip(row, x)) == sum(row) // 2)
    model.maximize(sum(x))
    return model


def test_a_cancelled_search_stops_long_before_its_limit() -> None:
    cancel = threading.Event()
    with cancel_scope(cancel):
        solver = cp_solver(30.0, 0, 1)
    assert isinstance(solver, CancellableSolver)
    timer = threading.Timer(0.5, cancel.set)
    timer.start()
    started = time.perf_counter()
    solver.solve(_market_split(30))
    assert time.perf_counter() - started < 5.0  # 30 s without the event (margin for a loaded machine)
    timer.cancel()


def test_an_uncancelled_search_is_the_same_search() -> None:
    model = _market_split(14)
    plain = cp_solver(10.0, 3, 1)
    status = plain.solve(model)
    with cancel_scope(threading.Event()):
        watched = cp_solver(10.0, 3, 1)
    assert type(plain) is cp_model.CpSolver and watched.solve(model) == status
    assert watched.objective_value == plain.objective_value
    assert list(watched.response_proto.solution) == list(plain.response_proto.solution)

"""What every CP-SAT formulation sets up the same way: the solver with its time, seed and worker
count (``num_workers=1`` is reproducible, DESIGN.md "Determinism"), and the solution callback that
records a solve's progress for gap studies (:mod:`optsched.experiments.gap`: times to the first
solution and to a 1% gap).

A solver made inside a :func:`~optsched.core.deadline.cancel_scope` also stops its search (``stop_search``)
within :data:`CANCEL_POLL_S` of the scope's event being set: a watcher thread runs beside each ``solve`` and
does nothing else, so an uncancelled search is the same search (``num_workers=1`` stays reproducible)."""

from __future__ import annotations

import threading
import time
from typing import Any

from ortools.sat.python import cp_model

from optsched.core.deadline import current_cancel

#: seconds between two looks at the cancel event while a cancellable search runs
CANCEL_POLL_S = 0.05


class CancellableSolver(cp_model.CpSolver):
    """A CP-SAT solver whose searches stop once ``cancel`` is set (module docstring)."""

    def __init__(self, cancel: threading.Event) -> None:
        super().__init__()
        self.cancel = cancel

    def solve(self, model: cp_model.CpModel, solution_callback: Any = None) -> Any:
        done = threading.Event()

        def watch() -> None:
            while not done.wait(CANCEL_POLL_S):
                if self.cancel.is_set():
                    self.stop_search()  # again until the search returns: a stop before it starts is not kept

        watcher = threading.Thread(target=watch, name="optsched-cpsat-cancel", daemon=True)
        watcher.start()
        try:
            return super().solve(model, solution_callback)
        finally:
            done.set()
            watcher.join()


def cp_solver(seconds: float, seed: int, workers: int) -> cp_model.CpSolver:
    """A CP-SAT solver limited to ``seconds`` of wall time, with ``seed`` and ``workers``, stopped early when the
    enclosing :func:`~optsched.core.deadline.cancel_scope` is cancelled (module docstring); callers set further
    parameters on ``solver.parameters``."""
    cancel = current_cancel()
    solver = cp_model.CpSolver() if cancel is None else CancellableSolver(cancel)
    solver.parameters.max_time_in_seconds = seconds
    solver.parameters.num_workers = workers
    solver.parameters.random_seed = seed
    return solver


class SolutionTrace(cp_model.CpSolverSolutionCallback):
    """Appends (seconds since ``t0``, objective, bound) to ``out`` at every solution, both in the
    decision's frame: the model's values divided by ``divisor`` plus ``offset`` (a negative divisor turns
    a minimised cost into the decision's ``-cost``)."""

    def __init__(self, out: list[tuple[float, float, float]], t0: float, divisor: float, offset: float = 0.0) -> None:
        super().__init__()
        self.out, self.t0, self.divisor, self.offset = out, t0, divisor, offset

    def on_solution_callback(self) -> None:
        self.out.append((time.perf_counter() - self.t0, self.objective_value / self.divisor + self.offset,
                         self.best_objective_bound / self.divisor + self.offset))


def solve_scaled(solver: cp_model.CpSolver, model: cp_model.CpModel, scale: float, offset: float,
                 trace: list[tuple[float, float, float]] | None = None, t0: float = 0.0
                 ) -> tuple[str, bool, float | None, list[int] | None]:
    """Solve a model whose objective is the decision's objective times ``scale`` less ``offset`` (integer
    weights): (status name, whether a solution was found, the proven bound in the decision's frame, the
    solution's values by variable index), recording progress in ``trace`` (:class:`SolutionTrace`)."""
    status = solver.solve(model, None if trace is None else SolutionTrace(trace, t0, scale, offset))
    name = solver.status_name(status)
    found = name in ("OPTIMAL", "FEASIBLE")
    bound = solver.best_objective_bound / scale + offset if found else None
    return name, found, bound, list(solver.response_proto.solution) if found else None


__all__ = ["CANCEL_POLL_S", "CancellableSolver", "SolutionTrace", "cp_solver", "solve_scaled"]

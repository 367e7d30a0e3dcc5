"""Phase two of Lyra's allocation, the multiple-choice knapsack (thesis Sec. 3.5.2), in CP-SAT.

One Boolean ``y_i`` per item; at most one item per group (``sum_{i in g} y_i <= 1``); total weight within
the capacity; maximise the total value. CP-SAT needs integer coefficients: values are scaled to
milliseconds (:data:`VALUE_SCALE`) and rounded, so the solver's choice is optimal to within half a
millisecond per item; the reported objective is the true value (seconds) of that choice. Size: items
Booleans, groups + 1 linear constraints (354 items in 84 groups on the benchmark's instance).
"""

from __future__ import annotations

import time

import numpy as np
from ortools.sat.python import cp_model

from optsched.formulations.solution import ModelSize, Solution
from optsched.rounds.lyra_allocate.items import Items

#: value units per second given to CP-SAT
VALUE_SCALE = 1000.0


def solve(items: Items, capacity: int, *, time_limit: float = 10.0, seed: int = 0, workers: int = 1,
          hint: dict[str, int] | None = None) -> Solution:
    """Solve the knapsack (module docstring); ``hint``: workers added per job of a warm start. The
    payload holds ``extra`` (job -> workers added)."""
    t0 = time.perf_counter()
    model = cp_model.CpModel()
    y = [model.NewBoolVar(f"y{i}") for i in range(items.size)]
    for g in range(len(items.jobs)):
        model.AddAtMostOne(y[i] for i in np.flatnonzero(items.group == g))
    model.Add(sum(int(w) * y[i] for i, w in enumerate(items.weight)) <= max(0, int(capacity)))
    scaled = np.rint(items.value * VALUE_SCALE).astype(np.int64)
    model.Maximize(sum(int(v) * y[i] for i, v in enumerate(scaled) if v))
    if hint is not None:
        for i in range(items.size):
            model.AddHint(y[i], hint.get(items.jobs[int(items.group[i])], 0) == int(items.extra[i]))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(0.01, time_limit - (time.perf_counter() - t0))
    solver.parameters.num_workers = workers
    solver.parameters.random_seed = seed
    code = solver.Solve(model)
    size = ModelSize(items.size, len(items.jobs) + 1, "cpsat-mckp")
    wall = time.perf_counter() - t0
    if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return Solution("infeasible" if code == cp_model.INFEASIBLE else "unknown", None, None, wall,
                        hint is not None, size)
    extra = {items.jobs[int(items.group[i])]: int(items.extra[i]) for i in range(items.size) if solver.BooleanValue(y[i])}
    value = items.value_of(extra)
    # the true value of any choice is within half a scaled unit per chosen item of its scaled value
    slack = 0.5 * len(items.jobs) / VALUE_SCALE
    bound = value if code == cp_model.OPTIMAL else solver.BestObjectiveBound() / VALUE_SCALE + slack
    return Solution("optimal" if code == cp_model.OPTIMAL else "feasible", value, bound, wall, hint is not None, size,
                    {"extra": extra})


__all__ = ["VALUE_SCALE", "solve"]

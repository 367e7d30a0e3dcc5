"""The ``switch`` back end: CP-SAT first, HiGHS when CP-SAT stalls (issue 29, item 3: "a back-end choice by
measurement (HiGHS and CP-SAT have different hard rounds; a portfolio, racing two back ends on two cores, or a
switch when one stalls)").

**The choice.** CP-SAT (one worker unless told otherwise) searches for at most a *stall budget* of deterministic
time (CP-SAT's ``max_deterministic_time``, a count of work done, the same on every machine and under any load),
within the call's wall-clock limit. When it proves its answer (optimal, or the model infeasible) that is the
answer. When it spends the budget without a proof, it has *stalled*, and HiGHS (the one in SciPy,
``scipy.optimize.milp``, so no extra package) solves the same model as a MILP (:func:`optsched.formulations.milp.
linear_form`) in what is left of the wall-clock limit. The answer is the better solution of the two, with the
tighter of their bounds; it is optimal when HiGHS proves its own optimal, or when the better solution meets the
tighter bound.

**Deterministic.** With one CP-SAT worker, whether CP-SAT stalls depends only on the model, the seed and the
budget, never on the machine or its load: for a given round and seed the same back ends run (the answer's
``backends``). Two cases depend on the clock, and both are reported: a wall-clock limit that passes before the
budget is spent (then CP-SAT's answer stands, no switch: ``backends`` is ``("cpsat",)`` and ``stalled`` is
False), and a HiGHS search that the limit stops before its proof (then its incumbent, like any time-limited
search's, depends on the clock). With several CP-SAT workers the deterministic time is not reproducible.

**Why this choice, not a race.** A race of two back ends on two cores returns whichever proves first: which one
that is depends on the machine's load, so the choice is not reproducible, and on a two-core machine it takes the
core a second solve or the caller would use. A portfolio that runs both to the end costs the slower one's time on
every round. The switch costs nothing on rounds CP-SAT proves within its budget (the same search as ``cpsat``),
and bounds the time a stalled CP-SAT spends before the other back end tries.

**The budget** (:func:`stall_budget`): :data:`STALL_DTIME_PER_VAR` deterministic seconds per model variable, at
least :data:`STALL_DTIME_MIN`; ours, chosen from what CP-SAT needed where it proved (one worker, no warm start):
0.30-0.67 deterministic seconds on the Sia-shaped ``hard`` rounds of ``benchmarks/peer_instances.py`` at 1,024
GPUs (pooled, about 3,000 variables, seeds 0-23; 1e-4 to 2.3e-4 a variable, and up to 1.6e-4 in the aggregated
encoding), 0.7-2.3 on generated 300-job Crius rounds (3,800-4,800 variables, up to 5.8e-4 a variable), where two
of six seeds did not prove within 30 s (12-13 deterministic seconds) and HiGHS proved them in 3.3 and 8.2 s. The
budget is about twice the most a proving Crius round needed and 4-10 times what the Rubick rounds needed, so a
round is handed over only when CP-SAT needs well over what rounds of its size usually take.

**HiGHS's run** is on a thread of its own (HiGHS releases the GIL) that this one watches: when the wall-clock
limit passes (or the enclosing :func:`~optsched.core.deadline.cancel_scope` is cancelled) the call returns at once
with what CP-SAT found, and HiGHS stops at its own time limit. Its solution is kept only after it satisfied every
constraint and domain of the CP-SAT model exactly (in integers).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from ortools.sat.python import cp_model

from optsched.core.deadline import current_cancel
from optsched.formulations.cpsat import SolutionTrace, solve_scaled
from optsched.formulations.solution import MIN_SOLVER_SECONDS, OutOfTime
from optsched.formulations.watched import run_watched

log = logging.getLogger(__name__)

#: deterministic seconds of CP-SAT search per model variable before it counts as stalled (module docstring)
STALL_DTIME_PER_VAR = 1e-3
#: the least stall budget, deterministic seconds
STALL_DTIME_MIN = 0.5


def stall_budget(num_vars: int) -> float:
    """The deterministic seconds CP-SAT may search a model of ``num_vars`` variables before it counts as stalled
    (module docstring, "The budget"): it depends on the model alone, so that the choice does not depend on the
    clock."""
    return max(STALL_DTIME_MIN, STALL_DTIME_PER_VAR * num_vars)


@dataclass(frozen=True)
class SwitchAnswer:
    """What :func:`solve_switching` found, in the model's objective units (what ``CpSolver.objective_value``
    reports): ``status`` in CP-SAT's names (``OPTIMAL``, ``FEASIBLE``, ``INFEASIBLE``, ``UNKNOWN``,
    ``MODEL_INVALID``), the solution's values by variable index (None without one), its objective, the proven
    bound, the back ends that ran, and whether CP-SAT stalled."""

    status: str
    values: list[int] | None
    objective: float | None
    bound: float | None
    backends: tuple[str, ...]
    stalled: bool


def solve_switching(solver: cp_model.CpSolver, model: cp_model.CpModel, until: float,
                    callback: cp_model.CpSolverSolutionCallback | None = None,
                    budget: float | None = None) -> SwitchAnswer:
    """CP-SAT (``solver``, its wall-clock limit already set) for at most ``budget`` deterministic seconds
    (default :func:`stall_budget` of the model's size), then HiGHS until ``until`` (a ``time.perf_counter()``
    reading) when CP-SAT stalled (module docstring)."""
    limit = stall_budget(len(model.proto.variables)) if budget is None else budget
    solver.parameters.max_deterministic_time = min(solver.parameters.max_deterministic_time, limit)
    status = solver.status_name(solver.solve(model, callback))
    found = status in ("OPTIMAL", "FEASIBLE")
    values = list(solver.response_proto.solution) if found else None
    objective = solver.objective_value if found else None
    bound = solver.best_objective_bound if found else None
    stalled = status in ("FEASIBLE", "UNKNOWN") and solver.deterministic_time >= 0.999 * limit
    cpsat = SwitchAnswer(status, values, objective, bound, ("cpsat",), stalled)
    if not stalled or until - time.perf_counter() < MIN_SOLVER_SECONDS:
        return cpsat
    log.info("CP-SAT stalled after %.2f deterministic s (%s); HiGHS gets %.2f s", solver.deterministic_time,
             status, until - time.perf_counter())
    try:
        highs = _highs(model, until)
    except OutOfTime:
        highs = None
    return _better(model, cpsat, highs)


@dataclass(frozen=True)
class _Highs:
    status: str
    values: list[int] | None
    objective: float | None
    bound: float | None


def _highs(model: cp_model.CpModel, until: float) -> _Highs | None:
    """HiGHS (SciPy's ``milp``) on the model until ``until``; None when the limit or a cancel comes first."""
    from scipy.optimize import Bounds, LinearConstraint, milp as scipy_milp

    from optsched.formulations import milp

    form = milp.linear_form(model, until - MIN_SOLVER_SECONDS)
    if form.infeasible:
        return _Highs("INFEASIBLE", None, None, None)
    sense = -1.0 if form.maximize else 1.0
    left = until - time.perf_counter()
    kw: dict[str, Any] = {}
    if form.matrix.shape[0]:
        kw["constraints"] = LinearConstraint(form.matrix, form.row_lo, form.row_hi)
    cancel = current_cancel()
    res = run_watched(lambda: scipy_milp(sense * form.objective, integrality=np.ones(form.num_vars),
                                         bounds=Bounds(form.lower, form.upper),
                                         options={"time_limit": max(left, MIN_SOLVER_SECONDS), "mip_rel_gap": 0.0},
                                         **kw),
                      lambda: time.perf_counter() >= until or (cancel is not None and cancel.is_set()),
                      "optsched-switch-highs")
    if res is None:
        return None
    if res.status == 2:
        return _Highs("INFEASIBLE", None, None, None)
    bound = None
    if getattr(res, "mip_dual_bound", None) is not None and np.isfinite(res.mip_dual_bound):
        bound = sense * float(res.mip_dual_bound) + form.constant
    if res.x is None:
        return _Highs("UNKNOWN", None, None, bound)
    values = np.clip(np.rint(res.x), form.lower, form.upper).astype(np.int64)
    if form.violations(values):
        log.warning("HiGHS's solution breaks the model (%s); it is not used", form.violations(values)[0])
        return _Highs("UNKNOWN", None, None, bound)
    return _Highs("OPTIMAL" if res.status == 0 else "FEASIBLE", [int(v) for v in values], form.value(values), bound)


def _better(model: cp_model.CpModel, cpsat: SwitchAnswer, highs: _Highs | None) -> SwitchAnswer:
    """The better solution of the two with the tighter bound (module docstring)."""
    backends = ("cpsat", "highs")
    if highs is None:  # cut off by the limit (or a cancel): CP-SAT's answer stands
        return SwitchAnswer(cpsat.status, cpsat.values, cpsat.objective, cpsat.bound, backends, True)
    if highs.status == "INFEASIBLE":  # HiGHS proved it: CP-SAT found nothing either (it would contradict)
        if cpsat.values is None:
            return SwitchAnswer("INFEASIBLE", None, None, None, backends, True)
        log.warning("HiGHS reports the model infeasible, CP-SAT found a solution; CP-SAT's answer stands")
        return SwitchAnswer(cpsat.status, cpsat.values, cpsat.objective, cpsat.bound, backends, True)
    maximize = model.proto.objective.scaling_factor < 0
    sign = 1.0 if maximize else -1.0
    pick = (min if maximize else max)
    bounds = [b for b in (cpsat.bound, highs.bound) if b is not None]
    bound = pick(bounds) if bounds else None
    best = max((a for a in (cpsat, highs) if a.objective is not None), key=lambda a: sign * a.objective,
               default=None)
    if best is None:
        return SwitchAnswer("UNKNOWN", None, None, None, backends, True)
    assert best.objective is not None
    tol = 1e-9 * max(1.0, abs(best.objective))
    proven = (best is highs and highs.status == "OPTIMAL") or (
        bound is not None and sign * (bound - best.objective) <= tol)
    if proven:  # a bound on the wrong side of the proven optimum is the solvers' rounding: the optimum bounds it
        bound = best.objective if bound is None else (max if maximize else min)(bound, best.objective)
    return SwitchAnswer("OPTIMAL" if proven else "FEASIBLE", best.values, best.objective, bound, backends, True)


def solve_scaled_by(backend: str, solver: cp_model.CpSolver, model: cp_model.CpModel, scale: float, offset: float,
                    until: float, trace: list[tuple[float, float, float]] | None = None, t0: float = 0.0
                    ) -> tuple[str, bool, float | None, list[int] | None, dict[str, str]]:
    """:func:`optsched.formulations.cpsat.solve_scaled` by a back end of :data:`~optsched.formulations.solution.
    CPSAT_BACKENDS`: ``"cpsat"``, or ``"switch"`` (:func:`solve_switching`, HiGHS after a stall until ``until``).
    Returns (status name, whether a solution was found, the proven bound in the decision's frame, the values, what
    the payload records: ``{"backends": "cpsat+highs"}`` when the switch ran HiGHS, else nothing)."""
    if backend == "cpsat":
        return (*solve_scaled(solver, model, scale, offset, trace, t0), {})
    answer = solve_switching(solver, model, until, None if trace is None else SolutionTrace(trace, t0, scale, offset))
    found = answer.values is not None
    bound = answer.bound / scale + offset if found and answer.bound is not None else None
    return answer.status, found, bound, answer.values, {"backends": "+".join(answer.backends)}


__all__ = ["STALL_DTIME_MIN", "STALL_DTIME_PER_VAR", "SwitchAnswer", "solve_scaled_by", "solve_switching",
           "stall_budget"]

"""The experts round as an exact CP-SAT model (thesis Sec. 4.5.2; the heuristic it must never lose to
is Lina's first-fit decreasing, :mod:`optsched.heuristics.lina`): host every expert on
``min_replicas .. max_replicas`` distinct devices with at most ``slots`` replicas per device, split its
tokens over its replicas, and minimise the makespan (the most loaded device's time,
:mod:`optsched.rounds.experts.plan`).

**Model.** Loads are quantised to integer units: ``Q = RESOLUTION / (W + replica_cost x D x slots)``
units per token (``W`` = total load), ``q_e = round(w_e Q)`` (at least 1 when ``w_e > 0``), and device
times weighted by ``c_d = round(SPEED_SCALE / speed_d)``:

* ``x[e, d]`` (bool): device d hosts expert e; ``lo_e <= sum_d x[e, d] <= hi_e``, ``sum_e x[e, d] <=
  slots``;
* ``t[e, d]`` (integer units, only for experts with load): ``t[e, d] <= q_e x[e, d]``, ``sum_d t[e, d]
  = q_e``;
* ``M >= c_d (sum_e t[e, d] + round(replica_cost Q) sum_e x[e, d])`` for every device; minimise ``M``;
* symmetry breaking: devices of equal speed keep their work in non-increasing order (any plan is a
  relabelling of one that does); the warm start is relabelled the same way;
* ``M`` at least :func:`~optsched.rounds.experts.plan.makespan_bound` of the quantised data (the LP
  relaxation alone does not see that an expert's tokens run on at most as many devices as the slots
  allow it replicas: with one slot per device the makespan is the largest load, which CP-SAT could not
  prove in 10 s without this cut).

Size: ``E x D`` booleans, up to ``E x D`` integers and ``M``; ``E x D + 3 E + 3 D`` constraints
(linking, replica bounds and token sums per expert, slots and makespan per device, symmetry and the
bound): 16 experts x 16 devices: 513 variables, 352 constraints; 64 x 64: 8,193 variables.

**Decoding.** The solver's hosting ``x`` is kept and the shares are re-optimised exactly in floating
point for it by a small LP (:func:`best_shares`, HiGHS through scipy), so quantisation never costs the
plan anything. **Bound.** The solver's bound ``LB_q`` is on quantised units; a true plan of makespan
``M*`` quantises to at most ``(1 + delta) SPEED_SCALE (Q M* + 3 max_d slots/speed_d)`` units (share,
load and replica-cost rounding, at most 3 units per replica; ``delta`` = the relative rounding of
``c_d``), so ``M* >= (LB_q / ((1 + delta) SPEED_SCALE) - 3 max_d slots/speed_d) / Q``; the reported
bound is the larger of that and :func:`~optsched.rounds.experts.plan.lower_bound`. A plan the solver
proves optimal is therefore optimal up to about ``3 slots / (Q M*)`` (2e-5 of the makespan for 16
experts at the default resolution), and reported ``optimal`` with that bound.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import numpy as np
from ortools.sat.python import cp_model

from optsched.formulations import milp
from optsched.formulations.cpsat import SolutionTrace, cp_solver
from optsched.formulations.solution import ModelSize, Solution, solver_seconds
from optsched.rounds.experts.plan import ReplicaPlan, lower_bound, makespan, makespan_bound, replica_caps
from optsched.rounds.experts.problem import ExpertsRound

log = logging.getLogger(__name__)

#: quantisation units of the total work (module docstring)
RESOLUTION = 1_000_000
#: device-time weights are round(SPEED_SCALE / speed) (speeds are relative, the fastest is 1)
SPEED_SCALE = 1000
#: units of slack per replica in the bound (module docstring)
SLACK_PER_REPLICA = 3.0


@dataclass
class ExpertPackingModel:
    """A built model and what decoding needs."""

    model: cp_model.CpModel
    x: np.ndarray  # (E, D) of BoolVar
    t: dict[tuple[int, int], cp_model.IntVar]
    makespan: cp_model.IntVar
    q: np.ndarray
    cq: int
    c: np.ndarray
    scale: float
    delta: float
    classes: list[np.ndarray]
    size: ModelSize


def build(problem: ExpertsRound) -> ExpertPackingModel:
    """The CP-SAT model of ``problem`` (module docstring)."""
    E, D, w = problem.num_experts, problem.num_devices, problem.loads
    basis = float(w.sum()) + problem.replica_cost * D * problem.slots
    scale = RESOLUTION / max(basis, 1e-9)
    q = np.where(w > 0, np.maximum(1, np.round(w * scale)), 0).astype(np.int64)
    cq = int(round(problem.replica_cost * scale))
    ideal = SPEED_SCALE / problem.speeds
    c = np.maximum(1, np.round(ideal)).astype(np.int64)
    delta = float(np.max(np.abs(c - ideal) / ideal))
    m = cp_model.CpModel()
    x = np.array([[m.new_bool_var(f"x_{e}_{d}") for d in range(D)] for e in range(E)], dtype=object)
    t: dict[tuple[int, int], cp_model.IntVar] = {}
    lo, hi = problem.min_replicas, problem.max_replicas
    for e in range(E):
        m.add(sum(x[e]) >= int(lo[e]))
        m.add(sum(x[e]) <= int(hi[e]))
        if q[e] > 0:
            for d in range(D):
                t[e, d] = m.new_int_var(0, int(q[e]), f"t_{e}_{d}")
                m.add(t[e, d] <= int(q[e]) * x[e, d])
            m.add(sum(t[e, d] for d in range(D)) == int(q[e]))
    top = int(c.max()) * (int(q.sum()) + cq * problem.slots)
    span = m.new_int_var(0, max(top, 0), "makespan")
    work = []
    for d in range(D):
        m.add(sum(x[:, d]) <= problem.slots)
        wd = sum(t[e, d] for e in range(E) if (e, d) in t) + cq * sum(x[:, d])
        work.append(wd)
        m.add(span >= int(c[d]) * wd)
    classes = [np.flatnonzero(c == v) for v in np.unique(c)]
    for members in classes:
        for a, b in zip(members[:-1], members[1:]):
            m.add(work[a] >= work[b])
    floor = makespan_bound(q.astype(float), lo, replica_caps(problem), float(cq), 1.0 / c)
    m.add(span >= int(np.ceil(floor - 1e-6)))
    m.minimize(span)
    n_cons = len(m.proto.constraints)
    size = ModelSize(E * D + len(t) + 1, n_cons, "per-device")
    return ExpertPackingModel(m, x, t, span, q, cq, c, scale, delta, classes, size)


def _hint(built: ExpertPackingModel, problem: ExpertsRound, plan: ReplicaPlan) -> None:
    """Hint ``plan``, its devices relabelled within each speed class by non-increasing work."""
    E, D = built.x.shape
    t = np.zeros((E, D), dtype=np.int64)
    for e in range(E):
        if built.q[e] > 0:
            raw = built.q[e] * plan.share[e]
            base = np.floor(raw).astype(np.int64)
            rest = int(built.q[e] - base.sum())
            order = np.argsort(-(raw - base), kind="stable")
            base[order[:rest]] += 1
            t[e] = base
    work = t.sum(axis=0) + built.cq * plan.hosted.sum(axis=0)
    perm = np.arange(D)
    for members in built.classes:
        perm[members] = members[np.argsort(-work[members], kind="stable")]
    for e in range(E):
        for slot, d in enumerate(perm):
            built.model.add_hint(built.x[e, slot], bool(plan.hosted[e, d]))
            if (e, slot) in built.t:
                built.model.add_hint(built.t[e, slot], int(t[e, d]))
    built.model.add_hint(built.makespan, int(np.max(built.c * work[perm])))


def best_shares(problem: ExpertsRound, hosted: np.ndarray) -> ReplicaPlan:
    """The shares that minimise the makespan for a fixed ``hosted`` matrix (an LP over the hosted pairs;
    experts without load split equally; falls back to equal shares if the LP solver fails), then
    without the replicas that serve no tokens (:func:`_pruned`)."""
    E, D = hosted.shape
    w, speed = problem.loads, problem.speeds
    pairs = [(e, d) for e in range(E) for d in range(D) if hosted[e, d] and w[e] > 0]
    share = np.where(hosted, 1.0 / np.maximum(hosted.sum(axis=1, keepdims=True), 1), 0.0)
    if not pairs:
        return ReplicaPlan(hosted, share)
    n = len(pairs)
    cost = np.zeros(n + 1)
    cost[-1] = 1.0
    a_eq = np.zeros((E, n + 1))
    a_ub = np.zeros((D, n + 1))
    for k, (e, d) in enumerate(pairs):
        a_eq[e, k] = 1.0
        a_ub[d, k] = w[e] / speed[d]
    a_ub[:, -1] = -1.0
    fixed = problem.replica_cost * hosted.sum(axis=0) / speed + (w[:, None] * np.where(w[:, None] > 0, 0.0, share)
                                                                 ).sum(axis=0) / speed
    rows = np.flatnonzero(np.abs(a_eq).sum(axis=1) > 0)
    from scipy.optimize import linprog  # imported on use: scipy.optimize costs 0.2 s (issue 26, item 4)
    res = linprog(cost, A_ub=a_ub, b_ub=-fixed, A_eq=a_eq[rows], b_eq=np.ones(rows.size),
                  bounds=[(0, None)] * n + [(0, None)], method="highs")
    if res.status == 0:
        for k, (e, d) in enumerate(pairs):
            share[e, d] = max(0.0, float(res.x[k]))
        loaded = w > 0
        share[loaded] /= share[loaded].sum(axis=1, keepdims=True)
    return _pruned(problem, hosted, share)


def _pruned(problem: ExpertsRound, hosted: np.ndarray, share: np.ndarray) -> ReplicaPlan:
    """Drop replicas serving no tokens (they would only hold a slot and swap weights in), keeping each
    expert's ``min_replicas``; the makespan can only fall."""
    keep = hosted & ((share > 1e-12) | (problem.loads[:, None] <= 0))
    for e in np.flatnonzero(keep.sum(axis=1) < problem.min_replicas):
        idle = np.flatnonzero(hosted[e] & ~keep[e])
        keep[e, idle[: int(problem.min_replicas[e] - keep[e].sum())]] = True
    return ReplicaPlan(keep, np.where(keep, share, 0.0))


def solve(problem: ExpertsRound, *, time_limit: float, seed: int = 0, workers: int = 1,
          hint: ReplicaPlan | None = None, trace: list[tuple[float, float, float]] | None = None,
          backend: str = "cpsat") -> Solution:
    """Solve the model within ``time_limit`` seconds from the call (build included) with ``backend``
    (CP-SAT, or the same model as a MILP through pulp: ``"cbc"``, ``"highs"``,
    :mod:`optsched.formulations.milp`). The :class:`Solution` is in the decision's frame: ``objective =
    -makespan`` and ``bound = -(lower bound)`` (module docstring); ``payload["plan"]`` is the
    :class:`ReplicaPlan` with exact shares. ``trace`` receives (seconds, objective, bound) at every
    CP-SAT solution, in the same frame."""
    t0 = time.perf_counter()
    built = build(problem)
    if hint is not None:
        _hint(built, problem, hint)
    units = SPEED_SCALE * built.scale
    if backend == "cpsat":
        solver = cp_solver(solver_seconds(time_limit, t0), seed, workers)
        status = solver.solve(built.model, None if trace is None else SolutionTrace(trace, t0, -units))
        name = solver.status_name(status)
        found = name in ("OPTIMAL", "FEASIBLE")
        values = list(solver.response_proto.solution) if found else None
        lb_q: float | None = solver.best_objective_bound if found else None
    else:
        res = milp.solve_milp(built.model, backend, solver_seconds(time_limit, t0), threads=workers)
        name, values, lb_q = res.status.upper(), res.values, res.bound
        found = values is not None and name in ("OPTIMAL", "FEASIBLE")
    tag = {"solver_status": name, "backend": backend}
    if not found:
        return Solution("infeasible" if name == "INFEASIBLE" else "unknown", None, None, time.perf_counter() - t0,
                        hint is not None, built.size, tag)
    assert values is not None
    hosted = np.array([[values[v.index] for v in row] for row in built.x], dtype=bool)
    plan = best_shares(problem, hosted)
    cost = makespan(problem, plan)
    lb = lower_bound(problem)
    if lb_q is not None:
        sigma = float(np.max(problem.slots / problem.speeds))
        lb = max(lb, (lb_q / ((1.0 + built.delta) * SPEED_SCALE) - SLACK_PER_REPLICA * sigma) / built.scale)
    lb = min(lb, cost)
    wall = time.perf_counter() - t0
    log.debug("expert packing (%s): %s, makespan %.6g, bound %.6g, %.2f s", backend, name, cost, lb, wall)
    return Solution("optimal" if name == "OPTIMAL" else "feasible", -cost, -lb, wall, hint is not None, built.size,
                    {"plan": plan, **tag})


__all__ = ["ExpertPackingModel", "RESOLUTION", "SPEED_SCALE", "best_shares", "build", "solve"]

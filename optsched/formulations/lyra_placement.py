"""The exact worker placement (thesis Sec. 3.5.3, bin packing) in CP-SAT, for the gap of best-fit
decreasing.

From the same start as the heuristic (:func:`optsched.rounds.placement.start.start_state`: running
jobs keep their base and flexible workers up to their counts), for every job with workers to place and
every server of a pool it may use: integers ``b_js`` (base workers) and ``f_js`` (flexible workers);
per job and pool a Boolean ``z_jp`` (the job runs there; at most one pool; forced for a running job);

* ``sum_{s in p} b_js = base_j z_jp`` (a queued job's base demand whole or not at all) and
  ``sum_{s in p} f_js <= flex_j z_jp``;
* per server ``sum_j (b_js + f_js) g_j(pool s) <= free GPUs left by the start``;
* with Lyra's groups (``lyra=True``; not a rule of the round, so the ``exact`` method of the kind
  solves without them), per inference server a Boolean ``q_s`` (flexible group; fixed when the start
  already holds flexible or base workers there; a server holding both takes nothing new, as in the
  heuristic): ``b_js = 0`` when ``q_s``, ``f_js = 0`` when not;
* ``u_s`` (server used) >= every worker on it, fixed to 1 where the start holds workers;
* maximise ``M x placed workers - sum_s u_s``, ``M`` = usable servers + 1: the round objective
  (:mod:`optsched.rounds.placement.evaluate`) up to a constant.

Size: 2 x (jobs to place) x (servers of their pools) integers plus the server Booleans; about 1,500
variables on the default generated round (20 queued jobs, 24 servers). Warm-started by the
heuristic's placement.
"""

from __future__ import annotations

import math
import time

from ortools.sat.python import cp_model

from optsched.formulations.cpsat import cp_solver
from optsched.formulations.solution import ModelSize, Solution
from optsched.rounds.placement.start import pools_of, start_state
from optsched.rounds.lyra.problem import INFERENCE
from optsched.rounds.placement.payload import JobPlacement, WorkerPlacement
from optsched.rounds.placement.problem import PlacementRound


def solve(problem: PlacementRound, *, lyra: bool = True, time_limit: float = 10.0, seed: int = 0, workers: int = 1,
          hint: WorkerPlacement | None = None) -> Solution:
    """Solve the placement (module docstring); the payload holds ``placement`` (a WorkerPlacement)."""
    t0 = time.perf_counter()
    state = start_state(problem)
    nodes = problem.usable_nodes
    left = {n: problem.free(n).gpus for n in nodes}
    held = set()
    for shares in (*state.base.values(), *state.flex.values()):
        for n, g in shares.items():
            left[n] -= g
            held.add(n)
    m = cp_model.CpModel()
    big = len(nodes) + 1
    u = {n: m.NewBoolVar(f"u_{n}") for n in nodes}
    for n in held:
        m.Add(u[n] == 1)
    q = {}
    mixed = set()
    if lyra:
        for n in nodes:
            if problem.pool(n) != INFERENCE:
                continue
            has_flex = any(n in s for s in state.flex.values() if s)
            has_base = any(n in s for s in state.base.values() if s)
            if has_flex and has_base:
                mixed.add(n)  # holds both groups already: takes nothing new, as in the heuristic
                continue
            q[n] = m.NewBoolVar(f"q_{n}")
            if has_flex:
                m.Add(q[n] == 1)
            if has_base:
                m.Add(q[n] == 0)
    load: dict[str, list] = {n: [] for n in nodes}
    placed = []
    b: dict[tuple[str, str], cp_model.IntVar] = {}
    f: dict[tuple[str, str], cp_model.IntVar] = {}
    for name, n_base, n_flex in state.todo:
        job = problem.job(name)
        pools = pools_of(problem, name, lyra)
        z = {p: m.NewBoolVar(f"z_{name}_{p}") for p in pools}
        if problem.current(name) is not None:
            m.Add(z[pools[0]] == 1)
        m.AddAtMostOne(z.values())
        for p in pools:
            servers = [n for n in nodes if problem.pool(n) == p]
            wg = problem.worker_gpus(job, p)
            for n in servers:
                cap = 0 if n in mixed else max(0, left[n]) // wg
                b[name, n] = m.NewIntVar(0, min(n_base, cap), f"b_{name}_{n}")
                f[name, n] = m.NewIntVar(0, min(n_flex, cap), f"f_{name}_{n}")
                load[n].append(wg * (b[name, n] + f[name, n]))
                m.Add(b[name, n] + f[name, n] <= (n_base + n_flex) * u[n])
                if n in q:
                    m.Add(b[name, n] == 0).OnlyEnforceIf(q[n])
                    m.Add(f[name, n] == 0).OnlyEnforceIf(q[n].Not())
            m.Add(sum(b[name, n] for n in servers) == n_base * z[p])
            m.Add(sum(f[name, n] for n in servers) <= n_flex * z[p])
            placed.extend(b[name, n] + f[name, n] for n in servers)
    for n in nodes:
        if load[n]:
            m.Add(sum(load[n]) <= max(0, left[n]))
    m.Maximize(big * sum(placed) - sum(u.values()))
    if hint is not None:
        for (name, n), var in b.items():
            p = hint.of(name)
            m.AddHint(var, 0 if p is None else (dict(p.base).get(n, 0) - state.base.get(name, {}).get(n, 0))
                      // problem.worker_gpus(problem.job(name), n))
        for (name, n), var in f.items():
            p = hint.of(name)
            m.AddHint(var, 0 if p is None else (dict(p.flexible).get(n, 0) - state.flex.get(name, {}).get(n, 0))
                      // problem.worker_gpus(problem.job(name), n))
    solver = cp_solver(max(0.01, time_limit - (time.perf_counter() - t0)), seed, workers)
    code = solver.Solve(m)
    size = ModelSize(len(b) + len(f) + len(u) + len(q), len(m.Proto().constraints), "cpsat-placement")
    wall = time.perf_counter() - t0
    if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return Solution("infeasible" if code == cp_model.INFEASIBLE else "unknown", None, None, wall,
                        hint is not None, size)
    base = {j: dict(s) for j, s in state.base.items()}
    flex = {j: dict(s) for j, s in state.flex.items()}
    unplaced: dict[str, int] = {}
    for name, n_base, n_flex in state.todo:
        job = problem.job(name)
        got = 0
        for (j, n), var in b.items():
            if j == name and solver.Value(var):
                base.setdefault(name, {})[n] = base.get(name, {}).get(n, 0) + solver.Value(var) * problem.worker_gpus(job, n)
                got += solver.Value(var)
        for (j, n), var in f.items():
            if j == name and solver.Value(var):
                flex.setdefault(name, {})[n] = flex.get(name, {}).get(n, 0) + solver.Value(var) * problem.worker_gpus(job, n)
                got += solver.Value(var)
        if got < n_base + n_flex:
            unplaced[name] = n_base + n_flex - got
    placement = WorkerPlacement(tuple(JobPlacement(n, tuple(base[n].items()), tuple(flex.get(n, {}).items()))
                                      for n in sorted(base) if base[n]), tuple(unplaced.items()))
    total = sum(t[1] + t[2] for t in state.todo)
    const = len(nodes) - big * total
    # the objective is an integer: read it and its bound as integers (the solver's floats may carry noise,
    # e.g. a bound 2.2e-16 below a proven optimum)
    obj = const + round(solver.ObjectiveValue())
    bound = const + math.floor(solver.BestObjectiveBound() + 1e-6)
    return Solution("optimal" if code == cp_model.OPTIMAL else "feasible", float(obj), float(bound), wall,
                    hint is not None, size, {"placement": placement})


__all__ = ["solve"]

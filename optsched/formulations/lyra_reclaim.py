"""The exact reclaim selection (thesis Sec. 3.4: a knapsack with dependent item values): choose
``count`` on-loan servers so that the fewest jobs are preempted (a job is preempted when any server
holding its base workers is returned), then the fewest flexible workers are scaled in.

The cost of a set ``S`` of servers is ``W x (jobs preempted) + (flexible workers on S)`` with ``W`` =
all flexible workers + 1, so the order is strictly lexicographic. Jobs couple only the servers that
hold their base workers, so the servers fall into **components** (connected through shared jobs) whose
costs add up. The solve is exact in three steps:

1. per component ``c`` of ``n_c`` servers, its cost curve ``f_c(k)`` (least cost of returning ``k`` of
   its servers, ``k <= min(n_c, count)``): a lone server in closed form; components of up to
   :data:`ENUMERATE_MAX` servers by enumerating all ``2^n_c`` subsets vectorised in numpy; larger ones
   by one CP-SAT model per ``k`` (``x_s`` per server, ``p_j`` per job, ``sum x = k``,
   ``x_s -> p_j`` for every base server of a job; warm-started by the best curve point so far);
2. a min-plus knapsack over the components, ``F(t) = min_k F'(t - k) + f_c(k)`` (dynamic program,
   O(components x count x n_c));
3. reconstruction of the chosen servers (walking the dynamic program's tables back, only for the ``k``
   the knapsack takes from each component).

When a CP-SAT model of step 1 stops at its share of the time limit, its curve point is an upper bound
and its proven bound a lower one; running step 2 on the lower bounds gives the proven bound of the
whole selection (status ``feasible`` instead of ``optimal``). Model sizes: the largest component of
the 443-server pool of ``benchmarks/lyra.py`` has about 50 servers and 40 jobs (90 Booleans and about
90 implications per ``k``). The monolithic model (all servers in one CP-SAT model) is in
:func:`solve_monolithic` for comparison; interchangeable components make it much slower to prove.

``Solution.objective`` is the number of jobs at risk kept running (a maximisation, as in every
decision) and ``bound`` its proven upper bound; ``payload["servers"]`` the chosen server indices.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
from ortools.sat.python import cp_model

from optsched.formulations.solution import ModelSize, Solution
from optsched.rounds.lyra_reclaim.view import ReclaimView

#: most open jobs (2^this states) of the dynamic program before a component goes to CP-SAT instead
FRONTIER_MAX = 12
_INF = np.iinfo(np.int64).max // 4


@dataclass
class _Curve:
    """Cost curve of one component: ``cost[k]`` / ``lower[k]`` (upper and proven lower cost of returning
    ``k`` of its servers) and the servers chosen for a ``k`` (``pick``)."""

    servers: list[int]
    cost: np.ndarray
    lower: np.ndarray
    pick: Callable[[int], list[int]]


def _components(view: ReclaimView) -> list[list[int]]:
    parent = list(range(len(view.servers)))

    def find(a: int) -> int:
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a
    for servers in view.job_servers:
        first, *rest = sorted(servers)
        for s in rest:
            parent[find(s)] = find(first)
    groups: dict[int, list[int]] = {}
    for s in range(len(view.servers)):
        groups.setdefault(find(s), []).append(s)
    return sorted(groups.values(), key=lambda g: (len(g), g[0]))


def _component_jobs(view: ReclaimView, servers: list[int]) -> list[list[int]]:
    """Per job with base workers in the component: its servers as positions in ``servers``."""
    pos = {s: i for i, s in enumerate(servers)}
    jobs = sorted({j for s in servers for j in view.base_jobs[s]})
    return [[pos[s] for s in view.job_servers[j]] for j in jobs]


def _order(n: int, jobs: list[list[int]]) -> list[int]:
    """A server order keeping few jobs open at a time (greedy: fewest newly opened minus closed jobs)."""
    jobs_of = [[j for j, js in enumerate(jobs) if i in js] for i in range(n)]
    left = [set(js) for js in jobs]
    active: set[int] = set()
    order: list[int] = []
    todo = set(range(n))
    while todo:
        def key(i: int) -> tuple[int, int, int]:
            new = sum(1 for j in jobs_of[i] if j not in active)
            closes = sum(1 for j in jobs_of[i] if left[j] == {i})
            return (new - closes, new, i)
        i = min(todo, key=key)
        todo.discard(i)
        order.append(i)
        for j in jobs_of[i]:
            active.add(j)
            left[j].discard(i)
        active = {j for j in active if left[j]}
    return order


def _frontier_curve(servers: list[int], jobs: list[list[int]], flex: np.ndarray, weight: int, top: int,
                    max_open: int) -> _Curve | None:
    """The exact cost curve by a dynamic program along a server order whose state is which open jobs
    (jobs with servers on both sides of the current position) are preempted; None when more than
    ``max_open`` jobs would be open at once. States <= 2^open, each an array over k."""
    n = len(servers)
    order = _order(n, jobs)
    pos = {i: t for t, i in enumerate(order)}
    first = [min(pos[i] for i in js) for js in jobs]
    last = [max(pos[i] for i in js) for js in jobs]
    jobs_of = [[j for j, js in enumerate(jobs) if i in js] for i in range(n)]
    start = np.full(top + 1, _INF, dtype=np.int64)
    start[0] = 0
    cur: dict[int, np.ndarray] = {0: start}
    tables: list[dict[int, np.ndarray]] = []
    for t, i in enumerate(order):
        tables.append(cur)
        nxt: dict[int, np.ndarray] = {}
        for mask, m2, arr, x in _moves(cur, t, i, jobs_of, first, last, weight, int(flex[i]), top):
            old = nxt.get(m2)
            nxt[m2] = arr if old is None else np.minimum(old, arr)
        if len(nxt) > (1 << max_open):
            return None
        cur = nxt
    best = cur[0]

    def pick(k: int) -> list[int]:
        """Walk the tables back from the final state for ``k`` servers."""
        state, kk, need, picked = 0, k, best[k], []
        for t in range(n - 1, -1, -1):
            i = order[t]
            for mask, m2, arr, x in _moves(tables[t], t, i, jobs_of, first, last, weight, int(flex[i]), top):
                if m2 == state and arr[kk] == need:
                    state, kk = mask, kk - x
                    need = tables[t][mask][kk]
                    if x:
                        picked.append(servers[i])
                    break
        return sorted(picked)
    return _Curve(servers, best.copy(), best.copy(), pick)


def _moves(cur: dict[int, np.ndarray], t: int, i: int, jobs_of: list[list[int]], first: list[int],
           last: list[int], weight: int, flex: int, top: int):  # noqa: ANN202 - a generator of moves
    """Every transition at step ``t`` (server ``i``): (state before, state after, costs over k, x_i)."""
    new = [j for j in jobs_of[i] if first[j] == t]
    closing = sum(1 << j for j in jobs_of[i] if last[j] == t)
    need = sum(1 << j for j in jobs_of[i])
    for mask, arr in cur.items():
        for sub in range(1 << len(new)):
            m = mask
            for b, j in enumerate(new):
                if (sub >> b) & 1:
                    m |= 1 << j
            c = weight * bin(sub).count("1")
            base = np.where(arr < _INF, arr + c, _INF)
            yield mask, m & ~closing, base, 0
            if m & need == need:
                took = np.full(top + 1, _INF, dtype=np.int64)
                took[1:] = np.where(arr[:-1] < _INF, arr[:-1] + c + flex, _INF)
                yield mask, m & ~closing, took, 1


def _cpsat_curve(servers: list[int], jobs: list[list[int]], flex: np.ndarray, weight: int, top: int,
                 deadline: float, seed: int, workers: int) -> _Curve:
    n = len(servers)
    best = np.full(top + 1, _INF, dtype=np.int64)
    lower = np.zeros(top + 1, dtype=np.int64)
    chosen: list[list[int]] = [[] for _ in range(top + 1)]
    best[0] = 0
    previous: set[int] = set()
    for k in range(1, top + 1):
        model = cp_model.CpModel()
        x = [model.NewBoolVar(f"x{i}") for i in range(n)]
        p = [model.NewBoolVar(f"p{j}") for j in range(len(jobs))]
        model.Add(sum(x) == k)
        for j, js in enumerate(jobs):
            for i in js:
                model.AddImplication(x[i], p[j])
        model.Minimize(weight * sum(p) + sum(int(f) * x[i] for i, f in enumerate(flex) if f))
        # warm start: the previous k's servers plus the cheapest other server
        extra = min((i for i in range(n) if i not in previous), key=lambda i: int(flex[i]), default=None)
        hint = previous | ({extra} if extra is not None else set())
        for i in range(n):
            model.AddHint(x[i], i in hint)
        solver = cp_model.CpSolver()
        solver.parameters.max_time_in_seconds = max(0.01, (deadline - time.perf_counter()) / (top + 1 - k))
        solver.parameters.num_workers = workers
        solver.parameters.random_seed = seed
        code = solver.Solve(model)
        if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            raise TimeoutError
        previous = {i for i in range(n) if solver.BooleanValue(x[i])}
        best[k] = int(round(solver.ObjectiveValue()))
        lower[k] = best[k] if code == cp_model.OPTIMAL else int(np.ceil(solver.BestObjectiveBound() - 1e-6))
        chosen[k] = [servers[i] for i in sorted(previous)]
    return _Curve(servers, best, lower, lambda k: chosen[k])


def _knapsack(curves: Sequence[_Curve], count: int, lower: bool) -> tuple[int, list[int]]:
    """Min-plus combination of the curves; the least total for ``count`` servers and the ``k`` taken
    from each curve."""
    total = np.full(count + 1, _INF, dtype=np.int64)
    total[0] = 0
    picks = np.zeros((len(curves), count + 1), dtype=np.int64)
    for c, curve in enumerate(curves):
        vals = curve.lower if lower else curve.cost
        new = np.full(count + 1, _INF, dtype=np.int64)
        arg = np.zeros(count + 1, dtype=np.int64)
        for k in range(len(vals)):
            if vals[k] >= _INF:
                continue
            cand = np.full(count + 1, _INF, dtype=np.int64)
            cand[k:] = np.where(total[:count + 1 - k] < _INF, total[:count + 1 - k] + vals[k], _INF)
            better = cand < new
            new[better] = cand[better]
            arg[better] = k
        total = new
        picks[c] = arg
    ks = [0] * len(curves)
    t = count
    for c in range(len(curves) - 1, -1, -1):
        ks[c] = int(picks[c, t])
        t -= ks[c]
    return int(total[count]), ks


def solve(view: ReclaimView, count: int, *, time_limit: float = 10.0, seed: int = 0, workers: int = 1,
          hint: Sequence[int] | None = None, frontier_max: int = FRONTIER_MAX) -> Solution:
    """Solve the selection (module docstring); ``hint`` is accepted for the common signature (the
    components' CP-SAT models are warm-started from their own curves); components whose dynamic
    program would keep more than ``frontier_max`` jobs open go to CP-SAT."""
    t0 = time.perf_counter()
    deadline = t0 + time_limit
    weight = sum(view.flex_workers) + 1
    flex_all = np.asarray(view.flex_workers, dtype=np.int64)
    curves: list[_Curve] = []
    variables = constraints = 0
    exact = True
    try:
        for servers in _components(view):
            top = min(len(servers), count)
            jobs = _component_jobs(view, servers)
            flex = flex_all[servers]
            curve = _frontier_curve(servers, jobs, flex, weight, top, frontier_max)
            if curve is not None:
                curves.append(curve)
            else:
                curve = _cpsat_curve(servers, jobs, flex, weight, top, deadline, seed, workers)
                exact &= bool(np.array_equal(curve.cost, curve.lower))
                variables += len(servers) + len(jobs)
                constraints += sum(len(js) for js in jobs) + 1
                curves.append(curve)
    except TimeoutError:
        size = ModelSize(variables, constraints, "components")
        return Solution("unknown", None, None, time.perf_counter() - t0, hint is not None, size)
    cost, ks = _knapsack(curves, count, lower=False)
    chosen = sorted(s for curve, k in zip(curves, ks) if k for s in curve.pick(k))
    preempted = cost // weight
    lower_cost = cost if exact else _knapsack(curves, count, lower=True)[0]
    m = len(view.jobs)
    size = ModelSize(variables, constraints, f"components ({len(curves)}; largest {max(len(c.servers) for c in curves)})"
                     if curves else "components (0)")
    return Solution("optimal" if exact else "feasible", float(m - preempted), float(m - lower_cost // weight),
                    time.perf_counter() - t0, hint is not None, size, {"servers": chosen})


def solve_monolithic(view: ReclaimView, count: int, *, time_limit: float = 10.0, seed: int = 0, workers: int = 1,
                     hint: Sequence[int] | None = None) -> Solution:
    """All servers in one CP-SAT model (module docstring), for comparison with :func:`solve`."""
    t0 = time.perf_counter()
    n, m = len(view.servers), len(view.jobs)
    model = cp_model.CpModel()
    x = [model.NewBoolVar(f"x{s}") for s in range(n)]
    p = [model.NewBoolVar(f"p{j}") for j in range(m)]
    model.Add(sum(x) == count)
    pairs = 0
    for j, servers in enumerate(view.job_servers):
        for s in servers:
            model.AddImplication(x[s], p[j])
            pairs += 1
    weight = sum(view.flex_workers) + 1
    model.Minimize(weight * sum(p) + sum(f * x[s] for s, f in enumerate(view.flex_workers) if f))
    if hint is not None:
        chosen = set(hint)
        for s in range(n):
            model.AddHint(x[s], s in chosen)
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(0.01, time_limit - (time.perf_counter() - t0))
    solver.parameters.num_workers = workers
    solver.parameters.random_seed = seed
    code = solver.Solve(model)
    size = ModelSize(n + m, pairs + 1, "cpsat-monolithic")
    wall = time.perf_counter() - t0
    if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return Solution("infeasible" if code == cp_model.INFEASIBLE else "unknown", None, None, wall,
                        hint is not None, size)
    servers = [s for s in range(n) if solver.BooleanValue(x[s])]
    preempted = sum(solver.BooleanValue(v) for v in p)
    # the bound on W P + F floors to a bound on P, since 0 <= F < W
    lower = min(max(int((solver.BestObjectiveBound() + 1e-6) // weight), 0), preempted)
    return Solution("optimal" if code == cp_model.OPTIMAL else "feasible", float(m - preempted), float(m - lower),
                    wall, hint is not None, size, {"servers": servers})


__all__ = ["FRONTIER_MAX", "solve", "solve_monolithic"]

"""The exact reclaim selection (thesis Sec. 3.4: a knapsack with dependent item values): choose
``count`` on-loan servers so that the fewest jobs are preempted (a job is preempted when any server
holding its base workers is returned), then the fewest flexible workers are scaled in (those of the
returned servers whose job keeps running; a preempted job's flexible workers stop with it).

The cost of a set ``S`` of servers is ``W x (jobs preempted) + (flexible workers on S of jobs not
preempted)`` with ``W`` = all flexible workers + 1, so the order is strictly lexicographic. Jobs couple
only the servers that hold their workers (base or flexible), so the servers fall into **components**
(connected through shared jobs) whose costs add up. The solve is exact in three steps:

1. per component ``c`` of ``n_c`` servers, its cost curve ``f_c(k)`` (least cost of returning ``k`` of
   its servers, ``k <= min(n_c, count)``): by a dynamic program along a server order whose state is
   which of the open jobs (servers on both sides of the current position) are preempted, when at most
   ``frontier_max`` (:data:`FRONTIER_MAX`) jobs are open at any step (at most ``2^(frontier_max + 1)``
   moves per step, each an array over ``k``); else by one CP-SAT model per ``k`` (``x_s`` per server,
   ``p_j`` per job, ``z_js`` per flexible share of a job at risk, ``sum x = k``, ``x_s -> p_j`` for
   every base server of a job, ``z_js >= x_s - p_j``; warm-started by the previous ``k``'s servers).
   A component joined only through flexible workers, too wide for the dynamic program and of more
   than :data:`MERGED_MAX` servers, is split into its groups joined by base workers, each solved the
   same way with the flexible workers of other groups' jobs counted as scaled in: the preemptions
   stay exact, the scaled-in workers are then an upper bound (the decision's message says so);
2. a min-plus knapsack over the components, ``F(t) = min_k F'(t - k) + f_c(k)`` (dynamic program,
   O(components x count x n_c));
3. reconstruction of the chosen servers (walking the dynamic program's tables back, only for the ``k``
   the knapsack takes from each component).

The deadline (``time_limit``) is checked at every step of the dynamic program and before every
CP-SAT model; past it the solve returns status ``unknown`` (the policy then keeps the heuristic's
answer). When a CP-SAT model of step 1 stops at its share of the time limit, its curve point is an
upper bound and its proven bound a lower one; running step 2 on the lower bounds gives the proven
bound of the whole selection (status ``feasible`` instead of ``optimal``). Model sizes: on the 443-server pools of
``benchmarks/lyra.py`` (seeds 0-2) flexible workers join 143-210 servers into one component; the
dynamic program solves it whole for seed 2 (about 1 s), seeds 0 and 1 split it into groups by base
workers of at most 50 servers and 40 jobs (in CP-SAT: 90 Booleans and about 90 implications per ``k``,
plus one Boolean and one constraint per flexible share of a job at risk). The monolithic model (all servers in one CP-SAT model) is in :func:`solve_monolithic`
for comparison; interchangeable components make it much slower to prove.

``Solution.objective`` is the number of jobs at risk kept running (a maximisation, as in every
decision) and ``bound`` its proven upper bound; ``payload["servers"]`` the chosen server indices.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
from ortools.sat.python import cp_model

from optsched.core.groups import connected_groups
from optsched.formulations.cpsat import cp_solver
from optsched.formulations.solution import ModelSize, Solution
from optsched.rounds.lyra_reclaim.view import ReclaimView

#: most open jobs (2^this states) of the dynamic program before a component goes to CP-SAT instead
FRONTIER_MAX = 12
#: most servers of a component joined by flexible workers that CP-SAT solves whole (larger ones are split)
MERGED_MAX = 30
_INF = np.iinfo(np.int64).max // 4


@dataclass(frozen=True)
class _Component:
    """Servers joined by shared jobs, with positions in ``servers`` as local indices: per job its base
    servers (``base[j]``) and flexible workers per server (``flex[j]``: position -> workers); per server
    the flexible workers of jobs not at risk (``fixed[i]``, scaled in whenever the server is returned)."""

    servers: list[int]
    base: list[list[int]]
    flex: list[dict[int, int]]
    fixed: np.ndarray

    def span(self, j: int) -> set[int]:
        """The servers job ``j`` holds workers on."""
        return set(self.base[j]) | set(self.flex[j])


@dataclass
class _Curve:
    """Cost curve of one component: ``cost[k]`` / ``lower[k]`` (upper and proven lower cost of returning
    ``k`` of its servers) and the servers chosen for a ``k`` (``pick``)."""

    servers: list[int]
    cost: np.ndarray
    lower: np.ndarray
    pick: Callable[[int], list[int]]


def _components(view: ReclaimView, flexible: bool) -> list[list[int]]:
    """Server indices in groups joined by shared jobs (their base workers; with ``flexible`` also their
    flexible workers), smallest group first."""
    links = [set(servers) for servers in view.job_servers]
    for s, flex in enumerate(view.risk_flex if flexible else ()):
        for j in flex:
            links[j].add(s)
    groups = connected_groups(range(len(view.servers)), links)
    return sorted(groups, key=lambda g: (len(g), g[0]))


def _component(view: ReclaimView, servers: list[int]) -> _Component:
    """The :class:`_Component` of ``servers``: the jobs with base workers on them; the flexible workers
    of other jobs on them count in ``fixed``, as if never preempted (exact for a group of
    ``_components(view, True)``, an upper bound on the workers scaled in otherwise)."""
    pos = {s: i for i, s in enumerate(servers)}
    jobs = sorted({j for s in servers for j in view.base_jobs[s]})
    local = {j: k for k, j in enumerate(jobs)}
    flex: list[dict[int, int]] = [{} for _ in jobs]
    fixed = np.zeros(len(servers), dtype=np.int64)
    for i, s in enumerate(servers):
        fixed[i] = view.flex_workers[s]
        for j, w in view.risk_flex[s].items():
            if j in local:
                flex[local[j]][i] = w
                fixed[i] -= w
    return _Component(servers, [[pos[s] for s in sorted(view.job_servers[j])] for j in jobs], flex, fixed)


def _order(comp: _Component, max_open: int, deadline: float) -> list[int] | None:
    """A server order keeping few jobs open at a time (greedy: fewest newly opened minus closed jobs);
    None as soon as more than ``max_open`` jobs stay open. Raises ``TimeoutError`` past ``deadline``."""
    n = len(comp.servers)
    spans = [comp.span(j) for j in range(len(comp.base))]
    jobs_of: list[list[int]] = [[] for _ in range(n)]   # the jobs of each server, ascending (one pass over spans)
    for j, js in enumerate(spans):
        for i in js:
            jobs_of[i].append(j)
    left = [set(js) for js in spans]
    active: set[int] = set()
    order: list[int] = []
    todo = set(range(n))
    while todo:
        if time.perf_counter() > deadline:
            raise TimeoutError

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
        if len(active) > max_open:
            return None
    return order


def _frontier_curve(comp: _Component, weight: int, top: int, max_open: int, deadline: float) -> _Curve | None:
    """The exact cost curve by a dynamic program along a server order whose state is which open jobs
    (jobs with servers on both sides of the current position) are preempted; None when more than
    ``max_open`` jobs would be open at one step (checked before any state is enumerated, so a step
    makes at most ``2^(max_open + 1)`` moves, each an array over k). A job's preemption is decided at
    its first server; a server is returned only when every job with base workers on it is preempted,
    and then costs its flexible workers of jobs not preempted. Raises ``TimeoutError`` past
    ``deadline`` (checked at every step)."""
    n = len(comp.servers)
    order = _order(comp, max_open, deadline)
    if order is None:
        return None
    pos = {i: t for t, i in enumerate(order)}
    spans = [comp.span(j) for j in range(len(comp.base))]
    first = [min(pos[i] for i in js) for js in spans]
    last = [max(pos[i] for i in js) for js in spans]
    if any(sum(1 for f, l in zip(first, last) if f <= t <= l) > max_open for t in range(n)):
        return None
    steps = [_Step.of(comp, t, i, first, last) for t, i in enumerate(order)]
    start = np.full(top + 1, _INF, dtype=np.int64)
    start[0] = 0
    cur: dict[int, np.ndarray] = {0: start}
    tables: list[dict[int, np.ndarray]] = []
    for step in steps:
        if time.perf_counter() > deadline:
            raise TimeoutError
        tables.append(cur)
        nxt: dict[int, np.ndarray] = {}
        for mask, m2, arr, x in step.moves(cur, weight, top):
            old = nxt.get(m2)
            nxt[m2] = arr if old is None else np.minimum(old, arr)
        cur = nxt
    best = cur[0]

    def pick(k: int) -> list[int]:
        """Walk the tables back from the final state for ``k`` servers."""
        state, kk, need, picked = 0, k, best[k], []
        for t in range(n - 1, -1, -1):
            for mask, m2, arr, x in steps[t].moves(tables[t], weight, top):
                if m2 == state and arr[kk] == need:
                    state, kk = mask, kk - x
                    need = tables[t][mask][kk]
                    if x:
                        picked.append(comp.servers[order[t]])
                    break
        return sorted(picked)
    return _Curve(comp.servers, best.copy(), best.copy(), pick)


@dataclass(frozen=True)
class _Step:
    """One step of the dynamic program (server ``i``): the jobs whose preemption is decided here
    (``new``), the bits of the jobs closing here, of the jobs with base workers here (``need``), the
    flexible workers per job here and those of jobs not at risk (``fixed``)."""

    new: tuple[int, ...]
    closing: int
    need: int
    flex: tuple[tuple[int, int], ...]
    fixed: int

    @classmethod
    def of(cls, comp: _Component, t: int, i: int, first: list[int], last: list[int]) -> "_Step":
        jobs = [j for j in range(len(comp.base)) if i in comp.base[j] or i in comp.flex[j]]
        return cls(tuple(j for j in jobs if first[j] == t), sum(1 << j for j in jobs if last[j] == t),
                   sum(1 << j for j in jobs if i in comp.base[j]),
                   tuple((j, comp.flex[j][i]) for j in jobs if i in comp.flex[j]), int(comp.fixed[i]))

    def moves(self, cur: dict[int, np.ndarray], weight: int, top: int):  # noqa: ANN201 - a generator of moves
        """Every transition: (state before, state after, costs over k, x_i)."""
        for mask, arr in cur.items():
            for sub in range(1 << len(self.new)):
                m = mask
                for b, j in enumerate(self.new):
                    if (sub >> b) & 1:
                        m |= 1 << j
                c = weight * bin(sub).count("1")
                base = np.where(arr < _INF, arr + c, _INF)
                yield mask, m & ~self.closing, base, 0
                if m & self.need == self.need:
                    scaled = self.fixed + sum(w for j, w in self.flex if not (m >> j) & 1)
                    took = np.full(top + 1, _INF, dtype=np.int64)
                    took[1:] = np.where(arr[:-1] < _INF, arr[:-1] + c + scaled, _INF)
                    yield mask, m & ~self.closing, took, 1


def _model(comp: _Component, weight: int, k: int) -> tuple[cp_model.CpModel, list[cp_model.IntVar],
                                                           list[cp_model.IntVar]]:
    """The CP-SAT model of returning ``k`` of the component's servers (module docstring); its server
    and job Booleans."""
    model = cp_model.CpModel()
    x = [model.NewBoolVar(f"x{i}") for i in range(len(comp.servers))]
    p = [model.NewBoolVar(f"p{j}") for j in range(len(comp.base))]
    model.Add(sum(x) == k)
    scaled = []
    for j, servers in enumerate(comp.base):
        for i in servers:
            model.AddImplication(x[i], p[j])
        for i, w in comp.flex[j].items():
            z = model.NewBoolVar(f"z{j}_{i}")
            model.Add(z >= x[i] - p[j])
            scaled.append(w * z)
    model.Minimize(weight * sum(p) + sum(int(f) * x[i] for i, f in enumerate(comp.fixed) if f) + sum(scaled))
    return model, x, p


def _size(comp: _Component) -> ModelSize:
    shares = sum(len(f) for f in comp.flex)
    return ModelSize(len(comp.servers) + len(comp.base) + shares,
                     sum(len(b) for b in comp.base) + shares + 1, "components")


def _cpsat_curve(comp: _Component, weight: int, top: int, deadline: float, seed: int, workers: int) -> _Curve:
    n = len(comp.servers)
    best = np.full(top + 1, _INF, dtype=np.int64)
    lower = np.zeros(top + 1, dtype=np.int64)
    chosen: list[list[int]] = [[] for _ in range(top + 1)]
    best[0] = 0
    previous: set[int] = set()
    alone = comp.fixed + np.array([sum(f.get(i, 0) for f in comp.flex) for i in range(n)], dtype=np.int64)
    for k in range(1, top + 1):
        if time.perf_counter() > deadline:
            raise TimeoutError
        model, x, _ = _model(comp, weight, k)
        # warm start: the previous k's servers plus the other server with the fewest flexible workers
        extra = min((i for i in range(n) if i not in previous), key=lambda i: int(alone[i]), default=None)
        hint = previous | ({extra} if extra is not None else set())
        for i in range(n):
            model.AddHint(x[i], i in hint)
        solver = cp_solver(max(0.01, (deadline - time.perf_counter()) / (top + 1 - k)), seed, workers)
        code = solver.Solve(model)
        if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            raise TimeoutError
        previous = {i for i in range(n) if solver.BooleanValue(x[i])}
        best[k] = int(round(solver.ObjectiveValue()))
        lower[k] = best[k] if code == cp_model.OPTIMAL else int(np.ceil(solver.BestObjectiveBound() - 1e-6))
        chosen[k] = [comp.servers[i] for i in sorted(previous)]
    return _Curve(comp.servers, best, lower, lambda k: chosen[k])

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
          hint: Sequence[int] | None = None, frontier_max: int = FRONTIER_MAX,
          merged_max: int = MERGED_MAX) -> Solution:
    """Solve the selection (module docstring); ``hint`` is accepted for the common signature (the
    components' CP-SAT models are warm-started from their own curves); components whose dynamic
    program would keep more than ``frontier_max`` jobs open go to CP-SAT whole when they hold at most
    ``merged_max`` servers or one group by base workers, else split by base workers. Status
    ``unknown`` (no servers) when ``time_limit`` runs out first."""
    t0 = time.perf_counter()
    deadline = t0 + time_limit
    weight = sum(view.flex_workers) + 1
    curves: list[_Curve] = []
    variables = constraints = bounded = 0
    exact = True
    by_base = _components(view, flexible=False)
    try:
        for group in _components(view, flexible=True):
            if time.perf_counter() > deadline:
                raise TimeoutError
            curve = _frontier_curve(_component(view, group), weight, min(len(group), count), frontier_max, deadline)
            if curve is not None:
                curves.append(curve)
                continue
            members = set(group)
            parts = [g for g in by_base if g[0] in members]
            split = len(parts) > 1 and len(group) > merged_max
            bounded += split
            for servers in parts if split else [group]:
                top = min(len(servers), count)
                comp = _component(view, servers)
                curve = _frontier_curve(comp, weight, top, frontier_max, deadline) if split else None
                if curve is None:
                    curve = _cpsat_curve(comp, weight, top, deadline, seed, workers)
                    exact &= bool(np.array_equal(curve.cost, curve.lower))
                    size = _size(comp)
                    variables, constraints = variables + size.variables, constraints + size.constraints
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
    if bounded:
        size = dataclasses.replace(size, encoding=f"{size.encoding}; {bounded} split by base workers, scaled-in "
                                                  "workers bounded")
    return Solution("optimal" if exact else "feasible", float(m - preempted), float(m - lower_cost // weight),
                    time.perf_counter() - t0, hint is not None, size, {"servers": chosen})


def solve_monolithic(view: ReclaimView, count: int, *, time_limit: float = 10.0, seed: int = 0, workers: int = 1,
                     hint: Sequence[int] | None = None) -> Solution:
    """All servers in one CP-SAT model (module docstring), for comparison with :func:`solve`."""
    t0 = time.perf_counter()
    n, m = len(view.servers), len(view.jobs)
    comp = _component(view, list(range(n)))
    weight = sum(view.flex_workers) + 1
    model, x, _ = _model(comp, weight, count)
    if hint is not None:
        chosen = set(hint)
        for s in range(n):
            model.AddHint(x[s], s in chosen)
    solver = cp_solver(max(0.01, time_limit - (time.perf_counter() - t0)), seed, workers)
    code = solver.Solve(model)
    size = dataclasses.replace(_size(comp), encoding="cpsat-monolithic")
    wall = time.perf_counter() - t0
    if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return Solution("infeasible" if code == cp_model.INFEASIBLE else "unknown", None, None, wall,
                        hint is not None, size)
    servers = [s for s in range(n) if solver.BooleanValue(x[s])]
    preempted = len(view.outcome(servers).preempted)
    # the bound on W P + F floors to a bound on P, since 0 <= F < W
    lower = min(max(int((solver.BestObjectiveBound() + 1e-6) // weight), 0), preempted)
    return Solution("optimal" if code == cp_model.OPTIMAL else "feasible", float(m - preempted), float(m - lower),
                    wall, hint is not None, size, {"servers": servers})


__all__ = ["FRONTIER_MAX", "MERGED_MAX", "solve", "solve_monolithic"]

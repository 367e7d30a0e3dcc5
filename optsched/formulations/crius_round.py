"""The Crius round as an exact CP-SAT model (Crius Sec. 6; the heuristic it must never lose to is
Algorithm 1, :mod:`optsched.heuristics.crius`, whose answer warm-starts it).

Given a :class:`~optsched.rounds.crius.problem.CriusRound` and its table, choose for every job at most
one of its candidate Cells (or, for a running job, to keep its allocation exactly), respecting the
admission (:mod:`~optsched.rounds.crius.admission`: the protected job starts, guaranteed jobs run on
Cells meeting their deadlines, dropped jobs do not run), the search depth and node capacities:

* ``x[k]`` (bool): candidate row k is chosen (rows a job may use, :func:`~optsched.rounds.crius.admission.allowed_rows`);
  ``keep[j]`` (bool): running job j keeps its allocation (not for a guaranteed job whose current Cell
  misses its deadline, nor a dropped one). ``sum_k x[k] + keep[j] <= 1`` per job, ``= 1`` for the
  protected and the guaranteed jobs and for every running job that may keep its allocation and is not
  opportunistic: Crius suspends only opportunistic jobs, to launch the pending one (Sec. 6.1), and
  dropped or late deadline jobs (Sec. 8.5); every other running job keeps or is rescaled.
* **Suspension for the pending job** (:mod:`~optsched.rounds.crius.admission`: a suspended
  opportunistic job held GPUs on a node where the protected job now runs a part): ``z[k, n]`` (bool)
  per row k of the protected job and node n of k's type that an opportunistic job holds: a part of k
  on n (``z[k, n] <= x[k]``, ``sum_n z[k, n] <= parts of k``); per opportunistic job v,
  ``1 - keep[v] - sum_k x[k] of v <= sum over v's nodes n of sum_k z[k, n]``. A pinned part takes its
  size from the node's slots (``s q[n, s] <= a[n] - sum_k size_k z[k, n]`` for every size, 1 included)
  and leaves the row's count in the packing rule (``- size_k z[k, n]``), so the rule stays exact: the
  pinned parts go first, :func:`~optsched.rounds.crius.capacity.place` places the rest.
* **Search depth** ``D`` per scheduling choice (Sec. 6.1, :func:`~optsched.rounds.crius.choice.depth_bound`):
  ``sum over running jobs of sum_k x[k] <= D x (1 + sum over queued jobs of sum_k x[k] + sum over late
  running deadline jobs of sum_k x[k])`` (a running job choosing a row is rescaled; the round's choices
  are one per started queued job, one per rescaled late job and the extra scheduling of line 12).
* **Capacity** by the packing rule of :mod:`~optsched.rounds.crius.capacity` (exact: any solution maps
  to nodes by :func:`~optsched.rounds.crius.capacity.place`, and any placement satisfies it): per GPU
  type and part size ``s`` (powers of two up to the type's node part), ``sum over rows k of the type
  with part size >= s of (GPUs of k) x[k] <= s x (C_s + sum_n q[n, s])``, where ``C_s`` sums
  ``floor(slots / s)`` over the nodes no running job uses and, for a node a running job uses, ``a[n]``
  (int) is at most its free GPUs, CPUs / CPUs-a-slot and MiB / MiB-a-slot less what kept jobs hold
  there, and ``s q[n, s] <= a[n]``. A (type, size) row is left out only when it cannot bind: the
  left-hand side at every variable's upper bound (a class's variable counts up to the class size) is
  at most ``s x (C_s + sum_n floor(a_min[n] / s))``, ``a_min[n]`` the slots of a held node with every
  running job there kept.
* **Objective** (:func:`~optsched.rounds.crius.objective.objective`): ``max sum_k v_k x[k] + sum_j
  v_cur(j) keep[j] (+ deadline bonuses) - rescale_penalty x rescaled - preempt_penalty x suspended``,
  ``v`` the table's ``value`` (raw throughput under the paper's objectives, which have no penalty or
  bonus; normalised weights under ours), scaled by 10^6 to integers; the reported objective is
  recomputed in floating point.

**Size**: ``|candidate rows| + |running jobs| + sum over nodes running jobs use of (1 + |part sizes|)``
variables (per job at most 3 x types candidate rows: 12 on the 1,280-GPU cluster, so about 3,600 +
nodes for 300 jobs) and ``|jobs| + 1 + sum over types of |part sizes| + sum over those nodes of (3 +
|part sizes|)`` constraints: independent of the node count except through the nodes that hold running
jobs. Solved by CP-SAT (or, being linear, as a MILP through pulp: ``backend``).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
from ortools.sat.python import cp_model

from optsched.core.phases import phase
from optsched.formulations import milp
from optsched.formulations.cpsat import cp_solver
from optsched.formulations.solution import CPSAT_BACKENDS, ModelSize, Solution, solver_seconds
from optsched.formulations.switch import solve_scaled_by
from optsched.rounds.crius.admission import CriusAdmission, admit, allowed_rows
from optsched.rounds.crius.capacity import MIB, NodeState, place, slot_rates
from optsched.rounds.crius.choice import Choice, is_kept, is_late, keep_choice
from optsched.rounds.crius.objective import objective
from optsched.rounds.crius.problem import CriusRound
from optsched.rounds.crius.table import CriusTable

#: integer units per objective unit (normalised weights, or raw samples/s: at most about 10^4 a Cell, so
#: about 10^10 a coefficient, far inside CP-SAT's 64-bit range)
SCALE = 1_000_000
BACKENDS = (*CPSAT_BACKENDS, *milp.BACKENDS)


def _sizes(unit: int) -> list[int]:
    return [1 << k for k in range(unit.bit_length()) if (1 << k) <= unit]


@dataclass
class CriusRoundModel:
    """A built model and the maps back to rows, jobs and nodes: ``x[k]`` per candidate row of the
    representative job of each class (its value: how many of the class's jobs run that Cell),
    ``classes[k]`` the job indices of the class of row k (the representative first)."""

    problem: CriusRound
    table: CriusTable
    admission: CriusAdmission
    model: cp_model.CpModel
    x: dict[int, cp_model.IntVar]
    classes: dict[int, list[int]]
    keep: dict[int, cp_model.IntVar]
    avail: dict[int, cp_model.IntVar]                # node index -> a[n]
    q: dict[tuple[int, int], cp_model.IntVar]        # (node index, size) -> q[n, s]
    offset: float
    n_constraints: int
    pin: dict[tuple[int, int], cp_model.IntVar]      # (row of the protected job, node index) -> z[k, n]

    @property
    def size(self) -> ModelSize:
        return ModelSize(len(self.x) + len(self.keep) + len(self.avail) + len(self.q) + len(self.pin),
                         self.n_constraints, "size-classes")


def _spec(table: CriusTable, k: int) -> tuple:
    return (table.gpu_type[k], int(table.gpus[k]), int(table.stages[k]))


def _classes(problem: CriusRound, table: CriusTable, admission: CriusAdmission) -> dict[int, list[int]]:
    """Job index -> the jobs of its class (representative first), for the jobs that get variables.
    Queued jobs that are interchangeable -- same model, requested GPUs and pinned type, not protected,
    without a deadline the objective uses -- form one class, represented by its earliest job
    (symmetry: the model counts how many of them run each Cell); every other job is a class of its
    own. Only the representative is a key."""
    out: dict[int, list[int]] = {}
    groups: dict[tuple, list[int]] = {}
    deadline_mode = problem.deadline_aware
    order = sorted(range(len(problem.jobs)), key=lambda j: (problem.jobs[j].submit_time, problem.jobs[j].name))
    for j in order:
        job = problem.jobs[j]
        if job.name in admission.dropped:
            continue
        alone = (table.current_row[j] >= 0 or job.name == admission.protected
                 or (deadline_mode and job.deadline is not None))
        if alone:
            out[j] = [j]
            continue
        groups.setdefault((job.model, job.requested_gpus, job.gpu_type), []).append(j)
    for js in groups.values():
        out[js[0]] = js
    return out


def build(problem: CriusRound, table: CriusTable, *, admission: CriusAdmission | None = None) -> CriusRoundModel:
    """Build the CP-SAT model (module docstring)."""
    admission = admission or admit(problem, table)
    rates = slot_rates(problem.cluster)
    state = NodeState.of(problem)
    index = {n: i for i, n in enumerate(state.names)}
    deadline_mode = problem.deadline_aware
    scale = SCALE
    m = cp_model.CpModel()
    x: dict[int, cp_model.IntVar] = {}
    keep: dict[int, cp_model.IntVar] = {}
    obj: list[tuple[cp_model.IntVar, int]] = []
    offset = 0.0
    n_cons = 0
    rescaled: list[cp_model.IntVar] = []
    choices: list[cp_model.IntVar] = []  # the scheduling choices beyond line 12's (depth_bound)
    held: dict[int, list[tuple[cp_model.IntVar, int, int, int]]] = {}  # node -> (keep var, gpus, cpus, MiB)
    members = _classes(problem, table, admission)
    classes: dict[int, list[int]] = {}
    for j, job in enumerate(problem.jobs):
        name = job.name
        cur = int(table.current_row[j])
        running = cur >= 0
        bonus = problem.bonus if job.deadline is not None else 0.0
        if running:
            offset -= problem.preempt_cost
        if name in admission.dropped or j not in members:
            continue
        group = members[j]
        vs = []
        for k in allowed_rows(problem, table, j, table.candidates_of(j)):
            k = int(k)
            v = m.new_bool_var(f"x{k}") if len(group) == 1 else m.new_int_var(0, len(group), f"x{k}")
            x[k] = v
            classes[k] = group
            vs.append(v)
            w = float(table.value[k]) + (bonus if table.deadline_ok[k] else 0.0)
            if running:
                w += problem.preempt_cost - problem.rescale_cost
                rescaled.append(v)
            if not running or is_late(problem, table, j):
                choices.append(v)
            obj.append((v, round(w * scale)))
        if running and (not deadline_mode or job.deadline is None or table.deadline_ok[cur]):
            kv = m.new_bool_var(f"keep{j}")
            keep[j] = kv
            vs.append(kv)
            w = float(table.value[cur]) + problem.preempt_cost + (bonus if table.deadline_ok[cur] else 0.0)
            obj.append((kv, round(w * scale)))
            alloc = problem.current(name)
            assert alloc is not None
            for node, share in alloc.placement.shares:
                held.setdefault(index[node], []).append((kv, share.gpus, share.cpus,
                                                         math.ceil(share.mem_gib * MIB - 1e-6)))
        if name == admission.protected or name in admission.guaranteed or (running and j in keep and name not in
                                                                             admission.opportunistic):
            if vs:
                m.add_exactly_one(vs)
            else:
                m.add_bool_or([])
            n_cons += 1
        elif len(group) > 1:
            m.add(sum(vs) <= len(group))
            n_cons += 1
        elif len(vs) > 1:
            m.add_at_most_one(vs)
            n_cons += 1
    if rescaled:
        m.add(sum(rescaled) <= problem.search_depth * (1 + sum(choices)))
        n_cons += 1
    # suspension for the pending job only: z[k, n] pins a part of the protected job's row k on node n
    pin: dict[tuple[int, int], cp_model.IntVar] = {}
    jp = table.index_of(admission.protected) if admission.protected is not None else -1
    if jp >= 0 and admission.opportunistic:
        rows_p = [int(k) for k in allowed_rows(problem, table, jp, table.candidates_of(jp))]
        for name in sorted(admission.opportunistic):
            v = table.index_of(name)
            alloc = problem.current(name)
            assert alloc is not None
            nodes_v = [index[n] for n, sh in alloc.placement.shares if sh.gpus > 0]
            cover = []
            for n in nodes_v:
                for k in rows_p:
                    if table.gpu_type[k] == str(state.types[n]):
                        if (k, n) not in pin:
                            pin[(k, n)] = m.new_bool_var(f"z{k}_{n}")
                            m.add(pin[(k, n)] <= x[k])
                            n_cons += 1
                        cover.append(pin[(k, n)])
            own = [x[k] for k in allowed_rows(problem, table, v, table.candidates_of(v)) if int(k) in x]
            m.add(1 - sum([keep[v]] if v in keep else []) - sum(own) <= sum(cover))
            n_cons += 1
        for k in rows_p:
            zs = [z for (kk, _), z in pin.items() if kk == k]
            if len(zs) > int(table.parts[k]):
                m.add(sum(zs) <= int(table.parts[k]))
                n_cons += 1
    pinned_at: dict[int, list[tuple[cp_model.IntVar, int]]] = {}  # node -> (z, part size)
    for (k, n), z in pin.items():
        pinned_at.setdefault(n, []).append((z, int(table.unit[k])))
        held.setdefault(n, [])  # its slots become a[n] (the pinned parts come off them)
    # capacity per (type, part size)
    base = state.slots(rates)
    units: dict[str, int] = {}
    for k in x:
        t = table.gpu_type[k]
        units[t] = max(units.get(t, 1), int(table.unit[k]))
    avail: dict[int, cp_model.IntVar] = {}
    q: dict[tuple[int, int], cp_model.IntVar] = {}
    for n, terms in held.items():
        t = str(state.types[n])
        if t not in units:
            continue
        cpg, mpg = rates[t]
        mib = round(mpg * MIB)
        a = m.new_int_var(0, int(problem.cluster.node(state.names[n]).num_gpus), f"a{n}")
        avail[n] = a
        m.add(a + sum(g * kv for kv, g, _, _ in terms) <= int(state.gpus[n]))
        n_cons += 1
        if cpg > 0:
            m.add(cpg * a + sum(c * kv for kv, _, c, _ in terms) <= int(state.cpus[n]))
            n_cons += 1
        if mib > 0:
            m.add(mib * a + sum(mm * kv for kv, _, _, mm in terms) <= math.floor(state.mem[n] * MIB + 1e-6))
            n_cons += 1
        taken = sum(size * z for z, size in pinned_at.get(n, []))
        for s in _sizes(units[t]):
            if s == 1 and n not in pinned_at:
                q[(n, 1)] = a
                continue
            qv = m.new_int_var(0, int(problem.cluster.node(state.names[n]).num_gpus) // s, f"q{n}_{s}")
            q[(n, s)] = qv
            m.add(s * qv <= a - taken)
            n_cons += 1
    # the fewest slots a held node can have (every running job there kept): the "cannot bind" test
    least = state.copy()
    for n, terms in held.items():
        least.gpus[n] -= sum(g for _, g, _, _ in terms)
        least.cpus[n] -= sum(c for _, _, c, _ in terms)
        least.mem[n] -= sum(mm for _, _, _, mm in terms) / MIB
    held_least = least.slots(rates)
    held_mask = {t: np.array([i in avail and str(state.types[i]) == t for i in range(len(state.names))], dtype=bool)
                 for t in units}
    for t, unit in units.items():
        rows_t = [k for k in x if table.gpu_type[k] == t]
        mask = (state.types == t) & np.array([i not in avail for i in range(len(state.names))], dtype=bool)
        for s in _sizes(unit):
            terms = [(x[k], int(table.gpus[k])) for k in rows_t if int(table.unit[k]) >= s]
            terms += [(z, -int(table.unit[k])) for (k, n), z in pin.items()
                      if table.gpu_type[k] == t and int(table.unit[k]) >= s]
            if not terms:
                continue
            const = int((base[mask] // s).sum())
            var_q = [qv for (n, s2), qv in q.items() if s2 == s and str(state.types[n]) == t]
            most = sum(int(table.gpus[k]) * len(classes[k]) for k in rows_t if int(table.unit[k]) >= s)
            pinned_type = any(table.gpu_type[k] == t for k, _ in pin)
            if not pinned_type and most <= s * (const + int((held_least[held_mask[t]] // s).sum())):
                continue  # cannot bind: every class fully on rows of size >= s fits next to every kept job
            m.add(sum(c * v for v, c in terms) <= s * const + s * sum(var_q))
            n_cons += 1
    m.maximize(sum(c * v for v, c in obj))
    return CriusRoundModel(problem, table, admission, m, x, classes, keep, avail, q, offset, n_cons, pin)


def _hint_values(built: CriusRoundModel, hint: Mapping[str, Choice]) -> dict[int, int]:
    """Every variable's value under ``hint`` (job -> choice), by variable index."""
    p, t = built.problem, built.table
    out: dict[int, int] = {}
    kept: set[int] = set()
    for k, v in built.x.items():
        spec = _spec(t, k)
        n = 0
        for j in built.classes[k]:
            c = hint.get(t.jobs[j])
            if c is not None and not is_kept(p, t, j, c) and _spec(t, c.row) == spec:
                n += 1
        out[v.index] = n
    for j, v in built.keep.items():
        c = hint.get(t.jobs[j])
        on = int(is_kept(p, t, j, c))
        out[v.index] = on
        if on:
            kept.add(j)
    rates = slot_rates(p.cluster)
    state = NodeState.of(p)
    index = {n: i for i, n in enumerate(state.names)}
    for j in kept:
        alloc = p.current(t.jobs[j])
        assert alloc is not None
        state.take(alloc.placement, index)
    slots = state.slots(rates)
    taken = np.zeros(len(slots), dtype=np.int64)
    p_choice = hint.get(built.admission.protected) if built.admission.protected is not None else None
    for (k, n), z in built.pin.items():
        on = int(p_choice is not None and p_choice.row == k and any(index[name] == n for name, _ in p_choice.parts))
        out[z.index] = on
        taken[n] += on * int(t.unit[k])
    for n, a in built.avail.items():
        out[a.index] = int(slots[n])
    for (n, s), qv in built.q.items():
        out[qv.index] = int(slots[n] - taken[n]) // s
    return out


def _decode(built: CriusRoundModel, values: Sequence[int]) -> dict[str, Choice] | None:
    """Choices of a solution (a value per variable index): kept jobs stay, chosen rows are placed by
    :func:`~optsched.rounds.crius.capacity.place` (None if a part fits nowhere, which the packing rule
    excludes)."""
    p, t = built.problem, built.table
    out: dict[str, Choice] = {}
    state = NodeState.of(p)
    index = {n: i for i, n in enumerate(state.names)}
    for j, v in built.keep.items():
        if values[v.index]:
            out[t.jobs[j]] = keep_choice(p, t, j)
            alloc = p.current(t.jobs[j])
            assert alloc is not None
            state.take(alloc.placement, index)
    slots = state.slots(slot_rates(p.cluster))
    pinned: dict[str, list[tuple[int, int]]] = {}
    for (k, n), z in built.pin.items():
        if values[z.index]:
            size = int(t.unit[k])
            slots[n] -= size
            pinned.setdefault(t.jobs[t.job_index[k]], []).append((n, size))
    demands = []
    by_class: dict[int, list[int]] = {}
    for k, v in built.x.items():
        by_class.setdefault(built.classes[k][0], []).extend([k] * int(values[v.index]))
    for rep, rows in by_class.items():
        rows.sort(key=lambda k: (-float(t.value[k]), k))  # the earliest jobs of a class get its best Cells
        for j, k in zip(built.classes[rows[0]] if rows else [], rows):
            own = k if j == rep else _row_like(t, j, k)
            left = int(t.parts[own]) - len(pinned.get(t.jobs[j], ()))
            demands.append((t.jobs[j], t.gpu_type[own], int(t.unit[own]), left, own))
    got = place(slots, state.types, [d[:4] for d in demands])
    if got is None:
        return None
    for name, _, _, _, k in demands:
        parts = [*pinned.get(name, ()), *got[name]]
        out[name] = Choice(k, tuple(sorted((state.names[n], g) for n, g in parts)))
    return out


def _row_like(table: CriusTable, j: int, k: int) -> int:
    """Job index ``j``'s candidate row with the (type, GPUs, stages) of row ``k``."""
    spec = _spec(table, k)
    for r in table.candidates_of(j):
        if _spec(table, int(r)) == spec:
            return int(r)
    raise AssertionError(f"job {table.jobs[j]!r} has no Cell {spec}")  # pragma: no cover - same class, same rows


def solve(problem: CriusRound, table: CriusTable, *, time_limit: float, seed: int = 0, workers: int = 1,
          hint: Mapping[str, Choice] | None = None, admission: CriusAdmission | None = None, backend: str = "cpsat",
          trace: list[tuple[float, float, float]] | None = None) -> Solution:
    """Build and solve within ``time_limit`` seconds (the build included). ``hint`` (e.g. Algorithm 1's
    choices) warm-starts the solver. Payload: ``{"choices": {job: Choice}, "backend": backend}``
    (no choices when nothing was found). Status ``infeasible``: the protected or guaranteed jobs
    cannot all run (they always can when admission was computed on this round). The objective is
    recomputed by :func:`~optsched.rounds.crius.objective.objective`; the bound is the solver's, in
    round units (weights rounded to 1 / 10^6)."""
    milp.check_solve_options(time_limit, backend, BACKENDS)
    t0 = time.perf_counter()
    with phase("build"):
        built = build(problem, table, admission=admission)
    tag = {"backend": backend}
    start = _hint_values(built, hint) if hint else None
    if backend in CPSAT_BACKENDS:
        if start:
            unique = {v.index: v for v in (*built.x.values(), *built.keep.values(), *built.avail.values(),
                                           *built.q.values(), *built.pin.values())}
            for i, v in unique.items():
                built.model.add_hint(v, start[i])
        solver = cp_solver(solver_seconds(time_limit, t0), seed, workers)
        # measured (benchmarks/crius.py): the full LP relaxation with cuts closes the last 0.1% that the
        # default level leaves open at 300 jobs
        solver.parameters.linearization_level = 2
        with phase("solver"):
            name, found, bound, values, ran = solve_scaled_by(backend, solver, built.model, SCALE, built.offset,
                                                              t0 + time_limit, trace, t0)
        tag.update(ran)
    else:
        with phase("solver"):
            res = milp.solve_milp(built.model, backend, solver_seconds(time_limit, t0), hint=start or {},
                                  threads=workers)
        name = res.status.upper()
        found = name in ("OPTIMAL", "FEASIBLE")
        bound = res.bound / SCALE + built.offset if found and res.bound is not None else None
        values = res.values
    wall = time.perf_counter() - t0
    if not found:
        return Solution("infeasible" if name == "INFEASIBLE" else "unknown", None, None, wall, bool(hint), built.size, tag)
    assert values is not None
    choices = _decode(built, values)
    if choices is None:  # pragma: no cover - the packing rule makes every solution placeable
        return Solution("unknown", None, bound, wall, bool(hint), built.size, {"reason": "placement failed", **tag})
    obj = objective(problem, table, choices)
    slack = 0.5 * (len(built.x) + len(built.keep)) / SCALE + 1e-9
    if bound is not None:
        bound = max(bound, obj) if name == "OPTIMAL" or bound >= obj - slack else bound
    st = "optimal" if name == "OPTIMAL" else "feasible"
    return Solution(st, obj, bound, wall, bool(hint), built.size, {"choices": choices, **tag})


def lp_relaxation_bound(problem: CriusRound, table: CriusTable, admission: CriusAdmission | None = None, *,
                        time_limit: float = 30.0) -> float | None:
    """The LP relaxation's optimum of the model (an upper bound of the round), through pulp's CBC."""
    built = build(problem, table, admission=admission)
    b = milp.lp_bound(built.model, time_limit)
    return None if b is None else b / SCALE + built.offset


__all__ = ["BACKENDS", "CriusRoundModel", "SCALE", "build", "lp_relaxation_bound", "solve"]

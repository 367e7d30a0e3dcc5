"""The exact schedule of a moe-comm round (thesis Sec. 4.4, Fig. 4.7d: "scheduling results if the
arrival time and running time of communication operations are known a priori") as a CP-SAT model with
interval variables; the policies it must never lose to are in :mod:`optsched.heuristics.moe_comm`.

**Space.** Every unit of the round (:func:`~optsched.rounds.moe_comm.tasks.units`: an allreduce, a
standalone all-to-all, or an all-to-all/FFN/all-to-all triple) runs either whole or as Lina's
micro-ops (a triple's micro-ops pipelined with its FFN): a choice literal ``c_u`` per unit whose two
task graphs differ. The link carries one task at a time at full bandwidth, the compute stream one task
at a time; a task starts after what it waits for. The step time is minimised. Fair sharing is outside
this space (no two link tasks overlap), so a fair-sharing policy could in principle be faster; the
exact policy then returns that policy's schedule (``heuristic-fallback``).

**Model.** Tasks of the whole-op graph and of the micro-op graph are merged by key ``(op, part,
parts)``: a key in both graphs is always present, a key in one graph only is an optional interval
present with ``not c_u`` (whole) or ``c_u`` (micro-ops). Durations are integers in units of
``1 / TIME_SCALE`` ms, rounded up. For every dependency of either graph, ``start(a) >= end(b)``
enforced when both are present. A dependency across units (a task waits for the operation that ends
the unit before it, or for an allreduce's compute operation) holds whichever granularity each unit
takes: the task of either graph waits for every task of that operation in either graph, enforced on
both presence literals (the predecessor's tasks are chained or all waited for, so this is the
dependency of the mixed graph :func:`~optsched.rounds.moe_comm.tasks.build_tasks` gives for those
choices). ``NoOverlap`` on the link's and the stream's intervals; ``T >= end`` of every present task;
minimise ``T``. Size: one interval per distinct key (whole-op and micro-op tasks: 40-50 for 2 MoE
layers with 30 MB micro-ops, about 100 for 4), one literal per unit with a choice, one precedence per
dependency within a unit and ``(m + 1)(n + 1)`` between adjacent units of ``m`` and ``n`` micro-ops
(about 3 per task), two ``NoOverlap``.

**Decoding.** The solver's choices give a task graph (:func:`~optsched.rounds.moe_comm.tasks.build_tasks`
with per-unit ``split``) and its start times an order, which
:func:`~optsched.rounds.moe_comm.timeline.replay` executes with the exact durations (no later than the
solver's rounded times). **Bound.** Rounding lengthens each task by less than one unit, so a schedule
of the round is at most ``keys / TIME_SCALE`` ms longer in the model: the reported lower bound is the
solver's bound minus that (0.005 ms for 50 keys).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from ortools.sat.python import cp_model

from optsched.formulations.cpsat import SolutionTrace, cp_solver
from optsched.formulations.solution import ModelSize, Solution, solver_seconds
from optsched.rounds.moe_comm.problem import MoECommRound
from optsched.rounds.moe_comm.tasks import Task, TaskGraph, build_tasks
from optsched.rounds.moe_comm.timeline import Timeline, replay

#: model time units per ms (0.1 us)
TIME_SCALE = 10_000

Key = tuple[str, int, int]


@dataclass
class CommModel:
    """A built model and the maps back to tasks."""

    model: cp_model.CpModel
    starts: dict[Key, cp_model.IntVar]
    choice: dict[str, cp_model.IntVar]
    makespan: cp_model.IntVar
    graphs: tuple[TaskGraph, TaskGraph]
    durations: dict[Key, int]
    size: ModelSize


def _units_with_choice(whole: TaskGraph, micro: TaskGraph) -> set[str]:
    def keys(g: TaskGraph) -> dict[str, set[Key]]:
        out: dict[str, set[Key]] = {}
        for t in g.tasks:
            out.setdefault(t.unit, set()).add(t.key)
        return out
    a, b = keys(whole), keys(micro)
    return {u for u in a if a[u] != b.get(u)}


def build(problem: MoECommRound) -> CommModel:
    """The model of ``problem`` (module docstring)."""
    whole = build_tasks(problem, split=False, pipeline=True)
    micro = build_tasks(problem, split=True, pipeline=True)
    m = cp_model.CpModel()
    choice = {u: m.new_bool_var(f"split_{u}") for u in sorted(_units_with_choice(whole, micro))}
    keyed: dict[Key, Task] = {}
    presence: dict[Key, cp_model.IntVar | None] = {}
    in_whole = {t.key for t in whole.tasks}
    in_micro = {t.key for t in micro.tasks}
    for g in (whole, micro):
        for t in g.tasks:
            if t.key in keyed:
                continue
            keyed[t.key] = t
            both = t.key in in_whole and t.key in in_micro
            presence[t.key] = None if both or t.unit not in choice else (
                choice[t.unit] if t.key in in_micro else ~choice[t.unit])
    durations = {k: math.ceil(t.ms * TIME_SCALE - 1e-6) for k, t in keyed.items()}
    horizon = sum(durations.values())
    starts: dict[Key, cp_model.IntVar] = {}
    ends: dict[Key, cp_model.LinearExpr] = {}
    link, stream = [], []
    span = m.new_int_var(0, horizon, "step")
    for k, t in keyed.items():
        s = m.new_int_var(0, horizon, f"s_{k}")
        p = presence[k]
        iv = (m.new_fixed_size_interval_var(s, durations[k], f"i_{k}") if p is None
              else m.new_optional_fixed_size_interval_var(s, durations[k], p, f"i_{k}"))
        starts[k], ends[k] = s, s + durations[k]
        (link if t.on_link else stream).append(iv)
        c = m.add(span >= ends[k])
        if p is not None:
            c.only_enforce_if(p)
    of_op: dict[str, list[Key]] = {}
    for k in keyed:
        of_op.setdefault(k[0], []).append(k)
    seen: set[tuple[Key, Key]] = set()
    for g in (whole, micro):
        for t in g.tasks:
            for d in t.deps:
                b = g.tasks[d]
                for bk in ([b.key] if b.unit == t.unit else of_op[b.op]):
                    if (t.key, bk) in seen:
                        continue
                    seen.add((t.key, bk))
                    c = m.add(starts[t.key] >= ends[bk])
                    lits = [p for p in (presence[t.key], presence[bk]) if p is not None]
                    if lits:
                        c.only_enforce_if(lits)
    m.add_no_overlap(link)
    m.add_no_overlap(stream)
    m.minimize(span)
    size = ModelSize(len(starts) + len(choice) + 1, len(m.proto.constraints), "intervals")
    return CommModel(m, starts, choice, span, (whole, micro), durations, size)


def _hint(built: CommModel, problem: MoECommRound, timeline: Timeline) -> None:
    """Hint ``timeline`` (a whole-op or pipelined micro-op graph): its choices and its order replayed in
    model units."""
    g = timeline.graph
    for u, lit in built.choice.items():
        built.model.add_hint(lit, g.split and any(t.unit == u and t.parts > 1 for t in g.tasks))
    end: dict[int, int] = {}
    free = {True: 0, False: 0}
    for t in sorted(g.tasks, key=lambda t: (timeline.start[t.index], t.index)):
        if t.key not in built.starts:
            return
        s = max([free[t.on_link]] + [end[d] for d in t.deps])
        built.model.add_hint(built.starts[t.key], s)
        end[t.index] = s + built.durations[t.key]
        free[t.on_link] = end[t.index]
    built.model.add_hint(built.makespan, max(end.values(), default=0))


def solve(problem: MoECommRound, *, time_limit: float, seed: int = 0, workers: int = 1,
          hint: Timeline | None = None, trace: list[tuple[float, float, float]] | None = None) -> Solution:
    """Solve within ``time_limit`` seconds from the call (build included). The :class:`Solution` is in
    the decision's frame: ``objective = -step ms``, ``bound = -(lower bound)``; ``payload["timeline"]``
    is the replayed :class:`~optsched.rounds.moe_comm.timeline.Timeline`. ``hint``: a whole-op or
    pipelined micro-op timeline (e.g. the ``priority`` or ``lina`` policy's)."""
    t0 = time.perf_counter()
    built = build(problem)
    if hint is not None:
        _hint(built, problem, hint)
    solver = cp_solver(solver_seconds(time_limit, t0), seed, workers)
    status = solver.solve(built.model, None if trace is None else SolutionTrace(trace, t0, -TIME_SCALE))
    name = solver.status_name(status)
    if name not in ("OPTIMAL", "FEASIBLE"):
        return Solution("infeasible" if name == "INFEASIBLE" else "unknown", None, None, time.perf_counter() - t0,
                        hint is not None, built.size, {"solver_status": name})
    split = {u: bool(solver.value(lit)) for u, lit in built.choice.items()}
    graph = build_tasks(problem, split=split, pipeline=True)
    order = sorted(range(len(graph.tasks)), key=lambda k: (solver.value(built.starts[graph.tasks[k].key]), k))
    timeline = replay(problem, graph, order)
    step = timeline.step_ms
    bound = min(step, solver.best_objective_bound / TIME_SCALE - len(built.starts) / TIME_SCALE)
    return Solution("optimal" if name == "OPTIMAL" else "feasible", -step, -max(bound, 0.0),
                    time.perf_counter() - t0, hint is not None, built.size,
                    {"timeline": timeline, "solver_status": name, "split": split})


__all__ = ["CommModel", "TIME_SCALE", "build", "solve"]

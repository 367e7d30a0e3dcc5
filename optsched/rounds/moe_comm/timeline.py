"""What a moe-comm schedule means in time: the execution of a task graph
(:mod:`optsched.rounds.moe_comm.tasks`) on the compute stream and the shared link
(:mod:`optsched.rounds.moe_comm.problem`, "The link").

* :func:`simulate` runs a *launch rule* (a communication scheduling policy,
  :mod:`optsched.heuristics.moe_comm`) event by event: compute tasks run one at a time in task order as
  soon as what they wait for has finished; whenever something changes, the rule is shown the ready
  link tasks that have not started (by ready time, then task order), the running ones and the state of
  the backward pass, and says which to launch. Running link tasks share the link fairly (processor
  sharing with the round's ``sharing_efficiency``); a launched task is never paused (NCCL primitives
  cannot be preempted, Sec. 4.4.1).
* :func:`replay` executes a fixed order (an exact schedule's): each task starts, in the given order,
  as soon as what it waits for and its resource (compute stream or link, used exclusively) are free.

A :class:`Timeline` holds each task's start and end (ms); :func:`violations` lists every rule a
timeline breaks.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from optsched.core.deadline import Deadline
from optsched.core.errors import InfeasibleError
from optsched.rounds.moe_comm.problem import ALL_TO_ALL, MoECommRound
from optsched.rounds.moe_comm.tasks import TaskGraph

#: time tolerance of the checks, ms
TIME_TOL = 1e-6


@dataclass(frozen=True, eq=False)
class Timeline:
    """Start and end (ms) of every task of ``graph``; ``exclusive``: the link ran one task at a time."""

    graph: TaskGraph
    start: np.ndarray
    end: np.ndarray
    exclusive: bool

    @property
    def step_ms(self) -> float:
        """When the last compute task and the last allreduce have finished."""
        return float(self.end.max(initial=0.0))

    @property
    def compute_end_ms(self) -> float:
        """When the compute stream finished (Fig. 4.7: "computing the MoE layer's gradients ends at")."""
        return float(max((self.end[t.index] for t in self.graph.compute), default=0.0))


@dataclass
class LaunchState:
    """What a launch rule sees (module docstring): the ``time``, the ready link tasks not started (two
    queues, all-to-all and allreduce, each by ready time then index: :meth:`first`, :attr:`waiting`), the
    running link tasks (``active``), the graph, the all-to-all operations started and finished so far
    (whole operations: all parts), the role of the running compute task (None when the compute stream
    is idle) and the number of all-to-all operations of the pass (``a2a_ops``)."""

    time: float
    queues: dict[bool, list[tuple[float, int]]]
    active: list[int]
    graph: TaskGraph
    a2a_started: int
    a2a_done: int
    computing: str | None
    a2a_ops: int

    def first(self, a2a: bool | None = None) -> int | None:
        """The first waiting all-to-all task (``a2a`` True), allreduce task (False) or either (None);
        None when there is none. O(1)."""
        heads = [q[0] for is_a2a, q in self.queues.items() if q and a2a in (None, is_a2a)]
        return min(heads)[1] if heads else None

    @property
    def waiting(self) -> list[int]:
        """Every waiting task by ready time, then index (O(w log w): for inspection, not for rules)."""
        return [k for _, k in sorted(self.queues[True] + self.queues[False])]


#: a launch rule: which waiting tasks to launch now
LaunchRule = Callable[[LaunchState], Sequence[int]]


def simulate(problem: MoECommRound, graph: TaskGraph, rule: LaunchRule, *, name: str = "policy",
             deadline: Deadline | None = None) -> Timeline | None:
    """Execute ``graph`` under ``rule`` (module docstring); None when ``deadline`` passes first.
    ``InfeasibleError`` when the rule leaves ready operations waiting with nothing else running (it
    would wait forever). The waiting tasks are kept in two heaps and only running tasks are advanced at
    an event, so a pass of ``n`` tasks costs O(n log n) plus the rule's calls."""
    tasks = graph.tasks
    n = len(tasks)
    bw, eff = problem.bandwidth, problem.sharing_efficiency
    left = np.array([len(t.deps) for t in tasks])
    users: list[list[int]] = [[] for _ in range(n)]
    for t in tasks:
        for d in t.deps:
            users[d].append(t.index)
    start, end = np.full(n, np.nan), np.full(n, np.nan)
    queues: dict[bool, list[tuple[float, int]]] = {True: [], False: []}
    queued = np.zeros(n, dtype=bool)

    def enqueue(k: int, at: float) -> None:
        if tasks[k].on_link:
            heapq.heappush(queues[tasks[k].kind == ALL_TO_ALL], (at, k))
            queued[k] = True

    for t in graph.link:
        if left[t.index] == 0:
            enqueue(t.index, 0.0)
    compute = [t.index for t in graph.compute]
    ptr, running = 0, None  # running compute: (task, end time)
    work = {t.index: t.mb + problem.op_overhead_ms * bw for t in graph.link}
    active: dict[int, float] = {}
    a2a_parts = {t.op: t.parts for t in graph.link if t.kind == ALL_TO_ALL}
    parts_done: dict[str, int] = {}
    started_ops: set[str] = set()
    a2a_done, exclusive, now, finished = 0, True, 0.0, 0

    def finish(k: int) -> None:
        nonlocal finished, a2a_done
        end[k] = now
        finished += 1
        t = tasks[k]
        if t.kind == ALL_TO_ALL:
            parts_done[t.op] = parts_done.get(t.op, 0) + 1
            a2a_done += parts_done[t.op] == a2a_parts[t.op]
        for u in users[k]:
            left[u] -= 1
            if left[u] == 0:
                enqueue(u, now)

    while finished < n:
        if deadline is not None and deadline.expired():
            return None
        if running is None and ptr < len(compute) and left[compute[ptr]] == 0:
            k = compute[ptr]
            start[k], running, ptr = now, (k, now + tasks[k].ms), ptr + 1
        if queues[True] or queues[False]:
            state = LaunchState(now, queues, sorted(active), graph, len(started_ops), a2a_done,
                                None if running is None else tasks[running[0]].role, len(a2a_parts))
            for k in rule(state):
                if not (0 <= k < n and queued[k]):
                    raise InfeasibleError(f"{name}: launched task {k}, which is not waiting")
                q = queues[tasks[k].kind == ALL_TO_ALL]
                if q[0][1] == k:
                    heapq.heappop(q)
                else:
                    q.remove((next(at for at, j in q if j == k), k))
                    heapq.heapify(q)
                queued[k] = False
                start[k] = now
                active[k] = work[k]
                if tasks[k].kind == ALL_TO_ALL:
                    started_ops.add(tasks[k].op)
            exclusive &= len(active) <= 1
        rate = (bw if len(active) == 1 else eff * bw / len(active)) if active else 0.0
        steps = [running[1] - now] if running is not None else []
        steps += [r / rate for r in active.values()]
        if not steps:
            first = min(q[0] for q in queues.values() if q)[1] if queues[True] or queues[False] else None
            raise InfeasibleError(f"{name}: ready communication operations wait with nothing running (the rule "
                                  f"never launches {tasks[first].op!r})" if first is not None else f"{name}: deadlock")
        dt = max(0.0, min(steps))
        now += dt
        for k in list(active):
            active[k] -= rate * dt
            if active[k] <= 1e-9 * bw:
                del active[k]
                finish(k)
        if running is not None and running[1] <= now + 1e-12:
            k = running[0]
            running = None
            finish(k)
    return Timeline(graph, start, end, exclusive)


def replay(problem: MoECommRound, graph: TaskGraph, order: Sequence[int]) -> Timeline:
    """Execute ``graph`` in the fixed ``order`` (every task once; a task after those it waits for), each
    task as early as its dependencies and its resource (used exclusively) allow."""
    n = len(graph.tasks)
    start, end = np.zeros(n), np.zeros(n)
    free = {True: 0.0, False: 0.0}
    for k in order:
        t = graph.tasks[k]
        s = max([free[t.on_link]] + [end[d] for d in t.deps])
        start[k], end[k] = s, s + t.ms
        free[t.on_link] = end[k]
    return Timeline(graph, start, end, True)


def violations(problem: MoECommRound, timeline: Timeline) -> list[str]:
    """Every rule ``timeline`` breaks (empty: none): each task after what it waits for, at least its
    length alone, compute tasks one at a time, and the link one task at a time when the timeline
    claims to be exclusive."""
    g, s, e = timeline.graph, timeline.start, timeline.end
    out: list[str] = []
    if np.any(np.isnan(s)) or np.any(np.isnan(e)):
        return ["some tasks never ran"]
    for t in g.tasks:
        name = f"{t.op}[{t.part + 1}/{t.parts}]"
        late = [g.tasks[d] for d in t.deps if s[t.index] < e[d] - TIME_TOL]
        if late:
            out.append(f"{name} starts at {s[t.index]:.6g} ms before {late[0].op} ends at {e[late[0].index]:.6g} ms")
        if e[t.index] - s[t.index] < t.ms - TIME_TOL:
            out.append(f"{name} takes {e[t.index] - s[t.index]:.6g} ms, less than its {t.ms:.6g} ms")
    for on_link in ((False, True) if timeline.exclusive else (False,)):
        ks = sorted((t.index for t in g.tasks if t.on_link == on_link), key=lambda k: (s[k], e[k]))
        for a, b in zip(ks, ks[1:]):
            if s[b] < e[a] - TIME_TOL:
                out.append(f"{'link' if on_link else 'compute stream'}: {g.tasks[b].op} starts at {s[b]:.6g} ms "
                           f"while {g.tasks[a].op} runs until {e[a]:.6g} ms")
    return out


__all__ = ["LaunchRule", "LaunchState", "TIME_TOL", "Timeline", "replay", "simulate", "violations"]

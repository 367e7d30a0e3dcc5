"""The task graph of a moe-comm round at a chosen granularity (thesis Sec. 4.4.2): what runs on the
compute stream and on the link, and what waits for what.

* **Whole operations** (``split=False``): one task per operation.
* **Micro-ops** (``split=True``): every communication operation of ``s`` MB becomes ``ceil(s /
  partition_mb)`` equal chunks ("Lina partitions each gradient tensor into equal-sized small chunks
  and executes individual allreduce micro-ops independently"; all-to-alls likewise).
* **Pipelining** (``pipeline=True``, with micro-ops): an ``ffn`` compute operation directly between
  two all-to-alls is split into as many chunks as the larger all-to-all, ``m``; both all-to-alls are
  split into ``m`` chunks too, FFN chunk ``i`` waits for first-all-to-all chunk ``i`` (and FFN chunk
  ``i-1``), second-all-to-all chunk ``i`` waits for FFN chunk ``i`` ("the expert can start computing
  with a subset of the tokens after one all-to-all micro-op", Fig. 4.8b).

Dependencies: a stream element waits for the element before it (all its chunks); an allreduce (every
chunk) waits for its ``after`` compute operation. Compute tasks run one at a time in task order.

A *unit* is what one granularity choice applies to: a non-FFN compute operation (always whole), an
allreduce, a standalone all-to-all, or a pipelined triple (first all-to-all, FFN, second all-to-all;
named by the first all-to-all). Tasks are keyed ``(op, part, parts)``: a task with the same key in two
graphs is the same task.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

from optsched.rounds.moe_comm.problem import ALL_TO_ALL, COMPUTE, MoECommRound

ALLREDUCE = "allreduce"


@dataclass(frozen=True)
class Task:
    """One task: part ``part`` of ``parts`` of operation ``op`` (``kind`` compute, all-to-all or
    allreduce; ``role`` of a compute task), its duration ``ms`` alone (compute time, or the link time
    of ``mb`` MB with the per-op overhead), its ``unit`` and the tasks it waits for (``deps``, indices)."""

    index: int
    op: str
    part: int
    parts: int
    kind: str
    role: str
    ms: float
    mb: float
    unit: str
    deps: tuple[int, ...]

    @property
    def key(self) -> tuple[str, int, int]:
        return (self.op, self.part, self.parts)

    @property
    def on_link(self) -> bool:
        return self.kind != COMPUTE


@dataclass(frozen=True)
class TaskGraph:
    """The tasks of a round at one granularity (module docstring)."""

    tasks: tuple[Task, ...]
    split: bool
    pipeline: bool

    @property
    def compute(self) -> tuple[Task, ...]:
        return tuple(t for t in self.tasks if not t.on_link)

    @property
    def link(self) -> tuple[Task, ...]:
        return tuple(t for t in self.tasks if t.on_link)


def units(problem: MoECommRound) -> dict[str, str]:
    """Operation name -> its unit (module docstring): ``triple:<first all-to-all>`` for the members of a
    pipelinable triple (an ``ffn`` compute operation directly between two all-to-alls), ``op:<name>`` for
    other communication operations, ``compute:<name>`` for other compute operations."""
    s = problem.stream
    out: dict[str, str] = {}
    for i, op in enumerate(s):
        if (0 < i < len(s) - 1 and op.op == COMPUTE and op.role == "ffn" and s[i - 1].op == ALL_TO_ALL
                and s[i + 1].op == ALL_TO_ALL and s[i - 1].name not in out):
            for member in s[i - 1: i + 2]:
                out[member.name] = f"triple:{s[i - 1].name}"
    for op in s:
        out.setdefault(op.name, f"compute:{op.name}" if op.op == COMPUTE else f"op:{op.name}")
    for ar in problem.allreduces:
        out[ar.name] = f"op:{ar.name}"
    return out


def build_tasks(problem: MoECommRound, *, split: bool | Mapping[str, bool], pipeline: bool = False) -> TaskGraph:
    """The task graph of ``problem`` (module docstring); ``split`` for every unit, or per unit name
    (units not named stay whole)."""
    tasks: list[Task] = []
    unit_of = units(problem)

    def is_split(unit: str) -> bool:
        return split if isinstance(split, bool) else bool(split.get(unit, False))

    def add(op: str, kind: str, role: str, mb: float, ms: float, unit: str, deps: list[tuple[int, ...]]) -> list[int]:
        """``len(deps)`` equal parts of an operation of ``mb`` MB (link) or ``ms`` ms (compute)."""
        m = len(deps)
        for p in range(m):
            dur = ms / m if kind == COMPUTE else problem.comm_ms(mb / m)
            tasks.append(Task(len(tasks), op, p, m, kind, role, dur, mb / m, unit, deps[p]))
        return list(range(len(tasks) - m, len(tasks)))

    def chunks(mb: float, unit: str) -> int:
        return max(1, math.ceil(mb / problem.partition_mb - 1e-9)) if is_split(unit) else 1

    prev: tuple[int, ...] = ()
    ends: dict[str, int] = {}
    s = problem.stream
    i = 0
    while i < len(s):
        op = s[i]
        unit = unit_of[op.name]
        if unit.startswith("triple:") and pipeline and is_split(unit):
            a1, f, a2 = s[i], s[i + 1], s[i + 2]
            m = max(chunks(a1.mb, unit), chunks(a2.mb, unit))
            first = add(a1.name, ALL_TO_ALL, "", a1.mb, 0.0, unit, [prev] * m)
            mid: list[int] = []
            for p in range(m):
                tasks.append(Task(len(tasks), f.name, p, m, COMPUTE, "ffn", f.ms / m, 0.0, unit,
                                  (first[p],) + tuple(mid[-1:])))
                mid.append(len(tasks) - 1)
            ends[f.name] = mid[-1]
            prev = tuple(add(a2.name, ALL_TO_ALL, "", a2.mb, 0.0, unit, [(k,) for k in mid]))
            i += 3
            continue
        if op.op == COMPUTE:
            (k,) = add(op.name, COMPUTE, op.role, 0.0, op.ms, unit, [prev])
            ends[op.name] = k
            prev = (k,)
        else:
            prev = tuple(add(op.name, ALL_TO_ALL, "", op.mb, 0.0, unit, [prev] * chunks(op.mb, unit)))
        i += 1
    for ar in problem.allreduces:
        unit = unit_of[ar.name]
        add(ar.name, ALLREDUCE, "", ar.mb, 0.0, unit, [(ends[ar.after],)] * chunks(ar.mb, unit))
    return TaskGraph(tuple(tasks), split if isinstance(split, bool) else any(split.values()), pipeline)


__all__ = ["ALLREDUCE", "Task", "TaskGraph", "build_tasks", "units"]

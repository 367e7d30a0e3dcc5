"""The decision of a moe-comm round: the :class:`CommSchedule` payload (every task's start and end on
the compute stream or the link, the step time and the end of the computation) and its assembly from a
:class:`~optsched.rounds.moe_comm.timeline.Timeline`, with ``objective = -step time`` and ``bound =
-(lower bound)`` (a minimisation reported in the decisions' maximising frame, as for the ``experts``
kind)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from optsched.core.checks import json_ints, require_int, require_keys, require_number
from optsched.core.decision import Decision, relative_gap
from optsched.core.errors import InfeasibleError, ValidationError
from optsched.rounds.moe_comm.problem import MoECommRound
from optsched.rounds.moe_comm.timeline import Timeline, violations


@dataclass(frozen=True)
class ScheduledTask:
    """Part ``part`` (0-based) of ``parts`` of operation ``op`` (``kind``), from ``start`` to ``end`` ms."""

    op: str
    part: int
    parts: int
    kind: str
    start: float
    end: float

    def to_dict(self) -> dict[str, Any]:
        return {"op": self.op, "part": self.part, "parts": self.parts, "kind": self.kind, "start": self.start,
                "end": self.end}

    @classmethod
    def from_dict(cls, data: Any) -> "ScheduledTask":
        require_keys("decision task", data, ("op", "part", "parts", "kind", "start", "end"))
        data = json_ints(data, ("part", "parts"))
        require_int(f"decision task {data['op']!r}", "part", data["part"], 0)
        require_int(f"decision task {data['op']!r}", "parts", data["parts"], 1)
        return cls(str(data["op"]), data["part"], data["parts"], str(data["kind"]), float(data["start"]),
                   float(data["end"]))


@dataclass(frozen=True)
class CommSchedule:
    """The payload of ``moe-comm`` decisions. JSON: ``step_ms``, ``compute_end_ms``, ``exclusive``
    (the link carried one task at a time) and ``tasks`` (by start time)."""

    KEYS: ClassVar[tuple[tuple[str, ...], tuple[str, ...]]] = (("step_ms", "compute_end_ms", "exclusive", "tasks"),
                                                               ())

    step_ms: float
    compute_end_ms: float
    exclusive: bool
    tasks: tuple[ScheduledTask, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"step_ms": self.step_ms, "compute_end_ms": self.compute_end_ms, "exclusive": self.exclusive,
                "tasks": [t.to_dict() for t in self.tasks]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "CommSchedule":
        if not isinstance(data.get("tasks"), list):
            raise ValidationError("decision: tasks must be a JSON array")
        require_number("decision", "step_ms", data["step_ms"], 0.0)
        require_number("decision", "compute_end_ms", data["compute_end_ms"], 0.0)
        return cls(float(data["step_ms"]), float(data["compute_end_ms"]), bool(data["exclusive"]),
                   tuple(ScheduledTask.from_dict(t) for t in data["tasks"]))


def payload_of(timeline: Timeline) -> CommSchedule:
    """The payload of ``timeline`` (times rounded to ns)."""
    order = sorted(timeline.graph.tasks, key=lambda t: (timeline.start[t.index], t.index))
    tasks = tuple(ScheduledTask(t.op, t.part, t.parts, t.kind, round(float(timeline.start[t.index]), 6),
                                round(float(timeline.end[t.index]), 6)) for t in order)
    return CommSchedule(timeline.step_ms, timeline.compute_end_ms, timeline.exclusive, tasks)


def to_decision(problem: MoECommRound, timeline: Timeline, *, method: str, status: str,
                lower_bound: float | None = None, solve_seconds: float = 0.0, heuristic_step: float | None = None,
                warm_start: bool = False, message: str = "") -> Decision:
    """The :class:`Decision` of ``timeline``: objective ``-step``, bound ``-lower_bound``. A timeline
    breaking a rule of the round is a bug of the method: ``InfeasibleError`` listing the rules."""
    broken = violations(problem, timeline)
    if broken:
        raise InfeasibleError(f"method {method!r} produced an infeasible schedule", tuple(broken[:10]))
    step = timeline.step_ms
    bound = None if lower_bound is None else -min(lower_bound, step)
    return Decision(problem.kind, method, status, -step, payload_of(timeline), bound, relative_gap(bound, -step),
                    solve_seconds, None if heuristic_step is None else -heuristic_step, warm_start, message)


__all__ = ["CommSchedule", "ScheduledTask", "payload_of", "to_decision"]

"""The decision of a training-packing round: the :class:`TrainingPacking` payload (experts per device,
the all-to-all group, the sets of experts sharing a device, the experts offloaded per device, the
modelled layer time and the load imbalance) and its assembly from a
:class:`~optsched.perf.training_packing.PackingPlan`, with ``objective = -layer ms`` and ``bound = -(lower
bound)`` (a minimisation reported in the decisions' maximising frame, as for the other MoE kinds)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from optsched.core.checks import json_int, json_ints, require_int, require_number
from optsched.core.decision import Decision, relative_gap
from optsched.core.errors import InfeasibleError, ValidationError
from optsched.perf.training_packing import PackingPlan, check_plan, imbalance, layer_ms
from optsched.rounds.training_packing.problem import TrainingPackingRound


@dataclass(frozen=True)
class TrainingPacking:
    """The payload of ``training-packing`` decisions. JSON: ``experts_per_device`` (``p``),
    ``group_devices`` (``E / p``, the devices of an all-to-all group), ``sets`` (``E / p`` arrays of ``p``
    experts: the experts of each device of a group, the same in every group), ``offloaded`` (experts per
    device in host memory), ``layer_ms`` (the modelled MoE-layer time) and ``imbalance`` (the most loaded
    device's tokens over the balanced share)."""

    KEYS: ClassVar[tuple[tuple[str, ...], tuple[str, ...]]] = (
        ("experts_per_device", "group_devices", "sets", "offloaded", "layer_ms", "imbalance"), ())

    experts_per_device: int
    group_devices: int
    sets: tuple[tuple[int, ...], ...]
    offloaded: int
    layer_ms: float
    imbalance: float

    @property
    def plan(self) -> PackingPlan:
        return PackingPlan(self.experts_per_device, self.sets, self.offloaded)

    def to_dict(self) -> dict[str, Any]:
        return {"experts_per_device": self.experts_per_device, "group_devices": self.group_devices,
                "sets": [list(s) for s in self.sets], "offloaded": self.offloaded, "layer_ms": self.layer_ms,
                "imbalance": self.imbalance}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "TrainingPacking":
        data = json_ints(data, ("experts_per_device", "group_devices", "offloaded"))
        require_int("decision", "experts_per_device", data["experts_per_device"], 1)
        require_int("decision", "group_devices", data["group_devices"], 1)
        require_int("decision", "offloaded", data["offloaded"], 0)
        require_number("decision", "layer_ms", data["layer_ms"], 0.0)
        require_number("decision", "imbalance", data["imbalance"], 0.0)
        if not isinstance(data["sets"], list) or not all(isinstance(s, list) for s in data["sets"]):
            raise ValidationError("decision: sets must be a JSON array of arrays of experts")
        sets = []
        for s in data["sets"]:
            members = [json_int(e) for e in s]
            for e in members:
                require_int("decision: sets", "expert", e, 0)
            sets.append(tuple(members))
        return cls(data["experts_per_device"], data["group_devices"], tuple(sets), data["offloaded"],
                   float(data["layer_ms"]), float(data["imbalance"]))


def payload_of(problem: TrainingPackingRound, plan: PackingPlan) -> TrainingPacking:
    """The payload of ``plan`` (a feasible plan of ``problem``)."""
    setup = problem.setup
    p = plan.experts_per_device
    return TrainingPacking(p, setup.experts // p, tuple(tuple(s) for s in plan.sets), plan.offloaded,
                           layer_ms(setup, plan), imbalance(setup, plan.sets, p))


def to_decision(problem: TrainingPackingRound, plan: PackingPlan, *, method: str, status: str,
                lower_bound: float | None = None, solve_seconds: float = 0.0, heuristic_ms: float | None = None,
                warm_start: bool = False, message: str = "") -> Decision:
    """The :class:`Decision` of ``plan``: objective ``-layer ms``, bound ``-lower_bound``. A plan breaking a
    rule of the round (:func:`~optsched.perf.training_packing.check_plan`) is a bug of the method:
    ``InfeasibleError`` listing the rules."""
    broken = check_plan(problem.setup, plan)
    if broken:
        raise InfeasibleError(f"method {method!r} produced an infeasible packing", tuple(broken))
    payload = payload_of(problem, plan)
    cost = payload.layer_ms
    bound = None if lower_bound is None else -min(lower_bound, cost)
    return Decision(problem.kind, method, status, -cost, payload, bound, relative_gap(bound, -cost), solve_seconds,
                    None if heuristic_ms is None else -heuristic_ms, warm_start, message)


__all__ = ["TrainingPacking", "payload_of", "to_decision"]

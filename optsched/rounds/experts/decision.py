"""The decision of an experts round: the :class:`ExpertPlacement` payload (expert -> devices with
replica shares, device -> experts, load and time, the makespan) and its assembly from a
:class:`~optsched.rounds.experts.plan.ReplicaPlan`, with ``objective = -makespan`` and ``bound =
-lower bound`` (:mod:`optsched.rounds.experts.problem`, "Minimisation in a maximising frame")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from optsched.core.checks import json_int, require_int, require_keys, require_name, require_number
from optsched.core.decision import Decision, relative_gap
from optsched.core.errors import InfeasibleError, UnknownNameError, ValidationError
from optsched.rounds.experts.plan import ReplicaPlan, device_loads, device_times, makespan, violations
from optsched.rounds.experts.problem import ExpertsRound


@dataclass(frozen=True)
class ExpertReplicas:
    """Where expert ``expert`` runs: (device, share of its tokens) per replica."""

    expert: int
    replicas: tuple[tuple[str, float], ...]

    def to_dict(self) -> dict[str, Any]:
        return {"expert": self.expert, "replicas": [{"device": d, "share": s} for d, s in self.replicas]}

    @classmethod
    def from_dict(cls, data: Any) -> "ExpertReplicas":
        require_keys("decision expert", data, ("expert", "replicas"))
        if not isinstance(data["replicas"], list):
            raise ValidationError(f"decision: replicas of expert {data['expert']!r} must be a JSON array")
        reps = []
        for r in data["replicas"]:
            require_keys(f"decision: a replica of expert {data['expert']!r}", r, ("device", "share"))
            require_name("decision replica device", r["device"])
            require_number(f"decision: a replica of expert {data['expert']!r}", "share", r["share"], 0.0)
            reps.append((r["device"], float(r["share"])))
        expert = json_int(data["expert"])
        require_int("decision expert", "expert", expert, 0)
        return cls(expert, tuple(reps))


@dataclass(frozen=True)
class DeviceLoad:
    """What device ``device`` hosts (``experts``), the tokens it serves (``load``) and its ``time``."""

    device: str
    experts: tuple[int, ...]
    load: float
    time: float

    def to_dict(self) -> dict[str, Any]:
        return {"device": self.device, "experts": list(self.experts), "load": self.load, "time": self.time}

    @classmethod
    def from_dict(cls, data: Any) -> "DeviceLoad":
        require_keys("decision device", data, ("device", "experts", "load", "time"))
        if not isinstance(data["experts"], list):
            raise ValidationError(f"decision: experts of device {data['device']!r} must be a JSON array")
        experts = tuple(map(json_int, data["experts"]))
        for e in experts:
            require_int(f"decision device {data['device']!r}", "expert", e, 0)
        return cls(str(data["device"]), experts, float(data["load"]), float(data["time"]))


@dataclass(frozen=True)
class ExpertPlacement:
    """The payload of ``experts`` decisions. JSON: ``makespan``, ``experts`` (one entry per expert, in
    order) and ``devices`` (one entry per device, in the round's device order)."""

    KEYS: ClassVar[tuple[tuple[str, ...], tuple[str, ...]]] = (("makespan", "experts", "devices"), ())

    makespan: float
    experts: tuple[ExpertReplicas, ...]
    devices: tuple[DeviceLoad, ...]

    def replicas_of(self, expert: int) -> tuple[tuple[str, float], ...]:
        for x in self.experts:
            if x.expert == expert:
                return x.replicas
        raise UnknownNameError("expert", str(expert), [str(x.expert) for x in self.experts])

    def to_dict(self) -> dict[str, Any]:
        return {"makespan": self.makespan, "experts": [x.to_dict() for x in self.experts],
                "devices": [d.to_dict() for d in self.devices]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ExpertPlacement":
        for key in ("experts", "devices"):
            if not isinstance(data.get(key), list):
                raise ValidationError(f"decision: {key} must be a JSON array")
        require_number("decision", "makespan", data["makespan"], 0.0)
        return cls(float(data["makespan"]), tuple(ExpertReplicas.from_dict(x) for x in data["experts"]),
                   tuple(DeviceLoad.from_dict(d) for d in data["devices"]))


def payload_of(problem: ExpertsRound, plan: ReplicaPlan) -> ExpertPlacement:
    """The payload of ``plan`` (shares rounded to 12 digits for the file)."""
    names = problem.devices
    loads, times = device_loads(problem, plan), device_times(problem, plan)
    experts = tuple(ExpertReplicas(e, tuple((names[d], round(float(plan.share[e, d]), 12))
                                            for d in np.flatnonzero(plan.hosted[e])))
                    for e in range(problem.num_experts))
    devices = tuple(DeviceLoad(names[d], tuple(int(e) for e in np.flatnonzero(plan.hosted[:, d])), float(loads[d]),
                               float(times[d])) for d in range(problem.num_devices))
    return ExpertPlacement(float(times.max()), experts, devices)


def plan_of(problem: ExpertsRound, decision: Decision) -> ReplicaPlan:
    """The plan of an experts ``decision`` for ``problem`` (e.g. to score it under other loads);
    ``ValidationError`` for an unknown device or expert."""
    if not isinstance(decision.payload, ExpertPlacement):
        raise ValidationError(f"a decision of kind {decision.kind!r} is not an expert placement")
    index = {n: i for i, n in enumerate(problem.devices)}
    rows: list[list[tuple[int, float]]] = [[] for _ in range(problem.num_experts)]
    for x in decision.payload.experts:
        if not 0 <= x.expert < problem.num_experts:
            raise ValidationError(f"decision: expert {x.expert} does not exist in the round "
                                  f"({problem.num_experts} experts)")
        for dev, share in x.replicas:
            if dev not in index:
                raise UnknownNameError("device", dev, list(index))
            rows[x.expert].append((index[dev], share))
    return ReplicaPlan.from_devices(problem, rows)


def to_decision(problem: ExpertsRound, plan: ReplicaPlan, *, method: str, status: str,
                lower_bound: float | None = None, solve_seconds: float = 0.0,
                heuristic_makespan: float | None = None, warm_start: bool = False, message: str = "") -> Decision:
    """The :class:`Decision` of ``plan``: objective ``-makespan``, bound ``-lower_bound`` (None without
    one), ``heuristic_objective`` ``-heuristic_makespan``. A plan breaking a rule of the round is a
    bug of the method: ``InfeasibleError`` listing the rules."""
    broken = violations(problem, plan)
    if broken:
        raise InfeasibleError(f"method {method!r} produced an infeasible expert placement", tuple(broken))
    cost = makespan(problem, plan)
    bound = None if lower_bound is None else -min(lower_bound, cost)
    return Decision(problem.kind, method, status, -cost, payload_of(problem, plan), bound, relative_gap(bound, -cost),
                    solve_seconds, None if heuristic_makespan is None else -heuristic_makespan, warm_start, message)


__all__ = ["DeviceLoad", "ExpertPlacement", "ExpertReplicas", "payload_of", "plan_of", "to_decision"]

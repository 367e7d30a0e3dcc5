"""The decision payload of ``lyra-reclaim``: the servers returned, the jobs preempted, the workers
elastic jobs lose by scaling in, and the collateral damage (GPUs preempted jobs held on servers that
are not returned, Sec. 3.7.3)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Mapping

from optsched.core.checks import json_int, json_ints, require_int, require_keys, require_name
from optsched.core.errors import ValidationError


@dataclass(frozen=True)
class ReclaimDecision:
    """JSON: ``{"servers": [...], "preempted": [...], "scaled_in": {job: workers}, "collateral_gpus": n}``."""

    KEYS: ClassVar[tuple[tuple[str, ...], tuple[str, ...]]] = (("servers", "preempted"),
                                                               ("scaled_in", "collateral_gpus"))

    servers: tuple[str, ...]
    preempted: tuple[str, ...]
    scaled_in: tuple[tuple[str, int], ...] = ()
    collateral_gpus: int = 0

    def __post_init__(self) -> None:
        for what in ("servers", "preempted"):
            values = tuple(getattr(self, what))
            for v in values:
                require_name(f"reclaim decision {what}", v)
            if len(set(values)) != len(values):
                raise ValidationError(f"reclaim decision: {what} lists a name twice")
            object.__setattr__(self, what, values)
        scaled = dict(self.scaled_in) if isinstance(self.scaled_in, Mapping) else dict(tuple(self.scaled_in))
        for job, w in scaled.items():
            require_int(f"reclaim decision: scaled_in of job {job!r}", "workers", w, 1)
            if job in self.preempted:
                raise ValidationError(f"reclaim decision: job {job!r} is both preempted and scaled in")
        object.__setattr__(self, "scaled_in", tuple(sorted(scaled.items())))
        require_int("reclaim decision", "collateral_gpus", self.collateral_gpus, 0)

    def to_dict(self) -> dict[str, Any]:
        return {"servers": list(self.servers), "preempted": list(self.preempted), "scaled_in": dict(self.scaled_in),
                "collateral_gpus": self.collateral_gpus}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ReclaimDecision":
        require_keys("reclaim decision", data, cls.KEYS[0], cls.KEYS[1])
        if not isinstance(data["servers"], list) or not isinstance(data["preempted"], list):
            raise ValidationError("reclaim decision: servers and preempted must be JSON arrays")
        if not isinstance(data.get("scaled_in", {}), dict):
            raise ValidationError("reclaim decision: scaled_in must be a JSON object {job: workers}")
        return cls(tuple(data["servers"]), tuple(data["preempted"]),
                   tuple(json_ints(data.get("scaled_in", {})).items()), json_int(data.get("collateral_gpus", 0)))


__all__ = ["ReclaimDecision"]

"""The ``experts`` round (thesis Sec. 4.5, Lina's inference resource scheduler): place the experts of
one MoE layer on devices, replicating popular experts and packing unpopular ones together, so that the
most loaded device finishes as early as possible.

**Devices** are the GPUs of the round's cluster that are free for it (a node's GPUs minus its
``occupied`` GPUs), named ``<node>:<k>`` (``k`` = 0, 1, ... among the node's free GPUs), in node order.
Each device hosts at most ``slots`` expert replicas (the paper's "maximum number of experts packed on a
device", 4 in its evaluation, Sec. 4.7.1) and computes at a relative ``speed``: its GPU type's peak
TFLOPs divided by the largest among the devices (1.0 on a homogeneous cluster).

**Experts** ``0 .. E-1`` each carry a ``load`` (tokens of the batch routed to it at this layer, as
estimated before the gate, Eq. 4.1's numerator, or as counted after it; 0 when there is no estimate)
and replica bounds ``min_replicas`` (>= 1: every expert is hosted somewhere, since some token may
pick it) and ``max_replicas`` (<= the number of devices; null: no bound besides that).

**A decision** hosts each expert on ``min_replicas .. max_replicas`` distinct devices and splits its
tokens over them in shares that sum to 1 (Lina tells every device "how many tokens each replica should
handle", Sec. 4.6.2); a device hosts at most ``slots`` replicas. The time of device ``d`` is
``(sum_e load_e x share_ed + replica_cost x replicas on d) / speed_d`` (``replica_cost``: tokens'
worth of time to swap in one more expert's weights, default 0 as in the paper), and the round's
cost is the **makespan**, the largest device time: all-to-all waits for the slowest device (Sec.
4.2.2).

**Minimisation in a maximising frame.** Decisions report ``objective = -makespan`` and ``bound = -(a
proven lower bound on the makespan)``, so the common top level keeps its meaning (higher is better,
``bound >= objective``) and :func:`optsched.core.decision.relative_gap` gives ``(makespan - lower
bound) / lower bound`` unchanged; the payload carries the makespan itself.

Checked when built (``ValidationError`` naming the expert and rule): no jobs or running allocations
(an experts round places one MoE layer, not jobs), at least one device, loads finite and >= 0,
``1 <= min_replicas <= max_replicas <= devices``, and the replicas the bounds demand fit the slots
(``sum min_replicas <= devices x slots``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping

import numpy as np

from optsched.core.checks import json_int, require_int, require_keys, require_number
from optsched.core.errors import ValidationError
from optsched.rounds.jobless import JoblessRound

#: Sec. 4.7.1: "the maximum number of experts packed on a device is 4"
DEFAULT_SLOTS = 4


@dataclass(frozen=True)
class ExpertSpec:
    """One expert of the layer: its ``load`` (tokens) and replica bounds (``max_replicas`` None: up to
    the number of devices)."""

    load: float
    min_replicas: int = 1
    max_replicas: int | None = None

    def check(self, index: int, devices: int) -> None:
        owner = f"round: expert {index}"
        require_number(owner, "load", self.load, 0.0)
        require_int(owner, "min_replicas", self.min_replicas, 1)
        if self.max_replicas is not None:
            require_int(owner, "max_replicas", self.max_replicas, 1)
            if self.max_replicas < self.min_replicas:
                raise ValidationError(f"{owner}: max_replicas {self.max_replicas} is below min_replicas "
                                      f"{self.min_replicas}")
        most = self.min_replicas if self.max_replicas is None else self.max_replicas
        if most > devices:
            which = "min_replicas" if self.max_replicas is None else "max_replicas"
            raise ValidationError(f"{owner}: {which} {most} is more replicas than the {devices} devices (one "
                                  "replica per device)")

    def to_dict(self) -> dict[str, Any]:
        return {"load": self.load, "min_replicas": self.min_replicas, "max_replicas": self.max_replicas}

    @classmethod
    def from_dict(cls, data: Any, index: int) -> "ExpertSpec":
        require_keys(f"round: experts[{index}]", data, ("load",), ("min_replicas", "max_replicas"))
        return cls(data["load"], json_int(data.get("min_replicas", 1)), json_int(data.get("max_replicas")))


@dataclass(frozen=True)
class ExpertsRound(JoblessRound):
    """An experts round (module docstring)."""

    KIND: ClassVar[str] = "experts"
    FIELD_KEYS: ClassVar[tuple[str, ...]] = ("experts", "slots", "replica_cost", "layer")

    experts: tuple[ExpertSpec, ...] = ()
    slots: int = DEFAULT_SLOTS
    replica_cost: float = 0.0
    layer: int = 0
    _devices: tuple[tuple[str, ...], np.ndarray] = field(init=False, repr=False, compare=False)

    def _check_fields(self) -> None:
        object.__setattr__(self, "experts", tuple(self.experts))
        self._require_no_jobs("places the experts of one MoE layer")
        require_int("round", "slots", self.slots, 1)
        require_number("round", "replica_cost", self.replica_cost, 0.0)
        require_int("round", "layer", self.layer, 0)
        names: list[str] = []
        tflops: list[float] = []
        for node in self.cluster.nodes:
            peak = self.cluster.gpu_type(node.gpu_type).peak_tflops
            for k in range(self.free(node.name).gpus):
                names.append(f"{node.name}:{k}")
                tflops.append(peak)
        if not names:
            raise ValidationError("round: the cluster has no free GPU to host experts")
        if not self.experts:
            raise ValidationError("round: an experts round needs at least one expert")
        for i, e in enumerate(self.experts):
            if not isinstance(e, ExpertSpec):
                raise ValidationError(f"round: experts must hold ExpertSpec objects, got {e!r}")
            e.check(i, len(names))
        need = sum(e.min_replicas for e in self.experts)
        if need > len(names) * self.slots:
            raise ValidationError(f"round: the experts need at least {need} replicas, more than the {len(names)} "
                                  f"devices x {self.slots} slots = {len(names) * self.slots} device slots")
        speed = np.array(tflops) / max(tflops)
        speed.setflags(write=False)
        object.__setattr__(self, "_devices", (tuple(names), speed))

    # -- look-ups ---------------------------------------------------------------------------------
    @property
    def devices(self) -> tuple[str, ...]:
        """Device names, in order (module docstring)."""
        return self._devices[0]

    @property
    def speeds(self) -> np.ndarray:
        """Relative speed of each device (read-only)."""
        return self._devices[1]

    @property
    def num_devices(self) -> int:
        return len(self._devices[0])

    @property
    def num_experts(self) -> int:
        return len(self.experts)

    @property
    def loads(self) -> np.ndarray:
        return np.array([e.load for e in self.experts], dtype=float)

    @property
    def min_replicas(self) -> np.ndarray:
        return np.array([e.min_replicas for e in self.experts], dtype=np.int64)

    @property
    def max_replicas(self) -> np.ndarray:
        """Upper replica bound of each expert (None read as the number of devices)."""
        d = self.num_devices
        return np.array([d if e.max_replicas is None else e.max_replicas for e in self.experts], dtype=np.int64)

    # -- JSON -------------------------------------------------------------------------------------
    def _fields_to_dict(self) -> dict[str, Any]:
        return {"experts": [e.to_dict() for e in self.experts], "slots": self.slots,
                "replica_cost": self.replica_cost, "layer": self.layer}

    @classmethod
    def _fields_from_dict(cls, data: Mapping[str, Any]) -> dict[str, Any]:
        if "experts" not in data:
            raise ValidationError("round: missing field(s) experts")
        if not isinstance(data["experts"], list):
            raise ValidationError("round: experts must be a JSON array")
        return {"experts": tuple(ExpertSpec.from_dict(e, i) for i, e in enumerate(data["experts"])),
                "slots": json_int(data.get("slots", DEFAULT_SLOTS)), "replica_cost": data.get("replica_cost", 0.0),
                "layer": json_int(data.get("layer", 0))}


__all__ = ["DEFAULT_SLOTS", "ExpertSpec", "ExpertsRound"]

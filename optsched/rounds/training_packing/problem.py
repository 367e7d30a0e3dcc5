"""The ``training-packing`` round (thesis Sec. 4.4.2, Lina's expert packing for training): choose how many
experts each device holds (``p``, a power of two) and which experts share a device, so that the modelled
MoE-layer time is smallest.

The problem, its time model and its checks are :class:`~optsched.perf.training_packing.PackingSetup`'s
(that module's docstring: the setting of ``E`` experts on ``E`` devices, Sec. 4.7.2; the candidates'
balanced-load times; the layer time, ours; memory and DRAM offloading). This round is that setup as a
round file: its fields are the setup's, one for one, and every check is the setup's (``ValidationError``
naming the field; :attr:`TrainingPackingRound.setup`). The cluster describes the devices: it must have at
least ``experts`` GPUs (the text's setting puts the ``E`` experts of a layer on ``E`` devices).

**Why its own kind, not a method of ``experts``.** The ``experts`` kind is Lina's *inference* placement
(Sec. 4.5: per-expert token loads, replicas with token shares, cost the most loaded device's token time);
training packing decides one ``p`` for every device and the sets of experts sharing a device, with a cost
(pipelined all-to-all and FFN, DRAM offloading) from fields an experts round does not hold.

JSON fields: ``experts`` (int), ``candidates`` (array of ``{experts_per_device, a2a_ms, ffn_ms,
micro_ops}``), ``memory_gb`` (40), ``base_gb`` (0), ``expert_gb`` (0), ``swap_ms`` (0), ``offload`` (true),
``loads`` (null or one number per expert), ``max_experts_per_device`` (null or int).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import cached_property
from typing import Any, ClassVar, Mapping

from optsched.core.checks import json_ints, require_keys
from optsched.core.errors import ValidationError
from optsched.perf.training_packing import PackingCandidate, PackingSetup
from optsched.rounds.jobless import JoblessRound

CANDIDATE_KEYS = ("experts_per_device", "a2a_ms", "ffn_ms")
#: the defaults of the setup's optional fields, the round's too
_SETUP_DEFAULTS: dict[str, Any] = {f.name: f.default for f in fields(PackingSetup)}


def candidate_to_dict(c: PackingCandidate) -> dict[str, Any]:
    return {"experts_per_device": c.experts_per_device, "a2a_ms": c.a2a_ms, "ffn_ms": c.ffn_ms,
            "micro_ops": c.micro_ops}


def candidate_from_dict(data: Any, index: int) -> PackingCandidate:
    require_keys(f"round: candidates[{index}]", data, CANDIDATE_KEYS, ("micro_ops",))
    data = json_ints(data, ("experts_per_device", "micro_ops"))
    return PackingCandidate(data["experts_per_device"], data["a2a_ms"], data["ffn_ms"], data.get("micro_ops", 1))


@dataclass(frozen=True)
class TrainingPackingRound(JoblessRound):
    """A training-packing round (module docstring)."""

    KIND: ClassVar[str] = "training-packing"
    FIELD_KEYS: ClassVar[tuple[str, ...]] = ("experts", "candidates", "memory_gb", "base_gb", "expert_gb", "swap_ms",
                                             "offload", "loads", "max_experts_per_device")

    experts: int = 0
    candidates: tuple[PackingCandidate, ...] = ()
    # the setup's own defaults (one place: PackingSetup)
    memory_gb: float = _SETUP_DEFAULTS["memory_gb"]
    base_gb: float = _SETUP_DEFAULTS["base_gb"]
    expert_gb: float = _SETUP_DEFAULTS["expert_gb"]
    swap_ms: float = _SETUP_DEFAULTS["swap_ms"]
    offload: bool = _SETUP_DEFAULTS["offload"]
    loads: tuple[float, ...] | None = _SETUP_DEFAULTS["loads"]
    max_experts_per_device: int | None = _SETUP_DEFAULTS["max_experts_per_device"]

    def _check_fields(self) -> None:
        object.__setattr__(self, "candidates", tuple(self.candidates))
        if self.loads is not None:
            object.__setattr__(self, "loads", tuple(self.loads))
        self._require_no_jobs("packs the experts of one MoE model")
        setup = self.setup  # the setup's checks, naming the field
        gpus = sum(n.num_gpus for n in self.cluster.nodes)
        if gpus < setup.experts:
            raise ValidationError(f"round: experts {setup.experts} need as many devices (Sec. 4.7.2: \"The number of "
                                  f"GPUs is equal to the number of experts per layer\"); the cluster has {gpus} GPUs")

    @cached_property
    def setup(self) -> PackingSetup:
        """The round as the problem of :mod:`optsched.perf.training_packing` (checked when built, once: the round
        is immutable)."""
        return PackingSetup(self.experts, self.candidates, self.memory_gb, self.base_gb, self.expert_gb,
                            self.swap_ms, self.offload, self.loads, self.max_experts_per_device)

    def _fields_to_dict(self) -> dict[str, Any]:
        return {"experts": self.experts, "candidates": [candidate_to_dict(c) for c in self.candidates],
                "memory_gb": self.memory_gb, "base_gb": self.base_gb, "expert_gb": self.expert_gb,
                "swap_ms": self.swap_ms, "offload": self.offload,
                "loads": None if self.loads is None else list(self.loads),
                "max_experts_per_device": self.max_experts_per_device}

    @classmethod
    def _fields_from_dict(cls, data: Mapping[str, Any]) -> dict[str, Any]:
        missing = [k for k in ("experts", "candidates") if k not in data]
        if missing:
            raise ValidationError(f"round: missing field(s) {', '.join(missing)}")
        if not isinstance(data["candidates"], list):
            raise ValidationError("round: candidates must be a JSON array")
        loads = data.get("loads")
        if loads is not None and not isinstance(loads, list):
            raise ValidationError("round: loads must be a JSON array or null")
        ints = json_ints(data, ("experts", "max_experts_per_device"))
        out = {"experts": ints["experts"],
               "candidates": tuple(candidate_from_dict(c, i) for i, c in enumerate(data["candidates"])),
               "loads": None if loads is None else tuple(loads)}
        out.update({k: ints[k] for k in ("memory_gb", "base_gb", "expert_gb", "swap_ms", "offload",
                                         "max_experts_per_device") if k in ints})   # absent: the defaults
        return out


__all__ = ["TrainingPackingRound", "candidate_from_dict", "candidate_to_dict"]

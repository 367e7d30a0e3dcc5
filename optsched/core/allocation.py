"""Where a job runs: per-node shares of GPUs, CPUs and host memory, and a job's allocation
(placement + execution plan)."""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Mapping

from optsched.core.checks import json_int, require_int, require_keys, require_name, require_number
from optsched.core.errors import ValidationError
from optsched.core.plan import ExecutionPlan


@dataclass(frozen=True)
class NodeShare:
    """Resources a job holds on one node."""

    gpus: int
    cpus: int = 0
    mem_gib: float = 0.0

    def __post_init__(self) -> None:
        if (type(self.gpus) is int and type(self.cpus) is int and type(self.mem_gib) is float
                and self.gpus >= 0 and self.cpus >= 0 and 0.0 <= self.mem_gib < math.inf):
            return  # fast path: the checks below would all pass
        require_int("NodeShare", "gpus", self.gpus, 0)
        require_int("NodeShare", "cpus", self.cpus, 0)
        require_number("NodeShare", "mem_gib", self.mem_gib, 0.0)

    def to_dict(self) -> dict[str, Any]:
        return {"gpus": self.gpus, "cpus": self.cpus, "mem_gb": self.mem_gib}

    @classmethod
    def from_dict(cls, data: Any) -> "NodeShare":
        """The share of a JSON object ``{"gpus": g, "cpus": c, "mem_gb": m}`` (``cpus`` and ``mem_gb`` optional). A
        round holds tens of thousands of shares of a few distinct values: a share with plain values (int, int,
        float, no other member) is made once and the same immutable object returned for its next occurrences."""
        if type(data) is dict:
            key = (data.get("gpus"), data.get("cpus", 0), data.get("mem_gb", 0.0))
            if type(key[0]) is int and type(key[1]) is int and type(key[2]) is float \
                    and len(data) == 1 + ("cpus" in data) + ("mem_gb" in data):
                hit = _PLAIN_SHARES.get(key)
                if hit is not None:
                    return hit
                share = cls(*key)
                if len(_PLAIN_SHARES) < _PLAIN_SHARES_MAX:
                    _PLAIN_SHARES[key] = share
                return share
        require_keys("NodeShare", data, ("gpus",), ("cpus", "mem_gb"))
        return cls(gpus=json_int(data["gpus"]), cpus=json_int(data.get("cpus", 0)), mem_gib=data.get("mem_gb", 0.0))


#: the shares :meth:`NodeShare.from_dict` made from plain values, by (gpus, cpus, mem_gb), and at most how many it
#: keeps (a round's shares take a few distinct values; memory in GiB may take many)
_PLAIN_SHARES: dict[tuple[int, int, float], NodeShare] = {}
_PLAIN_SHARES_MAX = 4096


#: a (node, share) pair's node name: the order of a placement's shares
_node_name = operator.itemgetter(0)


@dataclass(frozen=True)
class Placement:
    """Per-node shares, kept sorted by node name so equal placements compare equal. Its totals, parts and
    GPUs per node are computed on first use and remembered (the placement is immutable).

    JSON form: ``{node: {"gpus": g, "cpus": c, "mem_gb": m}}``.
    """

    shares: tuple[tuple[str, NodeShare], ...]

    def __post_init__(self) -> None:
        items = tuple(self.shares)
        seen: set[str] = set()
        for name, share in items:
            if type(name) is not str or not name.strip():
                require_name("Placement node", name)
            if name in seen:
                raise ValidationError(f"Placement: node {name!r} appears twice")
            if type(share) is not NodeShare and not isinstance(share, NodeShare):
                raise ValidationError(f"Placement: share on node {name!r} must be a NodeShare")
            seen.add(name)
        object.__setattr__(self, "shares", tuple(sorted(items, key=_node_name)) if len(items) > 1 else items)

    @classmethod
    def of(cls, mapping: Mapping[str, NodeShare]) -> "Placement":
        return cls(tuple(mapping.items()))

    @cached_property
    def total_gpus(self) -> int:
        return sum(s.gpus for _, s in self.shares)

    @cached_property
    def total_cpus(self) -> int:
        return sum(s.cpus for _, s in self.shares)

    @cached_property
    def total_mem_gib(self) -> float:
        return sum(s.mem_gib for _, s in self.shares)

    @cached_property
    def gpu_parts(self) -> tuple[tuple[str, int], ...]:
        """(node, GPUs) of the nodes with at least one GPU, by node name (a round's ``Choice.parts``)."""
        return tuple((n, s.gpus) for n, s in self.shares if s.gpus > 0)

    @cached_property
    def gpus_per_node(self) -> tuple[int, ...]:
        """GPU counts of the nodes with at least one GPU, largest first (the perf model's view)."""
        return tuple(sorted((s.gpus for _, s in self.shares if s.gpus > 0), reverse=True))

    def to_dict(self) -> dict[str, Any]:
        return {name: share.to_dict() for name, share in self.shares}

    @classmethod
    def from_dict(cls, data: Any) -> "Placement":
        if not isinstance(data, dict):
            raise ValidationError(f"Placement: expected a JSON object {{node: share}}, got {type(data).__name__}")
        return cls(tuple((k, NodeShare.from_dict(v)) for k, v in data.items()))


def parse_placement_code(code: str) -> tuple[int, ...]:
    """``"224"`` -> ``(4, 2, 2)``: GPUs per node of a measurement row, one digit per node, sorted
    largest first (the order of digits carries no meaning)."""
    text = str(code).strip()
    if not text or not text.isdigit():
        raise ValidationError(f"placement code {code!r}: expected one digit (1-9) per node, e.g. '224'")
    gpus = tuple(int(c) for c in text)
    if 0 in gpus:
        raise ValidationError(f"placement code {code!r}: a node in a placement holds at least one GPU")
    return tuple(sorted(gpus, reverse=True))


@dataclass(frozen=True)
class Allocation:
    """A job's execution plan and placement; ``since`` (optional, seconds of the round's clock): when
    the job got this configuration (what a round's ``min_hold_s`` reads; written to JSON only when set)."""

    job: str
    plan: ExecutionPlan
    placement: Placement
    since: float | None = None

    def __post_init__(self) -> None:
        require_name("Allocation job", self.job)
        if self.since is not None:
            require_number(f"allocation of job {self.job!r}", "since", self.since, 0.0)
        if self.plan.num_gpus != self.placement.total_gpus:
            raise ValidationError(
                f"allocation of job {self.job!r}: plan {self.plan.label} uses {self.plan.num_gpus} GPUs "
                f"but the placement holds {self.placement.total_gpus}")

    def to_dict(self) -> dict[str, Any]:
        d = {"job": self.job, "plan": self.plan.to_dict(), "placement": self.placement.to_dict()}
        if self.since is not None:
            d["since"] = self.since
        return d

    @classmethod
    def from_dict(cls, data: Any) -> "Allocation":
        require_keys("Allocation", data, ("job", "plan", "placement"), ("since",))
        return cls(job=data["job"], plan=ExecutionPlan.from_dict(data["plan"]),
                   placement=Placement.from_dict(data["placement"]), since=data.get("since"))

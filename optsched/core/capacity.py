"""Per-node capacity accounting: the one place where shares held on nodes are added up and compared
with what the nodes offer (round validation, every decision's feasibility check, the simulator's
check of a policy's decision and of a capacity change)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

from optsched.core.allocation import NodeShare

#: (attribute of NodeShare, unit in messages), in the order every check reports them
RESOURCES: tuple[tuple[str, str], ...] = (("gpus", "GPUs"), ("cpus", "CPUs"), ("mem_gib", "GiB"))


@dataclass(frozen=True)
class Overflow:
    """``used`` units of ``unit`` (GPUs, CPUs, GiB) held on ``node``, above its ``capacity``."""

    node: str
    unit: str
    used: float
    capacity: float


class NodeUsage:
    """GPUs, CPUs and GiB held per node, added share by share."""

    def __init__(self) -> None:
        self._used: dict[str, list[float]] = {}

    def add(self, node: str, share: NodeShare) -> None:
        u = self._used.setdefault(node, [0, 0, 0.0])
        u[0] += share.gpus
        u[1] += share.cpus
        u[2] += share.mem_gib

    def add_all(self, shares: Iterable[tuple[str, NodeShare]]) -> None:
        for node, share in shares:
            self.add(node, share)

    def used(self, node: str) -> tuple[float, float, float]:
        """GPUs, CPUs and GiB held on ``node`` (zeros when nothing was added there)."""
        u = self._used.get(node)
        return (0, 0, 0.0) if u is None else (u[0], u[1], u[2])

    @property
    def nodes(self) -> tuple[str, ...]:
        """Nodes with something added, in the order they were first seen."""
        return tuple(self._used)

    def within(self, node: str, gpus: float, cpus: float, mem_gib: float, tol: float) -> bool:
        """Whether ``node`` holds at most ``gpus``, ``cpus`` and ``mem_gib`` (each up to ``tol`` over): :meth:`excess`
        empty, without making the capacity's share (a round checks every share of every running job)."""
        u = self._used.get(node)
        return u is None or (u[0] <= gpus + tol and u[1] <= cpus + tol and u[2] <= mem_gib + tol)

    def excess(self, node: str, capacity: NodeShare, tol: float) -> list[Overflow]:
        """What ``node`` holds beyond ``capacity`` (more than ``tol`` over), per resource."""
        used = self.used(node)
        return [Overflow(node, unit, u, getattr(capacity, attr))
                for u, (attr, unit) in zip(used, RESOURCES) if u > getattr(capacity, attr) + tol]

    def overflows(self, capacity_of: Callable[[str], NodeShare], tol: float) -> list[Overflow]:
        """Every node and resource held beyond ``capacity_of(node)`` (more than ``tol`` over)."""
        return [o for node in self._used for o in self.excess(node, capacity_of(node), tol)]


__all__ = ["NodeUsage", "Overflow", "RESOURCES"]

"""Events from outside the scheduler that a round must take into account: capacity changes (work
outside the rounds taking or returning part of a node, e.g. an inference service reclaiming a loaned
server, Lyra Sec. 3.4) and pool targets (how many of a set of whole servers are lent to the rounds,
the policy choosing which to give back)."""

from __future__ import annotations

from dataclasses import dataclass

from optsched.core.allocation import Allocation, NodeShare
from optsched.core.checks import require_name, require_number
from optsched.core.errors import ValidationError


@dataclass(frozen=True)
class CapacityChange:
    """From ``time`` on, work outside the rounds holds ``occupied`` on ``node``; ``NodeShare(0)`` returns
    the whole node. When the jobs running there no longer fit, some of them must give up their share:
    a policy that implements :class:`~optsched.core.policy.Reclaimer` chooses which; otherwise the
    simulator evicts the latest-started first."""

    time: float
    node: str
    occupied: NodeShare

    def __post_init__(self) -> None:
        require_number("capacity change", "time", self.time, 0.0)
        require_name("capacity change node", self.node)
        if not isinstance(self.occupied, NodeShare):
            raise ValidationError(f"capacity change of node {self.node!r}: occupied must be a NodeShare")


@dataclass(frozen=True)
class PoolTarget:
    """From ``time`` on, ``count`` of the whole servers ``nodes`` serve the rounds and work outside the
    rounds holds the others whole (Lyra's capacity loaning, Sec. 3.4: the inference cluster says how
    many servers it lends; the training side chooses which to return). Servers are lent in ``nodes``
    order; when fewer are lent than before, a policy that implements
    :class:`~optsched.core.policy.ServerReclaimer` chooses which to return."""

    time: float
    nodes: tuple[str, ...]
    count: int

    def __post_init__(self) -> None:
        require_number("pool target", "time", self.time, 0.0)
        object.__setattr__(self, "nodes", tuple(self.nodes))
        for n in self.nodes:
            require_name("pool target node", n)
        if len(set(self.nodes)) != len(self.nodes):
            raise ValidationError("pool target: a node is listed twice")
        if isinstance(self.count, bool) or not isinstance(self.count, int) or not 0 <= self.count <= len(self.nodes):
            raise ValidationError(f"pool target at {self.time:g} s: count must be an integer in 0..{len(self.nodes)}, "
                                  f"got {self.count!r}")


@dataclass(frozen=True)
class ServerReturn:
    """A policy's answer to returning servers: the ``nodes`` given back, the jobs ``preempt``-ed and the
    new, smaller allocations of jobs that ``shrink`` (scale in) instead; what still runs on a returned
    node afterwards is evicted like after a :class:`CapacityChange`."""

    nodes: tuple[str, ...]
    preempt: tuple[str, ...] = ()
    shrink: tuple[Allocation, ...] = ()


__all__ = ["CapacityChange", "PoolTarget", "ServerReturn"]

"""Events from outside the scheduler that a round must take into account: today, capacity changes (work
outside the rounds taking or returning part of a node, e.g. an inference service reclaiming a loaned
server, Lyra Sec. 3.4)."""

from __future__ import annotations

from dataclasses import dataclass

from optsched.core.allocation import NodeShare
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


__all__ = ["CapacityChange"]

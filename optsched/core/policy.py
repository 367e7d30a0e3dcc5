"""The one interface between whoever holds a round (the simulator, a scheduler calling optsched) and
whatever answers it (DESIGN.md, "Contracts"): ``Policy.decide(problem) -> Decision``.

A policy solves rounds of one ``kind`` (the simulator builds that kind's problem class from its
state). A policy may also implement :class:`Reclaimer`: when work outside the rounds takes back part
of a node (:class:`~optsched.core.events.CapacityChange`) and the jobs running there no longer fit,
the holder of the round asks the policy which of them give up their share (Lyra's reclaim, thesis
Sec. 3.4); a policy without it leaves the choice to the holder (the simulator evicts the
latest-started jobs first).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from optsched.core.decision import Decision
from optsched.core.events import CapacityChange, ServerReturn
from optsched.core.round import RoundProblem


@runtime_checkable
class Policy(Protocol):
    """Answers rounds of ``kind``; ``name`` is the method it stands for (used in reports)."""

    name: str
    kind: str

    def decide(self, problem: RoundProblem) -> Decision: ...


@runtime_checkable
class Reclaimer(Protocol):
    """A policy that chooses which jobs lose their share of a node when capacity shrinks."""

    def reclaim(self, problem: RoundProblem, change: CapacityChange) -> tuple[str, ...]:
        """Names of running jobs of ``problem`` (the state just before ``change``) with a share on
        ``change.node`` that give it up, so that the node fits ``change.occupied`` plus what the others
        hold there. Each named job is preempted (it loses its whole allocation)."""
        ...


@runtime_checkable
class ServerReclaimer(Protocol):
    """A policy that chooses which lent servers go back when a
    :class:`~optsched.core.events.PoolTarget` lends fewer (Lyra Sec. 3.4)."""

    def return_servers(self, problem: RoundProblem, candidates: tuple[str, ...], count: int) -> ServerReturn:
        """``count`` of ``candidates`` (the lent servers, whole) to give back, with the running jobs of
        ``problem`` to preempt and those that shrink to a smaller allocation instead."""
        ...


__all__ = ["Policy", "Reclaimer", "ServerReclaimer"]

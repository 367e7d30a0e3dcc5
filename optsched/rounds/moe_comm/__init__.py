"""The ``moe-comm`` round kind (thesis Sec. 4.4, Lina's communication scheduler): order the all-to-all
and allreduce operations of one MoE backward pass on a shared link so that the step ends early.

Files: ``problem.py`` (the backward pass and the link, JSON), ``tasks.py`` (task graphs at whole-op or
micro-op granularity, with pipelined expert FFN), ``timeline.py`` (executing a launch rule under fair
sharing, replaying a fixed order, the feasibility check), ``decision.py`` (the :class:`CommSchedule`
payload and decision assembly), ``generate.py`` (the Fig. 4.7-shaped example and random passes).
Importing this package registers the kind.
"""

from optsched.core.kinds import RoundKind, register_kind
from optsched.rounds.moe_comm.decision import CommSchedule
from optsched.rounds.moe_comm.generate import fig47_round, generate_comm_round
from optsched.rounds.moe_comm.problem import AllReduce, MoECommRound, StreamOp


def generate(*, seed: int = 0, moe_layers: int = 2) -> MoECommRound:
    """A random backward pass of ``moe_layers`` MoE layers
    (:func:`~optsched.rounds.moe_comm.generate.generate_comm_round`)."""
    return generate_comm_round(moe_layers, seed)


KIND = register_kind(RoundKind(
    "moe-comm", MoECommRound, CommSchedule, generate,
    "MoE training communication: all-to-all and allreduce of one backward pass on a shared link, minimise "
    "the step time (Lina)"))

__all__ = ["KIND", "AllReduce", "CommSchedule", "MoECommRound", "StreamOp", "fig47_round", "generate",
           "generate_comm_round"]

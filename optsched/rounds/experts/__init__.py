"""The ``experts`` round kind (thesis Ch. 4, Lina Sec. 4.5): replicate popular experts of one MoE layer
on more devices and pack unpopular ones together so that the most loaded device finishes early.

Files: ``problem.py`` (the round's fields and JSON), ``plan.py`` (a replica plan, its device loads,
makespan, lower bound and feasibility check), ``decision.py`` (the :class:`ExpertPlacement` payload and
decision assembly), ``generate.py`` (rounds from the synthetic routing generator). Importing this
package registers the kind (:mod:`optsched.core.kinds`).
"""

from optsched.core.kinds import RoundKind, register_kind
from optsched.rounds.experts.decision import ExpertPlacement
from optsched.rounds.experts.generate import generate_experts_round
from optsched.rounds.experts.problem import ExpertSpec, ExpertsRound


def generate(*, seed: int = 0, experts: int = 16, devices: int | None = None, slots: int = 4,
             tokens: int = 4096) -> ExpertsRound:
    """A random experts round of ``experts`` experts on ``devices`` devices (default: as many as experts)
    with ``slots`` replica slots each, loads estimated for a batch of ``tokens`` tokens
    (:func:`~optsched.rounds.experts.generate.generate_experts_round`)."""
    return generate_experts_round(experts, devices, seed, slots=slots, tokens=tokens)


KIND = register_kind(RoundKind(
    "experts", ExpertsRound, ExpertPlacement, generate,
    "MoE expert replication and packing: experts of one layer on devices, minimise the most loaded device (Lina)"))

__all__ = ["KIND", "ExpertPlacement", "ExpertSpec", "ExpertsRound", "generate", "generate_experts_round"]

"""The ``training-packing`` round kind (thesis Sec. 4.4.2, Lina's expert packing for training): how many
experts each device holds and which experts share a device, minimising the modelled MoE-layer time.

Files: ``problem.py`` (the round: :class:`~optsched.perf.training_packing.PackingSetup` as a round file),
``decision.py`` (the :class:`TrainingPacking` payload and decision assembly), ``generate.py`` (random
rounds). The time model, the rule and the exact model are
:mod:`optsched.perf.training_packing`, :mod:`optsched.heuristics.lina_packing` and
:mod:`optsched.formulations.training_packing`. Importing this package registers the kind.
"""

from optsched.core.kinds import RoundKind, register_kind
from optsched.rounds.training_packing.decision import TrainingPacking
from optsched.rounds.training_packing.generate import generate_packing_round
from optsched.rounds.training_packing.problem import TrainingPackingRound


def generate(*, seed: int = 0, experts: int = 16, balanced: bool = False, offload: bool = True) -> TrainingPackingRound:
    """A random round of ``experts`` experts on as many devices
    (:func:`~optsched.rounds.training_packing.generate.generate_packing_round`)."""
    return generate_packing_round(experts, seed, balanced=balanced, offload=offload)


KIND = register_kind(RoundKind(
    "training-packing", TrainingPackingRound, TrainingPacking, generate,
    "MoE training expert packing: experts per device (a power of two) and which experts share a device, "
    "minimise the modelled layer time (Lina)"))

__all__ = ["KIND", "TrainingPacking", "TrainingPackingRound", "generate", "generate_packing_round"]

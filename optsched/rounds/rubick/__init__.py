"""The ``rubick`` round kind (Rubick Sec. 3-5): reconfigurable jobs choosing plan, GPUs, CPUs and memory
per node, with performance guarantees for guaranteed jobs and tenant quotas.

Files: ``problem.py`` (the round's fields and JSON), ``table.py`` (its coefficient table from the
performance models), ``baseline_tables.py`` (the tables the Table 4 baselines choose from),
``choice.py`` (a job's choice and how it lands on nodes), ``admission.py`` (who is protected),
``deadlines.py`` and ``deadline_admission.py`` (whose deadline is admitted, what that binds),
``objective.py``, ``feasibility.py``, ``decision.py`` (decision assembly) and ``generate.py`` (random
rounds), ``partition.py`` (split into parts, merge). Importing this package registers the kind (:mod:`optsched.core.kinds`).
"""

from optsched.core.decision import JobAllocations
from optsched.core.kinds import RoundKind, register_kind
from optsched.rounds.rubick.generate import generate_rubick_round
from optsched.rounds.rubick.partition import RubickPartitioner
from optsched.rounds.rubick.problem import RubickRound


def generate(*, seed: int = 0, nodes: int = 8, gpus_per_node: int = 8, jobs: int = 40,
             constrained: float = 0.0) -> RubickRound:
    """A random Rubick round on ``nodes`` x ``gpus_per_node`` A800 GPUs with ``jobs`` jobs
    (:func:`~optsched.rounds.rubick.generate.generate_rubick_round`)."""
    return generate_rubick_round(nodes, gpus_per_node, jobs, seed, constrained=constrained)


KIND = register_kind(RoundKind(
    "rubick", RubickRound, JobAllocations, generate,
    "reconfigurable jobs: plan, GPUs, CPUs and memory per node; guarantees and tenant quotas (Rubick)",
    RubickPartitioner()))

__all__ = ["KIND", "RubickRound", "generate", "generate_rubick_round"]

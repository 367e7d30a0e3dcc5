"""The ``crius`` round kind (Crius Sec. 4-6): jobs of large models on a heterogeneous cluster, each run
as a Cell -- a GPU type, a GPU count and a number of pipeline stages -- chosen among ``N_G / 2``,
``N_G`` and ``2 N_G`` GPUs, or pended; a search depth bounds how many jobs a scheduling choice rescales.

Files: ``problem.py`` (the round's fields and JSON), ``table.py`` (its Cells as a coefficient table
from :mod:`optsched.perf.crius`), ``capacity.py`` (GPU slots per node, the packing rule, placement),
``choice.py`` (a job's choice; kept, rescaled, suspended), ``admission.py`` (opportunistic execution,
deadline guarantees and drops), ``objective.py``, ``feasibility.py``, ``payload.py`` (the decision's
Cells), ``decision.py`` (decision assembly) and ``generate.py`` (random rounds). Importing this package
registers the kind (:mod:`optsched.core.kinds`).
"""

from typing import Any

from optsched.core.kinds import RoundKind, register_kind
from optsched.rounds.crius.payload import CellInfo, CriusAllocations
from optsched.rounds.crius.problem import CriusRound


def generate(*, seed: int = 0, jobs: int = 40) -> CriusRound:
    """A random Crius round of ``jobs`` jobs on the 1,280-GPU cluster of Crius Table 1
    (:func:`~optsched.rounds.crius.generate.generate_crius_round`; imported on use: the Cell estimator's
    operator graphs need networkx, 0.16 s that solving a round of another kind does not need)."""
    from optsched.rounds.crius.generate import generate_crius_round

    return generate_crius_round(jobs, seed)


def __getattr__(name: str) -> Any:
    """``generate_crius_round`` without importing the generator with the package (PEP 562)."""
    if name == "generate_crius_round":
        from optsched.rounds.crius.generate import generate_crius_round

        return generate_crius_round
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


KIND = register_kind(RoundKind(
    "crius", CriusRound, CriusAllocations, generate,
    "large models on heterogeneous GPUs as Cells (type, GPUs, pipeline stages); search depth (Crius)"))

__all__ = ["KIND", "CellInfo", "CriusAllocations", "CriusRound", "generate", "generate_crius_round"]

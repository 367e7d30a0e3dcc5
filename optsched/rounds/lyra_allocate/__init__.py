"""The ``lyra-allocate`` round kind (thesis Sec. 3.5.1-3.5.2): workers per job, base demand first (SJF)
then flexible demand (multiple-choice knapsack). Files: ``problem.py``, ``payload.py`` (worker counts),
``capacity.py`` (what the round may hand out per pool), ``items.py`` (the knapsack items of Fig. 3.6),
``jct.py`` (completion times of the thesis' examples), ``decision.py``, ``generate.py``. Importing
this package registers the kind."""

from optsched.core.kinds import RoundKind, register_kind
from optsched.rounds.lyra_allocate.generate import generate_allocate_round
from optsched.rounds.lyra_allocate.payload import WorkerCount, WorkerCounts
from optsched.rounds.lyra_allocate.problem import LyraAllocateRound

KIND = register_kind(RoundKind(
    "lyra-allocate", LyraAllocateRound, WorkerCounts, generate_allocate_round,
    "workers per job: base demand by SJF, flexible demand by multiple-choice knapsack (Lyra Sec. 3.5.2)"))

__all__ = ["KIND", "LyraAllocateRound", "WorkerCount", "WorkerCounts", "generate_allocate_round"]

"""The ``lyra-allocate`` round (thesis Sec. 3.5.1-3.5.2): how many workers each job gets this round.

The round holds the common Lyra fields (:mod:`optsched.rounds.lyra.problem`). Scheduling is
non-preemptive (Sec. 3.5.2, "Setup and assumptions"): running inelastic jobs and the base workers of
running elastic jobs keep what they hold; the round allocates the **available** resources, the idle
GPUs of training and on-loan servers plus the GPUs of running elastic jobs' flexible workers, to the
queued jobs (base demand, phase one) and to the flexible demand of every elastic job (phase two).
Inference GPUs count in training GPUs (``inference_factor``), per pool (:mod:`.capacity`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from optsched.rounds.lyra.problem import LyraRound


@dataclass(frozen=True)
class LyraAllocateRound(LyraRound):
    """An allocation round (module docstring)."""

    KIND: ClassVar[str] = "lyra-allocate"


__all__ = ["LyraAllocateRound"]

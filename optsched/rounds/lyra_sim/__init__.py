"""The ``lyra`` round kind: a whole Lyra scheduling round as the simulator drives it (thesis Sec. 3.3):
allocation (``lyra-allocate``) and placement (``placement``) composed into per-job allocations
(:class:`~optsched.core.decision.JobAllocations`), the payload the simulator applies. Its fields are
the common Lyra fields (:mod:`optsched.rounds.lyra.problem`); the simulator passes ``inference_nodes``,
``inference_factor`` and ``scaling`` as round fields and marks the servers inference holds through
``occupied``. Importing this package registers the kind."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from optsched.core.decision import JobAllocations
from optsched.core.kinds import RoundKind, register_kind
from optsched.rounds.lyra.problem import LyraRound
from optsched.rounds.lyra.generate import lyra_state


@dataclass(frozen=True)
class LyraSimRound(LyraRound):
    """A Lyra scheduling round (module docstring)."""

    KIND: ClassVar[str] = "lyra"


def generate(*, seed: int = 0, servers: int = 8, training: int = 16, jobs: int = 30, occupancy: float = 0.7,
             elastic: float = 0.3) -> LyraSimRound:
    """A random Lyra round: the state of :func:`optsched.rounds.lyra.generate.lyra_state`."""
    builder, inf, cluster = lyra_state(seed, servers, training, jobs, occupancy, elastic, "lyra")
    return LyraSimRound(cluster=cluster, jobs=tuple(builder.jobs), running=tuple(builder.running),  # type: ignore[arg-type]
                        inference_nodes=inf, time=3600.0,
                        flexible=tuple((j, tuple(s.items())) for j, s in builder.flexible.items()))


KIND = register_kind(RoundKind(
    "lyra", LyraSimRound, JobAllocations, generate,
    "a whole Lyra round for the simulator: allocation then placement as per-job allocations (Lyra Sec. 3.3)"))

__all__ = ["KIND", "LyraSimRound", "generate"]

"""Random ``lyra-reclaim`` rounds: ``servers`` on-loan 8xT4 inference servers and ``training`` 8xV100
training servers, partly occupied by inelastic and elastic jobs (:mod:`optsched.rounds.lyra.generate`),
and a demand of ``reclaim`` servers."""

from __future__ import annotations

from optsched.rounds.lyra.generate import lyra_state
from optsched.rounds.lyra_reclaim.problem import LyraReclaimRound


def generate_reclaim_round(*, seed: int = 0, servers: int = 32, training: int | None = None,
                           reclaim: int | None = None, occupancy: float = 0.85,
                           elastic: float = 0.3) -> LyraReclaimRound:
    """A random reclaim round (module docstring); ``training`` defaults to ``servers // 2``, ``reclaim``
    to ``max(1, servers // 8)``; ``occupancy`` is the share of GPUs held by jobs, ``elastic`` the share
    of elastic jobs."""
    training = servers // 2 if training is None else training
    reclaim = max(1, servers // 8) if reclaim is None else reclaim
    builder, inf, cluster = lyra_state(seed, servers, training, 0, occupancy, elastic, "lyra-reclaim")
    return LyraReclaimRound(cluster=cluster, jobs=tuple(builder.jobs), running=tuple(builder.running),
                            inference_nodes=inf, flexible=tuple((j, tuple(s.items())) for j, s in builder.flexible.items()),
                            reclaim=reclaim)


__all__ = ["generate_reclaim_round"]

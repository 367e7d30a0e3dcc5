"""Random ``lyra-reclaim`` rounds: ``servers`` on-loan 8xT4 inference servers and ``training`` 8xV100
training servers, partly occupied by inelastic and elastic jobs (:mod:`optsched.rounds.lyra.generate`),
and a demand of ``reclaim`` servers."""

from __future__ import annotations

import numpy as np

from optsched.core.checks import require_int
from optsched.core.errors import ValidationError
from optsched.rounds.lyra.cluster import inference_name, training_name, two_pool_cluster
from optsched.rounds.lyra.generate import StateBuilder
from optsched.rounds.lyra_reclaim.problem import LyraReclaimRound


def generate_reclaim_round(*, seed: int = 0, servers: int = 32, training: int | None = None,
                           reclaim: int | None = None, occupancy: float = 0.85,
                           elastic: float = 0.3) -> LyraReclaimRound:
    """A random reclaim round (module docstring); ``training`` defaults to ``servers // 2``, ``reclaim``
    to ``max(1, servers // 8)``; ``occupancy`` is the share of GPUs held by jobs, ``elastic`` the share
    of elastic jobs."""
    require_int("gen-round lyra-reclaim", "servers", servers, 1)
    training = servers // 2 if training is None else training
    require_int("gen-round lyra-reclaim", "training", training, 0)
    reclaim = max(1, servers // 8) if reclaim is None else reclaim
    if not 0.0 <= occupancy <= 1.0 or not 0.0 <= elastic <= 1.0:
        raise ValidationError("gen-round lyra-reclaim: occupancy and elastic must lie in [0, 1]")
    rng = np.random.default_rng(seed)
    cluster = two_pool_cluster(training, servers)
    inf = tuple(inference_name(i) for i in range(servers))
    builder = StateBuilder(rng, {n.name: n.num_gpus for n in cluster.nodes}, frozenset(inf))
    builder.fill([training_name(i) for i in range(training)], occupancy, elastic, "t")
    builder.fill(list(inf), occupancy, elastic, "f", fungible_only=True)
    return LyraReclaimRound(cluster=cluster, jobs=tuple(builder.jobs), running=tuple(builder.running),
                            inference_nodes=inf, flexible=tuple((j, tuple(s.items())) for j, s in builder.flexible.items()),
                            reclaim=reclaim)


__all__ = ["generate_reclaim_round"]

"""Random ``lyra-allocate`` rounds: ``training`` 8xV100 and ``servers`` on-loan 8xT4 servers, partly
occupied (``occupancy``) by running inelastic and elastic jobs, and ``jobs`` queued jobs (``elastic`` of
them elastic) submitted over the last hour (:func:`optsched.rounds.lyra.generate.lyra_state`)."""

from __future__ import annotations

from optsched.rounds.lyra.generate import lyra_state
from optsched.rounds.lyra_allocate.problem import LyraAllocateRound


def generate_allocate_round(*, seed: int = 0, servers: int = 8, training: int = 16, jobs: int = 30,
                            occupancy: float = 0.7, elastic: float = 0.3) -> LyraAllocateRound:
    """A random allocation round at time 3600 s (module docstring)."""
    builder, inf, cluster = lyra_state(seed, servers, training, jobs, occupancy, elastic, "lyra-allocate")
    return LyraAllocateRound(cluster=cluster, jobs=tuple(builder.jobs), running=tuple(builder.running),  # type: ignore[arg-type]
                             inference_nodes=inf, time=3600.0,
                             flexible=tuple((j, tuple(s.items())) for j, s in builder.flexible.items()))


__all__ = ["generate_allocate_round"]

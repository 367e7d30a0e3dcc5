"""Random ``lyra-allocate`` rounds: ``training`` 8xV100 and ``servers`` on-loan 8xT4 servers, partly
occupied (``occupancy``) by running inelastic and elastic jobs, and queued jobs (``elastic`` of them
elastic) submitted over the last hour: of ``jobs`` drawn, those whose base demand fits ``load`` times
what the round may hand out (:func:`optsched.rounds.lyra.generate.lyra_state`).

The default ``load`` 0.6 leaves phase two, the multiple-choice knapsack of the flexible demand, room to
matter: on seeds 0-29 every round's exact objective is positive and the AFS-like greedy is below it on 8
(measured once; ``tests/rounds/test_lyra_generators.py`` checks most of seeds 0-9). ``load=None`` queues all ``jobs`` drawn, the state before
the option existed: the base demand then exceeds the free GPUs about threefold and phase one leaves
nothing to scale (objective 0 on 23 of those 30 seeds)."""

from __future__ import annotations

from optsched.rounds.lyra.generate import lyra_state
from optsched.rounds.lyra_allocate.problem import LyraAllocateRound


#: the default queued base demand over what an allocation round may hand out (module docstring)
DEFAULT_LOAD = 0.6


def generate_allocate_round(*, seed: int = 0, servers: int = 8, training: int = 16, jobs: int = 30,
                            occupancy: float = 0.7, elastic: float = 0.3,
                            load: float | None = DEFAULT_LOAD) -> LyraAllocateRound:
    """A random allocation round at time 3600 s (module docstring)."""
    builder, inf, cluster = lyra_state(seed, servers, training, jobs, occupancy, elastic, "lyra-allocate", load)
    return LyraAllocateRound(cluster=cluster, jobs=tuple(builder.jobs), running=tuple(builder.running),  # type: ignore[arg-type]
                             inference_nodes=inf, time=3600.0,
                             flexible=tuple((j, tuple(s.items())) for j, s in builder.flexible.items()))


__all__ = ["DEFAULT_LOAD", "generate_allocate_round"]

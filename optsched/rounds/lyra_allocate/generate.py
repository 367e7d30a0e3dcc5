"""Random ``lyra-allocate`` rounds: ``training`` 8xV100 and ``servers`` on-loan 8xT4 servers, partly
occupied (``occupancy``) by running inelastic and elastic jobs (:mod:`optsched.rounds.lyra.generate`),
and ``jobs`` queued jobs (``elastic`` of them elastic) submitted over the last hour."""

from __future__ import annotations

import numpy as np

from optsched.core.checks import require_int
from optsched.core.errors import ValidationError
from optsched.rounds.lyra.cluster import inference_name, training_name, two_pool_cluster
from optsched.rounds.lyra.generate import StateBuilder, random_job
from optsched.rounds.lyra_allocate.problem import LyraAllocateRound


def lyra_state(seed: int, servers: int, training: int, jobs: int, occupancy: float, elastic: float,
               what: str) -> tuple[StateBuilder, tuple[str, ...], object]:
    """The random state shared by the allocate and placement generators: the builder (running jobs),
    the inference servers and the cluster; ``jobs`` queued jobs are appended to ``builder.jobs``."""
    require_int(f"gen-round {what}", "servers", servers, 0)
    require_int(f"gen-round {what}", "training", training, 0)
    require_int(f"gen-round {what}", "jobs", jobs, 0)
    if servers + training < 1:
        raise ValidationError(f"gen-round {what}: needs at least one server")
    if not 0.0 <= occupancy <= 1.0 or not 0.0 <= elastic <= 1.0:
        raise ValidationError(f"gen-round {what}: occupancy and elastic must lie in [0, 1]")
    rng = np.random.default_rng(seed)
    cluster = two_pool_cluster(training, servers)
    inf = tuple(inference_name(i) for i in range(servers))
    builder = StateBuilder(rng, {n.name: n.num_gpus for n in cluster.nodes}, frozenset(inf))
    builder.fill([training_name(i) for i in range(training)], occupancy, elastic, "t")
    builder.fill(list(inf), occupancy, elastic, "f", fungible_only=True)
    for i in range(jobs):
        builder.jobs.append(random_job(rng, f"q{i:04d}", bool(rng.random() < elastic),
                                       submit_time=float(rng.uniform(0.0, 3600.0))))
    return builder, inf, cluster


def generate_allocate_round(*, seed: int = 0, servers: int = 8, training: int = 16, jobs: int = 30,
                            occupancy: float = 0.7, elastic: float = 0.3) -> LyraAllocateRound:
    """A random allocation round at time 3600 s (module docstring)."""
    builder, inf, cluster = lyra_state(seed, servers, training, jobs, occupancy, elastic, "lyra-allocate")
    return LyraAllocateRound(cluster=cluster, jobs=tuple(builder.jobs), running=tuple(builder.running),  # type: ignore[arg-type]
                             inference_nodes=inf, time=3600.0,
                             flexible=tuple((j, tuple(s.items())) for j, s in builder.flexible.items()))


__all__ = ["generate_allocate_round", "lyra_state"]

"""Random ``placement`` rounds: the state of :func:`optsched.rounds.lyra.generate.lyra_state`
(``training`` and ``servers`` on-loan servers partly occupied, ``jobs`` queued jobs) and worker counts
to place: running jobs keep their workers or change their flexible ones, queued jobs get a count in
their range, in submission order while the counts fit about 75% of the free training GPUs."""

from __future__ import annotations

import numpy as np

from optsched.core.checks import require_seed
from optsched.rounds.lyra.jobs import base_workers, max_workers
from optsched.rounds.lyra_allocate.capacity import available
from optsched.rounds.lyra.generate import lyra_state
from optsched.rounds.lyra_allocate.problem import LyraAllocateRound
from optsched.rounds.lyra_allocate.payload import WorkerCount
from optsched.rounds.placement.problem import PlacementRound

#: share of the free (normalised) GPUs the counts of queued jobs fill
FILL = 0.75


def generate_placement_round(*, seed: int = 0, servers: int = 8, training: int = 16, jobs: int = 20,
                             occupancy: float = 0.6, elastic: float = 0.3) -> PlacementRound:
    """A random placement round (module docstring)."""
    builder, inf, cluster = lyra_state(seed, servers, training, jobs, occupancy, elastic, "placement")
    require_seed("generate_placement_round", seed)
    rng = np.random.default_rng(seed + 1)
    flexible = tuple((j, tuple(s.items())) for j, s in builder.flexible.items())
    base = LyraAllocateRound(cluster=cluster, jobs=tuple(builder.jobs), running=tuple(builder.running),  # type: ignore[arg-type]
                             inference_nodes=inf, flexible=flexible, time=3600.0)
    counts = []
    for a in builder.running:
        job = base.job(a.job)
        pool = base.pool(a.placement.shares[0][0])
        held = base.workers_of(a.job)
        w = int(rng.integers(base_workers(job), max_workers(job) + 1)) if rng.random() < 0.3 else held
        counts.append(WorkerCount(a.job, max(w, base_workers(job)), pool))
    budget = FILL * sum(available(base).values())
    for job in sorted((j for j in builder.jobs if base.current(j.name) is None), key=lambda j: (j.submit_time, j.name)):
        w = int(rng.integers(base_workers(job), max_workers(job) + 1))
        if w * job.gpus_per_worker > budget:
            counts.append(WorkerCount(job.name, 0, None))
            continue
        budget -= w * job.gpus_per_worker
        counts.append(WorkerCount(job.name, w, None))
    return PlacementRound(cluster=cluster, jobs=tuple(builder.jobs), running=tuple(builder.running),  # type: ignore[arg-type]
                          inference_nodes=inf, flexible=flexible, time=3600.0, workers=tuple(counts))


__all__ = ["generate_placement_round"]

"""Builders shared by the experts-kind tests (``from experts_helpers import ...``)."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from optsched.core.errors import ValidationError
from optsched.rounds.experts import ExpertSpec, ExpertsRound
from optsched.rounds.experts.generate import lina_cluster


def experts_round(loads: Sequence[float], devices: int, *, slots: int = 4, replica_cost: float = 0.0,
                  max_replicas: Sequence[int | None] | None = None) -> ExpertsRound:
    """An experts round with these ``loads`` on ``devices`` homogeneous devices."""
    caps = max_replicas or [None] * len(loads)
    return ExpertsRound(cluster=lina_cluster(devices), experts=tuple(ExpertSpec(w, 1, m) for w, m in zip(loads, caps)),
                        slots=slots, replica_cost=replica_cost)


def minimums_round(specs: Sequence[tuple[float, int, int | None]], devices: int, slots: int) -> ExpertsRound:
    """An experts round of ``(load, min_replicas, max_replicas)`` experts on ``devices`` devices."""
    return ExpertsRound(cluster=lina_cluster(devices), experts=tuple(ExpertSpec(*s) for s in specs), slots=slots)


def random_small_round(seed: int) -> ExpertsRound | None:
    """A small random round (the reviewer's fuzz): 1-5 devices, 1-7 experts, 1-3 slots, minimums 1-2,
    maximums none or min..min+2, loads 0 (20%) or 1-999; None when the draw is not a valid round."""
    rng = np.random.default_rng(seed)
    devices, experts, slots = int(rng.integers(1, 6)), int(rng.integers(1, 8)), int(rng.integers(1, 4))
    specs = []
    for _ in range(experts):
        lo = int(rng.integers(1, 3))
        hi = None if rng.random() < 0.5 else int(rng.integers(lo, lo + 3))
        specs.append((float(rng.choice([0, rng.integers(1, 1000)], p=[0.2, 0.8])), lo, hi))
    try:
        return minimums_round(specs, devices, slots)
    except ValidationError:
        return None

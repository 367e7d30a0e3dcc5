"""Builders shared by the experts-kind tests (``from experts_helpers import ...``)."""

from __future__ import annotations

from typing import Sequence

from optsched.rounds.experts import ExpertSpec, ExpertsRound
from optsched.rounds.experts.generate import lina_cluster


def experts_round(loads: Sequence[float], devices: int, *, slots: int = 4, replica_cost: float = 0.0,
                  max_replicas: Sequence[int | None] | None = None) -> ExpertsRound:
    """An experts round with these ``loads`` on ``devices`` homogeneous devices."""
    caps = max_replicas or [None] * len(loads)
    return ExpertsRound(cluster=lina_cluster(devices), experts=tuple(ExpertSpec(w, 1, m) for w, m in zip(loads, caps)),
                        slots=slots, replica_cost=replica_cost)

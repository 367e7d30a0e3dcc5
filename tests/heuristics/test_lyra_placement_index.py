"""Lyra's best-fit decreasing (:func:`optsched.heuristics.lyra_placement.best_fit_decreasing`) finds each
worker's node in an index of the nodes by best fit's ranking instead of a pass over every server (issue
26, item 2): the same placements as the pass it replaced (:func:`scan_place`, the old code), with and
without Lyra's server groups, on generated placement and ``lyra`` rounds."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import pytest

import optsched
from optsched.core.kinds import round_kind
from optsched.heuristics import lyra_placement
from optsched.heuristics.lyra_placement import best_fit_decreasing
from optsched.rounds.lyra.problem import INFERENCE
from optsched.rounds.lyra_allocate.generate import generate_allocate_round
from optsched.rounds.placement import PlacementRound

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from time_limits import scaled_round  # noqa: E402


def scan_place(self: lyra_placement._Packer, worker_gpus: int, pool: str, flexible: bool) -> int | None:
    """The packer's best fit before the index: a numpy pass over the pool's servers per worker."""
    cand = np.flatnonzero(self.pool_mask[pool])
    allowed = None
    if self.grouped and pool == INFERENCE:
        allowed = ~(self.base_group if flexible else self.flex_group)[cand]
    nonempty = self.ledger.free_gpus[cand] < self.capacity[cand]
    got = self.ledger.best_fit([(worker_gpus, 0, 0.0)], cand, allowed=allowed, prefer=nonempty)
    return None if got is None else got[0][0]


def _rounds() -> list[PlacementRound]:
    out = [round_kind("placement").generate(seed=s, jobs=j, servers=sv, training=t)
           for s, j, sv, t in ((0, 20, 8, 16), (1, 60, 6, 10), (2, 200, 20, 30), (3, 40, 2, 2), (4, 300, 40, 10))]
    for seed in range(3):   # what the lyra kind places: an allocation's counts
        a = generate_allocate_round(seed=seed, jobs=120, servers=16, training=24)
        d = optsched.solve(a, "lyra", 30.0)
        out.append(PlacementRound(cluster=a.cluster, jobs=a.jobs, running=a.running, occupied=a.occupied,
                                  time=a.time, inference_nodes=a.inference_nodes,
                                  inference_factor=a.inference_factor, scaling=a.scaling, flexible=a.flexible,
                                  opportunistic=a.opportunistic, workers=d.payload.counts))
    return out


@pytest.mark.parametrize("lyra", (True, False))
def test_the_indexed_best_fit_places_as_the_scan(lyra: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    rounds = _rounds()
    new = [best_fit_decreasing(p, lyra) for p in rounds]
    monkeypatch.setattr(lyra_placement._Packer, "place", scan_place)
    old = [best_fit_decreasing(p, lyra) for p in rounds]
    for p, a, b in zip(rounds, new, old):
        assert a == b, len(p.jobs)
    assert any(a.unplaced for a in new) and any(pl.flexible for a in new for pl in a.placements)


def test_placement_is_near_linear() -> None:
    """A 12,000-job placement round (4,800 servers): the scan took about 4 s (a pass per worker)."""
    p = scaled_round("placement", 12_000, 0)
    t = time.perf_counter()
    best_fit_decreasing(p, True)
    assert time.perf_counter() - t < 2.0


def test_a_placement_round_of_a_checked_round_is_the_one_built_field_by_field() -> None:
    """``PlacementRound.of_round`` (the ``lyra`` kind's placement round, without checking the state again)
    equals the round built field by field, and still refuses counts that break the rules."""
    from optsched.core.errors import ValidationError
    from optsched.rounds.lyra_allocate.payload import WorkerCount
    for seed in range(3):
        a = generate_allocate_round(seed=seed, jobs=60, servers=10, training=20)
        got = optsched.solve(a, "lyra", 30.0).payload.counts
        built = PlacementRound(cluster=a.cluster, jobs=a.jobs, running=a.running, occupied=a.occupied, time=a.time,
                               inference_nodes=a.inference_nodes, inference_factor=a.inference_factor,
                               scaling=a.scaling, flexible=a.flexible, opportunistic=a.opportunistic, workers=got)
        derived = PlacementRound.of_round(a, got)
        assert derived == built and derived.to_dict() == built.to_dict()
        assert best_fit_decreasing(derived) == best_fit_decreasing(built)
        running = a.running[0].job
        bad = tuple(WorkerCount(c.job, 0, None) if c.job == running else c for c in got)
        with pytest.raises(ValidationError, match="outside its range|below"):
            PlacementRound.of_round(a, bad)

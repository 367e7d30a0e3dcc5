"""The Lyra generators' running-job filler (:class:`optsched.rounds.lyra.generate.StateBuilder`) draws its
nodes from pool indices (:class:`~optsched.rounds.lyra.generate.PoolIndex`) instead of scanning every node
per worker (issue 26, item 2: 80-90 s to generate a 20,000-job round): the same jobs, allocations and
flexible workers as the plain scan it replaced (:class:`PlainBuilder` below, the old code) for the same
seed, and generation near-linear in the round's size."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Sequence

import numpy as np
import pytest

from optsched.core.job import Job
from optsched.rounds.lyra.cluster import inference_name, training_name, two_pool_cluster, worker_allocation
from optsched.rounds.lyra.generate import LOCALITY, StateBuilder, random_job
from optsched.rounds.lyra.jobs import base_workers, is_elastic, max_workers

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from time_limits import scaled_round  # noqa: E402


class PlainBuilder(StateBuilder):
    """The filler before the pool indices: every worker scans every node of the pool for candidates."""

    def plain_place(self, job: Job, nodes: Sequence[str], count: int, avoid: set[str]) -> dict[str, int] | None:
        shares: dict[str, int] = {}
        for _ in range(count):
            cand = [n for n in nodes if n not in avoid and self.free[n] - shares.get(n, 0) >= self.worker_gpus(job, n)]
            if not cand:
                return None
            mine = [n for n in cand if n in shares]
            n = mine[0] if mine and self.rng.random() < LOCALITY else cand[int(self.rng.integers(len(cand)))]
            shares[n] = shares.get(n, 0) + self.worker_gpus(job, n)
        return shares

    def plain_add(self, job: Job, nodes: Sequence[str]) -> bool:
        w = int(self.rng.integers(base_workers(job), max_workers(job) + 1))
        base = self.plain_place(job, nodes, base_workers(job), set())
        if base is None:
            return False
        for n, g in base.items():
            self.free[n] -= g
        flex: dict[str, int] = {}
        if w > base_workers(job):
            on_inference = any(n in self.inference for n in base)
            got = self.plain_place(job, nodes, w - base_workers(job), set(base) if on_inference else set())
            if got is None:
                got = self.plain_place(job, nodes, w - base_workers(job), set())
            if got is None:
                for n, g in base.items():
                    self.free[n] += g
                return False
            flex = got
            for n, g in flex.items():
                self.free[n] -= g
        shares = dict(base)
        for n, g in flex.items():
            shares[n] = shares.get(n, 0) + g
        self.jobs.append(job)
        self.running.append(worker_allocation(job.name, shares))
        if flex and is_elastic(job):
            self.flexible[job.name] = flex
        return True

    def fill(self, nodes: Sequence[str], occupancy: float, elastic_share: float, prefix: str,
             fungible_only: bool = False, tries: int = 10_000) -> None:
        target = sum(self.free[n] for n in nodes) * (1.0 - occupancy)
        misses = 0
        while sum(self.free[n] for n in nodes) > target and misses < 50 and tries > 0:
            tries -= 1
            elastic = bool(self.rng.random() < elastic_share)
            job = random_job(self.rng, f"{prefix}{len(self.jobs):04d}", elastic)
            job = job.with_progress(float(self.rng.uniform(0.0, 0.8)) * job.total_iterations)
            if fungible_only and not job.fungible:
                job = Job(job.name, job.model, job.requested_gpus, job.total_iterations, min_gpus=job.min_gpus,
                          max_gpus=job.max_gpus, gpus_per_worker=job.gpus_per_worker, fungible=True,
                          checkpointing=job.checkpointing)
            misses = 0 if self.plain_add(job, nodes) else misses + 1


def _filled(cls: type[StateBuilder], seed: int, training: int, servers: int, occupancy: float,
            elastic: float) -> StateBuilder:
    cluster = two_pool_cluster(training, servers)
    inf = [inference_name(i) for i in range(servers)]
    b = cls(np.random.default_rng(seed), {n.name: n.num_gpus for n in cluster.nodes}, frozenset(inf))
    b.fill([training_name(i) for i in range(training)], occupancy, elastic, "t")
    b.fill(inf, occupancy, elastic, "f", fungible_only=True)
    return b


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("training,servers,occupancy,elastic", [(16, 8, 0.7, 0.3), (3, 5, 0.95, 0.8),
                                                                (40, 20, 0.5, 0.5), (1, 1, 1.0, 1.0)])
def test_the_indexed_filler_draws_what_the_plain_scan_drew(seed: int, training: int, servers: int,
                                                            occupancy: float, elastic: float) -> None:
    new = _filled(StateBuilder, seed, training, servers, occupancy, elastic)
    old = _filled(PlainBuilder, seed, training, servers, occupancy, elastic)
    assert new.jobs == old.jobs
    assert new.running == old.running
    assert new.flexible == old.flexible
    assert new.free == old.free
    assert new.rng.random() == old.rng.random()  # the same draws, to the last


def test_a_pool_index_follows_the_free_gpus() -> None:
    b = _filled(StateBuilder, 3, 12, 6, 0.8, 0.4)
    for index in b.pools.values():
        assert index.total == sum(b.free[n] for n in index.nodes)
        for t, positions in index.at_least.items():
            assert positions == [i for i, n in enumerate(index.nodes) if b.free[n] >= t]


def test_a_pool_mixing_inference_and_training_servers_is_refused() -> None:
    b = StateBuilder(np.random.default_rng(0), {"a": 8, "b": 8}, frozenset({"b"}))
    with pytest.raises(ValueError, match="not both"):
        b.pool(["a", "b"])


def test_generation_is_near_linear() -> None:
    """6,000 queued jobs on the benchmark's scaled cluster (3,200 training, 1,600 inference servers): about
    0.8 s here (the plain scan: over 20 s, quadratic in the servers)."""
    t = time.perf_counter()
    p = scaled_round("lyra", 6000, 0)
    assert time.perf_counter() - t < 5.0
    assert len(p.cluster.nodes) == 4800 and len(p.running) > 3000


"""Random but realistic Lyra cluster states, shared by the generators of the three Lyra kinds.

Job mix after the thesis' Basic scenario (Sec. 3.2, 3.7.1): workers of 1, 2 or 4 GPUs (Fig. 3.3: 2
per worker container), inelastic jobs of 1-8 workers, elastic jobs (``elastic`` of them, fungible, from
ResNet/VGG/BERT/GNMT families) with ``w_min`` of 1-4 (their request) and ``w_max`` 2-4 times that,
21% of inelastic jobs fungible, 20% checkpointing; work log-normal around an hour on the largest
demand. Running jobs
are placed worker by worker, staying on their servers with probability 0.7 (so large and some small
jobs span servers, the structure reclaiming is about); an elastic job on inference servers has its
flexible workers on servers apart from its base workers (Sec. 3.5.3).
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from optsched.core.allocation import Allocation
from optsched.core.checks import require_int, require_number, require_seed
from optsched.core.errors import ValidationError
from optsched.core.hardware import Cluster
from optsched.core.job import Job
from optsched.rounds.lyra.cluster import inference_name, training_name, two_pool_cluster, worker_allocation
from optsched.rounds.lyra.jobs import base_workers, is_elastic, max_workers
from optsched.rounds.lyra.problem import INFERENCE_FACTOR

ELASTIC_MODELS = ("resnet50", "vgg16", "bert", "gnmt16")
INELASTIC_MODELS = ("cnn", "lstm", "transformer", "gan")
#: fraction of inelastic jobs that are fungible (Sec. 3.2.1)
FUNGIBLE_SHARE = 0.21
CHECKPOINT_SHARE = 0.2
#: probability that a worker goes to a server its job already uses
LOCALITY = 0.7


def random_job(rng: np.random.Generator, name: str, elastic: bool, submit_time: float = 0.0) -> Job:
    """One job of the module's mix."""
    gpw = int(rng.choice([1, 2, 4], p=[0.3, 0.5, 0.2]))
    hours = min(max(float(rng.lognormal(0.0, 1.0)), 0.05), 48.0)
    if elastic:
        w_min = int(rng.choice([1, 2, 4], p=[0.3, 0.5, 0.2]))
        w_max = min(w_min * int(rng.choice([2, 3, 4])), max(w_min + 1, 32 // gpw))
        work = int(max(1, round(hours * 3600 * w_max * gpw)))
        return Job(name, str(rng.choice(ELASTIC_MODELS)), w_min * gpw, work, submit_time=submit_time,
                   min_gpus=w_min * gpw, max_gpus=w_max * gpw, gpus_per_worker=gpw, fungible=True,
                   checkpointing=bool(rng.random() < CHECKPOINT_SHARE))
    workers = int(rng.choice([1, 1, 2, 2, 4, 8]))
    workers = max(1, min(workers, 32 // gpw))
    work = int(max(1, round(hours * 3600 * workers * gpw)))
    return Job(name, str(rng.choice(INELASTIC_MODELS)), workers * gpw, work, submit_time=submit_time,
               gpus_per_worker=gpw, fungible=bool(rng.random() < FUNGIBLE_SHARE),
               checkpointing=bool(rng.random() < CHECKPOINT_SHARE))


class PoolIndex:
    """The free GPUs of one pool of :class:`StateBuilder` (a sequence of nodes, all inference or all training
    servers), indexed so that a worker's candidate nodes are counted and drawn without scanning the pool:
    ``at_least[t]`` lists, in pool order, the positions of the nodes with at least ``t`` free GPUs
    (``t = 1 .. top``, ``top`` the most GPUs a node of the pool has), and ``total`` is their sum."""

    def __init__(self, nodes: Sequence[str], free: Mapping[str, int], inference: bool) -> None:
        self.nodes = tuple(nodes)
        self.inference = inference
        self.pos = {n: i for i, n in enumerate(self.nodes)}
        self.top = max((free[n] for n in self.nodes), default=0)
        self.at_least = {t: [i for i, n in enumerate(self.nodes) if free[n] >= t] for t in range(1, self.top + 1)}
        self.total = sum(free[n] for n in self.nodes)

    def update(self, node: str, old: int, new: int) -> None:
        """``node``'s free GPUs went from ``old`` to ``new``."""
        i = self.pos[node]
        for t in range(min(old, new) + 1, min(max(old, new), self.top) + 1):
            lst = self.at_least[t]
            k = bisect.bisect_left(lst, i)
            if new > old:
                lst.insert(k, i)
            else:
                del lst[k]
        self.total += new - old

    def holding(self, g: int) -> list[int]:
        """Positions of the nodes with at least ``g`` free GPUs, in pool order."""
        return self.at_least.get(g, []) if g >= 1 else list(range(len(self.nodes)))


@dataclass
class StateBuilder:
    """Fills servers with running jobs (module docstring). ``free``: GPUs left per node (change it only
    through the builder: its pool indices follow it)."""

    rng: np.random.Generator
    free: dict[str, int]
    inference: frozenset[str]
    factor: float = INFERENCE_FACTOR
    jobs: list[Job] = field(default_factory=list)
    running: list[Allocation] = field(default_factory=list)
    flexible: dict[str, dict[str, int]] = field(default_factory=dict)
    #: the pool indices made so far, by their node sequence
    pools: dict[tuple[str, ...], PoolIndex] = field(default_factory=dict)

    def worker_gpus(self, job: Job, node: str) -> int:
        return math.ceil(job.gpus_per_worker / self.factor - 1e-9) if node in self.inference else job.gpus_per_worker

    def pool(self, nodes: Sequence[str]) -> PoolIndex:
        """The index of ``nodes`` (made on first use; ``ValueError`` when they mix inference and training)."""
        key = tuple(nodes)
        got = self.pools.get(key)
        if got is None:
            kinds = {n in self.inference for n in key}
            if len(kinds) > 1:
                raise ValueError("a pool of StateBuilder holds inference or training servers, not both")
            got = self.pools[key] = PoolIndex(key, self.free, kinds == {True})
        return got

    def _change(self, node: str, delta: int) -> None:
        old = self.free[node]
        self.free[node] = old + delta
        for index in self.pools.values():
            if node in index.pos:
                index.update(node, old, old + delta)

    def _place(self, job: Job, pool: PoolIndex, count: int, avoid: set[str]) -> dict[str, int] | None:
        """``count`` workers of ``job`` on ``pool`` outside ``avoid``, each on a node with room for it: one the
        job already uses with probability :data:`LOCALITY` when there is one, else one drawn uniformly (the
        draws of a scan over the pool in its order, without the scan: ``tests/rounds/test_lyra_state_index.py``)."""
        g = math.ceil(job.gpus_per_worker / self.factor - 1e-9) if pool.inference else job.gpus_per_worker
        holding = pool.holding(g)
        # nodes of ``holding`` that are no candidates: avoided, or short of room once this job's shares count
        avoided = sorted(pool.pos[n] for n in avoid if n in pool.pos and self.free[n] >= g)
        shares: dict[str, int] = {}
        for _ in range(count):
            out = set(avoided)
            out.update(pool.pos[n] for n, s in shares.items() if self.free[n] >= g > self.free[n] - s)
            if len(holding) <= len(out):
                return None
            mine = sorted(pool.pos[n] for n, s in shares.items() if self.free[n] - s >= g)
            if mine and self.rng.random() < LOCALITY:
                n = pool.nodes[mine[0]]
            else:
                k = int(self.rng.integers(len(holding) - len(out)))
                for skip in sorted(bisect.bisect_left(holding, i) for i in out):
                    if skip > k:
                        break
                    k += 1
                n = pool.nodes[holding[k]]
            shares[n] = shares.get(n, 0) + g
        return shares

    def add_running(self, job: Job, nodes: Sequence[str], workers: int | None = None) -> bool:
        """Place ``job`` with ``workers`` workers (default: random in its range) on ``nodes`` (one pool);
        False (nothing changes) when it does not fit."""
        return self._add(job, self.pool(nodes), workers)

    def _add(self, job: Job, pool: PoolIndex, workers: int | None = None) -> bool:
        w = workers if workers is not None else int(self.rng.integers(base_workers(job), max_workers(job) + 1))
        base = self._place(job, pool, base_workers(job), set())
        if base is None:
            return False
        for n, g in base.items():
            self._change(n, -g)
        flex: dict[str, int] = {}
        extra = w - base_workers(job)
        if extra > 0:
            got = self._place(job, pool, extra, set(base) if pool.inference else set())
            if got is None:
                got = self._place(job, pool, extra, set())
            if got is None:
                for n, g in base.items():
                    self._change(n, g)
                return False
            flex = got
            for n, g in flex.items():
                self._change(n, -g)
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
        """Add running jobs on ``nodes`` until ``occupancy`` of their GPUs are held (or ``tries`` fail)."""
        pool = self.pool(nodes)
        target = pool.total * (1.0 - occupancy)
        misses = 0
        while pool.total > target and misses < 50 and tries > 0:
            tries -= 1
            elastic = bool(self.rng.random() < elastic_share)
            job = random_job(self.rng, f"{prefix}{len(self.jobs):04d}", elastic)
            job = job.with_progress(float(self.rng.uniform(0.0, 0.8)) * job.total_iterations)
            if fungible_only and not job.fungible:
                job = Job(job.name, job.model, job.requested_gpus, job.total_iterations, min_gpus=job.min_gpus,
                          max_gpus=job.max_gpus, gpus_per_worker=job.gpus_per_worker, fungible=True,
                          checkpointing=job.checkpointing)
            misses = 0 if self._add(job, pool) else misses + 1


def lyra_state(seed: int, servers: int, training: int, jobs: int, occupancy: float, elastic: float,
               what: str, load: float | None = None) -> tuple[StateBuilder, tuple[str, ...], Cluster]:
    """The random state of every Lyra generator: ``training`` 8xV100 and ``servers`` on-loan 8xT4 servers
    filled to ``occupancy`` with running jobs (inference servers with fungible ones), then queued jobs
    submitted over an hour appended to ``builder.jobs``: ``jobs`` of them, or, with ``load``, of the
    ``jobs`` drawn those whose base demand still fits ``load`` times the capacity an allocation round
    may hand out (:func:`allocatable_gpus`), in drawing order, renumbered. Returns the builder (jobs,
    running allocations, flexible workers), the inference servers and the cluster; ``what`` names the
    kind in errors.

    ``load`` is the queued base demand over that capacity: below 1 the base demand of every queued job
    fits in total and what is left (with the flexible workers of running jobs) goes to the flexible
    demand, the multiple-choice knapsack of Lyra Sec. 3.5.2 (phase two); far above 1 the queue exceeds
    the cluster and phase one (SJF) alone fills it."""
    require_int(f"gen-round {what}", "servers", servers, 0)
    require_int(f"gen-round {what}", "training", training, 0)
    require_int(f"gen-round {what}", "jobs", jobs, 0)
    if servers + training < 1:
        raise ValidationError(f"gen-round {what}: needs at least one server")
    if not 0.0 <= occupancy <= 1.0 or not 0.0 <= elastic <= 1.0:
        raise ValidationError(f"gen-round {what}: occupancy and elastic must lie in [0, 1]")
    if load is not None:
        require_number(f"gen-round {what}", "load", load, 0.0, strict=True)  # finite: inf would queue every job
    require_seed("lyra_state", seed)
    rng = np.random.default_rng(seed)
    cluster = two_pool_cluster(training, servers)
    inf = tuple(inference_name(i) for i in range(servers))
    builder = StateBuilder(rng, {n.name: n.num_gpus for n in cluster.nodes}, frozenset(inf))
    builder.fill([training_name(i) for i in range(training)], occupancy, elastic, "t")
    builder.fill(list(inf), occupancy, elastic, "f", fungible_only=True)
    budget = math.inf if load is None else load * allocatable_gpus(builder)
    queued = 0
    for i in range(jobs):
        job = random_job(rng, f"q{queued:04d}", bool(rng.random() < elastic), submit_time=float(rng.uniform(0.0, 3600.0)))
        demand = base_workers(job) * job.gpus_per_worker
        if demand > budget:
            continue
        budget -= demand
        builder.jobs.append(job)
        queued += 1
    return builder, inf, cluster


def allocatable_gpus(builder: StateBuilder) -> float:
    """Training GPUs an allocation round of ``builder``'s state may hand out: idle GPUs and those of
    running elastic jobs' flexible workers, inference GPUs times the inference factor (as
    :func:`optsched.rounds.lyra_allocate.capacity.available` counts them, before rounding down)."""
    gpus = {n: g for n, g in builder.free.items()}
    for shares in builder.flexible.values():
        for n, g in shares.items():
            gpus[n] += g
    return float(sum(g * (builder.factor if n in builder.inference else 1.0) for n, g in gpus.items()))


__all__ = ["ELASTIC_MODELS", "INELASTIC_MODELS", "PoolIndex", "StateBuilder", "allocatable_gpus", "lyra_state", "random_job"]

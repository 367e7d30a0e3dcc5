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

import math
from dataclasses import dataclass, field
from typing import Sequence

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
    hours = float(np.clip(rng.lognormal(0.0, 1.0), 0.05, 48.0))
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


@dataclass
class StateBuilder:
    """Fills servers with running jobs (module docstring). ``free``: GPUs left per node."""

    rng: np.random.Generator
    free: dict[str, int]
    inference: frozenset[str]
    factor: float = INFERENCE_FACTOR
    jobs: list[Job] = field(default_factory=list)
    running: list[Allocation] = field(default_factory=list)
    flexible: dict[str, dict[str, int]] = field(default_factory=dict)

    def worker_gpus(self, job: Job, node: str) -> int:
        return math.ceil(job.gpus_per_worker / self.factor - 1e-9) if node in self.inference else job.gpus_per_worker

    def _place(self, job: Job, nodes: Sequence[str], count: int, avoid: set[str]) -> dict[str, int] | None:
        shares: dict[str, int] = {}
        for _ in range(count):
            cand = [n for n in nodes if n not in avoid and self.free[n] - shares.get(n, 0) >= self.worker_gpus(job, n)]
            if not cand:
                return None
            mine = [n for n in cand if n in shares]
            n = mine[0] if mine and self.rng.random() < LOCALITY else cand[int(self.rng.integers(len(cand)))]
            shares[n] = shares.get(n, 0) + self.worker_gpus(job, n)
        return shares

    def add_running(self, job: Job, nodes: Sequence[str], workers: int | None = None) -> bool:
        """Place ``job`` with ``workers`` workers (default: random in its range) on ``nodes`` (one pool);
        False (nothing changes) when it does not fit."""
        w = workers if workers is not None else int(self.rng.integers(base_workers(job), max_workers(job) + 1))
        base = self._place(job, nodes, base_workers(job), set())
        if base is None:
            return False
        for n, g in base.items():
            self.free[n] -= g
        flex: dict[str, int] = {}
        extra = w - base_workers(job)
        if extra > 0:
            on_inference = any(n in self.inference for n in base)
            got = self._place(job, nodes, extra, set(base) if on_inference else set())
            if got is None:
                got = self._place(job, nodes, extra, set())
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
        """Add running jobs on ``nodes`` until ``occupancy`` of their GPUs are held (or ``tries`` fail)."""
        total = sum(self.free[n] for n in nodes)
        target = total * (1.0 - occupancy)
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
            misses = 0 if self.add_running(job, nodes) else misses + 1


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


__all__ = ["ELASTIC_MODELS", "INELASTIC_MODELS", "StateBuilder", "allocatable_gpus", "lyra_state", "random_job"]

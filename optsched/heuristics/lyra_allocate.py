"""Lyra's two-phase allocation and the baselines (thesis Sec. 3.5.2 and 3.7.1), as functions of a
Lyra round.

**Phase one** (:func:`phase_one`): the inelastic workload (inelastic jobs, elastic jobs' base demand)
with all available resources. ``order="sjf"``: "as long as there are idle GPUs and pending jobs, we
schedule job j* with the smallest running time. If the demand of j* exceeds the remaining capacity,
we remove it from the pool and continue" (running time at base demand; ties by submit time, name).
``order="fifo"`` with ``blocking=True`` is the Baseline's FIFO (the queue stops at the first job that
does not fit). Pools (our addition where the thesis counts one normalised capacity): a job runs on one
pool; elastic jobs try the inference pool first, inelastic ones the training pool first (the placement
preferences of Sec. 3.5.3), and only fungible jobs may use the inference pool. Running jobs keep their
pool and base workers.

**Phase two**: the flexible demand of every elastic job with base workers, per pool, as a
multiple-choice knapsack (:mod:`optsched.rounds.lyra_allocate.items`): :func:`mckp_dp` solves it
exactly by a dynamic program over capacities (vectorised per item: O(items x capacity) numpy
operations); :func:`mckp_greedy` is AFS-like ("allocating one more worker to the job with the largest
throughput gain per GPU", Sec. 3.7.1; gain measured as JCT reduction per GPU); :func:`gandiva_scale` is
Gandiva-like (scale out only when no job waits, one worker per job in turn).
"""

from __future__ import annotations

import heapq

from dataclasses import dataclass, field

import numpy as np

from optsched.rounds.lyra.jobs import base_workers, is_elastic, max_workers, running_time
from optsched.rounds.lyra.problem import INFERENCE, TRAINING, LyraRound
from optsched.rounds.lyra_allocate.capacity import available, current_pool
from optsched.rounds.lyra_allocate.items import Items

ORDERS = ("sjf", "fifo")


@dataclass
class PhaseOne:
    """Base workers and pool of every job that runs, what is left per pool and who waits."""

    base: dict[str, int] = field(default_factory=dict)
    pool: dict[str, str] = field(default_factory=dict)
    left: dict[str, int] = field(default_factory=dict)
    waiting: list[str] = field(default_factory=list)

    def elastic_in(self, problem: LyraRound, pool: str) -> list[str]:
        """Elastic jobs with base workers in ``pool`` (round order)."""
        return [j.name for j in problem.jobs if self.pool.get(j.name) == pool and is_elastic(j)]


def phase_one(problem: LyraRound, order: str = "sjf", blocking: bool = False,
              whole_request: bool = False) -> PhaseOne:
    """Phase one (module docstring); ``whole_request``: queued jobs get their requested GPUs (the
    Baseline, which does not scale) instead of their base demand."""
    if order not in ORDERS:
        raise ValueError(f"unknown order {order!r}; known: {', '.join(ORDERS)}")
    out = PhaseOne(left=available(problem))
    queued = []
    for j in problem.jobs:
        pool = current_pool(problem, j.name)
        if pool is None:
            queued.append(j)
            continue
        out.pool[j.name] = pool
        out.base[j.name] = base_workers(j) if is_elastic(j) and problem.flexible_of(j.name) \
            else problem.workers_of(j.name)
    if order == "sjf":
        queued.sort(key=lambda j: (running_time(j, base_workers(j), problem.scaling), j.submit_time, j.name))
    else:
        queued.sort(key=lambda j: (j.submit_time, j.name))
    for j in queued:
        workers = base_workers(j)
        if whole_request:
            workers = min(max(j.requested_gpus // j.gpus_per_worker, base_workers(j)), max_workers(j))
        demand = workers * j.gpus_per_worker
        prefs = (INFERENCE, TRAINING) if is_elastic(j) else (TRAINING, INFERENCE)
        pool = next((p for p in prefs if (p == TRAINING or j.fungible) and out.left[p] >= demand), None)
        if pool is None:
            out.waiting.append(j.name)
            if blocking:
                out.waiting.extend(q.name for q in queued[queued.index(j) + 1:])
                break
            continue
        out.base[j.name], out.pool[j.name] = workers, pool
        out.left[pool] -= demand
    return out


def mckp_dp(items: Items, capacity: int) -> tuple[dict[str, int], float]:
    """The exact multiple-choice knapsack by dynamic programming over capacities 0..``capacity``:
    ``best[c]`` after each group is the most value within ``c`` GPUs; one pass per item of the group,
    vectorised over ``c``; choices kept per group for the reconstruction. Returns the workers added
    per job and the total value."""
    capacity = max(0, int(capacity))
    best = np.zeros(capacity + 1)
    choice = np.zeros((len(items.jobs), capacity + 1), dtype=np.int64)   # item index + 1, 0: none
    for g in range(len(items.jobs)):
        idx = np.flatnonzero(items.group == g)
        new = best.copy()
        pick = np.zeros(capacity + 1, dtype=np.int64)
        for i in idx:
            w = int(items.weight[i])
            if w > capacity:
                continue
            cand = best[:capacity + 1 - w] + items.value[i]
            better = cand > new[w:] + 1e-12
            new[w:] = np.where(better, cand, new[w:])
            pick[w:] = np.where(better, i + 1, pick[w:])
        best = new
        choice[g] = pick
    extra: dict[str, int] = {}
    c = capacity
    for g in range(len(items.jobs) - 1, -1, -1):
        i = int(choice[g, c]) - 1
        if i >= 0:
            extra[items.jobs[g]] = int(items.extra[i])
            c -= int(items.weight[i])
    return extra, float(best[capacity])


def mckp_greedy(items: Items, capacity: int) -> tuple[dict[str, int], float]:
    """AFS-like (module docstring): one worker at a time to the job whose next worker brings the most
    JCT reduction per GPU, while it fits (ties: the job listed first). A heap of each job's next worker:
    O(items + workers given x log jobs); a job whose next worker does not fit never fits again (its
    workers all have its GPUs per worker, and what is left only shrinks)."""
    item_of: dict[tuple[int, int], int] = {(int(g), int(k)): i for i, (g, k) in
                                           enumerate(zip(items.group.tolist(), items.extra.tolist()))}
    values = items.value.tolist()
    weights = items.weight.tolist()

    def offer(g: int, k: int) -> tuple[float, int, int, float, int] | None:
        """The heap entry of job ``g``'s ``k``-th extra worker: (-gain per GPU, job, k, gain, GPUs)."""
        i = item_of.get((g, k))
        if i is None:
            return None
        prev = item_of.get((g, k - 1))
        gain = float(values[i] - (values[prev] if prev is not None else 0.0))
        step = int(weights[i]) // k
        return (-gain / step, g, k, gain, step)

    heap = [e for e in (offer(g, 1) for g in range(len(items.jobs))) if e is not None and e[0] < -1e-12]
    heapq.heapify(heap)
    extra = {job: 0 for job in items.jobs}
    left = int(capacity)
    value = 0.0
    while heap:
        _, g, k, gain, step = heapq.heappop(heap)
        if step > left:
            continue
        extra[items.jobs[g]] = k
        left -= step
        value += gain
        nxt = offer(g, k + 1)
        if nxt is not None and nxt[0] < -1e-12:
            heapq.heappush(heap, nxt)
    return {j: k for j, k in extra.items() if k}, value


def gandiva_scale(problem: LyraRound, first: PhaseOne, items: Items, capacity: int) -> tuple[dict[str, int], float]:
    """Gandiva-like (module docstring): nothing while jobs wait; else one worker per elastic job in turn
    (submit order) up to ``w_max`` while it fits."""
    if first.waiting:
        return {}, 0.0
    order = sorted(items.jobs, key=lambda n: (problem.job(n).submit_time, n))
    extra = {n: 0 for n in order}
    left = int(capacity)
    grew = True
    while grew:
        grew = False
        for n in order:
            job = problem.job(n)
            if base_workers(job) + extra[n] < max_workers(job) and job.gpus_per_worker <= left:
                extra[n] += 1
                left -= job.gpus_per_worker
                grew = True
    chosen = {n: k for n, k in extra.items() if k}
    return chosen, items.value_of(chosen)


__all__ = ["ORDERS", "PhaseOne", "gandiva_scale", "mckp_dp", "mckp_greedy", "phase_one"]

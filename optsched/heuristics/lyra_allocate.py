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
import math

from dataclasses import dataclass, field

import numpy as np

from optsched.core.deadline import Deadline
from optsched.core.job import Job
from optsched.rounds.lyra.jobs import base_workers, is_elastic, max_workers
from optsched.rounds.lyra.prediction import RuntimePredictor
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


#: groups :func:`mckp_dp` solves between two looks at its deadline (about 50 ms on a 100,000-job round)
DP_CHECK_GROUPS = 64


def _base_time(job: Job, predictor: RuntimePredictor | None = None) -> float:
    """``running_time(job, base_workers(job))`` (either scaling: no worker beyond the base) with the same
    operations, without the calls: SJF's sort key of every queued job; on ``predictor``'s remaining work
    when given (:mod:`optsched.rounds.lyra.prediction`)."""
    workers = base_workers(job)
    rate = job.gpus_per_worker * (workers + 0.0) if workers > 0 else 0.0
    left = job.remaining_iterations if predictor is None else predictor.remaining(job)
    return left / rate if rate > 0 else math.inf


def running_base(problem: LyraRound, job: Job) -> int:
    """The workers running ``job`` has before phase two: its base demand when it is elastic and holds flexible
    workers (they are scaled again), else every worker it holds."""
    return base_workers(job) if is_elastic(job) and problem.flexible_of(job.name) else problem.workers_of(job.name)


def phase_one(problem: LyraRound, order: str = "sjf", blocking: bool = False,
              whole_request: bool = False, predictor: RuntimePredictor | None = None) -> PhaseOne:
    """Phase one (module docstring); ``whole_request``: queued jobs get their requested GPUs (the
    Baseline, which does not scale) instead of their base demand; ``predictor``: SJF sorts by predicted
    running times (Sec. 3.5.2, Table 3.9; FIFO order uses none)."""
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
        out.base[j.name] = running_base(problem, j)
    if order == "sjf":
        queued.sort(key=lambda j: (_base_time(j, predictor), j.submit_time, j.name))
    else:
        queued.sort(key=lambda j: (j.submit_time, j.name))
    left = out.left
    for j in queued:
        workers = base = base_workers(j)
        if whole_request:
            workers = min(max(j.requested_gpus // j.gpus_per_worker, base), max_workers(j))
        demand = workers * j.gpus_per_worker
        if is_elastic(j):
            pool = INFERENCE if j.fungible and left[INFERENCE] >= demand else (
                TRAINING if left[TRAINING] >= demand else None)
        else:
            pool = TRAINING if left[TRAINING] >= demand else (
                INFERENCE if j.fungible and left[INFERENCE] >= demand else None)
        if pool is None:
            out.waiting.append(j.name)
            if blocking:
                out.waiting.extend(q.name for q in queued[queued.index(j) + 1:])
                break
            continue
        out.base[j.name], out.pool[j.name] = workers, pool
        out.left[pool] -= demand
    return out


def mckp_dp(items: Items, capacity: int, deadline: Deadline | None = None,
            reserve: float = 0.0) -> tuple[dict[str, int], float] | None:
    """The exact multiple-choice knapsack by dynamic programming over capacities 0..``capacity``:
    ``best[c]`` after each group is the most value within ``c`` GPUs; one pass per item of the group,
    vectorised over ``c``; choices kept per group for the reconstruction. Returns the workers added
    per job and the total value; None when ``deadline`` has less than ``reserve`` seconds left before
    the last group is done (checked after every :data:`DP_CHECK_GROUPS` groups: a small knapsack always
    finishes).

    Work saved without changing an answer (``tests/heuristics/test_lyra_mckp_dp.py`` checks it against
    the plain program): after group ``g`` every capacity from ``W_g``, the sum of the heaviest items of
    groups 0..g, holds them all, so ``best[c]`` and the group's choice are those at ``W_g`` (the same
    comparisons of the same numbers); the pass of group ``g`` covers ``c <= min(capacity, W_g)`` only and
    the reconstruction reads the choice at ``min(c, W_g)``; a capacity past ``W`` of the last group is that
    one column (:func:`_mckp_every_item_fits`). Choices are kept as the item's place in its
    group (the smallest integer type that holds it), one array per group of the capacities it covers."""
    capacity = max(0, int(capacity))
    n_groups = len(items.jobs)
    order = np.argsort(items.group, kind="stable")
    cuts = np.searchsorted(items.group[order], np.arange(n_groups + 1))
    members = [order[cuts[g]:cuts[g + 1]] for g in range(n_groups)]
    widest = max((m.size for m in members), default=0)
    dtype = np.min_scalar_type(widest + 1)
    weights = items.weight.astype(np.int64)
    if capacity >= sum(int(weights[m].max()) for m in members if m.size):
        return _mckp_every_item_fits(items, members, weights)
    best = np.zeros(capacity + 1)
    cand = np.empty(capacity + 1)
    thr = np.empty(capacity + 1)
    better = np.empty(capacity + 1, dtype=bool)
    choice: list[np.ndarray] = []
    covered = 0      # best[c] is exact for c <= covered; beyond it, best[covered] (every item so far fits)
    heaviest = 0     # W_g
    for g, idx in enumerate(members):
        if deadline is not None and g and not g % DP_CHECK_GROUPS and deadline.expired(reserve):
            return None
        heaviest += int(weights[idx].max()) if idx.size else 0
        top = min(capacity, heaviest)
        if top > covered:
            best[covered + 1:top + 1] = best[covered]
            covered = top
        new = best[:top + 1].copy()
        pick = np.zeros(top + 1, dtype=dtype)
        for local, i in enumerate(idx.tolist()):
            w = int(weights[i])
            if w > top:
                continue
            n = top + 1 - w
            c, t, b = cand[:n], thr[:n], better[:n]
            np.add(best[:n], items.value[i], out=c)
            np.add(new[w:], 1e-12, out=t)
            np.greater(c, t, out=b)
            np.copyto(new[w:], c, where=b)
            np.copyto(pick[w:], local + 1, where=b)
        best[:top + 1] = new
        choice.append(pick)
    if covered < capacity:
        best[covered + 1:] = best[covered]
    extra: dict[str, int] = {}
    c = capacity
    for g in range(n_groups - 1, -1, -1):
        pick = choice[g]
        local = int(pick[min(c, pick.size - 1)]) - 1
        if local >= 0:
            i = int(members[g][local])
            extra[items.jobs[g]] = int(items.extra[i])
            c -= int(weights[i])
    return extra, float(best[capacity])


def _mckp_every_item_fits(items: Items, members: list[np.ndarray],
                          weights: np.ndarray) -> tuple[dict[str, int], float]:
    """:func:`mckp_dp` when the capacity holds the heaviest item of every group: every capacity it reads is
    past ``W_g``, so it is one column of the program, the same comparisons of the same numbers per item."""
    extra: dict[str, int] = {}
    total = 0.0
    values = items.value.tolist()
    for g, idx in enumerate(members):
        got, chosen = total, -1
        for i in idx.tolist():
            cand = total + values[i]
            if cand > got + 1e-12:
                got, chosen = cand, i
        if chosen >= 0:
            extra[items.jobs[g]] = int(items.extra[chosen])
        total = got
    return dict(reversed(list(extra.items()))), total


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


__all__ = ["DP_CHECK_GROUPS", "ORDERS", "PhaseOne", "gandiva_scale", "mckp_dp", "mckp_greedy", "phase_one",
           "running_base"]

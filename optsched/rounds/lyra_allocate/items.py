"""Phase two of Lyra's allocation as a multiple-choice knapsack (thesis Sec. 3.5.2, Fig. 3.6).

An elastic job ``j`` with base demand allocated is a group of ``w_max - w_min`` items; item ``k``
(``k = 1 .. w_max - w_min``) adds ``k`` flexible workers, weighs ``k x gpus_per_worker`` training GPUs
and is worth its JCT reduction "over the job's maximum running time": ``T_j(w_min) - T_j(w_min + k)``,
with ``T_j`` the running time of the job's remaining work (:func:`optsched.rounds.lyra.jobs.running_time`,
linear or sub-linear scaling). (We read "over" as "relative to", a difference in seconds; as a ratio
the two jobs of Table 3.4 would tie and the counter-example of Table 3.4 would not be resolved.) At most
one item per group; total weight within the pool's capacity. Arrays are built vectorised per job.

With a :class:`~optsched.rounds.lyra.prediction.RuntimePredictor` the running times are the predicted
ones (Sec. 3.5.2: running times "can be predicted with profiling and ML methods"; Table 3.9): the
remaining work of each job is :meth:`~optsched.rounds.lyra.prediction.RuntimePredictor.remaining`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

import numpy as np

from optsched.rounds.lyra.jobs import SUBLINEAR_LOSS, base_workers, is_elastic, max_workers, work_rate
from optsched.rounds.lyra.prediction import RuntimePredictor
from optsched.rounds.lyra.problem import LyraRound


@dataclass(frozen=True)
class Items:
    """The items of one knapsack: per item its ``group`` (index into ``jobs``), the workers it adds
    (``extra``), ``weight`` (training GPUs) and ``value`` (seconds)."""

    jobs: tuple[str, ...]
    group: np.ndarray
    extra: np.ndarray
    weight: np.ndarray
    value: np.ndarray

    @property
    def size(self) -> int:
        return int(self.group.size)

    def value_of(self, extra: dict[str, int]) -> float:
        """Total value of giving each job ``extra[job]`` flexible workers (0 or absent: none)."""
        total = 0.0
        if not any(extra.values()):
            return total
        first: dict[tuple[int, int], float] = {}   # (group, workers added) -> value of its first item
        for key, v in zip(zip(self.group.tolist(), self.extra.tolist()), self.value.tolist()):
            first.setdefault(key, v)
        for g, job in enumerate(self.jobs):
            k = extra.get(job, 0)
            if k:
                total += first[(g, k)]
        return total


def flexible_items(problem: LyraRound, base: Mapping[str, int], predictor: RuntimePredictor | None = None) -> Items:
    """The items of the elastic jobs among ``base`` (job -> workers it has before phase two: ``w_min``,
    or more for a running job whose workers all count as base; module docstring). The running times of
    all items are computed at once, with the operations of :func:`~optsched.rounds.lyra.jobs.running_time`
    in its order (the same floats); on the remaining work ``predictor`` believes when given (module docstring)."""
    names, t0s, starts, bases, tops, gpws, remaining = [], [], [], [], [], [], []
    for name, start in base.items():
        job = problem.job(name)
        if not is_elastic(job) or start >= max_workers(job):
            continue
        base_w, top = max(start, base_workers(job)), max_workers(job)
        left = job.remaining_iterations if predictor is None else predictor.remaining(job)
        rate0 = work_rate(job, base_w, problem.scaling)
        names.append(name)
        t0s.append(left / rate0 if rate0 > 0 else math.inf)
        starts.append(base_w)
        bases.append(base_workers(job))
        tops.append(top - base_w)
        gpws.append(job.gpus_per_worker)
        remaining.append(left)
    if not names:
        empty = np.zeros(0, dtype=np.int64)
        return Items((), empty, empty, empty, np.zeros(0))
    sizes = np.array(tops, dtype=np.int64)
    group = np.repeat(np.arange(len(names)), sizes)
    first = np.cumsum(sizes) - sizes
    ks = np.arange(group.size, dtype=np.int64) - first[group] + 1
    workers = np.array(starts, dtype=np.int64)[group] + ks
    own = np.array(bases, dtype=np.int64)[group]
    gpw = np.array(gpws, dtype=np.int64)[group]
    eff = 1.0 if problem.scaling == "linear" else 1.0 - SUBLINEAR_LOSS
    rate = gpw * (np.minimum(workers, own) + eff * np.maximum(workers - own, 0))
    t = np.array(remaining)[group] / rate
    return Items(tuple(names), group, ks, ks * gpw, np.array(t0s)[group] - t)


def placed_value(problem: LyraRound, base: Mapping[str, int], held: Mapping[str, int],
                 predictor: RuntimePredictor | None = None) -> float:
    """The value (module docstring) of the flexible workers a placement gives the jobs of ``base`` (job ->
    workers before phase two, as for :func:`flexible_items`): job ``j`` holding ``held[j]`` workers (0 or
    absent: it does not run) has the item of ``held[j]`` minus its start workers, none when it holds no
    more than its start. What the ``lyra`` kind's decision is worth: the knapsack's value of what is
    placed, never more than the knapsack's value of what was allocated (on ``predictor``'s running times
    when given: the worth the scheduler believes)."""
    items = flexible_items(problem, base, predictor)
    extra: dict[str, int] = {}
    for name in items.jobs:
        job = problem.job(name)
        k = min(held.get(name, 0), max_workers(job)) - max(base[name], base_workers(job))
        if k > 0:
            extra[name] = k
    return items.value_of(extra)


__all__ = ["Items", "flexible_items", "placed_value"]

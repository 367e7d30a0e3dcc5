"""Job completion times of an initial allocation of elastic jobs on a fixed number of workers, the
measure of the thesis' examples (Tables 3.3-3.4): jobs start together at time 0 with the given workers;
"once the first job finishes, the other is immediately allocated more resources as much as possible"
(Table 3.3) — freed workers go to the unfinished jobs with the least remaining work first, each up to
``w_max``. Exact event arithmetic (no time steps)."""

from __future__ import annotations

from typing import Mapping, Sequence

from optsched.core.errors import ValidationError
from optsched.core.job import Job
from optsched.rounds.lyra.jobs import max_workers, work_rate


def completion_times(jobs: Sequence[Job], workers: Mapping[str, int], capacity: int,
                     scaling: str = "linear") -> dict[str, float]:
    """Completion time of every job of ``jobs`` started with ``workers`` on ``capacity`` workers."""
    if sum(workers[j.name] for j in jobs) > capacity:
        raise ValidationError(f"the initial allocation uses {sum(workers.values())} workers, more than {capacity}")
    left = {j.name: float(j.remaining_iterations) for j in jobs}
    w = {j.name: int(workers[j.name]) for j in jobs}
    byname = {j.name: j for j in jobs}
    now, done = 0.0, {}
    while left:
        times = {n: left[n] / work_rate(byname[n], w[n], scaling) for n in left if w[n] > 0}
        if not times:
            raise ValidationError(f"jobs {sorted(left)} never run")
        step = min(times.values())
        now += step
        for n in list(left):
            left[n] -= step * work_rate(byname[n], w[n], scaling) if w[n] > 0 else 0.0
            if n in times and times[n] <= step * (1 + 1e-12):
                done[n] = now
                del left[n]
                w[n] = 0
        free = capacity - sum(w[n] for n in left)
        for n in sorted(left, key=lambda n: (left[n], n)):
            add = min(free, max_workers(byname[n]) - w[n])
            w[n] += add
            free -= add
    return done


def average_jct(jobs: Sequence[Job], workers: Mapping[str, int], capacity: int, scaling: str = "linear") -> float:
    """Mean of :func:`completion_times`."""
    t = completion_times(jobs, workers, capacity, scaling)
    return sum(t.values()) / len(t)


__all__ = ["average_jct", "completion_times"]

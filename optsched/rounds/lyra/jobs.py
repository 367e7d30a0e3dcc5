"""Lyra's job vocabulary as pure functions of a :class:`~optsched.core.job.Job` (thesis Sec. 3.2.2,
3.5, 3.7.1): inelastic and elastic jobs, base and flexible demand in workers, and how fast a job runs
on a number of workers.

Conventions (checked in ``tests/rounds/test_lyra_vocabulary.py``):

* **Workers.** A worker holds ``job.gpus_per_worker`` training GPUs. A job is **elastic** when it has
  an elastic range, ``max_gpus > min_gpus``; then ``w_min = min_gpus / gpus_per_worker`` and
  ``w_max = max_gpus / gpus_per_worker`` (its **base demand** is ``w_min`` workers, its **flexible
  demand** ``w_max - w_min``). An inelastic job needs exactly ``requested_gpus / gpus_per_worker``
  workers.
* **Work.** ``total_iterations`` counts training-GPU-seconds: a job that ran ``T`` seconds on ``G``
  GPUs in a trace has ``T x G`` of work (Sec. 3.7.1: running time inversely proportional to the
  resources, "linear scaling", Sec. 3.5).
* **Scaling** (Sec. 3.7.2, "Impact of imperfect scaling"). ``"linear"``: ``w`` workers do
  ``w x gpus_per_worker`` work per second. ``"sublinear"``: every worker added beyond the base demand
  brings :data:`SUBLINEAR_LOSS` (20%) less than a base worker, ``gpus_per_worker x (w_min + 0.8 x
  (w - w_min))``: the thesis' "we add a 20% loss to the throughput brought by this worker", read as a
  fixed loss per added worker (not compounding).
"""

from __future__ import annotations

import math

from optsched.core.errors import ValidationError
from optsched.core.job import Job

#: the scaling laws a Lyra round may assume (module docstring)
SCALINGS = ("linear", "sublinear")
#: throughput lost by each worker added beyond the base demand under ``"sublinear"`` scaling
SUBLINEAR_LOSS = 0.2


def is_elastic(job: Job) -> bool:
    """Whether ``job`` has an elastic range (``max_gpus > min_gpus``)."""
    return job.max_gpus is not None and job.max_gpus > job.min_gpus


def base_workers(job: Job) -> int:
    """Workers of the base demand: ``w_min`` of an elastic job, the whole request of an inelastic one."""
    gpw = job.gpus_per_worker
    return job.min_gpus // gpw if is_elastic(job) else job.requested_gpus // gpw


def max_workers(job: Job) -> int:
    """Most workers ``job`` can use: ``w_max`` of an elastic job, the request of an inelastic one."""
    return job.max_gpus // job.gpus_per_worker if is_elastic(job) and job.max_gpus is not None \
        else base_workers(job)


def check_workers(job: Job) -> None:
    """``ValidationError`` naming ``job`` when its GPU counts are not whole workers."""
    gpw = job.gpus_per_worker
    fields = ("min_gpus", "max_gpus") if is_elastic(job) else ("requested_gpus",)
    for f in fields:
        value = getattr(job, f)
        if value % gpw:
            raise ValidationError(f"job {job.name!r}: {f} {value} is not a whole number of workers of "
                                  f"{gpw} GPUs (gpus_per_worker)")


def work_rate(job: Job, workers: float, scaling: str = "linear") -> float:
    """Training-GPU-seconds of work per second on ``workers`` workers (module docstring, "Scaling")."""
    if scaling not in SCALINGS:
        raise ValidationError(f"unknown scaling {scaling!r}; known: {', '.join(SCALINGS)}")
    if workers <= 0:
        return 0.0
    base = base_workers(job)
    extra = max(0.0, workers - base)
    eff = 1.0 if scaling == "linear" else 1.0 - SUBLINEAR_LOSS
    return job.gpus_per_worker * (min(workers, base) + eff * extra)


def running_time(job: Job, workers: float, scaling: str = "linear") -> float:
    """Seconds ``job`` needs for its remaining work on ``workers`` workers (inf on none)."""
    rate = work_rate(job, workers, scaling)
    return job.remaining_iterations / rate if rate > 0 else math.inf


__all__ = ["SCALINGS", "SUBLINEAR_LOSS", "base_workers", "check_workers", "is_elastic", "max_workers",
           "running_time", "work_rate"]

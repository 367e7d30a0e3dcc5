"""The built-in synthetic workload: the default trace of ``optsched simulate`` on a machine without
any data (DESIGN.md, "Data": a synthetic trace generator calibrated to published statistics).

Jobs are drawn the way Rubick Sec. 7.3 builds its trace from the Microsoft Philly trace (Jeon et al.,
"Analysis of Large-Scale Multi-Tenant GPU Clusters for DNN Training Workloads", USENIX ATC'19): a
GPU count and a duration per job from the Philly distributions, a model uniformly at random from
the seven catalogue models, the nearest feasible GPU count with the GPU-hours kept, a random (or the
best) feasible initial plan and the duration turned into iterations -- the last three steps by
:func:`optsched.sim.traces.assign.assign_jobs`, the function the Philly and ITP loaders use.

Calibration (summary numbers only; computed once from the public Philly job log,
``philly.csv``, 82,247 jobs, 2017, CC BY 4.0; no row is copied):

* :data:`PHILLY_GPU_COUNTS`: how many jobs asked for each GPU count (93.2% ask for one GPU, 2.2% two,
  2.3% four, 2.0% eight, 0.3% more).
* :data:`PHILLY_DURATION_QUANTILES`: quantiles of the run time in seconds, separately for 1-GPU and
  multi-GPU jobs, because Jeon et al. observe (and the log shows) that multi-GPU jobs run much longer
  (median 1,117 s vs 4,582 s; 90th percentile 2.4 h vs 58 h). A duration is drawn by inverse
  transform sampling, log-linear between the tabulated quantiles.

Choices where the papers are silent:

* **Duration range.** Durations are clipped to ``[min_duration, max_duration]``, default one minute
  to seven days (:data:`DEFAULT_MIN_DURATION_S`, :data:`DEFAULT_MAX_DURATION_S`): about 9% of Philly
  jobs end within a minute (mostly failed starts, which a scheduling study does not want as work)
  and 0.3% run longer than a week (up to 53 days, which would dominate the offered load of a few
  hundred jobs and the simulated span).
* **GPU counts and durations are drawn independently given the 1-GPU / multi-GPU class**; counts
  above the cluster or infeasible for the drawn model are replaced by :func:`assign_jobs` (GPU-hours
  kept).
* **Arrivals and load.** Submit times follow a Poisson process starting at 0 (exponential gaps of
  mean ``1/rate``). With ``W = sum_i gpus_i * duration_i`` the offered GPU-seconds of the drawn
  (clipped) jobs and ``G`` the GPUs of the type the jobs run on (the cluster's GPUs on a one-type
  cluster), the rate is ``rate = load * G * num_jobs / W``, so that over the arrival window of
  expected length ``span = num_jobs / rate`` (the last arrival plus one mean gap) the offered load
  ``W / (G * span)`` equals ``load``. The realised load differs from it by the randomness of the
  arrival times only (relative standard deviation ``1/sqrt(num_jobs)``, 7% for 200 jobs).
* **Guarantees.** Each job is guaranteed with probability ``guaranteed_fraction``; tenants and
  quotas then follow :func:`optsched.sim.traces.trace.tenancy` (tenant A = guaranteed jobs with the
  cluster's GPUs as quota, tenant B = best-effort, as Rubick's MT trace).
* **Determinism.** One ``numpy.random.default_rng(seed)`` draws, in this order: the GPU counts, the
  duration quantile levels, the guarantee flags, the arrival gaps, then the models and plans
  (:func:`assign_jobs`). Jobs are named ``syn-<index>`` in arrival order (zero-padded).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from optsched.core.checks import require_int, require_number, require_seed
from optsched.core.errors import ValidationError
from optsched.core.hardware import Cluster
from optsched.core.job import DEFAULT_CPUS_PER_GPU
from optsched.core.pool import gpu_pool
from optsched.sim.traces.assign import IterationTimeFn, RawJob, assign_jobs, default_iteration_time
from optsched.sim.traces.trace import TenantFn, Trace, tenancy

#: number of Philly jobs (``philly.csv``) per requested GPU count
PHILLY_GPU_COUNTS: dict[int, int] = {1: 76627, 2: 1818, 4: 1870, 8: 1643, 12: 7, 16: 199, 24: 7, 32: 67, 64: 6,
                                     128: 3}

#: quantile levels of :data:`PHILLY_DURATION_QUANTILES`
DURATION_LEVELS: tuple[float, ...] = (0.0, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 1.0)
#: run-time quantiles (seconds) of Philly's 1-GPU jobs (``"single"``, 76,627 jobs) and multi-GPU jobs
#: (``"multi"``, 5,620 jobs) at :data:`DURATION_LEVELS`
PHILLY_DURATION_QUANTILES: dict[str, tuple[float, ...]] = {
    "single": (1, 52, 62, 76, 215, 600, 1117, 1728, 2464, 3754, 8512, 19137, 135399, 3256045),
    "multi": (1, 13, 17, 25, 110, 539, 4582, 18358, 54492, 113122, 208415, 364276, 903853, 4628226),
}

DEFAULT_MIN_DURATION_S = 60.0
DEFAULT_MAX_DURATION_S = 7 * 24 * 3600.0


def sample_philly_jobs(rng: np.random.Generator, num_jobs: int, *,
                       min_duration: float = DEFAULT_MIN_DURATION_S,
                       max_duration: float = DEFAULT_MAX_DURATION_S) -> tuple[np.ndarray, np.ndarray]:
    """``num_jobs`` (GPU count, duration in seconds) pairs from the Philly calibration (module
    docstring): two draws of ``rng``, the counts then the quantile levels."""
    counts = np.array(sorted(PHILLY_GPU_COUNTS), dtype=np.int64)
    weights = np.array([PHILLY_GPU_COUNTS[int(c)] for c in counts], dtype=float)
    gpus = rng.choice(counts, size=num_jobs, p=weights / weights.sum())
    levels = rng.random(num_jobs)
    log_q = {k: np.log(np.array(v, dtype=float)) for k, v in PHILLY_DURATION_QUANTILES.items()}
    durations = np.where(gpus == 1, np.exp(np.interp(levels, DURATION_LEVELS, log_q["single"])),
                         np.exp(np.interp(levels, DURATION_LEVELS, log_q["multi"])))
    return gpus, np.clip(durations, min_duration, max_duration)


def synthetic_trace(cluster: Cluster, *, num_jobs: int = 200, seed: int = 0, load: float = 1.0,
                    iteration_time: IterationTimeFn | None = None, guaranteed_fraction: float = 0.0,
                    plan_choice: str = "random", models: Sequence[str] | None = None,
                    gpu_type: str | None = None, cpus_per_gpu: int = DEFAULT_CPUS_PER_GPU,
                    min_duration: float = DEFAULT_MIN_DURATION_S, max_duration: float = DEFAULT_MAX_DURATION_S,
                    tenant_of: TenantFn | None = None, quotas: Mapping[str, int] | None = None,
                    name: str = "synthetic") -> Trace:
    """A Philly-like trace of ``num_jobs`` jobs offering about ``load`` times the GPUs of ``cluster``
    (module docstring). ``iteration_time=None`` uses the built-in analytical model
    (:func:`optsched.sim.traces.assign.default_iteration_time`); ``plan_choice``, ``models``, ``gpu_type``
    and ``cpus_per_gpu`` are those of :func:`optsched.sim.traces.assign.assign_jobs`."""
    owner = "synthetic_trace"
    require_int(owner, "num_jobs", num_jobs, 1)
    require_int(owner, "seed", seed, 0)
    require_number(owner, "load", load, 0.0, strict=True)
    require_number(owner, "guaranteed_fraction", guaranteed_fraction, 0.0)
    if guaranteed_fraction > 1:
        raise ValidationError(f"{owner}: guaranteed_fraction must be <= 1, got {guaranteed_fraction}")
    require_number(owner, "min_duration", min_duration, 0.0, strict=True)
    require_number(owner, "max_duration", max_duration, min_duration)
    pool = gpu_pool(cluster, gpu_type)
    require_seed("synthetic_trace", seed)
    rng = np.random.default_rng(seed)

    gpus, durations = sample_philly_jobs(rng, num_jobs, min_duration=min_duration, max_duration=max_duration)
    guaranteed = rng.random(num_jobs) < guaranteed_fraction
    gaps = rng.standard_exponential(num_jobs)
    work = float(np.sum(gpus * durations))
    rate = load * pool.total * num_jobs / work
    submit = np.concatenate(([0.0], np.cumsum(gaps[:-1]))) / rate

    width = len(str(num_jobs - 1))
    raw = [RawJob(f"syn-{i:0{width}d}", float(submit[i]), float(durations[i]), int(gpus[i]), bool(guaranteed[i]))
           for i in range(num_jobs)]
    rule, quota_pairs = tenancy(bool(guaranteed.any()), cluster, tenant_of, quotas)
    it = iteration_time if iteration_time is not None else default_iteration_time(cluster)
    jobs = assign_jobs(raw, cluster, rng, it, plan_choice=plan_choice, models=models, gpu_type=gpu_type,
                       cpus_per_gpu=cpus_per_gpu, tenant_of=rule)
    source = (f"synthetic(seed={seed}, num_jobs={num_jobs}, load={load:g}, span={num_jobs / rate:.0f}s, "
              f"plan_choice={plan_choice})")
    return Trace(name, tuple(jobs), quota_pairs, source)


def offered_load(trace: Trace, iteration_time: IterationTimeFn, cluster: Cluster, *,
                 gpu_type: str | None = None, cpus_per_gpu: float = DEFAULT_CPUS_PER_GPU) -> float:
    """Offered load of a trace of at least two jobs: the GPU-seconds of its work at the requested
    plans on packed placements, ``sum_j gpus_j * iterations_j * iteration_time_j``, over ``G * span``,
    with ``G`` the GPUs of the pool and ``span`` the time from the first to the last submission times
    ``n / (n - 1)`` (for Poisson arrivals an unbiased estimate of ``n / rate``, the span that
    :func:`synthetic_trace` sets the rate by)."""
    if len(trace.jobs) < 2:
        raise ValidationError(f"trace {trace.name!r}: the offered load needs at least two jobs")
    pool = gpu_pool(cluster, gpu_type)
    work = 0.0
    for j in trace.jobs:
        if j.requested_plan is None:
            raise ValidationError(f"job {j.name!r}: no requested plan to measure its work with")
        t = iteration_time(j.model, j.gpu_type or pool.gpu_type.name, j.requested_plan,
                           pool.shape(j.requested_gpus), float(cpus_per_gpu))
        work += j.requested_gpus * j.total_iterations * t
    first, last = trace.jobs[0].submit_time, trace.jobs[-1].submit_time
    n = len(trace.jobs)
    span = (last - first) * n / (n - 1)
    if span <= 0 or not math.isfinite(span):
        raise ValidationError(f"trace {trace.name!r}: every job is submitted at the same time")
    return work / (pool.total * span)


__all__ = ["DEFAULT_MAX_DURATION_S", "DEFAULT_MIN_DURATION_S", "DURATION_LEVELS", "PHILLY_DURATION_QUANTILES",
           "PHILLY_GPU_COUNTS", "offered_load", "sample_philly_jobs", "synthetic_trace"]

"""Crius workloads for the simulator: the rows of a production trace (submission time and duration)
turned into jobs of the Crius models (Crius Sec. 8.1, "Workloads": "While each job record consists of
job id, submission time and duration, we randomly generate the GPU amount and GPU type to adapt traces
to heterogeneous scenarios. The number of iterations in Philly trace is calculated from scaling by
global batch size.").

:func:`crius_jobs` gives each row, with one ``numpy.random.Generator``:

* a model of Crius Table 2 and its requested GPUs ``N_G`` as the round generator draws them
  (:func:`~optsched.rounds.crius.generate.draw_model`, :func:`~optsched.rounds.crius.generate.draw_request`;
  the trace's own GPU count is replaced, as in the paper); a model none of whose Cells runs on the
  cluster (e.g. ``moe-27b@512`` on ``crius-testbed-64``) is drawn again, up to :data:`MODEL_DRAWS`
  times, so a trace holds only models the cluster can run;
* a *home* GPU type, uniformly among the types on which a Cell of ``N_G`` GPUs runs in the ground
  truth (when none does, ``N_G`` doubles until one does), and its work: ``ceil(duration / t)`` iterations with ``t`` the truth's iteration time of
  the job's best estimated Cell of ``N_G`` GPUs on its home type (the row's duration is what the job
  would take there);
* a requested plan (the simulator normalises throughput by the job's request, evaluated on the
  cluster's first node's GPU type): the best estimated Cell of ``N_G`` GPUs on that type, or none
  when it does not run there (the job then counts 1 while it runs).

Durations are clipped to ``[min_duration, max_duration]`` (default ten minutes to one day, so that a
simulation of a few hundred jobs spans a day or two, not the weeks of Philly's longest jobs). The clip is ours:
the paper clips none. ``optsched simulate --kind crius --max-duration H`` sets the upper clip (hours); the
``crius-paper`` preset clips at its one-week window (168 h).

:func:`crius_philly_trace` reads a Philly CSV (:func:`~optsched.sim.traces.philly.philly_rows`, e.g.
``../shared/data/traces/philly/philly_busiest12h.csv``); :func:`crius_synthetic_trace` draws
Philly-calibrated durations (:func:`~optsched.sim.traces.synthetic.sample_philly_jobs`) with Poisson
arrivals at an offered ``load`` of the cluster's GPUs (:func:`offered`: ``sum N_G x duration`` over
``GPUs x span``); :func:`crius_philly_trace` may scale the file's arrival times to a ``load`` too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from optsched.core.checks import require_int, require_number, require_seed
from optsched.core.errors import OptschedError, ValidationError
from optsched.core.hardware import Cluster
from optsched.core.job import Job
from optsched.perf.crius.cell_estimator import cell_plan, shared_estimator
from optsched.perf.crius.models import crius_model
from optsched.rounds.crius.generate import draw_model, draw_request
from optsched.rounds.crius.table import stage_counts
from optsched.sim.crius_truth import CriusGroundTruth
from optsched.sim.traces.assign import RawJob
from optsched.sim.traces.philly import philly_rows
from optsched.sim.traces.synthetic import sample_philly_jobs
from optsched.sim.traces.trace import Trace

DEFAULT_MIN_DURATION_S = 600.0
DEFAULT_MAX_DURATION_S = 86_400.0


def _best_cell(est, graph, gpu_type: str, gpus: int):  # noqa: ANN001, ANN202 - small private helper
    """(stages, estimate) of the best estimated Cell of ``gpus`` GPUs of ``gpu_type``, or None."""
    best = None
    for s in stage_counts(gpus, graph):
        e = est.estimate(est.cell(graph, gpu_type, gpus, s))
        if e.feasible and (best is None or e.throughput > best[1].throughput):
            best = (s, e)
    return best


def _homes(est, truth: CriusGroundTruth, model: str, graph, types: list[str], totals: dict[str, int],  # noqa: ANN001
           req: int) -> list[float]:
    """Truth iteration times of the best estimated Cell of ``req`` GPUs on each type where it runs."""
    out = []
    for t in types:
        best = _best_cell(est, graph, t, req) if req <= totals[t] else None
        if best is None:
            continue
        try:
            out.append(truth.iteration_time(model, t, cell_plan(req, best[0]), best[1].cell.gpus_per_node, 0.0))
        except OptschedError:
            continue
    return out


#: draws of a model for a trace row before giving up (module docstring)
MODEL_DRAWS = 100


def crius_jobs(rows: Sequence[RawJob], cluster: Cluster, truth: CriusGroundTruth, *, seed: int,
               min_duration: float = DEFAULT_MIN_DURATION_S, max_duration: float = DEFAULT_MAX_DURATION_S
               ) -> list[Job]:
    """Crius jobs from trace rows (module docstring); jobs keep the rows' names and submit times."""
    require_seed("crius_jobs", seed)
    require_number("crius_jobs", "min_duration", min_duration, 0.0, strict=True)
    require_number("crius_jobs", "max_duration", max_duration, min_duration)
    rng = np.random.default_rng(seed)
    est = shared_estimator(cluster)
    types = [t.name for t in cluster.gpu_types if any(n.num_gpus for n in cluster.nodes_of_type(t.name))]
    totals = {t: sum(n.num_gpus for n in cluster.nodes_of_type(t)) for t in types}
    first_type = cluster.nodes[0].gpu_type
    jobs = []
    for row in rows:
        for _ in range(MODEL_DRAWS):  # a model with no Cell that runs on this cluster is drawn again
            model = draw_model(rng)
            graph = crius_model(model)
            req = draw_request(rng, graph, cluster, est, types)
            homes = _homes(est, truth, model, graph, types, totals, req)
            while not homes and 2 * req <= max(totals.values()):
                req *= 2  # the truth has less memory than the estimate: ask for more, as a user would
                homes = _homes(est, truth, model, graph, types, totals, req)
            if homes:
                break
        if not homes:
            raise ValidationError(f"trace row {row.name!r}: no model drawn in {MODEL_DRAWS} draws has a Cell that "
                                  f"runs on cluster {cluster.name!r}")
        it = homes[int(rng.integers(len(homes)))]
        duration = min(max(row.duration, min_duration), max_duration)
        ref = _best_cell(est, graph, first_type, req) if req <= totals.get(first_type, 0) else None
        plan = None if ref is None else cell_plan(req, ref[0])
        jobs.append(Job(row.name, model, req, max(1, math.ceil(duration / it)), requested_plan=plan,
                        submit_time=row.submit_time))
    return jobs


def offered(jobs: Sequence[Job], rows: Sequence[RawJob], cluster: Cluster, min_duration: float = DEFAULT_MIN_DURATION_S,
            max_duration: float = DEFAULT_MAX_DURATION_S) -> float:
    """Offered load of Crius jobs made from ``rows``: ``sum N_G x duration`` (clipped) over the cluster's
    GPUs times the span of the submissions (``n / (n - 1)`` times first to last)."""
    work = sum(j.requested_gpus * min(max(r.duration, min_duration), max_duration) for j, r in zip(jobs, rows))
    n = len(jobs)
    span = (jobs[-1].submit_time - jobs[0].submit_time) * n / max(n - 1, 1)
    if not span > 0:
        raise ValidationError("offered load: the jobs are all submitted at once")
    return work / (cluster.total_gpus * span)


def _rescaled(jobs: Sequence[Job], factor: float) -> list[Job]:
    return [Job(j.name, j.model, j.requested_gpus, j.total_iterations, requested_plan=j.requested_plan,
                submit_time=j.submit_time * factor) for j in jobs]


def crius_philly_trace(path: str | Path, cluster: Cluster, truth: CriusGroundTruth, *, seed: int = 0,
                       max_jobs: int | None = None, load: float | None = None, name: str | None = None,
                       **kwargs: float) -> Trace:
    """A Crius trace from a Philly CSV (module docstring); ``max_jobs`` keeps the earliest rows; with
    ``load`` the submit times are scaled (the arrivals' pattern kept) so that the offered load
    (:func:`offered`) is ``load``."""
    rows = philly_rows(path, max_jobs=max_jobs)
    if not rows:
        raise ValidationError(f"{path}: no job left after the max_jobs selection")
    jobs = crius_jobs(rows, cluster, truth, seed=seed, **kwargs)
    note = ""
    if load is not None:
        require_number("crius_philly_trace", "load", load, 0.0, strict=True)
        factor = offered(jobs, rows, cluster, **kwargs) / load
        jobs = _rescaled(jobs, factor)
        note = f", arrivals scaled by {factor:.3g} to load {load:g}"
    return Trace(name or f"crius-{Path(path).stem}", tuple(jobs), (),
                 f"{path} (Crius models, seed={seed}, {len(jobs)} jobs{note})")


def with_deadlines(jobs: Sequence[Job], rows: Sequence[RawJob], deadline_range: tuple[float, float], *, seed: int,
                   min_duration: float = DEFAULT_MIN_DURATION_S, max_duration: float = DEFAULT_MAX_DURATION_S
                   ) -> list[Job]:
    """``jobs`` with deadlines (Crius Sec. 8.5, "we follow [19]", ElasticFlow): each job's deadline is its
    submission plus ``lambda x duration``, ``duration`` its row's (clipped) duration, i.e. its time on its
    request on its home type, ``lambda`` uniform in ``deadline_range`` (one generator, ``seed``)."""
    lo, hi = deadline_range
    require_number("with_deadlines", "deadline_range low", lo, 0.0, strict=True)
    require_number("with_deadlines", "deadline_range high", hi, lo)
    require_seed("with_deadlines", seed)
    lam = np.random.default_rng(seed).uniform(lo, hi, len(jobs))
    return [Job(j.name, j.model, j.requested_gpus, j.total_iterations, requested_plan=j.requested_plan,
                submit_time=j.submit_time,
                deadline=j.submit_time + float(x) * min(max(r.duration, min_duration), max_duration))
            for j, r, x in zip(jobs, rows, lam)]


def crius_synthetic_trace(cluster: Cluster, truth: CriusGroundTruth, *, num_jobs: int = 300, seed: int = 0,
                          load: float | None = 1.0, arrival_rate: float | None = None,
                          deadline_range: tuple[float, float] | None = None, name: str = "crius-synthetic",
                          **kwargs: float) -> Trace:
    """A Philly-calibrated Crius trace of ``num_jobs`` jobs at offered ``load`` (module docstring), or, with
    ``arrival_rate`` (jobs per second; ``load`` None), Poisson arrivals at that rate and whatever load the
    jobs' requests and durations then offer; ``deadline_range``: deadlines as :func:`with_deadlines` draws them
    (seed ``seed + 2``)."""
    require_int("crius_synthetic_trace", "num_jobs", num_jobs, 1)
    require_seed("crius_synthetic_trace", seed)
    if (load is None) == (arrival_rate is None):
        raise ValidationError("crius_synthetic_trace: give either load or arrival_rate (not both)")
    if load is not None:
        require_number("crius_synthetic_trace", "load", load, 0.0, strict=True)
    else:
        require_number("crius_synthetic_trace", "arrival_rate", arrival_rate, 0.0, strict=True)
    rng = np.random.default_rng(seed)
    _, durations = sample_philly_jobs(rng, num_jobs)
    gaps = rng.standard_exponential(num_jobs)
    if arrival_rate is not None:
        gaps = gaps / arrival_rate
    width = len(str(num_jobs - 1))
    rows = [RawJob(f"crius-{i:0{width}d}", 0.0, float(durations[i]), 1) for i in range(num_jobs)]
    rows = [RawJob(r.name, float(t), r.duration, 1) for r, t in zip(rows, np.cumsum(gaps))]
    jobs = crius_jobs(rows, cluster, truth, seed=seed + 1, **kwargs)
    if load is not None:
        jobs = _rescaled(jobs, offered(jobs, rows, cluster, **kwargs) / load) if num_jobs > 1 else jobs
        how = f"load={load:g}"
    else:
        how = f"arrival_rate={arrival_rate * 3600:g}/h, offered load {offered(jobs, rows, cluster, **kwargs):.2f}" \
            if num_jobs > 1 else f"arrival_rate={arrival_rate * 3600:g}/h"  # type: ignore[operator]
    if deadline_range is not None:
        jobs = with_deadlines(jobs, rows, deadline_range, seed=seed + 2, **kwargs)
        how += f", deadlines lambda in [{deadline_range[0]:g}, {deadline_range[1]:g}]"
    return Trace(name, tuple(jobs), (), f"crius-synthetic(seed={seed}, num_jobs={num_jobs}, {how})")


__all__ = ["DEFAULT_MAX_DURATION_S", "DEFAULT_MIN_DURATION_S", "crius_jobs", "crius_philly_trace",
           "crius_synthetic_trace", "offered", "with_deadlines"]

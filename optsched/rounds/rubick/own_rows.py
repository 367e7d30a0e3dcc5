"""How the methods of a Rubick round choose among a job's own coefficient rows (the caller's measured or
predicted configurations, :mod:`optsched.core.coefficient_rows`; issue 16). Where a job has such rows
no performance model is involved: every method picks one of the given rows, by the rule it applies to
the performance model's rows (:mod:`optsched.rounds.rubick.table`,
:mod:`optsched.rounds.rubick.baseline_tables`).

Rules (the paper is silent; each is tested in ``tests/rounds/test_own_coefficients.py``):

* **Request rows.** A row is a *request row* when it uses the requested GPUs (``requested_gpus``), the
  requested plan when the job gives one, and at most the requested CPUs (``requested_cpus``; a job
  that requests 0 CPUs is taken to request ``min(8, node CPUs per GPU)`` per GPU, as for the model's
  rows). The job's **request** on a GPU type is its fastest request row there (first given on ties).
  A job without a request row is an error naming it and saying what to add.
* **Reference throughput** (normaliser and guarantee): the fastest request row over the GPU types.
* **Full table** (``exact``, ``heuristic``): every given row.
* ``rubick-e`` (plans only): rows on the requested GPUs within the requested CPUs, any plan;
  ``rubick-r`` (resources only): rows whose plan is the request's plan at another DP size (same TP,
  PP, micro-batches, ZeRO mode and GC; DP and GA steps free); ``rubick-n``, ``fifo``, ``fifo-backfill``,
  ``antman``: the request (one row per GPU type).
* ``synergy``: a queued job's request rows' plan and shape at any CPUs; a running job's current plan
  and shape at any CPUs (its CPU ladder).
* ``sia``: the Sia plan is the request's plan when it is data-parallel; for a 3D request the fastest
  data-parallel row on the requested GPUs, else the 3D plan on the requested GPUs only (Rubick
  footnote 2); its ladder is every row of that plan at other DP sizes.
* **Running jobs.** A running job's current configuration must be one of its rows: same plan, GPU type,
  GPUs per node and CPUs as it holds (the row's throughput is its current throughput). Otherwise it is
  an error naming the job and the row to add. The current configuration is offered in every variant.
"""

from __future__ import annotations

import json
from typing import Sequence

from optsched.core.coefficient_rows import CoefficientRow
from optsched.core.errors import ValidationError
from optsched.core.job import Job
from optsched.core.plan import ExecutionPlan
from optsched.core.pool import gpu_pool
from optsched.rounds.rubick.problem import RubickRound


def same_family(a: ExecutionPlan, b: ExecutionPlan) -> bool:
    """Whether ``a`` is ``b`` at another DP size (same TP, PP, micro-batches, ZeRO mode and GC; DP and
    GA steps free): how Sia and Rubick-R scale a plan."""
    return (a.tp, a.pp, a.micro_batches, a.zero, a.gc) == (b.tp, b.pp, b.micro_batches, b.zero, b.gc)


def request_cpus(problem: RubickRound, job: Job, gpu_type: str) -> int:
    """The CPUs the job requests on ``gpu_type`` (:meth:`~optsched.core.job.Job.cpus_or_default`)."""
    return job.cpus_or_default(gpu_pool(problem.cluster, gpu_type).cpus_per_gpu)


def _fits_request_resources(problem: RubickRound, job: Job, row: CoefficientRow) -> bool:
    return row.gpus == job.requested_gpus and row.cpus <= request_cpus(problem, job, row.gpu_type)


def request_rows(problem: RubickRound, job: Job, rows: Sequence[CoefficientRow]) -> dict[str, int]:
    """GPU type -> index of the job's request there (module docstring); ``ValidationError`` naming the
    job when no row is a request row."""
    best: dict[str, int] = {}
    for i, r in enumerate(rows):
        if not _fits_request_resources(problem, job, r):
            continue
        if job.requested_plan is not None and r.plan != job.requested_plan:
            continue
        k = best.get(r.gpu_type)
        if k is None or r.throughput > rows[k].throughput:
            best[r.gpu_type] = i
    if not best:
        plan = "" if job.requested_plan is None else f" with plan {job.requested_plan.label}"
        cpus = (f"at most {job.requested_cpus} CPUs" if job.requested_cpus > 0
                else "at most min(8, node CPUs per GPU) CPUs per GPU (the job requests 0 CPUs)")
        raise ValidationError(
            f"job {job.name!r}: none of its {len(rows)} coefficient row(s) is its request ({job.requested_gpus} "
            f"GPUs{plan}, {cpus}); add a row for the request: it gives the reference throughput the objective and "
            "the guarantee are measured against")
    return best


def reference_throughput(rows: Sequence[CoefficientRow], request: dict[str, int]) -> float:
    """The fastest request row's throughput."""
    return max(rows[i].throughput for i in request.values())


def table_rows(problem: RubickRound, job: Job, rows: Sequence[CoefficientRow], request: dict[str, int],
               fixed_plan: bool, fixed_resources: bool) -> list[int]:
    """Indices of the rows the round table offers (module docstring: full table and the ablations)."""
    if fixed_plan and fixed_resources:
        return sorted(request.values())
    if fixed_resources:
        return [i for i, r in enumerate(rows) if _fits_request_resources(problem, job, r)]
    if fixed_plan:
        return [i for i, r in enumerate(rows)
                if r.gpu_type in request and same_family(r.plan, rows[request[r.gpu_type]].plan)]
    return list(range(len(rows)))


def current_index(problem: RubickRound, job: Job, rows: Sequence[CoefficientRow]) -> int | None:
    """Index of the row a running job runs (module docstring, "Running jobs"); None for a queued job;
    ``ValidationError`` naming the job and the row to add when none matches."""
    cur = problem.current(job.name)
    if cur is None:
        return None
    gpu_type = problem.cluster.node(cur.placement.shares[0][0]).gpu_type
    shape = cur.placement.gpus_per_node
    cpus = cur.placement.total_cpus
    for i, r in enumerate(rows):
        if r.plan == cur.plan and r.gpu_type == gpu_type and r.gpus_per_node == shape and r.cpus == cpus:
            return i
    raise ValidationError(
        f"job {job.name!r}: its running configuration (plan {cur.plan.label} on {list(shape)} {gpu_type} GPUs with "
        f"{cpus} CPUs) is none of its coefficient rows; add the row {{\"plan\": {json.dumps(cur.plan.to_dict())}, "
        f"\"gpu_type\": {json.dumps(gpu_type)}, \"gpus_per_node\": {list(shape)}, \"cpus\": {cpus}, "
        f"\"throughput\": <its samples/s>}}")


def synergy_rows(problem: RubickRound, job: Job, rows: Sequence[CoefficientRow]) -> list[int]:
    """Synergy's CPU ladder among the rows (module docstring)."""
    cur = current_index(problem, job, rows)
    if cur is not None:
        anchors = [rows[cur]]
    else:
        anchors = [rows[i] for i in request_rows(problem, job, rows).values()]
    return [i for i, r in enumerate(rows)
            if any(r.plan == a.plan and r.gpu_type == a.gpu_type and r.gpus_per_node == a.gpus_per_node
                   for a in anchors)]


def sia_rows(problem: RubickRound, job: Job, rows: Sequence[CoefficientRow]) -> list[int]:
    """Sia's DP-scaling ladder among the rows (module docstring)."""
    out: list[int] = []
    for gpu_type, k in sorted(request_rows(problem, job, rows).items()):
        plan, scalable = rows[k].plan, True
        if plan.is_3d:
            dp = [i for i, r in enumerate(rows) if r.gpu_type == gpu_type and not r.plan.is_3d
                  and _fits_request_resources(problem, job, r)]
            if dp:
                plan = rows[max(dp, key=lambda i: (rows[i].throughput, -i))].plan
            else:
                scalable = False
        out.extend(i for i, r in enumerate(rows) if r.gpu_type == gpu_type and same_family(r.plan, plan)
                   and (scalable or r.gpus == job.requested_gpus))
    return out


__all__ = ["current_index", "reference_throughput", "request_cpus", "request_rows", "same_family", "sia_rows",
           "synergy_rows", "table_rows"]

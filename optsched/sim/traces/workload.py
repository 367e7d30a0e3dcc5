"""The Rubick workload format (``workload-{base,bp,mt}.csv``, ``naive.csv``; ``optsched.sim.traces``
docstring): ``name,submission_time,duration,application,num_gpus,num_cpus,exec_plan,steps,is_sla``."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from optsched.core.catalog import MODELS
from optsched.core.errors import ValidationError
from optsched.core.hardware import Cluster
from optsched.core.job import Job
from optsched.core.plan import offload_runs_with_gc, parse_plan_code
from optsched.core.pool import GpuPool, gpu_pool
from optsched.sim.traces.assign import packed_plan_violation
from optsched.sim.traces.csv_rows import (Row, RowError, RowErrors, check_field_count, gpu_count_field, integer_field,
                                          non_negative_field, read_csv, text_field)
from optsched.sim.traces.trace import TenantFn, Trace, TraceDuration, tenancy

log = logging.getLogger(__name__)

WORKLOAD_COLUMNS = ("name", "submission_time", "duration", "application", "num_gpus", "num_cpus",
                    "exec_plan", "steps", "is_sla")
#: what :func:`load_workload_csv` does with a plan that cannot run on its packed GPUs
INFEASIBLE_PLAN_POLICIES = ("error", "unset", "skip")


def load_workload_csv(path: str | Path, cluster: Cluster, *, tenant_of: TenantFn | None = None,
                      quotas: Mapping[str, int] | None = None, gpu_type: str | None = None,
                      infeasible_plans: str = "error", name: str | None = None) -> Trace:
    """Load a Rubick workload CSV (``workload-{base,bp,mt}.csv``, ``naive.csv``).

    Per row: ``steps`` (>= 1) is ``total_iterations``; ``exec_plan`` on ``num_gpus`` GPUs is parsed
    like the measurement files; ``is_sla`` 1 makes the job guaranteed; ``num_cpus`` is the requested
    CPUs; ``duration`` must be a number >= 0: the work is ``steps``, and the duration is kept in
    :attr:`Trace.durations` (the job's speed at its request, :mod:`optsched.sim.trace_speed`).
    Tenants and quotas: :func:`tenancy`. Raises ``ValidationError`` listing every broken row.

    A plan that parses but cannot run on its GPUs packed on the cluster (:func:`plan_violation`:
    topology, GPU and host memory) is handled by ``infeasible_plans``: ``"error"`` (default) reports
    the row like any broken row; ``"unset"`` keeps the job without a requested plan (the scheduler
    then takes the best plan on the request, which is also what the BP trace means by its plans) and
    ``"skip"`` drops the job, both with one warning naming the rows and reasons. (The BP trace's
    five gpt2 ``zero-dp`` rows on 2 GPUs need 81.9 GiB per GPU by :mod:`optsched.perf.memory`.)"""
    if infeasible_plans not in INFEASIBLE_PLAN_POLICIES:
        raise ValidationError(f"infeasible_plans must be one of {', '.join(INFEASIBLE_PLAN_POLICIES)}, "
                              f"got {infeasible_plans!r}")
    p = Path(path)
    pool = gpu_pool(cluster, gpu_type)
    pin = pool.gpu_type.name if len({n.gpu_type for n in cluster.nodes if n.num_gpus > 0}) > 1 else None
    errors = RowErrors(p, skip=False)
    parsed: list[tuple[Row, dict[str, Any]]] = []
    names: dict[str, int] = {}
    infeasible: list[str] = []
    for row in read_csv(p, WORKLOAD_COLUMNS, ("bandwidth",)):
        try:
            d, reason = _workload_row(row, pool, names)
        except RowError as exc:
            errors.add(row, exc)
            continue
        if reason is not None:
            if infeasible_plans == "error":
                errors.add(row, RowError(reason + ' (infeasible_plans="unset" or "skip" loads it anyway)',
                                          "plan cannot run"))
                continue
            infeasible.append(f"row {row.number}: {reason}")
            if infeasible_plans == "skip":
                continue
            d["requested_plan"] = None
        parsed.append((row, d))
    errors.finish(len(parsed))
    if infeasible:
        log.warning("%s: %d plan(s) cannot run on their packed GPUs; %s: %s", p, len(infeasible),
                    "jobs skipped" if infeasible_plans == "skip" else "requested plan unset",
                    "; ".join(infeasible))
    if not parsed:
        raise ValidationError(f"{p}: no job left (every plan is infeasible)")
    any_guaranteed = any(d["guaranteed"] for _, d in parsed)
    rule, quota_pairs = tenancy(any_guaranteed, cluster, tenant_of, quotas)
    jobs = []
    durations = []
    for row, d in parsed:
        seconds = d.pop("duration")
        try:
            jobs.append(Job(tenant=rule(d["name"], d["guaranteed"]), gpu_type=pin, **d))
        except ValidationError as exc:
            raise ValidationError(f"{errors.where(row)}: {exc}") from None
        durations.append(TraceDuration(d["name"], seconds, row.number))
    return Trace(name or p.stem, tuple(jobs), quota_pairs, str(p), tuple(durations))


def _workload_row(row: Row, pool: GpuPool, names: dict[str, int]) -> tuple[dict[str, Any], str | None]:
    """The Job fields of a row and, when its plan cannot run on the packed placement, why."""
    check_field_count(row)
    job = text_field(row, "name")
    if job in names:
        raise RowError(f"duplicate job name {job!r} (first used in row {names[job]})", "duplicate job name")
    names[job] = row.number
    submit = non_negative_field(row, "submission_time", "time")
    duration = non_negative_field(row, "duration", "duration")
    model_name = text_field(row, "application")
    if model_name not in MODELS:
        raise RowError(f"unknown model {model_name!r} in column application; known models: "
                        f"{', '.join(sorted(MODELS))}", "unknown model")
    model = MODELS[model_name]
    gpus = gpu_count_field(row, "num_gpus")
    cpus = integer_field(row, "num_cpus", 0, "negative num_cpus")
    steps = integer_field(row, "steps", 1, "steps is the work in iterations")
    sla = text_field(row, "is_sla")
    if sla not in ("0", "1"):
        raise RowError(f"is_sla must be 0 or 1, got {sla!r}", "bad is_sla")
    if gpus > pool.total:
        raise RowError(f"num_gpus {gpus} exceeds the {pool.total} {pool.gpu_type.name} GPUs of the cluster",
                        "too many GPUs")
    code = text_field(row, "exec_plan")
    try:
        plan = parse_plan_code(code, gpus, model.global_batch, offload_gc=offload_runs_with_gc(model))
    except ValidationError as exc:
        raise RowError(f"exec_plan: {exc}", "bad plan code") from None
    reason = packed_plan_violation(model, plan, pool)
    fields = {"name": job, "model": model_name, "requested_gpus": gpus, "total_iterations": steps,
              "requested_cpus": cpus, "requested_plan": plan, "guaranteed": sla == "1", "submit_time": submit,
              "duration": duration}
    return fields, None if reason is None else f"exec_plan {code!r} on {gpus} GPUs: {reason}"


__all__ = ["INFEASIBLE_PLAN_POLICIES", "WORKLOAD_COLUMNS", "load_workload_csv"]

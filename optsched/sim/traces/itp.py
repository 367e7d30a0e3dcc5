"""The Microsoft ITP 2021 trace format: ``job_id,submission_time,duration,num_gpu`` (seconds;
``optsched.sim.traces`` docstring)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from optsched.core.errors import ValidationError
from optsched.core.hardware import Cluster
from optsched.core.job import DEFAULT_CPUS_PER_GPU
from optsched.sim.traces.assign import IterationTimeFn, RawJob, check_loader_args, finish_trace, select_jobs
from optsched.sim.traces.csv_rows import (RowError, RowErrors, check_field_count, gpu_count_field, non_negative_field,
                                          read_csv, text_field)
from optsched.sim.traces.trace import Trace

ITP_COLUMNS = ("job_id", "submission_time", "duration", "num_gpu")


def load_itp_csv(path: str | Path, cluster: Cluster, *, seed: int, iteration_time: IterationTimeFn | None,
                 start: float | None = None, end: float | None = None, max_jobs: int | None = None,
                 plan_choice: str = "random", models: Sequence[str] | None = None, gpu_type: str | None = None,
                 cpus_per_gpu: int = DEFAULT_CPUS_PER_GPU, skip_invalid: bool = False,
                 name: str | None = None) -> Trace:
    """Load a Microsoft ITP 2021 CSV (``job_id,submission_time,duration,num_gpu``, seconds). Jobs are
    named ``itp-<job_id>`` (a repeated ``job_id`` is an error); ``start``/``end`` are in the file's
    seconds; otherwise as :func:`~optsched.sim.traces.philly.load_philly_csv`."""
    p = Path(path)
    check_loader_args(seed, max_jobs)
    for label, v in (("start", start), ("end", end)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)):
            raise ValidationError(f"{label} must be a number of seconds, got {v!r}")
    errors = RowErrors(p, skip_invalid)
    kept: list[tuple[float, int, RawJob]] = []
    ids: dict[str, int] = {}
    valid = 0
    for row in read_csv(p, ITP_COLUMNS):
        try:
            check_field_count(row)
            job_id = text_field(row, "job_id")
            submit = non_negative_field(row, "submission_time", "time")
            duration = non_negative_field(row, "duration", "duration")
            gpus = gpu_count_field(row, "num_gpu")
            if job_id in ids:
                raise RowError(f"duplicate job name 'itp-{job_id}' (job_id first used in row {ids[job_id]})",
                                "duplicate job name")
        except RowError as exc:
            errors.add(row, exc)
            continue
        ids[job_id] = row.number
        valid += 1
        if (start is not None and submit < start) or (end is not None and submit >= end):
            continue
        kept.append((submit, row.number, RawJob(f"itp-{job_id}", submit, duration, gpus, where=errors.where(row))))
    errors.finish(valid)
    return finish_trace(p, select_jobs(kept, max_jobs), cluster, seed, iteration_time, plan_choice, models,
                   gpu_type, cpus_per_gpu, name)


__all__ = ["ITP_COLUMNS", "load_itp_csv"]

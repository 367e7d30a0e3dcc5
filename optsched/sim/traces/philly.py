"""The Microsoft Philly trace format (Jeon et al., ATC'19): ``timestamp,duration,num_gpus[,gpu_time,
cluster]`` (``optsched.sim.traces`` docstring)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

from optsched.core.errors import ValidationError
from optsched.core.hardware import Cluster
from optsched.core.job import DEFAULT_CPUS_PER_GPU
from optsched.sim.traces.assign import IterationTimeFn, RawJob, check_loader_args, finish_trace, select_jobs
from optsched.sim.traces.csv_rows import (RowError, RowErrors, check_field_count, gpu_count_field, non_negative_field,
                                          read_csv, text_field)
from optsched.sim.traces.trace import Trace

PHILLY_COLUMNS = ("timestamp", "duration", "num_gpus")


def _naive_utc(ts: datetime) -> datetime:
    """Time-zone-aware timestamps are converted to UTC; naive ones are taken as they are."""
    return ts if ts.tzinfo is None else ts.astimezone(timezone.utc).replace(tzinfo=None)


def _timestamp(value: str | datetime | None, what: str) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return _naive_utc(value)
    try:
        return _naive_utc(datetime.fromisoformat(str(value).strip()))
    except ValueError:
        raise ValidationError(f"{what} must be a timestamp YYYY-MM-DD HH:MM:SS, got {value!r}") from None


def load_philly_csv(path: str | Path, cluster: Cluster, *, seed: int, iteration_time: IterationTimeFn | None,
                    start: str | datetime | None = None, end: str | datetime | None = None,
                    max_jobs: int | None = None, plan_choice: str = "random",
                    models: Sequence[str] | None = None, gpu_type: str | None = None,
                    cpus_per_gpu: int = DEFAULT_CPUS_PER_GPU, skip_invalid: bool = False,
                    name: str | None = None) -> Trace:
    """Load a Philly CSV (``timestamp,duration,num_gpus[,gpu_time,cluster]``, timestamps
    ``YYYY-MM-DD HH:MM:SS``, rows in any order). Jobs are named ``philly-<row>``; submit times are
    seconds after the first kept job; models, GPU counts, plans and iterations come from
    :func:`assign_jobs` with ``numpy.random.default_rng(seed)``. ``iteration_time=None`` uses the
    built-in analytical model. Every row is validated (also those outside ``start``/``end``)."""
    p = Path(path)
    check_loader_args(seed, max_jobs)
    raw = philly_rows(p, start=start, end=end, max_jobs=max_jobs, skip_invalid=skip_invalid)
    return finish_trace(p, raw, cluster, seed, iteration_time, plan_choice, models, gpu_type, cpus_per_gpu, name)


def philly_rows(path: str | Path, *, start: str | datetime | None = None, end: str | datetime | None = None,
                max_jobs: int | None = None, skip_invalid: bool = False) -> list[RawJob]:
    """The rows of a Philly CSV kept by ``start``/``end``/``max_jobs`` as :class:`RawJob` (submit times in
    seconds after the first kept job, by (time, row)), every row validated (:func:`load_philly_csv`)."""
    p = Path(path)
    t_start, t_end = _timestamp(start, "start"), _timestamp(end, "end")
    errors = RowErrors(p, skip_invalid)
    kept: list[tuple[float, int, RawJob]] = []
    valid = 0
    epoch = datetime(1970, 1, 1)
    for row in read_csv(p, PHILLY_COLUMNS, ("gpu_time", "cluster")):
        try:
            check_field_count(row)
            text = text_field(row, "timestamp")
            try:
                ts = _naive_utc(datetime.fromisoformat(text))
            except ValueError:
                raise RowError(f"timestamp {text!r} is not YYYY-MM-DD HH:MM:SS", "bad timestamp") from None
            duration = non_negative_field(row, "duration", "duration")
            gpus = gpu_count_field(row, "num_gpus")
        except RowError as exc:
            errors.add(row, exc)
            continue
        valid += 1
        if (t_start is not None and ts < t_start) or (t_end is not None and ts >= t_end):
            continue
        t = (ts - epoch).total_seconds()
        kept.append((t, row.number, RawJob(f"philly-{row.number}", t, duration, gpus, where=errors.where(row))))
    errors.finish(valid)
    return select_jobs(kept, max_jobs)


__all__ = ["PHILLY_COLUMNS", "load_philly_csv", "philly_rows"]

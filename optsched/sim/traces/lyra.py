"""Job traces for Lyra simulations (thesis Sec. 3.7.1): (submit time, duration, GPUs) rows from a
Philly CSV or from a synthetic generator, turned into Lyra jobs of the Basic scenario.

**Jobs** (:func:`lyra_jobs`): work = duration x GPUs (training-GPU-seconds, :mod:`optsched.rounds.lyra.jobs`);
a worker holds 2 GPUs when the request is even (Fig. 3.3: "each worker container uses 2 GPUs"), else 1.
**Elastic** jobs: "~5% of all jobs accounting for 36% of total training resources" — drawn among the
jobs of at least 2 GPUs with probability proportional to GPU time, until ``elastic_count`` of the jobs
(default 5%) are drawn; an elastic job's request is its base demand and its range is twice that (the
thesis' rule for jobs without a predefined range, "Ideal" scenario). **Fungible**: ``fungible`` of the
jobs (21%) and every elastic job. **Checkpointing**: ``checkpointing`` of the jobs (default 0, the
thesis' conservative default). All draws from ``numpy.random.default_rng(seed)``. Durations are capped
at ``max_duration_s`` (default 2 days) to keep runs bounded; the cap is applied before work is
computed.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Sequence

import numpy as np

from optsched.core.checks import require_seed
from optsched.core.errors import ValidationError
from optsched.core.job import Job
from optsched.sim.traces.csv_rows import (RowError, RowErrors, check_field_count, gpu_count_field, non_negative_field,
                                          read_csv, text_field)

#: (submit time in s, duration in s, GPUs)
RawRow = tuple[float, float, int]


def philly_rows(path: str | Path, *, max_jobs: int | None = None, skip_invalid: bool = False) -> list[RawRow]:
    """Rows of a Philly CSV (``timestamp,duration,num_gpus``), submit times in seconds after the first
    row, sorted; at most ``max_jobs`` (the first submitted). Invalid rows are errors naming the row
    (or skipped with one warning)."""
    p = Path(path)
    errors = RowErrors(p, skip_invalid)
    rows: list[tuple[datetime, float, int]] = []
    for row in read_csv(p, ("timestamp", "duration", "num_gpus"), ("gpu_time", "cluster")):
        try:
            check_field_count(row)
            text = text_field(row, "timestamp")
            try:
                ts = datetime.fromisoformat(text)
            except ValueError:
                raise RowError(f"timestamp {text!r} is not YYYY-MM-DD HH:MM:SS", "bad timestamp") from None
            rows.append((ts, non_negative_field(row, "duration", "duration"), gpu_count_field(row, "num_gpus")))
        except RowError as exc:
            errors.add(row, exc)
    errors.finish(len(rows))
    rows.sort(key=lambda r: r[0])
    if max_jobs is not None:
        rows = rows[:max_jobs]
    t0 = rows[0][0]
    return [((ts - t0).total_seconds(), d, g) for ts, d, g in rows]


def synthetic_rows(jobs: int, *, seed: int = 0, hours: float = 12.0, max_gpus: int = 32) -> list[RawRow]:
    """``jobs`` rows over ``hours``: Poisson arrivals, GPUs 1-32 with Philly-like weights (most jobs 1
    GPU, a few 8+), log-normal durations (median 20 minutes, heavy tail)."""
    require_seed("synthetic_rows", seed)
    rng = np.random.default_rng(seed)
    submit = np.sort(rng.uniform(0.0, hours * 3600.0, jobs))
    gpus = rng.choice([1, 2, 4, 8, 16, 32], size=jobs, p=[0.62, 0.12, 0.12, 0.1, 0.03, 0.01])
    dur = np.exp(rng.normal(np.log(1200.0), 1.6, jobs))
    return [(float(t), float(d), int(min(g, max_gpus))) for t, d, g in zip(submit, dur, gpus)]


def lyra_jobs(rows: Sequence[RawRow], *, seed: int = 0, elastic_count: float = 0.05, fungible: float = 0.21,
              checkpointing: float = 0.0, max_duration_s: float = 2 * 86400.0, max_gpus: int | None = None,
              prefix: str = "job") -> list[Job]:
    """Lyra jobs of ``rows`` (module docstring); ``max_gpus`` drops rows asking for more GPUs."""
    for name, v in (("elastic_count", elastic_count), ("fungible", fungible), ("checkpointing", checkpointing)):
        if not 0.0 <= v <= 1.0:
            raise ValidationError(f"lyra trace: {name} must lie in [0, 1], got {v}")
    kept = [r for r in rows if max_gpus is None or r[2] <= max_gpus]
    if not kept:
        raise ValidationError("lyra trace: no job left")
    require_seed("lyra_jobs", seed)
    rng = np.random.default_rng(seed)
    dur = np.minimum(np.array([max(1.0, r[1]) for r in kept]), max_duration_s)
    gpus = np.array([r[2] for r in kept])
    weight = np.where(gpus >= 2, dur * gpus, 0.0)
    want = min(int(round(elastic_count * len(kept))), int((weight > 0).sum()))
    elastic = set()
    if want > 0:
        elastic = set(rng.choice(len(kept), size=want, replace=False, p=weight / weight.sum()).tolist())
    out = []
    for i, (t, _, g) in enumerate(kept):
        gpw = 2 if g % 2 == 0 else 1
        work = max(1, int(round(dur[i] * g)))
        ckpt = bool(rng.random() < checkpointing)
        if i in elastic:
            out.append(Job(f"{prefix}{i:05d}", "elastic", g, work, submit_time=t, min_gpus=g, max_gpus=2 * g,
                           gpus_per_worker=gpw, fungible=True, checkpointing=ckpt))
        else:
            out.append(Job(f"{prefix}{i:05d}", "inelastic", g, work, submit_time=t, gpus_per_worker=gpw,
                           fungible=bool(rng.random() < fungible), checkpointing=ckpt))
    return out


__all__ = ["RawRow", "lyra_jobs", "philly_rows", "synthetic_rows"]

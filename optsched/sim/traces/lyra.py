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

**The thesis' job mix by load** (``fungible_load``, ``elastic_load``; Sec. 3.7.1, Basic: "fungible jobs are
used for capacity loaning (21% of total training load), and elastic jobs are used for elastic scaling (~5% of
all jobs accounting for 36% of total training resources)"): elastic jobs are drawn among all jobs in a random
order weighted by GPU time (numpy's weighted draw without replacement), a job skipped when it would take the
elastic jobs' GPU time past ``elastic_load`` of the total less a reserve of the median job's GPU time for each
elastic job still to draw, until ``elastic_count`` of the jobs are elastic (or no job is left): the large jobs
fill the load share first, small ones the count (both shares are reached where the trace allows;
:func:`job_mix` says what they are). One-GPU jobs are candidates here (range 1-2 workers of 1 GPU) where the
count rule above takes jobs of 2+ GPUs only: the busiest Philly windows hold too few multi-GPU jobs (2.4% of
the busiest 3 days' jobs, 3.6% of 15 days') for 5% of jobs to be elastic among them. Fungible jobs are drawn
uniformly at random among all jobs, elastic ones included, a job skipped when it would take the fungible GPU
time past ``fungible_load``, until no job fits. The two sets are drawn independently (the text gives them as
separate shares), so an elastic job is fungible only when drawn as such (it then prefers the inference
servers, Sec. 3.5.3). GPU time is duration x GPUs after the cap. :func:`job_mix` measures the shares a list of
jobs has.

**Windows** (:func:`philly_window`): ``days`` of a Philly CSV from a date, or the busiest such window
(the most jobs submitted, windows starting at midnight), with the wall-clock hour of its start.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Sequence

import numpy as np

from optsched.core.checks import require_seed
from optsched.core.errors import ValidationError
from optsched.core.job import Job
from optsched.rounds.lyra.jobs import is_elastic as _is_elastic
from optsched.sim.traces.csv_rows import (RowError, RowErrors, check_field_count, gpu_count_field, non_negative_field,
                                          read_csv, text_field)

#: (submit time in s, duration in s, GPUs)
RawRow = tuple[float, float, int]


def _philly_times(path: str | Path, skip_invalid: bool = False) -> list[tuple[datetime, float, int]]:
    """(submit time, duration, GPUs) of every row of a Philly CSV, sorted by time (errors: :func:`philly_rows`)."""
    rows: list[tuple[datetime, float, int]] = []
    p = Path(path)
    errors = RowErrors(p, skip_invalid)
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
    return rows


def philly_rows(path: str | Path, *, max_jobs: int | None = None, skip_invalid: bool = False) -> list[RawRow]:
    """Rows of a Philly CSV (``timestamp,duration,num_gpus``), submit times in seconds after the first
    row, sorted; at most ``max_jobs`` (the first submitted). Invalid rows are errors naming the row
    (or skipped with one warning)."""
    rows = _philly_times(path, skip_invalid)
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


@dataclass(frozen=True)
class TraceWindow:
    """Rows of a window of a trace (submit times from the window's start), the window's ``start`` and
    its length in ``days``."""

    rows: tuple[RawRow, ...]
    start: datetime
    days: float

    @property
    def start_hour(self) -> float:
        """Wall-clock hour of the window's start (for the inference usage series)."""
        return self.start.hour + self.start.minute / 60.0 + self.start.second / 3600.0


def philly_window(path: str | Path, days: float, start: str = "busiest") -> TraceWindow:
    """The ``days`` of a Philly CSV from ``start`` (``YYYY-MM-DD[ HH:MM:SS]``) or, with ``"busiest"``, from the
    midnight that begins the ``days``-long window with the most jobs submitted (ties: the earliest)
    (module docstring)."""
    if isinstance(days, bool) or not isinstance(days, (int, float)) or not days > 0:
        raise ValidationError(f"lyra trace window: days must be a number > 0, got {days!r}")
    rows = _philly_times(path)
    span = timedelta(days=days)
    if start == "busiest":
        first = datetime(rows[0][0].year, rows[0][0].month, rows[0][0].day)
        times = [r[0] for r in rows]
        best, best_n, t, i, j = first, -1, first, 0, 0
        while t <= times[-1]:
            while i < len(times) and times[i] < t:
                i += 1
            while j < len(times) and times[j] < t + span:
                j += 1
            if j - i > best_n:
                best, best_n = t, j - i
            t += timedelta(days=1)
        begin = best
    else:
        try:
            begin = datetime.fromisoformat(start)
        except ValueError:
            raise ValidationError(f"lyra trace window: start {start!r} is neither 'busiest' nor YYYY-MM-DD") from None
    kept = tuple(((ts - begin).total_seconds(), d, g) for ts, d, g in rows if begin <= ts < begin + span)
    if not kept:
        raise ValidationError(f"lyra trace window: no job submitted in the {days:g} days from {begin}")
    return TraceWindow(kept, begin, float(days))


@dataclass(frozen=True)
class JobMix:
    """What a list of Lyra jobs holds: the shares of jobs and of GPU time (duration x GPUs at the request,
    ``work``) that are elastic and fungible."""

    jobs: int
    elastic_jobs: float
    elastic_load: float
    fungible_jobs: float
    fungible_load: float

    def describe(self) -> str:
        return (f"elastic {100 * self.elastic_jobs:.1f}% of jobs, {100 * self.elastic_load:.1f}% of GPU time; fungible "
                f"{100 * self.fungible_jobs:.1f}% of jobs, {100 * self.fungible_load:.1f}% of GPU time")


def job_mix(jobs: Sequence[Job]) -> JobMix:
    """The shares of :class:`JobMix` in ``jobs``."""
    total = float(sum(j.total_iterations for j in jobs)) or 1.0
    n = max(1, len(jobs))
    el = [j for j in jobs if j.max_gpus is not None and j.max_gpus > j.min_gpus]
    fu = [j for j in jobs if j.fungible]
    return JobMix(len(jobs), len(el) / n, sum(j.total_iterations for j in el) / total, len(fu) / n,
                  sum(j.total_iterations for j in fu) / total)


def _draw_by_load(order: np.ndarray, load: np.ndarray, share: float, count: int | None) -> set[int]:
    """Indices taken in ``order``, skipping one that would take the drawn load past ``share`` of the total
    (less the median load for each index still to draw when ``count`` is given), until ``count`` are drawn
    (None: until the order ends)."""
    cap = share * float(load.sum())
    reserve = float(np.median(load)) if count is not None else 0.0
    out: set[int] = set()
    held = 0.0
    for i in order:
        if count is not None and len(out) >= count:
            break
        if held + load[i] <= cap - reserve * (0 if count is None else count - len(out) - 1):
            out.add(int(i))
            held += float(load[i])
    return out


def lyra_jobs(rows: Sequence[RawRow], *, seed: int = 0, elastic_count: float = 0.05, fungible: float = 0.21,
              checkpointing: float = 0.0, max_duration_s: float = 2 * 86400.0, max_gpus: int | None = None,
              prefix: str = "job", fungible_load: float | None = None,
              elastic_load: float | None = None) -> list[Job]:
    """Lyra jobs of ``rows`` (module docstring); ``max_gpus`` drops rows asking for more GPUs. With
    ``fungible_load`` and ``elastic_load`` (both or neither) the mix follows the thesis' shares of load
    (module docstring, ``fungible`` unused), else ``fungible`` of the inelastic jobs and every elastic job
    are fungible and elastic jobs are drawn by GPU time."""
    for name, v in (("elastic_count", elastic_count), ("fungible", fungible), ("checkpointing", checkpointing),
                    ("fungible_load", fungible_load), ("elastic_load", elastic_load)):
        if v is not None and not 0.0 <= v <= 1.0:
            raise ValidationError(f"lyra trace: {name} must lie in [0, 1], got {v}")
    if (fungible_load is None) != (elastic_load is None):
        raise ValidationError("lyra trace: give fungible_load and elastic_load together (the thesis' mix by load)")
    kept = [r for r in rows if max_gpus is None or r[2] <= max_gpus]
    if not kept:
        raise ValidationError("lyra trace: no job left")
    require_seed("lyra_jobs", seed)
    rng = np.random.default_rng(seed)
    dur = np.minimum(np.array([max(1.0, r[1]) for r in kept]), max_duration_s)
    gpus = np.array([r[2] for r in kept])
    weight = np.where(gpus >= 2, dur * gpus, 0.0)
    want = min(int(round(elastic_count * len(kept))), int((weight > 0).sum()))
    elastic: set[int] = set()
    fungible_set: set[int] | None = None
    if elastic_load is not None and fungible_load is not None:
        load = dur * gpus
        want = int(round(elastic_count * len(kept)))
        order = rng.choice(len(kept), size=len(kept), replace=False, p=load / load.sum())
        elastic = _draw_by_load(order, load, elastic_load, want)
        fungible_set = _draw_by_load(rng.permutation(len(kept)), load, fungible_load, None)
    elif want > 0:
        elastic = set(rng.choice(len(kept), size=want, replace=False, p=weight / weight.sum()).tolist())
    out = []
    for i, (t, _, g) in enumerate(kept):
        gpw = 2 if g % 2 == 0 else 1
        work = max(1, int(round(dur[i] * g)))
        ckpt = bool(rng.random() < checkpointing)
        if fungible_set is not None:
            fung = i in fungible_set
        else:
            fung = True if i in elastic else bool(rng.random() < fungible)
        if i in elastic:
            out.append(Job(f"{prefix}{i:05d}", "elastic", g, work, submit_time=t, min_gpus=g, max_gpus=2 * g,
                           gpus_per_worker=gpw, fungible=fung, checkpointing=ckpt))
        else:
            out.append(Job(f"{prefix}{i:05d}", "inelastic", g, work, submit_time=t, gpus_per_worker=gpw,
                           fungible=fung, checkpointing=ckpt))
    return out



#: the scenarios of Sec. 3.7.1 a simulation offers: name -> (share of jobs that are heterogeneous, whether the
#: fungible jobs keep their fungibility), each with the text it comes from (:func:`scenario_jobs`)
SCENARIOS: dict[str, tuple[float, bool]] = {
    # "Basic: ... No heterogeneous training. This corresponds to the status quo ... and is the default scenario"
    "basic": (0.0, True),
    # "Advanced: On top of Basic, 10% of jobs can use heterogeneous GPUs with non-ideal performance"
    "advanced": (0.10, True),
    # "Heterogeneous: Different from the Advanced scenario, we disable the 21% fungible training load and consider
    # the 10% heterogeneous training non-ideal performance solely"
    "heterogeneous": (0.10, False),
    # "Ideal: All jobs support scaling and heterogeneous training with ideal performance. For jobs without a
    # pre-defined scaling range, we consider its requested demand to be the base demand, and its scaling range is
    # twice that." (:func:`ideal_jobs`; no job is heterogeneous in the 70% sense: every one runs on inference
    # servers at the ideal rate, as a fungible job does)
    "ideal": (0.0, True),
}


def scenario_jobs(jobs: Sequence[Job], scenario: str, seed: int) -> tuple[list[Job], frozenset[str]]:
    """``jobs`` (a Basic mix, :func:`lyra_jobs`) in ``scenario`` (:data:`SCENARIOS`) and the names of its
    heterogeneous jobs. ``advanced``: ``round(0.1 x jobs)`` jobs drawn uniformly at random without replacement
    among the jobs that are not fungible ("The jobs are randomly selected and distributed evenly across 15 days":
    a uniform draw over the trace's jobs spreads them over its days as the jobs are) become heterogeneous: they may
    run on inference servers (``fungible`` set) at the efficiency the ground truth gives them there
    (:class:`~optsched.sim.lyra_truth.LyraGroundTruth`, 70%). A fungible job is not drawn: it already runs on
    inference servers at the ideal rate (Basic), and our jobs run on one pool at a time, so being heterogeneous
    would add nothing to it. ``heterogeneous``: no job is fungible ("we disable the 21% fungible training load"),
    then the same draw among all jobs. ``basic``: the jobs as they are. The draw has its own stream
    (``numpy.random.default_rng([seed, 3])``), so the jobs of a scenario are those of Basic with the heterogeneous
    ones marked. ``ideal``: :func:`ideal_jobs`."""
    if scenario not in SCENARIOS:
        raise ValidationError(f"lyra trace: unknown scenario {scenario!r}; known: {', '.join(SCENARIOS)}")
    require_seed("scenario_jobs", seed)
    if scenario == "ideal":
        return ideal_jobs(jobs), frozenset()
    share, keep_fungible = SCENARIOS[scenario]
    out = list(jobs) if keep_fungible else [dataclasses.replace(j, fungible=False) if j.fungible else j for j in jobs]
    if share <= 0.0:
        return out, frozenset()
    candidates = [i for i, j in enumerate(out) if not j.fungible]
    want = min(int(round(share * len(out))), len(candidates))
    rng = np.random.default_rng([seed, 3])
    picked = sorted(int(candidates[k]) for k in rng.choice(len(candidates), size=want, replace=False)) if want else []
    for i in picked:
        out[i] = dataclasses.replace(out[i], fungible=True)
    return out, frozenset(out[i].name for i in picked)


def ideal_jobs(jobs: Sequence[Job]) -> list[Job]:
    """``jobs`` in the Ideal scenario (Sec. 3.7.1, quoted at :data:`SCENARIOS`): every job may run on inference
    servers at the ideal rate (``fungible``), and every job is elastic: one with an elastic range keeps it, any
    other gets its request as the base demand and twice that as the top of its range (``min_gpus`` = request,
    ``max_gpus`` = 2 x request, whole workers of its ``gpus_per_worker``). "Ideal performance" is the ground
    truth's linear scaling (:mod:`optsched.sim.lyra_truth`, Sec. 3.7.1: running time "inversely proportional to
    its resource allocation")."""
    out = []
    for j in jobs:
        if _is_elastic(j):
            out.append(dataclasses.replace(j, fungible=True))
        else:
            out.append(dataclasses.replace(j, fungible=True, min_gpus=j.requested_gpus,
                                           max_gpus=2 * j.requested_gpus))
    return out


def elastic_on_inference(jobs: Sequence[Job]) -> tuple[list[Job], int]:
    """``jobs`` with every elastic job allowed on inference servers (``fungible`` set), and how many were not
    before: the ``elastic_on_inference`` option of a Lyra simulation. Thesis Sec. 3.5.3 (Worker Placement): "If
    the job is elastic, we prefer to place it on inference servers in order to maximize the potential for
    scaling in during reclaiming and reduce job preemptions. If it is inelastic, we prefer to place it on
    training servers. When placing elastic jobs, we also place their base and flexible demands on separate
    groups of inference servers"; Sec. 3.1: "placing the inelastic jobs on training servers, and
    elastic jobs on on-loan servers as much as feasible". Without the option an elastic job uses loaned servers
    only when drawn fungible (the mix by load draws the two sets independently, :func:`lyra_jobs`). Departure:
    our jobs run on one pool at a time, so an elastic job's base and flexible workers share the pool (the
    thesis puts them on separate groups of inference servers); what the placement prefers is
    :mod:`optsched.heuristics.lyra_allocate`'s rule for fungible elastic jobs (inference first)."""
    out, made = [], 0
    for j in jobs:
        if _is_elastic(j) and not j.fungible:
            j = dataclasses.replace(j, fungible=True)
            made += 1
        out.append(j)
    return out, made


__all__ = ["JobMix", "RawRow", "SCENARIOS", "TraceWindow", "elastic_on_inference", "ideal_jobs", "job_mix",
           "lyra_jobs", "philly_rows", "philly_window", "scenario_jobs", "synthetic_rows"]

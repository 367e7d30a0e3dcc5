"""The inputs of a Lyra simulation (thesis Sec. 3.7.1) besides its policies: the two-pool cluster
(``training`` 8xV100 and ``inference`` 8xT4 servers), the Lyra jobs of a trace (a Philly CSV or the
synthetic generator, :mod:`optsched.sim.traces.lyra`), the ground truth, and the inference usage series
(synthetic after Fig. 3.1, a ``time_s,usage`` CSV, or none) that the orchestrator turns into loans
(:mod:`optsched.sim.loaning`). ``optsched simulate --kind lyra`` and ``benchmarks/lyra.py`` build their
runs from it.

Per method, :meth:`LyraSimulation.events` gives what the simulator gets besides the jobs: the round
fields (``inference_nodes``; ``opportunistic``) and either pool targets (loaning: the orchestrator's
targets; no loaning: every inference server held by inference from time 0) or, for the
``opportunistic`` baseline, the capacity changes of inference's usage (no server lent; fungible jobs
use idle inference GPUs at lower priority and are evicted when inference grows).

The scenario (``scenario``, Sec. 3.7.1: ``basic``, ``advanced``, ``heterogeneous``, ``ideal``;
:func:`~optsched.sim.traces.lyra.scenario_jobs`) marks the heterogeneous jobs: they may run on inference
servers, where the ground truth runs them at ``heterogeneous_efficiency`` (0.7) of the ideal rate
(:class:`~optsched.sim.lyra_truth.LyraGroundTruth`); ``ideal`` makes every job elastic and fungible instead
(:func:`~optsched.sim.traces.lyra.ideal_jobs`). The schedulers are not told which jobs these are (a
round has no such field): they plan them as fungible jobs at the ideal rate, and the thesis' rule "Lyra's job
scheduler considers these jobs with the lowest priority on the remaining servers after all other jobs are
scheduled" (Sec. 3.6) is not modelled.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from optsched.core.errors import ValidationError
from optsched.core.events import CapacityChange, PoolTarget
from optsched.core.hardware import Cluster
from optsched.core.job import Job
from optsched.rounds.lyra.cluster import INFERENCE_GPU, inference_name, two_pool_cluster
from optsched.sim.loaning import (UsageSeries, check_burst, load_usage_csv, loan_targets, opportunistic_changes,
                                  synthetic_usage)
from optsched.sim.lyra_truth import HETEROGENEOUS_EFFICIENCY, LyraGroundTruth
from optsched.sim.traces.lyra import elastic_on_inference as allow_elastic_on_inference
from optsched.sim.traces.lyra import (JobMix, job_mix, lyra_jobs, philly_rows, philly_window, scenario_jobs,
                                      synthetic_rows)

#: training and inference GPUs of the thesis' clusters (Sec. 3.1: "a 15-day job trace collected from 3,544
#: training GPUs and 4,160 inference GPUs"): inference servers per training server when sized by load
THESIS_TRAINING_GPUS = 3544
THESIS_INFERENCE_GPUS = 4160

#: the method that runs on idle inference GPUs instead of loaned servers (Sec. 3.7.1)
OPPORTUNISTIC = "opportunistic"


@dataclass(frozen=True)
class LyraSimulation:
    """A Lyra simulation's cluster, jobs, ground truth, inference servers and usage series (None: no
    loaning), and the trace's name (module docstring)."""

    cluster: Cluster
    jobs: tuple[Job, ...]
    truth: LyraGroundTruth
    inference_nodes: tuple[str, ...]
    usage: UsageSeries | None
    trace_name: str
    #: trace rows left out because they ask for more GPUs than the training servers hold (``max_gpus``)
    dropped: int = 0
    max_gpus: int = 0
    #: the window of the trace (None: its first rows), as "N days from YYYY-MM-DD HH:MM"
    window: str | None = None
    #: how the cluster was sized ("" when --training/--inference were given)
    sizing: str = ""
    #: the scenario of Sec. 3.7.1 (:data:`~optsched.sim.traces.lyra.SCENARIOS`)
    scenario: str = "basic"
    #: days over which the jobs were submitted: the window's length, else the span from the first submission to the
    #: last (None for a trace submitted all at once)
    trace_days: float | None = None
    #: with ``elastic_on_inference``: the elastic jobs it allowed on inference servers (not drawn fungible);
    #: None without the option
    elastic_allowed: int | None = None

    def describe_elastic(self) -> str:
        """"" without ``elastic_on_inference``, else a sentence saying what it changed."""
        if self.elastic_allowed is None:
            return ""
        return (f"elastic jobs may use inference servers (Sec. 3.5.3): {self.elastic_allowed} elastic jobs not drawn "
                "fungible allowed there (in the fungible shares above)")

    def describe_scenario(self) -> str:
        """The scenario and its heterogeneous jobs: their share of jobs and of GPU time, and their efficiency."""
        het = self.truth.heterogeneous
        if self.scenario == "ideal":
            return ("scenario ideal: every job elastic (twice its request unless it had a range) and on inference "
                    "servers at the ideal rate")
        if not het:
            return f"scenario {self.scenario}: no heterogeneous job"
        total = float(sum(j.total_iterations for j in self.jobs)) or 1.0
        load = sum(j.total_iterations for j in self.jobs if j.name in het) / total
        return (f"scenario {self.scenario}: {len(het)} heterogeneous jobs ({100 * len(het) / len(self.jobs):.1f}% of "
                f"jobs, {100 * load:.1f}% of GPU time) at {self.truth.heterogeneous_efficiency:g} of the ideal rate "
                "on inference servers")

    def preemptions_per_server_day(self, preemptions: int) -> float | None:
        """``preemptions`` per inference server per day of the trace (:func:`preemptions_per_server_day` with
        this simulation's inference servers and :attr:`trace_days`)."""
        return preemptions_per_server_day(preemptions, len(self.inference_nodes), self.trace_days)

    def cluster_sizes(self) -> tuple[int, int]:
        """Training and inference servers of the cluster."""
        inference = len(self.inference_nodes)
        return len(self.cluster.nodes) - inference, inference

    def mix(self) -> JobMix:
        """The shares of elastic and fungible jobs and GPU time (:func:`~optsched.sim.traces.lyra.job_mix`)."""
        return job_mix(self.jobs)

    def describe_dropped(self) -> str:
        """"" when no trace row was left out, else a sentence saying how many and why."""
        if not self.dropped:
            return ""
        total = len(self.jobs) + self.dropped
        return (f"{self.dropped} of the trace's {total} jobs left out: they ask for more than the {self.max_gpus} GPUs "
                "the training servers hold; more training servers, --training, would hold them")

    def events(self, method: str, loaning: bool = True) -> dict[str, Any]:
        """``round_fields``, ``pool_targets`` and ``capacity_changes`` of a run of ``method`` (keyword
        arguments of :class:`~optsched.sim.engine.Simulator`); ``loaning=False`` lends nothing (Lyra's
        "scaling only")."""
        if method == OPPORTUNISTIC:
            if self.usage is None:
                raise ValidationError("the opportunistic baseline needs an inference usage series (not 'none')")
            return {"round_fields": {"inference_nodes": self.inference_nodes, "opportunistic": True},
                    "pool_targets": (),
                    "capacity_changes": tuple(opportunistic_changes(self.usage, self.cluster, self.inference_nodes))}
        targets: tuple[PoolTarget, ...] = (PoolTarget(0.0, self.inference_nodes, 0),)
        if loaning and self.usage is not None:
            targets = tuple(loan_targets(self.usage, self.inference_nodes))
        changes: tuple[CapacityChange, ...] = ()
        return {"round_fields": {"inference_nodes": self.inference_nodes}, "pool_targets": targets,
                "capacity_changes": changes}


def preemptions_per_server_day(preemptions: float, inference_servers: int, days: float | None) -> float | None:
    """Preemptions per inference server per day: ``preemptions / (inference_servers x days)``, ``days`` the days
    over which the jobs were submitted (the trace's window; the thesis' 15 days, Sec. 3.7.1). A rate beside the
    preemption ratio of Table 3.5 (preemptions / jobs submitted), which divides by jobs: it does not grow with a
    trace's job density. None without an inference server or a span of days. ``preemptions`` may be a count or,
    for a paper's figure, a ratio times its jobs."""
    if isinstance(preemptions, bool) or not isinstance(preemptions, (int, float)) or not (
            math.isfinite(preemptions) and preemptions >= 0):
        raise ValidationError(f"preemptions per server-day: preemptions must be a number >= 0, got {preemptions!r}")
    if not inference_servers or not days:
        return None
    return preemptions / (inference_servers * days)


def yes_no(name: str, value: bool | str) -> bool:
    """``value`` (True/False, ``"yes"``/``"no"``) as a bool; a ``ValidationError`` naming ``name`` otherwise."""
    if isinstance(value, bool):
        return value
    if value in ("yes", "no"):
        return value == "yes"
    raise ValidationError(f"lyra simulation: {name} must be yes or no, got {value!r}")


def size_by_load(work: float, days: float, offered_load: float) -> tuple[int, int]:
    """Training and inference 8-GPU servers for ``work`` training-GPU-seconds submitted over ``days`` at
    ``offered_load`` (work / (training GPUs x window)), inference servers in the thesis' proportion
    (:data:`THESIS_INFERENCE_GPUS` / :data:`THESIS_TRAINING_GPUS`)."""
    if not 0.0 < offered_load:
        raise ValidationError(f"lyra simulation: offered_load must be > 0, got {offered_load}")
    training = max(1, math.ceil(work / (offered_load * 8 * days * 86400.0)))
    return training, max(1, round(training * THESIS_INFERENCE_GPUS / THESIS_TRAINING_GPUS))


def lyra_simulation(trace: str | Path = "synthetic", *, training: int = 2, inference: int = 2, jobs: int = 120,
                    max_jobs: int | None = None, usage: str | Path = "synthetic", usage_days: float = 7.0,
                    start_hour: float = 0.0, seed: int = 0, window_days: float | None = None,
                    window_start: str = "busiest", fungible_load: float | None = None,
                    elastic_load: float | None = None, elastic_count: float = 0.05,
                    offered_load: float | None = None, scenario: str = "basic",
                    heterogeneous_efficiency: float = HETEROGENEOUS_EFFICIENCY,
                    usage_burst: float | None = None, elastic_on_inference: bool | str = False) -> LyraSimulation:
    """The inputs of a Lyra simulation (module docstring). ``trace``: ``"synthetic"`` (``jobs`` jobs over
    12 hours, :func:`~optsched.sim.traces.lyra.synthetic_rows`) or a Philly CSV (its first ``max_jobs``
    rows); rows asking for more GPUs than the training servers hold are dropped (counted in ``dropped``,
    said by :meth:`LyraSimulation.describe_dropped`). ``usage``:
    ``"synthetic"`` (``usage_days`` of the Fig. 3.1-shaped series, time 0 at ``start_hour`` o'clock),
    ``"none"`` (no loaning) or a ``time_s,usage`` CSV. ``seed`` drives the synthetic trace, the job mix
    and the synthetic series.

    The thesis' setting (``optsched simulate --kind lyra --preset lyra-thesis``): ``window_days`` of the
    trace (a Philly CSV: from ``window_start``, a date or ``"busiest"``,
    :func:`~optsched.sim.traces.lyra.philly_window`; synthetic: ``jobs`` jobs over that many days), the usage
    series over the window (plus two days for the jobs still running) from the window's wall-clock hour; the
    job mix by load (``fungible_load``, ``elastic_load``, ``elastic_count``:
    :func:`~optsched.sim.traces.lyra.lyra_jobs`); with ``offered_load``, ``training`` and ``inference``
    are replaced by the cluster :func:`size_by_load` gives for the jobs. ``scenario`` and
    ``heterogeneous_efficiency``: the heterogeneous jobs (module docstring; drawn after the cluster is sized, so
    a scenario runs the Basic jobs on the Basic cluster). ``usage_burst``: the synthetic series' median 5-minute
    change, a share of the inference cluster's capacity (Sec. 3.7.1: "the median inference traffic burst within
    five minutes is ~2% of the inference cluster capacity"; :func:`~optsched.sim.loaning.synthetic_usage`; None:
    the series as drawn); it shapes the synthetic series only (a CSV or ``"none"`` with it is an error).
    ``elastic_on_inference`` (True/False or ``"yes"``/``"no"``): every elastic job may use inference servers,
    after the scenario is drawn (:func:`~optsched.sim.traces.lyra.elastic_on_inference`, Sec. 3.5.3; off: only
    those drawn fungible)."""
    for name, v in (("training", training), ("inference", inference)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ValidationError(f"lyra simulation: {name} servers must be an integer >= 0, got {v!r}")
    if training + inference < 1:
        raise ValidationError("lyra simulation: needs at least one server")
    on_inference = yes_no("elastic_on_inference", elastic_on_inference)
    if usage_burst is not None:
        check_burst(usage_burst)
        if str(usage) != "synthetic":
            raise ValidationError(f"lyra simulation: usage_burst shapes the synthetic usage series only, not usage "
                                  f"{str(usage)!r}")
    window = None
    if str(trace) == "synthetic":
        if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
            raise ValidationError(f"lyra simulation: the synthetic trace needs jobs >= 1, got {jobs!r}")
        hours = 12.0 if window_days is None else 24.0 * window_days
        rows, name = synthetic_rows(jobs, seed=seed, hours=hours), "synthetic"
        if window_days is not None:
            window = f"{window_days:g} days"
    elif window_days is not None:
        w = philly_window(trace, window_days, window_start)
        rows, name, start_hour = list(w.rows), Path(trace).name, w.start_hour
        window = f"{window_days:g} days from {w.start:%Y-%m-%d %H:%M}"
        if max_jobs is not None:
            rows = rows[:max_jobs]
    else:
        rows, name = philly_rows(trace, max_jobs=max_jobs), Path(trace).name
    if window_days is not None:
        usage_days = window_days + 2.0
    mix = dict(elastic_count=elastic_count, fungible_load=fungible_load, elastic_load=elastic_load)
    sizing = ""
    if offered_load is not None:
        made = lyra_jobs(rows, seed=seed, **mix)  # type: ignore[arg-type]
        days = window_days if window_days is not None else max(r[0] for r in rows) / 86400.0 or 1.0
        training, inference = size_by_load(float(sum(j.total_iterations for j in made)), days, offered_load)
        sizing = (f"{training} training servers for an offered load of {offered_load:g} over {days:g} days, "
                  f"{inference} inference servers in the thesis' proportion "
                  f"{THESIS_INFERENCE_GPUS}:{THESIS_TRAINING_GPUS}")
    cluster = two_pool_cluster(training, inference)
    series: UsageSeries | None
    if str(usage) == "synthetic":
        series = synthetic_usage(usage_days, seed=seed, start_hour=start_hour, burst=usage_burst)
    elif str(usage) == "none":
        series = None
    else:
        series = load_usage_csv(usage)
    max_gpus = 8 * training
    basic = lyra_jobs(rows, seed=seed, max_gpus=max_gpus, **mix)  # type: ignore[arg-type]
    made, het = scenario_jobs(basic, scenario, seed)
    allowed = 0
    if on_inference:
        made, allowed = allow_elastic_on_inference(made)
    jobs = tuple(made)
    if window_days is not None:
        trace_days: float | None = float(window_days)
    else:
        span = (max(j.submit_time for j in jobs) - min(j.submit_time for j in jobs)) / 86400.0
        trace_days = span if span > 0 else None
    return LyraSimulation(cluster, jobs,
                          LyraGroundTruth(frozenset({INFERENCE_GPU}), heterogeneous=het,
                                          heterogeneous_efficiency=heterogeneous_efficiency),
                          tuple(inference_name(i) for i in range(inference)), series, name,
                          dropped=sum(1 for r in rows if r[2] > max_gpus), max_gpus=max_gpus, window=window,
                          sizing=sizing, scenario=scenario, trace_days=trace_days,
                          elastic_allowed=allowed if on_inference else None)


__all__ = ["LyraSimulation", "OPPORTUNISTIC", "lyra_simulation", "preemptions_per_server_day", "yes_no"]

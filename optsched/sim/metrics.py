"""What a simulation measured: one record per job, the cluster over time, and the summary the CLI and
benchmarks print (Rubick Table 4: average and P99 JCT, makespan; issue 4: median JCT, queuing time,
throughput and GPU utilisation over time, reconfiguration and preemption counts, split by guaranteed
and best-effort jobs).

Definitions (where the papers are silent):

* **JCT** = finish time - submit time; **queuing time** = first start - submit time (time waiting
  after a preemption is not queuing but shows in the JCT).
* **P50/P99** use linear interpolation between order statistics (``numpy.percentile`` default).
* **Makespan** = last finish time - first submit time.
* **GPU utilisation** = time-weighted share of available GPUs held by jobs over [first submit,
  makespan end]; a job in a reconfiguration/restart overhead holds its GPUs but makes no progress.
* **Reconfigurations** count changes of a running job's plan or placement that restart it; **trims**
  (changes of only its CPUs or memory, applied in place) are counted apart, in ``trims``.
* **Throughput** = sum over running jobs of ground-truth throughput / ground-truth throughput of the
  job's request ("normalised throughput", Rubick Sec. 3); 1.0 = one job running as requested. A
  job whose request the ground truth cannot evaluate counts 1.0 while it makes progress.
* Unfinished jobs (``max_time_s`` reached, or a policy that never starts them) are excluded from the
  JCT statistics and counted in ``unfinished``.
* **Preemption ratio** (``preemption_ratio``) = preemptions / jobs submitted, as the Lyra thesis
  defines it (Table 3.5, note 2: "Preemption ratio is the ratio between the total number of
  preemptions and the total number of job submissions"): a job preempted twice counts twice. (Its
  text also says "preemption as percentage of running jobs", Sec. 3.7.2; the table's note is the
  definition of the column.)
* **Measured share** (only with a ground truth that tells measured configurations) = seconds jobs
  held an allocation on a measured configuration / seconds jobs held any allocation (overheads
  included): how much of what a policy ran rests on measurements rather than extrapolation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np


@dataclass(frozen=True)
class JobRecord:
    """One job's outcome. ``start_s``/``finish_s`` are None when it never started/finished."""

    name: str
    model: str
    tenant: str
    guaranteed: bool
    requested_gpus: int
    submit_s: float
    start_s: float | None
    finish_s: float | None
    iterations: float
    total_iterations: int
    reconfigurations: int
    preemptions: int
    gpu_seconds: float
    overhead_s: float
    final_plan: str
    held_s: float = 0.0
    measured_s: float | None = None
    #: trims: CPU or memory changes in place, without the reconfiguration overhead (not in ``reconfigurations``)
    trims: int = 0
    #: the job's deadline (seconds of simulated time), None without one
    deadline_s: float | None = None

    @property
    def deadline_met(self) -> bool | None:
        """Whether it finished by its deadline (None without a deadline)."""
        if self.deadline_s is None:
            return None
        return self.finish_s is not None and self.finish_s <= self.deadline_s * (1 + 1e-9)

    @property
    def jct_s(self) -> float | None:
        return None if self.finish_s is None else self.finish_s - self.submit_s

    @property
    def queue_s(self) -> float | None:
        return None if self.start_s is None else self.start_s - self.submit_s

    def to_row(self) -> dict[str, Any]:
        return {"name": self.name, "model": self.model, "tenant": self.tenant, "guaranteed": int(self.guaranteed),
                "requested_gpus": self.requested_gpus, "submit_s": self.submit_s, "start_s": _blank(self.start_s),
                "finish_s": _blank(self.finish_s), "jct_s": _blank(self.jct_s), "queue_s": _blank(self.queue_s),
                "iterations": round(self.iterations, 3), "total_iterations": self.total_iterations,
                "reconfigurations": self.reconfigurations, "preemptions": self.preemptions,
                "gpu_hours": round(self.gpu_seconds / 3600.0, 6), "overhead_s": round(self.overhead_s, 3),
                "final_plan": self.final_plan, "held_s": round(self.held_s, 3), "measured_s": _blank(self.measured_s),
                "trims": self.trims}


def _blank(v: float | None) -> float | str:
    return "" if v is None else round(v, 3)


@dataclass(frozen=True)
class Sample:
    """The cluster at ``time`` after that instant's events and round: GPUs held by jobs, GPUs
    available (capacity minus outside work), running and queued jobs, normalised throughput."""

    time: float
    busy_gpus: int
    available_gpus: int
    running: int
    queued: int
    throughput: float


@dataclass(frozen=True)
class SimResult:
    """Everything one run produced; ``summary()`` is the dictionary of ``summary.json``."""

    policy: str
    trace: str
    cluster: str
    ground_truth: str
    jobs: tuple[JobRecord, ...]
    samples: tuple[Sample, ...]
    rounds: int
    failed_rounds: int
    policy_seconds: float
    wall_seconds: float
    messages: tuple[str, ...] = field(default=())

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"jobs": len(self.jobs)}
        out.update(_jct_stats(self.jobs))
        finished = [j.finish_s for j in self.jobs if j.finish_s is not None]
        first = min((j.submit_s for j in self.jobs), default=0.0)
        out["makespan_s"] = round(max(finished) - first, 3) if finished else None
        out["reconfigurations"] = sum(j.reconfigurations for j in self.jobs)
        out["preemptions"] = sum(j.preemptions for j in self.jobs)
        out["preemption_ratio"] = round(out["preemptions"] / len(self.jobs), 6) if self.jobs else None
        out["trims"] = sum(j.trims for j in self.jobs)
        out["gpu_utilisation"], out["avg_throughput"] = self._time_averages(first)
        out["rounds"] = self.rounds
        out["failed_rounds"] = self.failed_rounds
        out["policy_seconds"] = round(self.policy_seconds, 3)
        out["wall_seconds"] = round(self.wall_seconds, 3)
        out["guaranteed"] = _jct_stats([j for j in self.jobs if j.guaranteed])
        out["best_effort"] = _jct_stats([j for j in self.jobs if not j.guaranteed])
        share = self.measured_share
        if share is not None:
            out["measured_share"] = round(share, 6)
        met = [j.deadline_met for j in self.jobs if j.deadline_met is not None]
        if met:
            # Crius Sec. 8.5: "deadline satisfactory ratio defined in ElasticFlow [19], which is the ratio of jobs
            # that can satisfy their deadline requirement among all training jobs" (here: among the jobs with one)
            out["deadline_jobs"] = len(met)
            out["deadlines_met"] = sum(met)
            out["deadline_satisfactory_ratio"] = round(sum(met) / len(met), 6)
        return out

    @property
    def measured_share(self) -> float | None:
        """Share of job-time on measured configurations (module docstring); None when the ground
        truth does not tell measured configurations or no job ran."""
        if any(j.measured_s is None for j in self.jobs):
            return None
        held = sum(j.held_s for j in self.jobs)
        return sum(j.measured_s or 0.0 for j in self.jobs) / held if held > 0 else None

    def _time_averages(self, start: float) -> tuple[float | None, float | None]:
        """Time-weighted GPU utilisation and normalised throughput (step functions between samples)."""
        s = self.samples
        if len(s) < 2:
            return None, None
        t = np.array([x.time for x in s])
        dt = np.diff(t)
        busy = np.array([x.busy_gpus for x in s[:-1]], dtype=float)
        avail = np.array([x.available_gpus for x in s[:-1]], dtype=float)
        thr = np.array([x.throughput for x in s[:-1]], dtype=float)
        mask = t[:-1] >= start
        span = float(dt[mask].sum())
        if span <= 0:
            return None, None
        cap = float((avail * dt)[mask].sum())
        util = float((busy * dt)[mask].sum()) / cap if cap > 0 else None
        return (None if util is None else round(util, 6)), round(float((thr * dt)[mask].sum()) / span, 6)


def _jct_stats(jobs: Sequence[JobRecord]) -> dict[str, Any]:
    jct = np.array([j.jct_s for j in jobs if j.jct_s is not None], dtype=float)
    queue = np.array([j.queue_s for j in jobs if j.queue_s is not None], dtype=float)

    def stat(a: np.ndarray, fn: Any) -> float | None:
        return None if a.size == 0 else round(float(fn(a)), 3)
    return {"finished": int(jct.size), "unfinished": len(jobs) - int(jct.size),
            "avg_jct_s": stat(jct, np.mean), "p50_jct_s": stat(jct, lambda a: np.percentile(a, 50)),
            "p99_jct_s": stat(jct, lambda a: np.percentile(a, 99)), "avg_queue_s": stat(queue, np.mean)}


__all__ = ["JobRecord", "Sample", "SimResult"]

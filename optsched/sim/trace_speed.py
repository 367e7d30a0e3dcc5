"""A trace's own durations as ground truth (issue 17): each job's true speed at its request.

The Rubick workload traces carry, next to the work (``steps``), the job's ``duration``: ``steps`` x
the iteration time of the requested configuration in the system that recorded the trace (ratio 1.000
against the measured tables for every model with >= 50 steps). Where the ground truth has to
extrapolate the requested configuration (Eq. 1 calibrated, e.g. ViT ZeRO-DP on 2 GPUs: 0.222 s per
iteration against the trace's 0.085 s), that duration is better evidence of the job's speed than
the model. So the simulator may *anchor* every job to its trace:

* **Requested configuration** (:func:`requested_configuration`): the requested plan on the packed
  placement of the requested GPUs (:func:`optsched.core.pool.packed_placement`) on the first node
  type the job may use that has GPUs, with the requested CPUs (or the default share) spread over
  the GPUs. This is also what the simulator's normalised throughput divides by.
* **Anchor**: its true iteration time is ``duration / steps``; every other configuration of the job
  runs at ``duration / steps x truth(config) / truth(request)``, i.e. the ground truth's time
  multiplied by the job's factor ``duration / steps / truth(request)`` (:attr:`TraceSpeeds.scales`).
  The ratio between two configurations of one job stays the ground truth's; only its level moves.
  The factor changes what jobs advance by, never what policies believe (they plan with the fitted
  model; DESIGN.md, "Ground truth vs. what the scheduler believes").
* **Not anchored**: a job without a recorded duration, with a duration of 0, without a requested
  plan, or whose request the ground truth cannot run (it keeps the ground truth's time).
* **Implausible** (bad input): a job whose ``duration / steps`` is more than :data:`PLAUSIBLE_FACTOR`
  (10) times away from the ground truth's time at its request, either way, is not anchored either,
  and one warning names the rows. In the Rubick traces these are one-step jobs with durations
  below one iteration: ``steps`` counts iterations rounded up, so with few steps ``duration / steps``
  understates the time of one (e.g. LLaMA-30B 0.007 s for one step of about 2.2 s).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any, Mapping

from optsched.core.errors import OptschedError, ValidationError
from optsched.core.hardware import Cluster
from optsched.core.job import Job
from optsched.core.plan import ExecutionPlan
from optsched.core.pool import packed_placement
from optsched.sim.traces.trace import Trace
from optsched.sim.truth_source import IterationTimeSource

log = logging.getLogger(__name__)

#: how far (either way) a trace's time per iteration may be from the ground truth's before it is
#: called implausible and not used
PLAUSIBLE_FACTOR = 10.0
#: implausible rows named in the warning (the rest are counted)
_NAMED_ROWS = 20


def requested_configuration(job: Job, cluster: Cluster
                            ) -> tuple[str, ExecutionPlan, tuple[int, ...], float] | None:
    """(GPU type, plan, GPUs per node, CPUs per GPU) of ``job``'s request (module docstring), or None
    when the job has no requested plan or no node of a type it may use has GPUs."""
    if job.requested_plan is None:
        return None
    for n in cluster.nodes:
        if (job.gpu_type and n.gpu_type != job.gpu_type) or n.num_gpus < 1:
            continue
        shape = packed_placement(job.requested_gpus, n.num_gpus)
        cpus = job.cpus_or_default(n.num_cpus / n.num_gpus) / job.requested_gpus
        return n.gpu_type, job.requested_plan, shape, cpus
    return None


@dataclass(frozen=True)
class TraceSpeeds:
    """The outcome of anchoring a trace (module docstring). ``scales`` maps every anchored job to the
    factor on the ground truth's iteration times; the counts say how many jobs carried a duration,
    were anchored, or were left out and why; ``implausible`` holds ``(row, job, trace s/iter, truth
    s/iter)`` of the rows left out as implausible."""

    jobs: int
    with_duration: int
    scales: Mapping[str, float] = field(default_factory=dict)
    zero_duration: int = 0
    no_request: int = 0
    implausible: tuple[tuple[int, str, float, float], ...] = ()

    @property
    def anchored(self) -> int:
        return len(self.scales)

    def to_dict(self) -> dict[str, Any]:
        """The block ``summary.json`` and the benchmarks report."""
        return {"jobs": self.jobs, "with_duration": self.with_duration, "anchored": self.anchored,
                "zero_duration": self.zero_duration, "no_request": self.no_request,
                "implausible": len(self.implausible),
                "implausible_rows": [row for row, _, _, _ in self.implausible]}

    def describe(self) -> str:
        """One line for the command line."""
        left = [f"{n} {why}" for n, why in ((len(self.implausible), "implausible (> 10x from the ground truth)"),
                                            (self.zero_duration, "with duration 0"),
                                            (self.no_request, "whose request the ground truth cannot run"))
                if n]
        return (f"{self.anchored} of {self.jobs} jobs run at their trace's own speed"
                + (f"; not used: {', '.join(left)}" if left else ""))


def trace_speeds(trace: Trace, truth: IterationTimeSource, cluster: Cluster, *,
                 plausible_factor: float = PLAUSIBLE_FACTOR) -> TraceSpeeds:
    """Anchor every job of ``trace`` that carries a duration to it (module docstring). Logs one
    warning naming the implausible rows. ``truth`` is asked once per anchored job at its request
    (a measured ground truth counts these calls in its coverage)."""
    if not isinstance(trace, Trace):
        raise ValidationError(f"trace_speeds: trace must be a Trace, got {type(trace).__name__}")
    if not (isinstance(plausible_factor, (int, float)) and plausible_factor > 1 and math.isfinite(plausible_factor)):
        raise ValidationError(f"trace_speeds: plausible_factor must be a finite number > 1, got {plausible_factor!r}")
    jobs = {j.name: j for j in trace.jobs}
    scales: dict[str, float] = {}
    zero = no_request = 0
    implausible: list[tuple[int, str, float, float]] = []
    for d in trace.durations:
        job = jobs[d.job]
        if d.seconds <= 0:
            zero += 1
            continue
        request = requested_configuration(job, cluster)
        if request is None:
            no_request += 1
            continue
        gpu_type, plan, shape, cpus = request
        try:
            modelled = float(truth.iteration_time(job.model, gpu_type, plan, shape, cpus))
        except OptschedError:
            no_request += 1
            continue
        observed = d.seconds / job.total_iterations
        ratio = observed / modelled
        if not 1.0 / plausible_factor <= ratio <= plausible_factor:
            implausible.append((d.row, d.job, observed, modelled))
            continue
        scales[d.job] = ratio
    if implausible:
        named = "; ".join(f"row {row} ({job}: {obs:.4g} s/iteration, ground truth {mod:.4g})"
                          for row, job, obs, mod in implausible[:_NAMED_ROWS])
        more = len(implausible) - _NAMED_ROWS
        hint = (" (with few steps, duration/steps understates one iteration when steps were rounded up)"
                if any(obs < mod for _, _, obs, mod in implausible) else "")
        log.warning("%s: %d job(s) whose duration/steps is more than %gx from the ground truth's iteration time "
                    "at their request keep the ground truth's time: %s%s%s", trace.source or trace.name,
                    len(implausible), plausible_factor, named, f"; and {more} more" if more > 0 else "", hint)
    return TraceSpeeds(len(trace.jobs), len(trace.durations), scales, zero, no_request, tuple(implausible))


__all__ = ["PLAUSIBLE_FACTOR", "TraceSpeeds", "requested_configuration", "trace_speeds"]

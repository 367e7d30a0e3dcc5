"""Simulator settings (capacity-change events are :class:`optsched.core.events.CapacityChange`).

Defaults come from the papers: a reconfiguration costs 78 s (Rubick Sec. 7.3, "the average time spent
on reconfiguration is 78 seconds"), a preempted job pays 63 s to restart (the restart overhead used
for the simulator, DESIGN.md / issue text), and a job relaunched by the scheduler saves a checkpoint
before it exits (Rubick Sec. 6, "When relaunching a job, Rubick instructs the job to save a checkpoint
before exiting"), so by default no progress is lost.

Choices where the papers are silent (each tested in ``tests/test_sim_engine.py``):

* **Rounds** run at every arrival and completion (``rounds_on_events``) and every
  ``round_interval_s`` while there is work; events at the same instant share one round.
  ``min_round_gap_s`` > 0 rate-limits event rounds (a production scheduler's debounce): an event
  closer than that to the previous round defers the round to ``previous + min_round_gap_s``.
* **First start** of a job costs ``start_overhead_s`` (default 0: the papers charge the 78 s for
  *reconfigurations*, and a trace's submit-to-finish times already hold whatever a first start cost
  when they were recorded; the Rubick artifact's simulator charges 260 s, see
  :mod:`optsched.sim.presets`); a job started again after a preemption pays ``preempt_restart_s``; a
  running job whose plan or placement (GPUs, CPUs or memory on any node) changes pays
  ``reconfig_overhead_s``, except a *trim* (only its CPUs or memory change, the same plan and GPUs on
  the same nodes), which a cluster applies in place and which pays ``trim_overhead_s`` (default 0;
  issue 16, item 5). During an overhead the job holds its new resources and makes no progress.
* **Profiling** (``profiling_s``, default 0 = off; ``profiling_scope``): the first job of each model
  type waits ``profiling_s`` for its model to be profiled before it reaches a round, and so does every
  job of that model submitted meanwhile (Rubick Sec. 7.3: "workload profiling only takes an average of
  210 seconds", :data:`RUBICK_PROFILING_S`); ``profiling_scope`` ``rubick`` (default) limits it to
  Rubick's policies, ``all`` charges every policy (:mod:`optsched.sim.engine`, "Profiling").
* **Lost progress.** With ``checkpoint_on_preempt`` false, a preempted job keeps only the progress up
  to its last periodic checkpoint, taken every ``checkpoint_interval_s`` of wall time since its
  allocation was last applied (a relaunch always starts from a checkpoint); 0 disables periodic
  checkpoints, so the whole segment is lost.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from optsched.core.checks import require_number, require_seed
from optsched.core.errors import ValidationError

#: Rubick Sec. 7.3: average reconfiguration time per job.
RECONFIG_OVERHEAD_S = 78.0
#: restart overhead of a preempted job.
PREEMPT_RESTART_S = 63.0
#: Rubick Sec. 7.3: "workload profiling only takes an average of 210 seconds" per model type.
RUBICK_PROFILING_S = 210.0
#: which policies pay ``profiling_s``
PROFILING_SCOPES = ("rubick", "all")
#: default periodic round interval.
ROUND_INTERVAL_S = 300.0


@dataclass(frozen=True)
class SimConfig:
    """Settings of one simulation (module docstring). ``max_time_s`` stops the run early (unfinished
    jobs are reported as such); ``seed`` seeds the policy's solver."""

    round_interval_s: float = ROUND_INTERVAL_S
    reconfig_overhead_s: float = RECONFIG_OVERHEAD_S
    preempt_restart_s: float = PREEMPT_RESTART_S
    checkpoint_on_preempt: bool = True
    checkpoint_interval_s: float = 1800.0
    rounds_on_events: bool = True
    min_round_gap_s: float = 0.0
    max_time_s: float | None = None
    seed: int = 0
    start_overhead_s: float = 0.0
    trim_overhead_s: float = 0.0
    profiling_s: float = 0.0
    profiling_scope: str = "rubick"

    def __post_init__(self) -> None:
        for name in ("reconfig_overhead_s", "preempt_restart_s", "checkpoint_interval_s", "min_round_gap_s",
                     "start_overhead_s", "trim_overhead_s", "profiling_s"):
            require_number("simulation config", name, getattr(self, name), 0.0)
        require_number("simulation config", "round_interval_s", self.round_interval_s, 0.0)
        if not self.round_interval_s > 0 or math.isinf(self.round_interval_s):
            raise ValidationError(f"simulation config: round_interval_s must be a positive finite number of "
                                  f"seconds, got {self.round_interval_s!r}")
        if self.max_time_s is not None:
            require_number("simulation config", "max_time_s", self.max_time_s, 0.0)
        for name in ("checkpoint_on_preempt", "rounds_on_events"):
            if not isinstance(getattr(self, name), bool):
                raise ValidationError(f"simulation config: {name} must be true or false")
        if self.profiling_scope not in PROFILING_SCOPES:
            raise ValidationError(f"simulation config: profiling_scope must be one of {', '.join(PROFILING_SCOPES)}, "
                                  f"got {self.profiling_scope!r}")
        require_seed("simulation config", self.seed)


__all__ = ["PREEMPT_RESTART_S", "PROFILING_SCOPES", "RECONFIG_OVERHEAD_S", "ROUND_INTERVAL_S", "RUBICK_PROFILING_S",
           "SimConfig"]

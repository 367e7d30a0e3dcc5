"""Named simulator settings (issue 17): the Rubick paper's and the Rubick artifact's, so that a
comparison can be run under either and every difference explained. ``docs/simulation.md``
("Settings presets") lists the same numbers with their sources; a test checks that they agree.

* ``rubick-paper``: our defaults, which follow the paper. A reconfiguration costs 78 s (Rubick
  Sec. 7.3, "the average time spent on reconfiguration is 78 seconds"), a restart after a
  preemption 63 s (:data:`optsched.sim.config.PREEMPT_RESTART_S`), a first start nothing; rounds at
  every arrival and completion and every 300 s.
* ``rubick-artifact``: the authors' simulator (``simulator/`` of the Morphling/Rubick MLSys'25
  artifact). Its README runs every trace as ``morphling_exp <trace> morphling 60 ...``, the 60 being
  the scheduling interval: rounds only on a fixed 60 s tick (``rounds_on_events`` false: a job that
  arrives or a GPU that frees waits for the next tick). Its ``Job.reallocate`` sets
  ``reallocate_time = 260`` whenever a job's placement changes, the first placement included, so a
  first start, a restart after preemption and a reconfiguration all cost 260 s. (It charges nothing
  for a plan change on an unchanged placement; our engine charges every reconfiguration alike.)
* ``crius-paper`` (``--kind crius`` only): the large-scale simulation of Crius Sec. 8.4, Fig. 16: "Cluster
  throughput of the large-scale simulation in one-week Philly trace with heavy workloads". Rounds only every 300 s
  (Fig. 16: "The time interval for each scheduling round is set to five minutes"); search depth 3 (Sec. 8.4: "we set
  the search depth to 3"); the workload (``request``, applied where the command line does not set it): the
  synthetic Philly-calibrated trace at the arrival rate of the public Philly trace's busiest week
  (:data:`CRIUS_WEEK_ARRIVALS_PER_HOUR`: the 7-day window from 2017-10-16 holds 14,185 jobs, 84.43 jobs/h; a
  constant here, the package does not read the trace), durations clipped at the one-week window
  (:data:`CRIUS_WEEK_MAX_DURATION_H`; ours, the paper clips none: 0.19% of that week's jobs run longer, up to
  764 h), and the week's jobs at that rate (:data:`CRIUS_WEEK_JOBS`). The paper gives no overheads: ours are
  kept (reconfiguration 78 s, restart 63 s). At seed 0 the trace offers 0.98 of the 1,280 GPUs' time over its
  week; queues build from the fifth day on, as the longest jobs accumulate, so fewer jobs at the same rate do not
  queue (the first 1,000 queue FCFS 0.04 h). One policy's week takes about 2 minutes on one core (``fcfs`` 103 s,
  ``crius`` 109 s wall time of the simulation).
* ``crius-paper-rate`` (``--kind crius`` only): the earlier, uncontended reading of the same section, kept so its
  documented numbers stay reproducible: the arrival rate of Sec. 8.1 ("two-week traces of 13,000+ jobs from the
  production Philly trace": 13,000 jobs / 336 h = 38.69 jobs/h) for one day of arrivals (929 jobs), durations
  clipped at one day (our default), search depth 3, the same rounds and overheads. It offers about 0.25 of the
  GPUs' time and nothing queues.

* ``lyra-thesis`` (``--kind lyra`` only): the Lyra thesis' simulation (Sec. 3.7.1-3.7.2): its simulator
  settings, and the kind's own options (trace window, job mix, cluster size, the Baseline without loaning)
  and default policies, each with the text it comes from.

A preset's ``kind`` (None: any) is the only kind it applies to; ``request`` holds settings of the simulated
workload (fields of :class:`~optsched.sim.setup.SimulationRequest` or options of the kind) with their
``request_sources``, and ``policies`` the kind's policies it runs when none are named (their source under
``request_sources["policies"]``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Mapping

from optsched.core.errors import UnknownNameError, ValidationError
from optsched.sim.config import PREEMPT_RESTART_S, RECONFIG_OVERHEAD_S, ROUND_INTERVAL_S, SimConfig

#: the artifact's overhead for every placement change (``Job.reallocate``: ``reallocate_time = 260``)
ARTIFACT_PLACEMENT_CHANGE_S = 260.0
#: the artifact's scheduling interval (its README: ``morphling_exp <trace> morphling 60 ...``)
ARTIFACT_ROUND_INTERVAL_S = 60.0
#: Crius Fig. 16: "The time interval for each scheduling round is set to five minutes"
CRIUS_ROUND_INTERVAL_S = 300.0
#: Crius Sec. 8.1: "two-week traces of 13,000+ jobs": jobs per hour
CRIUS_ARRIVALS_PER_HOUR = round(13_000 / (14 * 24), 2)
#: one day of arrivals at that rate
CRIUS_DAY_JOBS = round(24 * 13_000 / (14 * 24))
#: Crius Fig. 16, "one-week Philly trace with heavy workloads": the arrival rate of the public Philly trace's busiest
#: 7-day window (``philly_window(philly.csv, 7)``, from 2017-10-16: 14,185 jobs / 168 h), jobs per hour
CRIUS_WEEK_ARRIVALS_PER_HOUR = round(14_185 / (7 * 24), 2)
#: durations clipped at the one-week window (hours; the paper clips none, our default clips at 24 h)
CRIUS_WEEK_MAX_DURATION_H = 7 * 24.0
#: our clip of the one-day setting (hours): ``optsched.sim.traces.crius.DEFAULT_MAX_DURATION_S``
CRIUS_DAY_MAX_DURATION_H = 24.0
#: jobs of the one-week setting: the whole busiest week at its rate (14,185); contention builds only after four
#: days of arrivals, when the longest jobs have accumulated (docs/simulation.md, "Crius: the paper's setting")
CRIUS_WEEK_JOBS = 14_185


@dataclass(frozen=True)
class SimPreset:
    """A named set of :class:`~optsched.sim.config.SimConfig` values (``settings``) with where each
    number comes from (``sources``, same keys)."""

    name: str
    description: str
    settings: Mapping[str, Any]
    sources: Mapping[str, str]
    kind: str | None = None
    request: Mapping[str, Any] = field(default_factory=dict)
    request_sources: Mapping[str, str] = field(default_factory=dict)
    policies: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if (self.request or self.policies) and self.kind is None:
            raise ValidationError(f"preset {self.name!r}: a workload and policies belong to one round kind (kind)")
        if set(self.request_sources) != set(self.request) | ({"policies"} if self.policies else set()):
            raise ValidationError(f"preset {self.name!r}: every workload setting needs a source")
        object.__setattr__(self, "request", MappingProxyType(dict(self.request)))
        object.__setattr__(self, "request_sources", MappingProxyType(dict(self.request_sources)))
        known = set(SimConfig.__dataclass_fields__)
        unknown = sorted(set(self.settings) - known)
        if unknown:
            raise ValidationError(f"preset {self.name!r}: unknown setting(s) {', '.join(unknown)}")
        if set(self.sources) != set(self.settings):
            raise ValidationError(f"preset {self.name!r}: every setting needs a source")
        object.__setattr__(self, "settings", MappingProxyType(dict(self.settings)))
        object.__setattr__(self, "sources", MappingProxyType(dict(self.sources)))

    def config(self, base: SimConfig = SimConfig(), **overrides: Any) -> SimConfig:
        """``base`` with this preset's settings, then ``overrides`` (values of None are ignored)."""
        return replace(base, **{**self.settings, **{k: v for k, v in overrides.items() if v is not None}})


#: the simulator settings of both Crius presets (Fig. 16 and our overheads)
_CRIUS_SETTINGS = {"round_interval_s": CRIUS_ROUND_INTERVAL_S, "rounds_on_events": False, "start_overhead_s": 0.0,
                   "reconfig_overhead_s": RECONFIG_OVERHEAD_S, "preempt_restart_s": PREEMPT_RESTART_S}
_CRIUS_SOURCES = {"round_interval_s": "Crius Fig. 16: 'The time interval for each scheduling round is set to five "
                                      "minutes'",
                  "rounds_on_events": "Crius Fig. 16: rounds on the five-minute interval",
                  "start_overhead_s": "our default (the paper gives none)",
                  "reconfig_overhead_s": "our default (the paper gives none)",
                  "preempt_restart_s": "our default (the paper gives none)"}

PRESETS: Mapping[str, SimPreset] = MappingProxyType({p.name: p for p in (
    SimPreset("rubick-paper", "the Rubick paper's settings (our defaults)",
              {"round_interval_s": ROUND_INTERVAL_S, "rounds_on_events": True, "start_overhead_s": 0.0,
               "reconfig_overhead_s": RECONFIG_OVERHEAD_S, "preempt_restart_s": PREEMPT_RESTART_S},
              {"round_interval_s": "our default; the paper gives no interval",
               "rounds_on_events": "our default (event-driven rounds)",
               "start_overhead_s": "our default: a trace's own times already hold a first start's cost",
               "reconfig_overhead_s": "Rubick Sec. 7.3: 'the average time spent on reconfiguration is 78 seconds'",
               "preempt_restart_s": "our default restart cost (optsched.sim.config.PREEMPT_RESTART_S)"}),
    SimPreset("rubick-artifact", "the Rubick artifact's simulator",
              {"round_interval_s": ARTIFACT_ROUND_INTERVAL_S, "rounds_on_events": False,
               "start_overhead_s": ARTIFACT_PLACEMENT_CHANGE_S, "reconfig_overhead_s": ARTIFACT_PLACEMENT_CHANGE_S,
               "preempt_restart_s": ARTIFACT_PLACEMENT_CHANGE_S},
              {"round_interval_s": "artifact README: 'morphling_exp <trace> morphling 60 ...' (interval 60 s)",
               "rounds_on_events": "artifact simulator: Cluster.step runs the policy once per interval, only",
               "start_overhead_s": "artifact simulator: Job.reallocate sets reallocate_time = 260 on every "
                                   "placement change, the first included",
               "reconfig_overhead_s": "artifact simulator: the same 260 s on a placement change",
               "preempt_restart_s": "artifact simulator: the same 260 s when a preempted job is placed again"}),
    SimPreset("crius-paper", "the Crius paper's large-scale simulation: one-week Philly trace, heavy workloads "
                             "(Sec. 8.4, Fig. 16; --kind crius)",
              _CRIUS_SETTINGS, _CRIUS_SOURCES, kind="crius",
              request={"trace": "synthetic", "jobs": CRIUS_WEEK_JOBS, "arrival_rate": CRIUS_WEEK_ARRIVALS_PER_HOUR,
                       "max_duration": CRIUS_WEEK_MAX_DURATION_H, "search_depth": 3},
              request_sources={
                  "trace": "Crius Sec. 8.1: Philly durations (our Philly-calibrated sampler)",
                  "jobs": "Crius Fig. 16: 'one-week Philly trace' (ours: the week's jobs at the rate below)",
                  "arrival_rate": "Crius Fig. 16: 'one-week Philly trace with heavy workloads': the public Philly "
                                  "trace's busiest 7-day window (from 2017-10-16), 14,185 jobs / 168 h",
                  "max_duration": "ours: durations clipped at the one-week window (the paper clips none)",
                  "search_depth": "Crius Sec. 8.4: 'we set the search depth to 3'"}),
    SimPreset("crius-paper-rate", "the Sec. 8.1 arrival rate for one day, uncontended (Crius Sec. 8.1, 8.4; "
                                  "--kind crius)",
              _CRIUS_SETTINGS, _CRIUS_SOURCES, kind="crius",
              request={"trace": "synthetic", "jobs": CRIUS_DAY_JOBS, "arrival_rate": CRIUS_ARRIVALS_PER_HOUR,
                       "max_duration": CRIUS_DAY_MAX_DURATION_H, "search_depth": 3},
              request_sources={"trace": "Crius Sec. 8.1: Philly durations (our Philly-calibrated sampler)",
                               "jobs": "one day of arrivals at the Sec. 8.1 rate (ours: Fig. 16 runs a week)",
                               "arrival_rate": "Crius Sec. 8.1: 'two-week traces of 13,000+ jobs' = 13,000 / 336 h",
                               "max_duration": "ours: one day (DEFAULT_MAX_DURATION_S; the paper clips none)",
                               "search_depth": "Crius Sec. 8.4: 'we set the search depth to 3'"}),
    SimPreset("lyra-thesis", "the Lyra thesis' simulation (ch. 3, Sec. 3.7.1-3.7.2; --kind lyra)",
              {"round_interval_s": 300.0, "rounds_on_events": True, "min_round_gap_s": 60.0, "start_overhead_s": 0.0,
               "reconfig_overhead_s": 0.0, "preempt_restart_s": 63.0, "checkpoint_on_preempt": False,
               "checkpoint_interval_s": 0.0},
              {"round_interval_s": "Sec. 3.7.1: 'Lyra's resource orchestrator runs every five minutes'",
               "rounds_on_events": "Sec. 3.5.2: 'by periodically performing scheduling in high frequency' (rounds on "
                                   "arrivals and completions too)",
               "min_round_gap_s": "ours: event rounds at most one a minute (the text gives no figure; run time)",
               "start_overhead_s": "Sec. 3.7.1: 'Job's running time in the simulator is derived from actual training "
                                   "time in the traces'",
               "reconfig_overhead_s": "Sec. 3.7.2: 'the overhead of placing and removing workers ... which the "
                                      "simulator does not capture'",
               "preempt_restart_s": "Sec. 3.7.5: 'The average overhead is 63 seconds, which is adopted in our "
                                    "large-scale simulation'",
               "checkpoint_on_preempt": "Sec. 3.7.3: 'in our default setup we have made a conservative assumption "
                                        "that no jobs have checkpointing'",
               "checkpoint_interval_s": "Sec. 3.7.3: no jobs have checkpointing (a preempted job restarts from the "
                                        "beginning)"},
              kind="lyra",
              request={"window_days": 15.0, "window_start": "busiest", "fungible_load": 0.21, "elastic_load": 0.36,
                       "elastic_count": 0.05, "offered_load": 0.82, "no_loaning": "fifo", "usage_burst": 0.02,
                       "elastic_on_inference": "yes"},
              request_sources={
                  "window_days": "Sec. 3.7.1: 'a 15-day job trace' (of the Philly trace with --trace PHILLY.csv)",
                  "window_start": "ours: the busiest window of the trace (the thesis' trace is from a busy production "
                                  "cluster, Fig. 3.2)",
                  "fungible_load": "Sec. 3.7.1, Basic: 'fungible jobs are used for capacity loaning (21% of total "
                                   "training load)'",
                  "elastic_load": "Sec. 3.7.1, Basic: 'elastic jobs ... (~5% of all jobs accounting for 36% of total "
                                  "training resources)'",
                  "elastic_count": "Sec. 3.7.1, Basic: '~5% of all jobs'",
                  "offered_load": "Fig. 3.2: 'The cluster has ~3,500 GPUs, and the average utilization is 82%'",
                  "no_loaning": "Sec. 3.7.1: 'Baseline: A FIFO cluster scheduler with no capacity loaning or elastic "
                                "scaling'",
                  "elastic_on_inference": "Sec. 3.5.3: 'If the job is elastic, we prefer to place it on inference "
                                          "servers in order to maximize the potential for scaling in during "
                                          "reclaiming and reduce job preemptions' (every elastic job may use loaned "
                                          "servers, not only those drawn fungible)",
                  "usage_burst": "Sec. 3.7.1, Headroom in inference cluster: 'we find that the median inference "
                                 "traffic burst within five minutes is ~2% of the inference cluster capacity based on "
                                 "our GPU utilization trace' (the synthetic series' median 5-minute change; dropped "
                                 "with --usage CSV|none)",
                  "policies": "Table 3.5: Baseline (fifo), Lyra (Basic: loaning and scaling), Lyra with loaning only "
                              "(row 9: lyra-loan)"},
              policies=("fifo", "lyra", "lyra-loan")),
)})


def get_preset(name: str) -> SimPreset:
    """The preset called ``name``; ``UnknownNameError`` listing the known ones otherwise."""
    try:
        return PRESETS[name]
    except (KeyError, TypeError):
        raise UnknownNameError("simulation preset", name, sorted(PRESETS)) from None


__all__ = ["ARTIFACT_PLACEMENT_CHANGE_S", "ARTIFACT_ROUND_INTERVAL_S", "CRIUS_ARRIVALS_PER_HOUR", "CRIUS_DAY_JOBS",
           "CRIUS_DAY_MAX_DURATION_H", "CRIUS_ROUND_INTERVAL_S", "CRIUS_WEEK_ARRIVALS_PER_HOUR", "CRIUS_WEEK_JOBS",
           "CRIUS_WEEK_MAX_DURATION_H", "PRESETS", "SimPreset", "get_preset"]

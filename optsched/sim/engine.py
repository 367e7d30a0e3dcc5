"""The discrete-event cluster simulator (DESIGN.md, "sim (event loop) -> RoundProblem -> policy ->
Decision -> sim applies it"): the event loop. What jobs and outside work hold, and how decisions,
capacity changes and pool targets change it, is the ledger's (:mod:`optsched.sim.ledger`).

Time jumps from event to event: job arrivals, job completions, periodic round ticks, deferred rounds,
capacity changes (:class:`~optsched.core.events.CapacityChange`) and pool targets
(:class:`~optsched.core.events.PoolTarget`). Between two events every running job advances at the
*ground-truth* iteration time of its plan and placement (:mod:`optsched.sim.ground_truth`), while the
policy decides from its own (fitted) model. The simulator reaches a policy only through
:class:`~optsched.core.policy.Policy`: each round it builds a problem of the policy's kind (the kind's
registered problem class, :mod:`optsched.core.kinds`, with the run's ``round_fields``, e.g. Rubick's
tenant quotas) and calls ``policy.decide(problem)``; the ledger checks and applies decisions whose
payload is per-job allocations. A capacity change or pool target is applied by the ledger and a round
follows. Rounds, overheads and lost progress follow :mod:`optsched.sim.config`; what is measured
follows :mod:`optsched.sim.metrics`.

A round whose policy reports ``InfeasibleError`` (e.g. guarantees that cannot all be met) keeps the
current allocations; it is logged and counted in ``failed_rounds``. When jobs are queued on an idle
cluster with no arrival or capacity change to come and the policy starts nothing for
:data:`STALL_ROUNDS` rounds in a row, the run stops and says so (the jobs count as unfinished).

**Per-job speed** (``time_scale``): a job named there advances at the ground truth's iteration time
times its factor, e.g. the factors of :func:`optsched.sim.trace_speed.trace_speeds` that anchor each
job to its trace's own duration. Policies never see the factors.

**Profiling** (``SimConfig.profiling_s``, default 0): Rubick profiles a new model type before it
schedules it (Sec. 3, "First, profiling and modeling performance for new model types (①); second,
allocating resources ..."; Sec. 4, "This 7-tuple is specific to each model type before scheduling";
Sec. 7.3, "workload profiling only takes an average of 210 seconds to collect performance values from
7 sampled tests on an 8-A800 server"). So the first job of a model type, and any job of that model
submitted while it is profiled, reaches the rounds only ``profiling_s`` after the first one's
submission (:func:`profiling_ready_times`); JCT still counts from submission. Profiling runs on a
server of its own (the paper's 8-A800 test server): it holds none of the simulated cluster. It applies
to the policies ``profiling_scope`` names: ``rubick`` (default: Rubick and its variants, the only
policies the text says profile), ``all``.

**Measured share**: when the ground truth can tell measured configurations
(:class:`MeasuredConfigurations`, e.g. :class:`~optsched.sim.ground_truth.MeasuredGroundTruth`), every
job record carries the seconds it held an allocation and the seconds of those on a measured
configuration, and the summary gives ``measured_share``.

Cost per event: O(running jobs) for progress and the next completion, plus one policy call per round.
"""

from __future__ import annotations

import logging
import math
import time as wallclock
from typing import Any, Mapping, Sequence

from optsched.core.errors import InfeasibleError, OptschedError, ValidationError
from optsched.core.events import CapacityChange, PoolTarget
from optsched.core.hardware import Cluster
from optsched.core.job import Job
from optsched.core.kinds import round_kind
from optsched.core.policy import Policy
from optsched.sim.config import SimConfig
from optsched.sim.ledger import ClusterLedger, JobState, SimulationError
from optsched.sim.metrics import JobRecord, Sample, SimResult
from optsched.sim.progress import Progress
from optsched.sim.trace_speed import requested_configuration
from optsched.sim.truth_source import IterationTimeSource, MeasuredConfigurations

log = logging.getLogger(__name__)

_EPS = 1e-9
#: consecutive rounds on an idle cluster with queued jobs and no future events before a run stops
STALL_ROUNDS = 10


#: the policies that plan with Rubick's performance model and so profile a new model type first (Rubick
#: Sec. 3: "profiling and modeling performance for new model types"); ``profiling_scope="rubick"``
PROFILING_POLICIES = frozenset({"rubick", "rubick-e", "rubick-r", "rubick-n", "rubick-exact", "exact"})


def profiling_ready_times(jobs: Sequence[Job], policy: Policy, config: SimConfig) -> dict[str, float]:
    """When each job reaches the rounds (module docstring, "Profiling"): ``submit_time``, except that with
    ``config.profiling_s`` > 0 and a policy in ``config.profiling_scope`` the model of the first-submitted
    job of each model type is profiled for ``profiling_s`` from that job's submission, and no job of that
    model reaches a round before the profile is done: ready = max(submit, first submit of the model +
    profiling_s)."""
    ready = {j.name: j.submit_time for j in jobs}
    applies = config.profiling_s > 0 and (config.profiling_scope == "all" or (
        config.profiling_scope == "rubick" and policy.kind == "rubick" and policy.name in PROFILING_POLICIES))
    if not applies:
        return ready
    first: dict[str, float] = {}
    for j in jobs:
        first[j.model] = min(first.get(j.model, math.inf), j.submit_time)
    return {j.name: max(j.submit_time, first[j.model] + config.profiling_s) for j in jobs}


class Simulator:
    """One run of ``policy`` on ``jobs`` over ``cluster`` with ``ground_truth`` (module docstring).

    ``round_fields`` are the kind-specific fields given to every round (keyword arguments of the
    kind's problem class, e.g. ``{"quotas": ...}`` for Rubick); ``capacity_changes`` and
    ``pool_targets`` are applied at their times; ``time_scale`` maps job names to factors on their
    ground-truth iteration times (module docstring). ``run()`` may be called once."""

    def __init__(self, cluster: Cluster, jobs: Sequence[Job], policy: Policy, ground_truth: IterationTimeSource,
                 config: SimConfig = SimConfig(), *, round_fields: Mapping[str, Any] | None = None,
                 capacity_changes: Sequence[CapacityChange] = (), trace_name: str = "",
                 ground_truth_name: str = "", pool_targets: Sequence[PoolTarget] = (),
                 time_scale: Mapping[str, float] | None = None) -> None:
        if not isinstance(cluster, Cluster):
            raise ValidationError("simulator: cluster must be a Cluster")
        if not isinstance(config, SimConfig):
            raise ValidationError("simulator: config must be a SimConfig")
        names = [j.name for j in jobs]
        dup = sorted({n for n in names if names.count(n) > 1}) if len(set(names)) != len(names) else []
        if dup:
            raise ValidationError(f"simulator: job name(s) {', '.join(map(repr, dup[:5]))} used more than once")
        node_names = {n.name for n in cluster.nodes}
        for c in capacity_changes:
            if c.node not in node_names:
                raise ValidationError(f"capacity change at {c.time:g} s names node {c.node!r}, which is not in "
                                      f"cluster {cluster.name!r}")
        for t in pool_targets:
            for n in t.nodes:
                if n not in node_names:
                    raise ValidationError(f"pool target at {t.time:g} s names node {n!r}, which is not in "
                                          f"cluster {cluster.name!r}")
        if not isinstance(policy, Policy):
            raise ValidationError(f"simulator: the policy must have a name, a kind and decide(problem), got "
                                  f"{type(policy).__name__}")
        self.cluster = cluster
        self.policy = policy
        self.problem_type = round_kind(policy.kind).problem
        self.truth = ground_truth
        self.config = config
        self.round_fields = dict(round_fields or {})
        self.trace_name = trace_name
        self.truth_name = ground_truth_name or type(ground_truth).__name__
        self._states = {j.name: JobState(j) for j in sorted(jobs, key=lambda j: (j.submit_time, j.name))}
        for name, factor in (time_scale or {}).items():
            if name not in self._states:
                raise ValidationError(f"simulator: time_scale names job {name!r}, which is not in the trace")
            if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not (0 < factor < math.inf):
                raise ValidationError(f"simulator: time_scale of job {name!r} must be a positive finite number, "
                                      f"got {factor!r}")
            self._states[name].scale = float(factor)
        #: when each job becomes visible to the rounds: its submit time, or later while its model is profiled
        self._ready = profiling_ready_times(jobs, policy, config)
        self._arrivals = sorted(self._states.values(), key=lambda s: (self._ready[s.job.name], s.job.submit_time,
                                                                      s.job.name))
        self._changes = sorted(capacity_changes, key=lambda c: c.time)
        self._targets = sorted(pool_targets, key=lambda t: t.time)
        self._ledger = ClusterLedger(cluster, policy, ground_truth, config, self.problem_type, self.round_fields,
                                     [n for t in self._targets for n in t.nodes])
        #: the present jobs, read here; the ledger changes them
        self._active = self._ledger.active
        self._samples: list[Sample] = []
        self._messages: list[str] = []
        self._rounds = 0
        self._failed = 0
        self._policy_s = 0.0
        self._ran = False

    # -- the event loop -----------------------------------------------------------------------
    def run(self, progress: bool = False) -> SimResult:
        if self._ran:
            raise SimulationError("a Simulator runs once; build a new one (and a new policy) for another run")
        self._ran = True
        t0 = wallclock.perf_counter()
        cfg = self.config
        bar = Progress(len(self._states), f"{self.policy.name}", enabled=progress)
        now = 0.0
        arr_i = chg_i = tgt_i = 0
        last_round = -math.inf
        deferred = math.inf
        next_tick = math.inf
        finished = 0
        idle_rounds = 0
        while True:
            t_arr = self._ready[self._arrivals[arr_i].job.name] if arr_i < len(self._arrivals) else math.inf
            t_chg = self._changes[chg_i].time if chg_i < len(self._changes) else math.inf
            if tgt_i < len(self._targets):
                t_chg = min(t_chg, self._targets[tgt_i].time)
            t_done = min((s.finish_time(now) for s in self._active.values() if s.alloc is not None),
                         default=math.inf)
            t_next = min(t_arr, t_chg, t_done, deferred, next_tick)
            if not math.isfinite(t_next):
                break
            if cfg.max_time_s is not None and t_next > cfg.max_time_s:
                self._advance(now, cfg.max_time_s)
                now = cfg.max_time_s
                self._messages.append(f"stopped at max_time_s={cfg.max_time_s:g} with "
                                      f"{len(self._active) + len(self._arrivals) - arr_i} jobs unfinished")
                break
            self._advance(now, t_next)
            now = t_next
            event = False
            for s in list(self._active.values()):
                if s.alloc is not None and self._done(s, now):
                    self._ledger.complete(s, now)
                    finished += 1
                    event = True
            while arr_i < len(self._arrivals) and self._ready[self._arrivals[arr_i].job.name] <= now:
                s = self._arrivals[arr_i]
                self._ledger.admit(s)
                arr_i += 1
                event = True
            changed = False
            while chg_i < len(self._changes) and self._changes[chg_i].time <= now:
                self._ledger.apply_change(self._changes[chg_i], now)
                chg_i += 1
                changed = True
            while tgt_i < len(self._targets) and self._targets[tgt_i].time <= now:
                self._ledger.apply_target(self._targets[tgt_i], now)
                tgt_i += 1
                changed = True
            due = changed or now >= deferred or now >= next_tick or (event and cfg.rounds_on_events)
            if due and self._active:
                if changed or now >= last_round + cfg.min_round_gap_s - _EPS:
                    self._round(now)
                    last_round = now
                    deferred = math.inf
                elif not math.isfinite(deferred):
                    deferred = last_round + cfg.min_round_gap_s
            elif now >= deferred:
                deferred = math.inf
            if self._active:
                next_tick = (math.floor(now / cfg.round_interval_s + _EPS) + 1) * cfg.round_interval_s
            else:
                next_tick = math.inf
            self._sample(now)
            bar.update(finished)
            idle_rounds = idle_rounds + 1 if self._stalled(arr_i, chg_i, deferred) and tgt_i >= len(self._targets) \
                else 0
            if idle_rounds >= STALL_ROUNDS:
                queued = sorted(self._active)
                msg = (f"stopped at {now:g} s: {len(queued)} job(s) queued on an idle cluster with no further "
                       f"events; policy {self.policy.name!r} does not start them (first: {', '.join(queued[:5])})")
                log.warning(msg)
                self._messages.append(msg)
                break
        bar.close()
        wall = wallclock.perf_counter() - t0
        return SimResult(self.policy.name, self.trace_name, self.cluster.name, self.truth_name,
                         tuple(self._record(s) for s in self._states.values()), tuple(self._samples), self._rounds,
                         self._failed, self._policy_s, wall, (*self._ledger.messages, *self._messages))

    def _stalled(self, arr_i: int, chg_i: int, deferred: float) -> bool:
        return (bool(self._active) and all(s.alloc is None for s in self._active.values())
                and arr_i >= len(self._arrivals) and chg_i >= len(self._changes) and not math.isfinite(deferred)
                and self._rounds > 0)

    def _advance(self, t0: float, t1: float) -> None:
        """Progress every running job from ``t0`` to ``t1`` at its ground-truth rate."""
        if t1 <= t0:
            return
        for s in self._active.values():
            if s.alloc is None:
                continue
            s.gpu_seconds += s.alloc.plan.num_gpus * (t1 - t0)
            s.held_s += t1 - t0
            if s.measured:
                s.measured_s += t1 - t0
            start = max(t0, s.pause_until)
            s.overhead_s += max(0.0, min(t1, s.pause_until) - t0)
            if t1 > start:
                s.done = min(float(s.job.total_iterations), s.done + (t1 - start) / s.iter_time)

    @staticmethod
    def _done(s: JobState, now: float) -> bool:
        """Whether a running job has finished at ``now``: no iterations left, or so few that their time
        is below the resolution of the clock (the event loop could otherwise never reach it)."""
        if s.remaining <= _EPS * max(1.0, s.job.total_iterations):
            return True
        return s.pause_until <= now and s.remaining * s.iter_time <= _EPS * max(1.0, now)

    # -- rounds -------------------------------------------------------------------------------
    def _round(self, now: float) -> None:
        problem = self._ledger.problem(now)
        self._rounds += 1
        t0 = wallclock.perf_counter()
        try:
            decision = self.policy.decide(problem)
        except InfeasibleError as e:
            self._failed += 1
            log.warning("t=%.1f s: policy %s found the round infeasible; allocations kept: %s", now,
                        self.policy.name, str(e).splitlines()[0])
            return
        except OptschedError as e:
            raise SimulationError(f"round at t={now:g} s, policy {self.policy.name!r}: {e}") from e
        finally:
            self._policy_s += wallclock.perf_counter() - t0
        self._ledger.apply(problem, decision, now)

    # -- measurements -------------------------------------------------------------------------
    def _reference_throughput(self, s: JobState) -> float:
        """Ground-truth throughput of the job's request (requested plan packed on the first GPU type
        that has room for it), used to normalise; falls back to the current one when the ground truth
        cannot run the request."""
        if s.ref_thr is None:
            s.ref_thr = math.nan
            request = requested_configuration(s.job, self.cluster)
            if request is not None:
                try:
                    s.ref_thr = 1.0 / (self.truth.iteration_time(s.job.model, *request) * s.scale)
                except OptschedError:
                    pass
        return s.ref_thr

    def _sample(self, now: float) -> None:
        busy = 0
        running = 0
        thr = 0.0
        for s in self._active.values():
            if s.alloc is None:
                continue
            running += 1
            busy += s.alloc.plan.num_gpus
            if now >= s.pause_until:
                ref = self._reference_throughput(s)
                rate = 1.0 / s.iter_time
                thr += rate / ref if ref == ref and ref > 0 else 1.0
        self._samples.append(Sample(now, busy, self._ledger.available_gpus(), running, len(self._active) - running,
                                    thr))

    def _record(self, s: JobState) -> JobRecord:
        j = s.job
        return JobRecord(j.name, j.model, j.tenant, j.guaranteed, j.requested_gpus, j.submit_time, s.start, s.finish,
                         s.done, j.total_iterations, s.reconfigs, s.preempts, s.gpu_seconds, s.overhead_s,
                         s.last_plan, s.held_s, s.measured_s if self._ledger.measured is not None else None, s.trims,
                         j.deadline)


def simulate(cluster: Cluster, jobs: Sequence[Job], policy: Policy, ground_truth: IterationTimeSource,
             config: SimConfig = SimConfig(), **kwargs: object) -> SimResult:
    """Build a :class:`Simulator` and run it (keyword arguments as for the constructor plus
    ``progress``)."""
    progress = bool(kwargs.pop("progress", False))
    return Simulator(cluster, jobs, policy, ground_truth, config, **kwargs).run(progress=progress)  # type: ignore[arg-type]


__all__ = ["IterationTimeSource", "MeasuredConfigurations", "SimulationError", "Simulator", "simulate"]

"""The discrete-event cluster simulator (DESIGN.md, "sim (event loop) -> RoundProblem -> policy ->
Decision -> sim applies it").

Time jumps from event to event: job arrivals, job completions, periodic round ticks, deferred rounds
and capacity changes (:class:`~optsched.core.events.CapacityChange`). Between two events every running
job advances at the *ground-truth* iteration time of its plan and placement
(:mod:`optsched.sim.ground_truth`), while the policy decides from its own (fitted) model. The
simulator reaches a policy only through :class:`~optsched.core.policy.Policy`: each round it builds a
problem of the policy's kind (the kind's registered problem class, :mod:`optsched.core.kinds`, with
the run's ``round_fields``, e.g. Rubick's tenant quotas) and calls ``policy.decide(problem)``; it
applies decisions whose payload is per-job allocations. Rounds, overheads and lost progress follow
:mod:`optsched.sim.config`; what is measured follows :mod:`optsched.sim.metrics`.

**Capacity changes.** A change sets the share work outside the rounds holds on a node. When the jobs
running there no longer fit, some must give up their share: a policy that implements
:class:`~optsched.core.policy.Reclaimer` is asked which (given the round just before the change); its
answer must name running jobs on that node and free enough, else the run stops with
:class:`SimulationError`. A policy without it gets the default: the latest-started jobs on the node
are evicted first (then by name) until the rest fits. Evicted jobs are preempted; a round follows.

**Pool targets** (:class:`~optsched.core.events.PoolTarget`, Lyra's capacity loaning). The servers of
every target start held whole by outside work; a target lends ``count`` of them from its time on:
more than before are lent in the target's order, fewer are given back, chosen by a policy that
implements :class:`~optsched.core.policy.ServerReclaimer` (it may also shrink jobs instead of
preempting them: a scale-in, applied as a reconfiguration) or by default the servers holding the
fewest GPUs of running jobs (then the latest in the target's order); whatever still runs on a returned
server is then evicted as after a capacity change. A round follows.

**Per-job ground truth and checkpointing** (generic, used by Lyra). A ground truth that has
``job_iteration_time(job, gpu_type, plan, gpus_per_node, cpus_per_gpu)`` is asked with the job itself
(e.g. its elastic range and GPUs per worker); a job with ``checkpointing`` loses no progress when
preempted, whatever the run's configuration.

Every decision is checked before it is applied: each running or queued job of the round must appear
exactly once, and the allocations must fit every node's free GPUs, CPUs and memory; a policy that
breaks this raises :class:`SimulationError` naming the round time, the policy and the node. A round
whose policy reports ``InfeasibleError`` (e.g. guarantees that cannot all be met) keeps the current
allocations; it is logged and counted in ``failed_rounds``. A ground-truth source that cannot run the
chosen plan where the policy put it (the policy's model believed it fits) fails that launch: the job
goes back to the queue, and the event is logged and kept in the result's messages. When jobs are
queued on an idle cluster with no arrival or capacity change to come and the policy starts nothing
for :data:`STALL_ROUNDS` rounds in a row, the run stops and says so (the jobs count as unfinished).

**Trims** (issue 16, item 5). A running job whose new allocation keeps its plan and its GPUs on the same
nodes and changes only CPUs or memory is *trimmed*, whatever the decision's action says: a cluster
updates the container's limits in place, so the job does not restart. It pays ``trim_overhead_s``
(default 0) instead of the reconfiguration overhead, runs at the new allocation's iteration time from
the round on, keeps an overhead it was still paying, its progress since its last (re)launch (for lost
progress on a later preemption) and its start time, and is counted in ``trims``, not in
``reconfigurations``.

**Per-job speed** (``time_scale``): a job named there advances at the ground truth's iteration time
times its factor, e.g. the factors of :func:`optsched.sim.trace_speed.trace_speeds` that anchor each
job to its trace's own duration. Policies never see the factors.

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
from dataclasses import dataclass
from typing import Any, Mapping, Protocol, Sequence, runtime_checkable

from optsched.core.allocation import Allocation, NodeShare
from optsched.core.capacity import NodeUsage
from optsched.core.decision import Decision, JobAllocations
from optsched.core.errors import InfeasibleError, OptschedError, PlanInfeasibleError, ValidationError
from optsched.core.events import CapacityChange, PoolTarget, ServerReturn
from optsched.core.hardware import Cluster
from optsched.core.job import Job
from optsched.core.kinds import round_kind
from optsched.core.plan import plan_code
from optsched.core.policy import Policy, Reclaimer, ServerReclaimer
from optsched.core.round import RoundProblem
from optsched.sim.config import SimConfig
from optsched.sim.metrics import JobRecord, Sample, SimResult
from optsched.sim.progress import Progress
from optsched.sim.trace_speed import requested_configuration

log = logging.getLogger(__name__)

_EPS = 1e-9
#: tolerance of the check of a decision against the free resources (GPUs, CPUs, GiB)
_CAPACITY_TOL = 1e-6
#: consecutive rounds on an idle cluster with queued jobs and no future events before a run stops
STALL_ROUNDS = 10


class SimulationError(OptschedError):
    """A policy returned a decision the simulator cannot apply (a broken contract, not bad luck)."""


class IterationTimeSource(Protocol):
    """The part of :class:`~optsched.sim.ground_truth.GroundTruth` the simulator uses."""

    def iteration_time(self, model: str, gpu_type: str, plan: object, gpus_per_node: tuple[int, ...],
                       cpus_per_gpu: float) -> float: ...


@runtime_checkable
class MeasuredConfigurations(Protocol):
    """A ground truth that can tell whether it answers a configuration from a measurement."""

    def is_measured(self, model: str, plan: Any, gpus_per_node: Sequence[int], gpu_type: str | None = None) -> bool: ...


@dataclass
class _JobState:
    """Mutable bookkeeping of one job (internal to the engine)."""

    job: Job
    done: float = 0.0
    alloc: Allocation | None = None
    iter_time: float = math.inf
    pause_until: float = 0.0
    segment_start: float = 0.0
    segment_iters: float = 0.0
    start: float | None = None
    finish: float | None = None
    reconfigs: int = 0
    trims: int = 0
    preempts: int = 0
    preempted: bool = False
    gpu_seconds: float = 0.0
    overhead_s: float = 0.0
    last_started: float = 0.0
    ref_thr: float | None = None
    last_plan: str = ""
    scale: float = 1.0
    measured: bool = False
    held_s: float = 0.0
    measured_s: float = 0.0

    @property
    def remaining(self) -> float:
        return self.job.total_iterations - self.done

    def finish_time(self, now: float) -> float:
        if self.alloc is None or not math.isfinite(self.iter_time):
            return math.inf
        return max(now, self.pause_until) + self.remaining * self.iter_time


class Simulator:
    """One run of ``policy`` on ``jobs`` over ``cluster`` with ``ground_truth`` (module docstring).

    ``round_fields`` are the kind-specific fields given to every round (keyword arguments of the
    kind's problem class, e.g. ``{"quotas": ...}`` for Rubick); ``capacity_changes`` are applied at
    their times; ``time_scale`` maps job names to factors on their ground-truth iteration times
    (module docstring). ``run()`` may be called once."""

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
        self._states = {j.name: _JobState(j) for j in sorted(jobs, key=lambda j: (j.submit_time, j.name))}
        for name, factor in (time_scale or {}).items():
            if name not in self._states:
                raise ValidationError(f"simulator: time_scale names job {name!r}, which is not in the trace")
            if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not (0 < factor < math.inf):
                raise ValidationError(f"simulator: time_scale of job {name!r} must be a positive finite number, "
                                      f"got {factor!r}")
            self._states[name].scale = float(factor)
        self._measured = ground_truth if isinstance(ground_truth, MeasuredConfigurations) else None
        self._arrivals = [s for s in self._states.values()]
        self._changes = sorted(capacity_changes, key=lambda c: c.time)
        self._outside: dict[str, NodeShare] = {}
        self._targets = sorted(pool_targets, key=lambda t: t.time)
        for t in self._targets:
            for n in t.nodes:
                self._outside[n] = self._whole(n)
        self._active: dict[str, _JobState] = {}
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
            t_arr = self._arrivals[arr_i].job.submit_time if arr_i < len(self._arrivals) else math.inf
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
                    self._complete(s, now)
                    finished += 1
                    event = True
            while arr_i < len(self._arrivals) and self._arrivals[arr_i].job.submit_time <= now:
                s = self._arrivals[arr_i]
                self._active[s.job.name] = s
                arr_i += 1
                event = True
            changed = False
            while chg_i < len(self._changes) and self._changes[chg_i].time <= now:
                self._apply_change(self._changes[chg_i], now)
                chg_i += 1
                changed = True
            while tgt_i < len(self._targets) and self._targets[tgt_i].time <= now:
                self._apply_target(self._targets[tgt_i], now)
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
                         self._failed, self._policy_s, wall, tuple(self._messages))

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
    def _done(s: _JobState, now: float) -> bool:
        """Whether a running job has finished at ``now``: no iterations left, or so few that their time
        is below the resolution of the clock (the event loop could otherwise never reach it)."""
        if s.remaining <= _EPS * max(1.0, s.job.total_iterations):
            return True
        return s.pause_until <= now and s.remaining * s.iter_time <= _EPS * max(1.0, now)

    def _complete(self, s: _JobState, now: float) -> None:
        s.done = float(s.job.total_iterations)
        s.finish = now
        s.alloc = None
        del self._active[s.job.name]
        log.debug("t=%.1f %s finished", now, s.job.name)

    # -- rounds -------------------------------------------------------------------------------
    def _problem(self, now: float) -> RoundProblem:
        jobs: list[Job] = []
        running: list[Allocation] = []
        for s in self._active.values():
            done = min(float(s.job.total_iterations), s.done)
            jobs.append(s.job if done == s.job.completed_iterations else s.job.with_progress(done))
            if s.alloc is not None:
                running.append(s.alloc)
        return self.problem_type(cluster=self.cluster, jobs=tuple(jobs), running=tuple(running),
                                 occupied=tuple(self._outside.items()), time=now, **self.round_fields)

    def _round(self, now: float) -> None:
        problem = self._problem(now)
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
        self._check(problem, decision, now)
        assert isinstance(decision.payload, JobAllocations)
        for d in decision.payload.jobs:
            s = self._active[d.job]
            new = d.allocation
            old = s.alloc
            if old is None and new is None:
                continue
            if new is None:
                self._preempt(s, now)
            elif old is None:
                self._launch(s, new, now, self.config.preempt_restart_s if s.preempted else self.config.start_overhead_s)
            elif new != old:
                if _is_trim(old, new):
                    self._trim(s, new, now)
                else:
                    s.reconfigs += 1
                    self._launch(s, new, now, self.config.reconfig_overhead_s)

    def _check(self, problem: RoundProblem, decision: Decision, now: float) -> None:
        where = f"round at t={now:g} s, policy {self.policy.name!r}"
        if not isinstance(decision, Decision) or not isinstance(decision.payload, JobAllocations):
            raise SimulationError(f"{where}: the simulator applies decisions with per-job allocations "
                                  f"(JobAllocations), got {type(getattr(decision, 'payload', decision)).__name__}")
        names = [d.job for d in decision.payload.jobs]
        expected = {j.name for j in problem.jobs}
        if len(names) != len(set(names)) or set(names) != expected:
            missing = sorted(expected - set(names))
            extra = sorted(set(names) - expected)
            raise SimulationError(f"{where}: the decision must list every job of the round once "
                                  f"(missing {missing[:5]}, unknown {extra[:5]})")
        usage = NodeUsage()
        for d in decision.payload.jobs:
            if d.allocation is None:
                continue
            types = set()
            for node, share in d.allocation.placement.shares:
                try:
                    types.add(self.cluster.node(node).gpu_type)
                except OptschedError:
                    raise SimulationError(f"{where}: job {d.job!r} is placed on unknown node {node!r}") from None
                usage.add(node, share)
            if len(types) > 1:
                raise SimulationError(f"{where}: job {d.job!r} spans GPU types {sorted(types)}")
        over = usage.overflows(problem.free, _CAPACITY_TOL)
        if over:
            o = over[0]
            raise SimulationError(f"{where}: node {o.node!r} is given {o.used:g} {o.unit}, "
                                  f"only {o.capacity:g} are free")

    def _iteration_time(self, s: _JobState, alloc: Allocation, now: float) -> float | None:
        """The ground truth's iteration time of job ``s`` on ``alloc`` (times its speed factor); None, with
        the job back in the queue and a message, when the ground truth cannot run it there."""
        node0 = alloc.placement.shares[0][0]
        gpu_type = self.cluster.node(node0).gpu_type
        gpn = alloc.placement.gpus_per_node
        cpus_per_gpu = alloc.placement.total_cpus / alloc.plan.num_gpus
        try:
            per_job = getattr(self.truth, "job_iteration_time", None)
            it = float(per_job(s.job, gpu_type, alloc.plan, gpn, cpus_per_gpu) if per_job is not None
                       else self.truth.iteration_time(s.job.model, gpu_type, alloc.plan, gpn, cpus_per_gpu)) * s.scale
        except PlanInfeasibleError as e:
            msg = (f"t={now:g} s: {s.job.name} cannot run {alloc.plan.label} on {gpn} {gpu_type} in the ground "
                   f"truth ({e}); it returns to the queue")
            log.warning(msg)
            self._messages.append(msg)
            if s.alloc is not None:
                self._preempt(s, now)
            return None
        if not (it > 0 and math.isfinite(it)):
            raise SimulationError(f"ground truth gave iteration time {it!r} for job {s.job.name!r} "
                                  f"({alloc.plan.label} on {gpn} {gpu_type})")
        return it

    def _trim(self, s: _JobState, alloc: Allocation, now: float) -> None:
        """Apply a trim of running job ``s`` (module docstring, "Trims")."""
        it = self._iteration_time(s, alloc, now)
        if it is None:
            return
        s.trims += 1
        s.alloc = alloc
        s.iter_time = it
        s.pause_until = max(s.pause_until, now + self.config.trim_overhead_s)

    def _launch(self, s: _JobState, alloc: Allocation, now: float, overhead: float) -> None:
        it = self._iteration_time(s, alloc, now)
        if it is None:
            return
        gpn = alloc.placement.gpus_per_node
        gpu_type = self.cluster.node(alloc.placement.shares[0][0]).gpu_type
        if s.start is None:
            s.start = now
        s.alloc = alloc
        s.iter_time = it
        s.pause_until = now + overhead
        s.segment_start = now
        s.segment_iters = s.done
        s.last_started = now
        s.preempted = False
        s.last_plan = plan_code(alloc.plan)
        s.measured = self._measured is not None and self._measured.is_measured(s.job.model, alloc.plan, gpn, gpu_type)

    def _preempt(self, s: _JobState, now: float) -> None:
        if not (self.config.checkpoint_on_preempt or s.job.checkpointing):
            since = now - max(s.segment_start, s.pause_until)
            if self.config.checkpoint_interval_s > 0:
                since = since % self.config.checkpoint_interval_s
            lost = min(s.done - s.segment_iters, max(0.0, since) / s.iter_time)
            s.done -= max(0.0, lost)
        s.alloc = None
        s.iter_time = math.inf
        s.preempts += 1
        s.preempted = True

    def _apply_change(self, c: CapacityChange, now: float) -> None:
        """Set the outside share of a node and take back the shares of jobs that no longer fit there
        (module docstring, "Capacity changes")."""
        node = self.cluster.node(c.node)
        occ = c.occupied
        if occ.gpus > node.num_gpus or occ.cpus > node.num_cpus or occ.mem_gib > node.memory_gib + 1e-9:
            raise ValidationError(f"capacity change at {c.time:g} s: node {c.node!r} cannot have {occ.gpus} GPUs, "
                                  f"{occ.cpus} CPUs, {occ.mem_gib:g} GiB taken (capacity {node.num_gpus}, "
                                  f"{node.num_cpus}, {node.memory_gib:g})")
        on_node = {s.job.name: s for s in self._active.values() if s.alloc is not None
                   and any(n == c.node for n, _ in s.alloc.placement.shares)}
        before = self._problem(now) if on_node and isinstance(self.policy, Reclaimer) else None
        self._outside[c.node] = occ
        if occ == NodeShare(0):
            del self._outside[c.node]
        capacity = NodeShare(node.num_gpus - occ.gpus, node.num_cpus - occ.cpus,
                             max(0.0, node.memory_gib - occ.mem_gib))

        def fits(jobs: Sequence[_JobState]) -> bool:
            usage = NodeUsage()
            for s in jobs:
                assert s.alloc is not None
                usage.add_all((n, sh) for n, sh in s.alloc.placement.shares if n == c.node)
            return not usage.excess(c.node, capacity, 1e-9)
        if fits(list(on_node.values())):
            return
        where = f"capacity change at t={now:g} s on node {c.node!r}"
        if before is not None:
            assert isinstance(self.policy, Reclaimer)
            try:
                chosen = tuple(self.policy.reclaim(before, c))
            except OptschedError as e:
                raise SimulationError(f"{where}, policy {self.policy.name!r}: {e}") from e
            bad = sorted(set(chosen) - set(on_node))
            if bad:
                raise SimulationError(f"{where}: policy {self.policy.name!r} reclaims {bad[:5]}, which do not run on "
                                      f"that node (running there: {sorted(on_node)[:10]})")
            if not fits([s for name, s in on_node.items() if name not in chosen]):
                raise SimulationError(f"{where}: policy {self.policy.name!r} reclaims {sorted(set(chosen))}, "
                                      "which does not free enough for the jobs left on the node")
            victims = [on_node[name] for name in dict.fromkeys(chosen)]
        else:
            order = sorted(on_node.values(), key=lambda s: (-s.last_started, s.job.name))
            victims = []
            while not fits(order[len(victims):]):
                victims.append(order[len(victims)])
        for s in victims:
            log.info("t=%.1f s: capacity change on %s evicts %s", now, c.node, s.job.name)
            self._preempt(s, now)

    def _whole(self, node: str) -> NodeShare:
        n = self.cluster.node(node)
        return NodeShare(n.num_gpus, n.num_cpus, float(n.memory_gib))

    def _apply_target(self, t: PoolTarget, now: float) -> None:
        """Lend or take back servers of a pool target (module docstring, "Pool targets")."""
        lent = [n for n in t.nodes if n not in self._outside]
        if t.count >= len(lent):
            for n in [n for n in t.nodes if n in self._outside][:t.count - len(lent)]:
                del self._outside[n]
            return
        need = len(lent) - t.count
        where = f"pool target at t={now:g} s"
        answer: ServerReturn | None = None
        if isinstance(self.policy, ServerReclaimer):
            try:
                answer = self.policy.return_servers(self._problem(now), tuple(lent), need)
            except OptschedError as e:
                raise SimulationError(f"{where}, policy {self.policy.name!r}: {e}") from e
            bad = sorted(set(answer.nodes) - set(lent))
            if bad or len(set(answer.nodes)) != need:
                raise SimulationError(f"{where}: policy {self.policy.name!r} returns {sorted(answer.nodes)[:5]}; it must "
                                      f"return {need} of the lent servers")
            for name in answer.preempt:
                s = self._active.get(name)
                if s is None or s.alloc is None:
                    raise SimulationError(f"{where}: policy {self.policy.name!r} preempts {name!r}, which does not run")
                log.info("t=%.1f s: returning servers preempts %s", now, name)
                self._preempt(s, now)
            for alloc in answer.shrink:
                s = self._active.get(alloc.job)
                old = None if s is None else s.alloc
                if old is None or not all(n in dict(old.placement.shares) and sh.gpus <= dict(old.placement.shares)[n].gpus
                                          for n, sh in alloc.placement.shares):
                    raise SimulationError(f"{where}: policy {self.policy.name!r} shrinks {alloc.job!r} to an allocation "
                                          "that is not part of what it holds")
                assert s is not None
                s.reconfigs += 1
                self._launch(s, alloc, now, self.config.reconfig_overhead_s)
            chosen = list(answer.nodes)
        else:
            held = {n: 0 for n in lent}
            for s in self._active.values():
                if s.alloc is not None:
                    for n, sh in s.alloc.placement.shares:
                        if n in held:
                            held[n] += sh.gpus
            order = {n: i for i, n in enumerate(t.nodes)}
            chosen = sorted(lent, key=lambda n: (held[n], -order[n]))[:need]
        for n in chosen:
            self._apply_change(CapacityChange(now, n, self._whole(n)), now)

    # -- measurements -------------------------------------------------------------------------
    def _reference_throughput(self, s: _JobState) -> float:
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
        avail = self.cluster.total_gpus - sum(o.gpus for o in self._outside.values())
        self._samples.append(Sample(now, busy, avail, running, len(self._active) - running, thr))

    def _record(self, s: _JobState) -> JobRecord:
        j = s.job
        return JobRecord(j.name, j.model, j.tenant, j.guaranteed, j.requested_gpus, j.submit_time, s.start, s.finish,
                         s.done, j.total_iterations, s.reconfigs, s.preempts, s.gpu_seconds, s.overhead_s,
                         s.last_plan, s.held_s, s.measured_s if self._measured is not None else None, s.trims)


def _is_trim(old: Allocation, new: Allocation) -> bool:
    """Whether ``new`` only changes ``old``'s CPUs or memory: the same plan and GPUs on the same nodes
    (module docstring, "Trims")."""
    return old.plan == new.plan and _gpus_on(old) == _gpus_on(new)


def _gpus_on(alloc: Allocation) -> dict[str, int]:
    return {n: sh.gpus for n, sh in alloc.placement.shares if sh.gpus > 0}


def simulate(cluster: Cluster, jobs: Sequence[Job], policy: Policy, ground_truth: IterationTimeSource,
             config: SimConfig = SimConfig(), **kwargs: object) -> SimResult:
    """Build a :class:`Simulator` and run it (keyword arguments as for the constructor plus
    ``progress``)."""
    progress = bool(kwargs.pop("progress", False))
    return Simulator(cluster, jobs, policy, ground_truth, config, **kwargs).run(progress=progress)  # type: ignore[arg-type]


__all__ = ["IterationTimeSource", "MeasuredConfigurations", "SimulationError", "Simulator", "simulate"]

"""The simulator's ledger of the cluster: the jobs present, what each holds and has done
(:class:`JobState`), the shares outside work holds on nodes, and every change to them. The event loop
(:mod:`optsched.sim.engine`) decides *when* something happens; the ledger applies it:

**Decisions.** Every decision is checked before it is applied: each running or queued job of the round
must appear exactly once, and the allocations must fit every node's free GPUs, CPUs and memory
(:mod:`optsched.core.capacity`); a policy that breaks this raises :class:`SimulationError` naming the
round time, the policy and the node. Then each job is started (``start_overhead_s``, or
``preempt_restart_s`` after a preemption), reconfigured (``reconfig_overhead_s``), trimmed or preempted
(:mod:`optsched.sim.config`). A ground-truth source that cannot run the chosen plan where the policy
put it (the policy's model believed it fits) fails that launch: the job goes back to the queue, and
the event is logged and kept in :attr:`ClusterLedger.messages`.

**Trims** (issue 16, item 5). A running job whose new allocation keeps its plan and its GPUs on the same
nodes and changes only CPUs or memory is *trimmed*, whatever the decision's action says: a cluster
updates the container's limits in place, so the job does not restart. It pays ``trim_overhead_s``
(default 0) instead of the reconfiguration overhead, runs at the new allocation's iteration time from
the round on, keeps an overhead it was still paying, its progress since its last (re)launch (for lost
progress on a later preemption) and its start time, and is counted in ``trims``, not in
``reconfigurations``.

**Capacity changes** (:class:`~optsched.core.events.CapacityChange`). A change sets the share work
outside the rounds holds on a node. When the jobs running there no longer fit, some must give up their
share: a policy that implements :class:`~optsched.core.policy.Reclaimer` is asked which (given the
round just before the change); its answer must name running jobs on that node and free enough, else
the run stops with :class:`SimulationError`. A policy without it gets the default: the latest-started
jobs on the node are evicted first (then by name) until the rest fits. Evicted jobs are preempted.

**Pool targets** (:class:`~optsched.core.events.PoolTarget`, Lyra's capacity loaning). The servers of
every target start held whole by outside work; a target lends ``count`` of them from its time on:
more than before are lent in the target's order, fewer are given back, chosen by a policy that
implements :class:`~optsched.core.policy.ServerReclaimer` (it may also shrink jobs instead of
preempting them: a scale-in, applied as a reconfiguration) or by default the servers holding the
fewest GPUs of running jobs (then the latest in the target's order); whatever still runs on a returned
server is then evicted as after a capacity change.

**Per-job ground truth and checkpointing** (generic, used by Lyra). A ground truth that has
``job_iteration_time(job, gpu_type, plan, gpus_per_node, cpus_per_gpu)`` is asked with the job itself
(e.g. its elastic range and GPUs per worker); a job with ``checkpointing`` loses no progress when
preempted, whatever the run's configuration. A job advances at the ground truth's time times its
speed factor (:attr:`JobState.scale`).

The ledger asks the policy only who gives up resources (the two reclaiming protocols); the policy's
rounds are the event loop's.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from optsched.core.allocation import Allocation, NodeShare
from optsched.core.capacity import NodeUsage
from optsched.core.decision import Decision, JobAllocations
from optsched.core.errors import OptschedError, PlanInfeasibleError, ValidationError
from optsched.core.events import CapacityChange, PoolTarget, ServerReturn
from optsched.core.hardware import Cluster
from optsched.core.job import Job
from optsched.core.plan import plan_code
from optsched.core.policy import Policy, Reclaimer, ServerReclaimer
from optsched.core.round import RoundProblem
from optsched.sim.config import SimConfig
from optsched.sim.truth_source import IterationTimeSource, MeasuredConfigurations

log = logging.getLogger(__name__)

#: tolerance of the check of a decision against the free resources (GPUs, CPUs, GiB)
_CAPACITY_TOL = 1e-6


class SimulationError(OptschedError):
    """A policy returned a decision the simulator cannot apply (a broken contract, not bad luck)."""


@dataclass
class JobState:
    """Mutable bookkeeping of one job (internal to the simulator)."""

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


class ClusterLedger:
    """The jobs present on ``cluster`` and what they and outside work hold (module docstring).

    ``active`` maps the name of every job that has arrived and not finished to its state; ``outside``
    maps nodes to the share outside work holds there (the servers of ``pool_nodes`` start held whole);
    ``messages`` lists the launches the ground truth refused. ``problem_type`` and ``round_fields``
    make the round of the ledger's state (:meth:`problem`)."""

    def __init__(self, cluster: Cluster, policy: Policy, truth: IterationTimeSource, config: SimConfig,
                 problem_type: type[RoundProblem], round_fields: Mapping[str, Any],
                 pool_nodes: Sequence[str] = ()) -> None:
        self.cluster = cluster
        self.policy = policy
        self.truth = truth
        self.config = config
        self.problem_type = problem_type
        self.round_fields = round_fields
        self.measured = truth if isinstance(truth, MeasuredConfigurations) else None
        self.active: dict[str, JobState] = {}
        self.outside: dict[str, NodeShare] = {}
        for n in pool_nodes:
            self.outside[n] = self._whole(n)
        self.messages: list[str] = []

    def problem(self, now: float) -> RoundProblem:
        """The round of the present jobs (with their progress), their allocations and the outside shares."""
        jobs: list[Job] = []
        running: list[Allocation] = []
        for s in self.active.values():
            done = min(float(s.job.total_iterations), s.done)
            jobs.append(s.job if done == s.job.completed_iterations else s.job.with_progress(done))
            if s.alloc is not None:
                running.append(s.alloc)
        return self.problem_type(cluster=self.cluster, jobs=tuple(jobs), running=tuple(running),
                                 occupied=tuple(self.outside.items()), time=now, **self.round_fields)

    def available_gpus(self) -> int:
        """GPUs of the cluster that outside work does not hold."""
        return self.cluster.total_gpus - sum(o.gpus for o in self.outside.values())

    def admit(self, s: JobState) -> None:
        """A job arrives: it is present, queued until a decision starts it."""
        self.active[s.job.name] = s

    def complete(self, s: JobState, now: float) -> None:
        """A running job has done all its iterations at ``now``: it leaves and frees what it held."""
        s.done = float(s.job.total_iterations)
        s.finish = now
        s.alloc = None
        del self.active[s.job.name]
        log.debug("t=%.1f %s finished", now, s.job.name)

    # -- decisions ------------------------------------------------------------------------------
    def apply(self, problem: RoundProblem, decision: Decision, now: float) -> None:
        """Check ``decision`` against ``problem`` and apply it (module docstring, "Decisions")."""
        self._check(problem, decision, now)
        assert isinstance(decision.payload, JobAllocations)
        for d in decision.payload.jobs:
            s = self.active[d.job]
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

    def _iteration_time(self, s: JobState, alloc: Allocation, now: float) -> float | None:
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
            self.messages.append(msg)
            if s.alloc is not None:
                self._preempt(s, now)
            return None
        if not (it > 0 and math.isfinite(it)):
            raise SimulationError(f"ground truth gave iteration time {it!r} for job {s.job.name!r} "
                                  f"({alloc.plan.label} on {gpn} {gpu_type})")
        return it

    def _trim(self, s: JobState, alloc: Allocation, now: float) -> None:
        """Apply a trim of running job ``s`` (module docstring, "Trims")."""
        it = self._iteration_time(s, alloc, now)
        if it is None:
            return
        s.trims += 1
        s.alloc = alloc
        s.iter_time = it
        s.pause_until = max(s.pause_until, now + self.config.trim_overhead_s)

    def _launch(self, s: JobState, alloc: Allocation, now: float, overhead: float) -> None:
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
        s.measured = self.measured is not None and self.measured.is_measured(s.job.model, alloc.plan, gpn, gpu_type)

    def _preempt(self, s: JobState, now: float) -> None:
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

    # -- capacity -------------------------------------------------------------------------------
    def apply_change(self, c: CapacityChange, now: float) -> None:
        """Set the outside share of a node and take back the shares of jobs that no longer fit there
        (module docstring, "Capacity changes")."""
        node = self.cluster.node(c.node)
        occ = c.occupied
        if occ.gpus > node.num_gpus or occ.cpus > node.num_cpus or occ.mem_gib > node.memory_gib + 1e-9:
            raise ValidationError(f"capacity change at {c.time:g} s: node {c.node!r} cannot have {occ.gpus} GPUs, "
                                  f"{occ.cpus} CPUs, {occ.mem_gib:g} GiB taken (capacity {node.num_gpus}, "
                                  f"{node.num_cpus}, {node.memory_gib:g})")
        on_node = {s.job.name: s for s in self.active.values() if s.alloc is not None
                   and any(n == c.node for n, _ in s.alloc.placement.shares)}
        before = self.problem(now) if on_node and isinstance(self.policy, Reclaimer) else None
        self.outside[c.node] = occ
        if occ == NodeShare(0):
            del self.outside[c.node]
        capacity = NodeShare(node.num_gpus - occ.gpus, node.num_cpus - occ.cpus,
                             max(0.0, node.memory_gib - occ.mem_gib))

        def fits(jobs: Sequence[JobState]) -> bool:
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

    def apply_target(self, t: PoolTarget, now: float) -> None:
        """Lend or take back servers of a pool target (module docstring, "Pool targets")."""
        lent = [n for n in t.nodes if n not in self.outside]
        if t.count >= len(lent):
            for n in [n for n in t.nodes if n in self.outside][:t.count - len(lent)]:
                del self.outside[n]
            return
        need = len(lent) - t.count
        where = f"pool target at t={now:g} s"
        answer: ServerReturn | None = None
        if isinstance(self.policy, ServerReclaimer):
            try:
                answer = self.policy.return_servers(self.problem(now), tuple(lent), need)
            except OptschedError as e:
                raise SimulationError(f"{where}, policy {self.policy.name!r}: {e}") from e
            bad = sorted(set(answer.nodes) - set(lent))
            if bad or len(set(answer.nodes)) != need:
                raise SimulationError(f"{where}: policy {self.policy.name!r} returns {sorted(answer.nodes)[:5]}; it must "
                                      f"return {need} of the lent servers")
            for name in answer.preempt:
                s = self.active.get(name)
                if s is None or s.alloc is None:
                    raise SimulationError(f"{where}: policy {self.policy.name!r} preempts {name!r}, which does not run")
                log.info("t=%.1f s: returning servers preempts %s", now, name)
                self._preempt(s, now)
            for alloc in answer.shrink:
                s = self.active.get(alloc.job)
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
            for s in self.active.values():
                if s.alloc is not None:
                    for n, sh in s.alloc.placement.shares:
                        if n in held:
                            held[n] += sh.gpus
            order = {n: i for i, n in enumerate(t.nodes)}
            chosen = sorted(lent, key=lambda n: (held[n], -order[n]))[:need]
        for n in chosen:
            self.apply_change(CapacityChange(now, n, self._whole(n)), now)


def _is_trim(old: Allocation, new: Allocation) -> bool:
    """Whether ``new`` only changes ``old``'s CPUs or memory: the same plan and GPUs on the same nodes
    (module docstring, "Trims")."""
    return old.plan == new.plan and _gpus_on(old) == _gpus_on(new)


def _gpus_on(alloc: Allocation) -> dict[str, int]:
    return {n: sh.gpus for n, sh in alloc.placement.shares if sh.gpus > 0}


__all__ = ["ClusterLedger", "JobState", "SimulationError"]

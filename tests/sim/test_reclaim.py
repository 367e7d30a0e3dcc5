"""Capacity changes that a policy decides (optsched/sim/ledger.py, "Capacity changes"): when work
outside the rounds takes back part of a node, a policy implementing ``Reclaimer`` chooses which jobs
give up their share; otherwise the simulator evicts the latest-started jobs first."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import pytest

from optsched.core import Allocation, CapacityChange, ExecutionPlan, Job, NodeShare, Placement, a800_cluster
from optsched.core.decision import Decision, JobAllocations, JobDecision
from optsched.core.policy import Reclaimer
from optsched.core.round import RoundProblem
from optsched.sim.engine import SimulationError, simulate

CLUSTER = a800_cluster(1, 8)


class InverseGPUs:
    """Ground truth: 8 / GPUs seconds per iteration."""

    def iteration_time(self, model, gpu_type, plan, gpus_per_node, cpus_per_gpu) -> float:
        return 8.0 / sum(gpus_per_node)


@dataclass
class KeepAndFill:
    """Running jobs keep their allocation; queued jobs start on their request when it fits."""

    kind: ClassVar[str] = "rubick"
    name: str = "keep-and-fill"

    def decide(self, problem: RoundProblem) -> Decision:
        free = problem.free("n000").gpus - sum(a.plan.num_gpus for a in problem.running)
        out = []
        for j in problem.jobs:
            cur = problem.current(j.name)
            if cur is not None:
                out.append(JobDecision(j.name, cur, 1.0, 1.0, "keep"))
            elif j.requested_gpus <= free:
                free -= j.requested_gpus
                alloc = Allocation(j.name, ExecutionPlan(dp=j.requested_gpus),
                                   Placement.of({"n000": NodeShare(j.requested_gpus, j.requested_gpus, 0.0)}))
                out.append(JobDecision(j.name, alloc, 1.0, 1.0, "start"))
            else:
                out.append(JobDecision(j.name, None, 0.0, 0.0, "wait"))
        return Decision("rubick", self.name, "heuristic", 0.0, JobAllocations(tuple(out)))


@dataclass
class ReclaimFirstSubmitted(KeepAndFill):
    """Gives back the jobs of ``answer`` (default: the first submitted job on the node)."""

    name: str = "reclaimer"
    answer: tuple[str, ...] | None = None
    asked: list[tuple[RoundProblem, CapacityChange]] = field(default_factory=list)

    def reclaim(self, problem: RoundProblem, change: CapacityChange) -> tuple[str, ...]:
        self.asked.append((problem, change))
        if self.answer is not None:
            return self.answer
        on_node = [j for j in problem.jobs if problem.current(j.name) is not None]
        return (min(on_node, key=lambda j: j.submit_time).name,)


def _jobs() -> list[Job]:
    return [Job(n, "bert", 4, 1000, requested_cpus=4, requested_plan=ExecutionPlan(dp=4), submit_time=t)
            for n, t in (("a", 0.0), ("b", 10.0))]


HALF_NODE = CapacityChange(100.0, "n000", NodeShare(4, 0, 0.0))


def test_without_reclaim_the_latest_started_job_is_evicted() -> None:
    policy = KeepAndFill()
    assert not isinstance(policy, Reclaimer)
    r = simulate(CLUSTER, _jobs(), policy, InverseGPUs(), capacity_changes=[HALF_NODE])
    a, b = r.jobs
    assert (a.preemptions, b.preemptions) == (0, 1)


def test_a_reclaimer_chooses_who_gives_up_its_share() -> None:
    policy = ReclaimFirstSubmitted()
    assert isinstance(policy, Reclaimer)
    r = simulate(CLUSTER, _jobs(), policy, InverseGPUs(), capacity_changes=[HALF_NODE])
    a, b = r.jobs
    assert (a.preemptions, b.preemptions) == (1, 0)
    ((problem, change),) = policy.asked
    assert change == HALF_NODE and problem.time == 100.0
    assert {x.job for x in problem.running} == {"a", "b"}  # the round just before the change
    assert problem.occupied == ()
    # b keeps running from 10 s at 2 s per iteration: 2,000 s of work, done at 2,010 s
    assert b.finish_s == pytest.approx(2010.0)


def test_a_change_that_fits_asks_nobody() -> None:
    policy = ReclaimFirstSubmitted()
    cpus_only = CapacityChange(100.0, "n000", NodeShare(0, 8, 0.0))
    r = simulate(CLUSTER, _jobs(), policy, InverseGPUs(), capacity_changes=[cpus_only])
    assert policy.asked == [] and all(j.preemptions == 0 for j in r.jobs)


@pytest.mark.parametrize("answer, match", [
    (("zz",), r"reclaims \['zz'\], which do not run on that node"),
    ((), r"reclaims \[\], which does not free enough"),
])
def test_a_wrong_reclaim_answer_stops_the_run(answer: tuple[str, ...], match: str) -> None:
    with pytest.raises(SimulationError, match=match):
        simulate(CLUSTER, _jobs(), ReclaimFirstSubmitted(answer=answer), InverseGPUs(), capacity_changes=[HALF_NODE])


def test_a_policy_without_a_kind_is_refused() -> None:
    class NoKind:
        name = "no-kind"

        def decide(self, problem: RoundProblem) -> Decision:  # pragma: no cover - never called
            raise AssertionError

    with pytest.raises(Exception, match="must have a name, a kind and decide"):
        simulate(CLUSTER, _jobs(), NoKind(), InverseGPUs())  # type: ignore[arg-type]

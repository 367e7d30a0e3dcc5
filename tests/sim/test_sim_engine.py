"""The event loop (optsched/sim/engine.py): hand-computed JCTs on tiny traces with scripted policies
and a ground truth whose iteration time is known exactly, overheads and lost progress, capacity
changes, conservation and determinism with the Rubick policies, and the errors a broken policy gets."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import pytest

from optsched.core import Allocation, ExecutionPlan, Job, NodeShare, a800_cluster
from optsched.core.decision import Decision, JobAllocations, JobDecision
from optsched.core.events import CapacityChange
from optsched.core.plan import ZeroMode
from optsched.core.round import RoundProblem
from optsched.perf.defaults import default_performance_model
from optsched.policies.registry import make_policy
from optsched.sim.config import SimConfig
from optsched.sim.engine import SimulationError, Simulator, simulate

from helpers import InverseGPUs, alloc


class Analytical:
    """Ground truth = the built-in model (what the policy believes)."""

    def __init__(self, cluster) -> None:
        self.cluster = cluster

    def iteration_time(self, model, gpu_type, plan, gpus_per_node, cpus_per_gpu) -> float:
        return default_performance_model(model, self.cluster, gpu_type).iteration_time(plan, gpus_per_node,
                                                                                        cpus_per_gpu)


def _alloc(job: str, gpus: int, node: str = "n000", cpus: int = 0) -> Allocation:
    return alloc(job, ExecutionPlan(dp=gpus), {node: (gpus, cpus or gpus, 0.0)})


@dataclass
class Scripted:
    """A policy whose allocation of each job is ``script(problem, job) -> GPUs`` (0: none), packed
    first-fit on the nodes in name order; running jobs keep their node when their GPU count is kept."""

    script: Callable[[RoundProblem, Job], int]
    name: str = "scripted"
    calls: list[float] = field(default_factory=list)
    kind = "rubick"  # the kind of rounds it answers (a class attribute, not a field)

    def decide(self, problem: RoundProblem) -> Decision:
        self.calls.append(problem.time)
        free = {n.name: problem.free(n.name).gpus for n in problem.cluster.nodes}
        out = []
        wanted = {j.name: self.script(problem, j) for j in problem.jobs}
        for j in problem.jobs:  # running jobs that keep their size first
            cur = problem.current(j.name)
            if cur is not None and cur.plan.num_gpus == wanted[j.name]:
                for n, sh in cur.placement.shares:
                    free[n] -= sh.gpus
        for j in problem.jobs:
            g = wanted[j.name]
            cur = problem.current(j.name)
            if g == 0:
                out.append(JobDecision(j.name, None, 0.0, 0.0, "preempt" if cur else "wait"))
                continue
            if cur is not None and cur.plan.num_gpus == g:
                out.append(JobDecision(j.name, cur, 1.0, 1.0, "keep"))
                continue
            node = next((n for n in sorted(free) if free[n] >= g), None)
            if node is None:
                out.append(JobDecision(j.name, None, 0.0, 0.0, "preempt" if cur else "wait"))
                continue
            free[node] -= g
            out.append(JobDecision(j.name, _alloc(j.name, g, node), 1.0, 1.0, "reconfigure" if cur else "start"))
        return Decision("rubick", self.name, "heuristic", 0.0, JobAllocations(tuple(out)))


def fifo_request(problem: RoundProblem, job: Job) -> int:
    """Every job gets its request, in submit order, when it fits (strict FIFO)."""
    free = sum(problem.free(n.name).gpus for n in problem.cluster.nodes)
    for j in sorted(problem.jobs, key=lambda x: (x.submit_time, x.name)):
        cur = problem.current(j.name)
        if j.name == job.name:
            return j.requested_gpus if (cur is not None or j.requested_gpus <= free) else 0
        if cur is None and j.requested_gpus > free:
            return 0
        free -= j.requested_gpus
    return 0


def _job(name: str, gpus: int, iters: int, submit: float = 0.0, **kw) -> Job:
    return Job(name, "bert", gpus, iters, requested_cpus=gpus, requested_plan=ExecutionPlan(dp=gpus),
               submit_time=submit, **kw)


ONE_NODE = a800_cluster(1, 8)


# -- hand-computed JCTs --------------------------------------------------------------------------
def test_one_job_runs_at_ground_truth_speed() -> None:
    # 4 GPUs, 8/4 = 2 s per iteration, 300 iterations: 600 s after its submission at 50 s.
    r = simulate(ONE_NODE, [_job("a", 4, 300, submit=50.0)], Scripted(fifo_request), InverseGPUs())
    (rec,) = r.jobs
    assert rec.start_s == 50.0 and rec.finish_s == pytest.approx(650.0)
    assert rec.jct_s == pytest.approx(600.0) and rec.queue_s == 0.0
    assert rec.gpu_seconds == pytest.approx(4 * 600.0)
    s = r.summary()
    assert s["avg_jct_s"] == pytest.approx(600.0) and s["makespan_s"] == pytest.approx(600.0)
    assert s["reconfigurations"] == 0 and s["preemptions"] == 0 and s["unfinished"] == 0
    assert s["gpu_utilisation"] == pytest.approx(0.5)


def test_two_jobs_contending_for_one_node() -> None:
    # Both want the whole node (1 s per iteration). a: 0..800. b arrives at 100, waits until 800,
    # runs 500 iterations: finishes at 1300. JCTs 800 and 1200, b queued 700 s.
    jobs = [_job("a", 8, 800), _job("b", 8, 500, submit=100.0)]
    r = simulate(ONE_NODE, jobs, Scripted(fifo_request), InverseGPUs())
    a, b = r.jobs
    assert (a.finish_s, b.start_s, b.finish_s) == pytest.approx((800.0, 800.0, 1300.0))
    s = r.summary()
    assert s["avg_jct_s"] == pytest.approx(1000.0) and s["avg_queue_s"] == pytest.approx(350.0)
    assert s["makespan_s"] == pytest.approx(1300.0)
    assert s["p50_jct_s"] == pytest.approx(1000.0) and s["p99_jct_s"] == pytest.approx(800 + 0.99 * 400)
    assert s["gpu_utilisation"] == pytest.approx(1.0)


def test_reconfiguration_pays_its_overhead() -> None:
    # 4 GPUs (1 s/iter) until the round at 100 s, then 8 GPUs (0.5 s/iter) after 78 s of
    # reconfiguration: 100 iterations by 100 s, 900 left from 178 s -> done at 178 + 450 = 628 s.
    grow = Scripted(lambda p, j: 4 if p.time < 100 else 8)
    r = simulate(ONE_NODE, [_job("a", 4, 1000)], grow, InverseGPUs(4.0), SimConfig(round_interval_s=100.0))
    (rec,) = r.jobs
    assert rec.finish_s == pytest.approx(628.0)
    assert rec.reconfigurations == 1 and rec.overhead_s == pytest.approx(78.0)
    assert r.summary()["reconfigurations"] == 1


def test_preemption_restart_and_lost_progress() -> None:
    # 1 s/iter. Preempted at the 300 s round, restarted at 600 s with a 63 s restart.
    # Without checkpoint-on-preempt and checkpoints every 200 s, the 100 iterations since the
    # checkpoint at 200 s are lost: 200 done, 800 left from 663 s -> 1463 s.
    script = Scripted(lambda p, j: 0 if 300 <= p.time < 600 else 8)
    cfg = SimConfig(round_interval_s=300.0, checkpoint_on_preempt=False, checkpoint_interval_s=200.0)
    (rec,) = simulate(ONE_NODE, [_job("a", 8, 1000)], script, InverseGPUs(), cfg).jobs
    assert rec.finish_s == pytest.approx(1463.0) and rec.preemptions == 1
    # With the default checkpoint before exiting nothing is lost: 700 left from 663 s.
    (rec,) = simulate(ONE_NODE, [_job("a", 8, 1000)], script, InverseGPUs(),
                      SimConfig(round_interval_s=300.0)).jobs
    assert rec.finish_s == pytest.approx(1363.0)


def test_capacity_change_evicts_and_returns_the_node() -> None:
    # The node is taken by outside work from 100 s to 400 s: the job is evicted (a preemption) and
    # restarts at 400 s after 63 s; 100 done + 900 from 463 s -> 1363 s.
    changes = [CapacityChange(100.0, "n000", NodeShare(8, 96, 1600.0)), CapacityChange(400.0, "n000", NodeShare(0))]
    r = Simulator(ONE_NODE, [_job("a", 8, 1000)], Scripted(fifo_request), InverseGPUs(), capacity_changes=changes).run()
    (rec,) = r.jobs
    assert rec.preemptions == 1 and rec.finish_s == pytest.approx(1363.0)
    assert min(s.available_gpus for s in r.samples) == 0
    assert all(s.busy_gpus <= s.available_gpus for s in r.samples)


def test_event_rounds_can_be_rate_limited() -> None:
    jobs = [_job(f"j{i}", 1, 100, submit=float(i)) for i in range(5)]
    eager = Scripted(fifo_request)
    simulate(ONE_NODE, jobs, eager, InverseGPUs(1.0))
    lazy = Scripted(fifo_request)
    simulate(ONE_NODE, jobs, lazy, InverseGPUs(1.0), SimConfig(min_round_gap_s=10.0))
    assert eager.calls[:5] == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert lazy.calls[:2] == [0.0, 10.0]  # arrivals at 1..4 s wait for the round at 10 s
    assert len(lazy.calls) < len(eager.calls)


def test_max_time_reports_unfinished_jobs() -> None:
    r = simulate(ONE_NODE, [_job("a", 8, 1000)], Scripted(fifo_request), InverseGPUs(), SimConfig(max_time_s=500.0))
    (rec,) = r.jobs
    assert rec.finish_s is None and rec.iterations == pytest.approx(500.0)
    assert r.summary()["unfinished"] == 1 and "max_time_s" in r.messages[0]


def test_a_policy_that_never_starts_a_job_stops_the_run_with_a_message() -> None:
    r = simulate(ONE_NODE, [_job("a", 8, 10)], Scripted(lambda p, j: 0), InverseGPUs())
    assert r.summary()["unfinished"] == 1
    assert "does not start them" in r.messages[-1] and "a" in r.messages[-1]


# -- broken policies -----------------------------------------------------------------------------
def test_overcommitting_policy_is_rejected_naming_the_node() -> None:
    class Greedy:
        name = "greedy"
        kind = "rubick"

        def decide(self, problem):
            return Decision("rubick", "greedy", "heuristic", 0.0, JobAllocations(tuple(
                JobDecision(j.name, _alloc(j.name, 8), 1.0, 1.0, "start") for j in problem.jobs)))
    with pytest.raises(SimulationError, match=r"node 'n000' is given 16 GPUs, only 8 are free"):
        simulate(ONE_NODE, [_job("a", 8, 10), _job("b", 8, 10)], Greedy(), InverseGPUs())


def test_a_decision_missing_a_job_is_rejected() -> None:
    class Forgetful:
        name = "forgetful"
        kind = "rubick"

        def decide(self, problem):
            return Decision("rubick", "forgetful", "heuristic", 0.0, JobAllocations(()))
    with pytest.raises(SimulationError, match=r"missing \['a'\]"):
        simulate(ONE_NODE, [_job("a", 8, 10)], Forgetful(), InverseGPUs())


def test_config_and_inputs_are_validated() -> None:
    from optsched.core.errors import ValidationError
    with pytest.raises(ValidationError, match="round_interval_s"):
        SimConfig(round_interval_s=0.0)
    with pytest.raises(ValidationError, match="reconfig_overhead_s"):
        SimConfig(reconfig_overhead_s=-1.0)
    with pytest.raises(ValidationError, match="used more than once"):
        Simulator(ONE_NODE, [_job("a", 1, 1), _job("a", 1, 1)], Scripted(fifo_request), InverseGPUs())
    with pytest.raises(ValidationError, match="node 'n009'"):
        Simulator(ONE_NODE, [_job("a", 1, 1)], Scripted(fifo_request), InverseGPUs(),
                  capacity_changes=[CapacityChange(1.0, "n009", NodeShare(1))])


# -- real policies: conservation and determinism ---------------------------------------------------
def _mixed_jobs() -> list[Job]:
    out = []
    specs = [("bert", 2, "dp"), ("vit", 4, "dp"), ("gpt2", 8, "zero-dp"), ("roberta", 1, "dp"), ("t5", 4, "zero-dp"),
             ("bert", 8, "dp"), ("vit", 1, "dp"), ("gpt2", 4, "zero-dp"), ("roberta", 2, "dp"), ("t5", 8, "zero-dp")]
    for i, (model, g, fam) in enumerate(specs):
        plan = ExecutionPlan(dp=g, zero=ZeroMode.DP) if fam == "zero-dp" else ExecutionPlan(dp=g)
        out.append(Job(f"j{i}", model, g, 400 + 97 * i, requested_cpus=8 * g, requested_plan=plan,
                       submit_time=60.0 * i, guaranteed=i % 3 == 0))
    return out


class Recording:
    """Wraps a policy and checks conservation at every round."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.name = inner.name
        self.kind = inner.kind
        self.peaks: list[int] = []

    def decide(self, problem):
        d = self.inner.decide(problem)
        per_node: dict[str, list[float]] = {}
        for a in d.allocations.values():
            for n, sh in a.placement.shares:
                u = per_node.setdefault(n, [0, 0, 0.0])
                u[0] += sh.gpus
                u[1] += sh.cpus
                u[2] += sh.mem_gib
        for n, (g, c, m) in per_node.items():
            free = problem.free(n)
            assert g <= free.gpus and c <= free.cpus and m <= free.mem_gib + 1e-6, (problem.time, n)
        self.peaks.append(sum(a.plan.num_gpus for a in d.allocations.values()))
        return d


@pytest.mark.parametrize("method", ["rubick", "rubick-n"])
def test_rubick_policies_conserve_capacity_and_finish_every_job(method: str) -> None:
    cluster = a800_cluster(2, 8)
    policy = Recording(make_policy(method))
    r = simulate(cluster, _mixed_jobs(), policy, Analytical(cluster), SimConfig(round_interval_s=600.0))
    s = r.summary()
    assert s["unfinished"] == 0 and s["failed_rounds"] == 0
    assert max(policy.peaks) <= 16
    assert all(x.busy_gpus <= x.available_gpus == 16 for x in r.samples)
    for rec in r.jobs:
        assert rec.iterations == rec.total_iterations and rec.finish_s >= rec.start_s >= rec.submit_s
    times = [x.time for x in r.samples]
    assert times == sorted(times)


def test_same_seed_same_result() -> None:
    cluster = a800_cluster(2, 8)
    runs = [simulate(cluster, _mixed_jobs(), make_policy("rubick"), Analytical(cluster)) for _ in range(2)]
    assert runs[0].jobs == runs[1].jobs and runs[0].samples == runs[1].samples
    s0, s1 = (r.summary() for r in runs)
    for key in ("avg_jct_s", "p99_jct_s", "makespan_s", "reconfigurations", "preemptions"):
        assert s0[key] == s1[key]


def test_rubick_beats_running_requests_as_is_on_a_contended_trace() -> None:
    cluster = a800_cluster(2, 8)
    res = {m: simulate(cluster, _mixed_jobs(), make_policy(m), Analytical(cluster)).summary() for m in ("rubick", "rubick-n")}
    assert res["rubick"]["avg_jct_s"] < res["rubick-n"]["avg_jct_s"]
    assert math.isfinite(res["rubick"]["makespan_s"])


def test_completion_is_reached_late_in_a_long_run_with_fast_iterations() -> None:
    # 1e-4 s per iteration, submitted at 1e7 s: the finish time must be reached exactly, whatever
    # the float resolution of the clock there.
    (rec,) = simulate(ONE_NODE, [_job("a", 8, 123_457, submit=1e7)], Scripted(fifo_request), InverseGPUs(8e-4)).jobs
    assert rec.finish_s == pytest.approx(1e7 + 12.3457, abs=1e-6) and rec.iterations == 123_457

"""Trims in the simulator (optsched/sim/ledger.py, "Trims"; issue 16, item 5): a running job whose CPUs or
memory change on the same GPUs and nodes is updated in place, without the reconfiguration overhead,
and counted in ``trims``; hand-computed JCTs with a scripted policy and a ground truth whose iteration
time is known exactly."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import pytest

from optsched.core import ExecutionPlan, Job, a800_cluster
from optsched.core.decision import Decision, JobAllocations, JobDecision
from optsched.core.round import RoundProblem
from optsched.sim.config import SimConfig
from optsched.sim.engine import simulate

from helpers import alloc


class CpuSensitive:
    """Iteration time ``8 / GPUs`` seconds with at least 4 CPUs per GPU, 1.25 times that with fewer."""

    def iteration_time(self, model, gpu_type, plan, gpus_per_node, cpus_per_gpu) -> float:  # noqa: ANN001
        return 8.0 / sum(gpus_per_node) * (1.0 if cpus_per_gpu >= 4 else 1.25)


@dataclass
class ByTime:
    """A policy giving each job ``script(problem, job) -> (node, GPUs, CPUs)`` (None: nothing), with the
    action a Rubick decision would give that change."""

    script: Callable[[RoundProblem, str], tuple[str, int, int] | None]
    name: str = "by-time"
    kind = "rubick"

    def decide(self, problem: RoundProblem) -> Decision:
        out = []
        for job in problem.jobs:
            want, cur = self.script(problem, job.name), problem.current(job.name)
            if want is None:
                out.append(JobDecision(job.name, None, 0.0, 0.0, "preempt" if cur else "wait"))
                continue
            node, gpus, cpus = want
            new = alloc(job.name, ExecutionPlan(dp=gpus), {node: (gpus, cpus, 64.0)})
            action = ("start" if cur is None else "keep" if new == cur else
                      "trim" if cur.plan == new.plan else "reconfigure")
            out.append(JobDecision(job.name, new, 1.0, 1.0, action))
        return Decision("rubick", self.name, "heuristic", 0.0, JobAllocations(tuple(out)))


def _job(name: str, gpus: int, iters: int, submit: float = 0.0) -> Job:
    return Job(name, "bert", gpus, iters, requested_cpus=4 * gpus, requested_plan=ExecutionPlan(dp=gpus),
               submit_time=submit)


def _share_then_give_back(problem: RoundProblem, name: str) -> tuple[str, int, int] | None:
    """``a`` holds 4 GPUs with 24 CPUs, and 8 CPUs while ``b`` (4 GPUs, 16 CPUs) is in the round."""
    if name == "b":
        return "n000", 4, 16
    return "n000", 4, 8 if any(j.name == "b" for j in problem.jobs) else 24


@pytest.mark.parametrize("trim_overhead", [0.0, 10.0])
def test_a_trimmed_job_loses_no_time_to_a_restart(trim_overhead: float) -> None:
    """``a`` (300 iterations, 2 s each with 24 CPUs) runs alone until ``b`` arrives at 100 s, is trimmed to
    8 CPUs (2.5 s an iteration) while ``b`` runs (100 iterations at 2 s: done at 300 s), then gets its CPUs
    back. Without overhead: 50 iterations by 100 s, 80 more by 300 s, 170 left at 2 s: done at 640 s (a
    restart would have cost 2 x 78 s). With a trim overhead of 10 s: 76 iterations from 110 to 300 s,
    174 left from 310 s: done at 658 s."""
    jobs = [_job("a", 4, 300), _job("b", 4, 100, submit=100.0)]
    r = simulate(a800_cluster(1, 8), jobs, ByTime(_share_then_give_back), CpuSensitive(),
                 SimConfig(trim_overhead_s=trim_overhead))
    a, b = r.jobs
    assert b.start_s == 100.0 and b.finish_s == pytest.approx(300.0)
    assert a.finish_s == pytest.approx(640.0 if trim_overhead == 0 else 658.0)
    assert a.trims == 2 and a.reconfigurations == 0 and a.overhead_s == pytest.approx(2 * trim_overhead)
    s = r.summary()
    assert s["trims"] == 2 and s["reconfigurations"] == 0
    assert a.to_row()["trims"] == 2


def test_a_trim_does_not_cut_a_reconfiguration_short() -> None:
    """``a`` grows from 4 to 8 GPUs at 100 s (a reconfiguration: no progress until 178 s) and is trimmed
    from 48 to 16 CPUs at 150 s (``b`` arrives on the other node): the pause still ends at 178 s. 50
    iterations by 100 s, then 950 at 1.25 s from 178 s: done at 1365.5 s."""
    def script(problem: RoundProblem, name: str) -> tuple[str, int, int] | None:
        if name == "b":
            return "n001", 1, 4
        t = problem.time
        return ("n000", 4, 24) if t < 100 else ("n000", 8, 48) if t < 150 else ("n000", 8, 16)
    jobs = [_job("a", 4, 1000), _job("b", 1, 10, submit=150.0)]
    r = simulate(a800_cluster(2, 8), jobs, ByTime(script), CpuSensitive(), SimConfig(round_interval_s=100.0))
    a = r.jobs[0]
    assert a.finish_s == pytest.approx(1365.5)
    assert a.reconfigurations == 1 and a.trims == 1 and a.overhead_s == pytest.approx(78.0)


def test_trim_overhead_must_be_a_non_negative_number() -> None:
    from optsched.core.errors import ValidationError
    with pytest.raises(ValidationError, match="trim_overhead_s must be >= 0"):
        SimConfig(trim_overhead_s=-1.0)

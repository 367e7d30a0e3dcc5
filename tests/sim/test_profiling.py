"""Per-model profiling before scheduling (SimConfig.profiling_s; Rubick Sec. 3 and 7.3, about 210 s per
model type), hand-traced on one 8-GPU node: the first job of a model and those submitted while it is
profiled wait, later jobs of a profiled model do not; off outside its scope and at 0."""

from __future__ import annotations

import pytest

from optsched.core import ExecutionPlan, Job, a800_cluster
from optsched.core.errors import ValidationError
from optsched.sim.config import RUBICK_PROFILING_S, SimConfig
from optsched.sim.engine import profiling_ready_times, simulate

from helpers import InverseGPUs
from test_sim_engine import Scripted, fifo_request  # same folder (pytest puts it on the path)

ONE_NODE = a800_cluster(1, 8)


def _jobs() -> list[Job]:
    # every job: 4 GPUs, 100 iterations at 8 / 4 = 2 s each (InverseGPUs): 200 s of work
    def job(name: str, model: str, submit: float) -> Job:
        return Job(name, model, 4, 100, requested_cpus=4, requested_plan=ExecutionPlan(dp=4), submit_time=submit)
    return [job("a", "bert", 0.0), job("b", "bert", 100.0), job("c", "vit", 300.0), job("d", "bert", 400.0)]


def _finish(policy: Scripted, config: SimConfig) -> dict[str, tuple[float, float]]:
    return {r.name: (r.start_s, r.finish_s) for r in simulate(ONE_NODE, _jobs(), policy, InverseGPUs(), config).jobs}


def test_first_job_of_each_model_waits_for_its_profile() -> None:
    # bert profiled 0-210: a and b (submitted at 100, meanwhile) start at 210 and end at 410; vit profiled
    # 300-510: c starts at 510; d (bert, profiled) is submitted at 400 onto a full node, starts at 410
    config = SimConfig(profiling_s=RUBICK_PROFILING_S)
    assert RUBICK_PROFILING_S == 210.0
    assert _finish(Scripted(fifo_request, name="rubick"), config) == {
        "a": (210.0, 410.0), "b": (210.0, 410.0), "c": (510.0, 710.0), "d": (410.0, 610.0)}
    # scope 'all' charges a policy outside Rubick's too
    assert _finish(Scripted(fifo_request), SimConfig(profiling_s=210.0, profiling_scope="all"))["c"] == (510.0, 710.0)


def test_profiling_is_off_outside_its_scope_and_at_zero() -> None:
    plain = {"a": (0.0, 200.0), "b": (100.0, 300.0), "c": (300.0, 500.0), "d": (400.0, 600.0)}
    assert _finish(Scripted(fifo_request), SimConfig(profiling_s=210.0)) == plain  # 'scripted' is not Rubick's
    assert _finish(Scripted(fifo_request, name="rubick"), SimConfig()) == plain


def test_ready_times_and_validation() -> None:
    jobs = _jobs()
    ready = profiling_ready_times(jobs, Scripted(fifo_request, name="rubick-e"), SimConfig(profiling_s=50.0))
    assert ready == {"a": 50.0, "b": 100.0, "c": 350.0, "d": 400.0}
    with pytest.raises(ValidationError, match="profiling_scope"):
        SimConfig(profiling_scope="sia")
    with pytest.raises(ValidationError, match="profiling_s"):
        SimConfig(profiling_s=-1.0)

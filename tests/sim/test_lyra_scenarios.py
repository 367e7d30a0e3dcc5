"""The scenarios of Lyra thesis Sec. 3.7.1 (issue 25, item 3): the share of heterogeneous jobs the Advanced and
Heterogeneous scenarios draw, and the 70% of the ideal rate such a job achieves on the other GPU type, checked on
a hand-computed running time."""

from __future__ import annotations

import dataclasses

import pytest

from optsched.core.errors import ValidationError
from optsched.core.events import PoolTarget
from optsched.core.job import Job
from optsched.policies import PolicyOptions, make_policy
from optsched.rounds.lyra.cluster import inference_name, two_pool_cluster
from optsched.sim.config import SimConfig
from optsched.sim.engine import Simulator
from optsched.sim.lyra_setup import lyra_simulation
from optsched.sim.lyra_truth import HETEROGENEOUS_EFFICIENCY, LyraGroundTruth
from optsched.sim.traces.lyra import lyra_jobs, scenario_jobs, synthetic_rows

CFG = SimConfig(round_interval_s=300.0, preempt_restart_s=63.0, checkpoint_on_preempt=False,
                checkpoint_interval_s=0.0, reconfig_overhead_s=0.0)


def _basic() -> list[Job]:
    return lyra_jobs(synthetic_rows(200, seed=4), seed=4, fungible_load=0.21, elastic_load=0.36)


def test_advanced_marks_a_tenth_of_the_jobs_among_the_non_fungible_ones() -> None:
    basic = _basic()
    jobs, het = scenario_jobs(basic, "advanced", seed=4)
    assert len(het) == 20   # round(0.10 x 200): "10% of jobs can use heterogeneous GPUs"
    before = {j.name: j for j in basic}
    assert all(not before[n].fungible for n in het)   # drawn among the jobs Basic does not lend out
    for j in jobs:   # on top of Basic: the others as they were, the heterogeneous ones may use inference servers
        assert j == (dataclasses.replace(before[j.name], fungible=True) if j.name in het else before[j.name])
    assert scenario_jobs(basic, "advanced", seed=4) == (jobs, het)   # seeded
    assert scenario_jobs(basic, "basic", seed=4) == (basic, frozenset())


def test_heterogeneous_scenario_disables_the_fungible_jobs() -> None:
    basic = _basic()
    assert sum(j.fungible for j in basic) > 20
    jobs, het = scenario_jobs(basic, "heterogeneous", seed=4)
    assert len(het) == 20
    assert {j.name for j in jobs if j.fungible} == het   # "we disable the 21% fungible training load"
    with pytest.raises(ValidationError, match="unknown scenario 'perfect'"):
        scenario_jobs(basic, "perfect", seed=4)


def test_a_heterogeneous_job_runs_at_seventy_percent_on_inference_gpus() -> None:
    # one worker of 2 training GPUs, 1,000 training-GPU-seconds of work; on T4 the worker holds 4 GPUs and does a
    # training worker's work (inference_factor 0.5): ideal 2 GPU-s/s, heterogeneous 0.7 x 2 = 1.4 GPU-s/s
    job = Job("h", "cnn", 2, 1000, gpus_per_worker=2, fungible=True)
    truth = LyraGroundTruth(frozenset({"T4"}), heterogeneous=frozenset({"h"}))
    assert HETEROGENEOUS_EFFICIENCY == 0.7
    assert truth.job_iteration_time(job, "T4", None, (4,), 0.0) == pytest.approx(1 / 1.4)
    assert truth.job_iteration_time(job, "V100-32G", None, (2,), 0.0) == pytest.approx(1 / 2)   # ideal at home
    assert LyraGroundTruth(frozenset({"T4"})).job_iteration_time(job, "T4", None, (4,), 0.0) == pytest.approx(0.5)
    with pytest.raises(ValidationError, match="heterogeneous_efficiency must lie in"):
        LyraGroundTruth(frozenset({"T4"}), heterogeneous_efficiency=0.0)
    # simulated: no training server, one inference server lent from time 0: the job runs 1000 / 1.4 s there
    cluster = two_pool_cluster(0, 1)
    inf = (inference_name(0),)
    for het, expect in ((frozenset({"h"}), 1000 / 1.4), (frozenset(), 1000 / 2.0)):
        res = Simulator(cluster, [job], make_policy("lyra", PolicyOptions(time_limit=5), kind="lyra"),
                        LyraGroundTruth(frozenset({"T4"}), heterogeneous=het), CFG,
                        round_fields={"inference_nodes": inf}, pool_targets=[PoolTarget(0.0, inf, 1)]).run()
        assert res.jobs[0].jct_s == pytest.approx(expect, rel=1e-6)


def test_the_simulation_inputs_carry_the_scenario() -> None:
    sim = lyra_simulation("synthetic", jobs=80, seed=2, scenario="advanced", heterogeneous_efficiency=0.6)
    assert len(sim.truth.heterogeneous) == 8 and sim.truth.heterogeneous_efficiency == 0.6
    assert sim.describe_scenario().startswith("scenario advanced: 8 heterogeneous jobs (10.0% of jobs")
    basic = lyra_simulation("synthetic", jobs=80, seed=2)
    assert basic.cluster == sim.cluster and not basic.truth.heterogeneous


def test_ideal_makes_every_job_elastic_to_twice_its_request_and_fungible() -> None:
    basic = _basic()
    jobs, het = scenario_jobs(basic, "ideal", seed=4)
    assert het == frozenset() and len(jobs) == len(basic)
    for before, after in zip(basic, jobs):
        assert after.fungible  # "heterogeneous training with ideal performance": inference servers at the ideal rate
        if before.max_gpus is not None and before.max_gpus > before.min_gpus:  # "a pre-defined scaling range"
            assert (after.min_gpus, after.max_gpus) == (before.min_gpus, before.max_gpus)
        else:  # "its requested demand to be the base demand, and its scaling range is twice that"
            assert (after.min_gpus, after.max_gpus) == (before.requested_gpus, 2 * before.requested_gpus)
        assert dataclasses.replace(after, fungible=before.fungible, min_gpus=before.min_gpus,
                                   max_gpus=before.max_gpus) == before  # nothing else changes


def test_an_ideal_job_scales_to_twice_its_request() -> None:
    # one inelastic job of one 2-GPU worker, 1,000 training-GPU-seconds, alone on a training server of 8 GPUs: as
    # requested it runs 1000 / 2 s; in Ideal it is elastic to 4 GPUs and runs 1000 / 4 s (linear scaling)
    job = Job("i", "cnn", 2, 1000, gpus_per_worker=2)
    ideal = scenario_jobs([job], "ideal", seed=0)[0]
    cluster = two_pool_cluster(1, 0)
    for jobs, expect in (([job], 1000 / 2.0), (ideal, 1000 / 4.0)):
        res = Simulator(cluster, jobs, make_policy("lyra", PolicyOptions(time_limit=5), kind="lyra"),
                        LyraGroundTruth(frozenset({"T4"})), CFG).run()
        assert res.jobs[0].jct_s == pytest.approx(expect, rel=1e-6)
    assert lyra_simulation("synthetic", jobs=20, seed=2, scenario="ideal").describe_scenario().startswith(
        "scenario ideal: every job elastic")

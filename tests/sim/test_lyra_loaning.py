"""Capacity loaning in the simulator (thesis Sec. 3.4, 3.7): the usage series (synthetic shape, CSV
loader errors), the orchestrator's pool targets with the 2% headroom, the engine's pool targets with a
server reclaimer that preempts or scales in, and end-to-end Lyra runs."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from optsched.core.errors import ValidationError
from optsched.core.events import PoolTarget
from optsched.core.job import Job
from optsched.policies import PolicyOptions, make_policy
from optsched.rounds.lyra.cluster import inference_name, two_pool_cluster
from optsched.sim.config import SimConfig
from optsched.sim.engine import Simulator
from optsched.sim.loaning import UsageSeries, load_usage_csv, loan_targets, opportunistic_changes, synthetic_usage
from optsched.sim.lyra_truth import LyraGroundTruth
from optsched.sim.traces.lyra import lyra_jobs, synthetic_rows

CFG = SimConfig(round_interval_s=300.0, preempt_restart_s=63.0, checkpoint_on_preempt=False,
                checkpoint_interval_s=0.0, reconfig_overhead_s=10.0)


def test_synthetic_usage_has_the_published_shape() -> None:
    u = synthetic_usage(7, seed=1)
    v = np.array(u.values)
    assert len(v) == 7 * 288 and u.step_s == 300.0
    assert v.mean() == pytest.approx(0.65, abs=0.01)
    days = v.reshape(7, -1)
    assert np.all(np.abs(days.max(1) / days.min(1) - 2.2) < 0.15)
    peak_hours = (days >= 0.9 * days.max(1, keepdims=True)).sum(1) * 5 / 60
    assert np.all((peak_hours >= 4) & (peak_hours <= 6))
    assert days[:, 20 * 12:].mean() > 0.9 > 0.5 > days[:, 4 * 12:6 * 12].mean()  # peak at night, trough before dawn


def test_usage_csv_rejects_gaps_and_out_of_range(tmp_path: Path) -> None:
    good = tmp_path / "u.csv"
    good.write_text("time_s,usage\n0,0.5\n300,0.6\n600,0.7\n")
    assert load_usage_csv(good).values == (0.5, 0.6, 0.7)
    gap = tmp_path / "gap.csv"
    gap.write_text("time_s,usage\n0,0.5\n300,0.6\n900,0.7\n")
    with pytest.raises(ValidationError, match=r"line 4: time_s 900 leaves a gap"):
        load_usage_csv(gap)
    bad = tmp_path / "bad.csv"
    bad.write_text("time_s,usage\n0,0.5\n300,1.2\n")
    with pytest.raises(ValidationError, match=r"line 3: usage 1.2 is outside \[0, 1\]"):
        load_usage_csv(bad)
    with pytest.raises(ValidationError, match=r"value -0.1 at point 1"):
        UsageSeries((0.2, -0.1))


def test_orchestrator_keeps_the_headroom() -> None:
    nodes = tuple(f"i{k}" for k in range(100))
    targets = loan_targets(UsageSeries((0.5, 0.5, 0.97, 0.99, 0.3)), nodes)
    assert [(t.time, t.count) for t in targets] == [(0.0, 48), (600.0, 1), (900.0, 0), (1200.0, 68)]


def _run(policy: str, jobs: list[Job], targets: list[PoolTarget], training: int = 2, inference: int = 4):  # noqa: ANN202
    cluster = two_pool_cluster(training, inference)
    inf = tuple(inference_name(i) for i in range(inference))
    pol = make_policy(policy, PolicyOptions(time_limit=5), kind="lyra")
    return Simulator(cluster, jobs, pol, LyraGroundTruth(frozenset({"T4"})), CFG,
                     round_fields={"inference_nodes": inf}, pool_targets=targets).run()


def test_reclaim_scales_elastic_jobs_in_before_preempting() -> None:
    inf = tuple(inference_name(i) for i in range(4))
    # one elastic job (base 2 workers, up to 4) and a filler on training; all four servers lent, then three back
    jobs = [Job("el", "bert", 4, 4 * 3600 * 4, min_gpus=4, max_gpus=16, gpus_per_worker=2, fungible=True),
            Job("tr", "cnn", 16, 16 * 3600, gpus_per_worker=2)]
    res = _run("lyra", jobs, [PoolTarget(0.0, inf, 4), PoolTarget(1800.0, inf, 2)])
    rec = {r.name: r for r in res.jobs}
    assert all(r.finish_s is not None for r in res.jobs)
    assert rec["el"].preemptions == 0 and rec["el"].reconfigurations >= 1   # scaled in, not preempted


def test_reclaim_preempts_when_it_must_and_checkpointing_keeps_progress() -> None:
    inf = tuple(inference_name(i) for i in range(4))
    # t (shortest) takes the training servers; f and g go to the lent servers and lose them at 1800 s
    jobs = [Job("f", "cnn", 8, 8 * 7200, gpus_per_worker=2, fungible=True),
            Job("g", "cnn", 8, 8 * 7200, gpus_per_worker=2, fungible=True, checkpointing=True),
            Job("t", "cnn", 16, 16 * 3600, gpus_per_worker=2)]
    res = _run("lyra", jobs, [PoolTarget(0.0, inf, 4), PoolTarget(1800.0, inf, 0)], training=2, inference=4)
    rec = {r.name: r for r in res.jobs}
    assert rec["f"].preemptions == 1 and rec["g"].preemptions == 1
    # f lost its half hour; g resumed where it stopped (both restart on the training servers after t)
    assert rec["f"].finish_s - rec["g"].finish_s == pytest.approx(1800.0, abs=1.0)


def test_default_choice_without_a_server_reclaimer_and_validation() -> None:
    cluster = two_pool_cluster(0, 2)
    inf = ("inf-000", "inf-001")
    with pytest.raises(ValidationError, match="count must be an integer in 0..2"):
        PoolTarget(0.0, inf, 3)
    with pytest.raises(ValidationError, match=r"names node 'x'"):
        Simulator(cluster, [], make_policy("lyra", kind="lyra"), LyraGroundTruth(frozenset({"T4"})), CFG,
                  pool_targets=[PoolTarget(0.0, ("x",), 0)])


@pytest.mark.parametrize("policy", ["lyra", "lyra-loan", "fifo", "afs", "gandiva", "random", "scf", "bfd"])
def test_end_to_end_every_sim_policy_finishes(policy: str) -> None:
    jobs = lyra_jobs(synthetic_rows(40, seed=3, hours=2.0, max_gpus=16), seed=3, elastic_count=0.2)
    inf = tuple(inference_name(i) for i in range(4))
    usage = UsageSeries(tuple([0.2] * 12 + [0.9] * 12 + [0.4] * 100))
    res = _run(policy, jobs, loan_targets(usage, inf), training=3, inference=4)
    assert all(r.finish_s is not None for r in res.jobs), res.messages
    assert all(math.isfinite(r.jct_s) for r in res.jobs)


def test_opportunistic_jobs_use_idle_inference_gpus_and_are_evicted() -> None:
    cluster = two_pool_cluster(1, 2)
    inf = ("inf-000", "inf-001")
    usage = UsageSeries((0.5,) * 6 + (1.0,) * 6 + (0.0,) * 100)
    changes = opportunistic_changes(usage, cluster, inf)
    assert [(c.time, c.node, c.occupied.gpus) for c in changes[:2]] == [(0.0, "inf-000", 4), (0.0, "inf-001", 4)]
    # the training server is busy for two hours; the fungible job takes idle T4 GPUs and loses them at 1800 s
    jobs = [Job("t", "cnn", 8, 8 * 7200, gpus_per_worker=2), Job("f", "cnn", 2, 2 * 3 * 3600, gpus_per_worker=2,
                                                                   fungible=True)]
    pol = make_policy("opportunistic", PolicyOptions(time_limit=5), kind="lyra")
    res = Simulator(cluster, jobs, pol, LyraGroundTruth(frozenset({"T4"})), CFG,
                    round_fields={"inference_nodes": inf, "opportunistic": True}, capacity_changes=changes).run()
    rec = {r.name: r for r in res.jobs}
    assert rec["f"].start_s == 0.0 and rec["f"].preemptions == 1 and rec["f"].finish_s is not None

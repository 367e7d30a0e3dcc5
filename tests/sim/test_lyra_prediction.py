"""Predicted running times in Lyra's scheduler (thesis Sec. 3.5.2, Table 3.9;
:mod:`optsched.rounds.lyra.prediction`): the predictor draws Table 3.9's error, SJF and the knapsack
plan on predictions (hand-traced), the simulator runs jobs at the truth, and a predictor with zero error
reproduces the oracle's decisions exactly."""

from __future__ import annotations

from typing import Any

import pytest

from optsched.core.errors import ValidationError
from optsched.core.hardware import Cluster, Node
from optsched.core.job import Job
from optsched.heuristics.lyra_allocate import phase_one
from optsched.policies import PolicyOptions, make_policy
from optsched.rounds.lyra.cluster import inference_name, two_pool_cluster
from optsched.rounds.lyra.prediction import PREDICTOR_OPTION, RuntimePredictor, runtime_predictor
from optsched.rounds.lyra_allocate import LyraAllocateRound
from optsched.rounds.lyra_allocate.items import flexible_items
from optsched.sim.config import SimConfig
from optsched.sim.engine import Simulator
from optsched.sim.loaning import UsageSeries, loan_targets
from optsched.sim.lyra_truth import LyraGroundTruth
from optsched.sim.traces.lyra import lyra_jobs, synthetic_rows

CFG = SimConfig(round_interval_s=300.0, preempt_restart_s=63.0, checkpoint_on_preempt=False,
                checkpoint_interval_s=0.0, reconfig_overhead_s=10.0)


def _jobs(n: int) -> list[Job]:
    return [Job(f"j{i:03d}", "cnn", 1, 100 + i) for i in range(n)]


def test_predictor_draws_table_3_9s_share_and_margin() -> None:
    jobs = _jobs(200)
    p = runtime_predictor(jobs, 0.4, 0.25, seed=7)
    assert len(p.factors) == 80   # 40% of 200 jobs mispredicted
    assert all(0.75 <= f <= 1.25 and f != 1.0 for f in p.factors.values())
    assert min(p.factors.values()) < 0.9 and max(p.factors.values()) > 1.1   # both signs of the error
    assert runtime_predictor(jobs, 0.4, 0.25, seed=7) == p
    assert runtime_predictor(jobs, 0.4, 0.25, seed=8).factors != p.factors
    assert runtime_predictor(jobs, 0.0).factors == {}
    j = jobs[0].with_progress(40)   # the error is relative: it stays on what is left
    assert RuntimePredictor({"j000": 1.2}).remaining(j) == pytest.approx(60 * 1.2)


def test_predictor_rejects_bad_settings() -> None:
    with pytest.raises(ValidationError, match=r"wrong_share must lie in \[0, 1\], got 1.5"):
        runtime_predictor(_jobs(3), 1.5)
    with pytest.raises(ValidationError, match="margin must be below 1"):
        runtime_predictor(_jobs(3), 0.5, 1.0)
    with pytest.raises(ValidationError, match="factor of job 'a' must be a float > 0"):
        RuntimePredictor({"a": -0.5})
    with pytest.raises(ValidationError, match="must be a RuntimePredictor"):
        make_policy("lyra", PolicyOptions(extras={PREDICTOR_OPTION: 0.2}), kind="lyra")


def _one_server(jobs: tuple[Job, ...], gpus: int = 8) -> LyraAllocateRound:
    base = two_pool_cluster(1, 0)
    cluster = Cluster("one", (Node("train-000", "V100-32G", gpus, 92, 350.0),), base.gpu_types,
                      base.intra_node_gbps, base.inter_node_gbps, base.pcie_gbps)
    return LyraAllocateRound(cluster=cluster, jobs=jobs)


def test_sjf_orders_by_predicted_running_time() -> None:
    # A: 8 GPUs x 100 s of work; B: 8 GPUs x 110 s; one 8-GPU server: SJF starts the shorter one only.
    p = _one_server((Job("A", "cnn", 8, 800), Job("B", "cnn", 8, 880)))
    assert phase_one(p).waiting == ["B"]                                  # truth: A (100 s) before B (110 s)
    assert phase_one(p, predictor=RuntimePredictor({"A": 1.2})).waiting == ["A"]   # A believed 120 s > 110 s
    assert phase_one(p, predictor=RuntimePredictor({"B": 0.95})).waiting == ["B"]  # B believed 104.5 s > 100 s


def test_knapsack_values_use_predicted_running_times() -> None:
    # Table 3.2's job B (2..6 workers, 120 worker-seconds): one flexible worker takes it from 60 s to 40 s;
    # predicted 1.25x longer, the same worker is believed to save 25 s.
    p = _one_server((Job("B", "bert", 2, 120, min_gpus=2, max_gpus=6),))
    truth = flexible_items(p, {"B": 2})
    pred = flexible_items(p, {"B": 2}, RuntimePredictor({"B": 1.25}))
    assert truth.value[0] == pytest.approx(20.0) and pred.value[0] == pytest.approx(25.0)
    assert list(pred.value) == pytest.approx([1.25 * v for v in truth.value])


class _Recorder:
    """A policy that records every decision of the policy it wraps (allocations per job, per round)."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.log = inner, []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def decide(self, problem: Any) -> Any:
        d = self.inner.decide(problem)
        self.log.append((problem.time, tuple((j.job, j.action, j.allocation) for j in d.payload.jobs)))
        return d

    def return_servers(self, *args: Any) -> Any:
        r = self.inner.return_servers(*args)
        self.log.append(("return", r))
        return r


def _sim(predictor: RuntimePredictor | None, jobs: list[Job]) -> tuple[Any, list[Any]]:
    inf = tuple(inference_name(i) for i in range(3))
    extras = {} if predictor is None else {PREDICTOR_OPTION: predictor}
    pol = _Recorder(make_policy("lyra", PolicyOptions(time_limit=5, extras=extras), kind="lyra"))
    usage = UsageSeries(tuple([0.2] * 12 + [0.95] * 12 + [0.4] * 200))
    res = Simulator(two_pool_cluster(2, 3), jobs, pol, LyraGroundTruth(frozenset({"T4"})), CFG,
                    round_fields={"inference_nodes": inf}, pool_targets=loan_targets(usage, inf)).run()
    return res, pol.log


def test_a_predictor_with_zero_error_reproduces_the_oracle_allocation() -> None:
    jobs = lyra_jobs(synthetic_rows(24, seed=3, hours=1.5, max_gpus=16), seed=3, elastic_count=0.2)
    oracle, oracle_log = _sim(None, jobs)
    exact, exact_log = _sim(runtime_predictor(jobs, 0.0, 0.25, seed=1), jobs)
    assert len(oracle_log) > 10 and any(e[0] == "return" for e in oracle_log)   # rounds and a reclaim happened
    assert exact_log == oracle_log
    assert [(r.name, r.start_s, r.finish_s, r.preemptions) for r in exact.jobs] == \
        [(r.name, r.start_s, r.finish_s, r.preemptions) for r in oracle.jobs]
    # the same trace with every prediction wrong decides otherwise (the comparison above can fail)
    _, wrong_log = _sim(runtime_predictor(jobs, 1.0, 0.25, seed=1), jobs)
    assert wrong_log != oracle_log


def test_jobs_run_at_the_truth_whatever_the_prediction() -> None:
    jobs = [Job("a", "cnn", 8, 8 * 3600, gpus_per_worker=2)]
    for f in (0.8, 1.25):
        res, _ = _sim(RuntimePredictor({"a": f}), jobs)
        assert res.jobs[0].jct_s == pytest.approx(3600.0)


def test_simulate_kind_lyra_takes_the_prediction_options() -> None:
    from optsched.experiments.compare import simulate_kind
    from optsched.sim.setup import SimulationRequest
    inputs, results = simulate_kind("lyra", SimulationRequest(jobs=20, options={"prediction_error": 0.5,
                                                                                "prediction_margin": 0.1}),
                                    ["lyra"], CFG)
    pred = inputs.runs["policy_extras"][PREDICTOR_OPTION]
    assert len(pred.factors) == 10 and all(0.9 <= f <= 1.1 for f in pred.factors.values())
    assert "50% of jobs with a wrong running-time prediction" in inputs.notes[-1]
    assert results["lyra"].summary()["unfinished"] == 0
    with pytest.raises(ValidationError, match=r"--prediction-error must lie in \[0, 1\], got 2.0"):
        simulate_kind("lyra", SimulationRequest(jobs=20, options={"prediction_error": 2.0}), ["lyra"], CFG)
    with pytest.raises(ValidationError, match=r"--prediction-margin must lie in \[0, 1\), got 1.0"):
        simulate_kind("lyra", SimulationRequest(jobs=20, options={"prediction_margin": 1.0}), ["lyra"], CFG)

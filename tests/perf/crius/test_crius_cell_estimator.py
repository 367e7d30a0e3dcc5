"""The agile Cell estimator (Crius Sec. 5.1): the pipeline formula, assembly of 2^Ns plans, the exact
best assembled plan, the memory filter, and hand-computed estimates."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optsched.core import Cluster, GPUType, Node, get_cluster
from optsched.core.errors import ValidationError
from optsched.perf.crius.cell_estimator import (CellEstimator, EstimatorParams, StageTable, _best_by_enumeration,
                                                _best_by_viterbi, best_pipeline, enumerate_pipelines,
                                                pipeline_latency)
from optsched.perf.crius.comm_profile import CommCurve, CommProfile
from optsched.perf.crius.models import crius_model
from optsched.perf.crius.op_graph import Operator, OperatorGraph

RATE = 100e12 * 0.5  # peak x efficiency of the toy GPU


def test_pipeline_formula_hand_computed() -> None:
    # first micro-batch 1 + 3 + 2 = 6; then 11 x (3 - 0.5): stage 2 is the slowest, its 0.5 s overlapped
    assert pipeline_latency([1.0, 3.0, 2.0], [0.0, 0.5, 0.2], 12) == pytest.approx(6.0 + 11 * 2.5)
    # equally slow stages: the one with less communication to hide dominates
    assert pipeline_latency([2.0, 2.0], [0.0, 0.5], 8) == pytest.approx(4.0 + 7 * 2.0)
    with pytest.raises(ValidationError):
        pipeline_latency([1.0], [0.0, 1.0], 4)


def _toy(memory_gib: float = 80.0) -> tuple[Cluster, CommProfile]:
    g = GPUType("G", memory_gib, 100.0, intra_node_gbps=100.0, efficiency=0.5)
    cluster = Cluster("toy", (Node("n0", "G", 8, 64, 512.0), Node("n1", "G", 8, 64, 512.0)), (g,), 100.0, 10.0, 16.0)
    linear = dict(bytes=[1.0, 1e12], seconds=[1e-9, 1e3])  # 1 ns a byte
    profile = CommProfile([CommCurve("G", link, "send_recv", 2, **linear) for link in ("intra", "inter")])
    return cluster, profile


def _two_ops(f1: float, f2: float, cut: float, params: float = 0.0, act: float = 0.0) -> OperatorGraph:
    return OperatorGraph.of("toy-two", 16, [Operator("a", flops=f1, params=params, act_bytes=act),
                                            Operator("b", flops=f2, params=params, act_bytes=act)],
                            [("a", "b", cut)])


def test_one_stage_one_gpu_is_flops_over_rate() -> None:
    cluster, profile = _toy()
    est = CellEstimator(cluster, EstimatorParams(kernel_launch_s=0.0, comm_profile=profile))
    g = _two_ops(1e12, 3e12, 1e6)
    e = est.estimate(est.cell(g, "G", 1, 1))
    # B = 4 micro-batches of 4 samples, no communication: 4 x 3 x 4 x 4e12 / RATE = 3 x 16 x 4e12 / RATE
    assert e.iteration_time_s == pytest.approx(3 * 16 * 4e12 / RATE)
    assert e.throughput == pytest.approx(16 / e.iteration_time_s)
    assert e.feasible_plans == 2 ** 1


def test_two_stages_hand_computed() -> None:
    cluster, profile = _toy()
    est = CellEstimator(cluster, EstimatorParams(kernel_launch_s=0.0, comm_profile=profile))
    g = _two_ops(1e12, 3e12, 1e6)
    e = est.estimate(est.cell(g, "G", 2, 2))
    assert e.partition.gpus == (1, 1)
    # B = 8 micro-batches of 2 samples; stage 1 receives 2 x 1e6 bytes (1 ns/byte) forward and backward
    t0 = 3 * 2 * 1e12 / RATE
    c1 = 2 * (2e6 * 1e-9)
    t1 = 3 * 2 * 3e12 / RATE + c1
    assert e.iteration_time_s == pytest.approx(t0 + t1 + 7 * (t1 - c1))
    assert e.feasible_plans == 4


def test_assembly_lists_2_to_the_ns_plans_and_the_estimate_is_their_best() -> None:
    c = get_cluster("crius-sim-1280")
    est = CellEstimator(c)
    for model, gpus, stages in (("bert-1.3b", 8, 4), ("wresnet-2b", 16, 8), ("moe-2.4b", 16, 4)):
        cell = est.cell(crius_model(model), "A100-40G", gpus, stages)
        e = est.estimate(cell)
        options = [((g, 1), (1, g)) for g in e.partition.gpus]
        table = est.stage_table(cell, e.partition, options)
        latencies, combos = enumerate_pipelines(table)
        assert len(latencies) == 2 ** stages
        assert e.iteration_time_s == pytest.approx(float(latencies.min()))
        assert e.feasible_plans == int(np.isfinite(latencies).sum())
        assert tuple(options[s][o] for s, o in enumerate(combos[int(np.argmin(latencies))])) == e.plan.splits


def _tables() -> st.SearchStrategy[StageTable]:
    @st.composite
    def build(draw: st.DrawFn) -> StageTable:
        S = draw(st.integers(1, 5))
        K = [draw(st.integers(1, 3)) for _ in range(S)]
        val = st.one_of(st.floats(0.0, 10.0).map(lambda x: round(x, 1)), st.just(math.inf))
        own = tuple(np.array([draw(val) for _ in range(k)]) for k in K)
        xfer = [np.zeros((1, K[0]))]
        for s in range(1, S):
            xfer.append(np.array([[draw(st.floats(0.0, 3.0).map(lambda x: round(x, 1))) for _ in range(K[s])]
                                  for _ in range(K[s - 1])]))
        return StageTable(own, tuple(xfer), draw(st.integers(1, 16)))
    return build()


@settings(max_examples=200, deadline=None)
@given(_tables())
def test_exact_best_equals_the_minimum_of_every_combination(table: StageTable) -> None:
    latencies, _ = enumerate_pipelines(table)
    want = float(latencies.min())
    for solver in (best_pipeline, _best_by_enumeration, _best_by_viterbi):
        got, choice = solver(table)
        if math.isinf(want):
            assert math.isinf(got) and choice == ()
        else:
            assert got == pytest.approx(want) and table.latency(choice) == pytest.approx(want)


def test_memory_filter_drops_plans_and_checkpointing_rescues_activations() -> None:
    cluster, profile = _toy(memory_gib=4.0)
    est = CellEstimator(cluster, EstimatorParams(kernel_launch_s=0.0, comm_profile=profile, workspace_gib=0.0))
    # 0.1e9 parameters a stage: 1.6 GB of state fits in 4 GiB x 0.92; 1e9 does not, on any split
    small = est.estimate(est.cell(_two_ops(1e12, 1e12, 1e3, params=0.1e9), "G", 1, 1))
    big = est.estimate(est.cell(_two_ops(1e12, 1e12, 1e3, params=1e9), "G", 1, 1))
    assert small.feasible and not big.feasible and big.feasible_plans == 0 and big.throughput == 0.0
    # 2 x 0.6 GB of activations a sample do not fit 4 samples; one operator's and the inputs (1 kB) do
    acts = est.estimate(est.cell(_two_ops(1e12, 1e12, 1e3, params=1e6, act=0.6e9), "G", 1, 1))
    assert acts.plan.remat == (True,)
    assert acts.iteration_time_s == pytest.approx(4 * 16 * 2e12 / RATE)  # four forward-pass costs


def test_cells_are_checked() -> None:
    est = CellEstimator(get_cluster("crius-sim-1280"))
    g = crius_model("bert-1.3b")
    with pytest.raises(ValidationError, match="not a power of two"):
        est.estimate(est.cell(g, "A40", 6, 2))
    with pytest.raises(ValidationError, match="placement"):
        est.cell(g, "A40", 4, 2, gpus_per_node=(2, 1))
    assert est.cell(g, "V100-32G", 32, 2).gpus_per_node == (16, 16)
    assert est.cell(g, "A40", 8, 2).gpus_per_node == (2, 2, 2, 2)


def test_prediction_and_truth_parameters_differ() -> None:
    c = get_cluster("crius-sim-1280")
    cell_args = (crius_model("bert-1.3b"), "A40", 8, 2)
    a = CellEstimator(c)
    b = CellEstimator(c, EstimatorParams(family_factor={("A40", "bert"): 0.8}))
    assert b.estimate(b.cell(*cell_args)).iteration_time_s > a.estimate(a.cell(*cell_args)).iteration_time_s

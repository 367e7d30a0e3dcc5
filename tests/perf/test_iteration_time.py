"""Morphling Appendix A formulas against hand-computed values, one test per plan family."""

from __future__ import annotations

import math

import numpy as np
import pytest

from optsched.core import ExecutionPlan, ValidationError, ZeroMode, a800_cluster, get_model
from optsched.perf.iteration_time import (Bandwidths, PerfParams, group_node_spread, iteration_time, overlap,
                                          plan_features, throughput)

BW = Bandwidths(intra_gbps=100.0, inter_gbps=80.0, pcie_gbps=20.0, gpus_per_node=8)
PARAMS = PerfParams(k_bwd=2.0, k_sync=2.0, k_opt=0.05, k_opt_off=3.0, k_off=1.5, k_swap=4.0,
                    k_const=0.02, fwd_s=0.01)
BERT = get_model("bert")  # P = 336,297,858, h = 1024, l = 24, s = 512, b = 32
P = 336_297_858


def f(k: float, x: float, y: float) -> float:
    return (x ** k + y ** k) ** (1 / k)


def test_overlap_limits() -> None:
    x, y = np.array([3.0, 0.0, 2.0]), np.array([4.0, 0.0, 0.0])
    assert overlap(1.0, x, y) == pytest.approx([7.0, 0.0, 2.0])
    assert overlap(2.0, x, y) == pytest.approx([5.0, 0.0, 2.0])
    assert overlap(500.0, x, y) == pytest.approx([4.0, 0.0, 2.0], rel=1e-3)  # -> max, no overflow


def test_dp_with_ga_on_one_node() -> None:
    plan = ExecutionPlan(dp=8, ga_steps=2)
    # mb = 32/(8*2) = 2 samples: T_fwd = 0.01*2 = 0.02, T_bwd = 0.04
    t_fwd, t_bwd = 0.02, 0.04
    t_dp = 2 * P * 2 * 7 / 8 / 100e9  # fp16 gradients, ring all-reduce, NVLink
    t_opt = 0.05 * P / 1e9  # x = t*p = 1
    expect = 2 * t_fwd + 1 * t_bwd + f(2.0, t_bwd, t_dp) + t_opt + 0.02
    assert iteration_time(BERT, plan, (8,), 8, BW, PARAMS) == pytest.approx(expect)
    assert throughput(BERT, plan, (8,), 8, BW, PARAMS) == pytest.approx(32 / expect)


def test_gc_adds_one_forward_to_backward() -> None:
    plain = plan_features(BERT, ExecutionPlan(dp=4), (4,), 8, BW)
    gc = plan_features(BERT, ExecutionPlan(dp=4, gc=True), (4,), 8, BW)
    t_fwd = 0.01 * 8  # mb = 8
    t_dp = 2 * P * 2 * 3 / 4 / 100e9
    expect_plain = t_fwd + f(2.0, 2 * t_fwd, t_dp) + 0.05 * P / 1e9 + 0.02
    expect_gc = t_fwd + f(2.0, 3 * t_fwd, t_dp) + 0.05 * P / 1e9 + 0.02
    from optsched.perf.iteration_time import breakdown
    b_plain, b_gc = breakdown(plain, PARAMS), breakdown(gc, PARAMS)
    assert b_plain.t_iter[0] == pytest.approx(expect_plain)
    assert b_gc.t_iter[0] == pytest.approx(expect_gc)
    assert b_gc.t_bwd[0] == pytest.approx(b_plain.t_bwd[0] + b_plain.t_fwd[0])


def test_zero_dp_across_nodes_uses_rdma_share() -> None:
    plan = ExecutionPlan(dp=8, zero=ZeroMode.DP)
    # placement 4+4: the DP ring has 4 members on its thinnest node -> 4 * 80/8 = 40 GB/s
    t_fwd, t_bwd = 0.04, 0.08
    t_dp = 2 * P * 2 * 7 / 8 / 40e9
    expect = t_fwd + f(2.0, t_bwd, t_dp) + 0.05 * P / 1e9 / 8 + 0.02
    assert iteration_time(BERT, plan, (4, 4), 8, BW, PARAMS) == pytest.approx(expect)
    # 1 GPU per node: one GPU's share, 10 GB/s: slower
    assert iteration_time(BERT, plan, (1,) * 8, 8, BW, PARAMS) > expect


def test_zero_offload() -> None:
    plan = ExecutionPlan(dp=2, zero=ZeroMode.OFFLOAD)
    c = 6.0
    t_fwd, t_bwd = 0.16, 0.32  # mb = 16
    t_dp = 2 * P * 2 * 1 / 2 / 100e9
    t_opt = 3.0 * P / 1e9 / (2 * c)
    t_off = 4 * P / (2 * 20e9)
    expect = t_fwd + t_bwd + f(1.5, t_dp, t_off) + f(4.0, t_opt, t_off) + 0.02
    assert iteration_time(BERT, plan, (2,), c, BW, PARAMS) == pytest.approx(expect)
    # more CPUs per GPU speed up the CPU optimizer step
    assert iteration_time(BERT, plan, (2,), 2 * c, BW, PARAMS) < expect


def test_3d_with_pipeline_and_tensor_parallelism() -> None:
    model = get_model("gpt2")  # P = 1,557,686,400, h = 1600, l = 48, s = 1024, b = 16
    Pg, b, s, h, l = 1_557_686_400, 16, 1024, 1600, 48
    plan = ExecutionPlan(dp=2, tp=2, pp=2, micro_batches=4)
    # placement (8,): everything inside one node
    mb = b / (2 * 4)
    t_fwd = 0.01 * (mb / 2) / 2 * (4 + 2 - 1)
    t_bwd = 2 * t_fwd
    t_dp = 2 * Pg * 2 * 1 / (2 * 2 * 2) / 100e9
    t_tp = 2 * 4 * 2 * 1 * b * s * h * l / (2 * 2) / 100e9
    t_pp = 2 * 2 * 2 * b * s * h / (2 * 2) / 100e9
    t_opt = 0.05 * Pg / 1e9 / 4
    expect = t_fwd + f(2.0, t_bwd, t_dp) + t_tp + t_pp + t_opt + 0.02
    assert iteration_time(model, plan, (8,), 8, BW, PARAMS) == pytest.approx(expect)
    # the same plan over two nodes of 4: PP hop crosses nodes (one GPU's share, 10 GB/s)
    t_pp_inter = 2 * 2 * 2 * b * s * h / (2 * 2) / 10e9
    expect2 = t_fwd + f(2.0, t_bwd, t_dp) + t_tp + t_pp_inter + t_opt + 0.02
    assert iteration_time(model, plan, (4, 4), 8, BW, PARAMS) == pytest.approx(expect2)


def test_more_micro_batches_shrink_the_pipeline_bubble() -> None:
    model = get_model("gpt2")
    t1 = iteration_time(model, ExecutionPlan(dp=1, tp=1, pp=4, micro_batches=1), (4,), 8, BW, PARAMS)
    t16 = iteration_time(model, ExecutionPlan(dp=1, tp=1, pp=4, micro_batches=16), (4,), 8, BW, PARAMS)
    assert t16 < t1


def test_group_node_spread_megatron_order() -> None:
    plan = ExecutionPlan(dp=2, tp=4, pp=2)  # 16 GPUs
    # two nodes of 8: TP groups inside nodes, DP pairs inside nodes, PP crosses
    assert group_node_spread(plan, (8, 8)) == (0, 0, 1)
    # four nodes of 4: TP inside, each DP group spans two nodes with 1 member each
    assert group_node_spread(plan, (4, 4, 4, 4)) == (1, 0, 1)
    assert group_node_spread(ExecutionPlan(dp=16), (8, 8)) == (8, 0, 0)
    with pytest.raises(ValidationError, match="16 GPUs"):
        group_node_spread(plan, (8, 4))


def test_params_validation_and_round_trip() -> None:
    assert PerfParams.from_dict(PARAMS.to_dict()) == PARAMS
    assert PerfParams.from_array(PARAMS.as_array()) == PARAMS
    with pytest.raises(ValidationError, match="k_sync"):
        PerfParams(k_sync=0.5)
    with pytest.raises(ValidationError, match="unknown field"):
        PerfParams.from_dict({"k_bogus": 1.0})


def test_bandwidths_from_cluster() -> None:
    c = a800_cluster(2, 4)
    bw = Bandwidths.of(c, "A800")
    assert bw.gpus_per_node == 4 and bw.inter_share_gbps == pytest.approx(c.inter_node_gbps / 4)
    assert math.isfinite(iteration_time(BERT, ExecutionPlan(dp=8), (4, 4), 8, bw, PARAMS))

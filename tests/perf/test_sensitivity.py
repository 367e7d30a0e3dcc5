"""Resource sensitivity curves, slopes and minRes (Rubick Sec. 5)."""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optsched.core import (ExecutionPlan, ModelSpec, PlanInfeasibleError, ValidationError, ZeroMode,
                           a800_cluster, get_cluster, get_gpu_type, get_model)
from optsched.core.pool import packed_placement
from optsched.perf.iteration_time import Bandwidths, PerfParams
from optsched.perf.performance_model import PerformanceModel
from optsched.perf.plans import enumerate_plans
from optsched.perf.sensitivity import CurvePoint, MinRes, SensitivityCurve, cpu_curve, gpu_curve, min_res

from helpers import fixed_perf

A800 = get_gpu_type("A800")


@lru_cache(maxsize=None)
def default_perf(model: str) -> PerformanceModel:
    return fixed_perf(model, get_cluster("a800-8x8"))


# -- a tiny hand-checked case -----------------------------------------------------------------------
TINY = ModelSpec("tiny", num_params=200_000_000, hidden=1024, layers=8, seq_len=256, global_batch=16,
                 num_heads=16)
TINY_PARAMS = PerfParams(k_bwd=2.0, k_sync=2.0, k_opt=0.05, k_opt_off=1.0, k_off=2.0, k_swap=2.0,
                         k_const=0.01, fwd_s=0.01)


def tiny_perf() -> PerformanceModel:
    cluster = a800_cluster(2, 4)  # 2 nodes x 4 A800: NVLink 150 GB/s, RDMA 80 GB/s per node
    return PerformanceModel(TINY, "A800", Bandwidths.of(cluster, "A800"), TINY_PARAMS)


def hand_zero_dp_throughput(d: int, bandwidth_bytes_per_s: float) -> float:
    """Appendix A by hand for ZeRO-DP on d GPUs (t = p = a = 1, no GC):
    T_fwd = f b/d, T_bwd = k_bwd T_fwd, T_dp = 2 bytes * P * 2(d-1)/d / B,
    T_cc = T_fwd + (T_bwd^2 + T_dp^2)^(1/2) (k_sync = 2), T_opt = k_opt P[1e9]/d, T_iter = T_cc + T_opt + k_const."""
    P, b = TINY.num_params, TINY.global_batch
    t_fwd = 0.01 * b / d
    t_bwd = 2.0 * t_fwd
    t_dp = 2.0 * P * 2 * (d - 1) / d / bandwidth_bytes_per_s
    t_cc = t_fwd + math.sqrt(t_bwd ** 2 + t_dp ** 2)
    t_opt = 0.05 * (P / 1e9) / d
    return b / (t_cc + t_opt + 0.01)


def test_packed_placement_fills_whole_nodes_first() -> None:
    assert packed_placement(10, 8) == (8, 2)
    assert packed_placement(8, 8) == (8,)
    assert packed_placement(3, 8) == (3,)
    assert packed_placement(24, 8) == (8, 8, 8)
    assert packed_placement(5, 4) == (4, 1)
    with pytest.raises(ValidationError):
        packed_placement(0, 8)


def test_gpu_curve_matches_hand_computed_points() -> None:
    perf = tiny_perf()
    curve = gpu_curve(perf, 8, 4, 4.0, A800)
    assert curve.resource == "gpu"
    assert list(curve.amounts) == list(range(1, 9))
    # inside a node the DP all-reduce runs at NVLink speed (150 GB/s); (4, 4) spans two nodes with 4
    # members on each: 4 rings of one GPU's RDMA share, 4 * 80/4 = 80 GB/s
    expected = {1: hand_zero_dp_throughput(1, 150e9), 2: hand_zero_dp_throughput(2, 150e9),
                4: hand_zero_dp_throughput(4, 150e9), 8: hand_zero_dp_throughput(8, 80e9)}
    for g, thr in expected.items():
        p = curve.point(g)
        assert p.throughput == pytest.approx(thr, rel=1e-12)
        assert p.gpus_per_node == packed_placement(g, 4)
        assert p.cpus == 4 * g
        # ZeRO-DP (the optimizer shards over d) is the best plan; at d = 1 plain DP ties with it
        assert p.plan is not None and p.plan.family in ({"dp", "zero-dp"} if g == 1 else {"zero-dp"})
        assert perf.throughput(p.plan, p.gpus_per_node, 4.0) == pytest.approx(thr, rel=1e-12)
    # the hand value is the maximum over every enumerated plan
    for g in expected:
        pl = packed_placement(g, 4)
        best = max(perf.throughputs([(p, pl, 4.0) for p in enumerate_plans(TINY, pl, A800)]))
        assert curve.point(g).throughput == pytest.approx(best, rel=1e-12)


def test_gpu_curve_is_running_max_and_flat_where_invalid() -> None:
    perf = default_perf("llama30")
    # 200 GiB of host memory per node: llama30's ZeRO-Offload states (14 P/d bytes, 424 GiB at d = 1)
    # do not fit on 1, 2 or 4 GPUs of one node; b = 4 rules out DP on 3, 5, 6, 7 GPUs
    curve = gpu_curve(perf, 16, 8, 12.0, A800, host_mem_gib_per_node=200.0)
    thr = curve.throughputs
    assert np.all(np.diff(thr) >= 0)
    first = curve.points[0]
    assert first.plan is None and first.throughput == 0.0 and first.gpus_per_node == () and first.cpus == 0
    valid = [p for p in curve.points if p.plan is not None]
    assert valid and valid[0].amount == 8
    assert all(p.plan is None for p in curve.points if p.amount < 8)
    # 9 GPUs on (8, 1) only allow pp = 9 (b = 4 rules out dp = 3 or 9), slower than the 8-GPU plan
    # (its last stage crosses to the second node): the point repeats the 8-GPU point, the job would
    # not use the ninth GPU
    assert (curve.point(9).plan, curve.point(9).gpus_per_node, curve.point(9).cpus) == (
        curve.point(8).plan, (8,), 96)
    # every flat stretch repeats the previous best point's plan, placement and CPUs
    for prev, cur in zip(curve.points, curve.points[1:]):
        if cur.throughput == prev.throughput and cur.plan is not None:
            assert (cur.plan, cur.gpus_per_node, cur.cpus) == (prev.plan, prev.gpus_per_node, prev.cpus)
        if cur.plan is not None:
            assert cur.plan.num_gpus == sum(cur.gpus_per_node) <= cur.amount


@pytest.mark.parametrize("model", ["bert", "gpt2", "llama7"])
def test_gpu_curve_points_are_best_plans(model: str) -> None:
    perf = default_perf(model)
    curve = gpu_curve(perf, 12, 8, 12.0, A800)
    thr = curve.throughputs
    assert np.all(np.diff(thr) >= 0)
    running = 0.0
    for p in curve.points:
        pl = packed_placement(p.amount, 8)
        plans = enumerate_plans(perf.model, pl, A800)
        here = max(perf.throughputs([(q, pl, 12.0) for q in plans])) if plans else 0.0
        running = max(running, here)
        assert p.throughput == pytest.approx(running, rel=1e-12)
        assert p.plan is not None
        assert perf.throughput(p.plan, p.gpus_per_node, 12.0) == pytest.approx(p.throughput, rel=1e-12)


def test_gpu_curve_checks_its_inputs() -> None:
    perf = default_perf("bert")
    with pytest.raises(ValidationError, match="A40"):
        gpu_curve(perf, 4, 8, 12.0, get_gpu_type("A40"))
    with pytest.raises(ValidationError):
        gpu_curve(perf, 0, 8, 12.0, A800)
    with pytest.raises(ValidationError):
        gpu_curve(perf, 4, 8, 0.0, A800)


def test_cpu_curve_of_an_offload_only_job_rises_with_cpus() -> None:
    # llama7 on one A800 only fits with ZeRO-Offload, whose optimizer step runs on the CPU cores
    perf = default_perf("llama7")
    curve = cpu_curve(perf, (1,), 12, A800)
    assert curve.resource == "cpu"
    assert list(curve.amounts) == list(range(1, 13))
    assert np.all(np.diff(curve.throughputs) > 0)
    assert all(p.plan is not None and p.plan.zero is ZeroMode.OFFLOAD for p in curve.points)
    assert all(p.cpus == p.amount and p.gpus_per_node == (1,) for p in curve.points)
    for p in curve.points[:3]:
        assert p.throughput == pytest.approx(
            max(perf.throughputs([(q, (1,), float(p.amount)) for q in enumerate_plans(perf.model, (1,), A800)])),
            rel=1e-12)
    assert curve.slope(4) > 0 and curve.slope(12) == 0.0
    # min_cpus moves the start; a non-offload job's curve is flat
    assert list(cpu_curve(perf, (1,), 6, A800, min_cpus=3).amounts) == [3, 4, 5, 6]
    flat = cpu_curve(default_perf("bert"), (2,), 16, A800)
    assert flat.amounts[0] == 2
    assert np.ptp(flat.throughputs) == 0.0 and flat.slope(4) == 0.0
    with pytest.raises(ValidationError):
        cpu_curve(perf, (1,), 0, A800)


def test_slope_on_a_hand_made_curve() -> None:
    pts = tuple(CurvePoint(a, t, None, (), 0) for a, t in ((1, 10.0), (2, 30.0), (4, 50.0), (8, 50.0)))
    curve = SensitivityCurve("gpu", pts)
    assert list(curve.amounts) == [1, 2, 4, 8]
    assert list(curve.throughputs) == [10.0, 30.0, 50.0, 50.0]
    assert curve.slope(1) == 20.0
    assert curve.slope(2) == 10.0  # (50 - 30) / (4 - 2)
    assert curve.slope(4) == 0.0
    assert curve.slope(8) == 0.0  # end of the curve
    assert curve.slope(2, -1) == 20.0  # (30 - 10) / (2 - 1): what one GPU less loses per unit
    assert curve.slope(4, -1) == 10.0
    assert curve.slope(1, -1) == 0.0  # start of the curve
    assert curve.slope(3) == 20.0  # between points: the curve is worth 30 at 3, 50 at 4
    assert curve.slope(0) == 10.0  # from nothing to the first point
    assert curve.slope(100) == 0.0
    assert curve.throughput_at(3) == 30.0 and curve.throughput_at(0) == 0.0
    with pytest.raises(ValidationError):
        curve.slope(2, 0)
    with pytest.raises(ValidationError):
        curve.point(3)
    with pytest.raises(ValidationError):
        SensitivityCurve("gpu", (pts[1], pts[0]))
    with pytest.raises(ValidationError):
        SensitivityCurve("memory", pts)


# -- minRes --------------------------------------------------------------------------------------------
def test_min_res_shrinks_a_wasteful_request() -> None:
    perf = default_perf("bert")
    plan = ExecutionPlan(dp=8, zero=ZeroMode.OFFLOAD)
    spread = (1,) * 8
    r = min_res(perf, plan, spread, 8, 8, A800, host_mem_gib_per_node=1600.0)
    assert isinstance(r, MinRes)
    assert r.reduced
    assert r.target == pytest.approx(perf.throughput(plan, spread, 1.0), rel=1e-12)
    assert r.gpus < 8 and r.cpus <= 8
    assert r.throughput >= r.target
    assert r.plan.num_gpus == r.gpus == sum(r.gpus_per_node)
    assert r.gpus_per_node == packed_placement(r.gpus, 8)
    assert perf.throughput(r.plan, r.gpus_per_node, r.cpus / r.gpus) == pytest.approx(r.throughput, rel=1e-12)


def test_min_res_of_a_minimal_request_is_the_request() -> None:
    perf = default_perf("bert")
    r = min_res(perf, None, (1,), 1, 8, A800)
    plans = enumerate_plans(perf.model, (1,), A800)
    best = max(perf.throughputs([(p, (1,), 1.0) for p in plans]))
    assert not r.reduced
    assert (r.gpus, r.cpus, r.gpus_per_node) == (1, 1, (1,))
    assert r.throughput == r.target == pytest.approx(best, rel=1e-12)
    # a whole node with its best plan cannot lose a GPU (the curve rises) nor CPUs (c >= g)
    r8 = min_res(perf, None, (8,), 8, 8, A800)
    assert not r8.reduced and (r8.gpus, r8.cpus) == (8, 8)
    # the requested plan is returned as is when nothing smaller reaches it
    plan = r8.plan
    again = min_res(perf, plan, (8,), 8, 8, A800)
    assert not again.reduced and again.plan == plan and again.throughput == again.target


def test_min_res_reduces_cpus_only_when_gpus_cannot_shrink() -> None:
    perf = default_perf("bert")
    r = min_res(perf, None, (8,), 64, 8, A800)  # bert's best plans do not use the CPUs
    assert r.reduced and (r.gpus, r.cpus) == (8, 8) and r.throughput >= r.target * (1 - 1e-9)


def test_min_res_rejects_an_infeasible_request() -> None:
    perf = default_perf("llama30")
    with pytest.raises(PlanInfeasibleError, match=r"llama30.*dp\(dp=1\)"):
        min_res(perf, ExecutionPlan(dp=1), (1,), 12, 8, A800)
    with pytest.raises(PlanInfeasibleError, match="llama30"):
        min_res(perf, None, (1,), 12, 8, A800, host_mem_gib_per_node=100.0)
    with pytest.raises(PlanInfeasibleError, match="bert"):
        min_res(default_perf("bert"), ExecutionPlan(dp=4), (2,), 4, 8, A800)  # 4 GPUs on a 2-GPU placement


def brute_force_min(perf: PerformanceModel, placement: tuple[int, ...], cpus: int, target: float) -> tuple[int, int]:
    """Exhaustive lexicographic (GPUs, CPUs) minimum, every CPU count evaluated."""
    n = sum(placement)
    for g in range(1, n + 1):
        pl = placement if g == n else packed_placement(g, 8)
        plans = enumerate_plans(perf.model, pl, A800)
        if not plans:
            continue
        cs = list(range(min(g, cpus), cpus + 1))
        thr = perf.throughputs([(p, pl, c / g) for c in cs for p in plans]).reshape(len(cs), len(plans))
        ok = np.flatnonzero(thr.max(axis=1) >= target * (1 - 1e-9))
        if ok.size:
            return g, cs[int(ok[0])]
    raise AssertionError("the request itself must qualify")


@pytest.mark.parametrize("model,family,placement,cpus", [
    ("llama7", "zero-offload", (2,), 24),
    ("llama7", "zero-offload", (1,), 12),
    ("llama7", "zero-offload", (1, 1, 1, 1), 16),
    ("gpt2", "zero-offload", (2, 2), 20),
    ("bert", "zero-offload", (1,) * 8, 8),
    ("t5", "ga", (1, 1), 6),
])
def test_min_res_is_the_lexicographic_minimum(model: str, family: str, placement: tuple[int, ...],
                                              cpus: int) -> None:
    plan = next(p for p in enumerate_plans(get_model(model), placement, A800) if p.family == family)
    perf = default_perf(model)
    r = min_res(perf, plan, placement, cpus, 8, A800)
    assert (r.gpus, r.cpus) == brute_force_min(perf, placement, cpus, r.target)
    assert r.reduced == ((r.gpus, r.cpus) != (sum(placement), cpus))
    if not r.reduced:
        assert r.plan == plan and r.gpus_per_node == placement


@st.composite
def requests(draw: st.DrawFn) -> tuple[str, ExecutionPlan | None, tuple[int, ...], int]:
    model = draw(st.sampled_from(["vit", "bert", "roberta"]))
    placement = tuple(sorted(draw(st.lists(st.integers(1, 4), min_size=1, max_size=3)), reverse=True))
    g = sum(placement)
    plans = enumerate_plans(get_model(model), placement, A800)
    plan = draw(st.none() | st.sampled_from(plans)) if plans else None
    cpus = draw(st.integers(1, 3 * g))
    return model, plan, placement, cpus


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(requests())
def test_min_res_never_exceeds_the_request(req: tuple[str, ExecutionPlan | None, tuple[int, ...], int]) -> None:
    model, plan, placement, cpus = req
    perf = default_perf(model)
    if plan is None and not enumerate_plans(perf.model, placement, A800):
        with pytest.raises(PlanInfeasibleError):
            min_res(perf, plan, placement, cpus, 8, A800)
        return
    r = min_res(perf, plan, placement, cpus, 8, A800)
    assert r.gpus <= sum(placement) and r.cpus <= cpus
    assert r.throughput >= r.target * (1 - 1e-9)
    assert r.plan.num_gpus == r.gpus == sum(r.gpus_per_node)
    assert perf.throughput(r.plan, r.gpus_per_node, r.cpus / r.gpus) == pytest.approx(r.throughput, rel=1e-12)
    if plan is not None:
        assert r.target == pytest.approx(perf.throughput(plan, placement, cpus / sum(placement)), rel=1e-12)
    if not r.reduced:
        assert (r.gpus, r.cpus, r.gpus_per_node) == (sum(placement), cpus, placement)

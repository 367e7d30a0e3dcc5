"""Model v2 (issue 11): each term on a hand-computed case, shrinking back to Eq. 1 when the rows
cannot identify a term, the identifiability rules, sane extrapolation, JSON."""

from __future__ import annotations

import math

import numpy as np
import pytest

from optsched.core import ExecutionPlan, ValidationError, ZeroMode, get_cluster, get_model
from optsched.perf.defaults import prior_performance_model
from optsched.perf.fitting import fit, identification
from optsched.perf.identifiability import identify
from optsched.perf.iteration_time import Bandwidths, PerfParams, breakdown, features_of
from optsched.perf.model_v2 import single_node_rate
from optsched.perf.performance_model import PerformanceModel

BW = Bandwidths(intra_gbps=100.0, inter_gbps=80.0, pcie_gbps=20.0, gpus_per_node=8)
BASE = PerfParams(k_bwd=2.0, k_sync=2.0, k_opt=0.05, k_opt_off=3.0, k_off=1.5, k_swap=4.0, k_const=0.02, fwd_s=0.01)
BERT = get_model("bert")  # P = 336,297,858, b = 32
P = 336_297_858
SHARE = 80e9 / 8  # one GPU's share of a node's RDMA bandwidth, bytes/s
CLUSTER = get_cluster("a800-8x8")


def one(plan: ExecutionPlan, gpn: tuple[int, ...], params: PerfParams, cpus: float = 8.0):
    return breakdown(features_of(BERT, [(plan, gpn, cpus)], BW), params)


# -- each term on a hand-computed case --------------------------------------------------------------
def test_odd_node_term_is_the_funnel_time_scaled_by_the_largest_node() -> None:
    plan = ExecutionPlan(dp=8)
    v_dp = 2 * P * 2 * 7 / 8  # fp16 ring all-reduce volume per GPU
    funnel = 8 * v_dp / SHARE  # all 8 ranks' volume through one GPU's share
    params = BASE.replace(k_odd=0.5, k_odd_node=0.25)
    odd = one(plan, (3, 3, 2), params)
    plain = one(plan, (3, 3, 2), BASE)
    assert odd.t_odd[0] == pytest.approx(0.5 * funnel * (1 + 0.25 * (3 - 1)))
    assert odd.t_iter[0] == pytest.approx(plain.t_iter[0] + odd.t_odd[0])
    # no odd node, one node, ZeRO-Offload, or no data parallelism: no odd time
    for p, gpn in ((plan, (4, 4)), (plan, (8,)), (ExecutionPlan(dp=8, zero=ZeroMode.OFFLOAD), (3, 3, 2)),
                   (ExecutionPlan(dp=1, tp=2, pp=4), (3, 3, 2))):
        assert one(p, gpn, params).t_odd[0] == 0.0, (p.label, gpn)


def test_nic_pairs_blend_the_thinnest_nodes_shares() -> None:
    plan = ExecutionPlan(dp=8, zero=ZeroMode.DP)
    v_dp = 2 * P * 2 * 7 / 8
    # (7, 1): the DP ring has 1 member on its thinnest node: k = 1 share, a NIC pair gives 2
    assert one(plan, (7, 1), BASE).t_dp[0] == pytest.approx(v_dp / SHARE)
    assert one(plan, (7, 1), BASE.replace(k_nic=1.0)).t_dp[0] == pytest.approx(v_dp / (2 * SHARE))
    assert one(plan, (7, 1), BASE.replace(k_nic=0.5)).t_dp[0] == pytest.approx(v_dp / (1.5 * SHARE))
    # k = 4 is whole pairs already; inside a node nothing changes
    assert one(plan, (4, 4), BASE.replace(k_nic=1.0)).t_dp[0] == pytest.approx(one(plan, (4, 4), BASE).t_dp[0])
    assert one(plan, (8,), BASE.replace(k_nic=1.0)).t_dp[0] == pytest.approx(one(plan, (8,), BASE).t_dp[0])


def test_micro_batch_exponent_scales_the_forward_time() -> None:
    plan = ExecutionPlan(dp=2)  # mb = 16; mb0 = 32 / 8 = 4
    plain, v2 = one(plan, (2,), BASE), one(plan, (2,), BASE.replace(k_mb=0.8))
    assert plain.t_fwd[0] == pytest.approx(0.01 * 16)
    assert v2.t_fwd[0] == pytest.approx(0.01 * 16 * 4 ** -0.2)
    assert v2.t_bwd[0] == pytest.approx(2.0 * v2.t_fwd[0])
    assert one(ExecutionPlan(dp=8), (8,), BASE.replace(k_mb=0.8)).t_fwd[0] == pytest.approx(0.01 * 4)  # at mb0


def test_family_multiplier_scales_only_its_family() -> None:
    params = BASE.replace(m_gc=1.5)
    gc = ExecutionPlan(dp=4, gc=True)
    assert one(gc, (4,), params).t_iter[0] == pytest.approx(1.5 * one(gc, (4,), BASE).t_iter[0])
    ga = ExecutionPlan(dp=4, ga_steps=2)
    assert one(ga, (4,), params).t_iter[0] == one(ga, (4,), BASE).t_iter[0]


def test_one_gpu_factor_scales_the_gpu_side_of_one_gpu_jobs_only() -> None:
    params = BASE.replace(m_single=0.5)
    for plan in (ExecutionPlan(dp=1, ga_steps=2), ExecutionPlan(dp=1, gc=True),
                 ExecutionPlan(dp=1, zero=ZeroMode.DP)):
        assert one(plan, (1,), params).t_iter[0] == pytest.approx(0.5 * one(plan, (1,), BASE).t_iter[0])
    # ZeRO-Offload: the GPU side halves, the CPU step f_swap(T_opt, T_off) does not
    off = ExecutionPlan(dp=1, zero=ZeroMode.OFFLOAD)
    plain, v2 = one(off, (1,), BASE), one(off, (1,), params)
    assert v2.t_cpu[0] == plain.t_cpu[0] > 0
    assert v2.t_iter[0] == pytest.approx(0.5 * (plain.t_iter[0] - plain.t_cpu[0]) + plain.t_cpu[0])
    # two GPUs, on one node or two: unchanged
    for gpn in ((2,), (1, 1)):
        assert one(ExecutionPlan(dp=2), gpn, params).t_iter[0] == one(ExecutionPlan(dp=2), gpn, BASE).t_iter[0]


def test_neutral_terms_are_exactly_eq1() -> None:
    assert PerfParams().is_eq1 and not BASE.replace(k_nic=0.1).is_eq1
    configs = [(ExecutionPlan(dp=8), (3, 3, 2), 8.0), (ExecutionPlan(dp=4, zero=ZeroMode.OFFLOAD), (2, 2), 4.0),
               (ExecutionPlan(dp=2, tp=2, pp=2), (4, 4), 8.0)]
    b = breakdown(features_of(BERT, configs, BW), BASE)
    assert np.all(b.t_odd == 0.0)
    with pytest.raises(ValidationError, match="form 'eq1' with v2 terms set"):
        PerformanceModel(BERT, "A800", BW, BASE.replace(k_odd=1.0))


# -- shrinking back to Eq. 1 ---------------------------------------------------------------------------
TRUE = PerfParams(k_bwd=1.8, k_sync=3.0, k_opt=0.04, k_opt_off=6.0, k_off=2.0, k_swap=5.0, k_const=0.08,
                  fwd_s=0.006)
SHAPES = [(1,), (2,), (4,), (8,), (4, 4), (3, 3, 2), (7, 1), (2, 2, 2, 2), (1, 1, 1, 1, 1, 1, 1, 1), (5, 3)]


def _configs() -> list:
    out = []
    for gpn in SHAPES:
        g = sum(gpn)
        out += [(ExecutionPlan(dp=g, ga_steps=2), gpn, 8.0), (ExecutionPlan(dp=g, gc=True), gpn, 8.0),
                (ExecutionPlan(dp=g, zero=ZeroMode.DP), gpn, 8.0), (ExecutionPlan(dp=g, zero=ZeroMode.OFFLOAD), gpn, 8.0)]
    return out


def test_v2_fitted_to_an_eq1_dataset_recovers_eq1s_predictions() -> None:
    base = prior_performance_model(BERT, CLUSTER, "A800")
    cfg = _configs()
    y = base.with_params(TRUE).iteration_times(cfg)
    v2 = fit(base, cfg, y, seed=0, starts=3, form="v2")
    assert v2.form == "v2" and {"k_odd", "k_nic", "k_mb", "m_gc"} <= set(v2.identified)  # all identifiable here
    assert v2.rmsle < 2e-3
    assert np.allclose(v2.iteration_times(cfg), y, rtol=1e-2)
    # and on unseen shapes too
    unseen = [(ExecutionPlan(dp=16, zero=ZeroMode.DP), (8, 8), 8.0), (ExecutionPlan(dp=8, gc=True), (6, 2), 8.0)]
    assert np.allclose(v2.iteration_times(unseen), base.with_params(TRUE).iteration_times(unseen), rtol=3e-2)


def test_families_without_a_fitted_factor_get_the_mean_of_the_fitted_ones() -> None:
    base = prior_performance_model(BERT, CLUSTER, "A800")
    cfg = [c for c in _configs() if not c[0].gc]  # GA, ZeRO-DP and ZeRO-Offload rows only
    truth = base.with_params(TRUE.replace(m_ga=2.0, m_zero_dp=2.0, m_zero_offload=2.0), form="v2")
    v2 = fit(base, cfg, truth.iteration_times(cfg), fwd_s=TRUE.fwd_s, starts=2, form="v2")
    fitted = [v2.params.m_ga, v2.params.m_zero_dp]
    assert {"m_ga", "m_zero_dp"} <= set(v2.identified) and not {"m_gc", "m_zero_offload"} & set(v2.identified)
    assert v2.params.m_gc == pytest.approx(math.exp(np.mean(np.log(fitted)))) == pytest.approx(2.0, rel=0.05)
    assert v2.params.m_dp == v2.params.m_gc and v2.params.m_3d == v2.params.m_gc
    assert v2.params.m_zero_offload == v2.params.m_zero_dp  # tied: ZeRO-Offload's GPU side is ZeRO-2's


def test_a_seven_row_v2_fit_is_the_eq1_fit() -> None:
    base = prior_performance_model(BERT, CLUSTER, "A800")
    cfg = _configs()[::5][:7]
    y = base.with_params(TRUE).iteration_times(cfg) * np.linspace(0.9, 1.1, 7)  # not Eq. 1 exactly
    eq1, v2 = fit(base, cfg, y, starts=3, form="eq1"), fit(base, cfg, y, starts=3, form="v2")
    assert v2.params.is_eq1 and v2.params == eq1.params and v2.rmsle == eq1.rmsle
    assert np.array_equal(v2.iteration_times(cfg), eq1.iteration_times(cfg))


def test_v2_never_fits_worse_than_eq1_on_its_rows() -> None:
    base = prior_performance_model(BERT, CLUSTER, "A800")
    cfg = _configs()
    rng = np.random.default_rng(1)
    y = base.with_params(TRUE).iteration_times(cfg) * np.exp(rng.normal(0, 0.1, len(cfg)))
    assert fit(base, cfg, y, starts=2, form="v2").rmsle <= fit(base, cfg, y, starts=2, form="eq1").rmsle + 1e-12


def test_without_a_profile_v2_holds_the_forward_time_of_the_eq1_stage() -> None:
    """Issue 25: the v2 stage keeps the Eq. 1 stage's fwd_s (where GC rows separate forward and backward)
    and frees the reference family's factor instead, as with a profiled fwd_s; "joint" fits it in both."""
    base = prior_performance_model(BERT, CLUSTER, "A800")
    cfg = _configs()
    rng = np.random.default_rng(2)
    truth = base.with_params(TRUE.replace(m_gc=1.4, m_zero_dp=1.2, m_zero_offload=1.2), form="v2")
    y = truth.iteration_times(cfg) * np.exp(rng.normal(0, 0.03, len(cfg)))
    eq1 = fit(base, cfg, y, seed=0, starts=2, form="eq1")
    v2 = fit(base, cfg, y, seed=0, starts=2, form="v2")
    profiled = fit(base, cfg, y, fwd_s=eq1.params.fwd_s, seed=0, starts=2, form="v2")
    assert v2.params.fwd_s == eq1.params.fwd_s
    assert set(v2.identified) == set(profiled.identified) | {"fwd_s"}
    assert np.allclose(v2.iteration_times(cfg), profiled.iteration_times(cfg), rtol=1e-6)
    joint = fit(base, cfg, y, seed=0, starts=2, form="v2", forward="joint")
    ref = next(m for m, why in joint.reasons if why.startswith("the reference family"))
    assert "fwd_s" in joint.identified and ref in v2.identified and ref not in joint.identified
    for mode, model in (("eq1", v2), ("joint", joint)):  # what the CLI prints agrees with the fit
        assert identification(base, cfg, form="v2", forward=mode).free == model.identified
    with pytest.raises(ValidationError, match="forward must be one of eq1, joint"):
        fit(base, cfg, y, form="v2", forward="profile")


# -- identifiability -----------------------------------------------------------------------------------
def _ident(cfg, form="v2", fix_fwd=True, min_rows=None):
    return identify([c[0] for c in cfg], features_of(BERT, cfg, BW), fix_fwd=fix_fwd, form=form, min_rows=min_rows)


def _zdp(*shapes: tuple[int, ...]) -> list:
    return [(ExecutionPlan(dp=sum(gpn), zero=ZeroMode.DP), gpn, 8.0) for gpn in shapes]


def test_each_v2_term_needs_its_contrast() -> None:
    even = _zdp((4, 4), (2, 2, 2, 2), (8,), (2,), (1,))
    ident = _ident(even + _zdp((6, 2)) * 4)
    assert "k_odd" not in ident.free and "needs 2 rows spanning" in ident.reasons["k_odd"]
    odd = _zdp((3, 3, 2), (7, 1), (5, 3))
    ident = _ident(even + odd + _zdp((2, 2)) * 12)
    assert {"k_odd", "k_odd_node", "k_nic", "k_mb", "m_zero_dp"} <= set(ident.free)
    # one family only and fwd_s fitted: the family is the reference, its multiplier held
    ident = _ident(even + odd + _zdp((2, 2)) * 12, fix_fwd=False)
    assert "m_zero_dp" in ident.held and "reference" in ident.reasons["m_zero_dp"]
    assert "k_bwd" in ident.held and "gc row" in ident.reasons["k_bwd"]


def test_the_one_gpu_factor_needs_two_one_gpu_rows_of_families_with_larger_rows() -> None:
    many = _zdp((4, 4), (2, 2), (8,), (2,), (4,)) * 3
    ga = [(ExecutionPlan(dp=g, ga_steps=2), (g,), 8.0) for g in (1, 2, 4)]
    assert "m_single" in _ident(many + _zdp((1,)) + ga).free  # ZeRO-DP and GA each on 1 GPU and on more
    ident = _ident(many + _zdp((1,)))  # one one-GPU row
    assert "m_single" in ident.held and "2 one-GPU rows" in ident.reasons["m_single"]
    # two one-GPU rows, but GC has no row on more GPUs: its factor could stand in for m_single
    gc_one = [(ExecutionPlan(dp=1, gc=True), (1,), 8.0)]
    assert "m_single" in _ident(many + _zdp((1,)) + gc_one).held


def test_v2_recovers_a_one_gpu_factor_and_predicts_a_held_out_one_gpu_row() -> None:
    base = prior_performance_model(BERT, CLUSTER, "A800")
    truth = base.with_params(TRUE.replace(m_single=0.55), form="v2")
    cfg = _configs()
    held = [i for i, c in enumerate(cfg) if c[1] == (1,) and c[0].zero is ZeroMode.DP]
    train = [c for i, c in enumerate(cfg) if i not in held]
    v2 = fit(base, train, truth.iteration_times(train), fwd_s=TRUE.fwd_s, starts=2, form="v2")
    assert "m_single" in v2.identified and v2.params.m_single == pytest.approx(0.55, rel=0.02)
    test = [cfg[i] for i in held]
    assert np.allclose(v2.iteration_times(test), truth.iteration_times(test), rtol=2e-2)
    # Eq. 1 cannot: it predicts the held-out one-GPU row about 1 / 0.55 too slow
    eq1 = fit(base, train, truth.iteration_times(train), fwd_s=TRUE.fwd_s, starts=2, form="eq1")
    assert eq1.iteration_times(test)[0] > 1.3 * truth.iteration_times(test)[0]


def test_few_rows_hold_the_v2_terms_then_the_overlap_exponents_then_fail() -> None:
    odd = _zdp((3, 3, 2), (7, 1), (5, 3), (4, 4), (1,))
    ident = _ident(odd, fix_fwd=False)  # k_sync, k_opt, k_const, fwd_s + k_odd... with 5 rows: Eq. 1 only
    assert ident.free == ("k_sync", "k_opt", "k_const", "fwd_s") and ident.min_rows == 5
    assert "too few rows" in ident.reasons["k_odd"]
    ident = _ident(odd[:4], fix_fwd=False)  # 4 rows: k_sync held too
    assert ident.free == ("k_opt", "k_const", "fwd_s")
    with pytest.raises(ValidationError, match=r"2 row\(s\) of family zero-dp .* at least 4 rows are needed"):
        _ident(odd[:2], fix_fwd=False)
    with pytest.raises(ValidationError, match="at least 7 rows"):
        _ident(odd, min_rows=7)


# -- extrapolation and JSON ----------------------------------------------------------------------------
def test_extrapolation_stays_positive_and_not_faster_per_gpu_than_one_node() -> None:
    base = prior_performance_model(BERT, CLUSTER, "A800")
    wild = base.with_params(TRUE.replace(k_mb=0.3, m_zero_dp=0.25, k_nic=1.0), form="v2")
    rate = single_node_rate(wild, 8.0)
    assert rate > 0
    for g, gpn in ((16, (8, 8)), (32, (8, 8, 8, 8)), (32, (4,) * 8), (2, (1, 1))):
        for code_plan in (ExecutionPlan(dp=g, zero=ZeroMode.DP), ExecutionPlan(dp=g, ga_steps=1)):
            t = wild.iteration_time(code_plan, gpn, 8.0)
            assert t > 0 and BERT.global_batch / (t * g) <= rate * (1 + 1e-9), (g, gpn, code_plan.label)

def test_the_floor_binds_when_one_node_is_slower_per_gpu(monkeypatch) -> None:
    import optsched.perf.performance_model as pm_module
    base = prior_performance_model(BERT, CLUSTER, "A800")
    v2 = base.with_params(TRUE.replace(k_nic=0.5), form="v2")
    cfg = [(ExecutionPlan(dp=32, zero=ZeroMode.DP), (8, 8, 8, 8), 8.0), (ExecutionPlan(dp=2, tp=2, pp=2), (4, 4), 8.0),
           (ExecutionPlan(dp=8, zero=ZeroMode.DP), (8,), 8.0)]
    raw = v2.raw_iteration_times(cfg)
    slow = BERT.global_batch / (32 * raw[0]) / 2  # half the spanning job's own rate per GPU
    monkeypatch.setattr(pm_module, "single_node_rate", lambda pm, cpus: slow)
    t = v2.iteration_times(cfg)
    assert math.isclose(t[0], BERT.global_batch / (32 * slow)) and t[0] == pytest.approx(2 * raw[0])
    assert t[1] == raw[1] and t[2] == raw[2]  # 3D plans and single-node rows are not floored
    assert base.with_params(TRUE).iteration_times(cfg)[0] == base.with_params(TRUE).raw_iteration_times(cfg)[0]


def test_v2_model_json_round_trip_and_old_files_read_as_eq1() -> None:
    base = prior_performance_model(BERT, CLUSTER, "A800")
    v2 = base.with_params(TRUE.replace(k_odd=0.3, m_gc=1.2), form="v2", identified=("k_odd",))
    again = PerformanceModel.from_dict(v2.to_dict())
    assert again == v2 and again.form == "v2"
    assert "m_gc" in v2.to_dict()["fit"]["held"]
    old = v2.to_dict()
    old.pop("form")
    old["params"] = {k: v for k, v in old["params"].items() if k in PerfParams.EQ1}
    assert PerformanceModel.from_dict(old).form == "eq1"

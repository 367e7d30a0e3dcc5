"""ZeRO-Offload's CPU side (Morphling Appendix A.2, T_opt = k_opt_off P/(d c)): never scaled by a family
factor, tied GPU side when the rows run at one CPU count, the CPU anchor of Rubick Fig. 7, and the
built-in defaults' CPU sensitivity (a curve that is flat between 2 and 16 CPUs per GPU is a bug)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from optsched.core import MODELS, ExecutionPlan, ValidationError, ZeroMode, get_cluster, get_model
from optsched.core.plan import offload_runs_with_gc, parse_plan_code
from optsched.perf.cpu_anchor import CpuAnchor, published_cpu_anchors
from optsched.perf.defaults import PROFILED_FWD_S, default_performance_model, prior_performance_model
from optsched.perf.fitting import fit
from optsched.perf.identifiability import identify
from optsched.perf.iteration_time import Bandwidths, PerfParams, breakdown, features_of, overlap
from optsched.perf.measurements import read_placements_csv
from optsched.perf.performance_model import PerformanceModel

BW = Bandwidths(intra_gbps=100.0, inter_gbps=80.0, pcie_gbps=20.0, gpus_per_node=8)
BERT = get_model("bert")  # P = 336,297,858
CLUSTER = get_cluster("a800-8x8")
TRUE = PerfParams(k_bwd=1.8, k_sync=3.0, k_opt=0.04, k_opt_off=6.0, k_off=2.0, k_swap=2.0, k_const=0.08,
                  fwd_s=0.006)


def offload_plan(model, gpus: int) -> ExecutionPlan:
    return parse_plan_code("zero-offload", gpus, model.global_batch, offload_gc=offload_runs_with_gc(model))


# -- the built-in defaults ------------------------------------------------------------------------------
def test_llama7_zero_offload_on_one_gpu_speeds_up_1_5_to_1_9x_from_8_to_16_cpus() -> None:
    """Rubick Sec. 7.2, Fig. 7: doubling the CPUs of LLaMA-2-7B's ZeRO-Offload job on one A800: 1.7x."""
    pm = default_performance_model("llama7")
    for plan in (offload_plan(pm.model, 1), ExecutionPlan(dp=1, zero=ZeroMode.OFFLOAD)):  # with GC (as measured), without
        assert 1.5 <= pm.throughput(plan, (1,), 16.0) / pm.throughput(plan, (1,), 8.0) <= 1.9, plan.label


@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_models_zero_offload_throughput_rises_strictly_with_cpus(name: str) -> None:
    pm = default_performance_model(name)
    for gpus in (1, math.gcd(8, pm.model.global_batch)):  # one GPU, and one node's (llama30: b = 4)
        plan = offload_plan(pm.model, gpus)
        cpus = np.arange(2, 17, dtype=float)
        rate = pm.throughputs([(plan, (gpus,), float(c)) for c in cpus])
        assert np.all(np.diff(rate) > 0), (name, gpus, rate)
        assert rate[-1] / rate[0] > 1.05, (name, gpus)  # 2 -> 16 CPUs per GPU: not flat either
    # and the plans without a CPU optimizer do not care
    dp = ExecutionPlan(dp=8)
    assert pm.throughput(dp, (8,), 2.0) == pm.throughput(dp, (8,), 16.0)


# -- the model: the factor scales the GPU side only, k_cpu_dp --------------------------------------------
def test_the_family_factor_scales_the_gpu_side_of_zero_offload_never_its_cpu_side() -> None:
    plan = ExecutionPlan(dp=4, zero=ZeroMode.OFFLOAD)
    feats = features_of(BERT, [(plan, (4,), 8.0)], BW)
    plain = breakdown(feats, TRUE)
    scaled = breakdown(feats, TRUE.replace(m_zero_offload=2.0))
    t_opt = 6.0 * 0.336297858 / (4 * 8)  # k_opt_off P / (d c), P in 10^9
    t_off = 4 * 336_297_858 / (4 * 20e9)  # fp16 gradients out, fp16 parameters back, over PCIe
    t_cpu = float(overlap(2.0, np.array([t_opt]), np.array([t_off]))[0])
    assert plain.t_opt[0] == pytest.approx(t_opt) and plain.t_cpu[0] == pytest.approx(t_cpu)
    gpu = plain.t_iter[0] - t_cpu
    assert scaled.t_cpu[0] == pytest.approx(t_cpu)
    assert scaled.t_iter[0] == pytest.approx(2.0 * gpu + t_cpu)
    # outside ZeRO-Offload the factor scales the whole iteration, as before
    zdp = features_of(BERT, [(ExecutionPlan(dp=4, zero=ZeroMode.DP), (4,), 8.0)], BW)
    assert breakdown(zdp, TRUE.replace(m_zero_dp=2.0)).t_iter[0] == pytest.approx(2.0 * breakdown(zdp, TRUE).t_iter[0])
    assert breakdown(zdp, TRUE).t_cpu[0] == 0.0


def test_k_cpu_dp_sets_how_the_cpu_step_shrinks_with_the_dp_size() -> None:
    for d in (1, 2, 8):
        feats = features_of(BERT, [(ExecutionPlan(dp=d, zero=ZeroMode.OFFLOAD), (d,), 4.0)], BW)
        b = breakdown(feats, TRUE.replace(k_cpu_dp=0.4))
        assert b.t_opt[0] == pytest.approx(6.0 * 0.336297858 / (d ** 0.4 * 4.0))
        assert breakdown(feats, TRUE).t_opt[0] == pytest.approx(6.0 * 0.336297858 / (d * 4.0))  # neutral: A.2


# -- identifiability -----------------------------------------------------------------------------------
def _rows(cpus: tuple[float, ...] = (8.0,)) -> list:
    out = []
    for g in (1, 2, 4, 8):
        out += [(ExecutionPlan(dp=g, zero=ZeroMode.DP), (g,), 8.0), (ExecutionPlan(dp=g, ga_steps=2), (g,), 8.0)]
        out += [(ExecutionPlan(dp=g, zero=ZeroMode.OFFLOAD), (g,), c) for c in cpus]
    return out * 2


def _ident(cfg, **kw):
    return identify([c[0] for c in cfg], features_of(BERT, cfg, BW), fix_fwd=True, form="v2", **kw)


def test_rows_at_one_cpu_count_hold_k_swap_and_tie_the_offload_factor() -> None:
    one = _ident(_rows())
    assert "k_swap" in one.held and "CPU counts" in one.reasons["k_swap"]
    assert "m_zero_offload" in one.held and one.tied == {"m_zero_offload": ("m_zero_dp",)}
    assert "tied to m_zero_dp" in one.reasons["m_zero_offload"]
    assert {"k_opt_off", "k_off", "k_cpu_dp", "m_zero_dp", "m_ga"} <= set(one.free)
    # with GC in the Offload rows, the GC factor joins the tie
    gc = [(ExecutionPlan(dp=p.dp, zero=p.zero, gc=p.zero is ZeroMode.OFFLOAD), g, c) for p, g, c in _rows()]
    gc += [(ExecutionPlan(dp=g, gc=True), (g,), 8.0) for g in (1, 2, 4)]
    assert _ident(gc).tied == {"m_zero_offload": ("m_zero_dp", "m_gc")}
    # two CPU counts identify both; an anchor identifies the factor only
    two = _ident(_rows((4.0, 12.0)))
    assert {"k_swap", "m_zero_offload"} <= set(two.free) and not two.tied
    anchored = _ident(_rows(), anchored=True)
    assert "m_zero_offload" in anchored.free and "k_swap" in anchored.held and not anchored.tied
    # Eq. 1 holds k_swap too (the same rule), and has no factor to tie
    eq1 = identify([c[0] for c in _rows()], features_of(BERT, _rows(), BW), fix_fwd=True, form="eq1")
    assert "k_swap" in eq1.held and not eq1.tied


def test_zero_offload_is_never_the_reference_family() -> None:
    cfg = _rows() + [c for c in _rows() if c[0].zero is ZeroMode.OFFLOAD]  # Offload has the most rows
    ident = identify([c[0] for c in cfg], features_of(BERT, cfg, BW), fix_fwd=False, form="v2", anchored=True)
    assert ident.reference in ("m_zero_dp", "m_ga") and "m_zero_offload" in ident.free


def test_offload_rows_alone_with_a_fitted_forward_time_keep_factor_1() -> None:
    only = [c for c in _rows() if c[0].zero is ZeroMode.OFFLOAD]
    ident = identify([c[0] for c in only], features_of(BERT, only, BW), fix_fwd=False, form="v2", anchored=True)
    assert "m_zero_offload" in ident.held and not ident.tied and "held at 1" in ident.reasons["m_zero_offload"]


# -- fitting: the tie and the anchor -------------------------------------------------------------------
def test_a_tied_fit_recovers_the_cpu_side_when_zero_offload_shares_zero_dps_gpu_side() -> None:
    base = prior_performance_model(BERT, CLUSTER, "A800")
    truth = base.with_params(TRUE.replace(m_zero_dp=2.0, m_ga=1.5, m_zero_offload=2.0), form="v2")
    cfg = _rows()
    fitted = fit(base, cfg, truth.iteration_times(cfg), fwd_s=TRUE.fwd_s, starts=2, form="v2")
    assert fitted.rmsle < 1e-3 and fitted.params.m_zero_offload == fitted.params.m_zero_dp
    plan = ExecutionPlan(dp=1, zero=ZeroMode.OFFLOAD)
    for c in (2.0, 4.0, 32.0):
        assert fitted.iteration_time(plan, (1,), c) == pytest.approx(truth.iteration_time(plan, (1,), c), rel=0.02)
    reasons = dict(fitted.reasons)
    again = PerformanceModel.from_dict(fitted.to_dict())
    assert again == fitted and "tied to m_zero_dp" in fitted.to_dict()["fit"]["reasons"]["m_zero_offload"]
    assert "k_swap" in fitted.to_dict()["fit"]["held"] and "CPU counts" in reasons["k_swap"]


def test_a_cpu_anchor_frees_the_offload_factor_and_the_fit_meets_it() -> None:
    """The truth's ZeRO-Offload GPU side is *not* ZeRO-DP's: rows at 8 CPUs cannot show it, the tie gets
    the CPU scaling wrong, and one measured speed-up (the anchor) puts it right."""
    base = prior_performance_model(BERT, CLUSTER, "A800")
    truth = base.with_params(TRUE.replace(m_zero_dp=2.0, m_ga=1.5, m_zero_offload=1.2, k_opt_off=20.0), form="v2")
    cfg = _rows()
    y = truth.iteration_times(cfg)
    plan = ExecutionPlan(dp=1, zero=ZeroMode.OFFLOAD)

    def gain(pm: PerformanceModel) -> float:
        return pm.iteration_time(plan, (1,), 8.0) / pm.iteration_time(plan, (1,), 16.0)

    anchor = CpuAnchor("bert", "A800", speedup=gain(truth), source="synthetic")
    tied = fit(base, cfg, y, fwd_s=TRUE.fwd_s, starts=2, form="v2", cpu_anchors=())
    anchored = fit(base, cfg, y, fwd_s=TRUE.fwd_s, starts=2, form="v2", cpu_anchors=[anchor])
    assert "m_zero_offload" in anchored.identified and "m_zero_offload" not in tied.identified
    assert gain(anchored) == pytest.approx(gain(truth), rel=0.01)
    assert abs(gain(tied) / gain(truth) - 1) > 0.05
    assert anchored.rmsle < 0.01 and anchored.n_samples == len(cfg)  # the anchor is not a row
    # Eq. 1 fits do not use anchors (Appendix A's procedure exactly)
    assert "m_zero_offload" not in fit(base, cfg, y, fwd_s=TRUE.fwd_s, starts=1, form="eq1",
                                       cpu_anchors=[anchor]).identified


def test_the_published_anchor_is_rubick_fig7_and_anchors_are_validated() -> None:
    (a,) = published_cpu_anchors("llama7", "A800")
    assert (a.gpus, a.cpus_from, a.cpus_to, a.speedup) == (1, 8.0, 16.0, 1.7) and "Fig. 7" in a.source
    assert published_cpu_anchors("llama7", "V100") == () and published_cpu_anchors("bert", "A800") == ()
    assert a.plan(get_model("llama7")).gc  # ZeRO-Offload+GC, as the measured rows run
    with pytest.raises(ValidationError, match="speedup must be in"):
        CpuAnchor("bert", "A800", speedup=2.5, source="x")  # 2x the CPUs cannot give 2.5x
    with pytest.raises(ValidationError, match="cpus_from < cpus_to"):
        CpuAnchor("bert", "A800", speedup=1.2, source="x", cpus_from=16, cpus_to=8)


# -- on the public measurements --------------------------------------------------------------------------
def test_fits_on_the_measured_rows_keep_a_cpu_side(shared_data) -> None:
    """BERT's rows (all at 8 CPUs) with the tie: a CPU optimizer step remains; LLaMA-2-7B's with the
    published anchor: 1.7x from 8 to 16 CPUs."""
    for name, lo, hi in (("bert", 1.03, 1.5), ("llama7", 1.68, 1.72)):
        model = get_model(name)
        rows = read_placements_csv(shared_data / "morphling" / "placements" / f"{name}.csv", model)
        base = prior_performance_model(model, CLUSTER, "A800")
        pm = fit(base, [(r.plan, r.gpus_per_node, r.cpus_per_gpu) for r in rows], [r.iter_time for r in rows],
                 fwd_s=PROFILED_FWD_S[name], starts=2, form="v2")
        plan = offload_plan(model, 1)
        assert lo < pm.throughput(plan, (1,), 16.0) / pm.throughput(plan, (1,), 8.0) < hi, name

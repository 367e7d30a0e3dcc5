"""Fitting: recovery of known parameters from data the model generated, the sample rules, online
refit, JSON round trip."""

from __future__ import annotations

import numpy as np
import pytest

from optsched.core import ExecutionPlan, ValidationError, ZeroMode, get_cluster, get_model
from optsched.perf.defaults import default_performance_model, prior_performance_model
from optsched.perf.fitting import OnlineRefitter, fit
from optsched.perf.iteration_time import PerfParams
from optsched.perf.performance_model import PerformanceModel

CLUSTER = get_cluster("a800-8x8")
TRUE = PerfParams(k_bwd=1.8, k_sync=3.0, k_opt=0.04, k_opt_off=6.0, k_off=2.0, k_swap=5.0, k_const=0.08,
                  fwd_s=0.006)
PLACEMENTS = [(1,), (2,), (4,), (8,), (4, 4), (2, 2, 2, 2), (8, 8), (1, 1)]


def configs(model_name: str = "bert"):
    b = get_model(model_name).global_batch
    out = []
    for gpn in PLACEMENTS:
        g = sum(gpn)
        if b % g:
            continue
        out += [(ExecutionPlan(dp=g), gpn, 8.0), (ExecutionPlan(dp=g, gc=True), gpn, 8.0),
                (ExecutionPlan(dp=g, zero=ZeroMode.DP), gpn, 8.0),
                (ExecutionPlan(dp=g, zero=ZeroMode.OFFLOAD), gpn, 4.0),
                (ExecutionPlan(dp=g, zero=ZeroMode.OFFLOAD), gpn, 12.0)]
    return out


def truth(model_name: str = "bert") -> PerformanceModel:
    return prior_performance_model(get_model(model_name), CLUSTER, "A800").with_params(TRUE)


def test_fit_recovers_synthetic_parameters() -> None:
    gen = truth()
    cfg = configs()
    y = gen.iteration_times(cfg)
    fitted = fit(prior_performance_model(get_model("bert"), CLUSTER, "A800"), cfg, y, seed=0, starts=4)
    assert fitted.rmsle < 1e-3
    assert np.allclose(fitted.iteration_times(cfg), y, rtol=5e-3)
    # the well-identified parameters come back
    for name in ("k_bwd", "fwd_s", "k_const", "k_opt_off"):
        assert getattr(fitted.params, name) == pytest.approx(getattr(TRUE, name), rel=0.05), name
    assert set(fitted.identified) >= {"k_bwd", "k_sync", "k_opt", "k_opt_off", "k_off", "k_swap", "k_const"}


def test_fit_is_deterministic() -> None:
    cfg = configs()[:12]
    y = truth().iteration_times(cfg) * np.linspace(0.95, 1.05, len(cfg))
    base = prior_performance_model(get_model("bert"), CLUSTER, "A800")
    assert fit(base, cfg, y, seed=3, starts=3).params == fit(base, cfg, y, seed=3, starts=3).params


def test_fit_needs_identified_parameters_plus_one_rows_and_three_offload_rows() -> None:
    base = prior_performance_model(get_model("bert"), CLUSTER, "A800")
    cfg = [c for c in configs() if c[0].zero is not ZeroMode.OFFLOAD]
    y = truth().iteration_times(cfg)
    # dp, gc, zero-dp on 1 GPU identify k_bwd, k_opt, k_const, fwd_s: 5 rows needed
    with pytest.raises(ValidationError, match="at least 5 rows are needed") as err:
        fit(base, cfg[:3], y[:3])
    assert "k_off (needs 3 zero-offload rows)" in str(err.value)
    # with dp on 2 GPUs k_sync joins; 5 rows hold it (an overlap exponent) and fit the other four, 6 fit all
    five = fit(base, cfg[:5], y[:5], starts=2)
    assert "k_sync" not in five.identified and five.params.k_sync == base.params.k_sync
    assert "k_sync" in fit(base, cfg[:6], y[:6], starts=2).identified
    with pytest.raises(ValidationError, match="at least 7 rows"):
        fit(base, cfg[:6], y[:6], min_samples=7)
    assert fit(base, cfg[:6], y[:6], starts=2).n_samples == 6
    fitted = fit(base, cfg[:10], y[:10], starts=2)
    assert not {"k_opt_off", "k_off", "k_swap"} & set(fitted.identified)
    assert fitted.params.k_opt_off == base.params.k_opt_off  # kept at the prior


def test_fit_rejects_bad_measurements() -> None:
    base = prior_performance_model(get_model("bert"), CLUSTER, "A800")
    cfg = configs()[:8]
    with pytest.raises(ValidationError, match="positive"):
        fit(base, cfg, [0.1] * 7 + [-1.0])
    with pytest.raises(ValidationError, match="measurements"):
        fit(base, cfg, [0.1] * 7)


def test_online_refit_corrects_a_drifted_model() -> None:
    gen = truth()
    stale = gen.with_params(TRUE.replace(fwd_s=0.012, k_const=0.2))
    refitter = OnlineRefitter(stale, threshold=0.05, starts=2)
    triggered = [refitter.observe(c, float(gen.iteration_times([c])[0])) for c in configs()[:20]]
    assert any(triggered) and refitter.refits >= 1
    seen, unseen = configs()[:20], configs()[20:]
    err_seen = np.abs(refitter.model.iteration_times(seen) / gen.iteration_times(seen) - 1)
    assert err_seen.max() < 0.02
    err_new = np.abs(refitter.model.iteration_times(unseen) / gen.iteration_times(unseen) - 1)
    err_stale = np.abs(stale.iteration_times(unseen) / gen.iteration_times(unseen) - 1)
    assert err_new.max() < 0.5 * err_stale.max()
    with pytest.raises(ValidationError):
        refitter.observe(configs()[0], 0.0)


def test_performance_model_json_round_trip() -> None:
    pm = default_performance_model("llama7")
    again = PerformanceModel.from_dict(pm.to_dict())
    assert again == pm
    with pytest.raises(ValidationError, match="format"):
        PerformanceModel.from_dict({**pm.to_dict(), "format": "other/9"})


def test_default_models_exist_for_the_catalogue_and_scale_with_gpus() -> None:
    for name in ("vit", "roberta", "bert", "t5", "gpt2", "llama7", "llama30"):
        pm = default_performance_model(name)
        assert pm.params.fwd_s >= pm.min_fwd_s
    bert = default_performance_model("bert")
    one = bert.throughput(ExecutionPlan(dp=1), (1,), 8)
    eight = bert.throughput(ExecutionPlan(dp=8), (8,), 8)
    assert eight > 2 * one
    with pytest.raises(ValidationError, match="unknown model"):
        default_performance_model("resnet")


def test_default_forward_times_are_the_profiled_ones() -> None:
    # defaults keep fwd_s at the profiled value (not refitted) wherever a profile exists
    from optsched.perf.defaults import DEFAULT_PARAMS, PROFILED_FWD_S
    assert set(PROFILED_FWD_S) == {"vit", "roberta", "bert", "t5", "gpt2", "llama7"}
    for name, fwd in PROFILED_FWD_S.items():
        assert DEFAULT_PARAMS[name].fwd_s == fwd


def test_profiled_forward_times_match_the_shared_profiles(shared_data) -> None:
    from optsched.core import get_model
    from optsched.perf.defaults import PROFILED_FWD_S
    from optsched.perf.measurements import read_profile_forward_s
    root = shared_data / "morphling" / "profile"
    if not root.is_dir():
        pytest.skip(f"shared profile data not found at {root}")
    for name, folder in {"bert": "bert", "t5": "t5", "llama7": "llama7b", "vit": "vit"}.items():
        assert read_profile_forward_s(root / folder, get_model(name)) == pytest.approx(PROFILED_FWD_S[name])

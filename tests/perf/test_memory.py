"""Memory model: hand-computed values per plan family, monotonicity properties, the measured plans."""

from __future__ import annotations

import csv
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from optsched.core import (MODELS, ExecutionPlan, PlanInfeasibleError, ValidationError, ZeroMode, get_gpu_type,
                           get_model, offload_runs_with_gc, parse_placement_code, parse_plan_code)
from optsched.perf.memory import (WORKSPACE_GIB, MemoryEstimate, check_memory, estimate_memory,
                                  memory_violation)
from optsched.perf.plans import topology_violation

from helpers import shared_data_dir

GIB = 2 ** 30
A800 = get_gpu_type("A800")
PLACEMENTS = shared_data_dir() / "morphling" / "placements"


def approx(x: float) -> object:
    return pytest.approx(x, rel=1e-12)


# --- hand-computed values -------------------------------------------------------------------------

def test_bert_plain_dp_one_gpu() -> None:
    e = estimate_memory(get_model("bert"), ExecutionPlan(dp=1))
    P = 336_297_858
    assert e.weights_gib == approx(2 * P / GIB)          # fp16 weights, whole model
    assert e.gradients_gib == approx(2 * P / GIB)        # fp16 gradients
    assert e.optimizer_gib == approx(12 * P / GIB)       # fp32 master + momentum + variance
    # mb = 32, s = 512, h = 1024, A = 16, t = 1: 10 + 24 + 5*16*512/1024 = 74 bytes per s*mb*h, 24 layers
    assert e.activations_gib == approx(24 * 512 * 32 * 1024 * 74 / GIB)
    assert e.workspace_gib == WORKSPACE_GIB == 2.0
    assert e.host_gib_per_gpu == 0.0
    assert e.gpu_gib == approx((16 * P + 24 * 512 * 32 * 1024 * 74) / GIB + 2.0)


def test_bert_zero_dp_four_gpus() -> None:
    e = estimate_memory(get_model("bert"), ExecutionPlan(dp=4, zero=ZeroMode.DP))
    P = 336_297_858
    assert e.weights_gib == approx(2 * P / GIB)          # ZeRO-2 keeps the full fp16 weights
    assert e.gradients_gib == approx(2 * P / 4 / GIB)
    assert e.optimizer_gib == approx(12 * P / 4 / GIB)
    assert e.activations_gib == approx(24 * 512 * 8 * 1024 * 74 / GIB)  # mb = 32/4 = 8
    assert e.host_gib_per_gpu == 0.0


def test_llama7_zero_offload_eight_gpus() -> None:
    e = estimate_memory(get_model("llama7"), ExecutionPlan(dp=8, zero=ZeroMode.OFFLOAD, gc=True))
    P = 6_738_423_808
    assert e.weights_gib == approx(2 * P / GIB)
    assert e.gradients_gib == 0.0 and e.optimizer_gib == 0.0
    assert e.host_gib_per_gpu == approx((2 * P + 12 * P) / 8 / GIB)     # 10.98 GiB
    # GC form (the measured llama7 offload rows ran with GC), mb = 1, s = h = 4096, A = 32, 32 layers:
    # stored inputs 2*s*h*(32-1) + one layer 4096*4096*(34 + 5*32*4096/4096 = 194)
    act = 2 * 4096 * 4096 * 31 + 4096 * 4096 * 194
    assert e.activations_gib == approx(act / GIB)
    assert e.gpu_gib == approx((2 * P + act) / GIB + 2.0)
    assert 18.5 < e.gpu_gib < 18.6


def test_3d_tp2_pp2_in_flight_rule() -> None:
    model = get_model("bert")
    plan = ExecutionPlan(dp=2, tp=2, pp=2, micro_batches=8)
    e = estimate_memory(model, plan)
    P = 336_297_858
    assert e.weights_gib == approx(2 * P / 4 / GIB)
    assert e.gradients_gib == approx(2 * P / 4 / GIB)
    assert e.optimizer_gib == approx(12 * P / 4 / GIB)
    # mb = 32/(2*8) = 2; layers per stage ceil(24/2) = 12; in flight min(m=8, p=2) = 2;
    # per layer (3D: no attention scores) 512*2*1024*(10 + 24/2)
    assert e.activations_gib == approx(2 * 12 * 512 * 2 * 1024 * 22 / GIB)
    # with the attention scores kept: + 5*16*512/(1024*2) = 20
    e_scores = estimate_memory(model, plan, store_attention_scores=True)
    assert e_scores.activations_gib == approx(2 * 12 * 512 * 2 * 1024 * 42 / GIB)


def test_in_flight_is_capped_by_micro_batches() -> None:
    model = get_model("llama30")
    plan = parse_plan_code("524", 40, model.global_batch)  # pp=5, tp=2, dp=4 -> m = 4/4 = 1
    assert plan.micro_batches == 1
    e = estimate_memory(model, plan)
    # mb = 1, 12 layers per stage, one micro-batch in flight: 12 * 2048*6656*(10 + 12)
    assert e.activations_gib == approx(12 * 2048 * 6656 * 22 / GIB)
    assert e.weights_gib == approx(2 * 32_528_943_616 / 10 / GIB)


def test_gc_value() -> None:
    e = estimate_memory(get_model("bert"), ExecutionPlan(dp=1, gc=True))
    # stored inputs of 23 layers (the recomputed layer's input is inside its full activations)
    # + one layer's full activations, mb = 32
    act = 2 * 512 * 32 * 1024 * 23 + 512 * 32 * 1024 * 74
    assert e.activations_gib == approx(act / GIB)
    plain = estimate_memory(get_model("bert"), ExecutionPlan(dp=1))
    assert (e.weights_gib, e.gradients_gib, e.optimizer_gib) == (
        plain.weights_gib, plain.gradients_gib, plain.optimizer_gib)


def test_ga_divides_activations_only() -> None:
    model = get_model("bert")
    plain = estimate_memory(model, ExecutionPlan(dp=2))
    ga = estimate_memory(model, ExecutionPlan(dp=2, ga_steps=4))
    assert ga.activations_gib == approx(plain.activations_gib / 4)
    assert ga.weights_gib + ga.gradients_gib + ga.optimizer_gib == approx(
        plain.weights_gib + plain.gradients_gib + plain.optimizer_gib)


def test_gpu_gib_sums_the_five_parts() -> None:
    e = MemoryEstimate(1.0, 2.0, 3.0, 4.0, 5.0, 100.0)
    assert e.gpu_gib == 15.0
    with pytest.raises(AttributeError):
        e.weights_gib = 0.0  # type: ignore[misc]


# --- properties -----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("zero", [ZeroMode.DP, ZeroMode.OFFLOAD])
def test_zero_memory_non_increasing_in_dp(name: str, zero: ZeroMode) -> None:
    model = MODELS[name]
    for gc in (False, True):
        prev = math.inf
        prev_host = math.inf
        for d in (1, 2, 4, 8, 16, 32, 64, 128):
            e = estimate_memory(model, ExecutionPlan(dp=d, zero=zero, gc=gc))
            assert e.gpu_gib <= prev
            assert e.host_gib_per_gpu <= prev_host
            prev, prev_host = e.gpu_gib, e.host_gib_per_gpu


@given(name=st.sampled_from(sorted(MODELS)), zero=st.sampled_from([ZeroMode.DP, ZeroMode.OFFLOAD]),
       d=st.integers(1, 200), extra=st.integers(1, 200), a=st.sampled_from([1, 2, 4]))
def test_zero_memory_non_increasing_any_dp(name: str, zero: ZeroMode, d: int, extra: int, a: int) -> None:
    model = MODELS[name]
    small = estimate_memory(model, ExecutionPlan(dp=d, zero=zero, ga_steps=a))
    large = estimate_memory(model, ExecutionPlan(dp=d + extra, zero=zero, ga_steps=a))
    assert large.gpu_gib <= small.gpu_gib


def _gc_pairs(model_name: str) -> list[ExecutionPlan]:
    b = MODELS[model_name].global_batch
    return [ExecutionPlan(dp=1), ExecutionPlan(dp=2), ExecutionPlan(dp=4, ga_steps=2),
            ExecutionPlan(dp=2, zero=ZeroMode.DP), ExecutionPlan(dp=8, zero=ZeroMode.DP),
            ExecutionPlan(dp=1, tp=2, pp=2, micro_batches=b), ExecutionPlan(dp=2, tp=4),
            ExecutionPlan(dp=1, pp=4, micro_batches=2)]


@pytest.mark.parametrize("name", sorted(MODELS))
def test_gc_strictly_lowers_activations(name: str) -> None:
    model = MODELS[name]
    for plan in _gc_pairs(name):
        with_gc = ExecutionPlan(**{**plan.to_dict(), "gc": True})
        a0 = estimate_memory(model, plan).activations_gib
        a1 = estimate_memory(model, with_gc).activations_gib
        assert a1 < a0, (name, plan.label)
        assert estimate_memory(model, with_gc).gpu_gib < estimate_memory(model, plan).gpu_gib


def test_gc_lowers_zero_offload_activations_only() -> None:
    """GC is honoured under ZeRO-Offload: it lowers activations and leaves model states alone; the
    offload+GC activations equal those of plain DP with GC (same micro-batch)."""
    for model in MODELS.values():
        off = estimate_memory(model, ExecutionPlan(dp=2, zero=ZeroMode.OFFLOAD))
        off_gc = estimate_memory(model, ExecutionPlan(dp=2, zero=ZeroMode.OFFLOAD, gc=True))
        assert off_gc.activations_gib < off.activations_gib
        assert (off_gc.weights_gib, off_gc.host_gib_per_gpu) == (off.weights_gib, off.host_gib_per_gpu)
        dp_gc = estimate_memory(model, ExecutionPlan(dp=2, gc=True))
        assert off_gc.activations_gib == dp_gc.activations_gib


def test_gc_single_layer_single_micro_batch_saves_nothing() -> None:
    """One layer per GPU and one micro-batch in flight: nothing to drop, never more memory."""
    model = get_model("vit")  # 12 layers
    plan = ExecutionPlan(dp=1, pp=12, micro_batches=1)
    gc = ExecutionPlan(dp=1, pp=12, micro_batches=1, gc=True)
    assert estimate_memory(model, gc).activations_gib == approx(estimate_memory(model, plan).activations_gib)


# --- feasibility ----------------------------------------------------------------------------------

def test_llama7_plain_dp_rejected_on_one_a800() -> None:
    model = get_model("llama7")
    plan = ExecutionPlan(dp=1)
    reason = memory_violation(model, plan, A800, (1,))
    assert reason is not None
    assert "'llama7'" in reason and "GiB" in reason and plan.label in reason and "A800" in reason
    with pytest.raises(PlanInfeasibleError, match="llama7"):
        check_memory(model, plan, A800, (1,))


def test_llama7_zero_offload_fits_on_one_node() -> None:
    model = get_model("llama7")
    plan = ExecutionPlan(dp=8, zero=ZeroMode.OFFLOAD, gc=True)
    assert memory_violation(model, plan, A800, (8,), (1600.0,)) is None
    e = check_memory(model, plan, A800, (8,), (1600.0,))
    assert e == estimate_memory(model, plan)
    assert e.gpu_gib < 80 and 8 * e.host_gib_per_gpu < 1600


def test_host_memory_violation() -> None:
    model = get_model("llama7")
    plan = ExecutionPlan(dp=8, zero=ZeroMode.OFFLOAD, gc=True)  # 8 workers x 10.98 GiB = 87.9 GiB per node
    reason = memory_violation(model, plan, A800, (8,), (50.0,))
    assert reason is not None and "host" in reason and "'llama7'" in reason and "GiB" in reason
    assert memory_violation(model, plan, A800, (4, 4), (50.0, 50.0)) is None    # 43.9 GiB per node
    assert memory_violation(model, plan, A800, (4, 4), (50.0, 40.0)) is not None
    assert memory_violation(model, plan, A800, (8,)) is None                     # host check skipped
    # plans without offload never need host memory
    assert memory_violation(get_model("bert"), ExecutionPlan(dp=8), A800, (8,), (0.0,)) is None


def test_smaller_gpu_rejects_more() -> None:
    model = get_model("gpt2")
    plan = ExecutionPlan(dp=8, zero=ZeroMode.DP)
    assert memory_violation(model, plan, A800, (8,)) is None
    t4 = get_gpu_type("T4")
    reason = memory_violation(model, plan, t4, (8,))
    assert reason is not None and "T4 has 16 GiB" in reason


@pytest.mark.parametrize("gpus, host", [((), None), ((0,), None), ((-1,), None), ((2, 0), None),
                                        ((1.5,), None), ((True,), None), ((8,), (1.0, 2.0)),
                                        ((8,), (-1.0,)), ((8,), (float("nan"),))])
def test_bad_layout_raises(gpus: tuple, host: tuple | None) -> None:
    with pytest.raises(ValidationError):
        memory_violation(get_model("bert"), ExecutionPlan(dp=8), A800, gpus, host)


def _measured_rows() -> list[tuple[str, str, str]]:
    rows = []
    for path in sorted(PLACEMENTS.glob("*.csv")):
        with path.open(newline="", encoding="utf-8-sig") as fh:
            rows.extend((path.stem, r["exec_plan"], r["placement"]) for r in csv.DictReader(fh))
    return sorted(set(rows))


def test_every_measured_plan_is_feasible() -> None:
    """Every plan of the Rubick measurements was really run on A800s with 1,600 GiB per node: neither
    the topology rules nor the memory model may reject one."""
    if not PLACEMENTS.is_dir():
        pytest.skip(f"measurement data not found at {PLACEMENTS}")
    rows = _measured_rows()
    assert len(rows) > 300
    for name, code, placement in rows:
        model = get_model(name)
        gpus = parse_placement_code(placement)
        plan = parse_plan_code(code, sum(gpus), model.global_batch, offload_gc=offload_runs_with_gc(model))
        assert topology_violation(model, plan, gpus) is None, (name, code, placement)
        assert memory_violation(model, plan, A800, gpus, (1600.0,) * len(gpus)) is None, (name, code, placement)


def test_measured_llama7_zero_offload_rows_exist() -> None:
    if not PLACEMENTS.is_dir():
        pytest.skip(f"measurement data not found at {PLACEMENTS}")
    llama7 = {(c, p) for n, c, p in _measured_rows() if n == "llama7"}
    assert ("zero-offload", "8") in llama7 and ("zero-offload", "1") in llama7

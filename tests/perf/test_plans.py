"""Plan enumeration and topology rules."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optsched.core import (MODELS, PLAN_FAMILIES, ExecutionPlan, ValidationError, ZeroMode, get_gpu_type,
                           get_model, parse_plan_code)
from optsched.perf.memory import memory_violation
from optsched.perf.plans import enumerate_plans, topology_violation, tp_within_nodes

A800 = get_gpu_type("A800")


def _ordered_triples(g: int) -> int:
    return sum(1 for p in range(1, g + 1) if g % p == 0 for t in range(1, g // p + 1) if (g // p) % t == 0)


def _assert_all_feasible(model, plans, gpus, host=None) -> None:
    for plan in plans:
        assert plan.num_gpus == sum(gpus)
        assert topology_violation(model, plan, gpus) is None
        assert memory_violation(model, plan, A800, gpus, host) is None


def test_bert_on_one_node_every_family() -> None:
    model = get_model("bert")
    plans = enumerate_plans(model, (8,), A800, (1600.0,))
    assert {p.family for p in plans} == set(PLAN_FAMILIES)
    assert len(set(plans)) == len(plans)
    assert [p.label for p in plans] == sorted(p.label for p in plans)
    assert len({p.label for p in plans}) == len(plans)
    _assert_all_feasible(model, plans, (8,), (1600.0,))
    # b = 32, g = 8: GA only with a in (2, 4) since 32 % (8*8) != 0
    assert {p.ga_steps for p in plans if p.family == "ga"} == {2, 4}
    assert ExecutionPlan(dp=8, zero=ZeroMode.OFFLOAD, gc=True) in plans
    # 3D: m in {1, b/dp} with PP, 1 without
    assert ExecutionPlan(dp=2, tp=2, pp=2, micro_batches=16) in plans
    assert ExecutionPlan(dp=2, tp=2, pp=2, micro_batches=1) in plans
    assert ExecutionPlan(dp=2, tp=4) in plans
    assert enumerate_plans(model, (8,), A800, (1600.0,)) == plans  # deterministic


def test_plan_count_bound() -> None:
    for gpus in [(1,), (8,), (8, 8), (8,) * 8, (4, 4, 4)]:
        g = sum(gpus)
        divisors = sum(1 for x in range(1, g + 1) if g % x == 0)
        bound = 3 * (2 + 3) + 2 * _ordered_triples(g) - divisors - 1
        for model in MODELS.values():
            assert len(enumerate_plans(model, gpus, A800)) <= bound
    assert 3 * (2 + 3) + 2 * _ordered_triples(64) - 7 - 1 == 63


def test_llama30_on_one_gpu() -> None:
    model = get_model("llama30")
    # with a one-GPU share of an A800 node's host memory (1,600 GiB / 8) nothing fits: every plan
    # but ZeRO-Offload needs > 80 GiB per GPU, and ZeRO-Offload needs 14P = 424 GiB of host memory
    assert enumerate_plans(model, (1,), A800, (200.0,)) == ()
    # with unlimited host memory only ZeRO-Offload (fp16 weights 60.6 GiB on the GPU) remains
    assert {p.family for p in enumerate_plans(model, (1,), A800)} == {"zero-offload"}
    assert enumerate_plans(model, (1,), get_gpu_type("A100-40G")) == ()


def test_llama7_on_one_gpu_only_zero_offload() -> None:
    """Rubick Sec. 7.2: with one GPU, ZeRO-Offload is the only feasible plan for LLaMA-2-7B."""
    plans = enumerate_plans(get_model("llama7"), (1,), A800, (1600.0,))
    assert plans and {p.family for p in plans} == {"zero-offload"}


def test_uneven_nodes_limit_tp() -> None:
    model = get_model("bert")
    plans = enumerate_plans(model, (4, 2), A800)
    assert plans
    assert {p.tp for p in plans} == {1, 2}
    assert all(p.num_gpus == 6 for p in plans)
    assert not any(p.family in ("dp", "zero-dp") for p in plans)  # 32 % 6 != 0
    _assert_all_feasible(model, plans, (4, 2))


@settings(max_examples=60, deadline=None)
@given(gpus=st.lists(st.integers(1, 8), min_size=1, max_size=4).map(tuple),
       name=st.sampled_from(sorted(MODELS)))
def test_enumeration_invariants(gpus: tuple[int, ...], name: str) -> None:
    model = MODELS[name]
    plans = enumerate_plans(model, gpus, A800)
    assert len(set(plans)) == len(plans)
    for plan in plans:
        assert plan.num_gpus == sum(gpus)
        assert all(n % plan.tp == 0 for n in gpus) and plan.tp <= min(gpus)
        assert model.num_heads % plan.tp == 0 and plan.pp <= model.layers
        assert model.global_batch % (plan.dp * plan.ga_steps * plan.micro_batches) == 0
        assert plan.micro_batches in ({1, model.global_batch // plan.dp} if plan.pp > 1 else {1})
    _assert_all_feasible(model, plans, gpus)


def test_ga_steps_option() -> None:
    model = get_model("vit")  # b = 64
    plans = enumerate_plans(model, (2,), A800, ga_steps=(2, 16))
    assert {p.ga_steps for p in plans if p.family == "ga"} == {2, 16}
    with pytest.raises(ValidationError):
        enumerate_plans(model, (2,), A800, ga_steps=(0,))
    with pytest.raises(ValidationError):
        enumerate_plans(model, (2,), A800, ga_steps=(2.0,))  # type: ignore[arg-type]


@pytest.mark.parametrize("gpus", [(), (0,), (-2,), (4, 0), (2.0,), (True,), "8", None])
def test_bad_gpus_per_node_raise(gpus) -> None:
    model = get_model("bert")
    with pytest.raises(ValidationError):
        enumerate_plans(model, gpus, A800)
    with pytest.raises(ValidationError):
        topology_violation(model, ExecutionPlan(dp=1), gpus)


def test_bad_host_memory_raises() -> None:
    with pytest.raises(ValidationError, match="host_mem"):
        enumerate_plans(get_model("bert"), (4, 4), A800, (1600.0,))


# --- topology rules -------------------------------------------------------------------------------

def test_topology_gpu_count() -> None:
    reason = topology_violation(get_model("bert"), ExecutionPlan(dp=4), (4, 2))
    assert reason is not None and "4 GPUs" in reason and "6" in reason


def test_topology_model_rules() -> None:
    bert, gpt2, vit = get_model("bert"), get_model("gpt2"), get_model("vit")
    assert "divisible" in topology_violation(bert, ExecutionPlan(dp=3), (3,))
    assert "attention heads" in topology_violation(gpt2, ExecutionPlan(dp=1, tp=2), (2,))   # 25 heads
    assert "layers" in topology_violation(vit, ExecutionPlan(dp=1, pp=16), (8, 8))           # 12 layers


def test_topology_tp_larger_than_a_node() -> None:
    model = get_model("bert")
    plan = ExecutionPlan(dp=1, tp=4, pp=2)
    reason = topology_violation(model, plan, (4, 2, 2))
    assert reason is not None and "tp=4" in reason
    assert topology_violation(model, plan, (4, 4)) is None


def test_measured_cross_node_tp_is_accepted() -> None:
    """llama30 '344' ran on 8 nodes x 6 GPUs: some TP groups of 4 must cross nodes; slow, not infeasible."""
    model = get_model("llama30")
    gpus = (6,) * 8
    plan = parse_plan_code("344", 48, model.global_batch)
    assert not tp_within_nodes(plan.tp, gpus)
    assert topology_violation(model, plan, gpus) is None
    assert plan not in enumerate_plans(model, gpus, A800)  # the search keeps TP inside nodes


def test_tp_within_nodes() -> None:
    assert tp_within_nodes(1, (3, 5))
    assert tp_within_nodes(2, (4, 2))
    assert not tp_within_nodes(4, (4, 2))
    assert not tp_within_nodes(2, (5, 5))

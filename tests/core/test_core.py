"""Vocabulary: validation on construction with clear messages, JSON round trips, catalogue look-ups,
plan and placement codes."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from optsched.core import (Allocation, Cluster, ExecutionPlan, GPUType, Job, ModelSpec, Node, NodeShare,
                           Placement, UnknownNameError, ValidationError, ZeroMode, a800_cluster, get_cluster,
                           get_gpu_type, get_model, parse_placement_code, parse_plan_code, plan_code)
from optsched.core.jsonio import read_json

from helpers import roundtrip


def test_catalogue_round_trips() -> None:
    c = get_cluster("a800-8x8")
    assert c.total_gpus == 64 and c.node("n003").num_cpus == 96 and c.node("n003").memory_gib == 1600
    assert roundtrip(c) == c
    for name in ("vit", "roberta", "bert", "t5", "gpt2", "llama7", "llama30"):
        assert roundtrip(get_model(name)) == get_model(name)
    for name in ("A800", "A100-40G", "A40", "A10", "V100-32G", "T4"):
        assert roundtrip(get_gpu_type(name)) == get_gpu_type(name)


def test_unknown_names_are_named() -> None:
    with pytest.raises(UnknownNameError, match="unknown model 'resnet'.*known models: bert"):
        get_model("resnet")
    with pytest.raises(UnknownNameError, match="unknown GPU type 'H100'"):
        get_gpu_type("H100")
    with pytest.raises(UnknownNameError, match="unknown cluster"):
        get_cluster("nope")
    with pytest.raises(UnknownNameError, match="unknown node 'x'"):
        a800_cluster(1, 8).node("x")


@pytest.mark.parametrize("kwargs,match", [
    ({"num_gpus": -1}, "num_gpus must be >= 0"),
    ({"memory_gib": float("nan")}, "memory_gib must be a finite number"),
    ({"num_cpus": 2.5}, "num_cpus must be an integer"),
])
def test_node_validation(kwargs, match) -> None:
    base = {"name": "n0", "gpu_type": "A800", "num_gpus": 8, "num_cpus": 96, "memory_gib": 1600.0}
    with pytest.raises(ValidationError, match=match):
        Node(**{**base, **kwargs})


def test_cluster_validation() -> None:
    a800 = get_gpu_type("A800")
    n = Node("n0", "A800", 8, 96, 1600.0)
    with pytest.raises(ValidationError, match="node 'n0' has GPU type 'T4'"):
        Cluster("c", (Node("n0", "T4", 8, 96, 1.0),), (a800,), 1.0, 1.0, 1.0)
    with pytest.raises(ValidationError, match="used twice"):
        Cluster("c", (n, n), (a800,), 1.0, 1.0, 1.0)
    with pytest.raises(ValidationError, match="inter_node_gbps must be > 0"):
        Cluster("c", (n,), (a800,), 1.0, 0.0, 1.0)
    with pytest.raises(ValidationError, match="missing field"):
        Cluster.from_dict({"name": "c"})
    with pytest.raises(ValidationError, match="unknown field"):
        GPUType.from_dict({"name": "X", "memory_gib": 1, "peak_tflops": 1, "color": "red"})


def test_plan_rules() -> None:
    with pytest.raises(ValidationError, match="data-parallel only"):
        ExecutionPlan(dp=2, tp=2, zero=ZeroMode.DP)
    with pytest.raises(ValidationError, match="micro_batches > 1 needs pipeline"):
        ExecutionPlan(dp=2, micro_batches=4)
    with pytest.raises(ValidationError, match="zero must be one of"):
        ExecutionPlan(dp=2, zero="zero-3")
    with pytest.raises(ValidationError, match="dp must be >= 1"):
        ExecutionPlan(dp=0)
    p = ExecutionPlan(dp=4, zero=ZeroMode.OFFLOAD, ga_steps=2, gc=True)
    assert p.family == "zero-offload" and p.label == "zero-offload(dp=4,a=2,gc)"
    assert ExecutionPlan.from_dict(json.loads(json.dumps(p.to_dict()))) == p


@given(st.sampled_from([1, 2, 4, 8]), st.sampled_from([1, 2, 4]), st.sampled_from([1, 2, 3]))
def test_ptd_codes_round_trip(pp: int, tp: int, dp: int) -> None:
    plan = parse_plan_code(f"{pp}{tp}{dp}", pp * tp * dp, 24)
    assert (plan.pp, plan.tp, plan.dp, plan.micro_batches) == (pp, tp, dp, 1)
    assert plan_code(plan) == (f"{pp}{tp}{dp}" if plan.is_3d else plan.family)


def test_plan_codes() -> None:
    assert parse_plan_code("ga", 8, 32) == ExecutionPlan(dp=8, ga_steps=2)
    assert parse_plan_code("ga", 8, 8) == ExecutionPlan(dp=8)  # b/dp = 1: no accumulation possible
    assert parse_plan_code("gc", 4, 32).gc
    assert parse_plan_code("zero-offload", 2, 8, offload_gc=True) == ExecutionPlan(dp=2, zero=ZeroMode.OFFLOAD, gc=True)
    assert parse_plan_code("Zero-DP", 2, 8).zero is ZeroMode.DP
    with pytest.raises(ValidationError, match="needs 64 GPUs but the placement has 8"):
        parse_plan_code("248", 8, 32)
    with pytest.raises(ValidationError, match="unknown plan code 'xyz'"):
        parse_plan_code("xyz", 8, 32)
    with pytest.raises(ValidationError, match="not divisible by dp=3"):
        parse_plan_code("gc", 3, 32)


def test_placement_codes() -> None:
    assert parse_placement_code("224") == (4, 2, 2)
    for bad in ("", "2a", "120"):
        with pytest.raises(ValidationError, match="placement code"):
            parse_placement_code(bad)


def test_job_and_allocation() -> None:
    plan = ExecutionPlan(dp=2, tp=2)
    job = Job("j1", "gpt2", requested_gpus=4, total_iterations=100, requested_cpus=32, requested_plan=plan,
              guaranteed=True, tenant="A", deadline=3600.0)
    assert roundtrip(job) == job and job.remaining_iterations == 100
    with pytest.raises(ValidationError, match="requested plan .* uses 4 GPUs but the job requests 8"):
        Job("j2", "gpt2", requested_gpus=8, total_iterations=1, requested_plan=plan)
    with pytest.raises(ValidationError, match="completed_iterations 5 exceeds"):
        Job("j3", "gpt2", requested_gpus=1, total_iterations=4, completed_iterations=5)
    with pytest.raises(ValidationError, match="requested_gpus must be >= 1"):
        Job("j4", "gpt2", requested_gpus=0, total_iterations=4)
    place = Placement.of({"n1": NodeShare(2, 16, 64.0), "n0": NodeShare(2, 16, 64.0)})
    assert place.gpus_per_node == (2, 2) and place.shares[0][0] == "n0"
    alloc = Allocation("j1", plan, place)
    assert roundtrip(alloc) == alloc
    assert alloc.to_dict()["placement"]["n0"] == {"gpus": 2, "cpus": 16, "mem_gb": 64.0}
    with pytest.raises(ValidationError, match="uses 4 GPUs but the placement holds 2"):
        Allocation("j1", plan, Placement.of({"n0": NodeShare(2)}))


def test_read_json_errors(tmp_path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"a": 1,,}')
    with pytest.raises(ValidationError, match=r"bad.json: malformed JSON at line 1"):
        read_json(bad)
    with pytest.raises(ValidationError, match="cannot read file"):
        read_json(tmp_path / "missing.json")


def test_model_spec_validation() -> None:
    with pytest.raises(ValidationError, match="model 'm': hidden must be >= 1"):
        ModelSpec("m", num_params=10, hidden=0, layers=1, seq_len=1, global_batch=1, num_heads=1)


def test_job_with_progress_copies_and_checks_only_the_progress() -> None:
    j = Job("a", "bert", 2, 100, requested_cpus=16, guaranteed=True)
    k = j.with_progress(40.5)
    assert k.completed_iterations == 40.5 and j.completed_iterations == 0.0
    assert k == Job("a", "bert", 2, 100, requested_cpus=16, guaranteed=True, completed_iterations=40.5)
    for bad in (-1, 100.5):
        with pytest.raises(ValidationError, match="completed_iterations"):
            j.with_progress(bad)


def test_connected_groups_join_items_through_shared_links() -> None:
    from optsched.core.groups import connected_groups
    assert connected_groups("abcdef", ["ce", "ea", "", "f"]) == [["a", "c", "e"], ["b"], ["d"], ["f"]]
    assert connected_groups([3, 1, 2], [[2, 3]]) == [[3, 2], [1]]
    assert connected_groups([], []) == []


def test_a_gpu_type_missing_a_field_is_named_by_its_index() -> None:
    data = {"name": "c", "intra_node_gbps": 150, "inter_node_gbps": 80, "pcie_gbps": 20,
            "gpu_types": [{"name": "A800", "memory_gib": 80, "peak_tflops": 312}, {"name": "X", "memory_gib": 80}],
            "nodes": [{"name": "n0", "gpu_type": "A800", "num_gpus": 8, "num_cpus": 96, "memory_gib": 1024}]}
    with pytest.raises(ValidationError, match=r"^cluster\.gpu_types\[1\]: GPUType: missing field\(s\) peak_tflops$"):
        Cluster.from_dict(data)

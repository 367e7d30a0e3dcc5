"""Reading a large round fast (issue 26, item 2) changes no object and no error: the frozen-dataclass builder,
plain nodes built directly, plain node shares shared, plans keyed by their members, the unbound-field check."""

from __future__ import annotations

import dataclasses

import pytest

from optsched.core.allocation import NodeShare, Placement
from optsched.core.construct import frozen_builder
from optsched.core.errors import ValidationError
from optsched.core.hardware import Node
from optsched.core.job import Job
from optsched.core.plan import ExecutionPlan
from optsched.rounds.lyra_allocate.generate import generate_allocate_round

JOB = {"name": "j1", "model": "bert", "requested_gpus": 2, "total_iterations": 100, "completed_iterations": 5.0,
       "min_gpus": 2, "max_gpus": 4, "gpus_per_worker": 2, "fungible": True}


def test_the_builder_makes_what_the_constructor_makes_fields_in_order() -> None:
    build = frozen_builder(Job)
    for extra in ({}, {"deadline": 500.0}, {"priority": 3, "weight": 2.0}):
        kw = {**JOB, **extra}
        made, built = Job(**kw), build(**kw)
        assert made == built
        assert list(made.__dict__.items()) == list(built.__dict__.items())


def test_the_builder_runs_the_checks_and_names_a_missing_field() -> None:
    build = frozen_builder(Job)
    with pytest.raises(ValidationError, match="requested_gpus must be"):
        build(**{**JOB, "requested_gpus": 0})
    with pytest.raises(ValidationError, match="missing field.*total_iterations"):
        build(**{k: v for k, v in JOB.items() if k != "total_iterations"})


def test_the_builder_refuses_a_class_it_cannot_build_as_the_constructor_does() -> None:
    @dataclasses.dataclass(frozen=True)
    class WithFactory:
        items: list[int] = dataclasses.field(default_factory=list)

    with pytest.raises(TypeError, match="default_factory"):
        frozen_builder(WithFactory)


def test_job_from_dict_is_the_constructor_s_job() -> None:
    read = Job.from_dict(JOB)
    assert read == Job(**JOB) and list(read.__dict__) == list(Job(**JOB).__dict__)
    with pytest.raises(ValidationError, match="unknown field"):
        Job.from_dict({**JOB, "colour": "red"})


def test_plain_nodes_are_the_nodes_the_full_path_makes_and_bad_ones_are_refused_alike() -> None:
    plain = {"name": "n1", "gpu_type": "T4", "num_gpus": 8, "num_cpus": 32, "memory_gib": 128.0}
    assert Node.from_dict(plain) == Node(**plain)
    assert Node.from_dict({**plain, "num_gpus": 8.0}) == Node(**plain)  # a JSON integer written 8.0: full path
    for bad, rule in (({**plain, "num_gpus": -1}, "num_gpus must be >= 0"),
                      ({**plain, "name": ""}, "name must be a non-empty string"),
                      ({**plain, "memory_gib": float("inf")}, "memory_gib must be a finite number")):
        with pytest.raises(ValidationError, match=rule):
            Node.from_dict(bad)


def test_plain_shares_are_shared_and_every_other_share_is_checked() -> None:
    a = NodeShare.from_dict({"gpus": 2, "cpus": 0, "mem_gb": 0.0})
    assert a is NodeShare.from_dict({"gpus": 2, "cpus": 0, "mem_gb": 0.0})
    assert NodeShare.from_dict({"gpus": 2}) == a
    assert NodeShare.from_dict({"gpus": 2.0}) == a and type(NodeShare.from_dict({"gpus": 2.0}).gpus) is int
    for bad, rule in (({"gpus": True}, "gpus must be an integer"), ({"gpus": -1}, "gpus must be >= 0"),
                      ({"gpus": 1, "mem_gb": float("nan")}, "mem_gib must be a finite number"),
                      ({"gpus": 1, "disk": 3}, "unknown field")):
        with pytest.raises(ValidationError, match=rule):
            NodeShare.from_dict(bad)


def test_placement_sorts_by_node_and_names_a_bad_node_before_sorting() -> None:
    p = Placement((("b", NodeShare(1)), ("a", NodeShare(2))))
    assert [n for n, _ in p.shares] == ["a", "b"]
    with pytest.raises(ValidationError, match="name must be a non-empty string, got None"):
        Placement((("b", NodeShare(1)), (None, NodeShare(1))))  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="appears twice"):
        Placement((("a", NodeShare(1)), ("a", NodeShare(1))))


def test_plans_read_in_any_member_order_are_equal_and_typed_members_are_checked() -> None:
    one = ExecutionPlan.from_dict({"dp": 2, "tp": 1, "pp": 1})
    assert ExecutionPlan.from_dict({"pp": 1, "tp": 1, "dp": 2}) == one
    assert ExecutionPlan.from_dict({"dp": 2.0, "tp": 1, "pp": 1}) == one
    with pytest.raises(ValidationError, match="dp must be an integer"):
        ExecutionPlan.from_dict({"dp": True})


def test_the_unbound_field_check_refuses_each_field_alone() -> None:
    base = generate_allocate_round(seed=0, servers=2, training=2, jobs=3)
    kind = type(base)
    data = base.to_dict()
    assert type(base).from_dict(data) == base
    for name, value in (("deadline", 100.0), ("priority", 2), ("weight", 2.0), ("plan_fixed", True)):
        if name not in kind.UNBOUND_JOB_FIELDS:
            continue
        job = dict(data["jobs"][0])
        job[name] = value
        if name == "plan_fixed":
            job["requested_plan"] = {"dp": job["requested_gpus"]}
        with pytest.raises(ValidationError, match=f"sets {name}, which"):
            kind.from_dict({**data, "jobs": [job, *data["jobs"][1:]]})


def test_plain_coefficient_rows_read_as_the_constructor_makes_them_and_bad_ones_are_named() -> None:
    from optsched.core.coefficient_rows import CoefficientRow
    from optsched.core.plan import ExecutionPlan

    plain = {"plan": {"dp": 4}, "gpu_type": "A100", "gpus_per_node": [2, 2], "throughput": 3.5}
    full = {**plain, "cpus": 8, "mem_gib": 64.0}
    for data in (plain, full, {**plain, "gpus_per_node": [1, 3]}, {**plain, "plan": {"dp": 2, "tp": 2}}):
        row = CoefficientRow.from_dict(data)
        made = CoefficientRow(ExecutionPlan.from_dict(data["plan"]), data["gpu_type"], tuple(data["gpus_per_node"]),
                              data["throughput"], data.get("cpus", 0), data.get("mem_gib", 0.0))
        assert row == made and list(row.__dict__) == list(made.__dict__)
    assert CoefficientRow.from_dict({**plain, "throughput": 3}).throughput == 3.0  # an int: the constructor's path
    for bad, says in (({**plain, "gpus_per_node": [4, 1]}, "plan dp"), ({**plain, "throughput": 0.0}, "throughput"),
                      ({**plain, "gpus_per_node": [2, 0]}, "gpus_per_node"), ({**plain, "gpu_type": " "}, "name"),
                      ({**plain, "cpus": -1}, "cpus"), ({**plain, "extra": 1}, "extra")):
        with pytest.raises(ValidationError, match=says):
            CoefficientRow.from_dict(bad)

"""Rounds and decisions (optsched/core/round.py, optsched/core/decision.py; the rounds are Rubick rounds,
optsched/rounds/rubick/problem.py): JSON round trips, clear errors for malformed round
files, free resources and quota semantics, and the JSON Schemas of both formats
(optsched/schemas/, checked with jsonschema when installed and with a small structural checker
that needs nothing)."""

from __future__ import annotations

import copy
import dataclasses
import json
import re
from typing import Any

import pytest

from optsched.core import (Allocation, Cluster, ExecutionPlan, Job, Node, NodeShare, Placement, UnknownNameError,
                           ValidationError, ZeroMode, a800_cluster)
from optsched.core.decision import ACTIONS, DECISION_FORMAT, STATUSES, Decision, JobAllocations, JobDecision
from optsched.core.kinds import round_kinds
from optsched.core.round import ROUND_FORMAT, RoundProblem
from optsched.rounds.rubick.problem import DEFAULT_PREEMPT_PENALTY, DEFAULT_RECONFIG_PENALTY, RubickRound
from optsched.schemas import SCHEMA_NAMES, load_schema

from helpers import REPO_ROOT, alloc, roundtrip
from schema_check import KEYWORDS, structural_errors, used_keywords


# -- fixtures ------------------------------------------------------------------------------------
def small_round(**overrides: Any) -> RubickRound:
    """Two 8-GPU nodes; a running guaranteed job, a queued best-effort job with a requested plan, a
    running best-effort job spread over both nodes; outside work on n001; one tenant quota."""
    jobs = (Job("a", "bert", 4, 1000, requested_cpus=32, tenant="t1", guaranteed=True, submit_time=10.0,
                completed_iterations=250.0),
            Job("b", "vit", 2, 500, requested_plan=ExecutionPlan(dp=2, ga_steps=2), tenant="t2"),
            Job("c", "gpt2", 4, 2000, requested_cpus=16, requested_mem_gib=64.0, tenant="t2", max_gpus=8,
                gpu_type="A800", min_gpus=2))
    kwargs: dict[str, Any] = dict(
        cluster=a800_cluster(2, 8), jobs=jobs,
        running=(alloc("a", ExecutionPlan(dp=4), {"n000": (4, 32, 40.0)}),
                 alloc("c", ExecutionPlan(dp=4, zero=ZeroMode.DP), {"n000": (2, 8, 16.0), "n001": (2, 8, 16.0)})),
        occupied={"n001": NodeShare(2, 8, 100.0)}, quotas={"t1": 8}, reconfig_penalty=0.1,
        preempt_penalty=0.5, time=3600.0)
    kwargs.update(overrides)
    return RubickRound(**kwargs)


def round_data(**changes: Any) -> dict[str, Any]:
    """``small_round().to_dict()`` through JSON, with top-level ``changes`` applied."""
    data = json.loads(json.dumps(small_round().to_dict()))
    data.update(changes)
    return data


def sample_decision() -> Decision:
    """A decision with every action: keep, reconfigure, start, preempt, wait."""
    keep = alloc("a", ExecutionPlan(dp=4), {"n000": (4, 32, 40.0)})
    reconf = alloc("c", ExecutionPlan(dp=2, tp=2, pp=2, micro_batches=4), {"n000": (8, 32, 64.0)})
    start = alloc("b", ExecutionPlan(dp=2, ga_steps=2), {"n001": (2, 16, 20.5)})
    jobs = (JobDecision("a", keep, 12.5, 1.0, "keep", protected=True),
            JobDecision("c", reconf, 3.25, 1.4, "reconfigure"),
            JobDecision("b", start, 40.0, 1.1, "start"),
            JobDecision("d", None, 0.0, 0.0, "preempt"),
            JobDecision("e", None, 0.0, 0.0, "wait", protected=False))
    return Decision("rubick", "exact", "feasible", 3.15, JobAllocations(jobs), bound=3.3, gap=(3.3 - 3.15) / 3.3,
                    solve_seconds=1.25, heuristic_objective=3.0, warm_start=True, message="time limit")


# -- round trips ---------------------------------------------------------------------------------
def test_round_json_round_trip() -> None:
    p = small_round()
    q = roundtrip(p)
    assert q == p
    assert q.to_dict() == p.to_dict()
    d = p.to_dict()
    assert d["format"] == ROUND_FORMAT and d["kind"] == "rubick"
    assert d["occupied"] == {"n001": {"gpus": 2, "cpus": 8, "mem_gb": 100.0}}
    assert d["quotas"] == {"t1": 8}
    assert d["running"][1]["placement"] == {"n000": {"gpus": 2, "cpus": 8, "mem_gb": 16.0},
                                            "n001": {"gpus": 2, "cpus": 8, "mem_gb": 16.0}}
    assert q.current("a") == p.current("a") and q.current("b") is None


def test_round_defaults_when_optional_fields_are_omitted() -> None:
    data = {"kind": "rubick", "cluster": a800_cluster(1, 8).to_dict(),
            "jobs": [{"name": "x", "model": "vit", "requested_gpus": 1, "total_iterations": 10}]}
    p = RoundProblem.from_dict(data)
    assert p.running == () and p.occupied == () and p.quotas == () and p.time == 0.0
    assert p.reconfig_penalty == DEFAULT_RECONFIG_PENALTY and p.preempt_penalty == DEFAULT_PREEMPT_PENALTY
    assert p.job("x").tenant == "default" and not p.job("x").guaranteed


def test_cluster_given_by_name_with_explicit_catalogue() -> None:
    data = round_data(cluster="a800-8x8")
    p = RoundProblem.from_dict(data, clusters={"a800-8x8": a800_cluster(8, 8)})
    assert p.cluster == a800_cluster(8, 8) and p.cluster.name == "a800-8x8"
    assert roundtrip(p) == p
    assert isinstance(p.to_dict()["cluster"], dict)  # to_dict writes the object
    with pytest.raises(UnknownNameError, match="unknown cluster 'a800-9x9'.*a800-8x8"):
        RoundProblem.from_dict(round_data(cluster="a800-9x9"), clusters={"a800-8x8": a800_cluster(8, 8)})


def test_cluster_given_by_name_from_builtin_catalogue() -> None:
    p = RoundProblem.from_dict(round_data(cluster="a800-8x8"))
    assert p.cluster == a800_cluster(8, 8)
    assert roundtrip(p) == p


def test_unknown_builtin_cluster_name_is_named() -> None:
    with pytest.raises(UnknownNameError, match="unknown cluster 'nope'"):
        RoundProblem.from_dict(round_data(cluster="nope"))


def test_decision_json_round_trip() -> None:
    d = sample_decision()
    e = roundtrip(d)
    assert e == d
    out = d.to_dict()
    assert out["format"] == DECISION_FORMAT
    assert [j["action"] for j in out["jobs"]] == ["keep", "reconfigure", "start", "preempt", "wait"]
    assert out["jobs"][3] == {"job": "d", "action": "preempt", "protected": False, "plan": None, "placement": {},
                              "throughput": 0.0, "normalised_throughput": 0.0, "reason": "", "penalty": 0.0}
    assert e.allocations == d.allocations and set(e.allocations) == {"a", "b", "c"}
    assert e.job("c").allocation.plan.pp == 2
    heuristic = Decision("rubick", "heuristic", "heuristic", 1.0, JobAllocations(()))
    assert roundtrip(heuristic) == heuristic and heuristic.to_dict()["bound"] is None


def test_decision_reads_files_without_optional_fields() -> None:
    d = Decision.from_dict({"kind": "rubick", "method": "heuristic", "status": "heuristic", "objective": 1,
                            "jobs": [{"job": "x", "action": "wait", "plan": None, "placement": {},
                                      "throughput": 0}]})
    assert d.bound is None and d.gap is None and d.solve_seconds == 0.0 and not d.warm_start
    assert d.job("x").normalised == 0.0 and not d.job("x").protected


def test_decision_errors_name_the_rule() -> None:
    a = alloc("x", ExecutionPlan(dp=1), {"n000": (1, 4, 8.0)})
    with pytest.raises(UnknownNameError, match="unknown status 'done'"):
        Decision("rubick", "exact", "done", 0.0, JobAllocations(()))
    with pytest.raises(UnknownNameError, match="unknown action 'grow'"):
        JobDecision("x", a, 1.0, 1.0, "grow")
    with pytest.raises(ValidationError, match="job 'x': action 'wait' does not match its allocation"):
        JobDecision("x", a, 1.0, 1.0, "wait")
    with pytest.raises(ValidationError, match="job 'x': action 'start' does not match its allocation"):
        JobDecision("x", None, 0.0, 0.0, "start")
    with pytest.raises(ValidationError, match="decision of job 'y' carries an allocation of 'x'"):
        JobDecision("y", a, 1.0, 1.0, "start")
    with pytest.raises(ValidationError, match="decision: unknown field"):
        Decision.from_dict({**sample_decision().to_dict(), "extra": 1})
    with pytest.raises(UnknownNameError, match="unknown job 'zz'"):
        sample_decision().job("zz")


# -- malformed rounds ----------------------------------------------------------------------------
def test_unknown_kind() -> None:
    with pytest.raises(UnknownNameError, match="unknown round kind 'no-such-kind'.*known round kinds: .*rubick"):
        RoundProblem.from_dict(round_data(kind="no-such-kind"))


def test_unknown_model_is_left_to_the_table() -> None:
    data = round_data()
    data["jobs"][1]["model"] = "resnet"
    p = RoundProblem.from_dict(data)  # the round itself does not know the catalogue
    assert p.job("b").model == "resnet"
    from optsched.rounds.rubick.table import build_round_table
    with pytest.raises(UnknownNameError, match="unknown model 'resnet'"):
        build_round_table(p)


def test_duplicate_job_names() -> None:
    data = round_data()
    data["jobs"][2]["name"] = "a"
    data["running"] = []
    with pytest.raises(ValidationError, match="round: job name 'a' used twice"):
        RoundProblem.from_dict(data)


def test_running_allocation_of_unknown_job() -> None:
    data = round_data()
    data["running"][0]["job"] = "ghost"
    with pytest.raises(ValidationError, match="running allocation names job 'ghost', which is not among the jobs"):
        RoundProblem.from_dict(data)


def test_running_allocation_on_unknown_node() -> None:
    data = round_data()
    data["running"][0]["placement"] = {"n999": {"gpus": 4, "cpus": 32, "mem_gb": 40.0}}
    with pytest.raises(ValidationError, match="running job 'a' uses unknown node 'n999'.*n000, n001"):
        RoundProblem.from_dict(data)


def test_occupied_on_unknown_node() -> None:
    with pytest.raises(ValidationError, match="occupied uses unknown node 'n7'"):
        RoundProblem.from_dict(round_data(occupied={"n7": {"gpus": 1}}))


def test_two_running_allocations_of_one_job() -> None:
    data = round_data()
    data["running"].append(copy.deepcopy(data["running"][0]))
    with pytest.raises(ValidationError, match="job 'a' has two running allocations"):
        RoundProblem.from_dict(data)


@pytest.mark.parametrize("share, unit", [
    ({"gpus": 7, "cpus": 8, "mem_gb": 100.0}, "GPUs"),
    ({"gpus": 2, "cpus": 90, "mem_gb": 100.0}, "CPUs"),
    ({"gpus": 2, "cpus": 8, "mem_gb": 1590.0}, "GiB of memory"),
])
def test_node_over_capacity_names_node_and_resource(share: dict[str, Any], unit: str) -> None:
    # n001 holds job c's share (2 GPUs, 8 CPUs, 16 GiB); the occupied share pushes it over
    with pytest.raises(ValidationError, match=rf"node 'n001' is over capacity in {unit}: job 'c' brings"):
        RoundProblem.from_dict(round_data(occupied={"n001": share}))


def test_running_jobs_alone_over_capacity() -> None:
    data = round_data()
    data["running"][0]["placement"]["n000"]["gpus"] = 7
    data["running"][0]["plan"]["dp"] = 7
    with pytest.raises(ValidationError, match=r"node 'n000' is over capacity in GPUs: job 'c' brings the total "
                                              r"held there to 9, capacity 8"):
        RoundProblem.from_dict(data)


def test_occupied_alone_over_capacity() -> None:
    with pytest.raises(ValidationError, match="node 'n000' is over capacity in GPUs: occupied brings"):
        RoundProblem.from_dict(round_data(running=[], occupied={"n000": {"gpus": 9}}))


def test_negative_quota() -> None:
    with pytest.raises(ValidationError, match=r"quota of tenant 't1': GPUs must be >= 0, got -1"):
        RoundProblem.from_dict(round_data(quotas={"t1": -1}))
    with pytest.raises(ValidationError, match=r"quota of tenant 't1': GPUs must be an integer, got 2.5"):
        RoundProblem.from_dict(round_data(quotas={"t1": 2.5}))


def test_unknown_and_missing_top_level_fields() -> None:
    with pytest.raises(ValidationError, match=r"round: unknown field\(s\) extra, zzz"):
        RoundProblem.from_dict(round_data(extra=1, zzz=2))
    data = round_data()
    del data["jobs"]
    with pytest.raises(ValidationError, match=r"round: missing field\(s\) jobs"):
        RoundProblem.from_dict(data)
    with pytest.raises(ValidationError, match="round: expected a JSON object, got list"):
        RoundProblem.from_dict([])


@pytest.mark.parametrize("key, value, expected", [
    ("jobs", {"a": 1}, "round: jobs must be a JSON array"),
    ("running", {}, "round: running must be a JSON array"),
    ("occupied", [], "round: occupied must be a JSON object"),
    ("quotas", [["t1", 8]], "round: quotas must be a JSON object"),
    ("time", "noon", "round: time must be a finite number"),
    ("reconfig_penalty", -0.1, "round: reconfig_penalty must be >= 0"),
    ("preempt_penalty", None, "round: preempt_penalty must be a finite number"),
    ("format", "optsched.round/2", "round: unsupported format 'optsched.round/2'"),
])
def test_wrong_types(key: str, value: Any, expected: str) -> None:
    with pytest.raises(ValidationError, match=re.escape(expected)):
        RoundProblem.from_dict(round_data(**{key: value}))


def test_item_errors_are_located() -> None:
    data = round_data()
    data["jobs"][1]["requested_gpus"] = 0
    with pytest.raises(ValidationError, match=r"round: jobs\[1\]: job 'b': requested_gpus must be >= 1"):
        RoundProblem.from_dict(data)
    data = round_data()
    data["jobs"][0]["colour"] = "red"
    with pytest.raises(ValidationError, match=r"round: jobs\[0\]: Job: unknown field\(s\) colour"):
        RoundProblem.from_dict(data)
    data = round_data()
    data["running"][1]["plan"]["dp"] = 2
    with pytest.raises(ValidationError, match=r"round: running\[1\]: allocation of job 'c': plan .* uses 2 GPUs "
                                              r"but the placement holds 4"):
        RoundProblem.from_dict(data)


def test_job_pinned_to_a_type_the_cluster_lacks() -> None:
    data = round_data()
    data["jobs"][1]["gpu_type"] = "T4"
    with pytest.raises(ValidationError, match=r"job '.*' is pinned to unknown GPU type 'T4'"):
        RoundProblem.from_dict(data)


def test_running_job_pinned_to_another_type() -> None:
    from optsched.core import GPUType, Node
    a800, t4 = a800_cluster(1, 8).gpu_types[0], GPUType("T4", 16.0, 65.0, 10.0)
    cluster = Cluster("mixed", (Node("big", "A800", 8, 96, 1600.0), Node("small", "T4", 4, 32, 256.0)),
                      (a800, t4), 150.0, 80.0, 20.0)
    job = Job("p", "vit", 2, 100, gpu_type="A800")
    with pytest.raises(ValidationError, match="running job 'p' is pinned to A800 GPUs but runs on node 'small' "
                                              "of type T4"):
        RubickRound(cluster, (job,), running=(alloc("p", ExecutionPlan(dp=2), {"small": (2, 4, 8.0)}),))


# -- semantics: free resources, quotas, look-ups ---------------------------------------------------
def test_free_is_capacity_minus_occupied_only() -> None:
    p = small_round()
    assert p.free("n001") == NodeShare(6, 96 - 8, 1600.0 - 100.0)
    # running allocations are inside what the round may use: n000 offers its full capacity
    assert p.free("n000") == NodeShare(8, 96, 1600.0)
    with pytest.raises(UnknownNameError, match="unknown node 'n5'"):
        p.free("n5")
    g, c, m = p.free_arrays(["n001", "n000"])
    assert g.tolist() == [6, 8] and c.tolist() == [88, 96] and m.tolist() == [1500.0, 1600.0]
    g[0] = 0  # fresh arrays: writing to them changes nothing in the round
    assert p.free("n001").gpus == 6 and p.free_arrays(["n001"])[0].tolist() == [6]
    with pytest.raises(UnknownNameError, match="unknown node 'n5'"):
        p.free_arrays(["n000", "n5"])


def test_quota_of() -> None:
    no_quotas = small_round(quotas={})
    assert no_quotas.quota_of("t1") is None and no_quotas.quota_of("anyone") is None
    p = small_round()
    assert p.quota_of("t1") == 8
    assert p.quota_of("t2") == 0  # once quotas are given, a tenant without an entry has 0
    assert p.quota_map == {"t1": 8}
    assert small_round(quotas={"t1": 0}).quota_of("t1") == 0


def test_lookups_and_normalised_containers() -> None:
    p = small_round(quotas=(("zz", 1), ("aa", 2)), occupied=(("n001", NodeShare(1)),))
    assert p.quotas == (("aa", 2), ("zz", 1))  # sorted, so equal rounds compare equal
    assert p == small_round(quotas={"zz": 1, "aa": 2}, occupied={"n001": NodeShare(1)})
    assert p.job("b").requested_plan == ExecutionPlan(dp=2, ga_steps=2)
    assert p.current("a") is not None and p.current("b") is None
    with pytest.raises(UnknownNameError, match="unknown job 'zz'"):
        p.job("zz")


# -- JSON Schemas ----------------------------------------------------------------------------------
def _sample_rounds() -> list[RubickRound]:
    from optsched.rounds.rubick.generate import generate_rubick_round
    return [small_round(), small_round(quotas={}, occupied={}, running=()),
            generate_rubick_round(4, 8, 16, seed=3), generate_rubick_round(3, 4, 12, seed=7, tenants=1)]


def _sample_decisions() -> list[Decision]:
    """The hand-made decision, a heuristic one without bound, and one built by the Rubick evaluation
    code from a generated round (every running job kept)."""
    from optsched.rounds.rubick.choice import Choice
    from optsched.rounds.rubick.decision import to_decision
    from optsched.rounds.rubick.generate import generate_rubick_round
    from optsched.rounds.rubick.table import build_round_table
    p = generate_rubick_round(2, 8, 6, seed=1)
    table = build_round_table(p)
    choices = {}
    for j, job in enumerate(p.jobs):
        cur = p.current(job.name)
        if cur is not None:
            choices[job.name] = Choice(int(table.current_row[j]), tuple((n, s.gpus) for n, s in cur.placement.shares))
    evaluated = to_decision(p, table, choices, method="heuristic", status="heuristic")
    return [sample_decision(), Decision("rubick", "rubick-n", "heuristic", -0.25,
                                        JobAllocations((JobDecision("x", None, 0.0, 0.0, "preempt"),))), evaluated]


def test_schemas_load_and_are_consistent() -> None:
    assert SCHEMA_NAMES == ("decision", "round", "perf-params")
    r, d = load_schema("round"), load_schema("decision")
    assert r["$schema"] == d["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    for name in ("plan", "nodeShare", "placement", "name"):  # duplicated definitions stay identical
        assert r["$defs"][name] == d["$defs"][name], name
    for s in (r, d):
        assert used_keywords(s, set()) <= KEYWORDS, used_keywords(s, set()) - KEYWORDS
    # every registered kind; tests/schemas/test_kind_schemas.py checks each kind's fields
    assert set(r["properties"]["kind"]["enum"]) == set(d["properties"]["kind"]["enum"]) == set(round_kinds())
    assert d["properties"]["status"]["enum"] == list(STATUSES)
    assert d["$defs"]["jobDecision"]["properties"]["action"]["enum"] == list(ACTIONS)
    load_schema("round")["properties"].clear()
    assert load_schema("round")["properties"]  # callers get a fresh copy
    with pytest.raises(UnknownNameError, match="unknown schema 'plan'"):
        load_schema("plan")


def test_schema_properties_match_the_value_objects() -> None:
    r = load_schema("round")
    rubick = next(b["then"] for b in r["allOf"] if b["if"]["properties"]["kind"] == {"const": "rubick"})
    # perf_params and coefficients are written only when a round has them (tests/rounds/test_own_coefficients.py),
    # on_invalid_job only when "skip" (tests/rounds/test_invalid_jobs.py), round_interval_s and min_hold_s when set
    # (tests/rounds/test_penalties_and_holds.py)
    assert set(r["properties"]) | set(rubick["properties"]) == set(small_round().to_dict()) | {
        "perf_params", "coefficients", "on_invalid_job", "round_interval_s", "min_hold_s"}
    assert set(r["$defs"]["job"]["properties"]) == {f.name for f in dataclasses.fields(Job)}
    assert set(r["$defs"]["plan"]["properties"]) == {f.name for f in dataclasses.fields(ExecutionPlan)}
    assert set(r["$defs"]["nodeShare"]["properties"]) == set(NodeShare(1).to_dict())
    assert set(r["$defs"]["cluster"]["properties"]) == set(a800_cluster(1, 8).to_dict())
    assert set(r["$defs"]["node"]["properties"]) == {f.name for f in dataclasses.fields(Node)}
    assert set(r["$defs"]["gpuType"]["properties"]) == {f.name for f in dataclasses.fields(type(
        a800_cluster(1, 8).gpu_types[0]))}
    assert set(r["$defs"]["allocation"]["properties"]) == {f.name for f in dataclasses.fields(Allocation)}
    d = load_schema("decision")
    # skipped is written only when a round left jobs out (tests/rounds/test_invalid_jobs.py), queued_seconds only by
    # the service (tests/test_service.py)
    assert set(d["required"]) == set(d["properties"]) - {"skipped", "queued_seconds"} \
        == set(sample_decision().to_dict()) - {"jobs"}
    jd = d["$defs"]["jobDecision"]
    assert set(jd["required"]) == set(jd["properties"]) == set(sample_decision().jobs[0].to_dict())


def test_to_dict_outputs_conform_structurally() -> None:
    for p in _sample_rounds():
        out = json.loads(json.dumps(p.to_dict()))
        assert structural_errors("round", out) == []
    for d in _sample_decisions():
        out = json.loads(json.dumps(d.to_dict()))
        assert structural_errors("decision", out) == []


#: mutations of a valid round file that the parser rejects and that the schema can express
_BAD_ROUNDS = [
    ("unknown top-level field", lambda d: d.update(extra=1)),
    ("unknown kind", lambda d: d.update(kind="no-such-kind")),
    ("jobs not an array", lambda d: d.update(jobs={})),
    ("missing jobs", lambda d: d.pop("jobs")),
    ("negative quota", lambda d: d.update(quotas={"t1": -1})),
    ("fractional quota", lambda d: d.update(quotas={"t1": 1.5})),
    ("negative penalty", lambda d: d.update(preempt_penalty=-1)),
    ("wrong format", lambda d: d.update(format="optsched.round/2")),
    ("unknown job field", lambda d: d["jobs"][0].update(colour="red")),
    ("zero requested GPUs", lambda d: d["jobs"][0].update(requested_gpus=0)),
    ("guaranteed not a boolean", lambda d: d["jobs"][0].update(guaranteed="yes")),
    ("unknown ZeRO mode", lambda d: d["jobs"][1]["requested_plan"].update(zero="zero-3")),
    ("unknown share field", lambda d: d["occupied"]["n001"].update(gb=1)),
    ("share without GPUs", lambda d: d["occupied"]["n001"].pop("gpus")),
    ("allocation without plan", lambda d: d["running"][0].pop("plan")),
    ("cluster without nodes", lambda d: d["cluster"].update(nodes=[])),
    ("unknown node field", lambda d: d["cluster"]["nodes"][0].update(rack="r1")),
    ("empty cluster name", lambda d: d.update(cluster="")),
]


@pytest.mark.parametrize("label, mutate", _BAD_ROUNDS, ids=[b[0] for b in _BAD_ROUNDS])
def test_parser_and_schema_reject_the_same_malformed_rounds(label: str, mutate: Any) -> None:
    data = round_data()
    mutate(data)
    with pytest.raises(ValidationError):
        RoundProblem.from_dict(data, clusters={"a800-2x8": a800_cluster(2, 8)})
    assert structural_errors("round", data), label


def test_schema_accepts_what_the_parser_accepts() -> None:
    minimal = {"kind": "rubick", "cluster": "a800-2x8",
               "jobs": [{"name": "x", "model": "vit", "requested_gpus": 1, "total_iterations": 10,
                         "requested_plan": None, "max_gpus": None, "deadline": None, "gpu_type": None}]}
    RoundProblem.from_dict(minimal, clusters={"a800-2x8": a800_cluster(2, 8)})
    assert structural_errors("round", minimal) == []
    assert structural_errors("decision", {**sample_decision().to_dict(), "bound": None, "gap": None}) == []
    bad = sample_decision().to_dict()
    bad["jobs"][3]["plan"] = bad["jobs"][0]["plan"]  # a preempted job with a plan
    assert structural_errors("decision", bad)


def test_to_dict_outputs_validate_with_jsonschema() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    validators = {}
    for name in SCHEMA_NAMES:
        schema = load_schema(name)
        jsonschema.Draft202012Validator.check_schema(schema)
        validators[name] = jsonschema.Draft202012Validator(schema)
    for p in _sample_rounds():
        validators["round"].validate(json.loads(json.dumps(p.to_dict())))
    validators["round"].validate(round_data(cluster="a800-8x8"))
    for d in _sample_decisions():
        validators["decision"].validate(json.loads(json.dumps(d.to_dict())))
    for label, mutate in _BAD_ROUNDS:
        data = round_data()
        mutate(data)
        assert not validators["round"].is_valid(data), label


# -- the examples of docs/rounds.md -----------------------------------------------------------------
def _doc_examples() -> list[Any]:
    doc = REPO_ROOT / "docs" / "rounds.md"
    if not doc.exists():
        pytest.skip("docs/rounds.md is not part of this checkout")
    return [json.loads(b) for b in re.findall(r"```json\n(.*?)```", doc.read_text(encoding="utf-8"), re.S)]


def test_documented_examples_are_valid_and_true() -> None:
    from optsched.rounds.rubick.decision import choices_of, to_decision
    from optsched.rounds.rubick.feasibility import violations
    from optsched.rounds.rubick.table import build_round_table
    round_doc, decision_doc = _doc_examples()
    assert structural_errors("round", round_doc) == []
    assert structural_errors("decision", decision_doc) == []
    p = RoundProblem.from_dict(round_doc)
    d = Decision.from_dict(decision_doc)
    assert d.to_dict() == decision_doc  # the example is exactly what to_dict writes
    table = build_round_table(p)
    choices = choices_of(d, table, p)
    assert violations(p, table, choices) == []
    again = to_decision(p, table, choices, method=d.method, status=d.status, solve_seconds=d.solve_seconds)
    # the documented objective is its own normalised throughputs minus the penalties of its actions
    penalty = sum(p.reconfig_penalty if j.action == "reconfigure" else p.preempt_penalty if j.action == "preempt"
                  else 0.0 for j in d.jobs)
    assert d.objective == pytest.approx(sum(j.normalised for j in d.jobs) - penalty, abs=1e-3)
    for mine, doc_job in zip(again.jobs, d.jobs):
        assert (mine.job, mine.action, mine.protected, mine.allocation) == \
            (doc_job.job, doc_job.action, doc_job.protected, doc_job.allocation)
        # numbers move a little whenever the built-in performance models are refitted; regenerate the
        # example when they move by more than this
        assert mine.throughput == pytest.approx(doc_job.throughput, rel=0.05)
        assert mine.normalised == pytest.approx(doc_job.normalised, rel=0.05)


# -- rules added after review -----------------------------------------------------------------------
def test_round_rejects_duplicate_occupied_nodes_and_mixed_gpu_types() -> None:
    from optsched.core import Cluster, ExecutionPlan, GPUType, Job, Node, NodeShare
    from optsched.core.catalog import a800_cluster
    from optsched.core.round import RoundProblem
    cluster = a800_cluster(2, 8)
    with pytest.raises(ValidationError, match="more than once"):
        RubickRound(cluster, (), occupied=(("n000", NodeShare(1)), ("n000", NodeShare(2))))
    mixed = Cluster("mixed", (Node("a", "A800", 4, 32, 256.0), Node("b", "T4", 4, 32, 256.0)),
                    (GPUType("A800", 80.0, 312.0), GPUType("T4", 16.0, 65.0)), 150.0, 80.0, 20.0)
    job = Job("j", "bert", 2, 10)
    spanning = Allocation("j", ExecutionPlan(dp=2), Placement.of({"a": NodeShare(1, 4, 8.0),
                                                                  "b": NodeShare(1, 4, 8.0)}))
    with pytest.raises(ValidationError, match="spans GPU types"):
        RubickRound(mixed, (job,), (spanning,))
    with pytest.raises(ValidationError, match="job 'p' is pinned to unknown GPU type 'V100'"):
        RubickRound(cluster, (Job("p", "bert", 1, 10, gpu_type="V100"),))
    with pytest.raises(ValidationError, match="occupied share of node 'n001'"):
        RoundProblem.from_dict({"kind": "rubick", "cluster": "a800-8x8", "jobs": [],
                                "occupied": {"n001": {"gpus": -1}}})


def test_decision_from_dict_is_strict() -> None:
    from optsched.core.decision import Decision
    base = {"kind": "rubick", "method": "exact", "status": "optimal", "objective": 1.0, "jobs": []}
    assert Decision.from_dict(base).objective == 1.0
    with pytest.raises(ValidationError, match="bound must be a number"):
        Decision.from_dict({**base, "bound": "x"})
    with pytest.raises(ValidationError, match="format"):
        Decision.from_dict({**base, "format": "other/1"})
    job = {"job": "a", "action": "wait", "plan": None, "placement": {}, "throughput": 0.0}
    with pytest.raises(ValidationError, match="twice"):
        Decision.from_dict({**base, "jobs": [job, job]})
    with pytest.raises(ValidationError, match="placement without a plan"):
        Decision.from_dict({**base, "jobs": [{**job, "placement": {"n000": {"gpus": 1}}}]})

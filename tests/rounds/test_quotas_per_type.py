"""Quotas per GPU type in Rubick rounds (issue 24, item 5; optsched/rounds/rubick/quotas.py and
admission.py): hand-computed admissions on an A100-40G + V100-32G cluster, every method keeping a
protected job on the GPU type it is admitted on (checked by violations() and by a check written here
from the decision and the raw table columns), AntMan's own per-type accounting, the partitioned solve,
JSON in both forms, and refusals."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

import optsched
from optsched.core import Cluster, ExecutionPlan, Job, Node, ValidationError
from optsched.core.catalog import GPU_TYPES
from optsched.core.decision import Decision
from optsched.core.round import RoundProblem
from optsched.heuristics.baselines.antman import antman_round
from optsched.policies.registry import methods_of
from optsched.rounds.rubick.admission import admit, type_demands
from optsched.rounds.rubick.baseline_tables import request_table
from optsched.rounds.rubick.decision import choices_of
from optsched.rounds.rubick.feasibility import violations
from optsched.rounds.rubick.problem import RubickRound
from optsched.rounds.rubick.table import build_round_table

from helpers import alloc

METHODS = methods_of("rubick")
#: the methods that admit guaranteed jobs by minRes (Rubick's admission); AntMan has its own rule, the other
#: baselines protect nobody
ADMITTING = ("exact", "rubick-exact", "heuristic", "rubick", "rubick-e", "rubick-r", "rubick-n")
A100, V100 = "A100-40G", "V100-32G"


def _cluster() -> Cluster:
    nodes = (Node("a0", A100, 8, 96, 1024.0), Node("a1", A100, 8, 96, 1024.0),
             Node("v0", V100, 8, 96, 768.0), Node("v1", V100, 8, 96, 768.0))
    return Cluster("mixed", nodes, (GPU_TYPES[A100], GPU_TYPES[V100]), 300.0, 25.0, 32.0)


CLUSTER = _cluster()
NODE_TYPE = {n.name: n.gpu_type for n in CLUSTER.nodes}


def _g(name: str, model: str, gpus: int, submit: float, tenant: str = "t", **kw: Any) -> Job:
    return Job(name, model, gpus, 1000, guaranteed=True, tenant=tenant, submit_time=submit, **kw)


def _decide(problem: RubickRound, method: str, **kw: Any) -> Decision:
    extra = {"defer_unreachable_guarantees": True} if method in ADMITTING else {}
    return optsched.solve(problem, method, time_limit=10, seed=0, **extra, **kw)


def _types_of(d: Decision) -> dict[str, set[str]]:
    return {x.job: {NODE_TYPE[n] for n, _ in x.allocation.placement.shares}
            for x in d.jobs if x.allocation is not None}


# -- the main round ----------------------------------------------------------------------------------
#: minRes of the jobs below on this cluster (the premise, checked in test_the_premise): a 1-GPU vit
#: request reaches its reference throughput with 1 A100 or 2 V100, a 4-GPU gpt2 request with 4 A100 and
#: no V100 row
VIT1 = {A100: 1, V100: 2}
GPT4 = {A100: 4}


def _main(quotas: Any = None) -> RubickRound:
    """Tenant t: {A100: 8, "*": 12}. ``run`` (vit, 1 GPU requested) runs on 2 V100 GPUs; q1, q2 (gpt2, 4
    GPUs) and q3, q4 (vit, 1 GPU) are queued in that order; ``be`` is a best-effort job of tenant b."""
    jobs = (_g("run", "vit", 1, 5.0), _g("q1", "gpt2", 4, 1.0), _g("q2", "gpt2", 4, 2.0), _g("q3", "vit", 1, 3.0),
            _g("q4", "vit", 1, 4.0), Job("be", "bert", 2, 1000, tenant="b", submit_time=0.0))
    running = (alloc("run", ExecutionPlan(dp=2), {"v0": (2, 16, 40.0)}),)
    return RubickRound(CLUSTER, jobs, running, quotas={"t": {A100: 8, "*": 12}} if quotas is None else quotas)


#: hand-computed: run is admitted first (running) on its own type V100 although an A100 needs fewer GPUs
#: (V100 2, "*" 2); q1 and q2 on A100 (A100 8, "*" 10); q3 finds the A100 entry used up and goes to V100
#: (2 GPUs, "*" 12); q4 has room nowhere
MAIN_TYPES = {"run": V100, "q1": A100, "q2": A100, "q3": V100}
MAIN_NEEDS = {"run": 2, "q1": 4, "q2": 4, "q3": 2}


def test_the_premise() -> None:
    problem = _main()
    table = build_round_table(problem)
    types, need = type_demands(table)
    assert types == (A100, V100)
    for name, want in (("run", VIT1), ("q3", VIT1), ("q1", GPT4)):
        got = {t: int(need[table.index_of(name), i]) for i, t in enumerate(types) if need[table.index_of(name), i] >= 0}
        assert got == want, name


def test_admission_by_type_hand_computed() -> None:
    problem = _main()
    a = admit(problem, build_round_table(problem))
    assert dict(a.protected) == MAIN_NEEDS
    assert dict(a.gpu_type) == MAIN_TYPES
    assert set(a.waiting) == {"q4"}
    assert a.waiting["q4"] == (
        "waiting for quota: tenant 't' has no room on a GPU type where the job reaches its reference throughput "
        "(in use: by jobs admitted before it): on A100-40G it needs 1 GPUs and quota 8 GPUs on A100-40G is used up "
        "(8 in use); on V100-32G it needs 2 GPUs and quota 12 GPUs over all GPU types (\"*\") is used up (12 in use)")


def test_the_old_integer_form_admits_as_before() -> None:
    """{"t": 12}: no type is bound, every usage is minRes over all types (run 1, q1 4, q2 4, q3 1, q4 1 = 12),
    so everybody is admitted; {"t": {"*": 12}} is the same round."""
    problem = _main({"t": 12})
    a = admit(problem, build_round_table(problem))
    assert dict(a.protected) == {"run": 1, "q1": 4, "q2": 4, "q3": 1, "q4": 1}
    assert dict(a.gpu_type) == {} and dict(a.waiting) == {}
    assert _main({"t": {"*": 12}}) == problem and problem.quotas == (("t", 12),)
    short = _main({"t": 9})  # run 1, q1 4, q2 4: q3 finds 9 used, with the old wording
    assert admit(short, build_round_table(short)).waiting["q3"] == (
        "waiting for quota: tenant 't' quota 9 GPUs is used up (9 in use by jobs admitted before it, the job needs 1)")


def _independent_check(problem: RubickRound, d: Decision, table: Any, expect: dict[str, str] | None) -> list[str]:
    """With no package code: every job marked protected runs on one GPU type (``expect[job]`` when it has one),
    at least at its reference throughput, and the protected jobs of each tenant fit its quotas per type
    and over all types, their usage read off the raw table columns (the fewest GPUs of a row of the type it
    runs on reaching the reference throughput; over all types for a tenant whose quota is an integer)."""
    out = []
    quotas = {t: (dict(v) if not isinstance(v, int) else {"*": v}) for t, v in problem.quotas}
    used: dict[tuple[str, str], int] = {}
    for x in d.jobs:
        if not x.protected:
            continue
        if x.allocation is None:
            out.append(f"{x.job}: protected but not running")
            continue
        types = {NODE_TYPE[n] for n, _ in x.allocation.placement.shares}
        if len(types) != 1 or (expect is not None and x.job in expect and types != {expect[x.job]}):
            out.append(f"{x.job}: runs on {types}")
        if x.normalised < 1 - 1e-6:
            out.append(f"{x.job}: normalised throughput {x.normalised}")
        if not quotas:
            continue
        j = table.jobs.index(x.job)
        ref = table.reference_throughput[j]
        rows = [k for k in range(len(table.plans))
                if table.job_index[k] == j and table.throughput[k] >= ref * (1 - 1e-9)]
        tenant = problem.job(x.job).tenant
        typed = any(k != "*" for k in quotas.get(tenant, {}))
        on = [int(table.gpus[k]) for k in rows if not typed or table.gpu_type[k] in types]
        need = min(on) if on else 10 ** 9
        for key in ((*types, "*") if typed else ("*",)):
            used[tenant, key] = used.get((tenant, key), 0) + need
    for (tenant, key), n in used.items():
        given = quotas.get(tenant, {})
        if key in given and n > given[key]:
            out.append(f"tenant {tenant}: {n} GPUs on {key} > {given[key]}")
        if key != "*" and key not in given and "*" not in given:
            out.append(f"tenant {tenant}: {n} GPUs on {key}, which has no quota")
    return out


#: the methods on the full table (the ablations admit on their own tables, where minRes differs)
FULL_TABLE = ("exact", "rubick-exact", "heuristic", "rubick")
#: the tables of the ablations (fixed_plan, fixed_resources)
ABLATION = {"rubick-e": (False, True), "rubick-r": (True, False), "rubick-n": (True, True)}


@pytest.mark.parametrize("method", METHODS)
def test_every_method_keeps_protected_jobs_on_their_admission_type(method: str) -> None:
    problem = _main()
    d = _decide(problem, method)
    table = build_round_table(problem)
    protected = {x.job for x in d.jobs if x.protected}
    expect: dict[str, str] | None = None
    if method in FULL_TABLE:
        expect = MAIN_TYPES
        assert protected == set(MAIN_TYPES)
        assert d.job("q4").allocation is None and d.job("q4").reason == admit(problem, table).waiting["q4"]
        assert {k: v for k, v in _types_of(d).items() if k in MAIN_TYPES} == {k: {v} for k, v in MAIN_TYPES.items()}
        assert violations(problem, table, choices_of(d, table, problem)) == []
    elif method in ABLATION:
        fixed_plan, fixed_resources = ABLATION[method]
        own = admit(problem, build_round_table(problem, fixed_plan=fixed_plan, fixed_resources=fixed_resources))
        expect = dict(own.gpu_type)
        assert protected == set(own.protected) and len(expect) >= 3
    assert _independent_check(problem, d, table, expect) == []


@pytest.mark.parametrize("method", METHODS)
def test_a_job_admitted_on_v100_runs_there_with_idle_a100s(method: str) -> None:
    """Tenant t: {A100: 0, "*": 4}. One guaranteed vit job (1 GPU requested) and nothing else: it is
    admitted on V100 (2 GPUs) and every admitting method runs it there although the A100s are idle and
    faster; with the old form {"t": 4} it is not bound and runs on A100."""
    job = (_g("v", "vit", 1, 0.0),)
    bound = RubickRound(CLUSTER, job, quotas={"t": {A100: 0, "*": 4}})
    table = build_round_table(bound)
    assert dict(admit(bound, table).gpu_type) == {"v": V100}
    d = _decide(bound, method)
    if method in FULL_TABLE:
        assert _types_of(d) == {"v": {V100}} and d.job("v").protected
        assert violations(bound, table, choices_of(d, table, bound)) == []
    if method == "antman":  # its request (1 GPU) fits "*" on V100 only
        assert _types_of(d) == {"v": {V100}}
    assert _independent_check(bound, d, table, {"v": V100}) == []
    if method in FULL_TABLE:
        assert _types_of(_decide(RubickRound(CLUSTER, job, quotas={"t": 4}), method)) == {"v": {A100}}


def test_violations_names_a_protected_job_off_its_type() -> None:
    problem = _main()
    table = build_round_table(problem)
    d = _decide(problem, "heuristic")
    choices = choices_of(d, table, problem)
    rows = [int(k) for k in table.configs_of("q3") if table.gpu_type[k] == A100 and table.gpus[k] == 1]
    choices["q3"] = type(choices["q3"])(rows[0], (("a1", 1),))
    assert any("'q3' runs on A100-40G, not on V100-32G" in v for v in violations(problem, table, choices))


@pytest.mark.parametrize("method", ADMITTING)
def test_a_pinned_job_counts_on_its_pinned_type(method: str) -> None:
    """Tenant p: {A100: 2, "*": 12}. ``pv`` (vit, 4 GPUs) pinned to V100 counts against "*" only and runs;
    ``pa`` (vit, 4 GPUs) pinned to A100 needs more than the A100 entry and waits, naming it."""
    jobs = (_g("pv", "vit", 4, 0.0, tenant="p", gpu_type=V100), _g("pa", "vit", 4, 1.0, tenant="p", gpu_type=A100))
    problem = RubickRound(CLUSTER, jobs, quotas={"p": {A100: 2, "*": 12}})
    table = build_round_table(problem)
    a = admit(problem, table)
    assert dict(a.gpu_type) == {"pv": V100}
    assert a.waiting["pa"].endswith(
        "on A100-40G it needs 4 GPUs and quota 2 GPUs on A100-40G has only 2 left (0 in use)")
    d = _decide(problem, method)
    assert _types_of(d) == {"pv": {V100}} and d.job("pa").reason == a.waiting["pa"]


@pytest.mark.parametrize("method", ADMITTING)
def test_running_jobs_are_counted_first(method: str) -> None:
    """Tenant r: {A100: 4}. ``late`` runs on 4 A100 GPUs; ``early`` (submitted first) is queued: the running
    job takes the A100 entry, ``early`` waits, and V100 (named neither by the tenant nor by "*") has quota 0."""
    jobs = (_g("early", "vit", 1, 0.0, tenant="r"), _g("late", "gpt2", 4, 10.0, tenant="r"))
    running = (alloc("late", ExecutionPlan(dp=4), {"a0": (4, 32, 80.0)}),)
    problem = RubickRound(CLUSTER, jobs, running, quotas={"r": {A100: 4}})
    a = admit(problem, build_round_table(problem))
    assert dict(a.gpu_type) == {"late": A100}
    assert a.waiting["early"].endswith(
        "on A100-40G it needs 1 GPUs and quota 4 GPUs on A100-40G is used up (4 in use); on V100-32G it needs 2 GPUs "
        "and no quota on V100-32G (the tenant's quotas name neither V100-32G nor \"*\")")
    d = _decide(problem, method)
    assert _types_of(d) == {"late": {A100}} and d.job("early").action == "wait"


@pytest.mark.parametrize("method", ADMITTING)
def test_a_running_job_whose_type_has_no_room_is_admitted_on_another(method: str) -> None:
    """Tenant s: {V100: 0, "*": 8}. ``mv`` runs on 2 V100 GPUs, where its tenant has quota 0: it is admitted on
    A100 (minRes 1) and every admitting method moves it there."""
    problem = RubickRound(CLUSTER, (_g("mv", "vit", 1, 0.0, tenant="s"),),
                          (alloc("mv", ExecutionPlan(dp=2), {"v0": (2, 16, 40.0)}),), quotas={"s": {V100: 0, "*": 8}})
    a = admit(problem, build_round_table(problem))
    assert dict(a.gpu_type) == {"mv": A100} and dict(a.protected) == {"mv": 1}
    d = _decide(problem, method)
    assert _types_of(d) == {"mv": {A100}} and d.job("mv").protected


def test_deferral_keeps_the_admission_types() -> None:
    problem = _main()
    a = admit(problem, build_round_table(problem))
    b = a.defer({"q1": "no node shape"})
    assert dict(b.gpu_type) == {k: v for k, v in MAIN_TYPES.items() if k != "q1"}


# -- AntMan ------------------------------------------------------------------------------------------------
def _antman_round(quotas: Any) -> RubickRound:
    """``ar`` (vit, 1 GPU) runs on one V100; a1 (gpt2, 4 GPUs), a2 and a3 (vit, 1 GPU) are queued."""
    jobs = (_g("ar", "vit", 1, 9.0), _g("a1", "gpt2", 4, 1.0), _g("a2", "vit", 1, 2.0), _g("a3", "vit", 1, 3.0))
    return RubickRound(CLUSTER, jobs, (alloc("ar", ExecutionPlan(dp=1), {"v0": (1, 8, 20.0)}),), quotas=quotas)


def test_antman_counts_requested_gpus_per_type() -> None:
    """{A100: 4, "*": 6}, usage = requested GPUs: ar 1 on V100 ("*" 1); a1 4 on A100 (A100 4, "*" 5); a2 finds
    the A100 entry used up and starts on V100 ("*" 6); a3 has room nowhere and waits, naming both types."""
    problem = _antman_round({"t": {A100: 4, "*": 6}})
    res = antman_round(problem, request_table(problem))
    placed = {name: {NODE_TYPE[n] for n, _ in c.parts} for name, c in res.choices.items()}
    assert placed == {"ar": {V100}, "a1": {A100}, "a2": {V100}}
    assert res.admission.waiting["a3"] == (
        "tenant 't' has no quota room for the job's request of 1 GPUs on any GPU type: on A100-40G: quota 4 GPUs on "
        "A100-40G is used up (4 in use); on V100-32G: quota 6 GPUs over all GPU types (\"*\") is used up (6 in use)")
    assert res.admission.gpu_type.get("a1") == A100
    d = _decide(problem, "antman")
    assert _types_of(d) == placed and d.job("a3").reason == res.admission.waiting["a3"]


def test_antman_with_the_old_form_is_unchanged() -> None:
    """{"t": 6}: a2 takes the faster A100 (the A100 entry no longer stops it), a3 too ("*" 7 > 6 stops it,
    with the old wording)."""
    problem = _antman_round({"t": 6})
    res = antman_round(problem, request_table(problem))
    assert {NODE_TYPE[n] for n, _ in res.choices["a2"].parts} == {A100}
    assert res.admission.waiting["a3"] == "tenant 't' quota 6 GPUs: 6 in use, job requests 1"
    assert dict(res.admission.gpu_type) == {}


# -- partitioned solve ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["exact", "heuristic"])
def test_a_partitioned_solve_keeps_the_admission_types(method: str) -> None:
    problem = _main()
    d = _decide(problem, method, partitions=2)
    assert {x.job for x in d.jobs if x.protected} == set(MAIN_TYPES)
    assert _independent_check(problem, d, build_round_table(problem), MAIN_TYPES) == []
    assert d.job("q4").allocation is None


# -- random rounds ---------------------------------------------------------------------------------------------
def _random_round(seed: int) -> RubickRound:
    rng = np.random.default_rng(seed)
    jobs = []
    for i in range(7):
        kw: dict[str, Any] = {}
        if rng.random() < 0.2:
            kw["gpu_type"] = str(rng.choice([A100, V100]))
        jobs.append(Job(f"j{i}", str(rng.choice(["vit", "bert", "t5", "gpt2"])), int(rng.choice([1, 2, 4])), 1000,
                        guaranteed=bool(rng.random() < 0.7), tenant=str(rng.choice(["x", "y"])),
                        submit_time=float(i), **kw))
    quotas: dict[str, Any] = {}
    for tenant in ("x", "y"):
        form = rng.integers(3)
        if form == 0:
            quotas[tenant] = int(rng.integers(0, 12))
        else:
            q = {t: int(rng.integers(0, 10)) for t in (A100, V100) if rng.random() < 0.7}
            if form == 2:
                q["*"] = int(rng.integers(2, 14))
            quotas[tenant] = q
    running = []
    if jobs[0].guaranteed and jobs[0].gpu_type != A100 and jobs[0].model == "vit":
        running.append(alloc("j0", ExecutionPlan(dp=2), {"v1": (2, 16, 40.0)}))
    return RubickRound(CLUSTER, tuple(jobs), tuple(running), quotas=quotas, preempt_penalty=0.3)


@pytest.mark.parametrize("seed", range(6))
def test_random_rounds_keep_quotas_per_type(seed: int) -> None:
    problem = _random_round(seed)
    table = build_round_table(problem)
    a = admit(problem, table)
    for method in ("exact", "heuristic", "rubick-n", "antman", "fifo"):
        d = _decide(problem, method)
        assert _independent_check(problem, d, table, dict(a.gpu_type) if method in ADMITTING else None) == [], method
        if method in ("exact", "heuristic"):
            assert violations(problem, table, choices_of(d, table, problem), a.defer(
                {x.job: "deferred" for x in d.jobs if x.job in a.protected and not x.protected})) == []


# -- JSON and refusals -------------------------------------------------------------------------------------------
def test_json_round_trip_both_forms() -> None:
    problem = _main({"t": {A100: 8, "*": 12}, "u": 4, "w": {"*": 3}, "z": {}})
    data = json.loads(json.dumps(problem.to_dict()))
    assert data["quotas"] == {"t": {"*": 12, A100: 8}, "u": 4, "w": 3, "z": 0}
    assert RoundProblem.from_dict(data) == problem
    assert problem.quota_of("t") == 12 and problem.quota_of("t", A100) == 8 and problem.quota_of("t", V100) == 12
    assert problem.quota_of("u", V100) == 4 and problem.quota_of("nobody", A100) == 0
    data["quotas"] = {"t": {A100: 8.0, "*": 12e0}, "u": 4.0}
    assert RoundProblem.from_dict(data).quotas == (("t", (("*", 12), (A100, 8))), ("u", 4))


def test_the_schema_accepts_both_forms() -> None:
    from schema_check import structural_errors
    data = _main({"t": {A100: 8, "*": 12}, "u": 4}).to_dict()
    assert structural_errors("round", data) == []
    try:
        import jsonschema
    except ImportError:  # pragma: no cover
        return
    from optsched.schemas import load_schema
    validator = jsonschema.Draft202012Validator(load_schema("round"))
    assert validator.is_valid(data)
    for bad in ({"t": {A100: -1}}, {"t": {A100: 1.5}}, {"t": "4"}, {"t": -2}, {"t": [[A100, 4]]}):
        data["quotas"] = bad
        assert not validator.is_valid(data) and structural_errors("round", data), bad


@pytest.mark.parametrize("quotas, message", [
    ({"t": {"H100": 4}}, "quota of tenant 't': 'H100' is not a GPU type of the cluster (types: A100-40G, V100-32G) "
                         "nor \"*\""),
    ({"t": {A100: -1}}, "quota of tenant 't' on 'A100-40G': GPUs must be >= 0, got -1"),
    ({"t": {A100: 2.5}}, "quota of tenant 't' on 'A100-40G': GPUs must be an integer, got 2.5"),
    ({"t": {"*": True}}, "quota of tenant 't' on '\\*': GPUs must be an integer, got True"),
    ({"t": "4"}, "quota of tenant 't': GPUs must be an integer, got '4'"),
    ({"t": -1}, "quota of tenant 't': GPUs must be >= 0, got -1"),
    ([1, 2], "quotas must be a JSON object"),
    ({"t": [[A100, 4]]}, "quota of tenant 't': an integer or an object {gpu_type: integer, \"\\*\": integer} is "
                         "expected, got"),
])
def test_bad_quotas_are_refused(quotas: Any, message: str) -> None:
    data = _main({}).to_dict()
    data["quotas"] = quotas
    with pytest.raises(ValidationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        RoundProblem.from_dict(data)

"""A job's hard constraints in Rubick rounds (optsched/rounds/rubick/constraints.py) bind in every
method (exact, Algorithm 1 and its ablations, every baseline): hand-computed rounds per constraint,
random rounds with random constraints checked by an independent check, brute force against exact on
tiny constrained rounds, and refusal where a kind does not bind them."""

from __future__ import annotations

import itertools
import json
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

import optsched
from optsched.core import ExecutionPlan, Job, ValidationError
from optsched.core.catalog import a800_cluster
from optsched.core.decision import Decision
from optsched.core.round import RoundProblem
from optsched.policies.registry import methods_of
from optsched.rounds.rubick.admission import admit
from optsched.rounds.rubick.choice import Choice
from optsched.rounds.rubick.decision import choices_of
from optsched.rounds.rubick.feasibility import violations
from optsched.rounds.rubick.generate import generate_rubick_round
from optsched.rounds.rubick.problem import RubickRound
from optsched.rounds.rubick.table import build_round_table

from helpers import alloc, assert_exact_matches_brute_force, best_assignment, decide, solve_tiny

METHODS = methods_of("rubick")


_decide = decide


def _running(d: Decision) -> dict[str, Any]:
    return {j.job: j.allocation for j in d.jobs if j.allocation is not None}


def _independent_check(problem: RubickRound, d: Decision) -> list[str]:
    """The constraints read off the decision's allocations and the jobs' fields, with no code of the
    package (the rule of each field as the docs state it)."""
    out = []
    for name, a in _running(d).items():
        job = problem.job(name)
        gpus = sum(s.gpus for _, s in a.placement.shares)
        cpus = sum(s.cpus for _, s in a.placement.shares)
        nodes = sum(1 for _, s in a.placement.shares if s.gpus > 0)
        if gpus < job.min_gpus or (job.max_gpus is not None and gpus > job.max_gpus):
            out.append(f"{name}: {gpus} GPUs")
        if job.plan_fixed and a.plan != job.requested_plan:
            out.append(f"{name}: plan {a.plan.label}")
        if job.max_nodes is not None and nodes > job.max_nodes:
            out.append(f"{name}: {nodes} nodes")
        if job.min_cpus_per_gpu is not None and cpus < job.min_cpus_per_gpu * gpus:
            out.append(f"{name}: {cpus} CPUs for {gpus} GPUs")
    return out


# -- hand-computed rounds, one per constraint ----------------------------------------------------
def _alone(job: Job, nodes: int = 2, gpus_per_node: int = 8) -> RubickRound:
    return RubickRound(a800_cluster(nodes, gpus_per_node), (job,))


@pytest.mark.parametrize("method", METHODS)
def test_a_fixed_gang_gets_exactly_its_gpus(method: str) -> None:
    # alone on 16 free GPUs, Algorithm 1 grows gpt2 past 4 GPUs; min = max = 4 fixes the gang
    free = _running(_decide(_alone(Job("g", "gpt2", 4, 1000)), "rubick"))
    assert sum(s.gpus for _, s in free["g"].placement.shares) > 4
    got = _running(_decide(_alone(Job("g", "gpt2", 4, 1000, min_gpus=4, max_gpus=4)), method))
    assert sum(s.gpus for _, s in got["g"].placement.shares) == 4


@pytest.mark.parametrize("method", METHODS)
def test_a_fixed_plan_is_the_only_plan(method: str) -> None:
    plan = ExecutionPlan(dp=2, tp=2)
    got = _running(_decide(_alone(Job("p", "bert", 4, 1000, requested_plan=plan, plan_fixed=True)), method))
    assert got["p"].plan == plan


@pytest.mark.parametrize("method", METHODS)
def test_one_node_jobs_wait_rather_than_span_nodes(method: str) -> None:
    # 8 GPUs asked on 4-GPU nodes: every placement spans two nodes, so a one-node job cannot run at all
    problem = RubickRound(a800_cluster(2, 4), (Job("w", "bert", 8, 1000, max_nodes=1, min_gpus=8),
                                                Job("s", "bert", 4, 1000, max_nodes=1)))
    got = _running(_decide(problem, method))
    assert "w" not in got
    assert len(got["s"].placement.shares) == 1


@pytest.mark.parametrize("method", METHODS)
def test_the_cpu_floor_holds(method: str) -> None:
    # two 8-GPU nodes with 32 CPUs each: without a floor the 4-GPU jobs share CPUs thinly
    cluster = replace(a800_cluster(2, 8), nodes=tuple(replace(n, num_cpus=32) for n in a800_cluster(2, 8).nodes))
    jobs = tuple(Job(f"c{i}", "vit", 4, 1000, min_cpus_per_gpu=8) for i in range(4))
    d = _decide(RubickRound(cluster, jobs), method)
    for a in _running(d).values():
        assert sum(s.cpus for _, s in a.placement.shares) >= 8 * a.plan.num_gpus
    assert _independent_check(RubickRound(cluster, jobs), d) == []


# -- random rounds, random constraints -----------------------------------------------------------
def _random_round(seed: int) -> RubickRound:
    rng = np.random.default_rng(seed)
    cluster = a800_cluster(3, 8)
    jobs = []
    for i in range(6):
        g = int(rng.choice([1, 2, 4, 8]))
        kw: dict[str, Any] = {}
        if rng.random() < 0.4:
            kw.update(min_gpus=max(1, g // 2), max_gpus=g * int(rng.choice([1, 2])))
        if rng.random() < 0.3:
            kw["max_nodes"] = int(rng.choice([1, 2]))
        if rng.random() < 0.3:
            kw["min_cpus_per_gpu"] = int(rng.choice([4, 8, 12]))
        if rng.random() < 0.2 and g in (2, 4):
            kw.update(requested_plan=ExecutionPlan(dp=g), plan_fixed=True)
        jobs.append(Job(f"j{i}", str(rng.choice(["vit", "bert", "roberta", "gpt2"])), g, 1000,
                        guaranteed=bool(rng.random() < 0.3), **kw))
    running = []
    j0 = jobs[0]
    if rng.random() < 0.6 and j0.max_nodes in (None, 1, 2):
        g = max(j0.min_gpus, min(j0.requested_gpus, j0.max_gpus or 8))
        cpus = max(g * (j0.min_cpus_per_gpu or 4), g)
        plan = j0.requested_plan if j0.plan_fixed else ExecutionPlan(dp=g)
        running.append(alloc(j0.name, plan, {"n000": (g, cpus, 20.0 * g)}))
    return RubickRound(cluster, tuple(jobs), tuple(running), reconfig_penalty=0.1, preempt_penalty=0.3)


@pytest.mark.parametrize("seed", range(8))
def test_every_method_keeps_random_constraints(seed: int) -> None:
    problem = _random_round(seed)
    for method in METHODS:
        d = _decide(problem, method)
        assert _independent_check(problem, d) == [], method
        table = build_round_table(problem)
        if method in ("exact", "heuristic"):
            assert violations(problem, table, choices_of(d, table, problem), admit(problem, table)) == [] or \
                "deferred" in d.message


# -- brute force -----------------------------------------------------------------------------------
def _loose(problem: RubickRound) -> RubickRound:
    free = tuple(replace(j, min_gpus=1, max_gpus=None, plan_fixed=False, max_nodes=None, min_cpus_per_gpu=None)
                 for j in problem.jobs)
    return replace(problem, jobs=free)


def _keeps(job: Job, plan: ExecutionPlan, shape: tuple[int, ...], cpus: int) -> bool:
    """The constraints as the docs state them, written here again (independent of the package's)."""
    gpus = sum(shape)
    return not (gpus < job.min_gpus or (job.max_gpus is not None and gpus > job.max_gpus)
                or (job.plan_fixed and plan != job.requested_plan)
                or (job.max_nodes is not None and len(shape) > job.max_nodes)
                or (job.min_cpus_per_gpu is not None and cpus < job.min_cpus_per_gpu * gpus))


def _brute_force(problem: RubickRound, table: Any) -> float:
    """The best objective over every assignment of the table's rows that keeps the constraints
    (:func:`_keeps`) and every rule of :func:`violations`."""
    adm = admit(problem, table)
    nodes = [n.name for n in problem.cluster.nodes]
    options = []
    for name in table.jobs:
        job = problem.job(name)
        opts: list = [None]
        for k in table.configs_of(name):
            k = int(k)
            shape = table.gpus_per_node[k]
            if not _keeps(job, table.plans[k], shape, int(table.cpus[k])):
                continue
            for perm in itertools.permutations(nodes, len(shape)):
                opts.append(Choice(k, tuple(sorted(zip(perm, shape)))))
        options.append(sorted(set(opts), key=repr))
    return best_assignment(problem, table, options, adm)


def _tiny(seed: int) -> RubickRound:
    rng = np.random.default_rng(100 + seed)
    jobs = [Job("a", str(rng.choice(["vit", "bert"])), 2, 100, min_gpus=2, max_gpus=2, max_nodes=1),
            Job("b", str(rng.choice(["roberta", "gpt2"])), int(rng.choice([1, 2])), 100, min_cpus_per_gpu=12),
            Job("c", "bert", 4, 100, max_nodes=int(rng.choice([1, 2])), max_gpus=4)]
    return RubickRound(a800_cluster(2, 4), tuple(jobs), reconfig_penalty=0.1, preempt_penalty=0.3)


@pytest.mark.parametrize("seed", range(4))
def test_exact_equals_brute_force_on_tiny_constrained_rounds(seed: int) -> None:
    assert_exact_matches_brute_force(_tiny(seed), _brute_force)


@pytest.mark.parametrize("seed", range(8))
def test_the_table_keeps_every_admissible_row_or_one_that_dominates_it(seed: int) -> None:
    """Constraints filter before dominance: every row of the unconstrained table that keeps a job's
    constraints is in the constrained table, or a row there of the same job and GPU type needs no more
    GPUs, CPUs or memory and is at least as fast."""
    problem = _random_round(seed)
    tight, loose = build_round_table(problem), build_round_table(_loose(problem))
    for name in problem.jobs:
        job = problem.job(name.name)
        kept = [int(k) for k in tight.configs_of(job.name)]
        for k in tight.configs_of(job.name):
            assert _keeps(job, tight.plans[k], tight.gpus_per_node[k], int(tight.cpus[k]))
        for k in loose.configs_of(job.name):
            if not _keeps(job, loose.plans[k], loose.gpus_per_node[k], int(loose.cpus[k])):
                continue
            assert any(tight.gpu_type[r] == loose.gpu_type[k] and tight.gpus[r] <= loose.gpus[k]
                       and tight.cpus[r] <= loose.cpus[k] and tight.mem_gib[r] <= loose.mem_gib[k] + 1e-9
                       and tight.throughput[r] >= loose.throughput[k] - 1e-9 for r in kept), (job.name, k)


# -- validation ----------------------------------------------------------------------------------
def test_a_running_job_breaking_its_own_constraint_is_refused_naming_it() -> None:
    job = Job("r", "bert", 4, 100, max_nodes=1)
    spread = alloc("r", ExecutionPlan(dp=4), {"n000": (2, 8, 20.0), "n001": (2, 8, 20.0)})
    with pytest.raises(ValidationError, match="running job 'r' breaks its own constraints: 2 nodes, more than "
                                              "max_nodes 1"):
        RubickRound(a800_cluster(2, 8), (job,), (spread,))


@pytest.mark.parametrize("kw, message", [
    ({"requested_gpus": 8, "max_gpus": 4}, "requests 8 GPUs, outside its range"),
    ({"requested_gpus": 2, "min_gpus": 4}, "requests 2 GPUs, outside its range"),
    ({"requested_cpus": 8, "min_cpus_per_gpu": 8}, "requests 8 CPUs for 4 GPUs, below its min_cpus_per_gpu 8"),
])
def test_a_request_outside_its_own_constraints_is_refused(kw: dict[str, Any], message: str) -> None:
    base = {"requested_gpus": 4}
    base.update(kw)
    with pytest.raises(ValidationError, match=message):
        RubickRound(a800_cluster(1, 8), (Job("x", "bert", total_iterations=100, **base),))


def test_plan_fixed_needs_a_plan_and_fields_round_trip_through_json() -> None:
    with pytest.raises(ValidationError, match="plan_fixed needs a requested_plan"):
        Job("x", "bert", 4, 100, plan_fixed=True)
    job = Job("x", "bert", 4, 100, requested_plan=ExecutionPlan(dp=4), plan_fixed=True, max_nodes=1,
              min_cpus_per_gpu=6, min_gpus=4, max_gpus=4)
    problem = RubickRound(a800_cluster(1, 8), (job,))
    assert RoundProblem.from_dict(problem.to_dict()) == problem
    assert {"plan_fixed", "max_nodes", "min_cpus_per_gpu"} <= set(problem.to_dict()["jobs"][0])
    assert "plan_fixed" not in RubickRound(a800_cluster(1, 8), (Job("y", "bert", 4, 100),)).to_dict()["jobs"][0]


@pytest.mark.parametrize("kind", ["crius", "lyra-allocate", "placement", "lyra-reclaim", "lyra"])
def test_kinds_that_do_not_bind_the_constraints_refuse_them(kind: str) -> None:
    data = optsched.core.kinds.round_kind(kind).generate(seed=0).to_dict()
    if not data.get("jobs"):
        pytest.skip(f"the generated {kind} round has no jobs")
    data["jobs"][0]["max_nodes"] = 1
    with pytest.raises(ValidationError, match=f"sets max_nodes, which {kind} rounds do not support"):
        RoundProblem.from_dict(data)


@pytest.mark.parametrize("kind, field, value", [
    ("crius", "min_gpus", 2), ("crius", "max_gpus", 8), ("crius", "requested_cpus", 16), ("crius", "fungible", True),
    ("crius", "priority", 3), ("crius", "weight", 2.0), ("crius", "topology", {"level": "rack"}),
    ("lyra-allocate", "restart_seconds", 60.0), ("lyra", "checkpoint_age_s", 30.0),
    ("lyra-allocate", "guaranteed", True), ("lyra-allocate", "deadline", 3600.0), ("placement", "requested_cpus", 8),
    ("lyra", "requested_mem_gib", 64.0)])
def test_crius_and_lyra_rounds_refuse_job_fields_no_method_of_theirs_reads(kind: str, field: str, value: Any) -> None:
    data = optsched.core.kinds.round_kind(kind).generate(seed=0).to_dict()
    job = next(j for j in data["jobs"] if j.get(field) in (None, 0, 0.0, False, 1))
    job[field] = value
    if field == "min_gpus":
        job["requested_gpus"] = max(job["requested_gpus"], value)
    with pytest.raises(ValidationError, match=f"sets {field}, which {kind} rounds do not support"):
        RoundProblem.from_dict(data)


def test_new_fields_round_trip_and_are_checked() -> None:
    job = Job("x", "bert", 4, 100, topology=optsched.core.job.TopologyRule("rack", "preferred"), priority=-2,
              weight=2.5, restart_seconds=78.0, checkpoint_age_s=120.0)
    assert Job.from_dict(job.to_dict()) == job
    assert {"topology", "priority", "weight", "restart_seconds", "checkpoint_age_s"} <= set(job.to_dict())
    assert not {"topology", "priority", "weight", "restart_seconds"} & set(Job("y", "bert", 4, 100).to_dict())
    for kw, message in (({"weight": 0}, "weight must be > 0"),
                        ({"restart_seconds": -1}, "restart_seconds must be >= 0"),
                        ({"priority": 1.5}, "priority must be an integer"),
                        ({"topology": {"level": "rack", "mode": "soft"}}, "topology mode must be one of"),
                        ({"topology": {"mode": "required"}}, "missing field.s. level")):
        with pytest.raises(ValidationError, match=message):
            Job.from_dict({**Job("y", "bert", 4, 100).to_dict(), **kw})
    node = replace(a800_cluster(1, 8).nodes[0], topology={"rack": "r1"})
    assert node.domain("rack") == "r1" and node.domain("row") is None
    assert type(node).from_dict(node.to_dict()) == node
    a = alloc("x", ExecutionPlan(dp=4), {"n0": (4,)})
    assert optsched.core.Allocation.from_dict({**a.to_dict(), "since": 300}) == replace(a, since=300)
    with pytest.raises(ValidationError, match="since must be >= 0"):
        replace(a, since=-1.0)


def test_crius_rounds_refuse_an_allocation_since() -> None:
    data = optsched.core.kinds.round_kind("crius").generate(seed=0).to_dict()
    assert data["running"]
    data["running"][0]["since"] = 0.0
    with pytest.raises(ValidationError, match="sets since, which crius rounds do not support"):
        RoundProblem.from_dict(data)


def test_rubick_rounds_refuse_fields_they_do_not_bind() -> None:
    data = RubickRound(a800_cluster(1, 8), (Job("y", "bert", 4, 100),)).to_dict()
    # deadlines and priorities bind since issue 24 (tests/rounds/test_rubick_deadlines.py, test_priorities.py)
    data["jobs"][0]["gpus_per_worker"] = 2
    with pytest.raises(ValidationError, match="sets gpus_per_worker, which rubick rounds do not support"):
        RoundProblem.from_dict(data)


# -- node labels, selectors and states ------------------------------------------------------------
def _labelled(states: dict[int, str] | None = None, nodes: int = 4, gpus: int = 8) -> Any:
    """``nodes`` A800 nodes, even ones in rack r0 and odd ones in r1, with the given states."""
    base = a800_cluster(nodes, gpus)
    states = states or {}
    return replace(base, nodes=tuple(replace(n, labels={"rack": f"r{i % 2}"}, state=states.get(i, "ready"))
                                     for i, n in enumerate(base.nodes)))


def _node_check(problem: RubickRound, d: Decision) -> list[str]:
    """Selectors and cordons read off the decision, with no code of the package."""
    out = []
    for name, a in _running(d).items():
        job, cur = problem.job(name), problem.current(name)
        held = {} if cur is None else {n: s.gpus for n, s in cur.placement.shares}
        for n, s in a.placement.shares:
            node = problem.cluster.node(n)
            if any(dict(node.labels).get(k) != v for k, v in job.node_selector):
                out.append(f"{name} on {n}")
            if node.state == "cordoned" and s.gpus > held.get(n, 0):
                out.append(f"{name}: {s.gpus} GPUs on cordoned {n}")
            if node.state == "draining" and s.gpus > 0:
                out.append(f"{name}: on draining {n}")
    return out


@pytest.mark.parametrize("method", METHODS)
def test_a_selector_keeps_a_job_on_its_nodes(method: str) -> None:
    jobs = (Job("sel", "bert", 8, 1000, node_selector={"rack": "r1"}), Job("any", "bert", 4, 1000))
    problem = RubickRound(_labelled(), jobs)
    d = _decide(problem, method)
    got = _running(d)
    assert "sel" in got and {n for n, _ in got["sel"].placement.shares} <= {"n001", "n003"}
    assert _node_check(problem, d) == []


@pytest.mark.parametrize("method", METHODS)
def test_a_selector_nothing_matches_makes_the_job_wait(method: str) -> None:
    problem = RubickRound(_labelled(), (Job("gpu-x", "bert", 4, 1000, node_selector={"rack": "r9"}),))
    assert "gpu-x" not in _running(_decide(problem, method))


@pytest.mark.parametrize("method", METHODS)
def test_a_cordoned_node_takes_no_new_work_and_keeps_what_runs(method: str) -> None:
    # n000 cordoned, with job "old" on 4 of its GPUs; three ready nodes; new jobs must avoid n000
    cluster = _labelled({0: "cordoned"})
    jobs = (Job("old", "bert", 4, 1000), *(Job(f"new{i}", "bert", 8, 1000) for i in range(4)))
    running = (alloc("old", ExecutionPlan(dp=4), {"n000": (4, 32, 40.0)}),)
    problem = RubickRound(cluster, jobs, running)
    d = _decide(problem, method)
    got = _running(d)
    assert not any(n == "n000" for name, a in got.items() if name != "old" for n, _ in a.placement.shares)
    assert _node_check(problem, d) == []
    # the new jobs share the three ready nodes' 24 GPUs; "old" may stay, trim or shrink on n000
    assert sum(s.gpus for name, a in got.items() if name.startswith("new") for _, s in a.placement.shares) <= 24


@pytest.mark.parametrize("seed", range(10))
def test_every_method_keeps_random_selectors_cordons_and_drains(seed: int) -> None:
    rng = np.random.default_rng(seed)
    base = _random_round(seed)
    states = {i: str(rng.choice(["cordoned", "draining"])) for i in range(3) if rng.random() < 0.3}
    if seed % 3 == 0:
        states[0] = "draining"  # where the random round's running job runs, when it has one
    cluster = _labelled(states, nodes=3)
    jobs = tuple(replace(j, node_selector={"rack": f"r{int(rng.integers(2))}"})
                 if rng.random() < 0.4 and base.current(j.name) is None else j for j in base.jobs)
    problem = replace(base, cluster=cluster, jobs=jobs)
    for method in METHODS:
        d = _decide(problem, method)
        assert _node_check(problem, d) == [] and _independent_check(problem, d) == [], method


def test_node_rules_are_validated_and_refused_where_not_bound() -> None:
    job = Job("r", "bert", 4, 100, node_selector={"rack": "r0"})
    on_r1 = alloc("r", ExecutionPlan(dp=4), {"n001": (4, 32, 40.0)})
    with pytest.raises(ValidationError, match="running job 'r' breaks its own constraints: node 'n001' does not "
                                              "match its node_selector rack=r0"):
        RubickRound(_labelled(), (job,), (on_r1,))
    with pytest.raises(Exception, match="state"):
        replace(a800_cluster(1, 8).nodes[0], state="maintenance")
    data = optsched.core.kinds.round_kind("crius").generate(seed=0).to_dict()
    data["cluster"]["nodes"][0]["state"] = "cordoned"
    with pytest.raises(ValidationError, match="sets state, which crius rounds do not support"):
        RoundProblem.from_dict(data)
    problem = RubickRound(_labelled({2: "cordoned"}), (job,))
    assert RoundProblem.from_dict(problem.to_dict()) == problem


@pytest.mark.parametrize("seed", range(10))
def test_both_encodings_of_the_exact_model_keep_node_rules(seed: int) -> None:
    """The aggregated encoding splits its node classes by state (a cordoned node is a class of its own)
    and gives selecting jobs sub-classes by label, so its answer keeps the rules and its bound still
    bounds the per-node optimum."""
    from optsched.formulations import rubick_round
    rng = np.random.default_rng(seed)
    base = _random_round(seed)
    cluster = _labelled({0: "cordoned"} if rng.random() < 0.5 else {}, nodes=3)
    jobs = tuple(replace(j, node_selector={"rack": "r1"}) if i % 2 and base.current(j.name) is None else j
                 for i, j in enumerate(base.jobs))
    problem = replace(base, cluster=cluster, jobs=jobs)
    table = build_round_table(problem)
    adm = admit(problem, table)
    per_node = rubick_round.solve(problem, table, time_limit=20, encoding="per-node", admission=adm)
    agg = rubick_round.solve(problem, table, time_limit=20, encoding="aggregated", admission=adm)
    if per_node.status == "infeasible":  # the guarantees cannot all be kept on the selected nodes
        assert "choices" not in agg.payload or violations(problem, table, agg.payload["choices"], adm) == []
        return
    assert violations(problem, table, per_node.payload["choices"], adm) == []
    if "choices" in agg.payload:  # the relaxation's answer may not map onto nodes (status unknown)
        assert violations(problem, table, agg.payload["choices"], adm) == []
    assert agg.bound is None or agg.bound >= per_node.objective - 1e-5


MOVERS = ("exact", "rubick-exact", "heuristic", "rubick", "rubick-e", "rubick-r", "rubick-n")


@pytest.mark.parametrize("method", METHODS)
def test_jobs_leave_a_draining_node(method: str) -> None:
    """n000 drains with jobs "d" and "g" (guaranteed) on it; n001 and n002 are ready and empty. Every
    method leaves n000 empty; Algorithm 1 and exact move both jobs (a reconfiguration each), the
    baselines, which never move a running job, preempt them."""
    cluster = _labelled({0: "draining"}, nodes=3)
    jobs = (Job("d", "bert", 4, 1000), Job("g", "vit", 2, 1000, guaranteed=True))
    running = (alloc("d", ExecutionPlan(dp=4), {"n000": (4, 32, 40.0)}),
               alloc("g", ExecutionPlan(dp=2), {"n000": (2, 16, 20.0)}))
    problem = RubickRound(cluster, jobs, running, reconfig_penalty=0.05, preempt_penalty=0.25)
    d = _decide(problem, method)
    got = _running(d)
    assert all(n != "n000" for a in got.values() for n, _ in a.placement.shares)
    actions = {j.job: j.action for j in d.jobs}
    if method in MOVERS:
        assert actions == {"d": "reconfigure", "g": "reconfigure"}
    else:
        assert set(actions.values()) <= {"reconfigure", "preempt"}
    if method in ("exact", "rubick-exact", "heuristic", "rubick"):  # decisions on the full table
        table = build_round_table(problem)
        assert violations(problem, table, choices_of(d, table, problem), admit(problem, table)) == []


def test_a_job_kept_on_a_draining_node_is_a_violation() -> None:
    cluster = _labelled({0: "draining"}, nodes=2)
    problem = RubickRound(cluster, (Job("d", "bert", 4, 1000),), (alloc("d", ExecutionPlan(dp=4), {"n000": (4, 32, 40.0)}),))
    table = build_round_table(problem)
    cur = int(table.current_row[0])
    assert any("draining node 'n000'" in v for v in violations(problem, table, {"d": Choice(cur, (("n000", 4),))}))


@pytest.mark.parametrize("seed", range(4))
def test_exact_equals_brute_force_with_a_draining_node(seed: int) -> None:
    rng = np.random.default_rng(300 + seed)
    cluster = replace(_labelled({0: "draining"}, nodes=2, gpus=4))
    jobs = (Job("r", str(rng.choice(["vit", "bert"])), 2, 100), Job("q", "bert", int(rng.choice([1, 2])), 100))
    running = (alloc("r", ExecutionPlan(dp=2), {"n000": (2, 8, 20.0)}),)
    problem = RubickRound(cluster, jobs, running, reconfig_penalty=0.1, preempt_penalty=0.3)
    table, sol = solve_tiny(problem)
    assert sol.status == "optimal"
    assert sol.objective == pytest.approx(_brute_force(problem, table), abs=1e-5)
    assert "r" not in sol.payload["choices"] or all(n != "n000" for n, _ in sol.payload["choices"]["r"].parts)


@pytest.mark.parametrize("method", METHODS)
def test_a_request_that_runs_on_one_gpu_type_only_goes_there(method: str) -> None:
    """On A100-40G and V100-32G nodes, roberta's 2-GPU DP plan needs about 35 GiB a GPU: it runs on the
    A100s only. The job is placed there by every method instead of failing the round; a plan no type
    runs is still an error naming the job."""
    from optsched.core import Cluster, Node
    from optsched.core.catalog import GPU_TYPES
    nodes = (Node("a0", "A100-40G", 8, 96, 1024.0), Node("v0", "V100-32G", 8, 96, 768.0))
    cluster = Cluster("mixed", nodes, (GPU_TYPES["A100-40G"], GPU_TYPES["V100-32G"]), 300.0, 25.0, 32.0)
    plan = ExecutionPlan(dp=2)
    job = Job("r", "roberta", 2, 1000, requested_plan=plan, plan_fixed=True)
    got = _running(_decide(RubickRound(cluster, (job,)), method))
    assert {n for n, _ in got["r"].placement.shares} == {"a0"} and got["r"].plan == plan
    too_big = Job("b", "roberta", 1, 1000, requested_plan=ExecutionPlan(dp=1), plan_fixed=True)
    v100_only = replace(cluster, nodes=(nodes[1],), gpu_types=(GPU_TYPES["V100-32G"],))
    with pytest.raises(Exception, match="job 'b'"):
        _decide(RubickRound(v100_only, (too_big,)), method)


def test_a_reconfiguration_dearer_than_a_preemption_is_warned_about(capsys: pytest.CaptureFixture[str],
                                                                    tmp_path: Any) -> None:
    problem = RubickRound(a800_cluster(1, 8), (Job("x", "bert", 4, 100),), reconfig_penalty=0.5, preempt_penalty=0.2)
    d = optsched.solve(problem, "heuristic")
    assert "warning: reconfig_penalty 0.5 exceeds preempt_penalty 0.2" in d.message
    assert "warning" not in optsched.solve(replace(problem, reconfig_penalty=0.1), "heuristic").message
    from optsched.cli import main
    path = tmp_path / "r.json"
    path.write_text(json.dumps(problem.to_dict()))
    assert main(["solve", str(path), "--method", "fifo"]) == 0
    assert "warning: reconfig_penalty 0.5 exceeds preempt_penalty 0.2" in capsys.readouterr().err


@pytest.mark.parametrize("method", ["exact", "heuristic"])
def test_a_partitioned_solve_keeps_every_constraint(method: str) -> None:
    """``--partitions 2`` on a round with selectors, gangs, one-node jobs, a cordoned and a draining node:
    the joined decision keeps every rule, read off it by the checks above."""
    base = generate_rubick_round(8, 8, 30, 3, constrained=0.5)
    nodes = tuple(replace(n, state={0: "cordoned", 5: "draining"}.get(i, "ready"))
                  for i, n in enumerate(base.cluster.nodes))
    problem = replace(base, cluster=replace(base.cluster, nodes=nodes))
    d = optsched.solve(problem, method, time_limit=20, seed=0, partitions=2, defer_unreachable_guarantees=True)
    assert _independent_check(problem, d) == [] and _node_check(problem, d) == []

"""Job topology rules and node topology in Rubick rounds (optsched/rounds/rubick/constraints.py, module
docstring "topology"; issue "A round a real cluster scheduler can state", items 2 and 4): a required
rule puts every GPU of a job in one domain of its level in every method (exact, Algorithm 1 and its
ablations, every baseline), a preferred one costs ``topology_penalty x weight`` per extra domain in the
objective every method is scored by. Hand-computed rounds per method, random rounds checked by an
independent check, brute force against exact on tiny rounds, both encodings of the exact model, the
partitioned solve, JSON and the schema."""

from __future__ import annotations

import itertools
import json
from dataclasses import replace
from typing import Any, Iterable

import numpy as np
import pytest

import optsched
from optsched.core import ExecutionPlan, Job, NodeShare, ValidationError
from optsched.core.catalog import a800_cluster
from optsched.core.decision import Decision
from optsched.core.hardware import Cluster
from optsched.core.job import TopologyRule
from optsched.core.round import RoundProblem
from optsched.policies.registry import methods_of
from optsched.rounds.rubick.admission import admit
from optsched.rounds.rubick.choice import Choice
from optsched.rounds.rubick.decision import choices_of
from optsched.rounds.rubick.feasibility import violations
from optsched.rounds.rubick.generate import generate_rubick_round
from optsched.rounds.rubick.objective import objective
from optsched.rounds.rubick.problem import DEFAULT_TOPOLOGY_PENALTY, RubickRound
from optsched.rounds.rubick.table import build_round_table

from helpers import REPO_ROOT, alloc, assert_exact_matches_brute_force
from schema_check import structural_errors

METHODS = methods_of("rubick")
#: Algorithm 1 (any table) and exact: the methods that may defer a guarantee
DEFERRING = ("exact", "rubick-exact", "heuristic", "rubick", "rubick-e", "rubick-r", "rubick-n")
REQUIRED, PREFERRED = TopologyRule("rack", "required"), TopologyRule("rack", "preferred")


def _decide(problem: RubickRound, method: str) -> Decision:
    return optsched.solve(problem, method, time_limit=10, seed=0,
                          **({"defer_unreachable_guarantees": True} if method in DEFERRING else {}))


def _running(d: Decision) -> dict[str, Any]:
    return {j.job: j.allocation for j in d.jobs if j.allocation is not None}


def _racked(racks: Iterable[str | None], gpus: int = 4) -> Cluster:
    """A800 nodes ``n000``, ``n001``, ... of ``gpus`` GPUs, node i in rack ``racks[i]`` (None: its
    topology has no rack)."""
    racks = list(racks)
    base = a800_cluster(len(racks), gpus)
    return replace(base, nodes=tuple(replace(n, topology={} if r is None else {"rack": r})
                                     for n, r in zip(base.nodes, racks)))


def _rack_of(problem: RubickRound, node: str) -> str | None:
    return dict(problem.cluster.node(node).topology).get("rack")


def _nodes_of(allocation: Any) -> list[str]:
    return [n for n, s in allocation.placement.shares if s.gpus > 0]


def _domains(problem: RubickRound, nodes: list[str]) -> int:
    """Racks spanned by ``nodes``, a node without a rack a rack of its own (the docs' rule, written here)."""
    racks = [_rack_of(problem, n) for n in nodes]
    return len({r for r in racks if r is not None}) + sum(r is None for r in racks)


def _topology_check(problem: RubickRound, d: Decision) -> list[str]:
    """Required rules, node capacities, selectors and node states read off the decision, with no code of
    the package."""
    out = []
    used: dict[str, int] = {}
    for name, a in _running(d).items():
        job, cur = problem.job(name), problem.current(name)
        held = {} if cur is None else {n: s.gpus for n, s in cur.placement.shares}
        nodes = _nodes_of(a)
        for n, s in a.placement.shares:
            used[n] = used.get(n, 0) + s.gpus
            node = problem.cluster.node(n)
            if any(dict(node.labels).get(k) != v for k, v in job.node_selector):
                out.append(f"{name} on {n} against its selector")
            if s.gpus > 0 and (node.state == "draining" or node.state == "cordoned" and s.gpus > held.get(n, 0)):
                out.append(f"{name}: {s.gpus} GPUs on {node.state} {n}")
        if job.topology is not None and job.topology.mode == "required":
            racks = {_rack_of(problem, n) for n in nodes}
            if None in racks or len(racks) != 1:
                out.append(f"{name}: racks {sorted(map(str, racks))}")
    occupied = dict(problem.occupied)
    for n in problem.cluster.nodes:
        if used.get(n.name, 0) > n.num_gpus - occupied.get(n.name, NodeShare(0)).gpus:
            out.append(f"{n.name}: {used[n.name]} GPUs")
    return out


def _independent_objective(problem: RubickRound, d: Decision) -> float:
    """The decision's objective from its per-job numbers and the docs' rule for the topology cost."""
    pen = {"reconfigure": problem.reconfig_penalty, "trim": problem.trim_penalty, "preempt": problem.preempt_penalty}
    total = sum(x.normalised - pen.get(x.action, 0.0) for x in d.jobs)
    for name, a in _running(d).items():
        job = problem.job(name)
        if job.topology is not None and job.topology.mode == "preferred":
            total -= problem.topology_penalty * job.weight * (_domains(problem, _nodes_of(a)) - 1)
    return total


# -- hand-computed rounds ---------------------------------------------------------------------------
@pytest.mark.parametrize("method", METHODS)
def test_a_required_rack_job_goes_to_the_one_rack_that_can_hold_it(method: str) -> None:
    """Racks r0 = n000, n001 and r1 = n002, n003 of 4 GPUs; outside work holds 3 GPUs of n000. An 8-GPU
    gang requiring one rack fits r1 only (r0 has 5 free GPUs), though the cluster has 13."""
    occupied = {"n000": NodeShare(3, 8, 32.0)}
    gang = Job("g", "bert", 8, 1000, min_gpus=8, max_gpus=8, topology=REQUIRED)
    problem = RubickRound(_racked(["r0", "r0", "r1", "r1"]), (gang,), occupied=occupied)
    d = _decide(problem, method)
    got = _running(d)
    assert sorted(_nodes_of(got["g"])) == ["n002", "n003"]
    assert _topology_check(problem, d) == []


@pytest.mark.parametrize("method", METHODS)
def test_a_required_rack_job_waits_when_no_rack_can_hold_it(method: str) -> None:
    """Outside work holds 2 GPUs on n000 and on n002: each rack has 6 free GPUs, the cluster 12. The
    8-GPU gang requiring one rack waits; without the rule it runs (across the racks); a 4-GPU job with
    the rule still runs, in one rack (submitted first, so strict FIFO does not stop at the gang). A node
    without a rack is in no rack: the gang never runs there."""
    occupied = {"n000": NodeShare(2, 8, 32.0), "n002": NodeShare(2, 8, 32.0)}
    gang = Job("g", "bert", 8, 1000, min_gpus=8, max_gpus=8, topology=REQUIRED, submit_time=10.0)
    cluster = _racked(["r0", "r0", "r1", "r1"])
    problem = RubickRound(cluster, (gang,), occupied=occupied)
    d = _decide(problem, method)
    assert "g" not in _running(d)
    assert d.job("g").reason.startswith("no room: its topology rule requires one rack domain, and none has 8 GPUs")
    assert "g" in _running(_decide(replace(problem, jobs=(replace(gang, topology=None),)), method))
    small = Job("s", "bert", 4, 1000, min_gpus=4, max_gpus=4, topology=REQUIRED)
    both = replace(problem, jobs=(gang, small))
    d = _decide(both, method)
    assert set(_running(d)) == {"s"} and _topology_check(both, d) == []
    # n000 without a rack holds 4 free GPUs, r0 = n001 only 4: the gang fits nowhere in one rack
    no_rack = RubickRound(_racked([None, "r0"]), (gang,))
    assert "g" not in _running(_decide(no_rack, method))


@pytest.mark.parametrize("method", METHODS)
def test_a_preferred_rack_job_runs_in_one_rack_when_it_can(method: str) -> None:
    """Racks interleave (r0 = n000, n002; r1 = n001, n003), so the plain best fit (fewest free GPUs,
    then node order) puts an 8-GPU gang on n000 and n001, two racks; preferring a rack, every method
    puts it in one rack, and the objective charges nothing."""
    cluster = _racked(["r0", "r1", "r0", "r1"])
    gang = Job("g", "bert", 8, 1000, min_gpus=8, max_gpus=8, topology=PREFERRED)
    problem = RubickRound(cluster, (gang,), topology_penalty=0.1)
    d = _decide(problem, method)
    nodes = _nodes_of(_running(d)["g"])
    assert len({_rack_of(problem, n) for n in nodes}) == 1, nodes
    assert d.objective == pytest.approx(_independent_objective(problem, d), abs=1e-9)
    assert d.job("g").penalty == 0.0


def test_the_plain_best_fit_would_span_both_racks() -> None:
    """What makes the preferred round above a test: without the rule Algorithm 1 spans both racks."""
    cluster = _racked(["r0", "r1", "r0", "r1"])
    gang = Job("g", "bert", 8, 1000, min_gpus=8, max_gpus=8)
    got = _running(_decide(RubickRound(cluster, (gang,)), "rubick"))
    assert sorted(_nodes_of(got["g"])) == ["n000", "n001"]


@pytest.mark.parametrize("method", METHODS)
def test_a_preferred_rule_pays_for_each_extra_rack_it_cannot_avoid(method: str) -> None:
    """Four 2-GPU nodes, one per rack, the last without a rack: an 8-GPU gang spans all four, three
    racks beyond the first, each costing topology_penalty x weight (weight 1)."""
    cluster = _racked(["r0", "r1", "r2", None], gpus=2)
    gang = Job("g", "vit", 8, 1000, min_gpus=8, max_gpus=8, topology=PREFERRED)
    problem = RubickRound(cluster, (gang,), topology_penalty=0.05)
    d = _decide(problem, method)
    assert "g" in _running(d)
    assert d.job("g").penalty == pytest.approx(0.15)
    assert d.objective == pytest.approx(d.job("g").normalised - 0.15)
    assert d.objective == pytest.approx(_independent_objective(problem, d))


def test_a_running_job_breaking_its_required_rule_is_refused_naming_it() -> None:
    cluster = _racked(["r0", "r0", "r1", None])
    job = Job("r", "bert", 4, 100, topology=REQUIRED)
    spread = alloc("r", ExecutionPlan(dp=4), {"n001": (2, 8, 20.0), "n002": (2, 8, 20.0)})
    with pytest.raises(ValidationError, match="running job 'r' breaks its own constraints: its GPUs span 2 rack "
                                              r"domains \(r0, r1\), topology rack required in one"):
        RubickRound(cluster, (job,), (spread,))
    no_rack = alloc("r", ExecutionPlan(dp=4), {"n003": (4, 16, 40.0)})
    with pytest.raises(ValidationError, match="running job 'r' breaks its own constraints: node 'n003' has no rack "
                                              "domain"):
        RubickRound(cluster, (job,), (no_rack,))
    # skip mode leaves the job out with that reason instead of failing the round
    data = RubickRound(cluster, (Job("ok", "bert", 2, 100),)).to_dict()
    data["jobs"].append(job.to_dict())
    data["running"] = [spread.to_dict()]
    data["on_invalid_job"] = "skip"
    skipping = RoundProblem.from_dict(data)
    assert [s.job for s in skipping.skipped] == ["r"] and "span 2 rack domains" in skipping.skipped[0].reason
    # a preferred rule is no hard rule: the same placement is accepted, and kept it costs one extra rack
    preferred = RubickRound(cluster, (replace(job, topology=PREFERRED),), (spread,))
    table = build_round_table(preferred)
    kept = Choice(int(table.current_row[0]), (("n001", 2), ("n002", 2)))
    normalised = float(table.throughput[kept.row] / table.reference_throughput[0])
    assert objective(preferred, table, {"r": kept}) == pytest.approx(normalised - DEFAULT_TOPOLOGY_PENALTY, abs=1e-12)


def test_violations_name_a_broken_required_rule() -> None:
    problem = RubickRound(_racked(["r0", "r1", None]), (Job("r", "bert", 4, 100, topology=REQUIRED),))
    table = build_round_table(problem)
    row = next(int(k) for k in table.configs_of("r") if len(table.gpus_per_node[k]) == 2)
    a, b = table.gpus_per_node[row]
    out = violations(problem, table, {"r": Choice(row, (("n000", a), ("n001", b)))})
    assert any("span 2 rack domains" in v for v in out)
    out = violations(problem, table, {"r": Choice(row, (("n000", a), ("n002", b)))})
    assert any("node 'n002' has no rack domain" in v for v in out)


# -- random rounds ------------------------------------------------------------------------------------
def _random_round(seed: int) -> RubickRound:
    """Three racks over six 4-GPU nodes (a node without a rack now and then, a cordoned or draining one
    now and then), jobs with random topology rules, selectors, GPU ranges and node counts, outside work,
    and running jobs whose placements keep their rules."""
    rng = np.random.default_rng(1000 + seed)
    racks = [None if rng.random() < 0.15 else f"r{int(rng.integers(3))}" for _ in range(6)]
    cluster = _racked(racks)
    states = [str(rng.choice(["ready", "cordoned", "draining"], p=[0.8, 0.1, 0.1])) for _ in range(6)]
    cluster = replace(cluster, nodes=tuple(replace(n, labels={"zone": f"z{i % 2}"}, state=states[i])
                                           for i, n in enumerate(cluster.nodes)))
    jobs = []
    for i in range(7):
        g = int(rng.choice([1, 2, 4, 8]))
        kw: dict[str, Any] = {}
        if rng.random() < 0.6:
            kw["topology"] = TopologyRule("rack", str(rng.choice(["required", "preferred"])))
        if rng.random() < 0.2:
            kw["node_selector"] = {"zone": f"z{int(rng.integers(2))}"}
        if rng.random() < 0.3:
            kw.update(min_gpus=g, max_gpus=g)
        if rng.random() < 0.2:
            kw["max_nodes"] = int(rng.choice([1, 2]))
        jobs.append(Job(f"j{i}", str(rng.choice(["vit", "bert", "roberta", "gpt2"])), g, 1000,
                        guaranteed=bool(rng.random() < 0.25), **kw))
    running = []
    for i, job in enumerate(jobs[:2]):  # j0 on n00(2i), j1 on n00(2i) and the next node when they share a rack
        node = f"n00{2 * i}"
        nodes = [node]
        if job.requested_gpus > 4 and racks[2 * i + 1] == racks[2 * i] and racks[2 * i] is not None:
            nodes.append(f"n00{2 * i + 1}")
        if job.topology is not None and job.topology.mode == "required" and racks[2 * i] is None:
            continue
        if job.node_selector and dict(job.node_selector)["zone"] != "z0":
            continue
        if len(nodes) > 1 and job.node_selector:
            continue
        per = min(4, job.requested_gpus) if len(nodes) == 1 else 4
        gpus = per * len(nodes)
        if gpus < job.min_gpus or (job.max_gpus is not None and gpus > job.max_gpus) \
                or (job.max_nodes is not None and len(nodes) > job.max_nodes):
            continue
        running.append(alloc(job.name, ExecutionPlan(dp=gpus), {n: (per, 4 * per, 20.0 * per) for n in nodes}))
    occupied = {"n005": NodeShare(int(rng.integers(0, 4)), 4, 16.0)} if rng.random() < 0.5 else {}
    return RubickRound(cluster, tuple(jobs), tuple(running), occupied=occupied, reconfig_penalty=0.1,
                       preempt_penalty=0.3, topology_penalty=float(rng.choice([0.02, 0.1, 0.4])))


@pytest.mark.parametrize("seed", range(20))
def test_every_method_keeps_random_topology_rules(seed: int) -> None:
    problem = _random_round(seed)
    assert any(j.topology is not None for j in problem.jobs)
    for method in METHODS:
        d = _decide(problem, method)
        assert _topology_check(problem, d) == [], method
        assert d.objective == pytest.approx(_independent_objective(problem, d), abs=1e-9), method
        if method in ("exact", "rubick-exact", "heuristic", "rubick"):  # decisions on the full table
            table = build_round_table(problem)
            assert violations(problem, table, choices_of(d, table, problem), admit(problem, table)) == [] \
                or "deferred" in d.message, method


@pytest.mark.parametrize("seed", range(4))
def test_exact_is_never_worse_than_algorithm1_on_topology_rounds(seed: int) -> None:
    problem = _random_round(seed)
    assert _decide(problem, "exact").objective >= _decide(problem, "heuristic").objective - 1e-9


# -- brute force -----------------------------------------------------------------------------------
#: rack layouts of the tiny rounds' three nodes (None: no rack)
TINY_RACKS = (["r0", "r1", "r0"], ["r0", None, "r0"], ["r0", "r1", "r2"], ["r0", "r0", "r0"], [None, "r0", None])


def _tiny(seed: int) -> RubickRound:
    """Three 2-GPU nodes in one of :data:`TINY_RACKS`; a required, a preferred and a plain job."""
    rng = np.random.default_rng(2000 + seed)
    cluster = _racked(TINY_RACKS[seed % len(TINY_RACKS)], gpus=2)
    jobs = (Job("a", str(rng.choice(["vit", "bert"])), int(rng.choice([2, 4])), 100, max_gpus=4, topology=REQUIRED),
            Job("b", str(rng.choice(["roberta", "gpt2"])), 2, 100, max_gpus=4, topology=PREFERRED),
            Job("c", "bert", 2, 100, max_gpus=2))
    running = (alloc("b", ExecutionPlan(dp=2), {"n000": (1, 4, 20.0), "n001": (1, 4, 20.0)}),) if seed % 3 == 0 else ()
    return RubickRound(cluster, jobs, running, reconfig_penalty=0.1, preempt_penalty=0.3,
                       topology_penalty=float(rng.choice([0.05, 0.3])))


def _brute_force(problem: RubickRound, table: Any) -> float:
    """The best objective over every assignment of the table's rows to nodes that keeps the required
    rule (checked here), every rule of :func:`violations` on the round without topology rules, and is
    scored by the objective without them less the topology cost computed here."""
    loose = replace(problem, jobs=tuple(replace(j, topology=None) for j in problem.jobs))
    adm = admit(loose, table)
    nodes = [n.name for n in problem.cluster.nodes]
    options = []
    for name in table.jobs:
        job = problem.job(name)
        opts: list = [None]
        for k in table.configs_of(name):
            shape = table.gpus_per_node[int(k)]
            for perm in itertools.permutations(nodes, len(shape)):
                racks = {_rack_of(problem, n) for n in perm}
                if job.topology == REQUIRED and (None in racks or len(racks) > 1):
                    continue
                opts.append(Choice(int(k), tuple(sorted(zip(perm, shape)))))
        options.append(sorted(set(opts), key=repr))
    best = -np.inf
    for combo in itertools.product(*options):
        choices = {table.jobs[j]: c for j, c in enumerate(combo) if c is not None}
        if violations(loose, table, choices, adm):
            continue
        value = objective(loose, table, choices)
        for name, c in choices.items():
            if problem.job(name).topology == PREFERRED:
                value -= problem.topology_penalty * (_domains(problem, [n for n, _ in c.parts]) - 1)
        best = max(best, value)
    return float(best)


@pytest.mark.parametrize("seed", range(15))
def test_exact_equals_brute_force_on_tiny_topology_rounds(seed: int) -> None:
    assert_exact_matches_brute_force(_tiny(seed), _brute_force)


@pytest.mark.parametrize("seed", range(8))
def test_both_encodings_of_the_exact_model_keep_topology_rules(seed: int) -> None:
    """The aggregated encoding binds a required rule through its rows and its repair, and charges a
    preferred rule a lower bound of its cost: its answer keeps the rules and its bound still bounds the
    per-node optimum."""
    from optsched.formulations import rubick_round
    problem = _random_round(seed)
    table = build_round_table(problem)
    adm = admit(problem, table)
    per_node = rubick_round.solve(problem, table, time_limit=20, encoding="per-node", admission=adm)
    agg = rubick_round.solve(problem, table, time_limit=20, encoding="aggregated", admission=adm)
    if per_node.status == "infeasible":  # the guarantees cannot all be kept in one rack each
        assert "choices" not in agg.payload or violations(problem, table, agg.payload["choices"], adm) == []
        return
    assert per_node.status == "optimal"
    assert violations(problem, table, per_node.payload["choices"], adm) == []
    if "choices" in agg.payload:
        assert violations(problem, table, agg.payload["choices"], adm) == []
    assert agg.bound is None or agg.bound >= per_node.objective - 1e-5
    for sol in (per_node, agg):
        for name, c in sol.payload.get("choices", {}).items():
            if problem.job(name).topology == REQUIRED:
                racks = {_rack_of(problem, n) for n, _ in c.parts}
                assert None not in racks and len(racks) == 1, (name, c)


# -- partitioned solve, generator ------------------------------------------------------------------
@pytest.mark.parametrize("method", ["exact", "heuristic"])
def test_a_partitioned_solve_keeps_topology_rules(method: str) -> None:
    problem = generate_rubick_round(16, 8, 60, 5, constrained=0.8)
    modes = {j.topology.mode for j in problem.jobs if j.topology is not None}
    assert modes == {"required", "preferred"}
    d = optsched.solve(problem, method, time_limit=20, seed=0, partitions=2, defer_unreachable_guarantees=True)
    assert _topology_check(problem, d) == []
    assert d.objective == pytest.approx(_independent_objective(problem, d), abs=1e-6)


def test_the_generator_gives_racks_as_topology_and_rack_rules() -> None:
    problem = generate_rubick_round(64, 8, 400, 0, constrained=0.5)
    assert all(dict(n.topology) == {"rack": dict(n.labels)["rack"]} for n in problem.cluster.nodes)
    rules = [j.topology for j in problem.jobs if j.topology is not None]
    assert REQUIRED in rules and PREFERRED in rules
    rack_gpus = 8 * 8
    assert all(j.requested_gpus <= rack_gpus for j in problem.jobs if j.topology == REQUIRED)
    assert generate_rubick_round(8, 8, 40, 0).cluster.nodes[0].topology == ()


# -- JSON, schema, docs ------------------------------------------------------------------------------
def test_topology_round_trips_through_json_and_validates_against_the_schema() -> None:
    cluster = _racked(["r0", "r1", None])
    jobs = (Job("a", "bert", 4, 100, topology=REQUIRED), Job("b", "vit", 2, 100, topology=PREFERRED))
    problem = RubickRound(cluster, jobs, topology_penalty=0.07)
    data = json.loads(json.dumps(problem.to_dict()))
    assert data["topology_penalty"] == 0.07
    assert data["cluster"]["nodes"][0]["topology"] == {"rack": "r0"} and "topology" not in data["cluster"]["nodes"][2]
    assert data["jobs"][0]["topology"] == {"level": "rack", "mode": "required"}
    assert RoundProblem.from_dict(data) == problem
    assert structural_errors("round", data) == []
    del data["topology_penalty"]
    assert RoundProblem.from_dict(data).topology_penalty == DEFAULT_TOPOLOGY_PENALTY
    d = optsched.solve(problem, "heuristic")
    assert structural_errors("decision", json.loads(json.dumps(d.to_dict()))) == []
    for bad in (-0.1, "x"):
        with pytest.raises(ValidationError, match="topology_penalty"):
            RoundProblem.from_dict({**problem.to_dict(), "topology_penalty": bad})


def test_other_kinds_still_refuse_node_topology() -> None:
    data = optsched.core.kinds.round_kind("crius").generate(seed=0).to_dict()
    data["cluster"]["nodes"][0]["topology"] = {"rack": "r0"}
    with pytest.raises(ValidationError, match="sets topology, which crius rounds do not support"):
        RoundProblem.from_dict(data)


def test_the_docs_describe_node_topology_job_topology_and_topology_penalty() -> None:
    text = (REPO_ROOT / "docs" / "rounds.md").read_text()
    for needle in ("| `topology_penalty` | number >= 0 | no (0.02)", "`topology` (`{level: domain}`",
                   '| `topology` | `{"level": string, "mode": "required" or "preferred"}`', "**Topology.**"):
        assert needle in text, needle


@pytest.mark.parametrize("seed", [1, 2])
def test_algorithm1_walk_checks_hold_with_topology_rules(monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    """A crowded round where many jobs have rack rules: with ``CHECK`` every refresh of the walk from
    its counts equals GetBestPlan's (a required job walks one rack, a preferred one reads positions
    without the rule, as the counts do), and the decisions equal those of exact refreshes; they keep
    every rule."""
    from optsched.heuristics import rubick_walk
    from optsched.heuristics.rubick import algorithm1
    problem = generate_rubick_round(40, 8, 200, seed, constrained=0.7)
    # Algorithm 1 alone, without the priority enforcement every method runs after it (test_priorities.py)
    problem = replace(problem, jobs=tuple(replace(j, priority=0) for j in problem.jobs))
    assert sum(j.topology is not None for j in problem.jobs) >= 10
    table = build_round_table(problem)
    admission = admit(problem, table)
    monkeypatch.setattr(rubick_walk, "CHECK", True)
    checked = algorithm1(problem, table, admission, defer=True)
    monkeypatch.setattr(rubick_walk, "CHECK", False)
    monkeypatch.setattr(rubick_walk, "EXACT_REFRESHES", 10**9)
    assert algorithm1(problem, table, admission, defer=True).choices == checked.choices
    assert violations(problem, table, checked.choices, checked.admission) == []


def test_a_guaranteed_job_no_rack_can_hold_is_deferred_naming_its_rule() -> None:
    """Each rack has 6 free GPUs: a guaranteed 8-GPU gang requiring one rack cannot reach its guarantee,
    so Algorithm 1 defers it (it waits, as for quota) and says why; exact agrees."""
    occupied = {"n000": NodeShare(2, 8, 32.0), "n002": NodeShare(2, 8, 32.0)}
    gang = Job("g", "bert", 8, 1000, min_gpus=8, max_gpus=8, topology=REQUIRED, guaranteed=True)
    problem = RubickRound(_racked(["r0", "r0", "r1", "r1"]), (gang, Job("b", "bert", 4, 1000)), occupied=occupied)
    for method in ("heuristic", "exact"):
        d = _decide(problem, method)
        assert "g" not in _running(d) and "b" in _running(d)
        assert "requires one rack domain, which has at most 6" in d.message, d.message

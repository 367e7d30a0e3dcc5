"""Deadlines in Rubick rounds (optsched/rounds/rubick/deadlines.py; issue 24, item 3) bind in every method
(exact, Algorithm 1 and its ablations, every baseline): hand-computed rounds on the jobs' own coefficient
rows, so every number is stated here; past deadlines (queued: an error naming the job, skipped under
``on_invalid_job: "skip"``; running: ``deadline_missed``); random rounds checked by an independent check
written here; brute force against exact on tiny rounds; the decision's JSON."""

from __future__ import annotations

import copy
import itertools
import json
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

import optsched
from optsched.core import ExecutionPlan, Job, ValidationError
from optsched.core.catalog import a800_cluster, get_model
from optsched.core.decision import DeadlineAtRisk, DeadlineMissed, Decision, JobAllocations, JobDecision
from optsched.core.round import RoundProblem
from optsched.policies.registry import methods_of
from optsched.rounds.rubick.choice import Choice
from optsched.rounds.rubick.deadlines import admit_round
from optsched.rounds.rubick.feasibility import violations
from optsched.rounds.rubick.problem import RubickRound
from optsched.rounds.rubick.table import build_round_table

from helpers import alloc, assert_exact_matches_brute_force, best_assignment, roundtrip
from schema_check import structural_errors

METHODS = methods_of("rubick")
#: the methods whose table offers a job's own rows beyond its request's shape (own_rows.py): the full table
#: (exact, Algorithm 1), rubick-r (the request's plan at other DP sizes) and sia (its DP ladder)
SCALING = ("exact", "rubick-exact", "heuristic", "rubick", "rubick-r", "sia")
#: the methods that protect guaranteed jobs by quota admission (deadline jobs are admitted beside them)
PROTECTING = ("exact", "rubick-exact", "heuristic", "rubick", "rubick-e", "rubick-r", "rubick-n", "antman")

#: bert's global batch (samples per iteration, the catalogue's): what turns iterations into samples/s
BATCH = get_model("bert").global_batch
#: every round here is at time 1000 s; a job of 1000 iterations has 32,000 samples left
T0 = 1000.0


def _decide(problem: RoundProblem, method: str, **options: Any) -> Decision:
    return optsched.solve(problem, method, time_limit=10, seed=0, **options)


def _row(g: int, thr: float, shape: list[int] | None = None) -> dict[str, Any]:
    return {"plan": {"dp": g}, "gpu_type": "A800", "gpus_per_node": shape or [g], "cpus": 8 * g,
            "mem_gib": 16.0 * g, "throughput": thr}


def _round(jobs: list[dict[str, Any]], rows: dict[str, list[dict[str, Any]]], *, nodes: int = 1, gpus: int = 8,
           running: list[dict[str, Any]] = (), **fields: Any) -> dict[str, Any]:  # type: ignore[assignment]
    node = {"gpu_type": "A800", "num_gpus": gpus, "num_cpus": 96, "memory_gib": 1024.0}
    return {"kind": "rubick", "time": T0,
            "cluster": {"name": "lab", "intra_node_gbps": 150.0, "inter_node_gbps": 80.0, "pcie_gbps": 20.0,
                        "gpu_types": [{"name": "A800", "memory_gib": 80.0, "peak_tflops": 312.0}],
                        "nodes": [{"name": f"g{i}", **node} for i in range(nodes)]},
            "jobs": jobs, "running": list(running), "coefficients": rows, **fields}


#: a deadline job of 1000 bert iterations asking for 4 GPUs: 50 / 90 / 160 / 170 samples/s on 1 / 2 / 4 / 8
D_ROWS = [_row(1, 50.0), _row(2, 90.0), _row(4, 160.0), _row(8, 170.0)]
#: a best-effort gang holding the whole node: its only configuration is 8 GPUs at 400 samples/s
BE_ROWS = [_row(8, 400.0)]
BE_RUNNING = {"job": "be", "plan": {"dp": 8}, "placement": {"g0": {"gpus": 8, "cpus": 64, "mem_gb": 128.0}}}


def _gang_round(deadline: float | None) -> RoundProblem:
    d: dict[str, Any] = {"name": "d", "model": "bert", "requested_gpus": 4, "total_iterations": 1000,
                         "submit_time": 900.0}
    if deadline is not None:
        d["deadline"] = deadline
    jobs = [{"name": "be", "model": "bert", "requested_gpus": 8, "total_iterations": 5000}, d]
    return RoundProblem.from_dict(_round(jobs, {"be": BE_ROWS, "d": D_ROWS}, running=[BE_RUNNING]))


def _gpus(d: Decision, name: str) -> int:
    a = d.job(name).allocation
    return 0 if a is None else sum(s.gpus for _, s in a.placement.shares)


# -- hand-computed rounds ----------------------------------------------------------------------------
@pytest.mark.parametrize("method", METHODS)
def test_a_deadline_job_gets_the_rate_of_four_gpus_the_running_gang_would_keep(method: str) -> None:
    # d has 32,000 samples left; deadline T0 + 250 s: it needs 32000 / 250 = 128 samples/s, more than its
    # 2-GPU row (90), less than its 4-GPU row (160): its minimum share is 4 GPUs. The gang be holds the node
    # and cannot shrink; without the deadline every method keeps it (preempting it for d's best row costs
    # 1.0 + 0.25 for 170/160 = 1.06), so d waits.
    assert 32000 / 250 == 128.0
    free = _decide(_gang_round(None), method)
    assert free.job("d").action == "wait" and free.job("be").action == "keep"
    d = _decide(_gang_round(T0 + 250.0), method)
    assert d.job("d").throughput >= 128.0 and _gpus(d, "d") >= 4
    assert d.job("be").action == "preempt"
    assert d.payload.deadline_at_risk == () and d.payload.deadline_missed == ()


@pytest.mark.parametrize("method", METHODS)
def test_an_unmeetable_deadline_is_at_risk_with_its_best_finish_and_still_runs(method: str) -> None:
    # deadline T0 + 160 s: d needs 32000 / 160 = 200 samples/s; its fastest row runs 170 (8 GPUs), and the
    # methods restricted to its request's shape (4 GPUs) reach 160
    problem = RoundProblem.from_dict(_round(
        [{"name": "d", "model": "bert", "requested_gpus": 4, "total_iterations": 1000, "deadline": T0 + 160.0}],
        {"d": D_ROWS}))
    d = _decide(problem, method)
    (risk,) = d.payload.deadline_at_risk
    assert risk.job == "d" and risk.deadline == T0 + 160.0 and risk.needs == pytest.approx(200.0)
    assert "no configuration meets the 200 samples/s" in risk.reason
    best = 170.0 if method in SCALING else 160.0
    assert risk.best_finish == pytest.approx(T0 + 32000 / best)
    # never silently dropped: alone on the node it runs as a best-effort job, and the finish is reported
    assert d.job("d").action == "start"
    assert risk.planned_finish == pytest.approx(T0 + 32000 / d.job("d").throughput)
    assert risk.planned_finish > risk.deadline


@pytest.mark.parametrize("method", METHODS)
def test_a_minimum_share_that_does_not_fit_beside_a_guarantee_is_at_risk(method: str) -> None:
    # guaranteed g (no quotas: protected) needs the whole node for its request; d needs 4 GPUs: 8 + 4 > 8.
    # Methods that protect nobody (fifo, synergy, sia) admit d beside nobody and run it first.
    jobs = [{"name": "g", "model": "bert", "requested_gpus": 8, "total_iterations": 1000, "guaranteed": True},
            {"name": "d", "model": "bert", "requested_gpus": 4, "total_iterations": 1000, "deadline": T0 + 250.0}]
    problem = RoundProblem.from_dict(_round(jobs, {"g": BE_ROWS, "d": D_ROWS}))
    d = _decide(problem, method)
    if method in PROTECTING:
        (risk,) = d.payload.deadline_at_risk
        assert risk.job == "d" and "does not fit beside the guaranteed jobs" in risk.reason
        assert "4 A800 GPUs (0 left)" in risk.reason
        assert d.job("g").allocation is not None and d.job("g").throughput == 400.0
    else:
        assert d.payload.deadline_at_risk == ()
        assert d.job("d").throughput >= 128.0


@pytest.mark.parametrize("method", PROTECTING)
def test_a_guaranteed_deadline_job_gets_the_faster_of_its_two_floors_or_waits_for_quota(method: str) -> None:
    # guaranteed d asks for 2 GPUs (its guarantee: 90 samples/s) and needs 128 for its deadline: 4 GPUs,
    # which the tables restricted to its request (rubick-e, rubick-n, antman) do not offer
    d = {"name": "d", "model": "bert", "requested_gpus": 2, "total_iterations": 1000, "deadline": T0 + 250.0,
         "guaranteed": True, "tenant": "t"}
    within = RoundProblem.from_dict(_round([d], {"d": D_ROWS}, quotas={"t": 8}))
    got = _decide(within, method)
    assert got.job("d").protected and got.job("d").throughput >= 90.0
    if method in SCALING:
        assert got.job("d").throughput >= 128.0 and got.payload.deadline_at_risk == ()
    else:
        (risk,) = got.payload.deadline_at_risk
        assert risk.reason.startswith("no configuration meets the 128 samples/s its deadline needs and reaches its "
                                      "performance guarantee (the fastest runs 90 samples/s)")
    over = RoundProblem.from_dict(_round([d], {"d": D_ROWS}, quotas={"t": 1}))
    got = _decide(over, method)
    (risk,) = got.payload.deadline_at_risk
    assert risk.reason.startswith("it does not run this round: waiting for quota") or method == "antman"
    assert got.job("d").action == "wait" and risk.planned_finish is None


@pytest.mark.parametrize("method", METHODS)
def test_a_running_job_past_its_deadline_is_reported_missed_and_scheduled_without_one(method: str) -> None:
    jobs = [{"name": "be", "model": "bert", "requested_gpus": 8, "total_iterations": 5000, "deadline": T0}]
    problem = RoundProblem.from_dict(_round(jobs, {"be": BE_ROWS}, running=[BE_RUNNING]))
    d = _decide(problem, method)
    assert d.payload.deadline_missed == (DeadlineMissed("be", T0),)
    assert d.payload.deadline_at_risk == ()
    assert d.job("be").action == "keep"  # as a job without a deadline: nothing else wants the node


def test_a_queued_job_past_its_deadline_is_an_error_naming_it_or_skipped() -> None:
    jobs = [{"name": "late", "model": "bert", "requested_gpus": 4, "total_iterations": 1000, "deadline": T0 - 1.0},
            {"name": "ok", "model": "bert", "requested_gpus": 4, "total_iterations": 1000}]
    data = _round(jobs, {"late": D_ROWS, "ok": D_ROWS})
    with pytest.raises(ValidationError, match=r"queued job 'late' has deadline 999 s, at or before the round's time"):
        RoundProblem.from_dict(data)
    at_time = copy.deepcopy(data)
    at_time["jobs"][0]["deadline"] = T0  # at the round's time is past too
    with pytest.raises(ValidationError, match="queued job 'late'"):
        RoundProblem.from_dict(at_time)
    skipping = RoundProblem.from_dict({**data, "on_invalid_job": "skip"})
    assert [j.name for j in skipping.jobs] == ["ok"]
    (s,) = skipping.skipped
    assert s.job == "late" and "at or before the round's time" in s.reason
    for method in ("exact", "heuristic", "fifo"):
        d = _decide(skipping, method)
        assert [x.job for x in d.skipped] == ["late"] and [x.job for x in d.jobs] == ["ok"]


def test_a_deadline_needs_a_known_global_batch() -> None:
    jobs = [{"name": "x", "model": "my-model", "requested_gpus": 4, "total_iterations": 10, "deadline": T0 + 100}]
    with pytest.raises(ValidationError, match="job 'x' has a deadline but the round does not know the global batch"):
        RoundProblem.from_dict(_round(jobs, {"x": D_ROWS}))


@pytest.mark.parametrize("method", METHODS)
def test_node_shapes_that_defeat_admission_demote_the_deadline_never_fail_the_round(method: str) -> None:
    # two 4-GPU nodes; guaranteed g runs 2 + 2 GPUs (its only shape), so 4 GPUs are free, 2 per node; d needs
    # 4 GPUs on one node (its meeting rows: [4] at 160, [4, 4] at 170). By GPU count it fits beside g (4 + 4
    # <= 8), by shape it does not unless g goes. Methods that protect g demote d (at risk, best-effort);
    # fifo, synergy and sia protect nobody and preempt g for it.
    g_rows = [_row(4, 300.0, [2, 2])]
    d_rows = [_row(1, 50.0), _row(2, 90.0), _row(4, 160.0), _row(8, 170.0, [4, 4])]
    jobs = [{"name": "g", "model": "bert", "requested_gpus": 4, "total_iterations": 1000, "guaranteed": True},
            {"name": "d", "model": "bert", "requested_gpus": 4, "total_iterations": 1000, "deadline": T0 + 250.0}]
    running = [{"job": "g", "plan": {"dp": 4},
                "placement": {"g0": {"gpus": 2, "cpus": 16, "mem_gb": 32.0}, "g1": {"gpus": 2, "cpus": 16,
                                                                                    "mem_gb": 32.0}}}]
    problem = RoundProblem.from_dict(_round(jobs, {"g": g_rows, "d": d_rows}, nodes=2, gpus=4, running=running))
    d = _decide(problem, method)  # no defer_unreachable_guarantees: still no InfeasibleError
    if method in PROTECTING:
        (risk,) = d.payload.deadline_at_risk
        assert risk.job == "d" and risk.reason.startswith("admitted, but")
        assert d.job("g").action == "keep"
        assert d.job("d").throughput < 128.0  # best-effort where there is room (2 GPUs: 90)
    else:
        assert d.payload.deadline_at_risk == () and d.job("d").throughput >= 128.0


@pytest.mark.parametrize("method", PROTECTING)
def test_deadline_jobs_in_the_way_of_a_guarantee_are_demoted(method: str) -> None:
    # d runs 2 + 2 GPUs on two 4-GPU nodes and meets its deadline there; guaranteed g arrives needing 4 GPUs
    # on one node. Admission by counts admits both (4 + 4 <= 8); by shape only one fits, and g's
    # guarantee comes first: d is demoted (best-effort), not the round failed. (fifo, synergy and sia
    # protect nobody: g is a job like any other there and d keeps its node.)
    d_rows = [_row(4, 160.0, [2, 2])]
    jobs = [{"name": "d", "model": "bert", "requested_gpus": 4, "total_iterations": 1000, "deadline": T0 + 250.0},
            {"name": "g", "model": "bert", "requested_gpus": 4, "total_iterations": 1000, "guaranteed": True}]
    running = [{"job": "d", "plan": {"dp": 4},
                "placement": {"g0": {"gpus": 2, "cpus": 16, "mem_gb": 32.0}, "g1": {"gpus": 2, "cpus": 16,
                                                                                    "mem_gb": 32.0}}}]
    problem = RoundProblem.from_dict(_round(jobs, {"d": d_rows, "g": [_row(4, 300.0)]}, nodes=2, gpus=4,
                                            running=running))
    d = _decide(problem, method)
    assert d.job("g").throughput == 300.0 and d.job("g").protected
    (risk,) = d.payload.deadline_at_risk
    assert risk.job == "d" and "guaranteed job" in risk.reason
    assert d.job("d").action == "preempt"
    for other in ("fifo", "synergy", "sia"):
        kept = _decide(problem, other)
        assert kept.job("d").action == "keep" and kept.payload.deadline_at_risk == ()


def test_an_admitted_share_no_part_can_hold_is_solved_whole() -> None:
    # d needs 32000 / 125 = 256 samples/s: only its 16-GPU row (300) meets that, more than a part's 8 GPUs
    rows = [_row(4, 160.0), _row(8, 200.0), _row(16, 300.0, [8, 8])]
    problem = RoundProblem.from_dict(_round(
        [{"name": "d", "model": "bert", "requested_gpus": 4, "total_iterations": 1000, "deadline": T0 + 125.0},
         {"name": "e", "model": "bert", "requested_gpus": 4, "total_iterations": 1000}], {"d": rows, "e": rows},
        nodes=2))
    d = optsched.solve(problem, "heuristic", time_limit=10, partitions=2)
    assert d.method == "heuristic" and d.message.startswith("not partitioned: no part of 2 can hold")
    assert "'d': no part has room for the minimum share (16 A800 GPUs) of its deadline" in d.message
    assert d.job("d").throughput == 300.0 and d.payload.deadline_at_risk == ()


def test_a_deadline_binds_in_the_exact_model_and_feasibility() -> None:
    problem = _gang_round(T0 + 250.0)
    table = build_round_table(problem)
    adm = admit_round(problem, table)
    assert dict(adm.deadlines.admitted) == {"d": ("A800", 4)}
    assert adm.deadlines.needs["d"] == pytest.approx(128.0)
    two = [int(k) for k in table.configs_of("d") if table.gpus[k] == 2][0]
    assert violations(problem, table, {"d": Choice(two, (("g0", 2),))}, adm) == [
        "deadline job 'd', admitted, gets 90 samples/s, below the 128 its deadline needs"]
    assert violations(problem, table, {}, adm)[0] == "deadline job 'd', admitted, does not run"


# -- random rounds: an independent check ---------------------------------------------------------------
def _random_round(seed: int) -> RubickRound:
    rng = np.random.default_rng(seed)
    cluster = a800_cluster(3, 8)
    time = 1000.0
    jobs = []
    for i in range(7):
        g = int(rng.choice([1, 2, 4, 8]))
        model = str(rng.choice(["vit", "bert", "roberta", "gpt2"]))
        kw: dict[str, Any] = {}
        if rng.random() < 0.6:
            # deadlines from hopeless to lax: the job's samples over 0.2 .. 3 x 100 samples/s per GPU
            left = 400 * get_model(model).global_batch
            kw["deadline"] = time + left / (100.0 * g * float(rng.uniform(0.2, 3.0)))
        jobs.append(Job(f"j{i}", model, g, 1000, completed_iterations=600.0, guaranteed=bool(rng.random() < 0.3),
                        submit_time=float(i), **kw))
    running = []
    j0 = jobs[0]
    if rng.random() < 0.7:
        g = min(j0.requested_gpus, 8)
        if rng.random() < 0.5:
            jobs[0] = replace(j0, deadline=time - 10.0)  # running past its deadline: missed
        running.append(alloc(j0.name, ExecutionPlan(dp=g), {"n000": (g, 4 * g, 20.0 * g)}))
    return RubickRound(cluster, tuple(jobs), tuple(running), time=time, reconfig_penalty=0.1, preempt_penalty=0.3)


def _independent_check(problem: RubickRound, d: Decision) -> list[str]:
    """The deadline rules read off the decision and the jobs' fields, with no code of the package: every
    job with a deadline is missed (running, deadline <= time), at risk, or runs at least as fast as its
    remaining samples over the time left; at-risk finish times agree with the throughputs; nodes hold
    what they are given."""
    out = []
    at_risk = {e.job: e for e in d.payload.deadline_at_risk}
    missed = {e.job for e in d.payload.deadline_missed}
    batch = {"vit": get_model("vit").global_batch, "bert": get_model("bert").global_batch,
             "roberta": get_model("roberta").global_batch, "gpt2": get_model("gpt2").global_batch}
    for job in problem.jobs:
        x = d.job(job.name)
        if job.deadline is None:
            if job.name in at_risk or job.name in missed:
                out.append(f"{job.name}: reported without a deadline")
            continue
        left = (job.total_iterations - job.completed_iterations) * batch[job.model]
        if job.deadline <= problem.time:
            if job.name not in missed or problem.current(job.name) is None:
                out.append(f"{job.name}: past deadline not reported missed")
            continue
        need = left / (job.deadline - problem.time)
        if job.name in at_risk:
            e = at_risk[job.name]
            if abs(e.needs - need) > 1e-6 * need:
                out.append(f"{job.name}: needs {e.needs}, expected {need}")
            if (e.planned_finish is None) != (x.allocation is None):
                out.append(f"{job.name}: planned finish {e.planned_finish} but action {x.action}")
            elif e.planned_finish is not None and abs(e.planned_finish - (problem.time + left / x.throughput)) > 1e-6:
                out.append(f"{job.name}: planned finish {e.planned_finish}")
            if e.best_finish is not None and e.planned_finish is not None and e.best_finish > e.planned_finish + 1e-6:
                out.append(f"{job.name}: best finish after the planned one")
        elif x.throughput < need * (1 - 1e-6):
            out.append(f"{job.name}: admitted, {x.throughput:.4g} samples/s < {need:.4g}")
    used: dict[str, list[float]] = {}
    for x in d.jobs:
        if x.allocation is not None:
            for node, s in x.allocation.placement.shares:
                u = used.setdefault(node, [0, 0, 0.0])
                u[0] += s.gpus
                u[1] += s.cpus
                u[2] += s.mem_gib
    for node, (g, c, m) in used.items():
        n = problem.cluster.node(node)
        if g > n.num_gpus or c > n.num_cpus or m > n.memory_gib + 1e-6:
            out.append(f"node {node} over capacity")
    return out


@pytest.mark.parametrize("seed", range(6))
def test_every_method_keeps_random_deadlines(seed: int) -> None:
    problem = _random_round(seed)
    for method in METHODS:
        d = _decide(problem, method, defer_unreachable_guarantees=True) if method in PROTECTING[:-1] \
            else _decide(problem, method)
        assert _independent_check(problem, d) == [], method
        assert structural_errors("decision", json.loads(json.dumps(d.to_dict()))) == [], method


def test_random_rounds_exercise_every_outcome() -> None:
    seen: set[str] = set()
    for seed in range(6):
        d = _decide(_random_round(seed), "heuristic", defer_unreachable_guarantees=True)
        seen |= {"at_risk"} if d.payload.deadline_at_risk else set()
        seen |= {"missed"} if d.payload.deadline_missed else set()
        reported = {e.job for e in (*d.payload.deadline_at_risk, *d.payload.deadline_missed)}
        if any(j.deadline is not None and j.name not in reported for j in _random_round(seed).jobs):
            seen.add("admitted")
    assert seen == {"at_risk", "missed", "admitted"}


def test_a_partitioned_solve_keeps_the_deadlines() -> None:
    problem = generate_with_deadlines()
    for method in ("heuristic", "exact"):
        d = optsched.solve(problem, method, time_limit=20, seed=0, partitions=2, defer_unreachable_guarantees=True)
        assert _independent_check(problem, d) == [], method
        assert any(e for e in d.payload.deadline_at_risk), method


def generate_with_deadlines() -> RubickRound:
    """Two random rounds side by side on 4 nodes (a partitioned solve needs nodes to split)."""
    a = _random_round(1)
    cluster = a800_cluster(4, 8)
    jobs = tuple(a.jobs) + tuple(replace(j, name=f"b{j.name}", deadline=None if j.deadline is None
                                         else max(j.deadline, a.time + 1.0)) for j in _random_round(2).jobs)
    return RubickRound(cluster, jobs, a.running, time=a.time, reconfig_penalty=0.1, preempt_penalty=0.3)


# -- brute force -----------------------------------------------------------------------------------
def _tiny(seed: int) -> RubickRound:
    rng = np.random.default_rng(300 + seed)
    time = 1000.0
    jobs = []
    for i, (model, g) in enumerate((("vit", 2), ("bert", 2), ("roberta", 1))):
        left = 100 * get_model(model).global_batch
        deadline = time + left / (float(rng.uniform(0.3, 2.0)) * 60.0 * g) if rng.random() < 0.8 else None
        jobs.append(Job(f"t{i}", model, g, 100, deadline=deadline, guaranteed=bool(rng.random() < 0.3)))
    return RubickRound(a800_cluster(2, 4), tuple(jobs), time=time, reconfig_penalty=0.1, preempt_penalty=0.3)


def _brute_force(problem: RubickRound, table: Any) -> float:
    """The best objective over every assignment of the table's rows in which every admitted deadline job
    runs a row at least as fast as its remaining samples over the time left (the rule written here
    again) and every other rule of :func:`violations` holds."""
    adm = admit_round(problem, table)
    admitted = adm.deadlines.admitted
    nodes = [n.name for n in problem.cluster.nodes]
    options = []
    for name in table.jobs:
        job = problem.job(name)
        need = None
        if name in admitted:
            need = job.remaining_iterations * get_model(job.model).global_batch / (job.deadline - problem.time)
        opts: list = [] if name in admitted else [None]
        for k in table.configs_of(name):
            k = int(k)
            if need is not None and table.throughput[k] < need * (1 - 1e-9):
                continue
            shape = table.gpus_per_node[k]
            for perm in itertools.permutations(nodes, len(shape)):
                opts.append(Choice(k, tuple(sorted(zip(perm, shape)))))
        options.append(sorted(set(opts), key=repr))
    return best_assignment(problem, table, options, adm)


@pytest.mark.parametrize("seed", range(4))
def test_exact_equals_brute_force_on_tiny_deadline_rounds(seed: int) -> None:
    assert_exact_matches_brute_force(_tiny(seed), _brute_force)


def test_tiny_rounds_admit_some_deadlines_and_not_others() -> None:
    admitted, at_risk = set(), set()
    for seed in range(4):
        problem = _tiny(seed)
        dl = admit_round(problem, build_round_table(problem, cpus_per_gpu_options=(4, 12))).deadlines
        admitted |= {(seed, n) for n in dl.admitted}
        at_risk |= {(seed, n) for n in dl.at_risk}
    assert admitted and at_risk


# -- JSON ------------------------------------------------------------------------------------------
def test_the_deadline_reports_round_trip_through_json() -> None:
    problem = RoundProblem.from_dict(_round(
        [{"name": "d", "model": "bert", "requested_gpus": 4, "total_iterations": 1000, "deadline": T0 + 160.0},
         {"name": "be", "model": "bert", "requested_gpus": 8, "total_iterations": 5000, "deadline": T0 - 5.0},
         {"name": "w", "model": "bert", "requested_gpus": 8, "total_iterations": 20, "deadline": T0 + 1.0}],
        {"d": D_ROWS, "be": BE_ROWS, "w": BE_ROWS}, running=[BE_RUNNING]))
    d = _decide(problem, "heuristic")
    assert {e.job for e in d.payload.deadline_at_risk} == {"d", "w"}
    assert d.payload.deadline_missed == (DeadlineMissed("be", T0 - 5.0),)
    data = json.loads(json.dumps(d.to_dict()))
    assert structural_errors("decision", data) == []
    assert Decision.from_dict(data) == d
    w = next(e for e in data["deadline_at_risk"] if e["job"] == "w")
    # w needs 20 x 32 samples in 1 s, its only row runs 400 samples/s; be (missed) keeps the node
    assert w["needed_throughput"] == pytest.approx(640.0)
    assert w["planned_finish"] is None and w["best_finish"] == pytest.approx(T0 + 20 * BATCH / 400.0)
    # older decisions (without the lists) read as before, and are written without them
    plain = _decide(_gang_round(None), "heuristic").to_dict()
    assert "deadline_at_risk" not in plain and "deadline_missed" not in plain
    assert Decision.from_dict(plain).payload.deadline_at_risk == ()


def test_deadline_report_entries_are_checked() -> None:
    e = DeadlineAtRisk("d", 5.0, "too slow", 3.0, 9.0, None)
    assert roundtrip(e) == e and roundtrip(DeadlineMissed("d", 1.0)) == DeadlineMissed("d", 1.0)
    x = JobDecision("d", None, 0.0, 0.0, "wait")
    with pytest.raises(ValidationError, match="deadline_at_risk names job 'z'"):
        JobAllocations((x,), deadline_at_risk=(replace(e, job="z"),))
    with pytest.raises(ValidationError, match="listed once"):
        JobAllocations((x,), deadline_at_risk=(e,), deadline_missed=(DeadlineMissed("d", 1.0),))
    with pytest.raises(ValidationError, match="reason must be a non-empty string"):
        DeadlineAtRisk("d", 5.0, " ", 3.0)
    with pytest.raises(ValidationError, match="best_finish must be a finite number"):
        DeadlineAtRisk("d", 5.0, "x", 3.0, float("inf"))

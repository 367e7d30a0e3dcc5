"""Weights, penalties in seconds and holds in Rubick rounds (optsched/rounds/rubick/problem.py,
"Weights and penalties per job"; optsched/rounds/rubick/holds.py): hand-computed penalties, every method
pricing them alike, ``min_hold_s`` keeping recently changed jobs in every method, and the exceptions."""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import Any

import pytest

import optsched
from optsched.core import Job, ValidationError
from optsched.core.catalog import a800_cluster
from optsched.core.decision import Decision
from optsched.core.round import RoundProblem
from optsched.policies.registry import methods_of
from optsched.rounds.rubick.problem import JobPenalties, RubickRound
from optsched.rounds.rubick.table import build_round_table

from helpers import row_alloc

METHODS = methods_of("rubick")
#: the methods that weigh a running job's change against its gain (the others never change one for gain)
OPTIMISING = ("exact", "rubick", "sia")


def _solve(problem: RubickRound, method: str, **kw: Any) -> Decision:
    return optsched.solve(problem, method, time_limit=10, seed=0, **kw)


def _actions(d: Decision) -> dict[str, str]:
    return {x.job: x.action for x in d.jobs}


def _objective_by_hand(problem: RubickRound, d: Decision) -> float:
    """The objective as docs/rounds.md states it, read off the decision: weight x normalised throughput
    less each job's penalty for its action, the penalties recomputed from the formula."""
    total = 0.0
    for x in d.jobs:
        job = problem.job(x.job)
        w = job.weight
        total += w * x.normalised
        if x.action in ("keep", "start", "wait"):
            continue
        if job.restart_seconds is None and job.checkpoint_age_s is None:
            pen = {"reconfigure": problem.reconfig_penalty, "trim": problem.trim_penalty,
                   "preempt": problem.preempt_penalty}[x.action]
        else:
            r = job.restart_seconds / problem.round_interval_s
            a = job.checkpoint_age_s / problem.round_interval_s if job.checkpoint_age_s is not None else 0.2
            pen = {"reconfigure": r, "trim": min(problem.trim_penalty, r), "preempt": r + a}[x.action]
        total -= w * pen
    return total


# -- penalties per job, by hand --------------------------------------------------------------------
def test_penalties_are_derived_from_seconds_as_the_docs_say() -> None:
    jobs = (Job("plain", "gpt2", 4, 100), Job("heavy", "gpt2", 4, 100, weight=2.0),
            Job("secs", "gpt2", 4, 100, restart_seconds=78.0, checkpoint_age_s=120.0),
            Job("restart", "gpt2", 4, 100, restart_seconds=78.0, weight=3.0),
            Job("age", "gpt2", 4, 100, checkpoint_age_s=30.0), Job("fast", "gpt2", 4, 100, restart_seconds=0.3))
    p = RubickRound(a800_cluster(1, 8), jobs, round_interval_s=300.0)
    assert p.penalties("plain") == JobPenalties(0.05, 0.005, 0.25)
    assert p.penalties("heavy") == JobPenalties(0.1, 0.01, 0.5)
    assert p.penalties("secs") == pytest.approx(JobPenalties(0.26, 0.005, 0.66))
    # no checkpoint age: the default's share of lost progress, 0.25 - 0.05
    assert p.penalties("restart") == pytest.approx(JobPenalties(0.78, 0.015, 3 * (0.26 + 0.2)))
    assert p.penalties("age") == pytest.approx(JobPenalties(0.05, 0.005, 0.15))
    # a trim never costs more than the job's restart
    assert p.penalties("fast") == pytest.approx(JobPenalties(0.001, 0.001, 0.201))


def test_seconds_need_a_round_interval_and_fields_round_trip() -> None:
    job = Job("a", "gpt2", 4, 100, restart_seconds=78.0)
    with pytest.raises(ValidationError, match="sets restart_seconds, which needs the round's round_interval_s"):
        RubickRound(a800_cluster(1, 8), (job,))
    with pytest.raises(ValidationError, match="round_interval_s must be > 0"):
        RubickRound(a800_cluster(1, 8), (), round_interval_s=0)
    p = RubickRound(a800_cluster(1, 8), (job,), round_interval_s=300, min_hold_s=600)
    data = p.to_dict()
    assert data["round_interval_s"] == 300 and data["min_hold_s"] == 600
    assert RoundProblem.from_dict(data) == p
    assert "round_interval_s" not in RubickRound(a800_cluster(1, 8), ()).to_dict()


# -- every method prices them ----------------------------------------------------------------------
def _growable(job: Job, **fields: Any) -> RubickRound:
    """gpt2 running on 4 of 8 free GPUs of one node: growing to 8 GPUs gains about 0.56 (normalised)."""
    cluster = a800_cluster(1, 8)
    table = build_round_table(RubickRound(cluster, (replace(job, restart_seconds=None),)))
    row = next(int(k) for k in table.configs_of(job.name) if table.gpus[k] == 4)
    return RubickRound(cluster, (job,), (row_alloc(table, job.name, row, [cluster.nodes[0].name]),), time=1000.0,
                       **fields)


@pytest.mark.parametrize("method", OPTIMISING)
def test_a_restart_in_seconds_outweighs_a_small_gain(method: str) -> None:
    job = Job("a", "gpt2", 4, 10_000)
    cheap = _solve(_growable(job, round_interval_s=300.0), method)
    assert _actions(cheap) == {"a": "reconfigure"} and cheap.jobs[0].penalty == pytest.approx(0.05)
    # 200 s of restart in a 300 s round costs 0.67, more than the 0.56 gained
    dear = _solve(_growable(replace(job, restart_seconds=200.0), round_interval_s=300.0), method)
    assert _actions(dear) == {"a": "keep"}
    # a 60 s restart (0.2) is worth it, and the decision charges that, not the default
    mid = _solve(_growable(replace(job, restart_seconds=60.0), round_interval_s=300.0), method)
    assert _actions(mid) == {"a": "reconfigure"} and mid.jobs[0].penalty == pytest.approx(0.2)


@pytest.mark.parametrize("method", METHODS)
def test_every_method_reports_the_weighted_objective(method: str) -> None:
    cluster = a800_cluster(2, 8)
    jobs = (Job("a", "gpt2", 4, 10_000, weight=2.5, restart_seconds=90.0, checkpoint_age_s=30.0),
            Job("b", "bert", 8, 10_000, weight=0.5), Job("c", "vit", 4, 10_000, restart_seconds=10.0),
            Job("d", "gpt2", 8, 10_000, weight=4.0))
    base = RubickRound(cluster, jobs, round_interval_s=300.0)
    table = build_round_table(base)
    running = (row_alloc(table, "a", int(next(k for k in table.configs_of("a") if table.gpus[k] == 4)),
                         [cluster.nodes[0].name]),
               row_alloc(table, "b", int(table.current_row[1]) if table.current_row[1] >= 0 else
                         int(next(k for k in table.configs_of("b") if table.gpus[k] == 8)), [cluster.nodes[1].name]))
    p = replace(base, running=running, time=600.0)
    d = _solve(p, method)
    assert d.objective == pytest.approx(_objective_by_hand(p, d), abs=1e-9)
    for x in d.jobs:
        want = {"reconfigure": p.penalties(x.job).reconfig, "preempt": p.penalties(x.job).preempt,
                "trim": p.penalties(x.job).trim}.get(x.action, 0.0)
        assert x.penalty == pytest.approx(want)


def test_weight_decides_who_runs_in_exact_and_the_heuristic() -> None:
    cluster = a800_cluster(1, 8)
    a, b = Job("a", "gpt2", 8, 10_000, min_gpus=8), Job("b", "gpt2", 8, 10_000, min_gpus=8)
    for heavy in ("a", "b"):
        jobs = tuple(replace(j, weight=3.0) if j.name == heavy else j for j in (a, b))
        for method in ("exact", "rubick"):
            d = _solve(RubickRound(cluster, jobs), method)
            assert [x.job for x in d.jobs if x.allocation is not None] == [heavy], (method, heavy)


def test_exact_equals_brute_force_with_weights_and_seconds() -> None:
    cluster = a800_cluster(1, 8)
    jobs = (Job("a", "gpt2", 4, 10_000, weight=1.7, restart_seconds=40.0, checkpoint_age_s=200.0),
            Job("b", "bert", 4, 10_000, weight=0.6), Job("c", "vit", 2, 10_000, weight=2.2))
    base = RubickRound(cluster, jobs, round_interval_s=300.0)
    table = build_round_table(base)
    row = int(next(k for k in table.configs_of("a") if table.gpus[k] == 4))
    p = replace(base, running=(row_alloc(table, "a", row, [cluster.nodes[0].name]),), time=300.0)
    table = build_round_table(p)
    best = -1e9
    # brute force: every subset of rows, one per job, within the node's 8 GPUs, CPUs and memory
    options = [[None, *map(int, table.configs_of(name))] for name in table.jobs]
    node = cluster.nodes[0]
    for combo in itertools.product(*options):
        chosen = [k for k in combo if k is not None]
        if (sum(table.gpus[k] for k in chosen) > node.num_gpus or sum(table.cpus[k] for k in chosen) > node.num_cpus
                or sum(table.mem_gib[k] for k in chosen) > node.memory_gib):
            continue
        value = 0.0
        for j, k in enumerate(combo):
            name = table.jobs[j]
            pen = p.penalties(name)
            if k is None:
                value -= pen.preempt if table.current_row[j] >= 0 else 0.0
                continue
            value += p.weight(name) * table.throughput[k] / table.reference_throughput[j]
            cur = int(table.current_row[j])
            if cur >= 0 and k != cur:  # one node: another row is a trim (same plan and GPUs) or a restart
                same = table.plans[k] == table.plans[cur] and table.gpus[k] == table.gpus[cur]
                value -= pen.trim if same else pen.reconfig
        best = max(best, value)
    d = _solve(p, "exact")
    assert d.status == "optimal"
    assert d.objective == pytest.approx(best, abs=1e-6)


# -- holds -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("method", METHODS)
def test_a_recently_changed_job_is_held_by_every_method(method: str) -> None:
    job = Job("a", "gpt2", 4, 10_000)
    p = _growable(job, min_hold_s=600.0)
    (alloc,) = p.running
    held = replace(p, running=(replace(alloc, since=900.0),))
    d = _solve(held, method)
    assert _actions(d) == {"a": "keep"}
    assert "held by min_hold_s" in d.message
    # changed long enough ago (or no since): not held, and the optimising methods grow it
    old = replace(p, running=(replace(alloc, since=100.0),))
    if method in OPTIMISING:
        assert _actions(_solve(old, method)) == {"a": "reconfigure"}
        assert _actions(_solve(p, method)) == {"a": "reconfigure"}


@pytest.mark.parametrize("method", METHODS)
def test_a_held_job_still_leaves_a_draining_node(method: str) -> None:
    cluster = a800_cluster(2, 8)
    job = Job("a", "gpt2", 4, 10_000, min_gpus=4, max_gpus=4)
    table = build_round_table(RubickRound(cluster, (job,)))
    row = int(next(k for k in table.configs_of("a") if table.gpus[k] == 4))
    first = cluster.nodes[0].name
    alloc = replace(row_alloc(table, "a", row, [first]), since=900.0)
    nodes = tuple(replace(n, state="draining") if n.name == first else n for n in cluster.nodes)
    p = RubickRound(replace(cluster, nodes=nodes), (job,), (alloc,), time=1000.0, min_hold_s=600.0)
    d = _solve(p, method)
    x = d.jobs[0]
    assert x.action in ("reconfigure", "preempt")
    assert x.allocation is None or first not in dict(x.allocation.placement.shares)


@pytest.mark.parametrize("method", ["exact", "rubick", "antman"])
def test_a_held_guaranteed_job_uses_its_tenants_quota(method: str) -> None:
    cluster = a800_cluster(2, 8)
    a = Job("a", "gpt2", 4, 10_000, tenant="t", guaranteed=True, min_gpus=4, max_gpus=4)
    c = Job("c", "gpt2", 4, 10_000, tenant="t", guaranteed=True, submit_time=5.0)
    table = build_round_table(RubickRound(cluster, (a,)))
    row = int(next(k for k in table.configs_of("a") if table.gpus[k] == 4))
    alloc = replace(row_alloc(table, "a", row, [cluster.nodes[0].name]), since=950.0)
    p = RubickRound(cluster, (a, c), (alloc,), time=1000.0, min_hold_s=600.0, quotas=(("t", 6),))
    d = _solve(p, method)
    assert _actions(d) == {"a": "keep", "c": "wait"}
    assert "quota" in d.job("c").reason
    # with room in the quota, the queued guaranteed job starts beside the held one
    roomy = _solve(replace(p, quotas=(("t", 8),)), method)
    assert _actions(roomy) == {"a": "keep", "c": "start"}


def test_a_since_after_the_round_is_refused_naming_the_job() -> None:
    p = _growable(Job("a", "gpt2", 4, 10_000))
    with pytest.raises(ValidationError, match="job 'a' has since 2000, after the round's time 1000"):
        replace(p, running=(replace(p.running[0], since=2000.0),))


@pytest.mark.parametrize("method", ["exact", "rubick"])
def test_a_partitioned_solve_keeps_holds(method: str) -> None:
    cluster = a800_cluster(4, 8)
    jobs = tuple(Job(f"j{i}", "gpt2", 4, 10_000) for i in range(4))
    table = build_round_table(RubickRound(cluster, jobs))
    running = tuple(replace(row_alloc(table, f"j{i}", int(next(k for k in table.configs_of(f"j{i}")
                                                                if table.gpus[k] == 4)), [cluster.nodes[i].name]),
                            since=990.0) for i in range(4))
    p = RubickRound(cluster, jobs, running, time=1000.0, min_hold_s=60.0)
    d = optsched.solve(p, method, time_limit=20, partitions=2)
    assert set(_actions(d).values()) == {"keep"}

"""The objective of a Rubick round (Sec. 3, "cluster throughput as the sum of normalised throughputs"):

``sum_j w_j thr_j / ref_j - reconfig_penalty x #reconfigured - trim_penalty x #trimmed - preempt_penalty x #preempted
- sum_j topology_cost_j``,

where ``ref_j`` is job j's reference throughput (its request's), ``w_j`` its ``weight`` (default 1), each
penalty the job's own (:meth:`~optsched.rounds.rubick.problem.RubickRound.penalties`: the round's
penalties times its weight, or derived from its restart and checkpoint seconds), a running job is *trimmed* when its
choice keeps its plan and its GPUs on the same nodes but changes its CPUs or memory
(:func:`~optsched.rounds.rubick.choice.is_trim`; issue 16, item 5), *reconfigured* when its choice
neither keeps it (:func:`~optsched.rounds.rubick.choice.is_kept`) nor trims it, and *preempted* when it
gets nothing (:func:`~optsched.rounds.rubick.choice.change_penalty`). ``topology_cost_j`` is 0 unless
job j has a ``preferred`` topology rule; then it is :func:`topology_cost`: ``topology_penalty x weight``
per domain of the rule's level beyond the first that its placement spans (issue "A round a real
cluster scheduler can state", item 2; :mod:`optsched.rounds.rubick.constraints`). One function scores
every method, so heuristic and exact decisions compare; every method that compares choices reads the
topology cost from :func:`topology_weight` (the cost per extra domain)."""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence

import numpy as np

from optsched.core.job import Job
from optsched.perf.coefficients import CoefficientTable
from optsched.rounds.rubick.choice import Choice, change_penalty
from optsched.rounds.rubick.constraints import domain_ids, domains_spanned, prefers_topology
from optsched.rounds.rubick.problem import RubickRound


def topology_weight(problem: RubickRound, job: Job) -> float:
    """What each domain beyond the first costs ``job``: ``topology_penalty x weight`` for a preferred
    topology rule, 0 otherwise (module docstring)."""
    if prefers_topology(job) is None:
        return 0.0
    return float(problem.topology_penalty) * float(job.weight)


def topology_rules(problem: RubickRound, jobs: Sequence[str], nodes: Sequence[str]
                   ) -> dict[int, tuple[np.ndarray, bool, float]]:
    """Per index of ``jobs`` with a topology rule that binds or costs something: the domain id of every node
    of ``nodes`` at the rule's level (:func:`~optsched.rounds.rubick.constraints.domain_ids`; a node
    lacking the level has an id of its own), whether the rule is required, and the cost per extra domain
    (:func:`topology_weight`; 0 for a required rule). A preferred rule that costs nothing is left out.
    Levels are read once per call."""
    out: dict[int, tuple[np.ndarray, bool, float]] = {}
    levels: dict[str, np.ndarray] = {}
    for j, name in enumerate(jobs):
        job = problem.job(name)
        rule = job.topology
        if rule is None:
            continue
        required = rule.mode == "required"
        cost = 0.0 if required else topology_weight(problem, job)
        if not required and cost <= 0.0:
            continue
        dom = levels.get(rule.level)
        if dom is None:
            dom = levels[rule.level] = domain_ids(problem, rule.level, nodes)
        out[j] = (dom, required, cost)
    return out


def topology_cost(problem: RubickRound, job: Job, nodes: Iterable[str]) -> float:
    """The topology cost of ``job`` on ``nodes`` (the nodes of its placement): :func:`topology_weight`
    times the domains beyond the first they span (a node lacking the level is a domain of its own)."""
    w = topology_weight(problem, job)
    if w == 0.0:
        return 0.0
    level = prefers_topology(job)
    assert level is not None
    return w * max(domains_spanned(problem, level, nodes) - 1, 0)


def objective(problem: RubickRound, table: CoefficientTable, choices: Mapping[str, Choice]) -> float:
    """Rubick's round objective of ``choices`` (job name -> choice; absent jobs do not run)."""
    ref = table.reference_throughput
    total = 0.0
    topology = any(j.topology is not None for j in problem.jobs)
    # the jobs with a term (running or chosen) in table order: a queued job that waits adds 0
    position = table.job_position
    terms = set(np.flatnonzero(table.current_row >= 0).tolist())
    terms.update(j for j in map(position.get, choices) if j is not None)
    for j in sorted(terms):
        name = table.jobs[j]
        choice = choices.get(name)
        running = table.current_row[j] >= 0
        if choice is not None:
            total += problem.weight(name) * float(table.throughput[choice.row] / ref[j])
            if running:
                total -= change_penalty(problem, table, j, choice)
            if topology:
                total -= topology_cost(problem, problem.job(name), (n for n, _ in choice.parts))
        elif running:
            total -= problem.penalties(name).preempt
    return total


__all__ = ["objective", "topology_cost", "topology_rules", "topology_weight"]

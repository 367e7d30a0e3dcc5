"""A job's hard constraints on its configurations in a Rubick round (issue "A round a real cluster
scheduler can state", items 1-2), written once and read by the table, the round's validation and the
independent feasibility check:

* **GPU range**: a job runs on 0 GPUs (it waits) or on ``min_gpus`` .. ``max_gpus`` GPUs (no upper
  bound when ``max_gpus`` is unset; ``min_gpus`` defaults to 1, so by default any count binds);
* **fixed plan** (``plan_fixed``): the only plan it may run is ``requested_plan`` (the exact plan:
  DP/TP/PP sizes, ZeRO, GA, GC, micro-batches), and so on ``requested_gpus`` GPUs;
* **node count** (``max_nodes``): it spans at most that many nodes (1 = one node);
* **CPU floor** (``min_cpus_per_gpu``): it holds at least that many CPUs per GPU;
* **node selector** (``node_selector``): every node it runs on has each selected label with the
  selected value;
* **node state**: no job gets new GPUs on a ``cordoned`` or ``draining`` node; one that runs on a
  cordoned node may stay, keep or trim in place, or shrink there (it holds at most the GPUs it holds
  there now); one that runs on a draining node must leave it (:func:`must_leave`): its current
  configuration is no candidate, so it moves (a reconfiguration, at ``reconfig_penalty``) or is
  preempted (at ``preempt_penalty``). Draining is a normal round, not an error;
* **topology** (``topology``, a :class:`~optsched.core.job.TopologyRule` on a level of the nodes'
  ``topology`` objects, e.g. ``"rack"``): ``required``: every GPU of the job lies on nodes of *one*
  domain of that level (:func:`topology_broken`); a node whose topology lacks the level is in no
  domain, so a job requiring the level never gets GPUs there (:func:`new_work_mask`) and waits when no
  single domain can hold any of its configurations, even if the cluster could. ``preferred``: not a
  hard rule but a cost in the objective, ``topology_penalty x weight`` per domain beyond the first
  that the job's placement spans, where a node lacking the level is a domain of its own
  (:func:`domains_spanned`; the cost is :func:`~optsched.rounds.rubick.objective.topology_cost`).

The first four are rules on configurations: every method inherits them from the coefficient table,
where a row that breaks one is never a candidate (:func:`admissible_rows`, applied before dominance
so that a dominating row the constraints remove cannot hide an admissible one). The node rules are
rules on nodes: every method reads them from :func:`new_work_mask` (the nodes a job may get new GPUs
on) and :func:`held_on_cordoned` (what it may keep on a cordoned node); a required topology rule is a
rule on the *set* of nodes, which every method keeps by placing a job's parts in one domain (its
domains are :func:`domain_ids`). The independent check reads
:func:`broken` and :func:`node_broken` off each placement. A running job's current configuration
must keep them: a round in which it does not is refused naming the job and the rule
(:func:`check_running`); to change a running job's constraints, change its allocation in the same
round or preempt it first.
"""

from __future__ import annotations

from typing import Iterable, Protocol, Sequence, TypeVar

import numpy as np

from optsched.core.allocation import Placement
from optsched.core.errors import ValidationError
from optsched.core.hardware import Node
from optsched.core.job import Job
from optsched.core.plan import ExecutionPlan
from optsched.core.round import RoundProblem
from optsched.core.skip import JobError


class Configuration(Protocol):
    """What the constraints read of a candidate row (e.g. :class:`~optsched.rounds.rubick.table.CandidateRow`)."""

    @property
    def plan(self) -> ExecutionPlan: ...

    @property
    def gpus_per_node(self) -> tuple[int, ...]: ...

    @property
    def cpus(self) -> int: ...


R = TypeVar("R", bound=Configuration)


def broken(job: Job, plan: ExecutionPlan, gpus_per_node: Sequence[int], cpus: int) -> list[str]:
    """The constraints of ``job`` (module docstring) that a configuration of ``plan`` on parts of
    ``gpus_per_node`` GPUs (one part per node) with ``cpus`` CPUs in all breaks, one phrase each."""
    out = []
    gpus = sum(gpus_per_node)
    if gpus < job.min_gpus or (job.max_gpus is not None and gpus > job.max_gpus):
        top = "" if job.max_gpus is None else f"..{job.max_gpus}"
        out.append(f"{gpus} GPUs outside its range {job.min_gpus}{top} (min_gpus/max_gpus)")
    if job.plan_fixed and plan != job.requested_plan:
        assert job.requested_plan is not None
        out.append(f"plan {plan.label} is not its fixed plan {job.requested_plan.label} (plan_fixed)")
    parts = sum(1 for g in gpus_per_node if g > 0)
    if job.max_nodes is not None and parts > job.max_nodes:
        out.append(f"{parts} nodes, more than max_nodes {job.max_nodes}")
    if job.min_cpus_per_gpu is not None and cpus < job.min_cpus_per_gpu * gpus:
        out.append(f"{cpus} CPUs for {gpus} GPUs, below min_cpus_per_gpu {job.min_cpus_per_gpu}")
    return out


def domain_ids(problem: RoundProblem, level: str, names: Sequence[str]) -> np.ndarray:
    """Per node of ``names``: an integer id of its domain at topology ``level`` (ids ``0 .. D-1`` by
    domain name), or ``D + i`` for the ``i``-th node lacking the level (a domain of its own, module
    docstring); what the methods group nodes by."""
    doms = [problem.cluster.node(n).domain(level) for n in names]
    index = {d: i for i, d in enumerate(sorted({d for d in doms if d is not None}))}
    out = np.empty(len(names), dtype=np.int64)
    lacking = len(index)
    for i, d in enumerate(doms):
        if d is None:
            out[i] = lacking
            lacking += 1
        else:
            out[i] = index[d]
    return out


def domains_spanned(problem: RoundProblem, level: str, nodes: Iterable[str]) -> int:
    """How many domains of topology ``level`` the ``nodes`` span, each node lacking the level a domain of
    its own (module docstring)."""
    seen: set[str] = set()
    lacking = 0
    for name in set(nodes):
        d = problem.cluster.node(name).domain(level)
        if d is None:
            lacking += 1
        else:
            seen.add(d)
    return len(seen) + lacking


def requires_topology(job: Job) -> str | None:
    """The level of ``job``'s required topology rule, None when it has none (or a preferred one)."""
    rule = job.topology
    return rule.level if rule is not None and rule.mode == "required" else None


def prefers_topology(job: Job) -> str | None:
    """The level of ``job``'s preferred topology rule, None when it has none (or a required one)."""
    rule = job.topology
    return rule.level if rule is not None and rule.mode == "preferred" else None


def topology_broken(problem: RoundProblem, job: Job, placement: Placement) -> list[str]:
    """A phrase when ``placement`` breaks ``job``'s required topology rule (module docstring): a node
    lacking the level, or nodes of more than one domain."""
    level = requires_topology(job)
    if level is None:
        return []
    nodes = [name for name, share in placement.shares if share.gpus > 0]
    out = [f"node {name!r} has no {level} domain (topology {level} required)" for name in nodes
           if problem.cluster.node(name).domain(level) is None]
    doms = sorted({d for d in (problem.cluster.node(n).domain(level) for n in nodes) if d is not None})
    if len(doms) > 1:
        out.append(f"its GPUs span {len(doms)} {level} domains ({', '.join(doms)}), topology {level} required "
                   "in one")
    return out


def constrained(job: Job) -> bool:
    """Whether ``job`` states any constraint :func:`broken` checks beyond the defaults."""
    return (job.min_gpus > 1 or job.max_gpus is not None or job.plan_fixed or job.max_nodes is not None
            or job.min_cpus_per_gpu is not None)


def node_constrained(problem: RoundProblem) -> bool:
    """Whether any node of ``problem`` is not ``ready`` or any job selects nodes or requires a topology
    domain (else every node rule holds trivially and the methods skip them)."""
    return (any(n.state != "ready" for n in problem.cluster.nodes)
            or any(j.node_selector or requires_topology(j) is not None for j in problem.jobs))


def node_rule_key(job: Job) -> tuple:
    """What :func:`new_work_mask` of a job depends on (jobs of one key share their node mask)."""
    return job.node_selector, requires_topology(job)


def constraint_key(job: Job) -> tuple:
    """What a job's rows depend on among its constraints (part of the table caches' keys)."""
    return (job.min_gpus, job.max_gpus, job.plan_fixed, job.max_nodes, job.min_cpus_per_gpu)


def admissible_rows(rows: list[R], job: Job) -> list[R]:
    """The rows of ``rows`` that keep every constraint of ``job`` (all of them for a job with none)."""
    if not constrained(job):
        return rows
    return [r for r in rows if not broken(job, r.plan, r.gpus_per_node, r.cpus)]


def check_running(problem: RoundProblem) -> None:
    """``ValidationError`` naming the first running job whose current configuration breaks one of its
    constraints, and the rule (module docstring)."""
    for alloc in problem.running:
        job = problem.job(alloc.job)
        bad = selector_broken(problem, job, alloc.placement) + topology_broken(problem, job, alloc.placement)
        if constrained(job):
            bad += broken(job, alloc.plan, alloc.placement.gpus_per_node, alloc.placement.total_cpus)
        if bad:
            raise JobError(job.name, f"round: running job {job.name!r} breaks its own constraints: "
                                     f"{'; '.join(bad)} (change its allocation or its constraints)")


def selects(job: Job, node: Node) -> bool:
    """Whether ``node`` has every label of ``job``'s node selector with its value."""
    return all(node.label(k) == v for k, v in job.node_selector)


def new_work_mask(problem: RoundProblem, job: Job, names: Sequence[str]) -> np.ndarray:
    """Per node of ``names``: whether ``job`` may get new GPUs there (a ``ready`` node its selector
    matches and, for a job requiring a topology level, that has a domain at that level; its GPU type is
    the rows' business; which one domain is the methods' choice)."""
    nodes = [problem.cluster.node(n) for n in names]
    level = requires_topology(job)
    return np.array([n.state == "ready" and selects(job, n) and (level is None or n.domain(level) is not None)
                     for n in nodes], dtype=bool)


def held_on_cordoned(problem: RoundProblem, job: Job) -> dict[str, int]:
    """Cordoned node -> the GPUs ``job`` holds there now (the most it may hold there this round)."""
    cur = problem.current(job.name)
    if cur is None:
        return {}
    return {n: s.gpus for n, s in cur.placement.shares
            if s.gpus > 0 and problem.cluster.node(n).state == "cordoned"}


def selector_broken(problem: RoundProblem, job: Job, placement: Placement) -> list[str]:
    """A phrase per node of ``placement`` that ``job``'s node selector does not select."""
    if not job.node_selector:
        return []
    want = ", ".join(f"{k}={v}" for k, v in job.node_selector)
    return [f"node {name!r} does not match its node_selector {want}" for name, share in placement.shares
            if share.gpus > 0 and not selects(job, problem.cluster.node(name))]


def node_broken(problem: RoundProblem, job: Job, placement: Placement) -> list[str]:
    """The node rules (module docstring) that ``job`` on ``placement`` breaks, one phrase each (its
    required topology rule included)."""
    out = selector_broken(problem, job, placement) + topology_broken(problem, job, placement)
    held = held_on_cordoned(problem, job)
    for name, share in placement.shares:
        if share.gpus <= 0:
            continue
        node = problem.cluster.node(name)
        if node.state == "cordoned" and share.gpus > held.get(name, 0):
            out.append(f"{share.gpus} GPUs on cordoned node {name!r}, where it held {held.get(name, 0)}")
        elif node.state == "draining":
            out.append(f"GPUs on draining node {name!r}")
    return out


def must_leave(problem: RoundProblem, job: Job) -> bool:
    """Whether ``job`` runs on a draining node: it must move off it (a reconfiguration) or be preempted,
    so its current configuration is no candidate (module docstring)."""
    cur = problem.current(job.name)
    return cur is not None and any(s.gpus > 0 and problem.cluster.node(n).state == "draining"
                                   for n, s in cur.placement.shares)


def check_job(job: Job) -> None:
    """``ValidationError`` when ``job``'s request itself breaks its constraints (a request outside its
    GPU range or its node count cannot be its reference)."""
    if job.requested_gpus < job.min_gpus or (job.max_gpus is not None and job.requested_gpus > job.max_gpus):
        raise ValidationError(f"round: job {job.name!r} requests {job.requested_gpus} GPUs, outside its range "
                              f"min_gpus {job.min_gpus} .. max_gpus {job.max_gpus}")
    if job.min_cpus_per_gpu is not None and 0 < job.requested_cpus < job.min_cpus_per_gpu * job.requested_gpus:
        raise ValidationError(f"round: job {job.name!r} requests {job.requested_cpus} CPUs for {job.requested_gpus} "
                              f"GPUs, below its min_cpus_per_gpu {job.min_cpus_per_gpu}")


__all__ = ["Configuration", "admissible_rows", "broken", "check_job", "check_running", "constrained",
           "constraint_key", "domain_ids", "domains_spanned", "held_on_cordoned", "must_leave", "new_work_mask",
           "node_broken", "node_constrained", "node_rule_key", "prefers_topology", "requires_topology",
           "selector_broken", "selects", "topology_broken"]

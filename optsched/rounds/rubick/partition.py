"""Splitting a Rubick round into independent parts and merging their decisions, for partitioned solving
in the manner of POP (Narayanan et al., "Solving Large-Scale Granular Resource Allocation Problems
Efficiently with POP", SOSP'21): each part holds a share of the nodes and of the jobs, is solved on
its own, and the union of the parts' decisions is a decision for the whole cluster.

Rules (POP leaves the split to the problem; these are ours):

* **Admission first.** Guaranteed jobs are admitted once, on the whole round
  (:func:`~optsched.rounds.rubick.admission.admit`), so a quota is never split: a guaranteed job
  waiting for quota is in no part (it waits; a running one is preempted) and every admitted guaranteed
  job keeps its guarantee in its part. The parts carry no quotas, except where a protected job is
  admitted on one GPU type (quotas per GPU type): it is dealt to a part for that type only and, in its
  part, belongs to a tenant of its own (``<tenant>/<job>``) whose quota is on that type alone (room for
  every job of the part: the round's GPUs times the part's jobs), so the part's admission binds it to
  the same type; the part's other guaranteed tenants then get that room over all types (``"*"``), so
  they are all admitted, as without quotas. The reference throughputs stay the whole round's (no job is pinned).
* **Nodes.** Nodes that a running job spans are kept together (connected components of "a running
  job holds both"), and so are the nodes of one domain of a topology level some job requires when the
  level has at least ``k`` domains (a required-rack job then sees whole racks in its part); the
  components are shuffled with the seed and dealt, largest first, to the part with the fewest GPUs of
  their type so far, so every part gets about ``1/k`` of each GPU type.
* **Jobs.** A running job goes with the part holding its nodes. Queued jobs are shuffled with the
  seed and dealt, most requested GPUs first, to the part of a type they may use with the most GPUs
  neither held by its running jobs nor asked for by the queued jobs dealt to it so far; a job whose
  request exceeds the GPUs of every part it may use is in no part (it waits this round; the message
  names it). When the admitted guaranteed jobs dealt to a part need more GPUs together (minimum
  demands) than the part's nodes can give jobs, the part's job of largest minimum demand is named in
  ``unhosted`` (the part could not keep every guarantee). An admitted guaranteed job that no part can
  hold is not dropped: it is named in
  ``unhosted`` and the partitioned policy solves the round unpartitioned instead
  (:mod:`optsched.policies.partitioned`), so the guarantee is kept or the round reported infeasible.
* **Own models and coefficients.** Every part carries the round's own models and fitted parameters; a
  job with its own coefficient rows takes the rows that fit its part's nodes. When those lose its
  request or, for a running job, its current configuration, it is in no part (the message says so;
  an admitted guaranteed job is ``unhosted``, as above).
* **Merge.** The parts' per-job decisions are joined; the objective is the round's (normalised
  throughputs minus each job's penalty, its topology cost included; a part's reference throughput is
  the whole round's when the nodes of a GPU type are alike, which the catalogue clusters are). The
  union is feasible for the whole cluster because the parts' nodes are disjoint. No bound is
  reported: the parts restrict the round.
* **Deadlines** (:mod:`optsched.rounds.rubick.deadlines`). Deadline jobs are admitted once, on the
  whole round (beside the guaranteed jobs' minimum demands, as for one round). An admitted job goes to
  a part with room for its minimum share: per part and GPU type, the GPUs the round may give jobs
  there less the minimum demands of the guaranteed jobs dealt to it and the shares of the deadline jobs
  placed before it (a queued one, after the other queued jobs are dealt, earliest deadline first, to
  the part with most such room; a running one stays with its nodes). One that no part can hold is
  ``unhosted``, as an admitted guaranteed job (the round is solved whole). At-risk and missed jobs go
  to their parts without their deadline (best-effort there, as on the whole round), so a part admits
  only the jobs the whole round admits. The merged decision reports the whole round's at-risk jobs
  (planned finish at the merged throughput) and missed jobs, and any admitted job its part's own
  admission put at risk.
* **Invalid jobs.** A round that skips invalid jobs is split without them
  (:func:`~optsched.rounds.rubick.table.valid_round`, as every method does); the merged decision lists
  them in ``skipped``, as the method on the whole round would.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Mapping, Sequence

import numpy as np

from optsched.core.coefficient_rows import check_job_rows
from optsched.core.deadline import Deadline
from optsched.core.decision import DeadlineAtRisk, DeadlineMissed, Decision, JobAllocations, JobDecision
from optsched.core.errors import ValidationError
from optsched.core.groups import connected_groups
from optsched.core.hardware import Cluster
from optsched.core.job import Job
from optsched.core.pool import usable_gpu_types
from optsched.core.round import RoundProblem
from optsched.core.skip import SkippedJob
from optsched.perf.coefficients import CoefficientTable
from optsched.perf.lookup import FittedModels, PerfSource
from optsched.rounds.rubick import own_rows
from optsched.rounds.rubick.admission import Admission
from optsched.rounds.rubick.deadlines import NO_DEADLINES, admit_round, finish_at, reports, usable_gpus
from optsched.rounds.rubick.decision import choices_of, to_decision
from optsched.rounds.rubick.priorities import enforce_priorities, prioritised
from optsched.rounds.rubick.constraints import requires_topology
from optsched.rounds.rubick.problem import RubickRound
from optsched.rounds.rubick.quotas import Quotas, QuotaValue
from optsched.rounds.rubick.table import build_round_table, valid_round


@dataclass(frozen=True)
class RoundSplit:
    """The ``parts`` of a round, the jobs in no part (name -> why), the round's admission and the
    admitted guaranteed and deadline jobs that no part can hold (``unhosted``, name -> why; the split
    cannot keep their guarantees or deadlines)."""

    parts: tuple[RubickRound, ...]
    left_out: Mapping[str, str]
    admission: Admission
    unhosted: Mapping[str, str] = field(default_factory=dict)
    #: the round's skipped jobs (module docstring, "Invalid jobs")
    skipped: tuple[SkippedJob, ...] = ()
    #: the whole round's deadline reports, planned finish left out (module docstring, "Deadlines")
    deadline_at_risk: tuple[DeadlineAtRisk, ...] = ()
    deadline_missed: tuple[DeadlineMissed, ...] = ()
    #: the round that was split (its valid jobs) and its table: what the merge enforces priorities on
    whole: RubickRound | None = None
    table: CoefficientTable | None = None


def _components(problem: RubickRound, parts: int) -> list[list[str]]:
    """Groups of node names that a running job spans together, or one domain of a required topology
    level with at least ``parts`` domains (union-find), in cluster order."""
    groups = [[n for n, _ in a.placement.shares] for a in problem.running]
    for level in sorted({lv for j in problem.jobs if (lv := requires_topology(j)) is not None}):
        domains: dict[str, list[str]] = {}
        for n in problem.cluster.nodes:
            d = n.domain(level)
            if d is not None:
                domains.setdefault(d, []).append(n.name)
        if len(domains) >= parts:
            groups.extend(domains.values())
    return connected_groups([n.name for n in problem.cluster.nodes], groups)


def check_parts(problem: RoundProblem, parts: int) -> None:
    """``ValidationError`` unless ``parts`` is an integer from 2 to the round's number of nodes (a part
    holds at least one node); checked before anything is allocated per part."""
    if isinstance(parts, bool) or not isinstance(parts, int) or parts < 2:
        raise ValidationError("partitions must be an integer >= 2 (leave it out for an unpartitioned solve), "
                              f"got {parts!r}")
    if parts > len(problem.cluster.nodes):
        raise ValidationError(f"partitions must be at most the round's number of nodes "
                              f"({len(problem.cluster.nodes)}: a part holds at least one node), got {parts}")


def split_round(problem: RubickRound, parts: int, seed: int, table: CoefficientTable) -> RoundSplit:
    """Split ``problem`` into ``parts`` independent rounds (module docstring); ``table`` is the round's
    coefficient table (for the admission). Deterministic given ``seed``."""
    check_parts(problem, parts)
    rng = np.random.default_rng(seed)
    cluster = problem.cluster
    admission = admit_round(problem, table)
    deadlines = admission.deadlines or NO_DEADLINES
    node_type = {n.name: n.gpu_type for n in cluster.nodes}
    gpus_of = {n.name: problem.free(n.name).gpus for n in cluster.nodes}
    comps = _components(problem, parts)
    order = [comps[i] for i in rng.permutation(len(comps))]
    order.sort(key=lambda c: -sum(gpus_of[n] for n in c))
    part_nodes: list[list[str]] = [[] for _ in range(parts)]
    part_gpus: list[dict[str, int]] = [{} for _ in range(parts)]
    for comp in order:
        t = node_type[comp[0]]
        p = min(range(parts), key=lambda i: (part_gpus[i].get(t, 0), sum(part_gpus[i].values()), i))
        part_nodes[p].extend(comp)
        for n in comp:
            part_gpus[p][node_type[n]] = part_gpus[p].get(node_type[n], 0) + gpus_of[n]
    part_of_node = {n: p for p, nodes in enumerate(part_nodes) for n in nodes}
    left_out: dict[str, str] = dict(admission.waiting)
    jobs_of: list[list[str]] = [[] for _ in range(parts)]
    #: job -> (part, GPU type) it was dealt to
    dealt: dict[str, tuple[int, str]] = {}
    for a in problem.running:
        if a.job not in left_out:
            jobs_of[part_of_node[a.placement.shares[0][0]]].append(a.job)
            dealt[a.job] = (part_of_node[a.placement.shares[0][0]], node_type[a.placement.shares[0][0]])
    queued = [j for j in problem.jobs if problem.current(j.name) is None and j.name not in left_out
              and j.name not in deadlines.admitted]
    queued = [queued[i] for i in rng.permutation(len(queued))]
    queued.sort(key=lambda j: -j.requested_gpus)
    asked: list[dict[str, int]] = [{} for _ in range(parts)]  # GPUs held or requested per part and type
    for a in problem.running:
        if a.job not in left_out:
            p = part_of_node[a.placement.shares[0][0]]
            t = node_type[a.placement.shares[0][0]]
            asked[p][t] = asked[p].get(t, 0) + a.placement.total_gpus
    for job in queued:
        types = [admission.gpu_type[job.name]] if job.name in admission.gpu_type else usable_gpu_types(cluster, job)
        options = [(part_gpus[p].get(t, 0) - asked[p].get(t, 0), -p, p, t) for p in range(parts) for t in types
                   if part_gpus[p].get(t, 0) >= job.requested_gpus]
        if not options:
            left_out[job.name] = (f"its request of {job.requested_gpus} GPUs exceeds the GPUs of every part of the "
                                  f"partitioned round")
            continue
        _, _, p, t = max(options)
        jobs_of[p].append(job.name)
        dealt[job.name] = (p, t)
        asked[p][t] = asked[p].get(t, 0) + job.requested_gpus
    unhosted = _deal_deadline_jobs(problem, admission, part_of_node, dealt, jobs_of, parts)
    unhosted.update(_overfull_parts(problem, admission, part_of_node, jobs_of, left_out, parts))
    subs = []
    for p in range(parts):
        names = set(part_nodes[p])
        if not names:
            continue
        sub_cluster = type(cluster)(f"{cluster.name}/part{p}", tuple(n for n in cluster.nodes if n.name in names),
                                    cluster.gpu_types, cluster.intra_node_gbps, cluster.inter_node_gbps,
                                    cluster.pcie_gbps)
        coefficients = _part_coefficients(problem, jobs_of[p], sub_cluster, left_out)
        members = {n for n in jobs_of[p] if n not in left_out}
        jobs, quotas = _part_tenancy(problem, tuple(_part_job(j, deadlines.admitted) for j in problem.jobs
                                                    if j.name in members), admission)
        # every other field of the round (penalties, round interval, ...) carries over unchanged
        subs.append(replace(
            problem, cluster=sub_cluster, jobs=jobs, running=tuple(a for a in problem.running if a.job in members),
            occupied=tuple((n, s) for n, s in problem.occupied if n in names), quotas=quotas, coefficients=coefficients,
            skipped=()))
    unhosted.update({name: why for name, why in left_out.items()
                     if name in admission.protected or name in deadlines.admitted})
    at_risk, missed = reports(problem, table, admission, {})
    return RoundSplit(tuple(subs), left_out, admission, unhosted, problem.skipped, at_risk, missed, problem, table)


def _part_tenancy(problem: RubickRound, jobs: tuple[Job, ...], admission: Admission) -> tuple[tuple[Job, ...], Quotas]:
    """A part's ``jobs`` and quotas (module docstring, "Admission first"): no quotas unless a job of the
    part is admitted on one GPU type; then each such job gets a tenant of its own with room for every job
    of the part on that type, and the part's other guaranteed tenants that room over all types."""
    if not any(j.name in admission.gpu_type for j in jobs):
        return jobs, ()
    room = problem.cluster.total_gpus * len(jobs)  # more than the minRes of every job of the part together
    tenants = {j.tenant for j in problem.jobs}
    quotas: dict[str, QuotaValue] = {j.tenant: room for j in jobs if j.guaranteed}
    out = []
    for job in jobs:
        gtype = admission.gpu_type.get(job.name)
        if gtype is not None:
            own = f"{job.tenant}/{job.name}"
            while own in tenants or own in quotas:
                own += "'"
            quotas[own] = ((gtype, room),)
            job = replace(job, tenant=own)
        out.append(job)
    return tuple(out), tuple(sorted(quotas.items()))


def _part_job(job: Job, admitted: Mapping[str, object]) -> Job:
    """``job`` as its part sees it: without its deadline unless the whole round admitted it (module
    docstring, "Deadlines")."""
    return job if job.deadline is None or job.name in admitted else replace(job, deadline=None)


def _deal_deadline_jobs(problem: RubickRound, admission: Admission, part_of_node: Mapping[str, int],
                        dealt: dict[str, tuple[int, str]], jobs_of: list[list[str]], parts: int) -> dict[str, str]:
    """Deal the admitted queued deadline jobs to parts with room for their minimum shares, and check the
    running ones' parts (module docstring, "Deadlines"); returns the admitted jobs no part can hold."""
    deadlines = admission.deadlines or NO_DEADLINES
    if not deadlines.admitted:
        return {}
    node_type = {n.name: n.gpu_type for n in problem.cluster.nodes}
    room: list[dict[str, int]] = [{} for _ in range(parts)]
    for node, gpus in usable_gpus(problem, by_node=True).items():
        p, t = part_of_node[node], node_type[node]
        room[p][t] = room[p].get(t, 0) + gpus
    for name, need in admission.protected.items():
        if name in dealt and name not in deadlines.admitted:
            p, t = dealt[name]
            room[p][t] = room[p].get(t, 0) - need
    unhosted: dict[str, str] = {}
    for name, share in deadlines.admitted.items():
        t, g = share
        if problem.current(name) is not None:
            p = dealt[name][0]
            if room[p].get(t, 0) < g:
                unhosted[name] = (f"the part holding its nodes has {room[p].get(t, 0)} {t} GPUs left for the "
                                  f"minimum share ({g}) of its deadline")
                continue
        else:
            options = [(room[p].get(t, 0), -p, p) for p in range(parts) if room[p].get(t, 0) >= g]
            if not options:
                unhosted[name] = f"no part has room for the minimum share ({g} {t} GPUs) of its deadline"
                continue
            p = max(options)[2]
            jobs_of[p].append(name)
            dealt[name] = (p, t)
        room[p][t] -= g
    return unhosted


def _overfull_parts(problem: RubickRound, admission: Admission, part_of_node: Mapping[str, int],
                    jobs_of: Sequence[Sequence[str]], left_out: Mapping[str, str], parts: int) -> dict[str, str]:
    """The admitted guaranteed jobs of each part whose minimum demands together exceed the GPUs the round
    may give jobs on the part's nodes (module docstring, "Jobs"), as ``unhosted`` entries naming the
    part's job of largest minimum demand: such a part cannot reach every guarantee (a minimum demand is
    the fewest GPUs of any row, on any type, reaching the job's reference throughput)."""
    usable = [0] * parts
    for node, gpus in usable_gpus(problem, by_node=True).items():
        usable[part_of_node[node]] += gpus
    out: dict[str, str] = {}
    for p in range(parts):
        needs = {n: admission.protected[n] for n in jobs_of[p] if n in admission.protected and n not in left_out}
        if needs and sum(needs.values()) > usable[p]:
            top = max(sorted(needs), key=lambda n: needs[n])
            out[top] = (f"the admitted guaranteed jobs of its part ({len(needs)}) need at least {sum(needs.values())} "
                        f"GPUs together, the part's nodes have {usable[p]}")
    return out


def _part_coefficients(problem: RubickRound, names: Sequence[str], cluster: Cluster,
                       left_out: dict[str, str]) -> tuple:
    """The own coefficient rows of the jobs ``names`` that fit ``cluster`` (a part's nodes); a job that
    loses its request or current row goes to ``left_out`` (module docstring)."""
    out = []
    for name in names:
        given = problem.own_rows(name)
        if given is None:
            continue
        job = problem.job(name)
        keep = set()
        for i, row in enumerate(given):
            try:
                check_job_rows(job, (row,), cluster)
            except ValidationError:
                continue
            keep.add(i)
        cur = own_rows.current_index(problem, job, given)
        needed = set(own_rows.request_rows(problem, job, given).values()) | ({cur} if cur is not None else set())
        if not needed <= keep:
            left_out[name] = "its own coefficient rows for its request or running configuration do not fit its part"
            continue
        out.append((name, tuple(given[i] for i in sorted(keep))))
    return tuple(out)


def merge_decisions(problem: RubickRound, split: RoundSplit, decisions: Sequence[Decision], *, method: str,
                    solve_seconds: float, message: str = "") -> Decision:
    """The decision for the whole round from the parts' ``decisions`` (module docstring, "Merge"):
    status ``partial`` when a part's is, ``heuristic`` when every part's is a heuristic's, else
    ``feasible`` (no bound)."""
    by_job: dict[str, JobDecision] = {}
    at_risk: dict[str, DeadlineAtRisk] = {}  # admitted jobs a part's own admission put at risk
    for d in decisions:
        for x in d.jobs:
            by_job[x.job] = x
        at_risk.update((e.job, e) for e in getattr(d.payload, "deadline_at_risk", ()))
    jobs: list[JobDecision] = []
    skipped = {s.job for s in split.skipped}
    for job in problem.jobs:
        if job.name in skipped:
            continue
        x = by_job.get(job.name)
        if x is None:
            running = problem.current(job.name) is not None
            why = split.left_out.get(job.name, "in no part of the partitioned round")
            x = JobDecision(job.name, None, 0.0, 0.0, "preempt" if running else "wait", False, why,
                            problem.penalties(job.name).preempt if running else 0.0)
        jobs.append(x)
    running = {x.job: x.throughput for x in jobs if x.allocation is not None}
    at_risk.update((e.job, replace(e, planned_finish=finish_at(problem, e.job, running.get(e.job, 0.0))))
                   for e in split.deadline_at_risk)
    order = {job.name: i for i, job in enumerate(problem.jobs)}
    payload = JobAllocations(tuple(jobs), deadline_missed=split.deadline_missed,
                             deadline_at_risk=tuple(sorted(at_risk.values(), key=lambda e: order[e.job])))
    # each entry's penalty is what its action and placement cost the objective, its job's own
    # (RubickRound.penalties and the topology cost; rounds/rubick/decision.py)
    objective = sum(problem.weight(x.job) * x.normalised - x.penalty for x in jobs)
    statuses = {d.status for d in decisions}
    status = ("partial" if "partial" in statuses else
              "heuristic" if statuses <= {"heuristic"} else "feasible")
    h = [d.heuristic_objective for d in decisions]
    notes = [message]
    if split.left_out:
        shown = "; ".join(f"{n!r}: {why}" for n, why in list(split.left_out.items())[:10])
        notes.append(f"in no part ({len(split.left_out)} job(s)): {shown}")
    notes.extend(f"part {i}: {d.message}" for i, d in enumerate(decisions) if d.message)
    merged = Decision(problem.kind, method, status, float(objective), payload, None, None,
                      solve_seconds, None if any(v is None for v in h) else float(sum(h)),  # type: ignore[arg-type]
                      any(d.warm_start for d in decisions), "; ".join(n for n in notes if n), split.skipped)
    return _across_parts(merged, split)


def _across_parts(merged: Decision, split: RoundSplit) -> Decision:
    """``merged`` with the priority rule made to hold across parts (each part kept it within itself; a job
    of one part may still wait while a job of lower priority runs in another:
    :mod:`optsched.rounds.rubick.priorities`)."""
    whole, table = split.whole, split.table
    if whole is None or table is None or not prioritised(whole):
        return merged
    done = enforce_priorities(whole, table, choices_of(merged, table, whole), split.admission)
    if not done.changed:
        return merged
    decision = to_decision(whole, table, done.choices, method=merged.method, status=merged.status,
                           solve_seconds=merged.solve_seconds, warm_start=merged.warm_start,
                           message=f"{merged.message}; {done.note()}" if merged.message else done.note(),
                           admission=split.admission, reasons=done.reasons(whole))
    return replace(decision, heuristic_objective=merged.heuristic_objective, skipped=merged.skipped)


#: the share of the time left that the split's table may take (Rubick; the parts get the rest): the whole round's
#: table took 1.1 s of a 1 s limit at 20,000 jobs, and the round was then solved whole past its limit
SPLIT_SHARE = 0.4


class RubickPartitioner:
    """The round kind's partitioner (:class:`~optsched.core.kinds.Partitioner`)."""

    def check(self, problem: RubickRound, parts: int) -> None:
        check_parts(problem, parts)

    def split(self, problem: RubickRound, parts: int, seed: int, perf_models: FittedModels | None = None,
              deadline: Deadline | None = None) -> RoundSplit:
        """:func:`split_round` on the round's table, built within :data:`SPLIT_SHARE` of what is left of
        ``deadline`` (the parts, which build their own tables, get the rest; once the split's share has
        passed, the jobs not done yet have short blocks, :func:`~optsched.rounds.rubick.table.build_round_table`,
        and the split deals them by their request alone)."""
        check_parts(problem, parts)
        lookup = PerfSource(perf_models).lookup_for(problem.cluster, problem.own_models, problem.perf_params)
        problem = valid_round(problem, lookup)
        mine = None if deadline is None else deadline.earlier((1.0 - SPLIT_SHARE) * max(deadline.remaining(), 0.0))
        return split_round(problem, parts, seed, build_round_table(problem, lookup, deadline=mine))

    def merge(self, problem: RubickRound, split: RoundSplit, decisions: Sequence[Decision], *, method: str,
              solve_seconds: float, message: str = "") -> Decision:
        return merge_decisions(problem, split, decisions, method=method, solve_seconds=solve_seconds,
                               message=message)


__all__ = ["RoundSplit", "RubickPartitioner", "check_parts", "merge_decisions", "split_round"]

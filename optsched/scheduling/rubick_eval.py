"""What every Rubick round policy shares: who is protected by a guarantee, how a chosen table row
lands on nodes, the objective, and the feasibility check every returned decision passes.

* **Admission** (Rubick Sec. 5, Algorithm 1 lines 2-3): a guaranteed job is *protected* — it must
  reach its reference throughput — when its tenant's remaining quota covers its minimum demand. The
  quota usage of a job is its minRes GPU count ("We consider the quota usage of each job as its
  minimum demand"), here the fewest GPUs of any table row reaching the reference throughput.
  Running guaranteed jobs are admitted first, then queued ones, each group by submission time and
  name. A guaranteed job that does not fit its quota is not scheduled this round (it waits, as in
  Algorithm 1, which only schedules privileged jobs within quota).
* **Deferral** (the paper is silent; :meth:`Admission.defer`): a protected job whose guarantee cannot
  be reached this round (node shapes, not GPU counts) may be *deferred*: it moves to ``waiting`` and
  is treated for the round exactly like a guaranteed job waiting for quota (does not run; a running
  one is preempted). Its quota share is not handed to the next guaranteed job in line: admission is
  not recomputed, so a later job cannot take the quota of a deferred one and keep it in later rounds
  (running jobs are admitted first).
* **Objective** (Sec. 3, "cluster throughput as the sum of normalised throughputs"):
  ``sum_j thr_j / ref_j - reconfig_penalty x #reconfigured - preempt_penalty x #preempted``, where a
  running job is *kept* when it runs its current row on exactly its current per-node shares.
* **Placement of a row**: a row's shape (GPUs per node) is mapped to distinct nodes of its GPU type;
  the part of s GPUs of a row with G GPUs, C CPUs and M GiB gets ``ceil(C s / G)`` CPUs and ``M s / G``
  GiB. A kept job keeps its exact current shares.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from optsched.core.allocation import Allocation, NodeShare, Placement
from optsched.core.errors import ValidationError
from optsched.core.round import Decision, JobDecision, RoundProblem
from optsched.perf.coefficients import CoefficientTable

#: relative tolerance of "reaches the reference throughput"
GUARANTEE_RTOL = 1e-9

#: a job's choice: table row and the nodes of its parts, ``((node, gpus), ...)``
Choice = tuple[int, tuple[tuple[str, int], ...]]


def _check_table(problem: RoundProblem, table: CoefficientTable) -> None:
    if table.jobs != tuple(j.name for j in problem.jobs):
        raise ValidationError("coefficient table: its jobs must be the round's jobs, in the round's order")
    if table.reference_throughput is None or table.current_row is None:
        raise ValidationError("coefficient table: a round table needs reference_throughput and current_row")


def reaches_guarantee(table: CoefficientTable, rows: np.ndarray | int) -> np.ndarray:
    """Whether each row reaches its job's reference throughput."""
    rows = np.atleast_1d(np.asarray(rows, dtype=np.int64))
    ref = table.reference_throughput[table.job_index[rows]]
    return table.throughput[rows] >= ref * (1.0 - GUARANTEE_RTOL)


def min_demand_gpus(table: CoefficientTable, job: int) -> int | None:
    """minRes GPU count of job index ``job``: fewest GPUs of a row reaching its reference (None: none)."""
    rows = np.flatnonzero(table.job_index == job)
    ok = rows[reaches_guarantee(table, rows)] if rows.size else rows
    return int(table.gpus[ok].min()) if ok.size else None


@dataclass(frozen=True)
class Admission:
    """Protected jobs (name -> quota GPUs) and guaranteed jobs left waiting (name -> reason)."""

    protected: Mapping[str, int]
    waiting: Mapping[str, str]

    def defer(self, reasons: Mapping[str, str]) -> "Admission":
        """This admission with the protected jobs of ``reasons`` (job name -> why its guarantee cannot
        be reached this round) moved to ``waiting`` (module docstring, "Deferral"); the others keep
        their quota GPUs, nobody else is admitted. ``ValidationError`` for a job that is not protected."""
        unknown = sorted(name for name in reasons if name not in self.protected)
        if unknown:
            raise ValidationError(f"admission: cannot defer {', '.join(map(repr, unknown))}: only protected "
                                  f"guaranteed jobs can be deferred (protected: {', '.join(sorted(self.protected))})")
        protected = {name: need for name, need in self.protected.items() if name not in reasons}
        waiting = dict(self.waiting)
        waiting.update({name: f"performance guarantee deferred this round: {why}" for name, why in reasons.items()})
        return Admission(protected, waiting)


def admit(problem: RoundProblem, table: CoefficientTable) -> Admission:
    """Admission of guaranteed jobs against tenant quotas (module docstring)."""
    _check_table(problem, table)
    guaranteed = [j for j in problem.jobs if j.guaranteed]
    order = sorted(guaranteed, key=lambda j: (problem.current(j.name) is None, j.submit_time, j.name))
    used: dict[str, int] = {}
    protected: dict[str, int] = {}
    waiting: dict[str, str] = {}
    for job in order:
        need = min_demand_gpus(table, table.jobs.index(job.name))
        if need is None:
            waiting[job.name] = "no configuration of the table reaches the throughput of its request"
            continue
        quota = problem.quota_of(job.tenant)
        if quota is not None and used.get(job.tenant, 0) + need > quota:
            waiting[job.name] = (f"tenant {job.tenant!r} quota {quota} GPUs: {used.get(job.tenant, 0)} in use, "
                                 f"job needs {need}")
            continue
        used[job.tenant] = used.get(job.tenant, 0) + need
        protected[job.name] = need
    return Admission(protected, waiting)


def part_share(table: CoefficientTable, row: int, gpus: int) -> tuple[int, float]:
    """(CPUs, GiB) of the part of ``gpus`` GPUs of ``row`` (module docstring)."""
    g = int(table.gpus[row])
    return math.ceil(int(table.cpus[row]) * gpus / g - 1e-9), float(table.mem_gib[row]) * gpus / g


def is_kept(problem: RoundProblem, table: CoefficientTable, job: int, choice: Choice | None) -> bool:
    """Whether ``choice`` keeps running job index ``job`` exactly as it runs."""
    cur_row = int(table.current_row[job])
    if choice is None or cur_row < 0:
        return False
    cur = problem.current(table.jobs[job])
    assert cur is not None
    return (table.plans[choice[0]] == cur.plan
            and sorted(choice[1]) == sorted((n, s.gpus) for n, s in cur.placement.shares if s.gpus > 0)
            and (choice[0] == cur_row or (table.cpus[choice[0]] == cur.placement.total_cpus
                                          and abs(table.mem_gib[choice[0]] - cur.placement.total_mem_gib) < 1e-9)))


def placement_of(problem: RoundProblem, table: CoefficientTable, job: int, choice: Choice) -> Placement:
    """The per-node shares of ``choice`` (module docstring; a kept job keeps its exact shares)."""
    if is_kept(problem, table, job, choice):
        cur = problem.current(table.jobs[job])
        assert cur is not None
        return cur.placement
    shares = {}
    for node, gpus in choice[1]:
        cpus, mem = part_share(table, choice[0], gpus)
        shares[node] = NodeShare(gpus, cpus, mem)
    return Placement.of(shares)


def objective(problem: RoundProblem, table: CoefficientTable, choices: Mapping[str, Choice]) -> float:
    """Rubick's round objective of ``choices`` (job name -> choice; absent jobs do not run)."""
    ref = table.reference_throughput
    total = 0.0
    for j, name in enumerate(table.jobs):
        choice = choices.get(name)
        running = table.current_row[j] >= 0
        if choice is not None:
            total += float(table.throughput[choice[0]] / ref[j])
            if running and not is_kept(problem, table, j, choice):
                total -= problem.reconfig_penalty
        elif running:
            total -= problem.preempt_penalty
    return total


def violations(problem: RoundProblem, table: CoefficientTable, choices: Mapping[str, Choice],
               admission: Admission | None = None) -> list[str]:
    """Every rule ``choices`` breaks (empty list: feasible): rows of the right job, shapes on distinct
    nodes of the row's GPU type, node capacities in GPUs, CPUs and memory, protected jobs reaching
    their reference throughput, waiting guaranteed jobs not running."""
    _check_table(problem, table)
    admission = admission or admit(problem, table)
    out: list[str] = []
    used: dict[str, list[float]] = {n.name: [0, 0, 0.0] for n in problem.cluster.nodes}
    for name, choice in choices.items():
        if name not in table.jobs:
            out.append(f"job {name!r} is not in the round")
            continue
        j = table.jobs.index(name)
        row, parts = choice
        if not 0 <= row < len(table) or table.job_index[row] != j:
            out.append(f"job {name!r}: row {row} is not one of its configurations")
            continue
        nodes = [n for n, _ in parts]
        if len(set(nodes)) != len(nodes):
            out.append(f"job {name!r}: a node appears twice in its placement")
        if tuple(sorted((g for _, g in parts), reverse=True)) != table.gpus_per_node[row]:
            out.append(f"job {name!r}: placement {parts} does not have the shape {table.gpus_per_node[row]} of its row")
        for node, _ in parts:
            if node not in used:
                out.append(f"job {name!r}: unknown node {node!r}")
            elif problem.cluster.node(node).gpu_type != table.gpu_type[row]:
                out.append(f"job {name!r}: node {node!r} is not of GPU type {table.gpu_type[row]}")
        if any(n not in used for n in nodes):
            continue
        for n, s in placement_of(problem, table, j, choice).shares:
            u = used[n]
            u[0] += s.gpus
            u[1] += s.cpus
            u[2] += s.mem_gib
        if name in admission.waiting:
            out.append(f"job {name!r} runs although it waits for quota ({admission.waiting[name]})")
    for name in admission.protected:
        choice = choices.get(name)
        if choice is None:
            out.append(f"guaranteed job {name!r} does not run")
        elif not reaches_guarantee(table, choice[0])[0]:
            j = table.jobs.index(name)
            out.append(f"guaranteed job {name!r} gets {table.throughput[choice[0]]:.4g} samples/s, below the "
                       f"{table.reference_throughput[j]:.4g} of its request")
    for n, u in used.items():
        free = problem.free(n)
        for value, cap, unit in ((u[0], free.gpus, "GPUs"), (u[1], free.cpus, "CPUs"), (u[2], free.mem_gib, "GiB")):
            if value > cap + 1e-6:
                out.append(f"node {n!r}: {value:g} {unit} allocated, {cap:g} free")
    return out


def to_decision(problem: RoundProblem, table: CoefficientTable, choices: Mapping[str, Choice], *, method: str,
                status: str, bound: float | None = None, solve_seconds: float = 0.0,
                heuristic_objective: float | None = None, warm_start: bool = False, message: str = "",
                admission: Admission | None = None) -> Decision:
    """A :class:`Decision` from ``choices``; the objective is recomputed here so every method is
    scored by the same function."""
    admission = admission or admit(problem, table)
    obj = objective(problem, table, choices)
    jobs: list[JobDecision] = []
    for j, name in enumerate(table.jobs):
        choice = choices.get(name)
        running = table.current_row[j] >= 0
        protected = name in admission.protected
        if choice is None:
            jobs.append(JobDecision(name, None, 0.0, 0.0, "preempt" if running else "wait", protected))
            continue
        alloc = Allocation(name, table.plans[choice[0]], placement_of(problem, table, j, choice))
        action = "start" if not running else ("keep" if is_kept(problem, table, j, choice) else "reconfigure")
        thr = float(table.throughput[choice[0]])
        jobs.append(JobDecision(name, alloc, thr, thr / float(table.reference_throughput[j]), action, protected))
    gap = None
    if bound is not None:
        gap = max(0.0, (bound - obj) / max(abs(bound), 1e-9))
    return Decision(problem.kind, method, status, obj, tuple(jobs), bound, gap, solve_seconds, heuristic_objective,
                    warm_start, message)


def heuristic_decision(problem: RoundProblem, table: CoefficientTable, choices: Mapping[str, Choice], *,
                       method: str, started: float, admission: Admission | None = None,
                       message: str = "") -> Decision:
    """The :class:`Decision` of a heuristic (status ``heuristic``, its own objective as
    ``heuristic_objective``), timed from ``started`` (a ``time.perf_counter()`` reading)."""
    return to_decision(problem, table, choices, method=method, status="heuristic",
                       solve_seconds=time.perf_counter() - started,
                       heuristic_objective=objective(problem, table, choices), message=message, admission=admission)


def choices_of(decision: Decision, table: CoefficientTable, problem: RoundProblem) -> dict[str, Choice]:
    """Recover table choices from a decision (the row with the decision's plan, shape, GPU type and
    CPUs; the current row for kept jobs). Raises ``ValidationError`` when a job's allocation matches
    no row."""
    out: dict[str, Choice] = {}
    for d in decision.jobs:
        if d.allocation is None:
            continue
        j = table.jobs.index(d.job)
        a = d.allocation
        parts = tuple((n, s.gpus) for n, s in a.placement.shares if s.gpus > 0)
        rows = table.configs_of(d.job)
        gtype = problem.cluster.node(parts[0][0]).gpu_type
        cand = [int(k) for k in rows if table.plans[k] == a.plan and table.gpus_per_node[k] == a.placement.gpus_per_node
                and table.gpu_type[k] == gtype]
        if d.action == "keep" and int(table.current_row[j]) in cand:
            out[d.job] = (int(table.current_row[j]), parts)
            continue
        cand = [k for k in cand if table.cpus[k] == a.placement.total_cpus] or cand
        if not cand:
            raise ValidationError(f"decision of job {d.job!r}: plan {a.plan.label} on {a.placement.gpus_per_node} "
                                  "matches no configuration of the table")
        out[d.job] = (max(cand, key=lambda k: table.throughput[k]), parts)
    return out


__all__ = ["Admission", "Choice", "GUARANTEE_RTOL", "admit", "choices_of", "heuristic_decision", "is_kept",
           "min_demand_gpus", "objective", "part_share", "placement_of", "reaches_guarantee", "to_decision",
           "violations"]

"""A job's hard constraints on its configurations in a Rubick round (issue "A round a real cluster
scheduler can state", items 1-2), written once and read by the table, the round's validation and the
independent feasibility check:

* **GPU range**: a job runs on 0 GPUs (it waits) or on ``min_gpus`` .. ``max_gpus`` GPUs (no upper
  bound when ``max_gpus`` is unset; ``min_gpus`` defaults to 1, so by default any count binds);
* **fixed plan** (``plan_fixed``): the only plan it may run is ``requested_plan`` (the exact plan:
  DP/TP/PP sizes, ZeRO, GA, GC, micro-batches), and so on ``requested_gpus`` GPUs;
* **node count** (``max_nodes``): it spans at most that many nodes (1 = one node);
* **CPU floor** (``min_cpus_per_gpu``): it holds at least that many CPUs per GPU.

Every method inherits them from the coefficient table: a row that breaks one is never a candidate
(:func:`admissible_rows`, applied before dominance so that a dominating row the constraints remove
cannot hide an admissible one). A running job's current configuration must keep them: a round in
which it does not is refused naming the job and the rule (:func:`check_running`); to change a running
job's constraints, change its allocation in the same round or preempt it first.
"""

from __future__ import annotations

from typing import Protocol, Sequence, TypeVar

from optsched.core.errors import ValidationError
from optsched.core.skip import JobError
from optsched.core.job import Job
from optsched.core.plan import ExecutionPlan
from optsched.core.round import RoundProblem


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


def constrained(job: Job) -> bool:
    """Whether ``job`` states any constraint :func:`broken` checks beyond the defaults."""
    return (job.min_gpus > 1 or job.max_gpus is not None or job.plan_fixed or job.max_nodes is not None
            or job.min_cpus_per_gpu is not None)


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
        if not constrained(job):
            continue
        bad = broken(job, alloc.plan, alloc.placement.gpus_per_node, alloc.placement.total_cpus)
        if bad:
            raise JobError(job.name, f"round: running job {job.name!r} breaks its own constraints: "
                                     f"{'; '.join(bad)} (change its allocation or its constraints)")


def check_job(job: Job) -> None:
    """``ValidationError`` when ``job``'s request itself breaks its constraints (a request outside its
    GPU range or its node count cannot be its reference)."""
    if job.requested_gpus < job.min_gpus or (job.max_gpus is not None and job.requested_gpus > job.max_gpus):
        raise ValidationError(f"round: job {job.name!r} requests {job.requested_gpus} GPUs, outside its range "
                              f"min_gpus {job.min_gpus} .. max_gpus {job.max_gpus}")
    if job.min_cpus_per_gpu is not None and 0 < job.requested_cpus < job.min_cpus_per_gpu * job.requested_gpus:
        raise ValidationError(f"round: job {job.name!r} requests {job.requested_cpus} CPUs for {job.requested_gpus} "
                              f"GPUs, below its min_cpus_per_gpu {job.min_cpus_per_gpu}")


__all__ = ["Configuration", "admissible_rows", "broken", "check_job", "check_running", "constrained", "constraint_key"]

"""Objective, feasibility check and decision assembly of ``placement`` rounds (thesis Sec. 3.5.3).

**Objective** (maximised; "reduce fragmentation", "fewest servers"): the usable servers (training and
on-loan) left without any worker, minus ``M`` per unplaced worker, ``M`` = usable servers + 1, so that
placing one more worker always counts more than emptying a server.

**Feasibility** (:func:`violations`): every share on a usable server, within its free GPUs (capacity
minus outside work) summed over jobs; whole workers of the job on that pool; each job on one pool,
inference only when fungible; a running job keeps its base shares; a job's placed workers plus its
unplaced ones make its count; a placed queued job has at least its base demand.
"""

from __future__ import annotations

from optsched.core.decision import Decision, relative_gap
from optsched.core.errors import InfeasibleError
from optsched.rounds.lyra.jobs import base_workers
from optsched.rounds.lyra.problem import INFERENCE
from optsched.rounds.placement.payload import WorkerPlacement
from optsched.rounds.placement.problem import PlacementRound


def objective(problem: PlacementRound, payload: WorkerPlacement) -> float:
    """The round objective (module docstring)."""
    used = {n for p in payload.placements for n in p.gpus_per_node()}
    usable = problem.usable_nodes
    idle = sum(1 for n in usable if n not in used)
    return float(idle - (len(usable) + 1) * sum(w for _, w in payload.unplaced))


def violations(problem: PlacementRound, payload: WorkerPlacement) -> list[str]:
    """Every broken rule (module docstring), naming job or node; empty when feasible."""
    out: list[str] = []
    usable = set(problem.usable_nodes)
    held: dict[str, int] = {}
    unplaced = dict(payload.unplaced)
    for p in payload.placements:
        job = problem.job(p.job)
        shares = p.gpus_per_node()
        pools = {problem.pool(n) for n in shares}
        if len(pools) > 1:
            out.append(f"job {p.job!r} spans both pools")
        if INFERENCE in pools and not job.fungible:
            out.append(f"job {p.job!r} is on inference servers but not fungible")
        workers = 0
        for n, g in shares.items():
            if n not in usable:
                out.append(f"job {p.job!r} is placed on {n!r}, which is not a usable server")
                continue
            held[n] = held.get(n, 0) + g
            wg = problem.worker_gpus(job, n)
            if g % wg:
                out.append(f"job {p.job!r} holds {g} GPUs on {n!r}, not whole workers of {wg}")
            workers += g // wg
        base = sum(g // problem.worker_gpus(job, n) for n, g in p.base)
        target = problem.target(p.job)
        want = 0 if target is None else target.workers
        if workers + unplaced.get(p.job, 0) != want:
            out.append(f"job {p.job!r} has {workers} workers placed and {unplaced.get(p.job, 0)} unplaced, "
                       f"its count is {want}")
        if problem.current(p.job) is not None and dict(p.base) != problem.base_of(p.job):
            out.append(f"running job {p.job!r} moved its base workers")
        if base < base_workers(job):
            out.append(f"job {p.job!r} runs {base} base workers, below its base demand {base_workers(job)}")
    for n, g in held.items():
        free = problem.free_gpus(n)
        if g > free:
            out.append(f"server {n!r} is given {g} GPUs, {free} are free")
    return out


def placement_decision(problem: PlacementRound, payload: WorkerPlacement, *, method: str, status: str,
                       solve_seconds: float, bound: float | None = None, heuristic_objective: float | None = None,
                       warm_start: bool = False, message: str = "") -> Decision:
    """The decision of ``payload``, scored by :func:`objective`; a heuristic's decision (status
    ``heuristic``) reports its own objective as ``heuristic_objective`` (:mod:`optsched.core.decision`).
    A placement breaking a rule of the round (:func:`violations`) is a bug of the method:
    ``InfeasibleError`` listing the rules."""
    broken = violations(problem, payload)
    if broken:
        raise InfeasibleError(f"method {method!r} produced an infeasible placement", tuple(broken[:10]))
    obj = objective(problem, payload)
    if status == "heuristic":
        heuristic_objective = obj
    return Decision(problem.kind, method, status, obj, payload, bound=bound, gap=relative_gap(bound, obj),
                    solve_seconds=solve_seconds, heuristic_objective=heuristic_objective, warm_start=warm_start,
                    message=message)


__all__ = ["objective", "placement_decision", "violations"]

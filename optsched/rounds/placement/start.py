"""Where placing starts (thesis Sec. 3.5.3), shared by best-fit decreasing and the exact packing:
running jobs keep their base workers and as many of their flexible workers as their count allows
(scaling in removes flexible workers from the servers where the job has the fewest first, so that
servers empty out); the workers to place per job, in decreasing order of per-worker GPU demand (then
more workers first, then name); and the pools a job may use, in the order tried (a running job stays
on its pool; a count may name the pool; with Lyra's preferences an elastic job tries the inference
pool first, an inelastic one the training pool first; only fungible jobs use inference servers)."""

from __future__ import annotations

from dataclasses import dataclass

from optsched.rounds.lyra.jobs import base_workers, is_elastic
from optsched.rounds.lyra.problem import INFERENCE, TRAINING
from optsched.rounds.lyra_allocate.capacity import current_pool
from optsched.rounds.placement.problem import PlacementRound


@dataclass(frozen=True)
class StartState:
    """What stays before anything is placed: base and kept flexible GPUs per node of running jobs, and
    the workers to place per job, (job, base workers, flexible workers), in placement order."""

    base: dict[str, dict[str, int]]
    flex: dict[str, dict[str, int]]
    todo: tuple[tuple[str, int, int], ...]


def start_state(problem: PlacementRound) -> StartState:
    """The :class:`StartState` of a round (module docstring: running jobs keep base and flexible
    workers up to their count; decreasing per-worker GPUs, more workers, name)."""
    base: dict[str, dict[str, int]] = {}
    flex: dict[str, dict[str, int]] = {}
    todo: list[tuple[int, int, str, int, int]] = []   # the sort key first: (-GPUs a worker, -workers, name)
    for c in problem.workers:
        job = problem.job(c.job)
        if problem.current(c.job) is not None:
            base[c.job] = problem.base_of(c.job)
            flex[c.job] = _scale_in(problem, c.job, c.workers)
            have = sum(g // problem.worker_gpus(job, n) for held in (base[c.job], flex[c.job]) for n, g in held.items())
            if c.workers > have:
                todo.append((-job.gpus_per_worker, have - c.workers, c.job, 0, c.workers - have))
        elif c.workers > 0:
            todo.append((-job.gpus_per_worker, -c.workers, c.job, base_workers(job), c.workers - base_workers(job)))
    todo.sort()
    return StartState(base, flex, tuple((name, b, f) for _, _, name, b, f in todo))


def pools_of(problem: PlacementRound, job: str, lyra: bool) -> tuple[str, ...]:
    """The pools ``job`` may use, in the order tried (module docstring)."""
    cur = current_pool(problem, job)
    target = problem.target(job)
    if cur is not None:
        return (cur,)
    if target is not None and target.pool is not None:
        return (target.pool,)
    j = problem.job(job)
    first = INFERENCE if lyra and is_elastic(j) else TRAINING
    return tuple(p for p in (first, TRAINING if first == INFERENCE else INFERENCE) if p == TRAINING or j.fungible)


def _scale_in(problem: PlacementRound, job: str, target: int) -> dict[str, int]:
    """The flexible GPUs per node a running job keeps for ``target`` workers (fewest-first removal)."""
    flex = problem.flexible_of(job)
    if not flex:   # nothing to keep or drop
        return {}
    j = problem.job(job)
    base = sum(g // problem.worker_gpus(j, n) for n, g in problem.base_of(job).items())
    keep = max(0, target - base)
    have = sum(g // problem.worker_gpus(j, n) for n, g in flex.items())
    drop = have - keep
    out = dict(flex)
    for n in sorted(out, key=lambda n: (out[n], n)):
        if drop <= 0:
            break
        wg = problem.worker_gpus(j, n)
        k = min(drop, out[n] // wg)
        out[n] -= k * wg
        drop -= k
    return {n: g for n, g in out.items() if g > 0}


__all__ = ["StartState", "pools_of", "start_state"]

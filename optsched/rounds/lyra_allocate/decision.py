"""Assembly of a ``lyra-allocate`` decision: the workers of each job (base plus flexible) and its pool,
with the round objective, the JCT reduction (seconds) of the flexible workers (:mod:`.items`)."""

from __future__ import annotations

from typing import Mapping

from optsched.core.decision import Decision, relative_gap
from optsched.rounds.lyra.problem import LyraRound
from optsched.rounds.lyra_allocate.payload import WorkerCount, WorkerCounts


def counts(problem: LyraRound, base: Mapping[str, int], pools: Mapping[str, str],
           extra: Mapping[str, int]) -> WorkerCounts:
    """Worker counts of every job: ``base[job] + extra[job]`` on ``pools[job]`` (jobs without base: 0)."""
    out = []
    for j in problem.jobs:
        w = base.get(j.name, 0)
        out.append(WorkerCount(j.name, w + extra.get(j.name, 0) if w else 0, pools.get(j.name) if w else None))
    return WorkerCounts(tuple(out))


def allocation_decision(problem: LyraRound, payload: WorkerCounts, objective: float, *, method: str, status: str,
                        solve_seconds: float, bound: float | None = None, heuristic_objective: float | None = None,
                        warm_start: bool = False, message: str = "") -> Decision:
    return Decision(problem.kind, method, status, objective, payload, bound=bound,
                    gap=relative_gap(bound, objective), solve_seconds=solve_seconds,
                    heuristic_objective=heuristic_objective, warm_start=warm_start, message=message)


__all__ = ["allocation_decision", "counts"]

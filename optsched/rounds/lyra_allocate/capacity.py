"""What an allocation round may hand out, per pool, in training GPUs (thesis Sec. 3.5.2): the idle
GPUs of training servers and of on-loan inference servers, plus the GPUs of running elastic jobs'
flexible workers (they may be resized), inference GPUs times ``inference_factor``, rounded down.
Servers held by inference count nothing."""

from __future__ import annotations

import math

from optsched.rounds.lyra.problem import INFERENCE, TRAINING, LyraRound


def available(problem: LyraRound) -> dict[str, int]:
    """``{"training": G, "inference": G}``: available training GPUs per pool (module docstring)."""
    idle = problem.idle_gpus()
    loan = set(problem.on_loan)
    raw = {TRAINING: 0, INFERENCE: 0}
    for n in problem.cluster.nodes:
        pool = problem.pool(n.name)
        if pool == TRAINING or n.name in loan:
            raw[pool] += max(0, idle[n.name])
    for job, _ in problem.flexible:
        for node, g in problem.flexible_of(job).items():
            raw[problem.pool(node)] += g
    return {TRAINING: raw[TRAINING], INFERENCE: int(math.floor(raw[INFERENCE] * problem.inference_factor + 1e-9))}


def current_pool(problem: LyraRound, job: str) -> str | None:
    """The pool a running job runs on (None when it is queued)."""
    cur = problem.current(job)
    return None if cur is None else problem.pool(cur.placement.shares[0][0])


__all__ = ["available", "current_pool"]

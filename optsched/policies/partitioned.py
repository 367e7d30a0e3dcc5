"""Partitioned solving in the manner of POP (Narayanan et al., SOSP'21): any method of a round kind whose
kind has a partitioner (:class:`~optsched.core.kinds.Partitioner`) is run on ``k`` independent parts
of the round (nodes and jobs split with a seed; running jobs stay with the part holding their nodes),
in parallel processes where cores allow, and the parts' decisions are joined into one decision for the
whole cluster.

Time: the whole call keeps the time limit. Splitting (which builds the round's table for the
admission) comes first; the rest, less :data:`MERGE_RESERVE_S`, is shared by the waves of parts (``k``
parts on ``p`` processes run in ``ceil(k / p)`` waves, each part gets its wave's share). The decision's
message reports the critical path (the wall time of solving the parts), the total CPU time of the parts
and the part sizes. Parts are solved by the method's own policy with the same options, so a
part cut short by its limit makes the decision ``partial``.
"""

from __future__ import annotations

import math
import os
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from optsched.core.deadline import Deadline
from optsched.core.decision import Decision
from optsched.core.errors import ValidationError
from optsched.core.kinds import round_kind
from optsched.core.round import RoundProblem
from optsched.policies.options import PolicyOptions
from optsched.policies.registry import make_policy

#: seconds kept for joining the parts' decisions
MERGE_RESERVE_S = 0.2


def _solve_part(args: tuple[RoundProblem, str, dict[str, Any]]) -> tuple[Decision, float]:
    """Solve one part in this process; (decision, CPU seconds). Module level, so a process pool can run it."""
    problem, method, opts = args
    cpu0 = time.process_time()
    decision = make_policy(method, PolicyOptions(**opts), kind=problem.kind).decide(problem)
    return decision, time.process_time() - cpu0


@dataclass(frozen=True)
class PartitionedPolicy:
    """``method`` of round kind ``kind`` on ``parts`` parts (module docstring); ``processes`` parallel
    workers (default: as many as parts, at most the machine's cores; 1 runs the parts one after the
    other in this process)."""

    kind: str
    method: str
    parts: int
    options: PolicyOptions = field(default_factory=PolicyOptions)
    processes: int | None = None
    name: str = ""

    def __post_init__(self) -> None:
        if isinstance(self.parts, bool) or not isinstance(self.parts, int) or self.parts < 2:
            raise ValidationError(f"partitions must be an integer >= 2, got {self.parts!r}")
        if self.processes is not None and (isinstance(self.processes, bool) or not isinstance(self.processes, int)
                                           or self.processes < 1):
            raise ValidationError(f"processes must be a positive integer, got {self.processes!r}")
        if round_kind(self.kind).partitioner is None:
            raise ValidationError(f"rounds of kind {self.kind!r} cannot be partitioned (the kind has no partitioner)")
        if not self.name:
            object.__setattr__(self, "name", self.method)

    def decide(self, problem: RoundProblem) -> Decision:
        t0 = time.perf_counter()
        o = self.options
        deadline = Deadline(o.time_limit, start=t0 if o.clock_start is None else o.clock_start)
        partitioner = round_kind(problem.kind).partitioner
        assert partitioner is not None
        split = partitioner.split(problem, self.parts, o.seed, o.perf_models)
        split_s = time.perf_counter() - t0
        k = len(split.parts)
        procs = min(k, os.cpu_count() or 1) if self.processes is None else min(k, self.processes)
        waves = math.ceil(k / procs)
        share = max(1e-3, (deadline.remaining() - MERGE_RESERVE_S) / waves)
        opts = {"time_limit": share, "seed": o.seed, "workers": o.workers, "perf_models": o.perf_models,
                "extras": dict(o.extras), "backend": o.backend}
        work = [(p, self.method, opts) for p in split.parts]
        s0 = time.perf_counter()
        if procs == 1:
            results = [_solve_part(w) for w in work]
        else:
            with ProcessPoolExecutor(max_workers=procs) as pool:
                results = list(pool.map(_solve_part, work))
        critical = time.perf_counter() - s0
        decisions = [d for d, _ in results]
        cpu = sum(c for _, c in results)
        sizes = ", ".join(f"{len(p.cluster.nodes)} nodes/{len(p.jobs)} jobs" for p in split.parts)
        message = (f"partitioned into {k} parts on {procs} process(es): critical path {critical:.2f} s, parts' CPU "
                   f"{cpu:.2f} s, split {split_s:.2f} s; "
                   f"parts: {sizes}")
        return partitioner.merge(problem, split, decisions, method=f"{self.method}/partitions={k}",
                                 solve_seconds=time.perf_counter() - t0, message=message)


__all__ = ["MERGE_RESERVE_S", "PartitionedPolicy"]

"""Partitioned solving in the manner of POP (Narayanan et al., SOSP'21): any method of a round kind whose
kind has a partitioner (:class:`~optsched.core.kinds.Partitioner`) is run on ``k`` independent parts
of the round (nodes and jobs split with a seed; running jobs stay with the part holding their nodes),
in parallel processes where cores allow, and the parts' decisions are joined into one decision for the
whole cluster.

Time: the whole call keeps the time limit. Splitting (which builds the round's table for the
admission, within a share of the limit the kind's partitioner sets: Rubick's ``SPLIT_SHARE``) comes first;
the rest, less :data:`MERGE_RESERVE_S`, is shared by the waves of parts (``k`` parts on ``p`` processes run in
``ceil(k / p)`` waves, each part gets its wave's share, cut to the time left when the part starts, so that
starting a process counts). When less than :data:`MIN_PARTS_S` plus :data:`PART_S_PER_JOB` per job of the
largest part per wave (plus the reserve, :data:`MERGE_S_PER_JOB` a job more) is left after the split, or would
be left after a split of :data:`SPLIT_S_PER_JOB` a job into parts of equal size (checked first, so that a limit
too short for parts leaves the whole round all of it), no process is started: the method runs
on the whole round in this process with the time left, and returns what its time limit allows (the
heuristic's decision, ``partial`` when cut short). The decision's
message reports the critical path (the wall time of solving the parts), the total CPU time of the parts
and the part sizes. Parts are solved by the method's own policy with the same options, so a
part cut short by its limit makes the decision ``partial``.

Guarantees and deadlines: when an admitted guaranteed job cannot be held by any part (its request
exceeds every part's GPUs, or its own coefficient rows do not fit its part: the split's ``unhosted``),
the split would drop its guarantee; the method then solves the round unpartitioned instead (same
deadline), so the guarantee is kept, deferred only with ``defer_unreachable_guarantees``, or reported
by ``InfeasibleError``. The same for an admitted deadline job whose minimum share no part has room for
(:mod:`optsched.rounds.rubick.partition`). Such a decision's method is the plain method and its message
starts with ``not partitioned:`` naming the jobs.

A part the method finds infeasible (``InfeasibleError``: the admitted guaranteed jobs dealt to it cannot
all reach their guarantees on its nodes, e.g. their minimum demands together exceed its GPUs, or node
shapes, CPUs or memory do not fit them, which the split, counting requested GPUs, does not see) is not an
answer for the round: the parts not yet started are cancelled and the method solves the round whole
with the time left (same deadline), as above; the message starts with ``not partitioned: part i of k``
naming the first such part in part order and why. Only when the whole round is infeasible too is
``InfeasibleError`` raised.
"""

from __future__ import annotations

import math
import os
import time
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, Mapping

from optsched.core.deadline import Deadline
from optsched.core.decision import Decision
from optsched.core.errors import InfeasibleError, ValidationError, one_line
from optsched.core.kinds import round_kind
from optsched.core.round import RoundProblem
from optsched.policies.options import PolicyOptions
from optsched.policies.registry import make_policy

#: seconds kept for joining the parts' decisions
MERGE_RESERVE_S = 0.2
#: seconds the parts need at least after the split (starting processes included) to be worth starting
MIN_PARTS_S = 0.1
#: and seconds per job of the largest part, per wave of parts: what a part takes however short its limit (its
#: table's short rows, admission, the heuristic's state, the decision, sending the part to its process and the
#: decision back: 1.6 s a wave beyond the parts' limits for two waves of 16,400-job parts of a 100,000-job round,
#: measured with another process busy on the second core)
PART_S_PER_JOB = 1e-4
#: seconds per job of the round to split it beyond its table (admission, dealing jobs and nodes: 1.4 s of
#: 100,000 jobs) and to join the parts' decisions (0.4 s of 100,000 jobs), measured
SPLIT_S_PER_JOB = 1.4e-5
MERGE_S_PER_JOB = 4e-6


def _solve_part(args: tuple[RoundProblem, str, dict[str, Any], float]) -> tuple[Decision, float]:
    """Solve one part in this process within its share, cut to the time left until ``ends`` (a
    ``time.time()`` reading, which processes share); (decision, CPU seconds). Module level, so a process
    pool can run it."""
    problem, method, opts, ends = args
    cpu0 = time.process_time()
    opts = {**opts, "time_limit": max(1e-3, min(opts["time_limit"], ends - time.time()))}
    try:
        decision = make_policy(method, PolicyOptions(**opts), kind=problem.kind).decide(problem)
    except InfeasibleError as e:  # one line, a plain InfeasibleError: what crosses a process boundary intact
        raise InfeasibleError(one_line(str(e))) from None
    return decision, time.process_time() - cpu0


def _short(why: str, limit: int = 400) -> str:
    """``why`` cut to ``limit`` characters (a part's infeasibility lists every guaranteed job of the part)."""
    return why if len(why) <= limit else why[:limit - 3] + "..."


def _solve_parts(work: list[tuple[RoundProblem, str, dict[str, Any], float]], procs: int
                 ) -> tuple[list[tuple[Decision, float]], tuple[int, str] | None]:
    """The parts of ``work`` solved on ``procs`` processes (1: in this process, in order): their results,
    or, when a part is infeasible, (its index, why) for the first such part in part order, the parts not
    yet started being cancelled (module docstring)."""
    results: list[tuple[Decision, float]] = []
    if procs == 1:
        for i, w in enumerate(work):
            try:
                results.append(_solve_part(w))
            except InfeasibleError as e:
                return results, (i, _short(one_line(str(e))))
        return results, None
    with ProcessPoolExecutor(max_workers=procs) as pool:
        futures: list[Future[tuple[Decision, float]]] = [pool.submit(_solve_part, w) for w in work]
        for i, f in enumerate(futures):
            try:
                results.append(f.result())
            except InfeasibleError as e:
                for later in futures[i + 1:]:
                    later.cancel()
                return results, (i, _short(one_line(str(e))))
    return results, None


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
            raise ValidationError("partitions must be an integer >= 2 (leave it out for an unpartitioned solve), "
                                  f"got {self.parts!r}")
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
        deadline = Deadline.since(o.time_limit, o.clock_start)
        partitioner = round_kind(problem.kind).partitioner
        assert partitioner is not None
        partitioner.check(problem, self.parts)
        jobs = len(problem.jobs)
        merge_s = MERGE_RESERVE_S + MERGE_S_PER_JOB * jobs
        ahead = SPLIT_S_PER_JOB * jobs + merge_s + self._parts_s(self.parts, math.ceil(jobs / self.parts))
        if deadline.expired(reserve=ahead):  # the parts could not be more than their floors: solve it whole
            return self._unpartitioned(problem, deadline, {}, 0.0, t0, ahead=ahead)
        split = partitioner.split(problem, self.parts, o.seed, o.perf_models, deadline=deadline)
        split_s = time.perf_counter() - t0
        k = len(split.parts)
        waves = math.ceil(k / self._processes(k))
        largest = max((len(p.jobs) for p in split.parts), default=0)
        needed = merge_s + self._parts_s(k, largest)
        if split.unhosted or not split.parts or deadline.expired(reserve=needed):
            return self._unpartitioned(problem, deadline, split.unhosted, split_s, t0)
        procs = self._processes(k)
        floor = PART_S_PER_JOB * largest  # what a part takes past its limit (module docstring)
        share = max(1e-3, (deadline.remaining() - merge_s) / waves - floor)
        opts = {"time_limit": share, "seed": o.seed, "workers": o.workers, "perf_models": o.perf_models,
                "extras": dict(o.extras), "backend": o.backend}
        ends = time.time() + deadline.remaining() - merge_s - floor
        work = [(p, self.method, opts, ends) for p in split.parts]
        s0 = time.perf_counter()
        results, infeasible = _solve_parts(work, procs)
        sizes = ", ".join(f"{len(p.cluster.nodes)} nodes/{len(p.jobs)} jobs" for p in split.parts)
        if infeasible is not None:
            i, why = infeasible
            part = split.parts[i]
            note = (f"part {i + 1} of {k} ({len(part.cluster.nodes)} nodes/{len(part.jobs)} jobs) is infeasible for "
                    f"{self.method}: {why}")
            return self._unpartitioned(problem, deadline, {}, split_s, t0, infeasible=note)
        critical = time.perf_counter() - s0
        decisions = [d for d, _ in results]
        cpu = sum(c for _, c in results)
        message = (f"partitioned into {k} parts on {procs} process(es): critical path {critical:.2f} s, parts' CPU "
                   f"{cpu:.2f} s, split {split_s:.2f} s; "
                   f"parts: {sizes}")
        return partitioner.merge(problem, split, decisions, method=f"{self.method}/partitions={k}",
                                 solve_seconds=time.perf_counter() - t0, message=message)

    def _processes(self, parts: int) -> int:
        """The processes that solve ``parts`` parts."""
        return min(parts, os.cpu_count() or 1) if self.processes is None else min(parts, self.processes)

    def _parts_s(self, parts: int, largest: int) -> float:
        """The least time ``parts`` parts take whatever their limits (module docstring: per wave, MIN_PARTS_S and
        PART_S_PER_JOB per job of the largest part, ``largest`` jobs)."""
        return math.ceil(parts / self._processes(parts)) * (MIN_PARTS_S + PART_S_PER_JOB * largest)

    def _unpartitioned(self, problem: RoundProblem, deadline: Deadline, unhosted: Mapping[str, str],
                       split_s: float, t0: float, infeasible: str = "", ahead: float = 0.0) -> Decision:
        """The method on the whole round within what is left of ``deadline`` (module docstring), its
        message saying why the round was not partitioned (``infeasible``: a part was, and why; ``ahead``: the
        seconds the split, the parts and the merge were estimated to need at least, more than the limit)."""
        decision = make_policy(self.method, replace(self.options, clock_start=deadline.start),
                               kind=problem.kind).decide(problem)
        if infeasible:
            why = f"{infeasible}; solved the round whole"
        elif unhosted:
            shown = "; ".join(f"{n!r}: {why}" for n, why in list(unhosted.items())[:10])
            why = (f"no part of {self.parts} can hold the admitted guaranteed or deadline job(s) ({len(unhosted)}) "
                   f"{shown}; solved the round whole")
        elif ahead:
            why = (f"splitting {len(problem.jobs)} jobs into {self.parts} parts, solving and joining them take at "
                   f"least about {ahead:.2f} s, more than the time limit leaves; solved the round whole")
        else:
            why = f"the split took {split_s:.2f} s and left no time for {self.parts} parts; solved the round whole"
        note = f"not partitioned: {why}"
        return replace(decision, message=f"{note}; {decision.message}" if decision.message else note,
                       solve_seconds=time.perf_counter() - t0)


__all__ = ["MERGE_RESERVE_S", "MERGE_S_PER_JOB", "MIN_PARTS_S", "PART_S_PER_JOB", "PartitionedPolicy",
           "SPLIT_S_PER_JOB"]

"""Who a Crius round must, may and may not run, before any method chooses.

* **Opportunistic execution** (Sec. 6.1: "When the idle resources are insufficient for a queuing job,
  Crius pends it and opportunistically launches other jobs to utilize the idle resources. Once the
  minimum resource requirement for the pending job is satisfied, the opportunistic jobs will be
  suspended to launch the pending one."): the *pending* job is the earliest submitted queued job
  (then by name) that has a candidate Cell; the *opportunistic* jobs are the running jobs submitted
  after it. When one of its candidate Cells fits the nodes with every opportunistic job suspended
  (and everything else kept where it is; :mod:`~optsched.rounds.crius.capacity`), the pending job is
  *protected*: every method must start it, and may suspend opportunistic jobs for it -- only for it
  ("the opportunistic jobs will be suspended to launch the pending one"): a suspended opportunistic
  job held GPUs on a node where the protected job now runs a part (the node-level reading of "to
  launch": its GPUs are where the pending job starts; an opportunistic job on other nodes, or on
  another GPU type, is kept or rescaled, never suspended to make room for anyone else). Otherwise no
  job is protected this round.
* **Deadline-aware objective** (Sec. 8.5: "Crius provides strict deadline guarantees for each
  scheduled job ... Crius early drops those jobs that cannot be completed before their deadlines"):
  a job with a deadline and no Cell that meets it (at the estimated speed, starting now) is
  *dropped* (a running one is suspended); a running job whose current Cell meets its deadline is
  *guaranteed*: it keeps running on a Cell that meets it. A job with a deadline only runs on Cells
  that meet it. (Under the throughput objective nothing is dropped or guaranteed.) Guaranteed jobs
  are never opportunistic.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from optsched.rounds.crius.capacity import NodeState, fits, slot_rates
from optsched.rounds.crius.problem import CriusRound
from optsched.rounds.crius.table import CriusTable


@dataclass(frozen=True)
class CriusAdmission:
    """``protected``: the job every method must start (or None); ``opportunistic``: the running jobs
    that may be suspended for it; ``guaranteed`` and ``dropped``: module docstring."""

    protected: str | None = None
    opportunistic: frozenset[str] = field(default_factory=frozenset)
    guaranteed: frozenset[str] = field(default_factory=frozenset)
    dropped: frozenset[str] = field(default_factory=frozenset)


def allowed_rows(problem: CriusRound, table: CriusTable, j: int, rows: np.ndarray) -> np.ndarray:
    """``rows`` of job index ``j`` it may run on: all, or under the deadline objective for a job with a
    deadline those that meet it."""
    if not problem.deadline_aware or problem.jobs[j].deadline is None:
        return rows
    return rows[table.deadline_ok[rows]]


def admit(problem: CriusRound, table: CriusTable) -> CriusAdmission:
    """The round's admission (module docstring)."""
    dropped: set[str] = set()
    guaranteed: set[str] = set()
    if problem.deadline_aware:
        for j, job in enumerate(problem.jobs):
            if job.deadline is None:
                continue
            rows = table.rows_of(j)
            if not table.deadline_ok[rows].any():
                dropped.add(job.name)
            elif table.current_row[j] >= 0 and table.deadline_ok[table.current_row[j]]:
                guaranteed.add(job.name)
    queued = [(job.submit_time, job.name, j) for j, job in enumerate(problem.jobs)
              if table.current_row[j] < 0 and job.name not in dropped
              and allowed_rows(problem, table, j, table.candidates_of(j)).size]
    if not queued:
        return CriusAdmission(None, frozenset(), frozenset(guaranteed), frozenset(dropped))
    t0, name0, j0 = min(queued)
    opportunistic = frozenset(job.name for j, job in enumerate(problem.jobs)
                              if table.current_row[j] >= 0 and (job.submit_time, job.name) > (t0, name0)
                              and job.name not in guaranteed)
    state = NodeState.of(problem)
    index = {n: i for i, n in enumerate(state.names)}
    for j, job in enumerate(problem.jobs):
        cur = problem.current(job.name)
        if cur is not None and job.name not in opportunistic and job.name not in dropped:
            state.take(cur.placement, index)
    slots = state.slots(slot_rates(problem.cluster))
    protected = None
    for r in allowed_rows(problem, table, j0, table.candidates_of(j0)):
        if fits(slots, state.types, table.gpu_type[r], int(table.unit[r]), int(table.parts[r])):
            protected = name0
            break
    return CriusAdmission(protected, opportunistic if protected else frozenset(), frozenset(guaranteed),
                          frozenset(dropped))


__all__ = ["CriusAdmission", "admit", "allowed_rows"]

"""FCFS (Crius Sec. 8.1: "First-Come-First-Served (FCFS): FCFS is widely applied in cluster schedulers
(e.g., Kubernetes [49], Yarn [50])"): jobs start in submission order, each on its requested GPU count on the
first GPU type (cluster order) where its Cell fits, and running jobs are never touched (rules shared with the
other baselines: :mod:`optsched.heuristics.baselines.cells`).

The text names FCFS without saying whether it backfills; both readings are policies of their own:

* ``fcfs`` (:func:`schedule_fcfs`): strict FCFS, the queue of Kubernetes' default scheduler and Yarn's FIFO
  scheduler: the first job that fits nowhere stops the queue (no job behind it starts; a job with no Cell at
  all, which can never run, is passed over rather than stalling the queue forever).
* ``fcfs-backfill`` (:func:`schedule_fcfs_backfill`): FCFS with backfilling: a job that fits nowhere waits and
  the jobs behind it are still tried in order (greedy backfilling without reservations, as Yarn's capacity
  scheduler does with its queues; no reservation for the head of the queue, which may starve).
"""

from __future__ import annotations

from optsched.core.deadline import Deadline
from optsched.heuristics.baselines.cells import NO_ADMISSION, cells_by_spec, fcfs, request_gpus, type_order
from optsched.heuristics.crius_state import CellState
from optsched.rounds.crius.decision import Schedule
from optsched.rounds.crius.problem import CriusRound
from optsched.rounds.crius.table import CriusTable


def _fcfs(problem: CriusRound, table: CriusTable, deadline: Deadline | None, backfill: bool) -> Schedule:
    st = CellState(problem, table, NO_ADMISSION)
    types = type_order(problem)
    complete = True
    queue = list(fcfs(problem, table))
    for j in queue:
        if deadline is not None and deadline.expired():
            complete = False
            break
        cells = cells_by_spec(table, j)
        g = request_gpus(problem, table, j)
        if g is None:
            continue  # no Cell at all: it can never run, so it does not block the queue forever
        if not any(st.put(j, cells[(t, g)]) for t in types if (t, g) in cells) and not backfill:
            break
    waiting = sum(1 for j in queue if st.choice[j] is None)
    choices = {table.jobs[j]: c for j, c in enumerate(st.choice) if c is not None}
    return Schedule(choices, NO_ADMISSION, f"waiting: {waiting} job(s)" if waiting else "", complete)


def schedule_fcfs(problem: CriusRound, table: CriusTable, *, deadline: Deadline | None = None) -> Schedule:
    """Strict FCFS on the round, no backfilling (module docstring)."""
    return _fcfs(problem, table, deadline, backfill=False)


def schedule_fcfs_backfill(problem: CriusRound, table: CriusTable, *, deadline: Deadline | None = None) -> Schedule:
    """FCFS with backfilling on the round (module docstring)."""
    return _fcfs(problem, table, deadline, backfill=True)


__all__ = ["schedule_fcfs", "schedule_fcfs_backfill"]

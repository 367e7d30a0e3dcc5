"""FCFS (Crius Sec. 8.1: "widely applied in cluster schedulers (e.g., Kubernetes, Yarn)"): jobs start in
submission order, each on its requested GPU count on the first GPU type (cluster order) where its
Cell fits; the first job that fits nowhere stops the queue (no backfilling; a job with no Cell at
all, which can never run, is passed over rather than stalling the queue forever), and running jobs are
never touched (rules shared with the other baselines: :mod:`optsched.heuristics.baselines.cells`)."""

from __future__ import annotations

from optsched.core.deadline import Deadline
from optsched.heuristics.baselines.cells import NO_ADMISSION, cells_by_spec, fcfs, request_gpus, type_order
from optsched.heuristics.crius_state import CellState
from optsched.rounds.crius.decision import Schedule
from optsched.rounds.crius.problem import CriusRound
from optsched.rounds.crius.table import CriusTable


def schedule_fcfs(problem: CriusRound, table: CriusTable, *, deadline: Deadline | None = None) -> Schedule:
    """FCFS on the round (module docstring)."""
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
        if not any(st.put(j, cells[(t, g)]) for t in types if (t, g) in cells):
            break
    waiting = sum(1 for j in queue if st.choice[j] is None)
    choices = {table.jobs[j]: c for j, c in enumerate(st.choice) if c is not None}
    return Schedule(choices, NO_ADMISSION, f"waiting: {waiting} job(s)" if waiting else "", complete)


__all__ = ["schedule_fcfs"]

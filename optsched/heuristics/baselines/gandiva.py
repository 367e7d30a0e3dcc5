"""Gandiva-like (Crius Sec. 8.1: "utilizes domain-specific knowledge to introspectively refine
scheduling decisions based on runtime profiling. While it could adjust the GPU quota and topology, it
ignores the GPU heterogeneity"; Xiao et al., OSDI'18: packing, grow-shrink, migration).

Per round, over the rules of :mod:`optsched.heuristics.baselines.cells`:

1. **Shrink** (jobs wait): running jobs grown beyond their request go back to their requested GPUs on
   the type they run on, latest submitted first, until the first waiting job fits or none is left.
2. **Pack** (backfilling): queued jobs, FCFS, each on its requested GPUs on the first GPU type
   (cluster order) where its Cell fits; a job that fits nowhere waits and the next one is tried.
3. **Grow** (nobody waits): the jobs that run, FCFS, double their GPUs on the type they run on when
   the data-parallel profile says it is faster (``dp_throughput``) and it fits, up to twice the
   request.

Migration for defragmentation and time-slicing are left out (the round can only suspend or resume).
"""

from __future__ import annotations

from optsched.core.deadline import Deadline
from optsched.heuristics.baselines.cells import (NO_ADMISSION, cells_by_spec, dp_value, fcfs, request_gpus,
                                                type_order)
from optsched.heuristics.crius_state import CellState
from optsched.rounds.crius.decision import Schedule
from optsched.rounds.crius.problem import CriusRound
from optsched.rounds.crius.table import CriusTable


def _start(st: CellState, table: CriusTable, problem: CriusRound, j: int, types: list[str]) -> bool:
    cells = cells_by_spec(table, j)
    g = request_gpus(problem, table, j)
    return g is not None and any(st.put(j, cells[(t, g)]) for t in types if (t, g) in cells)


def schedule_gandiva(problem: CriusRound, table: CriusTable, *, deadline: Deadline | None = None) -> Schedule:
    """Gandiva-like on the round (module docstring)."""
    st = CellState(problem, table, NO_ADMISSION)
    types = type_order(problem)
    queued = list(fcfs(problem, table))
    running = list(fcfs(problem, table, queued=False))
    complete = True
    if queued:  # 1. shrink grown jobs for the first waiting job
        first = queued[0]
        for j in reversed(running):
            if _start(st, table, problem, first, types):
                st.put(first, None)
                break
            c = st.choice[j]
            g = request_gpus(problem, table, j)
            if c is None or g is None or int(table.gpus[c.row]) <= g:
                continue
            row = cells_by_spec(table, j).get((table.gpu_type[c.row], g))
            if row is not None and st.put(j, row):
                st.mark_changed(j)
    waiting = 0
    for j in queued:  # 2. pack with backfilling
        if deadline is not None and deadline.expired():
            complete = False
            break
        if not _start(st, table, problem, j, types):
            waiting += 1
    if not waiting and complete:  # 3. grow
        for j in sorted((j for j, c in enumerate(st.choice) if c is not None),
                        key=lambda j: (problem.jobs[j].submit_time, problem.jobs[j].name)):
            c = st.choice[j]
            g = request_gpus(problem, table, j)
            if c is None or g is None:
                continue
            now, gtype = int(table.gpus[c.row]), table.gpu_type[c.row]
            row = cells_by_spec(table, j).get((gtype, 2 * now))
            if row is None or 2 * now > 2 * g or table.dp_throughput[row] <= dp_value(table, j, gtype, now):
                continue
            if st.put(j, row):
                st.mark_changed(j)
    choices = {table.jobs[j]: c for j, c in enumerate(st.choice) if c is not None}
    return Schedule(choices, NO_ADMISSION, f"waiting: {waiting} job(s)" if waiting else "", complete)


__all__ = ["schedule_gandiva"]

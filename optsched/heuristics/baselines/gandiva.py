"""Gandiva (Crius Sec. 8.1: "Gandiva [15] utilizes domain-specific knowledge to introspectively refine
scheduling decisions based on runtime profiling. While it could adjust the GPU quota and topology, it
ignores the GPU heterogeneity"; Sec. 9: "Gandiva [15] profiles jobs and schedules them with migration and
other mechanisms"). The Crius text says no more; the rules below are the mechanisms of the cited system
(Xiao et al., OSDI'18, Sec. 3-4: suspend-resume and time-slicing, packing, migration, grow-shrink), at the
granularity of a round, over the rules of :mod:`optsched.heuristics.baselines.cells` (GPU types in cluster
order: heterogeneity ignored).

Per round (:class:`Gandiva`, which remembers the previous rounds, :class:`~.history.RoundHistory`):

1. **Shrink** (jobs wait): running jobs grown beyond their request go back to their requested GPUs on the
   type they run on, latest submitted first, until the first waiting job fits or none is left.
2. **Pack with migration**: queued jobs, FCFS, each on its requested GPUs on the first GPU type where its
   Cell fits; when it fits nowhere but some type has enough free GPUs (fragmentation), Gandiva's
   *migration* re-packs that type: every job holding GPUs of the type is placed again, largest first, best
   fit, then the waiting job; kept when all fit (the moved running jobs pay a restart), undone otherwise (one
   try per (type, GPUs) a round). A job that still fits nowhere waits and the next one is tried.
3. **Time-slicing** (jobs still wait): Gandiva lets jobs share GPUs over time by suspend-resume
   ("time-slicing"). Here the waiting jobs, least recently run first (never run: their submission), each
   take the GPUs of a running job that has held them for at least :data:`TIME_SLICE_S` (longest held first;
   each running job swapped out at most once a round, jobs started this round never); the swapped-out job
   waits and gets its turn back in a later round. Departure: Gandiva switches jobs every time quantum on
   the same GPUs; a round can only suspend and resume, so the slice is at least a round and each switch
   costs the simulator's restart.
4. **Grow** (nobody waits): the jobs that run, FCFS, double their GPUs on the type they run on when the
   data-parallel profile says it is faster (``dp_throughput``) and it fits, up to twice the request.

:func:`schedule_gandiva` runs one round with a fresh history (no time-slicing: nobody has held a slice yet).
"""

from __future__ import annotations

from optsched.core.deadline import Deadline
from optsched.heuristics.baselines.cells import (NO_ADMISSION, cells_by_spec, dp_value, fcfs, request_gpus,
                                                type_order)
from optsched.heuristics.baselines.history import RoundHistory
from optsched.heuristics.crius_state import CellState
from optsched.rounds.crius.decision import Schedule
from optsched.rounds.crius.problem import CriusRound
from optsched.rounds.crius.table import CriusTable

#: seconds a running job holds its GPUs before time-slicing may swap it out (ours: the 5-minute round of
#: Crius Fig. 16, so that a job runs at least one round; Gandiva's own quantum is shorter than a round)
TIME_SLICE_S = 300.0


def _start(st: CellState, table: CriusTable, problem: CriusRound, j: int, types: list[str]) -> bool:
    cells = cells_by_spec(table, j)
    g = request_gpus(problem, table, j)
    return g is not None and any(st.put(j, cells[(t, g)]) for t in types if (t, g) in cells)


def _free(st: CellState, gtype: str) -> int:
    return int(st.ledger.free_gpus[st.by_type[gtype]].sum()) if gtype in st.by_type else 0


def _migrate(st: CellState, table: CriusTable, problem: CriusRound, j: int, types: list[str],
             tried: set[tuple[str, int]]) -> bool:
    """Step 2's migration for job index ``j``: re-pack a type with enough free GPUs (module docstring)."""
    cells = cells_by_spec(table, j)
    g = request_gpus(problem, table, j)
    if g is None:
        return False
    for t in types:
        if (t, g) not in cells or (t, g) in tried or _free(st, t) < g:
            continue
        tried.add((t, g))
        on_t = [v for v, c in enumerate(st.choice) if c is not None and table.gpu_type[c.row] == t]
        snap = st.snapshot([*on_t, j])
        rows = {v: st.choice[v].row for v in on_t}  # type: ignore[union-attr]
        for v in on_t:
            st.put(v, None)
        ok = all(st.put(v, rows[v]) for v in sorted(on_t, key=lambda v: (-int(table.gpus[rows[v]]), v)))
        if ok and st.put(j, cells[(t, g)]):
            for v in on_t:
                st.mark_changed(v)
            return True
        st.rollback(snap)
    return False


class Gandiva:
    """Gandiva over the rounds of one run (module docstring); called as ``scheduler(problem, table,
    deadline=...)``."""

    def __init__(self, time_slice_s: float = TIME_SLICE_S) -> None:
        self.time_slice_s = time_slice_s
        self.history = RoundHistory()

    def __call__(self, problem: CriusRound, table: CriusTable, *, deadline: Deadline | None = None) -> Schedule:
        self.history.observe(problem)
        return _gandiva(problem, table, deadline, self.history, self.time_slice_s)


def schedule_gandiva(problem: CriusRound, table: CriusTable, *, deadline: Deadline | None = None) -> Schedule:
    """Gandiva on one round with no history (module docstring)."""
    return Gandiva()(problem, table, deadline=deadline)


def _gandiva(problem: CriusRound, table: CriusTable, deadline: Deadline | None, history: RoundHistory,
             time_slice_s: float) -> Schedule:
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
    tried: set[tuple[str, int]] = set()
    for j in queued:  # 2. pack with backfilling, migration against fragmentation
        if deadline is not None and deadline.expired():
            complete = False
            break
        if not _start(st, table, problem, j, types):
            _migrate(st, table, problem, j, types, tried)
    waiting = [j for j in queued if st.choice[j] is None]
    if waiting and complete:  # 3. time-slicing
        now = float(problem.time)
        names = table.jobs
        swappable = sorted((v for v in running if st.choice[v] is not None
                            and history.held(names[v], now) >= time_slice_s),
                           key=lambda v: (-history.held(names[v], now), v))
        order = sorted(waiting, key=lambda j: (history.last_ran.get(names[j], problem.jobs[j].submit_time),
                                               problem.jobs[j].submit_time, names[j]))
        for w in order:
            if deadline is not None and deadline.expired():
                complete = False
                break
            need = request_gpus(problem, table, w)
            if need is None:
                continue
            for v in swappable:
                held = st.choice[v]
                gtype = table.gpu_type[held.row]  # type: ignore[union-attr]
                if (gtype, need) not in cells_by_spec(table, w) or \
                        int(table.gpus[held.row]) + _free(st, gtype) < need:  # type: ignore[union-attr]
                    continue  # freeing v cannot make room for w (w already fits nowhere else)
                snap = st.snapshot([v, w])
                st.put(v, None)
                if _start(st, table, problem, w, types):
                    swappable.remove(v)
                    break
                st.rollback(snap)
        waiting = [j for j in queued if st.choice[j] is None]
    if not waiting and complete:  # 4. grow
        for j in sorted((j for j, c in enumerate(st.choice) if c is not None),
                        key=lambda j: (problem.jobs[j].submit_time, problem.jobs[j].name)):
            c = st.choice[j]
            g = request_gpus(problem, table, j)
            if c is None or g is None:
                continue
            now_g, gtype = int(table.gpus[c.row]), table.gpu_type[c.row]
            row = cells_by_spec(table, j).get((gtype, 2 * now_g))
            if row is None or 2 * now_g > 2 * g or table.dp_throughput[row] <= dp_value(table, j, gtype, now_g):
                continue
            if st.put(j, row):
                st.mark_changed(j)
    choices = {table.jobs[j]: c for j, c in enumerate(st.choice) if c is not None}
    left = sum(1 for j in range(len(problem.jobs)) if st.choice[j] is None)
    return Schedule(choices, NO_ADMISSION, f"waiting: {left} job(s)" if left else "", complete)


__all__ = ["Gandiva", "TIME_SLICE_S", "schedule_gandiva"]

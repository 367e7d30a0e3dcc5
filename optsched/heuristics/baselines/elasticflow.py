"""ElasticFlow-like, throughput-oriented with loosened deadlines (ElasticFlow-LS; Crius Sec. 8.1 and
8.3: "an adaptivity-aware scheduler with elastic scaling of distributed DL jobs in a homogeneous
cluster"; "it scales down small jobs when the workload is high to accommodate more jobs and maximize
throughput. However, since ElasticFlow-LS schedules with the profiled throughput of data parallelism,
it always overestimates the minimum required share of large jobs").

Per round, over the rules of :mod:`optsched.heuristics.baselines.cells`, a job's GPU counts form the
ladder ``N_G / 2, N_G, 2 N_G`` of its Cells:

* **Minimum share**: the least count of the ladder on which data parallelism fits the memory of the
  job's type (``dp_throughput > 0``); the top of the ladder when none does (the overestimate).
* **Type**: a running job keeps its type; a queued job takes the first type (cluster order) where its
  minimum share fits, as for a homogeneous cluster.
* **Admission**: running jobs first, then queued jobs FCFS: a queued job that does not fit makes the
  running jobs of the type it tries, largest first, shrink to their minimum share until it fits;
  if it still does not, it waits and the shrinks are undone.
* **Elastic scaling**: then, while some doubling fits, the job whose next count on the ladder adds the
  most data-parallel throughput per added GPU (each job's throughput normalised by its value at the
  minimum share) doubles.
"""

from __future__ import annotations

import heapq

from optsched.core.deadline import Deadline
from optsched.heuristics.baselines.cells import NO_ADMISSION, cells_by_spec, fcfs, type_order
from optsched.heuristics.crius_state import EPS, CellState
from optsched.rounds.crius.decision import Schedule
from optsched.rounds.crius.problem import CriusRound
from optsched.rounds.crius.table import CriusTable


def minimum_share(table: CriusTable, j: int, gpu_type: str, cells: dict[tuple[str, int], int] | None = None
                  ) -> int | None:
    """The minimum share of job index ``j`` on ``gpu_type`` (module docstring); None without Cells."""
    cells = cells_by_spec(table, j) if cells is None else cells
    ladder = sorted(g for t, g in cells if t == gpu_type)
    fits = [g for g in ladder if table.dp_throughput[cells[(gpu_type, g)]] > 0]
    return fits[0] if fits else (ladder[-1] if ladder else None)


def schedule_elasticflow(problem: CriusRound, table: CriusTable, *, deadline: Deadline | None = None) -> Schedule:
    """ElasticFlow-like on the round (module docstring)."""
    st = CellState(problem, table, NO_ADMISSION)
    types = type_order(problem)
    cells = [cells_by_spec(table, j) for j in range(len(problem.jobs))]
    running = list(fcfs(problem, table, queued=False))
    complete = True
    waiting = 0
    for j in fcfs(problem, table):
        if deadline is not None and deadline.expired():
            complete = False
            break
        placed = False
        for t in types:
            m = minimum_share(table, j, t, cells[j])
            if m is None:
                continue
            row = cells[j][(t, m)]
            if st.put(j, row):
                placed = True
                break
            # shrink running jobs of this type to their minimum share, largest first
            shrinkable = sorted((v for v in running if st.choice[v] is not None
                                 and table.gpu_type[st.choice[v].row] == t),  # type: ignore[union-attr]
                                key=lambda v: -int(table.gpus[st.choice[v].row]))  # type: ignore[union-attr]
            snap = st.snapshot(shrinkable)
            changed = []
            for v in shrinkable:
                mv = minimum_share(table, v, t, cells[v])
                c = st.choice[v]
                if mv is None or c is None or int(table.gpus[c.row]) <= mv:
                    continue
                if st.put(v, cells[v][(t, mv)]):
                    changed.append(v)
                    if st.put(j, row):
                        placed = True
                        break
            if placed:
                for v in changed:
                    st.mark_changed(v)
                break
            st.rollback(snap)
        if not placed:
            waiting += 1
    if complete:
        _scale_up(st, table, cells)
    choices = {table.jobs[j]: c for j, c in enumerate(st.choice) if c is not None}
    return Schedule(choices, NO_ADMISSION, f"waiting: {waiting} job(s)" if waiting else "", complete)


def _gain(table: CriusTable, cells: dict[tuple[str, int], int], row: int) -> tuple[float, int] | None:
    """(normalised data-parallel throughput added per GPU, next row) of doubling the job on ``row``."""
    t, now = table.gpu_type[row], int(table.gpus[row])
    up = [g for tt, g in cells if tt == t and g > now]
    if not up:
        return None
    nxt = min(up)
    cur = float(table.dp_throughput[cells[(t, now)]]) if (t, now) in cells else 0.0
    m = min((g for tt, g in cells if tt == t and table.dp_throughput[cells[(tt, g)]] > 0), default=None)
    base = float(table.dp_throughput[cells[(t, m)]]) if m is not None else 1.0
    gain = (float(table.dp_throughput[cells[(t, nxt)]]) - cur) / base / (nxt - now)
    return (gain, cells[(t, nxt)]) if gain > EPS else None


def _scale_up(st: CellState, table: CriusTable, cells: list[dict[tuple[str, int], int]]) -> None:
    """Elastic scaling (module docstring): doublings by gain per GPU, each job capped at its first
    doubling that does not fit."""
    heap: list[tuple[float, int, int]] = []
    for j, c in enumerate(st.choice):
        if c is not None:
            g = _gain(table, cells[j], c.row)
            if g is not None:
                heapq.heappush(heap, (-g[0], j, g[1]))
    while heap:
        _, j, row = heapq.heappop(heap)
        if st.put(j, row):
            st.mark_changed(j)
            g = _gain(table, cells[j], row)
            if g is not None:
                heapq.heappush(heap, (-g[0], j, g[1]))


__all__ = ["minimum_share", "schedule_elasticflow"]

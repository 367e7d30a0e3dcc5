"""ElasticFlow (Crius Sec. 8.1: "ElasticFlow [19] is an adaptivity-aware scheduler with elastic scaling of
distributed DL jobs in a homogeneous cluster. It provides a deadline-aware policy and a throughput-oriented
policy"), in two policies:

* ``elasticflow`` (:func:`schedule_elasticflow`): the throughput-oriented policy with loosened deadlines
  (ElasticFlow-LS, Crius Sec. 8.3: "ElasticFlow-LS denotes the primary ElasticFlow policy with loosened job
  deadline"), the baseline of Crius Fig. 14, 17, 18;
* ``elasticflow-ddl`` (:class:`ElasticFlowDDL`): the deadline-aware policy (Crius Sec. 8.5 compares
  Crius-DDL with it), below.

ElasticFlow-LS (Crius Sec. 8.3: "it scales down small jobs when the workload is high to accommodate more jobs
and maximize throughput. However, since ElasticFlow-LS schedules with the profiled throughput of data parallelism,
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

The deadline-aware policy (:class:`ElasticFlowDDL`; the cited system, Gu et al., ASPLOS'23, Sec. 4: admission
control with each job's *minimum satisfactory share*, jobs that cannot meet their deadline dropped at
admission, the GPUs left over given by marginal gain), over the same ladder and data-parallel profile:

* **Minimum satisfactory share** of a job with a deadline on a type: the least count of the ladder whose
  data-parallel iteration time (the Cell's ``iteration_time x throughput / dp_throughput``) finishes the
  remaining iterations by the deadline; none: the job cannot meet it on that type.
* **Admission** (EDF: earliest deadline first, then FCFS): jobs admitted in an earlier round first, each
  running one on its type, a waiting one on the first type (cluster order) where it fits, at its minimum
  satisfactory share (an admitted job whose deadline no share meets any longer keeps running where it runs,
  as admitted); then each job not yet decided, on the first type where its minimum satisfactory share fits
  beside them: admitted, or else **dropped** for good (it never runs; ElasticFlow rejects it at arrival).
  Jobs without a deadline come last, FCFS, at their memory minimum share (as ElasticFlow-LS), and wait when
  they do not fit.
* **Elastic scaling** of everything placed, as ElasticFlow-LS.

Departure: ElasticFlow decides admission when a job arrives; here at the first round that sees it.
"""

from __future__ import annotations

import heapq

from optsched.core.deadline import Deadline
from optsched.heuristics.baselines.cells import NO_ADMISSION, cells_by_spec, fcfs, type_order
from optsched.heuristics.baselines.history import RoundHistory
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


def satisfactory_share(problem: CriusRound, table: CriusTable, j: int, gpu_type: str,
                       cells: dict[tuple[str, int], int]) -> int | None:
    """The minimum satisfactory share of job index ``j`` (with a deadline) on ``gpu_type`` (module docstring)."""
    job = problem.jobs[j]
    assert job.deadline is not None
    window = job.deadline - problem.time
    for g in sorted(g for t, g in cells if t == gpu_type):
        r = cells[(gpu_type, g)]
        dp = float(table.dp_throughput[r])
        if dp <= 0:
            continue
        dp_iter = float(table.iteration_time[r]) * float(table.throughput[r]) / dp
        if job.remaining_iterations * dp_iter <= window * (1 + 1e-9):
            return g
    return None


class ElasticFlowDDL:
    """ElasticFlow's deadline-aware policy over the rounds of one run (module docstring); called as
    ``scheduler(problem, table, deadline=...)``."""

    def __init__(self) -> None:
        self.history = RoundHistory()

    def __call__(self, problem: CriusRound, table: CriusTable, *, deadline: Deadline | None = None) -> Schedule:
        self.history.observe(problem)
        return _elasticflow_ddl(problem, table, deadline, self.history)


def schedule_elasticflow_ddl(problem: CriusRound, table: CriusTable, *, deadline: Deadline | None = None
                             ) -> Schedule:
    """ElasticFlow's deadline-aware policy on one round with no history (module docstring)."""
    return ElasticFlowDDL()(problem, table, deadline=deadline)


def _elasticflow_ddl(problem: CriusRound, table: CriusTable, deadline: Deadline | None,
                     history: RoundHistory) -> Schedule:
    st = CellState(problem, table, NO_ADMISSION)
    types = type_order(problem)
    names = table.jobs
    cells = [cells_by_spec(table, j) for j in range(len(problem.jobs))]
    for j in range(len(problem.jobs)):  # start from nothing: the admitted are placed again at their shares
        if st.choice[j] is not None and table.rows_of(j).size:
            st.put(j, None)

    def edf(j: int) -> tuple[float, float, str]:
        job = problem.jobs[j]
        return (float(job.deadline), job.submit_time, job.name)  # type: ignore[arg-type]

    with_ddl = [j for j in range(len(problem.jobs)) if problem.jobs[j].deadline is not None
                and names[j] not in history.dropped and table.rows_of(j).size]
    admitted = sorted((j for j in with_ddl if names[j] in history.admitted or st.running[j]), key=edf)
    new = sorted((j for j in with_ddl if j not in set(admitted)), key=edf)
    complete = True

    def place(j: int, own_type_first: bool) -> bool:
        tried = types
        if own_type_first and st.running[j]:
            cur = table.gpu_type[int(table.current_row[j])]
            tried = [cur, *[t for t in types if t != cur]]
        for t in tried:
            g = satisfactory_share(problem, table, j, t, cells[j])
            if g is None:
                continue
            row = cells[j][(t, g)]
            if (st.running[j] and row == int(table.current_row[j]) and st.keep(j)) or st.put(j, row):
                return True
        return False

    for j in admitted:
        history.admitted.add(names[j])
        if not place(j, True) and st.running[j]:
            st.keep(j)  # its deadline is out of reach now: it keeps running where it runs, as admitted
    for j in new:
        if deadline is not None and deadline.expired():
            complete = False
            break
        if place(j, False):
            history.admitted.add(names[j])
        else:
            history.dropped.add(names[j])
    for j in fcfs(problem, table, queued=False):  # jobs without a deadline: running ones stay, then FCFS
        if problem.jobs[j].deadline is None and st.choice[j] is None:
            st.keep(j)
    for j in fcfs(problem, table, queued=True):  # at ElasticFlow-LS's minimum share
        if problem.jobs[j].deadline is not None or st.choice[j] is not None:
            continue
        if deadline is not None and deadline.expired():
            complete = False  # the jobs left wait this round (answer partial), as ElasticFlow-LS's
            break
        for t in types:
            m = minimum_share(table, j, t, cells[j])
            if m is not None and st.put(j, cells[j][(t, m)]):
                break
    if complete:
        _scale_up(st, table, cells)
    for j in range(len(problem.jobs)):
        st.mark_changed(j)
    choices = {names[j]: c for j, c in enumerate(st.choice) if c is not None}
    dropped = sum(1 for j in range(len(problem.jobs)) if names[j] in history.dropped)
    waiting = sum(1 for j in range(len(problem.jobs)) if st.choice[j] is None) - dropped
    notes = [f"waiting: {waiting} job(s)" if waiting else "", f"dropped: {dropped} job(s)" if dropped else ""]
    return Schedule(choices, NO_ADMISSION, "; ".join(n for n in notes if n), complete)


__all__ = ["ElasticFlowDDL", "minimum_share", "satisfactory_share", "schedule_elasticflow",
           "schedule_elasticflow_ddl"]

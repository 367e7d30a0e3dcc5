"""Gavel (Crius Sec. 8.1: "Gavel [20] is a heterogeneity-aware scheduler designed for various scheduling
policies, including throughput maximization. Although it considers the GPU heterogeneity, it does not support
the scaling of GPU numbers";
Narayanan et al., OSDI'20, policy MaxSumThroughput).

Per round, over the rules of :mod:`optsched.heuristics.baselines.cells`: every job (running and
queued) runs its requested GPUs; the heterogeneity-aware LP

``max sum_{j,t} T[j,t] y[j,t]  s.t.  sum_t y[j,t] <= 1,  sum_j G_j y[j,t] <= GPUs of type t,  y >= 0``

(scipy's HiGHS) gives each job a share of each type, with ``T[j,t]`` the job's data-parallel
throughput on ``G_j`` GPUs of type ``t`` divided by its best over the types (Gavel's normalised
throughput; a type where data parallelism does not fit gets :data:`NO_PROFILE_VALUE`, so the job can
still be placed but Gavel prefers any type it has a profile for).

Gavel realises the shares over time with its round-based mechanism (Narayanan et al., Sec. 5: each round, the
(job, type) pairs in descending priority ``y[j, t] / f[j, t]``, ``f`` the fraction of time the job has
received on type ``t``, run until the GPUs are taken), which :class:`Gavel` does with a
:class:`~.history.RoundHistory` (``f``: seconds held on the type over seconds since submission; never held:
priority infinite, ties by share, then FCFS). Each job runs at most one type a round; a running job that
wins its type again stays where it runs; a running job that loses its turn is suspended (time sharing: it
waits until its priority rises again), one that wins another type migrates there (kept where it ran when the
new type's GPUs are fragmented and its old ones still free). Departure: Gavel's rounds are minutes long and
its jobs switch at round ends; here a round is the simulator's, and each switch costs its restart.
"""

from __future__ import annotations

import numpy as np

from optsched.core.deadline import Deadline
from optsched.heuristics.baselines.cells import (NO_ADMISSION, cells_by_spec, dp_value, fcfs, request_gpus,
                                                type_order)
from optsched.heuristics.baselines.history import RoundHistory
from optsched.heuristics.crius_state import CellState
from optsched.rounds.crius.decision import Schedule
from optsched.rounds.crius.problem import CriusRound
from optsched.rounds.crius.table import CriusTable

#: the LP value of a type on which a job has no data-parallel profile
NO_PROFILE_VALUE = 1e-3
#: LP shares at or below this are no share (the solver's round-off)
SHARE_EPS = 1e-9


def gavel_shares(problem: CriusRound, table: CriusTable, jobs: list[int], types: list[str],
                 deadline: Deadline | None = None) -> np.ndarray:
    """The LP's ``y`` (jobs x types) of the module docstring; all zero when ``deadline`` leaves HiGHS no time
    to solve it (then no job starts and the running ones stay: the caller's deadline has passed too). The LP has
    ``jobs x types`` variables and ``jobs + types`` rows, built at once."""
    n, m = len(jobs), len(types)
    if n == 0:
        return np.zeros((0, m))
    value = np.zeros((n, m))
    gpus = np.zeros(n)
    allowed = np.zeros((n, m), dtype=bool)
    for a, j in enumerate(jobs):
        if deadline is not None and a % 256 == 0 and deadline.expired():
            return np.zeros((n, m))
        if table.rows_of(j).size == 0:  # no Cell (left out by the table's time limit): no share
            continue
        g = request_gpus(problem, table, j)
        cells = cells_by_spec(table, j)
        gpus[a] = g or 0
        for b, t in enumerate(types):
            if g is not None and (t, g) in cells:
                allowed[a, b] = True
                value[a, b] = dp_value(table, j, t, g)
        best = value[a].max()
        value[a] = np.where(allowed[a], np.maximum(value[a] / best if best > 0 else 0.0, NO_PROFILE_VALUE), 0.0)
    cap = np.array([sum(nd.num_gpus for nd in problem.cluster.nodes_of_type(t)) for t in types], dtype=float)
    from scipy.optimize import linprog  # imported on use: scipy costs 0.2-0.3 s (issue 26, item 4)
    from scipy.sparse import csr_matrix

    # row a: sum_t y[a, t] <= 1; row n + b: sum_a G_a y[a, b] <= cap[b] (column a * m + b is y[a, b])
    row = np.concatenate([np.repeat(np.arange(n), m), n + np.tile(np.arange(m), n)])
    col = np.concatenate([np.arange(n * m), np.arange(n * m)])
    rows = csr_matrix((np.concatenate([np.ones(n * m), np.repeat(gpus, m)]), (row, col)), shape=(n + m, n * m))
    rows.eliminate_zeros()
    bounds = np.column_stack([np.zeros(n * m), np.where(allowed.ravel(), 1.0, 0.0)])
    options = {}
    if deadline is not None:
        if deadline.expired():
            return np.zeros((n, m))
        options["time_limit"] = max(deadline.remaining(), 1e-3)
    res = linprog(-value.ravel(), A_ub=rows, b_ub=np.concatenate([np.ones(n), cap]), bounds=bounds,
                  method="highs", options=options)
    if res.status != 0:  # the time limit (the LP is always feasible: y = 0)
        return np.zeros((n, m))
    return res.x.reshape(n, m)


class Gavel:
    """Gavel with its round-based time sharing over the rounds of one run (module docstring); called as
    ``scheduler(problem, table, deadline=...)``."""

    def __init__(self) -> None:
        self.history = RoundHistory()

    def __call__(self, problem: CriusRound, table: CriusTable, *, deadline: Deadline | None = None) -> Schedule:
        self.history.observe(problem)
        return _gavel(problem, table, deadline, self.history)


def schedule_gavel(problem: CriusRound, table: CriusTable, *, deadline: Deadline | None = None) -> Schedule:
    """Gavel on one round with no history (module docstring): every priority is infinite, so the jobs go in
    descending share, then FCFS."""
    return Gavel()(problem, table, deadline=deadline)


def priorities(problem: CriusRound, table: CriusTable, jobs: list[int], types: list[str], y: np.ndarray,
               history: RoundHistory) -> list[tuple[float, float, float, str, int, int]]:
    """Gavel's (job, type) pairs with ``y > 0``, highest priority first: sort keys ``(-priority, -share,
    submit, name, job index, type index)`` with priority ``y[j, t] / f[j, t]``, ``f`` the share of its time
    in the system the job has held type ``t`` (``inf`` when it never has)."""
    now = float(problem.time)
    out = []
    for a, j in enumerate(jobs):
        job = problem.jobs[j]
        present = max(now - job.submit_time, 0.0)
        got = history.service.get(job.name, {})
        for b, t in enumerate(types):
            if y[a, b] <= SHARE_EPS:
                continue
            f = got.get(t, 0.0) / present if present > 0 else 0.0
            pri = float("inf") if f <= 0 else float(y[a, b]) / f
            out.append((-pri, -float(y[a, b]), job.submit_time, job.name, j, b))
    out.sort()
    return out


def _gavel(problem: CriusRound, table: CriusTable, deadline: Deadline | None, history: RoundHistory) -> Schedule:
    st = CellState(problem, table, NO_ADMISSION)
    types = type_order(problem)
    jobs = [*fcfs(problem, table, queued=False), *fcfs(problem, table)]
    y = gavel_shares(problem, table, jobs, types, deadline)
    # capacity of each type: its free GPUs and those its running jobs hold
    cap = {t: int(st.ledger.free_gpus[st.by_type[t]].sum()) if t in st.by_type else 0 for t in types}
    for j in jobs:
        c = st.choice[j]
        if c is not None:
            cap[table.gpu_type[c.row]] += int(table.gpus[c.row])
    won: dict[int, str] = {}
    for *_, j, b in priorities(problem, table, jobs, types, y, history):
        g = request_gpus(problem, table, j)
        if j in won or g is None or g > cap[types[b]] or (types[b], g) not in cells_by_spec(table, j):
            continue
        won[j] = types[b]
        cap[types[b]] -= g
    for j in jobs:  # running jobs that lost their turn, or won another type, give their GPUs back
        c = st.choice[j]
        if c is not None and won.get(j, "") != table.gpu_type[c.row] and table.rows_of(j).size:
            st.put(j, None)
    complete = True
    for j, t in won.items():
        if deadline is not None and deadline.expired():
            complete = False
            break
        if st.choice[j] is not None:
            continue  # runs on the type it won: stays where it is
        cells = cells_by_spec(table, j)
        if st.put(j, cells[(t, request_gpus(problem, table, j))]):
            st.mark_changed(j)
        elif st.running[j]:
            st.keep(j)  # its new type's GPUs are fragmented: back where it ran, when still free
    choices = {table.jobs[j]: c for j, c in enumerate(st.choice) if c is not None}
    waiting = sum(1 for j in jobs if st.choice[j] is None)
    return Schedule(choices, NO_ADMISSION, f"waiting: {waiting} job(s)" if waiting else "", complete)


__all__ = ["Gavel", "NO_PROFILE_VALUE", "SHARE_EPS", "gavel_shares", "priorities", "schedule_gavel"]

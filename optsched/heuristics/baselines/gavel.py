"""Gavel-like (Crius Sec. 8.1: "a heterogeneity-aware scheduler ... including throughput maximization.
Although it considers the GPU heterogeneity, it does not support the scaling of GPU numbers";
Narayanan et al., OSDI'20, policy MaxSumThroughput).

Per round, over the rules of :mod:`optsched.heuristics.baselines.cells`: every job (running and
queued) runs its requested GPUs; the heterogeneity-aware LP

``max sum_{j,t} T[j,t] y[j,t]  s.t.  sum_t y[j,t] <= 1,  sum_j G_j y[j,t] <= GPUs of type t,  y >= 0``

(scipy's HiGHS) gives each job a share of each type, with ``T[j,t]`` the job's data-parallel
throughput on ``G_j`` GPUs of type ``t`` divided by its best over the types (Gavel's normalised
throughput; a type where data parallelism does not fit gets :data:`NO_PROFILE_VALUE`, so the job can
still be placed but Gavel prefers any type it has a profile for). Gavel realises the shares over time
with its round-based mechanism; a round here rounds them: running jobs whose current type has share
>= 1/2 stay where they are (as do running jobs without Cells in the table, e.g. left out by a time
limit), then jobs in descending order of their largest share (then FCFS) start on their types in
descending share where their Cell fits; a running job the LP moves elsewhere is migrated when its new
type has room, else kept where it ran if that is still free (else it is suspended).
"""

from __future__ import annotations

import numpy as np

from optsched.core.deadline import Deadline
from optsched.heuristics.baselines.cells import (NO_ADMISSION, cells_by_spec, dp_value, fcfs, request_gpus,
                                                type_order)
from optsched.heuristics.crius_state import CellState
from optsched.rounds.crius.decision import Schedule
from optsched.rounds.crius.problem import CriusRound
from optsched.rounds.crius.table import CriusTable

#: the LP value of a type on which a job has no data-parallel profile
NO_PROFILE_VALUE = 1e-3


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


def schedule_gavel(problem: CriusRound, table: CriusTable, *, deadline: Deadline | None = None) -> Schedule:
    """Gavel-like on the round (module docstring)."""
    st = CellState(problem, table, NO_ADMISSION)
    types = type_order(problem)
    jobs = [*fcfs(problem, table, queued=False), *fcfs(problem, table)]
    y = gavel_shares(problem, table, jobs, types, deadline)
    share = {j: y[a] for a, j in enumerate(jobs)}
    for j in jobs:  # running jobs on a type the LP gives them at least half of stay (and those without Cells)
        c = st.choice[j]
        if c is not None and share[j].any() and share[j][types.index(table.gpu_type[c.row])] < 0.5:
            st.put(j, None)
    order = sorted(jobs, key=lambda j: (-float(share[j].max()), problem.jobs[j].submit_time, problem.jobs[j].name))
    complete = True
    for j in order:
        if deadline is not None and deadline.expired():
            complete = False
            break
        if st.choice[j] is not None or share[j].max() <= 0:
            continue
        cells = cells_by_spec(table, j)
        g = request_gpus(problem, table, j)
        for b in np.argsort(-share[j], kind="stable"):
            if share[j][b] <= 0:
                break
            key = (types[int(b)], g)
            if key in cells and st.put(j, cells[key]):
                st.mark_changed(j)
                break
        if st.choice[j] is None and st.running[j]:
            st.keep(j)
    choices = {table.jobs[j]: c for j, c in enumerate(st.choice) if c is not None}
    waiting = sum(1 for j in jobs if st.choice[j] is None)
    return Schedule(choices, NO_ADMISSION, f"waiting: {waiting} job(s)" if waiting else "", complete)


__all__ = ["NO_PROFILE_VALUE", "gavel_shares", "schedule_gavel"]

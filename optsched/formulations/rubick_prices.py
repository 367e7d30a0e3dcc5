"""Very large Rubick rounds (issue 29, item 4): a price (Lagrangian) bound and a price-guided greedy, in the
manner of POP and CvxCluster (a relaxation priced into a greedy), for rounds whose exact model would not be
built and solved in the time limit.

**The relaxation** is the pooled encoding's (:mod:`optsched.formulations.rubick_round`, "Encodings") with every
part movable: per GPU type (its pool) and per part size ``s`` in use, the parts of at least ``s`` GPUs within the
pool's blocks of ``s`` GPUs (``sum_n floor(free_n / s) s`` when the sizes divide one another, else their count
within ``sum_n floor(free_n / s)``), CPUs and memory within the pool's totals, at most one row per job (exactly
one for a job that must run). A row's value is its term of the round objective with the least penalty its job
could pay for it (its current row: none; another row of a running job: the trim penalty), plus the preemption
penalty a running job then avoids; the objective is that sum less every running job's preemption penalty. Each
of these is at least the round's, so the relaxation's optimum bounds the round.

**The bound.** For prices ``lambda >= 0`` on the pool constraints, ``L(lambda) = offset + lambda . capacity +
sum_j max(0, max_k (value_k - lambda . use_k))`` (``max_k`` alone for a job that must run) bounds the
relaxation for every ``lambda`` (weak duality), and its least value is the LP relaxation's optimum (the jobs'
choices are integral per job). Up to ``LP_ROWS`` rows the LP itself is solved (HiGHS through SciPy), its
optimum is the bound and its duals the prices; before it (and alone above ``LP_ROWS``, or when the LP is not
solved in its share) ``L`` is minimised by Kelley's cutting planes in a box (``ITERATIONS`` at most, within
``CUT_SHARE`` of the limit, ``BOUND_SHARE`` above ``LP_ROWS``); the least value met is the bound. Cost: one
pass over the rows per step, vectorised (rows x constraints, a few dozen constraints), and an LP of one variable
per constraint.

**The incumbent** (:func:`price_guided`): at the prices of the best bound and of the last step, each job ranks
its rows by ``value - lambda . use``; the running jobs whose best row is their current one keep it where it
runs, then the jobs that must run, then the others by their best reduced value, largest first, each taking the
first of its rows (reduced value > 0, or any row for a job that must run) whose parts fit the nodes, placed
best-fit (the fitting node with the fewest free GPUs, largest part first, parts of a row on distinct nodes).
The jobs with a chosen row are admitted by their row's value per GPU while their rows stay within the pool limits
(at tied prices the chosen rows together may exceed them); the others come after. Last, each job left without a
row takes its most valuable row that still fits. The better decision by the round objective is returned.

Not for rounds whose jobs select nodes or have topology rules, or with cordoned or draining nodes
(:func:`applies`): the exact model handles those (its aggregated encoding).
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Mapping

import numpy as np

from optsched.core.deadline import Deadline
from optsched.formulations.solution import ModelSize, Solution
from optsched.perf.coefficients import CoefficientTable
from optsched.rounds.rubick.admission import Admission
from optsched.rounds.rubick.choice import Choice
from optsched.rounds.rubick.constraints import must_leave, node_constrained
from optsched.rounds.rubick.deadlines import privileged
from optsched.rounds.rubick.feasibility import violations
from optsched.rounds.rubick.objective import objective
from optsched.rounds.rubick.problem import RubickRound

log = logging.getLogger(__name__)

#: most subgradient steps of the price bound (module docstring)
ITERATIONS = 300
#: share of the time left the bound may take (cutting planes, then the LP); the greedy and the checks get the rest
BOUND_SHARE = 0.35
#: of which the cutting planes at most
CUT_SHARE = 0.15
#: most rows whose LP is solved (HiGHS through SciPy: 44,956 rows in 1.5 s, 281,674 not in 30 s); above, the
#: price bound by cutting planes
LP_ROWS = 100_000


def applies(problem: RubickRound) -> bool:
    """Whether the price path handles ``problem`` (module docstring, last paragraph)."""
    return not node_constrained(problem) and not any(j.topology is not None for j in problem.jobs)


@dataclass(frozen=True)
class _Relaxation:
    """The relaxation's arrays (module docstring): per row its job, value and use of each constraint."""

    rows: np.ndarray       # row indices of the table, grouped by job
    job: np.ndarray        # job index (table order) of each row
    starts: np.ndarray     # first position of each job's rows in ``rows`` (for reduceat)
    jobs: np.ndarray       # the jobs with rows, in the order of ``starts``
    must: np.ndarray       # per job of ``jobs``: whether it must run
    value: np.ndarray
    use: np.ndarray        # rows x constraints
    capacity: np.ndarray   # per constraint
    offset: float


def _relaxation(problem: RubickRound, table: CoefficientTable, admission: Admission,
                allowed: Mapping[int, np.ndarray]) -> _Relaxation:
    from optsched.formulations.rubick_round import _nodes  # one reading of the nodes' free resources

    nodes = _nodes(problem)
    floors = privileged(admission)
    types = sorted(set(nodes.types))
    rows_list, job_list, starts, jobs, must = [], [], [], [], []
    for j, rows in allowed.items():
        if rows.size:
            starts.append(len(rows_list))
            jobs.append(j)
            must.append(table.jobs[j] in floors)
            rows_list.extend(int(k) for k in rows)
            job_list.extend([j] * rows.size)
    rows_a = np.array(rows_list, dtype=np.int64)
    sizes_by_type: dict[str, set[int]] = defaultdict(set)
    for k in rows_list:
        sizes_by_type[table.gpu_type[k]].update(table.gpus_per_node[k])
    cols: list[tuple[str, str, int]] = []  # (type, "gpu" | "cpu" | "mem", size)
    caps: list[float] = []
    divisible: dict[str, bool] = {}
    for t in types:
        free = nodes.gpus[nodes.type_mask[t]]
        sizes = sorted(sizes_by_type.get(t, ()))
        divisible[t] = all(b % a == 0 for a, b in zip(sizes, sizes[1:]))
        for s in sizes:
            cols.append((t, "gpu", s))
            caps.append(float((free // s).sum() * (s if divisible[t] else 1)))
        if not divisible[t] and sizes:
            cols.append((t, "gpu", 0))
            caps.append(float(free.sum()))
        cols.append((t, "cpu", 0))
        caps.append(float(nodes.cpus[nodes.type_mask[t]].sum()))
        cols.append((t, "mem", 0))
        caps.append(float(nodes.mem[nodes.type_mask[t]].sum()) / 1024.0)
    col_of = {c: i for i, c in enumerate(cols)}
    # each row's use of the pool constraints, once per distinct (GPU type, shape): rounds repeat a few shapes
    shape_id: dict[tuple[str, tuple[int, ...]], int] = {}
    shape_of = np.empty(len(rows_list), dtype=np.int64)
    for i, k in enumerate(rows_list):
        key = (table.gpu_type[k], table.gpus_per_node[k])
        shape_of[i] = shape_id.setdefault(key, len(shape_id))
    shape_use = np.zeros((len(shape_id), len(cols)))
    for (t, shape), sid in shape_id.items():
        for part in shape:
            for (tt, kind, size), c in col_of.items():
                if tt == t and kind == "gpu" and size and part >= size:
                    shape_use[sid, c] += part if divisible[t] else 1
            if not divisible[t]:
                shape_use[sid, col_of[(t, "gpu", 0)]] += part
    use = shape_use[shape_of]
    job_a = np.array(job_list, dtype=np.int64)
    type_col = {t: (col_of[(t, "cpu", 0)], col_of[(t, "mem", 0)]) for t in types}
    row_type = np.array([table.gpu_type[k] for k in rows_list]) if rows_list else np.array([], dtype=str)
    for t, (c_cpu, c_mem) in type_col.items():
        on = row_type == t
        use[on, c_cpu] = table.cpus[rows_a[on]]
        use[on, c_mem] = table.mem_gib[rows_a[on]]
    weight = np.array([problem.weight(name) for name in table.jobs])
    running = table.current_row >= 0
    penalties = [problem.penalties(table.jobs[j]) if running[j] else None for j in range(len(table.jobs))]
    preempt = np.array([p.preempt if p is not None else 0.0 for p in penalties])
    least = np.array([min(p.trim, p.reconfig) if p is not None else 0.0 for p in penalties])
    value = weight[job_a] * table.throughput[rows_a] / table.reference_throughput[job_a]
    on_current = rows_a == table.current_row[job_a]
    value = value + np.where(running[job_a], preempt[job_a] - np.where(on_current, 0.0, least[job_a]), 0.0)
    offset = -float(preempt.sum())
    return _Relaxation(rows_a, job_a, np.array(starts, dtype=np.int64),
                       np.array(jobs, dtype=np.int64), np.array(must, dtype=bool), value, use, np.array(caps), offset)


def _dual(rel: _Relaxation, prices: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """``L(prices)`` (module docstring), each row's reduced value, and the subgradient (capacity less what the
    maximising choices use)."""
    reduced = rel.value - rel.use @ prices
    best = np.maximum.reduceat(reduced, rel.starts)
    take = np.where(rel.must, best, np.maximum(best, 0.0))
    chosen = np.zeros(len(rel.rows), dtype=bool)
    is_best = reduced == np.repeat(best, np.diff(np.append(rel.starts, len(rel.rows))))
    first = np.minimum.reduceat(np.where(is_best, np.arange(len(rel.rows)), len(rel.rows)), rel.starts)
    picked = first[(rel.must | (best > 0)) & (first < len(rel.rows))]
    chosen[picked] = True
    used = rel.use[chosen].sum(axis=0)
    return float(rel.offset + prices @ rel.capacity + take.sum()), reduced, rel.capacity - used


def _lp(rel: _Relaxation, time_limit: float, deadline: Deadline | None = None
        ) -> tuple[float, np.ndarray, np.ndarray] | None:
    """The relaxation's LP (every row a variable in [0, 1]) solved by HiGHS through SciPy within ``time_limit``:
    (its optimum plus the offset, the row values, the prices of the pool constraints), or None when it is not
    solved in time. Size: rows variables, jobs + pool constraints. HiGHS runs on a thread of its own (it releases
    the GIL) while this one watches ``deadline``: when that passes (or the call is cancelled) the LP is left to
    stop at its own ``time_limit`` and None is returned at once."""
    from scipy import sparse
    from scipy.optimize import linprog

    from optsched.formulations.watched import run_watched

    n, m = rel.use.shape
    pos_of_row = np.repeat(np.arange(len(rel.jobs)), np.diff(np.append(rel.starts, n)))
    incidence = sparse.csr_matrix((np.ones(n), (pos_of_row, np.arange(n))), shape=(len(rel.jobs), n))
    free_jobs = np.flatnonzero(~rel.must)
    a_ub = sparse.vstack([incidence[free_jobs], sparse.csr_matrix(rel.use.T)]).tocsr()
    b_ub = np.concatenate([np.ones(len(free_jobs)), rel.capacity])
    must = np.flatnonzero(rel.must)
    kw = {"A_eq": incidence[must], "b_eq": np.ones(len(must))} if len(must) else {}
    res = run_watched(lambda: linprog(-rel.value, A_ub=a_ub, b_ub=b_ub, bounds=(0.0, 1.0), method="highs",
                                      options={"time_limit": max(time_limit, 0.01), "presolve": True}, **kw),
                      lambda: deadline is not None and deadline.expired(), "optsched-price-lp")
    if res is None or res.status != 0 or res.x is None:
        return None
    prices = -np.asarray(res.ineqlin.marginals)[len(free_jobs):]
    return float(-res.fun) + rel.offset, np.asarray(res.x), np.maximum(prices, 0.0)


def _cutting_planes(rel: _Relaxation, until: float, deadline: Deadline) -> tuple[float, np.ndarray]:
    """The least ``L(lambda)`` (module docstring, "The bound") found by Kelley's cutting planes in a box around the
    best prices (the box doubles while the model's prediction hits its side, halves after a step that does not
    improve): (the bound, its prices), by ``until`` (a ``time.perf_counter()`` reading) or the deadline. Each step
    is one pass over the rows and an LP of ``constraints + 1`` variables and one row per step so far."""
    from scipy.optimize import linprog

    m = len(rel.capacity)
    prices = np.zeros(m)
    bound, _, grad = _dual(rel, prices)
    best = prices
    cuts_a: list[np.ndarray] = [np.append(grad, -1.0)]       # g . lambda - theta <= g . lambda_i - L_i
    cuts_b: list[float] = [float(grad @ prices) - bound]
    radius = max(1.0, float(np.abs(rel.value).max()))
    for _ in range(ITERATIONS):
        if time.perf_counter() >= until or deadline.expired():
            break
        lo = np.maximum(best - radius, 0.0)
        res = linprog(np.append(np.zeros(m), 1.0), A_ub=np.array(cuts_a), b_ub=np.array(cuts_b),
                      bounds=[*zip(lo, best + radius), (None, None)], method="highs")
        if res.status != 0:
            break
        trial, predicted = res.x[:m], float(res.x[m])
        value, _, g = _dual(rel, trial)
        cuts_a.append(np.append(g, -1.0))
        cuts_b.append(float(g @ trial) - value)
        if value < bound - 1e-12 * max(1.0, abs(bound)):
            bound, best = value, trial
            if np.any(np.isclose(np.abs(trial - best), radius)):
                radius *= 2.0
        else:
            radius = max(radius / 2.0, 1e-9)
        if bound - predicted <= 1e-7 * max(1.0, abs(bound)):
            break
    return bound, best


def price_guided(problem: RubickRound, table: CoefficientTable, rel: _Relaxation, reduced: np.ndarray,
                 first: np.ndarray | None = None, deadline: Deadline | None = None) -> dict[str, Choice] | None:
    """The greedy of the module docstring at the reduced values ``reduced``; ``first`` (per job of ``rel.jobs``:
    the position of the row to try first, -1 for none; e.g. the LP's choice) puts those jobs before the others,
    largest part first, which packs rows whose sizes divide one another whenever the pool limits hold. None
    when a job that must run fits nowhere (or the deadline passes first)."""
    from optsched.formulations.rubick_round import _nodes, best_fit_parts

    nodes = _nodes(problem)
    free_g, free_c, free_m = nodes.gpus.astype(np.int64), nodes.cpus.astype(np.int64), nodes.mem.astype(np.int64)
    index = {n: i for i, n in enumerate(nodes.names)}
    ends = np.append(rel.starts[1:], len(rel.rows))
    out: dict[str, Choice] = {}

    def place(k: int) -> tuple[tuple[str, int], ...] | None:
        mask = nodes.type_mask[table.gpu_type[k]]

        def allowed(s: int, cpus: int, mem: int) -> np.ndarray:
            return mask & (free_g >= s) & (free_c >= cpus) & (free_m >= mem)
        used = best_fit_parts(table, k, free_g, free_c, free_m, allowed)
        return None if used is None else tuple(sorted((nodes.names[i], g) for i, g in used))

    order = []
    for pos, j in enumerate(rel.jobs):
        seg = slice(int(rel.starts[pos]), int(ends[pos]))
        top = int(np.argmax(reduced[seg]))
        cur = int(table.current_row[j])
        pick = top if first is None or first[pos] < 0 else int(first[pos])
        keep = (cur >= 0 and not must_leave(problem, problem.job(table.jobs[j]))
                and int(rel.rows[seg][pick]) == cur)
        has_first = first is not None and first[pos] >= 0
        size = max(table.gpus_per_node[int(rel.rows[seg][pick])])
        rank = 0 if keep else 1 if rel.must[pos] else 2 if has_first else 3
        order.append((rank, -size if rank < 3 else 0, -float(reduced[seg][top]), pos, keep, pick))
    order = _admitted(table, rel, order)
    order.sort()
    for n_done, (rank, _, _, pos, keep, pick) in enumerate(order):
        if deadline is not None and n_done % 256 == 0 and deadline.expired():
            return None
        j = int(rel.jobs[pos])
        name = table.jobs[j]
        if keep:
            alloc = problem.current(name)
            assert alloc is not None
            idx = [(index[n], s) for n, s in alloc.placement.shares]
            if all(free_g[i] >= s.gpus and free_c[i] >= s.cpus for i, s in idx):
                for i, s in idx:
                    free_g[i] -= s.gpus
                    free_c[i] -= s.cpus
                    free_m[i] -= int(np.ceil(s.mem_gib * 1024.0 - 1e-6))
                out[name] = Choice(int(table.current_row[j]), alloc.placement.gpu_parts)
                continue
        seg = slice(int(rel.starts[pos]), int(ends[pos]))
        ranked = [pick] + [int(r) for r in np.argsort(-reduced[seg], kind="stable") if int(r) != pick]
        for r in ranked:
            if not rel.must[pos] and reduced[seg][r] <= 0.0 and r != pick:
                break
            k = int(rel.rows[seg][r])
            parts = place(k)
            if parts is not None:
                out[name] = Choice(k, parts)
                break
        if rel.must[pos] and name not in out:
            return None
    for _, _, _, pos, _, _ in order:  # what is left: the jobs without a row take the most valuable row that fits
        j = int(rel.jobs[pos])
        if table.jobs[j] in out:
            continue
        seg = slice(int(rel.starts[pos]), int(ends[pos]))
        for r in np.argsort(-rel.value[seg], kind="stable"):
            if rel.value[seg][r] <= 0.0:
                break
            parts = place(int(rel.rows[seg][r]))
            if parts is not None:
                out[table.jobs[j]] = Choice(int(rel.rows[seg][r]), parts)
                break
    return out


def _admitted(table: CoefficientTable, rel: _Relaxation, order: list[tuple]) -> list[tuple]:
    """``order`` with the jobs whose first row (rank 2) does not fit the pool limits moved to the jobs without one
    (rank 3): the jobs kept in place and those that must run count first, then the others by their first row's
    value per GPU, highest first, each admitted while what the admitted rows use stays within every pool limit
    (at the prices' ties many jobs' first rows together exceed them; placed largest part first, admitted rows
    whose sizes divide one another fit)."""
    used = np.zeros(len(rel.capacity))
    for rank, _, _, pos, _, pick in order:
        if rank < 2:
            used += rel.use[int(rel.starts[pos]) + pick]
    ranked = sorted((o for o in order if o[0] == 2),
                    key=lambda o: (-rel.value[int(rel.starts[o[3]]) + o[5]]
                                   / float(table.gpus[int(rel.rows[int(rel.starts[o[3]]) + o[5]])]), o[3]))
    out = [o for o in order if o[0] != 2]
    for o in ranked:
        need = rel.use[int(rel.starts[o[3]]) + o[5]]
        if np.all(used + need <= rel.capacity + 1e-9):
            used += need
            out.append(o)
        else:
            out.append((3, 0, o[2], o[3], o[4], o[5]))
    return out


def price_solve(problem: RubickRound, table: CoefficientTable, admission: Admission, allowed: Mapping[int, np.ndarray],
                *, time_limit: float) -> Solution:
    """The bound and the incumbent of the module docstring within ``time_limit`` seconds: status ``feasible``
    with the bound (``optimal`` when they meet), ``unknown`` when no decision was found."""
    t0 = time.perf_counter()
    deadline = Deadline(time_limit)
    rel = _relaxation(problem, table, admission, allowed)
    size = ModelSize(len(rel.rows), len(rel.capacity) + len(rel.jobs), "prices")
    if not len(rel.rows):
        return Solution("unknown", None, None, time.perf_counter() - t0, False, size, {"reason": "no row to choose"})
    candidates: list[tuple[np.ndarray, np.ndarray | None]] = []
    ends = np.append(rel.starts[1:], len(rel.rows))
    # the price bound by cutting planes first (anytime, each step a bound), then the LP when it is small enough
    # and time is left (its duals and its choice of rows guide the greedy best)
    share = CUT_SHARE if len(rel.rows) <= LP_ROWS else BOUND_SHARE  # no LP after them: the bound's whole share
    bound, prices = _cutting_planes(rel, t0 + share * time_limit, deadline)
    reduced = rel.value - rel.use @ prices
    top = np.maximum.reduceat(reduced, rel.starts)
    arg = np.array([int(np.argmax(reduced[a:b])) for a, b in zip(rel.starts, ends)])
    candidates.append((reduced, np.where(rel.must | (top > 0), arg, -1)))
    left = t0 + BOUND_SHARE * time_limit - time.perf_counter()
    lp = _lp(rel, left, deadline) if len(rel.rows) <= LP_ROWS and left > 0 else None
    if lp is not None:
        bound = min(bound, lp[0])
        x, prices = lp[1], lp[2]
        # each job's row of largest LP value first (-1: the LP runs it nowhere), at the LP's prices
        best_x = np.maximum.reduceat(x, rel.starts)
        arg = np.array([int(np.argmax(x[a:b])) for a, b in zip(rel.starts, ends)])
        candidates.insert(0, (rel.value - rel.use @ prices, np.where(best_x > 1e-6, arg, -1)))
    best: dict[str, Choice] | None = None
    best_obj = -np.inf
    for red, first in candidates:
        if deadline.expired():
            break
        cand = price_guided(problem, table, rel, red, first, deadline)
        if cand is not None and not violations(problem, table, cand, admission):
            obj = objective(problem, table, cand)
            if obj > best_obj:
                best, best_obj = cand, obj
    wall = time.perf_counter() - t0
    bound += 1e-6 * max(1.0, abs(bound)) + 0.5 * len(rel.jobs) * 1e-9  # the LP's tolerances
    if best is None:
        return Solution("unknown", None, bound, wall, False, size, {"reason": "the price-guided greedy placed no "
                                                                              "decision that keeps every rule"})
    bound = max(bound, best_obj)
    status = "optimal" if bound - best_obj <= 1e-6 * max(1.0, abs(best_obj)) else "feasible"
    log.debug("price path: objective %.6g, bound %.6g, %.2f s", best_obj, bound, wall)
    return Solution(status, best_obj, bound, wall, False, size, {"choices": best})


__all__ = ["BOUND_SHARE", "CUT_SHARE", "ITERATIONS", "LP_ROWS", "applies", "price_guided", "price_solve"]

"""Rubick's scheduling heuristic (Algorithm 1, Sec. 5) on a round's coefficient table.

The table (:func:`optsched.scheduling.rubick_table.build_round_table`) is the only source of
throughputs and resource needs; this module never calls the performance model. Values are
*normalised* throughputs (throughput / reference throughput of the job), the unit of the round
objective (:func:`optsched.scheduling.rubick_eval.objective`), because raw samples/s of different
models are incomparable.

Algorithm 1, as implemented (paper lines in brackets):

* **Start state.** Every running job holds its current configuration on its current nodes (its exact
  current shares); a running guaranteed job that waits for quota (``admission.waiting``) is preempted.
* **Schedule** [lines 1-5]. First the *privileged* jobs (``admission.protected``) that do not yet run
  a row reaching their guarantee, in admission order [lines 2-3]; then
  ``SortBySlope(best-effort queued  U  running)`` [lines 4-5]: descending GPU slope, then CPU slope,
  then job name ("a greedy sort that compares the slopes of GPUs and then CPUs"), computed once at the
  start of the phase. Each job is scheduled once.
* **ScheduleJob** [lines 6-25]. The job gives up what it holds, then walks the nodes of its GPU types
  (its current nodes first, then by free GPUs, descending, then name; a privileged job ranks nodes by
  free GPUs plus GPUs held by best-effort jobs). On each node it sees the free resources [line 8] and,
  per resource type GPU then CPU [line 9], repeatedly shrinks the lowest-slope job over its minimum on
  that node (``GetLowestSlopeOverMinJob`` [line 10]) while line 14 allows it: (1) that slope is lower
  than the job's own growth slope, or (2) the job has not reached its minimum demand. The walk stops
  once the job can run its best row. ``GetBestPlan`` [line 21] is the highest-throughput row whose
  shape maps onto the gathered per-node amounts, each part on a distinct node of the row's GPU type
  with enough GPUs, CPUs and memory (``AllocMem`` [line 22]: ``part_share`` of the row); a running job
  may instead keep its exact current shares. What the chosen row does not use is given back: jobs
  shrunk during the walk are restored, most recently shrunk first, to their previous configuration
  when it fits again, else to the best row on their previous nodes.
* **minRes.** A protected job's minimum is "some row reaching its guarantee" (the fewest GPUs of such
  a row is its quota usage, :func:`~optsched.scheduling.rubick_eval.admit`); shrinking a protected
  job is allowed only to a row that still reaches its guarantee. A best-effort job's minimum is 0:
  shrinking it to nothing preempts it [Sec. 5, "Shrinking a job to 0 results in a preemption"].

Choices where the paper is silent (documented here, checked in ``tests/test_rubick_heuristic.py``):

* **Sensitivity curve** of a job: ``F(g, c)`` = best normalised throughput of any of its rows with at
  most ``g`` GPUs and ``c`` CPUs (running maximum, flat between valid points) [Sec. 5, Fig. 6]. The GPU
  curve leaves CPUs free, the CPU curve holds the GPUs fixed.
* **Growth slope** (the job being scheduled; also the SortBySlope key): from its position ``(g, v)`` —
  GPUs and value of the best row that maps onto what it has gathered (0 when none) — the gain per
  GPU to the *next better point* of the curve: ``g' = min{GPUs of a row with value > v, GPUs > g}``,
  slope ``(F(g') - v) / (g' - g)``; 0 when no row is better. The CPU slope is the same along CPUs with
  the GPUs capped at the GPUs gathered.
* **Shrink slope** (a job ``v`` on node ``n``): one unit Δr of the resource is taken from ``v``'s share
  on ``n``, and ``v`` is re-fitted to the best row that maps onto its remaining shares (a protected job
  only to a row reaching its guarantee; a best-effort job with no such row is preempted). The loss is
  the drop of ``v``'s term in the round objective (normalised throughput, plus the reconfiguration or
  preemption penalty the move newly incurs); the slope is that loss per unit of the resource the
  re-fit frees on ``n`` (one unit, or several when the curve is flat below the current point, i.e.
  the loss per unit "down to the next lower point"). Re-fitting a job at every unit is equivalent to
  the paper's unit-by-unit shrinking on flat curves and keeps every intermediate state a valid
  configuration (needed on restricted tables, e.g. a job whose only row has 8 GPUs).
* **Penalties.** A ScheduleJob outcome is committed only if it raises the round objective (sum of
  normalised throughputs minus reconfiguration and preemption penalties, Sec. 3) — line 14's case (1)
  intent, "the reallocation will increase total throughput" — or when it places a privileged job below
  its minimum (case (2)). Otherwise the state is rolled back.
* **Repacking guarantees.** Algorithm 1 never moves a job it shrinks, so a protected job may find no
  node although moving another protected job would make room. When a privileged job cannot be
  placed, lines 2-3 are run again from the start state with every protected job released and placed
  again, most GPUs of minimum demand first, each preferring its current nodes (a running job keeps its
  exact shares when they still fit). Only if that fails too is the round declared infeasible.
* **Return to the queue.** Jobs left without resources (preempted or never placed) get one more try at
  the end on the free resources only, without shrinking anyone.

Raises :class:`UnreachableGuaranteeError` (an :class:`~optsched.core.errors.InfeasibleError`) naming
the job(s) when a protected job cannot reach its guarantee even after shrinking every job that may be
shrunk and repacking the protected jobs.

**Deferring unreachable guarantees** (:func:`schedule_with_deferral`; the paper is silent, a production
scheduler should not drop a whole round for one job). Admission counts GPUs, not node shapes, so an
admitted job may find no node shape reaching its guarantee. Instead of failing the round, the jobs
that fail are *deferred*: moved from ``admission.protected`` to ``admission.waiting``
(:meth:`~optsched.scheduling.rubick_eval.Admission.defer`), i.e. treated for this round exactly like a
guaranteed job waiting for quota (it does not run and is not scheduled as best-effort either), and the
round is run again with the reduced admission until it succeeds. Which jobs are deferred: the
privileged jobs *Algorithm 1 proper* (lines 2-3, every other job holding its configuration) could not
place, as reported by :attr:`UnreachableGuaranteeError.jobs` — not those the repack fallback left
over, which would often be a running guaranteed job displaced by the repack (on the multi-tenant trace
the repack places the queued newcomer and then fails on a small running job); deferring Algorithm 1's
failures keeps running guarantees ahead of queued ones, as admission does. A running guaranteed job
is deferred only when Algorithm 1 must move it (its current row does not reach its guarantee) and it
fits nowhere; it is then *preempted* this round, since it cannot be given its guarantee. Each pass
defers at least one protected job, so there are at most (protected jobs + 1) passes; the deferred
jobs' quota is not handed to other guaranteed jobs (they keep their place in line for the next round).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Mapping

import numpy as np

from optsched.core.errors import InfeasibleError
from optsched.core.round import RoundProblem
from optsched.perf.coefficients import CoefficientTable
from optsched.scheduling.rubick_eval import Admission, Choice, admit, is_kept, reaches_guarantee

log = logging.getLogger(__name__)


class UnreachableGuaranteeError(InfeasibleError):
    """Some protected job cannot be placed at a row reaching its guarantee (module docstring).
    ``job_reasons`` maps each protected job Algorithm 1 proper could not place (every other job holding
    its configuration) to why — the jobs :func:`schedule_with_deferral` defers; ``jobs`` are their
    names in admission order. ``reasons`` also lists what the repack fallback left unplaced."""

    def __init__(self, message: str, reasons: tuple[str, ...] = (), job_reasons: Mapping[str, str] | None = None
                 ) -> None:
        super().__init__(message, reasons)
        self.job_reasons: dict[str, str] = dict(job_reasons or {})
        self.jobs: tuple[str, ...] = tuple(self.job_reasons)


@dataclass(frozen=True)
class DeferralResult:
    """What :func:`schedule_with_deferral` returns: the ``choices`` (as :func:`schedule`), the reduced
    ``admission`` they satisfy, and the ``deferred`` jobs (name -> why its guarantee is unreachable),
    in the order they were deferred (empty when nothing had to be deferred)."""

    choices: Mapping[str, Choice]
    admission: Admission
    deferred: Mapping[str, str]


#: tolerance of slope and objective comparisons (normalised-throughput units)
EPS = 1e-9
#: tolerance of memory comparisons (GiB), as in :func:`~optsched.scheduling.rubick_eval.violations`
MEM_TOL = 1e-7

_GPU, _CPU = 0, 1


@dataclass(frozen=True)
class _Config:
    """A job's configuration in the heuristic's state: table ``row`` and its shares
    ``((node index, gpus, cpus, mem_gib), ...)`` sorted by node index; ``kept`` when it is exactly the
    job's running configuration (no reconfiguration penalty)."""

    row: int
    shares: tuple[tuple[int, int, int, float], ...]
    kept: bool

    def share_on(self, node: int) -> tuple[int, int, float]:
        for n, g, c, m in self.shares:
            if n == node:
                return g, c, m
        return 0, 0, 0.0


@dataclass(frozen=True)
class _Shrink:
    """Shrinking a job by one unit of a resource on a node: its re-fitted configuration ``new`` (None:
    preempted), the ``loss`` of objective, the units ``released`` on the node and ``slope`` = loss per
    unit."""

    new: _Config | None
    loss: float
    released: int
    slope: float


@dataclass(frozen=True, eq=False)
class _Rows:
    """A job's rows sorted by normalised throughput descending (then fewer GPUs, CPUs, memory, row)."""

    rows: np.ndarray
    val: np.ndarray
    gpus: np.ndarray
    cpus: np.ndarray
    mem: np.ndarray
    maxpart: np.ndarray
    ok: np.ndarray
    tid: np.ndarray
    shapes: tuple[tuple[int, ...], ...]
    vmax: float


class _Engine:
    """Mutable state of one call of :func:`schedule` (free resources per node, configuration per
    job, undo log of the current ScheduleJob)."""

    def __init__(self, problem: RoundProblem, table: CoefficientTable, admission: Admission) -> None:
        self.p, self.t, self.adm = problem, table, admission
        nodes = sorted(problem.cluster.nodes, key=lambda n: n.name)
        self.node_names = [n.name for n in nodes]
        self.node_idx = {name: i for i, name in enumerate(self.node_names)}
        types = sorted({n.gpu_type for n in nodes} | set(table.gpu_type))
        self.type_id = {name: i for i, name in enumerate(types)}
        self.node_type = np.array([self.type_id[n.gpu_type] for n in nodes], dtype=np.int64)
        n_nodes = len(nodes)
        self.fg, self.fc, self.fm = problem.free_arrays(self.node_names)
        self.sg = np.zeros(n_nodes, dtype=np.int64)
        self.sc = np.zeros(n_nodes, dtype=np.int64)
        self.sm = np.zeros(n_nodes, dtype=float)
        self.node_jobs: list[set[int]] = [set() for _ in nodes]
        self.norm = table.throughput / table.reference_throughput[table.job_index]
        ok_all = reaches_guarantee(table, np.arange(len(table))) if len(table) else np.zeros(0, dtype=bool)
        row_tid = np.array([self.type_id[x] for x in table.gpu_type], dtype=np.int64)
        maxpart = np.array([max(s) for s in table.gpus_per_node], dtype=np.int64)
        n_jobs = len(table.jobs)
        self.names = table.jobs
        self.protected = np.array([name in admission.protected for name in self.names], dtype=bool)
        self.waiting = np.array([name in admission.waiting for name in self.names], dtype=bool)
        self.running = np.asarray(table.current_row) >= 0
        self.pen_reconf = float(problem.reconfig_penalty)
        self.pen_preempt = float(problem.preempt_penalty)
        self.R: list[_Rows] = []
        self.pref = np.zeros((n_jobs, n_nodes), dtype=bool)
        self.cur_cfg: list[_Config | None] = [None] * n_jobs
        self.cur_parts: list[tuple[tuple[str, int], ...] | None] = [None] * n_jobs
        self.cfg: list[_Config | None] = [None] * n_jobs
        # every job's rows in one sort: by job, then normalised throughput descending, fewer GPUs,
        # CPUs, memory, row index
        k_all = np.arange(len(table))
        order = np.lexsort((k_all, table.mem_gib, table.cpus, table.gpus, -self.norm, table.job_index))
        bounds = np.searchsorted(table.job_index[order], np.arange(n_jobs + 1))
        type_nodes = np.array([self.node_type == t for t in range(len(types))], dtype=bool).reshape(len(types), n_nodes)
        job_types = np.zeros((n_jobs, len(types)), dtype=bool)
        job_types[table.job_index, row_tid] = True
        self.elig = (job_types.astype(np.int64) @ type_nodes.astype(np.int64)) > 0
        cols = (self.norm[order], table.gpus[order], table.cpus[order], table.mem_gib[order], maxpart[order],
                ok_all[order], row_tid[order])
        shapes_all = table.gpus_per_node
        for j, name in enumerate(self.names):
            a, b = bounds[j], bounds[j + 1]
            rows = order[a:b]
            val, g, c, m, mp, ok, tid = (x[a:b] for x in cols)
            self.R.append(_Rows(rows=rows, val=val, gpus=g, cpus=c, mem=m, maxpart=mp, ok=ok, tid=tid,
                                shapes=tuple(shapes_all[k] for k in rows),
                                vmax=float(val[0]) if rows.size else 0.0))
            cur = problem.current(name)
            cur_row = int(table.current_row[j])
            if cur is not None and cur_row >= 0:
                shares = tuple(sorted((self.node_idx[n], s.gpus, s.cpus, float(s.mem_gib))
                                      for n, s in cur.placement.shares))
                self.cur_cfg[j] = _Config(cur_row, shares, True)
                self.cur_parts[j] = tuple(sorted((n, s.gpus) for n, s in cur.placement.shares if s.gpus > 0))
                for n, *_ in shares:
                    self.pref[j, n] = True
        self.rank = {j: r for r, j in enumerate(sorted(range(n_jobs), key=lambda j: self.names[j]))}
        self.cache: dict[tuple[int, _Config, int, int], _Shrink | None] = {}
        self.log: list[tuple[int, _Config | None]] | None = None

    # -- state ----------------------------------------------------------------------------------
    def set(self, j: int, new: _Config | None) -> None:
        old = self.cfg[j]
        if old is new:
            return
        if old is not None:
            for n, g, c, m in old.shares:
                self.fg[n] += g
                self.fc[n] += c
                self.fm[n] += m
                self.node_jobs[n].discard(j)
        if new is not None:
            for n, g, c, m in new.shares:
                self.fg[n] -= g
                self.fc[n] -= c
                self.fm[n] -= m
                self.node_jobs[n].add(j)
        self.cfg[j] = new
        if self.log is not None:
            self.log.append((j, old))

    def rollback(self) -> None:
        assert self.log is not None
        entries, self.log = self.log, None
        for j, old in reversed(entries):
            self.set(j, old)

    def contrib(self, j: int, cfg: _Config | None) -> float:
        """Job ``j``'s term of the round objective under ``cfg``."""
        if cfg is None:
            return -self.pen_preempt if self.running[j] else 0.0
        pen = self.pen_reconf if self.running[j] and not cfg.kept else 0.0
        return float(self.norm[cfg.row]) - pen

    def fits(self, cfg: _Config, ag: np.ndarray, ac: np.ndarray, am: np.ndarray) -> bool:
        return all(ag[n] >= g and ac[n] >= c and am[n] >= m - MEM_TOL for n, g, c, m in cfg.shares)

    # -- GetBestPlan ------------------------------------------------------------------------------
    def map_row(self, j: int, i: int, cand: np.ndarray, full: tuple[np.ndarray, np.ndarray, np.ndarray],
                base: np.ndarray | None) -> _Config | None:
        """Map row ``R[j].rows[i]``'s shape onto distinct nodes of ``cand`` (``full`` = amounts of
        GPUs, CPUs and GiB indexed by node). Largest part first; among feasible nodes: the job's current
        nodes, then nodes where the part fits in ``base`` (free before the walk), then the smallest
        fitting amount of GPUs (best fit), then walk order. Parts need nested resources (a node that
        fits a part fits every smaller part), so this greedy finds a mapping whenever one exists."""
        R = self.R[j]
        ag, ac, am = full[0][cand], full[1][cand], full[2][cand]
        row = int(R.rows[i])
        G, C, M = int(R.gpus[i]), int(R.cpus[i]), float(R.mem[i])
        ok_t = self.node_type[cand] == R.tid[i]
        pref = self.pref[j, cand]
        used = np.zeros(cand.size, dtype=bool)
        pos = np.arange(cand.size)
        shares: list[tuple[int, int, int, float]] = []
        for s in R.shapes[i]:
            cs = math.ceil(C * s / G - 1e-9)
            ms = M * s / G
            feas = ok_t & ~used & (ag >= s) & (ac >= cs) & (am >= ms - MEM_TOL)
            idx = np.flatnonzero(feas)
            if idx.size == 0:
                return None
            if idx.size > 1:
                key = (~pref[idx]).astype(np.int64) * 2
                if base is not None:
                    key = key + (base[cand[idx]] < s)
                key = (key * (1 << 20) + ag[idx]) * (1 << 20) + pos[idx]
                k = int(idx[np.argmin(key)])
            else:
                k = int(idx[0])
            used[k] = True
            shares.append((int(cand[k]), int(s), cs, ms))
        kept = False
        if self.cur_parts[j] is not None:
            parts = tuple(sorted((self.node_names[n], g) for n, g, _, _ in shares))
            if parts == self.cur_parts[j]:
                choice: Choice = (row, parts)
                kept = is_kept(self.p, self.t, j, choice)
        if kept:
            cur = self.cur_cfg[j]
            assert cur is not None
            cfg = _Config(row, cur.shares, True)
            return cfg if self.fits(cfg, *full) else None
        return _Config(row, tuple(sorted(shares)), False)

    def best(self, j: int, cand: np.ndarray, AG: np.ndarray, AC: np.ndarray, AM: np.ndarray, *, guarantee: bool,
             keep: bool, base: np.ndarray | None = None) -> _Config | None:
        """GetBestPlan: the best configuration of job ``j`` on the amounts ``AG/AC/AM`` (indexed by
        node) of the nodes ``cand``: the row of highest normalised throughput that maps onto them
        (:meth:`map_row`), or — with ``keep`` — the job's running configuration when it fits and the
        reconfiguration penalty makes it the better choice. ``guarantee`` restricts to rows reaching
        the job's reference throughput."""
        R = self.R[j]
        chosen: _Config | None = None
        score = -math.inf
        if keep and self.cur_cfg[j] is not None:
            cur = self.cur_cfg[j]
            assert cur is not None
            if (not guarantee or self.ok_row(cur.row)) and self.fits(cur, AG, AC, AM):
                chosen, score = cur, float(self.norm[cur.row])
        if cand.size == 0 or R.rows.size == 0:
            return chosen
        ag, ac, am = AG[cand], AC[cand], AM[cand]
        mask = (R.gpus <= ag.sum()) & (R.maxpart <= ag.max()) & (R.cpus <= ac.sum()) & (R.mem <= am.sum() + MEM_TOL)
        if guarantee:
            mask &= R.ok
        for i in np.flatnonzero(mask):
            if R.val[i] <= score + EPS:
                break
            cfg = self.map_row(j, int(i), cand, (AG, AC, AM), base)
            if cfg is None:
                continue
            s = float(R.val[i]) - (self.pen_reconf if self.running[j] and not cfg.kept else 0.0)
            if s > score + EPS:
                chosen, score = cfg, s
            break
        return chosen

    def ok_row(self, row: int) -> bool:
        return bool(reaches_guarantee(self.t, row)[0])

    # -- slopes ---------------------------------------------------------------------------------
    def slope_gpu(self, j: int, v: float, g: int) -> float:
        """Growth slope along the GPU curve from ``(g, v)`` (module docstring)."""
        R = self.R[j]
        m = (R.val > v + EPS) & (R.gpus > g)
        if not m.any():
            return 0.0
        g2 = int(R.gpus[m].min())
        return (float(R.val[R.gpus <= g2].max()) - v) / (g2 - g)

    def slope_cpu(self, j: int, v: float, c: int, g_cap: int) -> float:
        """Growth slope along the CPU curve from ``(c, v)`` with at most ``g_cap`` GPUs."""
        R = self.R[j]
        within = R.gpus <= g_cap
        m = within & (R.val > v + EPS) & (R.cpus > c)
        if not m.any():
            return 0.0
        c2 = int(R.cpus[m].min())
        return (float(R.val[within & (R.cpus <= c2)].max()) - v) / (c2 - c)

    def position(self, cfg: _Config | None) -> tuple[float, int, int]:
        if cfg is None:
            return 0.0, 0, 0
        return float(self.norm[cfg.row]), int(self.t.gpus[cfg.row]), int(self.t.cpus[cfg.row])

    # -- GetLowestSlopeOverMinJob -----------------------------------------------------------------
    def shrink(self, v: int, n: int, res: int) -> _Shrink | None:
        """Shrinking job ``v`` by one unit of ``res`` on node ``n`` (None: not allowed, i.e. not over
        its minimum)."""
        cfg = self.cfg[v]
        assert cfg is not None
        key = (v, cfg, n, res)
        if key in self.cache:
            return self.cache[key]
        g, c, _ = cfg.share_on(n)
        out: _Shrink | None = None
        if (g if res == _GPU else c) > 0:
            cand = np.array([s[0] for s in cfg.shares], dtype=np.int64)
            for nn, gg, cc, mm in cfg.shares:
                self.sg[nn], self.sc[nn], self.sm[nn] = gg, cc, mm
            if res == _GPU:
                self.sg[n] -= 1
            else:
                self.sc[n] -= 1
            new = self.best(v, cand, self.sg, self.sc, self.sm, guarantee=bool(self.protected[v]), keep=False)
            self.sg[cand] = 0
            self.sc[cand] = 0
            self.sm[cand] = 0.0
            if new is not None or not self.protected[v]:
                ng, nc, _ = new.share_on(n) if new is not None else (0, 0, 0.0)
                released = (g - ng) if res == _GPU else (c - nc)
                if released > 0:
                    loss = self.contrib(v, cfg) - self.contrib(v, new)
                    out = _Shrink(new, loss, released, loss / released)
        self.cache[key] = out
        return out

    def lowest(self, n: int, res: int, exclude: int) -> tuple[int, _Shrink] | None:
        best: tuple[int, _Shrink] | None = None
        for v in self.node_jobs[n]:
            if v == exclude:
                continue
            ev = self.shrink(v, n, res)
            if ev is None:
                continue
            if best is None or (ev.slope, self.rank[v]) < (best[1].slope, self.rank[best[0]]):
                best = (v, ev)
        return best

    # -- ScheduleJob ----------------------------------------------------------------------------
    def walk_order(self, j: int, privileged: bool) -> np.ndarray:
        cur = self.cur_cfg[j]
        first = [n for n, *_ in cur.shares if self.elig[j, n]] if cur is not None else []
        rest = np.flatnonzero(self.elig[j] & ~self.pref[j])
        score = self.fg[rest].astype(float)
        if privileged:
            held = np.zeros(len(self.node_names))
            for v, cfg in enumerate(self.cfg):
                if cfg is not None and not self.protected[v]:
                    for n, g, _, _ in cfg.shares:
                        held[n] += g
            score = score + held[rest]
        rest = rest[np.lexsort((rest, -score))]
        return np.concatenate([np.array(first, dtype=np.int64), rest]).astype(np.int64)

    def schedule_job(self, j: int, forced: bool) -> bool:
        """ScheduleJob [Algorithm 1, lines 6-25] for job index ``j``; True when committed. ``forced``:
        a privileged job below its minimum (committed whenever it reaches its guarantee)."""
        self.log = []
        prot = bool(self.protected[j])
        self.set(j, None)
        base = self.fg.copy()
        order = self.walk_order(j, forced)
        R = self.R[j]
        vis = np.empty(order.size, dtype=np.int64)
        shrunk: list[int] = []
        seen: set[int] = set()
        u: _Config | None = None
        state: dict[str, float] = {}

        def refresh(k: int) -> None:
            nonlocal u
            cand = vis[:k]
            u = self.best(j, cand, self.fg, self.fc, self.fm, guarantee=False, keep=True, base=base)
            v, g, c = self.position(u)
            below = prot and (u is None or not self.ok_row(u.row))
            if below and u is not None:
                below = self.best(j, cand, self.fg, self.fc, self.fm, guarantee=True, keep=True) is None
            state.update(v=v, g=g, c=c, below=float(below), sg=self.slope_gpu(j, v, g),
                         sc=self.slope_cpu(j, v, c, int(self.fg[cand].sum())))

        def done() -> bool:
            return u is not None and not state["below"] and state["v"] >= R.vmax - EPS

        finished = False
        for k, n in enumerate(order):
            n = int(n)
            vis[k] = n
            if k == 0 or self.fg[n] > 0:
                refresh(k + 1)
            if done():
                break
            for res in (_GPU, _CPU):
                if res == _CPU and self.fg[n] <= 0:
                    break
                while True:
                    s_j = state["sg"] if res == _GPU else state["sc"]
                    below = bool(state["below"])
                    if s_j <= 0 and not below:
                        break
                    low = self.lowest(n, res, j)
                    if low is None:
                        break
                    v, ev = low
                    if not (below or ev.slope < s_j - EPS):
                        break
                    self.set(v, ev.new)
                    if v not in seen:
                        seen.add(v)
                        shrunk.append(v)
                    refresh(k + 1)
                    if done():
                        finished = True
                        break
                if finished:
                    break
            if finished or done():
                break
        cand = vis[:k + 1] if order.size else vis[:0]
        final = self.best(j, cand, self.fg, self.fc, self.fm, guarantee=prot, keep=True, base=base)
        if final is None:
            self.rollback()
            return False
        self.set(j, final)
        self.give_back(shrunk)
        first: dict[int, _Config | None] = {}
        assert self.log is not None
        for job, old in self.log:
            first.setdefault(job, old)
        delta = sum(self.contrib(job, self.cfg[job]) - self.contrib(job, old) for job, old in first.items())
        if forced or delta > EPS:
            self.log = None
            return True
        self.rollback()
        return False

    def give_back(self, shrunk: list[int]) -> None:
        """Return what the chosen row does not use: restore shrunk jobs, most recently shrunk first, to
        their configuration before this ScheduleJob when it fits again, else to the best row on their
        previous nodes when that beats their shrunk state."""
        assert self.log is not None
        before: dict[int, _Config | None] = {}
        for job, old in self.log:
            before.setdefault(job, old)
        for v in reversed(shrunk):
            orig, cur = before[v], self.cfg[v]
            if cur is orig or orig is None:
                continue
            self.set(v, None)
            if self.fits(orig, self.fg, self.fc, self.fm):
                self.set(v, orig)
                continue
            cand = np.array([s[0] for s in orig.shares], dtype=np.int64)
            new = self.best(v, cand, self.fg, self.fc, self.fm, guarantee=bool(self.protected[v]), keep=False)
            if new is not None and self.contrib(v, new) > self.contrib(v, cur) + EPS:
                self.set(v, new)
            else:
                self.set(v, cur)

    def fill(self, j: int) -> None:
        """A job without resources tries the free resources only ("returns to the queue")."""
        cand = np.flatnonzero(self.elig[j] & (self.fg > 0))
        new = self.best(j, cand, self.fg, self.fc, self.fm, guarantee=bool(self.protected[j]), keep=True)
        if new is not None and self.contrib(j, new) > self.contrib(j, None) + EPS:
            self.set(j, new)

    def sort_key(self, j: int) -> tuple[float, float, str]:
        """SortBySlope key: GPU slope, then CPU slope (descending), then name."""
        v, g, c = self.position(self.cfg[j])
        R = self.R[j]
        g_cap = g if self.cfg[j] is not None else (int(R.gpus.min()) if R.rows.size else 0)
        return -self.slope_gpu(j, v, g), -self.slope_cpu(j, v, c, g_cap), self.names[j]

    def infeasible_reason(self, j: int) -> str:
        R = self.R[j]
        ok = np.flatnonzero(R.ok)
        need = int(R.gpus[ok].min()) if ok.size else 0
        shapes = sorted({R.shapes[i] for i in ok if R.gpus[i] == need})
        types = sorted({self.t.gpu_type[int(R.rows[i])] for i in ok if R.gpus[i] == need})
        held = np.zeros(len(self.node_names), dtype=np.int64)
        for v, cfg in enumerate(self.cfg):
            if cfg is not None and not self.protected[v]:
                for n, g, _, _ in cfg.shares:
                    held[n] += g
        mask = np.isin(self.node_type, [self.type_id[x] for x in types])
        avail = (self.fg + held)[mask]
        most = int(avail.max()) if avail.size else 0
        return (f"guaranteed job {self.names[j]!r} needs {need} {'/'.join(types)} GPUs "
                f"(shape {' or '.join(map(str, shapes))}) to reach its reference throughput "
                f"{float(self.t.reference_throughput[j]):.4g} samples/s, but only {int(avail.sum())} GPUs of that "
                f"type are free or held by best-effort jobs (at most {most} on one node)")


def _privileged_phase(problem: RoundProblem, table: CoefficientTable, admission: Admission, *, repack: bool
                      ) -> tuple[_Engine, list[int], list[tuple[int, str]]]:
    """Start state and Algorithm 1 lines 2-3. Running jobs hold their current configuration, waiting
    guaranteed jobs do not run; then every privileged job not yet at a row reaching its guarantee is
    scheduled (forced), in admission order. With ``repack`` (the fallback when that fails, since
    Algorithm 1 never moves a job it shrinks) every protected job first gives up its resources and
    all are placed again, most GPUs of minimum demand first (then admission order), each preferring
    its current nodes. Returns the engine, the privileged jobs and the failures (job index, reason)."""
    eng = _Engine(problem, table, admission)
    for j in range(len(eng.names)):
        if eng.cur_cfg[j] is not None and not eng.waiting[j]:
            eng.set(j, eng.cur_cfg[j])
    admitted = [table.jobs.index(name) for name in admission.protected]
    if repack:
        privileged = sorted(admitted, key=lambda j: (-admission.protected[eng.names[j]], admitted.index(j)))
        for j in privileged:
            eng.set(j, None)
    else:
        privileged = [j for j in admitted if eng.cfg[j] is None or not eng.ok_row(eng.cfg[j].row)]
    failures = [(j, eng.infeasible_reason(j)) for j in privileged if not eng.schedule_job(j, forced=True)]
    return eng, privileged, failures


def schedule(problem: RoundProblem, table: CoefficientTable, admission: Admission | None = None) -> dict[str, Choice]:
    """Rubick Algorithm 1 on the round's coefficient table. Returns job name -> (row, ((node, gpus),
    ...)) for every job that runs (module docstring for the algorithm and the choices made).

    ``admission`` defaults to :func:`~optsched.scheduling.rubick_eval.admit`. The result always passes
    :func:`~optsched.scheduling.rubick_eval.violations`. Raises :class:`UnreachableGuaranteeError`
    (an ``InfeasibleError``) naming every protected job that cannot reach its guarantee, with the GPUs
    it needs and what is free or held by best-effort jobs; :func:`schedule_with_deferral` defers them
    instead. Deterministic: ties are broken by job and node name."""
    return _algorithm1(problem, table, admission or admit(problem, table))


def schedule_with_deferral(problem: RoundProblem, table: CoefficientTable, admission: Admission | None = None
                           ) -> DeferralResult:
    """:func:`schedule`, deferring the protected jobs whose guarantee is unreachable this round instead
    of raising (module docstring, "Deferring unreachable guarantees"): each failure's
    :attr:`UnreachableGuaranteeError.jobs` move to ``waiting`` (a running one is preempted) and the round
    is run again with the reduced admission. Returns the choices, which pass
    :func:`~optsched.scheduling.rubick_eval.violations` for the returned (reduced) admission, that
    admission and the deferred jobs with their reasons. When nothing is unreachable the choices are
    exactly :func:`schedule`'s and the admission is unchanged."""
    admission = admission or admit(problem, table)
    deferred: dict[str, str] = {}
    while True:  # every failing pass defers >= 1 protected job; with none left Algorithm 1 cannot fail
        try:
            choices = _algorithm1(problem, table, admission)
        except UnreachableGuaranteeError as e:
            new = {name: why for name, why in e.job_reasons.items() if name in admission.protected}
            if not new:  # pragma: no cover - the failing jobs are always protected ones
                raise
            log.info("rubick heuristic: deferring guaranteed job(s) %s: guarantee unreachable this round",
                     ", ".join(map(repr, new)))
            deferred.update(new)
            admission = admission.defer(new)
            continue
        return DeferralResult(choices, admission, deferred)


def _algorithm1(problem: RoundProblem, table: CoefficientTable, admission: Admission) -> dict[str, Choice]:
    """:func:`schedule` for a given admission."""
    eng, privileged, failures = _privileged_phase(problem, table, admission, repack=False)
    if failures:
        log.debug("rubick heuristic: %d protected job(s) unplaced; repacking every protected job", len(failures))
        first = {eng.names[j]: why for j, why in failures}
        eng, privileged, failures = _privileged_phase(problem, table, admission, repack=True)
        if failures:
            repacked = tuple(f"repacking every protected job does not help either: {why}" for _, why in failures)
            raise UnreachableGuaranteeError("Rubick heuristic: a protected job cannot reach its performance guarantee",
                                            (*first.values(), *repacked), first)
    # lines 4-5: SortBySlope(best-effort queued U running), each scheduled once
    done = set(privileged)
    rest = [j for j in range(len(eng.names)) if not eng.waiting[j] and j not in done
            and (not eng.protected[j] or eng.cur_cfg[j] is not None)]
    rest.sort(key=eng.sort_key)
    committed = 0
    for j in rest:
        committed += eng.schedule_job(j, forced=False)
    # preempted / unplaced jobs return to the queue: one try on the free resources
    left = [j for j in range(len(eng.names)) if eng.cfg[j] is None and not eng.waiting[j]]
    left.sort(key=eng.sort_key)
    for j in left:
        eng.fill(j)
    out: dict[str, Choice] = {}
    for j, cfg in enumerate(eng.cfg):
        if cfg is not None:
            parts = tuple((eng.node_names[n], g) for n, g, _, _ in sorted(cfg.shares, key=lambda s: (-s[1], s[0]))
                          if g > 0)
            out[eng.names[j]] = (cfg.row, parts)
    log.debug("rubick heuristic: %d privileged, %d sorted jobs (%d changed), %d jobs run",
              len(privileged), len(rest), committed, len(out))
    return out


__all__ = ["DeferralResult", "UnreachableGuaranteeError", "schedule", "schedule_with_deferral"]

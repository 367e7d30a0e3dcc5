"""ScheduleJob's node walk (Rubick Algorithm 1, lines 7-20; the rules are in
:mod:`optsched.heuristics.rubick`), with the work spent where something happens.

The walk visits the nodes of the job's GPU types in a fixed order. At each node it refreshes the job's
position (the best row it could run on the nodes visited so far, its growth slopes, whether a
protected job is still below its guarantee) when the node has free GPUs, stops once the job can run
its best row, and otherwise shrinks the lowest-slope job on the node while that beats the job's own
slope. Done literally, every job costs a Python step per node and every refresh a GetBestPlan over all
nodes visited: ``O(nodes^2)`` per job.

:class:`NodeWalk` gives the same result with less work:

* **Refresh from counts.** A row maps onto a set of nodes iff, with its parts sorted largest first,
  the ``r``-th part fits at least ``r`` of the nodes: the nodes fitting a part fit every smaller one,
  so Hall's condition reduces to this, and the greedy mapping of
  :meth:`~optsched.heuristics.round_state.RoundState.map_row` finds a mapping whenever one exists. The
  walk keeps, per part demand of the job's rows, how many visited nodes fit it (updated when a node
  is visited and when a shrink frees resources on a visited node), and per row its *deficit*: how
  many of its parts ``r`` have fewer than ``r`` fitting nodes. A count moving from ``c`` to ``c + 1``
  (or back) changes the deficit of just the rows whose ``(c + 1)``-th part has that demand, so a row
  maps iff its deficit is 0 and GetBestPlan's choice of row is the first such row (rows are sorted by
  value), found by one ``list.index``. A running job whose own configuration does not fit the free
  resources is the exception when the row found could keep it (same plan, the shape of its current
  placement, its CPUs and memory: :meth:`~optsched.heuristics.rubick.Algorithm1.keepable`): whether
  the mapping lands exactly on its current nodes (and is then rejected, since its exact current shares
  do not fit) is a detail of the mapping, so that refresh calls GetBestPlan itself. So does a running
  job whose row found could trim it (its current plan and the shape of its current placement:
  :meth:`~optsched.heuristics.rubick.Algorithm1.trimmable`) when the row beats its running
  configuration after the trim penalty but not after the reconfiguration penalty: whether the
  mapping lands on its current nodes (a trim) decides.
* **Skipping quiet nodes.** A node without free GPUs changes no position, and nothing happens there
  unless a job on it has a GPU shrink slope below the job's own (or, for a protected job below its
  guarantee, any job there can be shrunk). The lowest shrink slope per node and resource (and the job
  it belongs to) is kept by :meth:`~optsched.heuristics.rubick.Algorithm1.lowest` and recomputed only
  for nodes whose holders changed, so the next node where something happens is found by a scan that
  reads one cached value per quiet node (each walk scans its order at most once).

* **Counts only for long walks.** Most walks end after a node or two (a simulator's rounds on a
  cluster with room); for those, building the part demands and counts costs more than GetBestPlan.
  The first :data:`EXACT_REFRESHES` refreshes of a walk call GetBestPlan itself; the counts are built
  (over the nodes visited so far) on the next one.

With ``CHECK = True`` every refresh from counts is compared with GetBestPlan itself and every lowest
shrink read from the cache with its direct computation (tests only).

The walk reads the round state and asks the rules it applies (slopes, the lowest shrink on a node,
which rows keep or trim a running job) of a :class:`WalkEngine`, defined here so that the walk needs
nothing above it; :class:`~optsched.heuristics.rubick.Algorithm1` is the one that implements them.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from bisect import bisect_right
from dataclasses import dataclass

import numpy as np

from optsched.heuristics.placement import MEM_TOL
from optsched.heuristics.round_state import EPS, Config, RoundState

GPU, CPU = 0, 1
_INF = math.inf

#: compare every refresh from counts with GetBestPlan itself (for tests; slow)
CHECK = False
#: refreshes of a walk done by GetBestPlan before the counts are built (module docstring)
EXACT_REFRESHES = 2
#: :meth:`NodeWalk._best_row`'s answer when the refresh needs GetBestPlan itself
_EXACT = object()


@dataclass(frozen=True)
class Shrink:
    """Shrinking a job by one unit of a resource on a node: its re-fitted configuration ``new`` (None:
    preempted), the ``loss`` of objective, the units ``released`` on the node and ``slope`` = loss per
    unit."""

    new: Config | None
    loss: float
    released: int
    slope: float


class _Parts:
    """A job's rows as part demands (made once per job and round): the distinct demands ``classes``
    ``(type id, gpus, cpus, mem - MEM_TOL)`` of their parts; ``rows_at[d][r]``: the rows whose ``r``-th
    largest part has demand ``d``; ``n_parts``: the parts of each row; the fits of each free amount seen
    are memoised."""

    def __init__(self, eng: RoundState, j: int) -> None:
        py = eng.rows[j].py
        index: dict[tuple[int, int, int, float], int] = {}
        self.rows_at: list[dict[int, list[int]]] = []
        for i, parts in enumerate(py.parts):
            t = py.type_id[i]
            for r, (s, c, m) in enumerate(parts, start=1):
                d = index.get((t, s, c, m))
                if d is None:
                    d = index[(t, s, c, m)] = len(index)
                    self.rows_at.append({})
                self.rows_at[d].setdefault(r, []).append(i)
        self.classes: list[tuple[int, int, int, float]] = [(t, s, c, m - MEM_TOL) for t, s, c, m in index]
        self.n_parts: list[int] = [len(parts) for parts in py.parts]
        #: the distinct GPU, CPU and memory needs, ascending: which of them ``x`` meets is
        #: ``bisect_right(steps, x)``, and the answer of :meth:`fits` depends on nothing else
        self.steps: tuple[list[int], list[int], list[float]] = (
            sorted({cg for _, cg, _, _ in self.classes}), sorted({cc for _, _, cc, _ in self.classes}),
            sorted({cm for _, _, _, cm in self.classes}))
        #: (type id, GPU, CPU and memory needs met) -> :meth:`fits`
        self.fit_memo: dict[tuple[int, int, int, int], tuple[bool, ...]] = {}

    def fits(self, t: int, g: int, c: int, m: float) -> tuple[bool, ...]:
        """Per demand: whether it fits a node of type ``t`` with ``g`` GPUs, ``c`` CPUs, ``m`` GiB free
        (memoised by the needs met)."""
        sg, sc, sm = self.steps
        key = (t, bisect_right(sg, g), bisect_right(sc, c), bisect_right(sm, m))
        out = self.fit_memo.get(key)
        if out is None:
            out = self.fit_memo[key] = tuple([ct == t and cg <= g and cc <= c and cm <= m
                                              for ct, cg, cc, cm in self.classes])
        return out


class WalkEngine(RoundState, ABC):
    """The round state with what the walk asks of Rubick's rules (module docstring), implemented by
    :class:`~optsched.heuristics.rubick.Algorithm1`: the lowest shrink per resource and node, :attr:`low`,
    valid where :attr:`low_ok` says so."""

    low: tuple[list[tuple[int, Shrink] | None], ...]
    low_ok: tuple[list[bool], ...]

    @abstractmethod
    def slope_gpu(self, j: int, v: float, g: int) -> float:
        """Growth slope of job ``j`` along its GPU curve from ``(g, v)``."""

    @abstractmethod
    def slope_cpu(self, j: int, v: float, c: int, g_cap: int) -> float:
        """Growth slope of job ``j`` along its CPU curve from ``(c, v)`` with at most ``g_cap`` GPUs."""

    @abstractmethod
    def lowest(self, n: int, res: int, exclude: int) -> tuple[int, Shrink] | None:
        """The job on node ``n`` (not ``exclude``) with the lowest shrink slope for ``res``, and its shrink
        (kept in :attr:`low`)."""

    @abstractmethod
    def _lowest(self, n: int, res: int, exclude: int) -> tuple[int, Shrink] | None:
        """:meth:`lowest` computed afresh."""

    @abstractmethod
    def flush_touched(self) -> None:
        """Forget :attr:`low` of the nodes whose holders changed."""

    @abstractmethod
    def keepable(self, j: int) -> list[bool]:
        """Per row of job ``j``: whether a mapping onto its current placement keeps it as it runs."""

    @abstractmethod
    def trimmable(self, j: int) -> list[bool]:
        """Per row of job ``j``: whether a mapping onto its current placement trims it."""

    @abstractmethod
    def walk_parts(self, j: int) -> _Parts:
        """Job ``j``'s rows as part demands, made once per job."""


class NodeWalk:
    """One walk of ScheduleJob for job ``j`` over ``order`` (module docstring). :meth:`run` returns
    the index in ``order`` of the last node visited (-1 for an empty walk); :attr:`shrunk` lists the
    jobs shrunk, in the order they were first shrunk."""

    def __init__(self, eng: WalkEngine, j: int, order: np.ndarray, protected: bool, base: np.ndarray) -> None:
        self.eng, self.j, self.order, self.prot, self.base = eng, j, order, protected, base
        self.order_list: list[int] = order.tolist()
        self.rows = eng.rows[j]
        #: the value at which the walk ends (its best row's)
        self.top = self.rows.best_value - EPS
        self.parts: _Parts | None = None  # made on the first refresh from counts
        self.exact_left = EXACT_REFRESHES
        self.free = (eng.free_gpus, eng.free_cpus, eng.free_mem)
        self.shrunk: list[int] = []
        self.seen: set[int] = set()
        # the position (refresh): value, GPUs, CPUs of the best row on the visited nodes, whether a
        # protected job is below its guarantee, growth slopes along GPUs and CPUs
        self.has_u = False
        self.v, self.g, self.c, self.below, self.sg, self.sc = 0.0, 0, 0, False, 0.0, 0.0
        self.k = -1  # last position added to the visited nodes
        self.visited: set[int] = set()
        #: per demand: visited nodes it fits; per row: its deficit (module docstring), then a sentinel 0
        self.counts: list[int] = []
        self.deficit: list[int] = []
        #: whether the position read off the counts may have changed since it was last read: a row
        #: before the first mapping one (:attr:`first`) maps now, or that one does not, or the running
        #: configuration fits now
        self.dirty = True
        self.first = 0
        #: visited node -> which demands fit it, as counted
        self.node_fit: dict[int, tuple[bool, ...]] = {}
        self.gpus_visited = 0
        cur = eng.current[j]
        self.cur_fits = cur is None or eng.fits(cur)
        #: (value, GPUs, CPUs, reaches the guarantee) of the running configuration (made when counting starts)
        self.cur_position: tuple[float, int, int, bool] | None = None

    # -- the visited nodes ---------------------------------------------------------------------------
    def _visit_upto(self, k: int) -> None:
        """Add the nodes of positions ``self.k + 1 .. k`` to the visited ones."""
        if k <= self.k:
            return
        nodes = self.order_list[self.k + 1:k + 1]
        self.k = k
        self.visited.update(nodes)
        if self.parts is not None:
            self._count(nodes)

    def _count(self, nodes: list[int]) -> None:
        """Add newly visited ``nodes`` to the counts (those with free GPUs: no part fits the others)."""
        free_g = self.eng.free_views[0]
        for n in nodes:
            g = free_g[n]
            if g > 0:
                self.gpus_visited += g
                self._recount(n)

    def _recount(self, n: int) -> None:
        """Count visited node ``n`` (again) with its free resources now."""
        eng = self.eng
        free_g, free_c, free_m = eng.free_views
        parts = self.parts
        assert parts is not None
        row = parts.fits(eng.node_type_list[n], free_g[n], free_c[n], free_m[n])
        old = self.node_fit.get(n)
        if old == row:
            return
        self.node_fit[n] = row
        counts, deficit, rows_at = self.counts, self.deficit, parts.rows_at
        # the position changes only when a row before the first mapping one starts to map, or that
        # one stops (a protected job also looks further, at the rows reaching its guarantee)
        watch = len(deficit) if self.prot else self.first
        for d, ok in enumerate(row):
            if old is None:
                if not ok:
                    continue
            elif ok == old[d]:
                continue
            if ok:  # a count moves from c - 1 to c: the rows whose c-th part has demand d gain it
                c = counts[d] = counts[d] + 1
                for i in rows_at[d].get(c, ()):
                    deficit[i] -= 1
                    if i < watch and not deficit[i]:
                        self.dirty = True
            else:  # from c to c - 1
                c = counts[d]
                for i in rows_at[d].get(c, ()):
                    if i <= watch and not deficit[i]:
                        self.dirty = True
                    deficit[i] += 1
                counts[d] = c - 1

    def _start_counting(self) -> None:
        """Build the part demands and the counts of the nodes visited so far."""
        eng = self.eng
        self.parts = parts = eng.walk_parts(self.j)
        self.counts = [0] * len(parts.classes)
        self.deficit = [*parts.n_parts, 0]
        cur = eng.current[self.j]
        if cur is not None:
            self.cur_position = (float(eng.value[cur.row]), int(eng.table.gpus[cur.row]), int(eng.table.cpus[cur.row]),
                                 eng.reaches(cur.row))
        self._count(self.order_list[:self.k + 1])

    def _shrink(self, v: int, new: Config | None) -> None:
        """Shrink job ``v`` to ``new``, keeping the counts of the visited nodes. ``new`` lies on ``v``'s
        nodes (:meth:`~optsched.heuristics.rubick.Algorithm1.shrink` re-fits it there)."""
        eng = self.eng
        ledger = eng.ledger
        if self.parts is None:
            ledger.assign(v, new)
        elif len(shares := ledger.holding[v].shares) == 1:  # type: ignore[union-attr]  # the common case
            n = shares[0][0]
            if n in self.visited:
                free_g = eng.free_views[0]
                before = free_g[n]
                ledger.assign(v, new)
                self.gpus_visited += free_g[n] - before
                self._recount(n)
            else:
                ledger.assign(v, new)
        else:
            visited, free_g = self.visited, eng.free_views[0]
            nodes = [s[0] for s in shares if s[0] in visited]
            before = 0
            for n in nodes:
                before += free_g[n]
            ledger.assign(v, new)
            for n in nodes:
                self.gpus_visited += free_g[n]
                self._recount(n)
            self.gpus_visited -= before
        if v not in self.seen:
            self.seen.add(v)
            self.shrunk.append(v)
        if not self.cur_fits:
            self.cur_fits = eng.fits(eng.current[self.j])  # type: ignore[arg-type]
            self.dirty = self.dirty or self.cur_fits

    # -- the position ---------------------------------------------------------------------------------
    def _set_position(self, u: tuple[float, int, int, bool] | None, below: bool) -> None:
        v, g, c = (0.0, 0, 0) if u is None else u[:3]
        self.has_u = u is not None
        self.v, self.g, self.c, self.below = v, g, c, below
        self.sg = self.eng.slope_gpu(self.j, v, g)

    def _position(self) -> tuple[bool, float, int, int, bool, float, float]:
        return self.has_u, self.v, self.g, self.c, self.below, self.sg, self.sc

    def refresh(self) -> None:
        """The job's position on the visited nodes. From the counts only what changed is recomputed:
        the row when the counts did, the CPU slope (which depends on the GPUs visited) always."""
        if self.exact_left > 0:
            self.exact_left -= 1
            return self._refresh_exact()
        if self.parts is None:
            self._start_counting()
        if not self.dirty and not CHECK:  # the common case first: only the CPU slope can change
            self.sc = self.eng.slope_cpu(self.j, self.v, self.c, self.gpus_visited)
            return
        if self.dirty:
            u = self._best_row(guarantee=False)
            if u is _EXACT:
                return self._refresh_exact()
            below = self.prot and (u is None or not u[3])  # type: ignore[index]
            if below and u is not None:
                u2 = self._best_row(guarantee=True)
                if u2 is _EXACT:
                    return self._refresh_exact()
                below = u2 is None
            self._set_position(u, below)  # type: ignore[arg-type]
            self.dirty = False
        self.sc = self.eng.slope_cpu(self.j, self.v, self.c, self.gpus_visited)
        if CHECK:
            mine, dirty = self._position(), self.dirty
            self._refresh_exact()
            self.dirty = dirty
            assert mine == self._position(), (self.j, self.k, mine, self._position())

    def _refresh_exact(self) -> None:
        """The position by GetBestPlan itself."""
        eng, j = self.eng, self.j
        cand = self.order[:self.k + 1]
        # a position that ignores topology rules, as the counts do (a required job walks one domain)
        u = eng.best(j, cand, self.free, guarantee=False, keep=True, base=self.base, topology=False)
        below = self.prot and (u is None or not eng.reaches(u.row))
        if below and u is not None:
            below = eng.best(j, cand, self.free, guarantee=True, keep=True, topology=False) is None
        self._set_position(None if u is None else (*eng.position(u), True), below)
        self.sc = eng.slope_cpu(j, self.v, self.c, int(eng.free_gpus[cand].sum()))
        self.dirty = True  # the next refresh from counts reads the row off them again

    def _best_row(self, *, guarantee: bool) -> tuple[float, int, int, bool] | None | object:
        """GetBestPlan's choice as (value, GPUs, CPUs, reaches the guarantee) from the deficits: the
        first row that maps (the first with ``guarantee`` among those reaching it) unless the running
        configuration fits the free resources and is as good after the reconfiguration penalty.
        :data:`_EXACT` when only GetBestPlan itself can tell: the running configuration does not fit
        and that row could map onto exactly its current placement and keep it
        (:meth:`~optsched.heuristics.round_state.RoundState.map_row` then rejects the row), or that row
        could trim the job and beats the running configuration after the trim penalty only (module
        docstring)."""
        py = self.rows.py
        score = -_INF
        chosen: tuple[float, int, int, bool] | None = None
        cur = self.cur_position
        if self.cur_fits and cur is not None and (not guarantee or cur[3]):
            score, chosen = cur[0], cur
        deficit = self.deficit
        if guarantee:
            reach = py.reaches
            i = next((i for i in range(len(reach)) if reach[i] and not deficit[i]), len(reach))
        else:
            i = self.first = deficit.index(0)
        if i < len(py.value):
            if not self.cur_fits and self.eng.keepable(self.j)[i]:
                return _EXACT
            # a row better than the running configuration never keeps it (same plan, shape, CPUs and
            # memory would mean the same throughput), so it pays the reconfiguration penalty, or the
            # trim penalty when it lands on the job's current nodes
            running = self.eng.running[self.j]
            pen = self.eng.reconfig_penalty[self.j] if running else 0.0
            if py.value[i] > score + EPS:
                if py.value[i] - pen > score + EPS:
                    chosen = (py.value[i], py.gpus[i], py.cpus[i], py.reaches[i])
                elif (running and py.value[i] - self.eng.trim_penalty[self.j] > score + EPS
                      and self.eng.trimmable(self.j)[i]):
                    return _EXACT
        return chosen

    def done(self) -> bool:
        """Whether the job can run its best row (the walk ends)."""
        return self.has_u and not self.below and self.v >= self.top

    # -- the walk ----------------------------------------------------------------------------------------
    def _visit(self, k: int) -> bool:
        """Visit the ``k``-th node of the walk; True when the walk ends there. (The job holds nothing
        during its walk, so GetLowestSlopeOverMinJob need not exclude it.)"""
        eng = self.eng
        n = self.order_list[k]
        free_g = eng.free_views[0]
        self._visit_upto(k)
        if k == 0 or free_g[n] > 0:
            self.refresh()
        if self.done():
            return True
        touched, low_ok, low = eng.ledger.touched, eng.low_ok, eng.low
        for res in (GPU, CPU):
            if res == CPU and free_g[n] <= 0:
                break
            ok_r, low_r = low_ok[res], low[res]
            while True:
                s_j = self.sg if res == GPU else self.sc
                below = self.below
                if s_j <= 0 and not below:
                    break
                if touched:
                    eng.flush_touched()
                if ok_r[n]:
                    found = low_r[n]
                else:  # :meth:`~optsched.heuristics.rubick.Algorithm1.lowest`, whose look-ups were just made
                    found = low_r[n] = eng._lowest(n, res, -1)
                    ok_r[n] = True
                if CHECK:
                    assert found == eng.lowest(n, res, self.j) == eng._lowest(n, res, -1), (self.j, n, res)
                if found is None:
                    break
                v, ev = found
                if not (below or ev.slope < s_j - EPS):
                    break
                self._shrink(v, ev.new)
                if self.dirty or self.exact_left > 0 or CHECK:
                    self.refresh()
                else:  # :meth:`refresh` when no count moved the position: only the CPU slope can change
                    self.sc = eng.slope_cpu(self.j, self.v, self.c, self.gpus_visited)
                if self.has_u and not self.below and self.v >= self.top:
                    return True
        return self.done()

    def _next(self, k0: int) -> int:
        """The first position ``>= k0`` whose node has free GPUs or a job to shrink for GPUs under the
        current position (``len(order)`` when none)."""
        eng, order = self.eng, self.order_list
        free_g = eng.free_views[0]
        below, sg = self.below, self.sg
        look = below or sg > 0
        bar = _INF if below else sg - EPS
        if not look:
            for k in range(k0, len(order)):
                if free_g[order[k]] > 0:
                    return k
            return len(order)
        eng.flush_touched()
        ok, low, check = eng.low_ok[GPU], eng.low[GPU], CHECK
        for k in range(k0, len(order)):
            n = order[k]
            if free_g[n] > 0:
                return k
            if ok[n]:
                best = low[n]
            else:  # as in :meth:`_visit` (nothing changed since the flush above)
                best = low[n] = eng._lowest(n, GPU, -1)
                ok[n] = True
            if check:
                assert best == eng._lowest(n, GPU, -1), (self.j, n)
            if best is not None and best[1].slope < bar:
                return k
        return len(order)

    def run(self) -> int:
        """Walk (module docstring); the index of the last node visited (-1 for an empty walk)."""
        n = len(self.order_list)
        if n == 0:
            return -1
        k = 0
        while True:
            if self._visit(k):
                return k
            k = self._next(k + 1)
            if k >= n:
                self._visit_upto(n - 1)
                return n - 1


__all__ = ["CHECK", "CPU", "EXACT_REFRESHES", "GPU", "NodeWalk", "Shrink", "WalkEngine"]

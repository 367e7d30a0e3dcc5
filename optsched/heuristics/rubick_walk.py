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
  is visited and when a shrink frees resources on a visited node), so GetBestPlan's choice of row is
  read off the counts in ``O(rows)``. A running job whose own configuration does not fit the free
  resources is the exception (whether its row maps onto its current nodes "kept" is a detail of the
  mapping): its refreshes call GetBestPlan itself.
* **Skipping quiet nodes.** A node without free GPUs changes no position, and nothing happens there
  unless a job on it has a GPU shrink slope below the job's own (or, for a protected job below its
  guarantee, any job there can be shrunk). The lowest shrink slope per node and resource is kept and
  recomputed only for nodes whose holders changed, so the next node where something happens is found
  with one array search.

* **Counts only for long walks.** Most walks end after a node or two (a simulator's rounds on a
  cluster with room); for those, building the part demands and counts costs more than GetBestPlan.
  The first :data:`EXACT_REFRESHES` refreshes of a walk call GetBestPlan itself; the counts are built
  (over the nodes visited so far) on the next one.

With ``CHECK = True`` every refresh from counts is compared with GetBestPlan itself (tests only).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from optsched.heuristics.placement import MEM_TOL
from optsched.heuristics.round_state import EPS, Config

if TYPE_CHECKING:  # pragma: no cover
    from optsched.heuristics.rubick import Algorithm1

GPU, CPU = 0, 1
_INF = math.inf

#: compare every refresh from counts with GetBestPlan itself (for tests; slow)
CHECK = False
#: refreshes of a walk done by GetBestPlan before the counts are built (module docstring)
EXACT_REFRESHES = 2


class _Parts:
    """A job's rows as part demands: the distinct demands ``(type id, gpus, cpus, mem)`` of their parts
    and, per (row, r), the demand of the row's ``r``-th largest part."""

    def __init__(self, eng: "Algorithm1", j: int) -> None:
        rows = eng.rows[j]
        classes: dict[tuple[int, int, int, float], int] = {}
        pair_row: list[int] = []
        pair_need: list[int] = []
        pair_cls: list[int] = []
        for i in range(rows.rows.size):
            G, C, M, t = int(rows.gpus[i]), int(rows.cpus[i]), float(rows.mem[i]), int(rows.type_id[i])
            for r, s in enumerate(rows.shapes[i], start=1):
                key = (t, int(s), math.ceil(C * s / G - 1e-9), M * s / G)
                d = classes.setdefault(key, len(classes))
                pair_row.append(i)
                pair_need.append(r)
                pair_cls.append(d)
        keys = list(classes)
        self.type_id = np.array([k[0] for k in keys], dtype=np.int64)
        self.gpus = np.array([k[1] for k in keys], dtype=np.int64)
        self.cpus = np.array([k[2] for k in keys], dtype=np.int64)
        self.mem = np.array([k[3] for k in keys], dtype=float) - MEM_TOL
        self.pair_row = np.array(pair_row, dtype=np.int64)
        self.pair_need = np.array(pair_need, dtype=np.int64)
        self.pair_cls = np.array(pair_cls, dtype=np.int64)
        self.n_rows = rows.rows.size

    def fits(self, eng: "Algorithm1", nodes: np.ndarray) -> np.ndarray:
        """Per node of ``nodes`` (rows) and part demand (columns): whether the demand fits what is free."""
        return ((eng.node_type[nodes][:, None] == self.type_id[None, :])
                & (eng.free_gpus[nodes][:, None] >= self.gpus[None, :])
                & (eng.free_cpus[nodes][:, None] >= self.cpus[None, :])
                & (eng.free_mem[nodes][:, None] >= self.mem[None, :]))

    def mapping_rows(self, counts: np.ndarray) -> np.ndarray:
        """Which rows map onto nodes whose fitting counts per demand are ``counts``."""
        short = counts[self.pair_cls] < self.pair_need
        return np.bincount(self.pair_row[short], minlength=self.n_rows) == 0


class NodeWalk:
    """One walk of ScheduleJob for job ``j`` over ``order`` (module docstring). :meth:`run` returns
    the index in ``order`` of the last node visited (-1 for an empty walk); :attr:`shrunk` lists the
    jobs shrunk, in the order they were first shrunk."""

    def __init__(self, eng: "Algorithm1", j: int, order: np.ndarray, protected: bool, base: np.ndarray) -> None:
        self.eng, self.j, self.order, self.prot, self.base = eng, j, order, protected, base
        self.rows = eng.rows[j]
        self.parts: _Parts | None = None  # made on the first refresh from counts
        self.exact_left = EXACT_REFRESHES
        self.free = (eng.free_gpus, eng.free_cpus, eng.free_mem)
        self.shrunk: list[int] = []
        self.seen: set[int] = set()
        self.has_u = False
        self.state: dict[str, float] = {}
        self.k = -1  # last position added to the visited nodes
        self.visited = np.zeros(len(eng.node_names), dtype=bool)
        self.counts = np.zeros(0, dtype=np.int64)
        #: visited node -> its row of demand fits, as counted
        self.node_fit: dict[int, np.ndarray] = {}
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
        nodes = self.order[self.k + 1:k + 1]
        self.k = k
        self.visited[nodes] = True
        if self.parts is not None:
            self._count(nodes)

    def _count(self, nodes: np.ndarray) -> None:
        """Add newly visited ``nodes`` to the counts."""
        assert self.parts is not None
        free = nodes[self.eng.free_gpus[nodes] > 0]
        if free.size:
            fit = self.parts.fits(self.eng, free)
            self.counts += fit.sum(axis=0)
            self.gpus_visited += int(self.eng.free_gpus[free].sum())
            for node, row in zip(free.tolist(), fit):
                self.node_fit[node] = row

    def _start_counting(self) -> None:
        """Build the part demands and the counts of the nodes visited so far."""
        eng = self.eng
        self.parts = eng.walk_parts(self.j)
        self.counts = np.zeros(self.parts.gpus.size, dtype=np.int64)
        cur = eng.current[self.j]
        if cur is not None:
            self.cur_position = (float(eng.value[cur.row]), int(eng.table.gpus[cur.row]), int(eng.table.cpus[cur.row]),
                                 eng.reaches(cur.row))
        self._count(self.order[:self.k + 1])

    def _shrink(self, v: int, new: Config | None) -> None:
        """Shrink job ``v`` to ``new``, keeping the counts of the visited nodes."""
        eng = self.eng
        old = eng.config(v)
        nodes = np.array(sorted({s[0] for s in (old.shares if old else ())}
                                | {s[0] for s in (new.shares if new else ())}), dtype=np.int64)
        nodes = nodes[self.visited[nodes]]
        gpus_before = int(eng.free_gpus[nodes].sum())
        eng.set(v, new)
        if nodes.size and self.parts is not None:
            self.gpus_visited += int(eng.free_gpus[nodes].sum()) - gpus_before
            fit = self.parts.fits(eng, nodes)
            for node, row in zip(nodes.tolist(), fit):
                old_row = self.node_fit.get(node)
                if old_row is not None:
                    self.counts -= old_row
                self.counts += row
                self.node_fit[node] = row
        if v not in self.seen:
            self.seen.add(v)
            self.shrunk.append(v)
        if not self.cur_fits:
            self.cur_fits = eng.fits(eng.current[self.j])  # type: ignore[arg-type]

    # -- the position ---------------------------------------------------------------------------------
    def refresh(self) -> None:
        """The job's position on the visited nodes."""
        eng, j = self.eng, self.j
        if not self.cur_fits or self.exact_left > 0:
            self.exact_left -= 1
            return self._refresh_exact()
        if self.parts is None:
            self._start_counting()
            assert self.parts is not None
        feas = self.parts.mapping_rows(self.counts)
        u = self._best_row(feas, guarantee=False)
        v, g, c, reaches = (0.0, 0, 0, False) if u is None else u
        below = self.prot and (u is None or not reaches)
        if below and u is not None:
            below = self._best_row(feas, guarantee=True) is None
        self.has_u = u is not None
        self.state.update(v=v, g=g, c=c, below=float(below), sg=eng.slope_gpu(j, v, g),
                          sc=eng.slope_cpu(j, v, c, self.gpus_visited))
        if CHECK:
            mine = (self.has_u, dict(self.state))
            self._refresh_exact()
            assert mine == (self.has_u, self.state), (j, self.k, mine, self.state)

    def _refresh_exact(self) -> None:
        """The position by GetBestPlan itself."""
        eng, j = self.eng, self.j
        cand = self.order[:self.k + 1]
        u = eng.best(j, cand, self.free, guarantee=False, keep=True, base=self.base)
        v, g, c = eng.position(u)
        below = self.prot and (u is None or not eng.reaches(u.row))
        if below and u is not None:
            below = eng.best(j, cand, self.free, guarantee=True, keep=True) is None
        self.has_u = u is not None
        self.state.update(v=v, g=g, c=c, below=float(below), sg=eng.slope_gpu(j, v, g),
                          sc=eng.slope_cpu(j, v, c, int(eng.free_gpus[cand].sum())))

    def _best_row(self, feas: np.ndarray, *, guarantee: bool) -> tuple[float, int, int, bool] | None:
        """GetBestPlan's choice as (value, GPUs, CPUs, reaches the guarantee) when ``feas`` says which
        rows map and the job's running configuration, if any, fits the free resources."""
        eng, j, rows = self.eng, self.j, self.rows
        score = -_INF
        chosen: tuple[float, int, int, bool] | None = None
        cur = self.cur_position
        if cur is not None and (not guarantee or cur[3]):
            score, chosen = cur[0], cur
        pen = eng.reconfig_penalty if eng.running[j] else 0.0
        value, reach = rows.value, rows.reaches
        for i in range(value.size):
            if guarantee and not reach[i]:
                continue
            if value[i] <= score + EPS:
                break
            if not feas[i]:
                continue
            # a row better than the running configuration never keeps it (same plan, shape, CPUs and
            # memory would mean the same throughput), so it pays the reconfiguration penalty
            if float(value[i]) - pen > score + EPS:
                chosen = (float(value[i]), int(rows.gpus[i]), int(rows.cpus[i]), bool(reach[i]))
            break
        return chosen

    def done(self) -> bool:
        return self.has_u and not self.state["below"] and self.state["v"] >= self.rows.best_value - EPS

    # -- the walk ----------------------------------------------------------------------------------------
    def _visit(self, k: int) -> bool:
        """Visit the ``k``-th node of the walk; True when the walk ends there."""
        eng, j, state = self.eng, self.j, self.state
        n = int(self.order[k])
        self._visit_upto(k)
        if k == 0 or eng.free_gpus[n] > 0:
            self.refresh()
        if self.done():
            return True
        for res in (GPU, CPU):
            if res == CPU and eng.free_gpus[n] <= 0:
                break
            while True:
                s_j = state["sg"] if res == GPU else state["sc"]
                below = bool(state["below"])
                if s_j <= 0 and not below:
                    break
                low = eng.lowest(n, res, j)
                if low is None:
                    break
                v, ev = low
                if not (below or ev.slope < s_j - EPS):
                    break
                self._shrink(v, ev.new)
                self.refresh()
                if self.done():
                    return True
        return self.done()

    def _next(self, k0: int) -> int:
        """The first position ``>= k0`` whose node has free GPUs or a job to shrink for GPUs under the
        current position (``len(order)`` when none)."""
        nodes = self.order[k0:]
        if not nodes.size:
            return k0
        mask = self.eng.free_gpus[nodes] > 0
        below, sg = bool(self.state["below"]), self.state["sg"]
        if below or sg > 0:
            slopes = self.eng.node_min_slopes(nodes, GPU)
            mask |= (slopes < _INF) if below else (slopes < sg - EPS)
        hit = int(np.argmax(mask))
        return k0 + hit if mask[hit] else k0 + nodes.size

    def run(self) -> int:
        """Walk (module docstring); the index of the last node visited (-1 for an empty walk)."""
        n = self.order.size
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


__all__ = ["CHECK", "CPU", "EXACT_REFRESHES", "GPU", "NodeWalk"]

"""Worker placement by best-fit decreasing (thesis Sec. 3.5.3) on the shared node ledger
(:class:`optsched.heuristics.placement.NodeLedger`).

Running jobs keep their base workers and as many of their flexible workers as their count allows
(scaling in removes flexible workers from the servers where the job has the fewest first, so that
servers empty out). Jobs with workers to place go in decreasing order of per-worker GPU demand (then
more workers first, then name); each worker goes to the non-empty server that fits it best (fewest free
GPUs left), else to an empty one (``NodeLedger.best_fit`` with the non-empty servers preferred). A job
stays on one pool: with ``lyra=True`` an elastic job tries the inference pool first and an inelastic one
the training pool first (only fungible jobs may use inference servers; a running job stays on its
pool), and on inference servers base and flexible workers go to separate server groups (a server
holding flexible workers takes no base worker and no inelastic job, and the other way round), so that
reclaiming can release the flexible group without preemption. When a queued job's base demand fits on
neither pool it is not placed; flexible workers that do not fit are left out. ``lyra=False`` is the
naive BFD of Table 3.6 (every job tries the training pool first, no groups).

Cost: O(workers x log servers) (the packer's index of the nodes by best fit's ranking).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Iterable

import numpy as np

from optsched.core.deadline import Deadline
from optsched.heuristics.placement import NodeLedger, Share
from optsched.rounds.lyra.jobs import is_elastic
from optsched.rounds.lyra.problem import INFERENCE, TRAINING
from optsched.rounds.placement.payload import JobPlacement, WorkerPlacement
from optsched.rounds.placement.problem import PlacementRound
from optsched.rounds.placement.start import pools_of, start_state

_BIG = 1 << 40


@dataclass(frozen=True)
class _Holding:
    shares: tuple[Share, ...]


class _Packer:
    """The ledger of one placement round plus the server groups of the inference pool, and an index of
    the nodes by what best fit ranks them on: per (pool, in the base group, in the flexible group, empty,
    free GPUs) a heap of node indices (stale entries are skipped when read: a node's current key is
    ``key[node]``), so that a worker's node is found without a pass over the servers (issue 26, item 2:
    a pass per worker made the ``lyra`` kind quadratic, 2.9 s of 5.5 on 20,000 jobs)."""

    def __init__(self, problem: PlacementRound, grouped: bool) -> None:
        self.problem = problem
        self.grouped = grouped
        self.nodes = problem.usable_nodes
        self.index = {n: i for i, n in enumerate(self.nodes)}
        occupied = {n: sh.gpus for n, sh in problem.occupied}   # free(n).gpus, without a share per node
        gpus = {node.name: node.num_gpus for node in problem.cluster.nodes}
        self.capacity = np.array([gpus[n] - occupied.get(n, 0) for n in self.nodes], dtype=np.int64)
        n = len(self.nodes)
        self.ledger = NodeLedger(self.nodes, np.zeros(n, dtype=np.int64), self.capacity.copy(),
                                 np.full(n, _BIG, dtype=np.int64), np.full(n, float(_BIG)), 2 * len(problem.jobs))
        self.pool_of = [problem.pool(x) for x in self.nodes]
        self.pool_mask = {p: np.array([q == p for q in self.pool_of], dtype=bool) for p in (TRAINING, INFERENCE)}
        self.has_pool = {p: bool(m.any()) for p, m in self.pool_mask.items()}
        self.flex_group = np.zeros(n, dtype=bool)
        self.base_group = np.zeros(n, dtype=bool)
        self.holder = {j.name: 2 * i for i, j in enumerate(problem.jobs)}
        self.top = int(self.capacity.max(initial=0))
        self.key: list[tuple[str, bool, bool, bool, int]] = [self._key(i) for i in range(n)]
        self.buckets: dict[tuple[str, bool, bool, bool, int], list[int]] = {}
        for i, k in enumerate(self.key):   # ascending: each list is a heap already
            self.buckets.setdefault(k, []).append(i)
        #: (node, in base group, in flexible group) before each group change of the open transaction
        self.group_log: list[tuple[int, bool, bool]] | None = None

    def _key(self, i: int) -> tuple[str, bool, bool, bool, int]:
        free = int(self.ledger.free_gpus[i])
        return (self.pool_of[i], bool(self.base_group[i]), bool(self.flex_group[i]), bool(free >= self.capacity[i]),
                free)

    def _refresh(self, nodes: Iterable[int]) -> None:
        """Re-file ``nodes`` under their current keys."""
        for i in nodes:
            k = self._key(i)
            if k != self.key[i]:
                self.key[i] = k
                heapq.heappush(self.buckets.setdefault(k, []), i)

    def _first(self, k: tuple[str, bool, bool, bool, int]) -> int | None:
        heap = self.buckets.get(k)
        while heap and self.key[heap[0]] != k:
            heapq.heappop(heap)
        return heap[0] if heap else None

    def begin(self) -> None:
        self.ledger.begin()
        self.group_log = []

    def commit(self) -> None:
        self.ledger.commit()
        self.group_log = None

    def rollback(self) -> None:
        self.ledger.rollback()
        assert self.group_log is not None
        for i, in_base, in_flex in reversed(self.group_log):
            self.base_group[i], self.flex_group[i] = in_base, in_flex
            self.ledger.touched.add(i)
        self.group_log = None
        self._refresh(self.ledger.touched)
        self.ledger.touched.clear()

    def hold(self, job: str, flexible: bool, gpus: dict[str, int]) -> None:
        shares = tuple((self.index[n], g, 0, 0.0) for n, g in sorted(gpus.items()) if g > 0)
        self.ledger.assign(self.holder[job] + int(flexible), _Holding(shares) if shares else None)
        for n, g in gpus.items():
            i = self.index[n]
            if g > 0 and self.pool_of[i] == INFERENCE:
                if self.group_log is not None:
                    self.group_log.append((i, bool(self.base_group[i]), bool(self.flex_group[i])))
                (self.flex_group if flexible else self.base_group)[i] = True
                self.ledger.touched.add(i)
        self._refresh(self.ledger.touched)
        self.ledger.touched.clear()

    def place(self, worker_gpus: int, pool: str, flexible: bool) -> int | None:
        """Best fit of one worker on ``pool`` (module docstring; :meth:`NodeLedger.best_fit`'s ranking:
        non-empty nodes first, then the fewest free GPUs, then the node order); the node index or None."""
        if self.grouped and pool == INFERENCE:
            groups = ((False, False), (False, True)) if flexible else ((False, False), (True, False))
        else:
            groups = ((False, False), (False, True), (True, False), (True, True))
        for empty in (False, True):
            for free in range(max(worker_gpus, 0), self.top + 1):
                got = [i for i in (self._first((pool, b, f, empty, free)) for b, f in groups) if i is not None]
                if got:
                    return min(got)
        return None


#: jobs placed between two looks at the deadline (a few milliseconds on a 100,000-job round)
CHECK_JOBS = 64


def best_fit_decreasing(problem: PlacementRound, lyra: bool = True) -> WorkerPlacement:
    """Place the round's worker counts (module docstring)."""
    return placement_within(problem, lyra)[0]


def placement_within(problem: PlacementRound, lyra: bool = True,
                     deadline: Deadline | None = None) -> tuple[WorkerPlacement, tuple[str, ...]]:
    """:func:`best_fit_decreasing` within ``deadline`` (looked at every :data:`CHECK_JOBS` jobs): when it
    expires, the jobs with workers still to place are not considered: running ones keep what they hold
    (base workers and the flexible workers their count keeps), queued ones wait, and their workers still
    to place are listed as unplaced (the decision stays within the round's rules, its objective charges
    them); expired before the first job of a round with more than :data:`CHECK_JOBS` to place, the servers'
    index is not built (a 100,000-job round at a 1 s limit; a small round places its first jobs as before).
    Returns the placement and the jobs not considered, in placement order."""
    state = start_state(problem)
    base = {j: dict(s) for j, s in state.base.items()}
    flex = {j: dict(s) for j, s in state.flex.items()}
    if deadline is not None and len(state.todo) > CHECK_JOBS and deadline.expired():   # what stays, no index
        return _placement(base, flex, {name: b + f for name, b, f in state.todo}), tuple(n for n, _, _ in state.todo)
    pk = _Packer(problem, grouped=lyra)
    for name in base:
        pk.hold(name, False, base[name])
        pk.hold(name, True, flex[name])
    unplaced: dict[str, int] = {}
    skipped: list[str] = []
    for step, (name, n_base, n_flex) in enumerate(state.todo):
        if skipped or (deadline is not None and step and not step % CHECK_JOBS and deadline.expired()):
            skipped.append(name)
            unplaced[name] = n_base + n_flex
            continue
        job = problem.job(name)
        done = False
        for pool in pools_of(problem, name, lyra):
            if not pk.has_pool[pool]:
                continue
            pk.begin()
            wg = problem.worker_gpus(job, pool)
            b = dict(base.get(name, {}))
            ok = True
            for _ in range(n_base):
                node = pk.place(wg, pool, flexible=False)
                if node is None:
                    ok = False
                    break
                b[pk.nodes[node]] = b.get(pk.nodes[node], 0) + wg
                pk.hold(name, False, b)
            if not ok:
                pk.rollback()
                continue
            f = dict(flex.get(name, {}))
            missing = 0
            for _ in range(n_flex):
                node = pk.place(wg, pool, flexible=is_elastic(job))
                if node is None:
                    missing += 1
                    continue
                f[pk.nodes[node]] = f.get(pk.nodes[node], 0) + wg
                pk.hold(name, True, f)
            pk.commit()
            base[name], flex[name] = b, f
            if missing:
                unplaced[name] = missing
            done = True
            break
        if not done:
            unplaced[name] = n_base + n_flex
    return _placement(base, flex, unplaced), tuple(skipped)


def _placement(base: dict[str, dict[str, int]], flex: dict[str, dict[str, int]], unplaced: dict[str, int]
               ) -> WorkerPlacement:
    """The payload of base and flexible GPUs per node of every job placed, and the workers left unplaced."""
    placements = tuple(JobPlacement(n, tuple(base[n].items()), tuple(flex.get(n, {}).items()))
                       for n in sorted(base) if base[n])
    return WorkerPlacement(placements, tuple(unplaced.items()))


__all__ = ["CHECK_JOBS", "best_fit_decreasing", "placement_within"]

"""The node ledger every packing heuristic shares: free GPUs, CPUs and memory per node, what each holder
(a job, a worker group, an expert replica: anything with an index) holds where, changes that a
transaction can roll back, and the two placement rules the papers use, best fit and first fit.

A holding is any object with ``shares``: ``((node index, gpus, cpus, mem), ...)``. The ledger keeps
three numpy arrays of free amounts indexed by node; memory may be GiB (float) or an integer unit
(MiB), comparisons allow :data:`MEM_TOL` of slack either way.

Placement of a multi-part demand (``parts``: ``(gpus, cpus, mem)`` per part, largest first) onto
distinct nodes among ``candidates``:

* :meth:`NodeLedger.best_fit` (Lyra's best-fit decreasing, Rubick's ``AllocMem``; Sec. 3.5.3 of the
  thesis): each part, in the given order, goes to a feasible node not used by an earlier part,
  ranked by (1) ``prefer`` (e.g. the job's current nodes) first, (2) nodes where the part fits in
  ``base`` (e.g. what was free before a walk started) first, (3) the fewest free GPUs (best fit),
  (4) position in ``candidates``. Because a node that fits a part fits every smaller part, this
  greedy finds a mapping whenever one exists for parts given largest first.
* :meth:`NodeLedger.first_fit` (Lina's first-fit decreasing): the first feasible unused node in
  ``candidates`` order.

Both only compute the shares; :meth:`NodeLedger.assign` reserves them.
"""

from __future__ import annotations

from typing import Protocol, Sequence

import numpy as np

#: slack of memory comparisons (GiB or MiB)
MEM_TOL = 1e-7

#: one share: (node index, gpus, cpus, mem)
Share = tuple[int, int, int, float]
#: one part of a demand: (gpus, cpus, mem)
Part = tuple[int, int, float]

_KEY_BASE = 1 << 20


class Holding(Protocol):
    """What a holder holds: its shares, one per node."""

    @property
    def shares(self) -> tuple[Share, ...]: ...


class NodeLedger:
    """Free resources per node and the holding of each holder index (module docstring).

    ``free_gpus``, ``free_cpus`` and ``free_mem`` are mutated in place by :meth:`assign`; callers may
    keep references to them. Holders may be put in ``groups`` (integers, default all 0); the ledger
    keeps the GPUs each group holds per node (``group_gpus``) and the nodes whose holdings changed
    (``touched``, cleared by the caller). Inside a transaction (:meth:`begin`) every change is logged
    (:attr:`log`: (holder, previous holding) pairs, oldest first) and :meth:`rollback` undoes them."""

    def __init__(self, node_names: Sequence[str], node_types: np.ndarray, free_gpus: np.ndarray,
                 free_cpus: np.ndarray, free_mem: np.ndarray, holders: int, groups: np.ndarray | None = None) -> None:
        self.names: list[str] = list(node_names)
        self.index: dict[str, int] = {name: i for i, name in enumerate(self.names)}
        self.types = np.asarray(node_types)
        self.free_gpus, self.free_cpus, self.free_mem = free_gpus, free_cpus, free_mem
        self.holding: list[Holding | None] = [None] * holders
        self.holders_on: list[set[int]] = [set() for _ in self.names]
        self.log: list[tuple[int, Holding | None]] | None = None
        #: nodes whose holdings changed since the caller last cleared this set
        self.touched: set[int] = set()
        #: holder -> group (e.g. protected or not); ``group_gpus[g, n]``: GPUs group g holds on node n
        self.groups = np.zeros(holders, dtype=np.int64) if groups is None else np.asarray(groups, dtype=np.int64)
        self.group_gpus = np.zeros((int(self.groups.max(initial=0)) + 1, len(self.names)), dtype=np.int64)

    # -- changes ----------------------------------------------------------------------------------
    def assign(self, holder: int, new: Holding | None) -> None:
        """Release what ``holder`` holds and reserve ``new`` (None: nothing); logged in a transaction."""
        old = self.holding[holder]
        if old is new:
            return
        held = self.group_gpus[self.groups[holder]]
        if old is not None:
            for n, g, c, m in old.shares:
                self.free_gpus[n] += g
                self.free_cpus[n] += c
                self.free_mem[n] += m
                held[n] -= g
                self.holders_on[n].discard(holder)
                self.touched.add(n)
        if new is not None:
            for n, g, c, m in new.shares:
                self.free_gpus[n] -= g
                self.free_cpus[n] -= c
                self.free_mem[n] -= m
                held[n] += g
                self.holders_on[n].add(holder)
                self.touched.add(n)
        self.holding[holder] = new
        if self.log is not None:
            self.log.append((holder, old))

    def begin(self) -> None:
        """Start a transaction (an open one is discarded: its changes stay)."""
        self.log = []

    def commit(self) -> None:
        """End the transaction, keeping its changes."""
        self.log = None

    def rollback(self) -> None:
        """Undo every change of the open transaction, newest first, and end it."""
        assert self.log is not None, "rollback outside a transaction"
        entries, self.log = self.log, None
        for holder, old in reversed(entries):
            self.assign(holder, old)

    def first_holdings(self) -> dict[int, Holding | None]:
        """Each holder changed in the open transaction -> its holding when the transaction began."""
        assert self.log is not None, "no open transaction"
        before: dict[int, Holding | None] = {}
        for holder, old in self.log:
            before.setdefault(holder, old)
        return before

    # -- questions ----------------------------------------------------------------------------------
    def fits(self, shares: Sequence[Share], gpus: np.ndarray | None = None, cpus: np.ndarray | None = None,
             mem: np.ndarray | None = None) -> bool:
        """Whether every share fits what is free (or the given amounts, indexed by node)."""
        g = self.free_gpus if gpus is None else gpus
        c = self.free_cpus if cpus is None else cpus
        m = self.free_mem if mem is None else mem
        return all(g[n] >= gg and c[n] >= cc and m[n] >= mm - MEM_TOL for n, gg, cc, mm in shares)

    def best_fit(self, parts: Sequence[Part], candidates: np.ndarray, *,
                 amounts: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
                 allowed: np.ndarray | None = None, prefer: np.ndarray | None = None,
                 base: np.ndarray | None = None) -> list[Share] | None:
        """Shares of ``parts`` on distinct nodes of ``candidates`` by best fit (module docstring);
        None when some part fits nowhere. ``amounts`` (default: what is free) are indexed by node;
        ``allowed`` and ``prefer`` are masks over ``candidates``; ``base`` is indexed by node."""
        return self._place(parts, candidates, amounts, allowed, prefer, base, best=True)

    def first_fit(self, parts: Sequence[Part], candidates: np.ndarray, *,
                  amounts: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
                  allowed: np.ndarray | None = None) -> list[Share] | None:
        """Shares of ``parts`` on distinct nodes of ``candidates`` by first fit (module docstring)."""
        return self._place(parts, candidates, amounts, allowed, None, None, best=False)

    def _place(self, parts: Sequence[Part], candidates: np.ndarray,
               amounts: tuple[np.ndarray, np.ndarray, np.ndarray] | None, allowed: np.ndarray | None,
               prefer: np.ndarray | None, base: np.ndarray | None, *, best: bool) -> list[Share] | None:
        full = (self.free_gpus, self.free_cpus, self.free_mem) if amounts is None else amounts
        ag, ac, am = full[0][candidates], full[1][candidates], full[2][candidates]
        open_ = np.ones(candidates.size, dtype=bool) if allowed is None else allowed.copy()
        pos = np.arange(candidates.size)
        shares: list[Share] = []
        for g, c, m in parts:
            idx = np.flatnonzero(open_ & (ag >= g) & (ac >= c) & (am >= m - MEM_TOL))
            if idx.size == 0:
                return None
            if idx.size > 1 and best:
                key = np.zeros(idx.size, dtype=np.int64) if prefer is None else (~prefer[idx]).astype(np.int64) * 2
                if base is not None:
                    key = key + (base[candidates[idx]] < g)
                key = (key * _KEY_BASE + ag[idx]) * _KEY_BASE + pos[idx]
                k = int(idx[np.argmin(key)])
            else:
                k = int(idx[0])
            open_[k] = False
            shares.append((int(candidates[k]), int(g), c, m))
        return shares


__all__ = ["Holding", "MEM_TOL", "NodeLedger", "Part", "Share"]

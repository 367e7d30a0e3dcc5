"""The virtual cluster a Crius-kind heuristic works on (Algorithm 1, :mod:`optsched.heuristics.crius`, and
the baselines of Crius Sec. 8.1, :mod:`optsched.heuristics.baselines`): who holds which GPUs, CPUs and
memory on which node (:class:`~optsched.heuristics.placement.NodeLedger`), each job's choice, and the
running jobs rescaled so far. Every running job starts holding its exact current shares (kept). A job
placed earlier in the round holds its Cell like a running job (Algorithm 1 line 19, ``VirtualAlloc``:
"the best plan is applied virtually on running jobs"), so later scheduling choices may rescale it.

Placing a row (:meth:`CellState.put`) maps its parts (part size and count of the table, with CPUs and
memory in proportion, :func:`~optsched.rounds.crius.capacity.part_share`) onto distinct nodes of its
GPU type by best fit, the job's current nodes first; a running job given its current row while it
holds it stays where it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from optsched.heuristics.placement import NodeLedger
from optsched.rounds.crius.admission import CriusAdmission, allowed_rows
from optsched.rounds.crius.capacity import slot_rates
from optsched.rounds.crius.choice import Choice, is_kept, keep_choice
from optsched.rounds.crius.problem import CriusRound
from optsched.rounds.crius.table import CriusTable

#: gains below this are no gains
EPS = 1e-9


@dataclass(frozen=True)
class Hold:
    """What a job holds in the ledger: ``(node index, GPUs, CPUs, GiB)`` per node."""

    shares: tuple[tuple[int, int, int, float], ...]


class CellState:
    """The virtual cluster of one heuristic run (module docstring)."""

    def __init__(self, problem: CriusRound, table: CriusTable, admission: CriusAdmission) -> None:
        self.p, self.t, self.a = problem, table, admission
        names = [n.name for n in problem.cluster.nodes]
        g, c, m = problem.free_arrays(names)
        types = np.array([n.gpu_type for n in problem.cluster.nodes])
        self.ledger = NodeLedger(names, types, g, c, m, len(problem.jobs))
        self.by_type = {t: np.flatnonzero(types == t) for t in set(types.tolist())}
        self.rates = slot_rates(problem.cluster)
        self.choice: list[Choice | None] = [None] * len(problem.jobs)
        self.running = table.current_row >= 0
        self.rescaled: set[int] = set()
        #: jobs no scheduling choice may rescale: the protected job once it suspended opportunistic jobs (they
        #: were suspended for it where it runs, Sec. 6.1; moving it would leave them suspended for nothing)
        self.pinned: set[int] = set()
        self.submit = [(j.submit_time, j.name) for j in problem.jobs]
        #: (job index, rows) -> the rows it may take; None: all (Crius-NA / Crius-NH, Sec. 8.6)
        self.row_filter: Callable[[int, np.ndarray], np.ndarray] | None = None
        for j in np.flatnonzero(self.running):
            cur = problem.current(table.jobs[j])
            assert cur is not None
            self.ledger.assign(int(j), Hold(tuple((self.ledger.index[n], s.gpus, s.cpus, s.mem_gib)
                                                  for n, s in cur.placement.shares)))
            self.choice[int(j)] = keep_choice(problem, table, int(j))

    # -- values -----------------------------------------------------------------------------------
    def weight(self, j: int) -> float:
        """Job ``j``'s value in the round's objective on the Cell it holds (0: none)."""
        c = self.choice[j]
        return 0.0 if c is None else float(self.t.value[c.row])

    def change_cost(self, j: int) -> float:
        """Penalty of changing job ``j`` now (a running job not rescaled yet pays the rescale penalty)."""
        return self.p.rescale_cost if self.running[j] and j not in self.rescaled else 0.0

    def movable(self, j: int) -> bool:
        """Whether a scheduling choice may rescale job ``j``: it holds a Cell (running, or placed earlier in
        the round) and is not pinned."""
        return self.choice[j] is not None and j not in self.pinned

    # -- placement --------------------------------------------------------------------------------
    def shares_for(self, j: int, row: int) -> list[tuple[int, int, int, float]] | None:
        t = self.t
        gtype = t.gpu_type[row]
        cpg, mpg = self.rates[gtype]
        unit = int(t.unit[row])
        parts = [(unit, cpg * unit, mpg * unit)] * int(t.parts[row])
        cand = self.by_type.get(gtype)
        if cand is None:
            return None
        held = self.ledger.holding[j]
        prefer = None
        if held is not None:
            mine = {n for n, *_ in held.shares}
            prefer = np.array([int(n) in mine for n in cand])
        return self.ledger.best_fit(parts, cand, prefer=prefer)

    def put(self, j: int, row: int | None) -> bool:
        """Give job ``j`` ``row`` (None: nothing), releasing what it holds; False (and no change) when the
        row does not fit."""
        old_hold, old_choice = self.ledger.holding[j], self.choice[j]
        self.ledger.assign(j, None)
        if row is None:
            self.choice[j] = None
            return True
        if self.running[j] and row == int(self.t.current_row[j]) and old_choice is not None \
                and old_choice.row == row and old_hold is not None:
            self.ledger.assign(j, old_hold)  # its Cell where it is: nothing to place
            return True
        shares = self.shares_for(j, row)
        if shares is None:
            self.ledger.assign(j, old_hold)
            return False
        self.ledger.assign(j, Hold(tuple(shares)))
        self.choice[j] = Choice(row, tuple((self.ledger.names[n], g) for n, g, _, _ in shares))
        return True

    def keep(self, j: int) -> bool:
        """Put running job ``j`` back exactly where it ran, when that still fits."""
        cur = self.p.current(self.t.jobs[j])
        assert cur is not None
        shares = tuple((self.ledger.index[n], s.gpus, s.cpus, s.mem_gib) for n, s in cur.placement.shares)
        if self.ledger.holding[j] is not None or not self.ledger.fits(shares):
            return False
        self.ledger.assign(j, Hold(shares))
        self.choice[j] = keep_choice(self.p, self.t, j)
        return True

    def restore(self, j: int, hold: Hold | None, choice: Choice | None) -> None:
        self.ledger.assign(j, hold)
        self.choice[j] = choice

    def snapshot(self, jobs: Sequence[int]) -> list[tuple[int, Hold | None, Choice | None]]:
        return [(j, self.ledger.holding[j], self.choice[j]) for j in jobs]

    def rollback(self, snap: list[tuple[int, Hold | None, Choice | None]]) -> None:
        for j, hold, choice in reversed(snap):
            self.restore(j, hold, choice)

    def mark_changed(self, j: int) -> None:
        """Count running job ``j`` as rescaled when it runs but no longer keeps its allocation."""
        if self.running[j] and self.choice[j] is not None and not is_kept(self.p, self.t, j, self.choice[j]):
            self.rescaled.add(j)

    # -- rows ---------------------------------------------------------------------------------------
    def rows(self, j: int) -> np.ndarray:
        """Job ``j``'s candidate rows it may run on (:func:`~optsched.rounds.crius.admission.allowed_rows`),
        narrowed by :attr:`row_filter` when one is set (the ablations of Crius Sec. 8.6)."""
        rows = allowed_rows(self.p, self.t, j, self.t.candidates_of(j))
        return rows if self.row_filter is None else self.row_filter(j, rows)


__all__ = ["EPS", "CellState", "Hold"]

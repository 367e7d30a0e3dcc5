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

Cost: O(workers x servers) numpy work.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

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
    """The ledger of one placement round plus the server groups of the inference pool."""

    def __init__(self, problem: PlacementRound, grouped: bool) -> None:
        self.problem = problem
        self.grouped = grouped
        self.nodes = problem.usable_nodes
        self.index = {n: i for i, n in enumerate(self.nodes)}
        self.capacity = np.array([problem.free(n).gpus for n in self.nodes], dtype=np.int64)
        n = len(self.nodes)
        self.ledger = NodeLedger(self.nodes, np.zeros(n, dtype=np.int64), self.capacity.copy(),
                                 np.full(n, _BIG, dtype=np.int64), np.full(n, float(_BIG)), 2 * len(problem.jobs))
        self.pool_mask = {p: np.array([problem.pool(x) == p for x in self.nodes]) for p in (TRAINING, INFERENCE)}
        self.flex_group = np.zeros(n, dtype=bool)
        self.base_group = np.zeros(n, dtype=bool)
        self.holder = {j.name: 2 * i for i, j in enumerate(problem.jobs)}

    def hold(self, job: str, flexible: bool, gpus: dict[str, int]) -> None:
        shares = tuple((self.index[n], g, 0, 0.0) for n, g in sorted(gpus.items()) if g > 0)
        self.ledger.assign(self.holder[job] + int(flexible), _Holding(shares) if shares else None)
        for n, g in gpus.items():
            if g > 0 and self.pool_mask[INFERENCE][self.index[n]]:
                (self.flex_group if flexible else self.base_group)[self.index[n]] = True

    def place(self, worker_gpus: int, pool: str, flexible: bool) -> int | None:
        """Best fit of one worker on ``pool`` (module docstring); the node index or None."""
        cand = np.flatnonzero(self.pool_mask[pool])
        allowed = None
        if self.grouped and pool == INFERENCE:
            allowed = ~(self.base_group if flexible else self.flex_group)[cand]
        nonempty = self.ledger.free_gpus[cand] < self.capacity[cand]
        got = self.ledger.best_fit([(worker_gpus, 0, 0.0)], cand, allowed=allowed, prefer=nonempty)
        return None if got is None else got[0][0]


def best_fit_decreasing(problem: PlacementRound, lyra: bool = True) -> WorkerPlacement:
    """Place the round's worker counts (module docstring)."""
    pk = _Packer(problem, grouped=lyra)
    state = start_state(problem)
    base = {j: dict(s) for j, s in state.base.items()}
    flex = {j: dict(s) for j, s in state.flex.items()}
    for name in base:
        pk.hold(name, False, base[name])
        pk.hold(name, True, flex[name])
    unplaced: dict[str, int] = {}
    for name, n_base, n_flex in state.todo:
        job = problem.job(name)
        done = False
        for pool in pools_of(problem, name, lyra):
            if not pk.pool_mask[pool].any():
                continue
            saved = (pk.flex_group.copy(), pk.base_group.copy())
            pk.ledger.begin()
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
                pk.ledger.rollback()
                pk.flex_group, pk.base_group = saved
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
            pk.ledger.commit()
            base[name], flex[name] = b, f
            if missing:
                unplaced[name] = missing
            done = True
            break
        if not done:
            unplaced[name] = n_base + n_flex
    placements = tuple(JobPlacement(n, tuple(base[n].items()), tuple(flex.get(n, {}).items()))
                       for n in sorted(base) if base[n])
    return WorkerPlacement(placements, tuple(unplaced.items()))


__all__ = ["best_fit_decreasing"]

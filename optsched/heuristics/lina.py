"""Lina's expert placement (thesis Sec. 4.5.2, phase one) and the baseline placement, as functions of
an experts round (:mod:`optsched.rounds.experts`) returning a
:class:`~optsched.rounds.experts.plan.ReplicaPlan`.

**Uniform** (:func:`uniform_plan`, the baseline of Sec. 4.7: DeepSpeed's expert parallelism). Expert
``e`` is hosted on devices ``e, e + E, e + 2E, ...`` (mod the number of devices ``D``): one expert per
device when ``D = E``, ``D / E`` data-parallel copies when ``E`` divides ``D``, ``E / D`` experts per
device when ``D`` divides ``E``; replica counts are clamped to the expert's bounds, a device that is
full or already hosts the expert passes the replica to the next device with a free slot, and an
expert's tokens are split equally over its replicas. Popularity plays no part.

**Lina** (:func:`lina_plan`):

1. Eq. 4.1 (:func:`~optsched.perf.expert_popularity.device_counts`) gives each expert with load ``w_e
   > 0`` ``n_e = D x w_e / W`` devices (``W`` = total load; the round's loads play the role of the
   estimated popularity, normalised over the experts that have an estimate).
2. Expert ``e`` becomes ``floor(n_e)`` pieces of one device's worth (``W / D`` tokens) and, when
   ``n_e`` is not whole, a piece of the remainder: "replicate popular experts on proportionally more
   devices and pack unpopular ones onto fewer devices". The piece count is clamped to the expert's
   replica bounds (then its tokens are split equally over the pieces), and, when all pieces would not
   fit the device slots, the expert with the most pieces gives one up (its pieces re-split equally)
   until they do.
3. First-fit decreasing ("so the total devices used are minimized"): pieces, largest first (ties by
   expert, then piece), each go to the first device, in the round's device order, with a free slot,
   not hosting the expert yet and with room for the piece below its capacity ``W x speed_d / sum
   speed`` (its share of a perfectly balanced layer), through
   :meth:`~optsched.heuristics.placement.NodeLedger.first_fit` (devices are the ledger's nodes, slots
   its GPUs, capacity its memory). A piece that fits nowhere goes to the device with a free slot, not
   hosting the expert, where it finishes earliest (ties: fewest replicas, then the first device), or,
   when every such device is full, joins the expert's replica that finishes earliest (the paper does
   not say; a scheduler must place it).
4. Experts without an estimate (load 0) "are assigned evenly to the remaining free devices if any;
   otherwise are randomly assigned to a device": each replica to the free device (no piece went
   there) hosting the fewest replicas so far (the first among equals), else to the device with a free
   slot that finishes earliest, fewest replicas first among equals (deterministic instead of random,
   so that a round has one answer); ``min_replicas`` replicas each on distinct devices, equal shares.

**Replica minimums** (``min_replicas``; the paper has none). The rule above can leave an expert below
its minimum: when its next replica comes, the only free slots may be on devices that already host it,
and it joins an existing replica. A production placement must respect the round, so when that happens
the placement is done again with, before packing (step 3), ``min_replicas`` distinct devices reserved
for every expert (experts by minimum, largest first, each on the devices with the most unreserved
slots); a replica may then use a slot not reserved for another expert, or one reserved for its own
expert, and a replica on a device that is not reserved for its expert releases one of that expert's
reservations. The reservations change where pieces go, which the text's first fit would not do; plans
that already meet the minimums (every round with ``min_replicas`` 1 and enough slots) are unchanged.

Lina's rule does not see ``replica_cost`` (the paper has no such term); the round's makespan charges
it. Cost: O(pieces x devices) with numpy per piece; well under a millisecond for 16 x 16.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from optsched.core.errors import InfeasibleError
from optsched.heuristics.placement import NodeLedger
from optsched.perf.expert_popularity import device_counts
from optsched.rounds.experts.plan import ReplicaPlan
from optsched.rounds.experts.problem import ExpertsRound

#: remainders of Eq. 4.1 below this many devices are dropped (floating-point noise of a whole n_e)
WHOLE_TOL = 1e-9


@dataclass(frozen=True)
class _Held:
    """One replica piece's holding in the ledger: ((device, 1 slot, 0, tokens),)."""

    shares: tuple[tuple[int, int, int, float], ...]


class _Devices:
    """Slots, loads and hosting of the devices while a plan is built."""

    def __init__(self, problem: ExpertsRound, capacity: np.ndarray, pieces: int, reserve: bool) -> None:
        D = problem.num_devices
        self.problem = problem
        self.ledger = NodeLedger(problem.devices, np.zeros(D, dtype=np.int64),
                                 np.full(D, problem.slots, dtype=np.int64), np.zeros(D, dtype=np.int64),
                                 capacity.astype(float).copy(), max(pieces, 1))
        self.load = np.zeros(D)
        self.rows: list[list[tuple[int, float]]] = [[] for _ in range(problem.num_experts)]
        self.hosts = np.zeros((problem.num_experts, D), dtype=bool)
        self.used = 0
        self.reserved: list[list[int]] = [[] for _ in range(problem.num_experts)]
        self.held = np.zeros(D, dtype=np.int64)
        if reserve:
            self._reserve()

    def _reserve(self) -> None:
        """Distinct devices for every expert's ``min_replicas`` (module docstring, "Replica minimums"):
        experts by minimum, largest first, each on the devices with the most slots not yet reserved
        (first in device order among equals)."""
        lo = self.problem.min_replicas
        for e in sorted(range(self.problem.num_experts), key=lambda e: (-int(lo[e]), e)):
            spare = self.problem.slots - self.held
            got = sorted(np.flatnonzero(spare > 0).tolist(), key=lambda d: (-int(spare[d]), d))[:int(lo[e])]
            if len(got) < lo[e]:
                raise InfeasibleError(f"expert {e}: min_replicas {int(lo[e])} needs that many distinct devices with a "
                                      f"free slot; {len(got)} left after the other experts' minimums")
            self.reserved[e] = got
            self.held[got] += 1

    def open_for(self, e: int) -> np.ndarray:
        """Devices a new replica of expert ``e`` may go to: not hosting it, with a free slot that is not
        reserved for another expert, or reserved for ``e``."""
        mine = np.zeros(self.problem.num_devices, dtype=bool)
        mine[self.reserved[e]] = True
        return ((self.ledger.free_gpus - self.held > 0) | mine) & ~self.hosts[e]

    def finish_after(self, tokens: float) -> np.ndarray:
        return (self.load + tokens) / self.problem.speeds

    def put(self, e: int, d: int, tokens: float) -> None:
        """Host expert ``e`` on device ``d`` (a new replica) serving ``tokens``."""
        mine = self.reserved[e]
        if mine:
            d_freed = d if d in mine else mine[-1]  # a replica elsewhere meets the minimum as well
            mine.remove(d_freed)
            self.held[d_freed] -= 1
        self.ledger.assign(self.used, _Held(((d, 1, 0, tokens),)))
        self.used += 1
        self.load[d] += tokens
        self.hosts[e, d] = True
        self.rows[e].append((d, tokens))

    def place(self, e: int, tokens: float, *, first_fit: bool) -> None:
        """Place a piece of expert ``e`` (module docstring, steps 3 and 4)."""
        open_ = self.open_for(e)
        if first_fit:
            got = self.ledger.first_fit([(1, 0, tokens)], np.arange(self.problem.num_devices), allowed=open_)
            if got is not None:
                self.put(e, got[0][0], tokens)
                return
        if open_.any():
            d = np.flatnonzero(open_)
            best = np.lexsort((d, self.hosts[:, d].sum(axis=0), self.finish_after(tokens)[d]))[0]
            self.put(e, int(d[best]), tokens)
            return
        mine = np.flatnonzero(self.hosts[e])
        if mine.size == 0:
            raise InfeasibleError(f"Lina's placement found no device with a free slot for expert {e}")
        d = int(mine[np.argmin(self.finish_after(tokens)[mine])])
        self.load[d] += tokens
        self.rows[e] = [(dd, w + tokens if dd == d else w) for dd, w in self.rows[e]]

    def plan(self, loads: np.ndarray) -> ReplicaPlan:
        out: list[list[tuple[int, float]]] = []
        for e, reps in enumerate(self.rows):
            if loads[e] > 0:
                out.append([(d, w / loads[e]) for d, w in reps])
            else:
                out.append([(d, 1.0 / len(reps)) for d, _ in reps])
        return ReplicaPlan.from_devices(self.problem, out)


def _pieces(problem: ExpertsRound, loads: np.ndarray) -> list[list[float]]:
    """Per expert, its pieces in tokens (module docstring, step 2); [] for experts without load."""
    D, W = problem.num_devices, float(loads.sum())
    n = device_counts(loads / W, D) if W > 0 else np.zeros_like(loads)
    lo, hi = problem.min_replicas, problem.max_replicas
    pieces: list[list[float]] = []
    for e, ne in enumerate(n):
        if loads[e] <= 0:
            pieces.append([])
            continue
        whole = math.floor(ne + WHOLE_TOL)
        rest = ne - whole
        sizes = [W / D] * whole + ([rest * W / D] if rest > WHOLE_TOL else [])
        if not lo[e] <= len(sizes) <= hi[e]:
            r = int(min(max(len(sizes), lo[e]), hi[e]))
            sizes = [float(loads[e]) / r] * r
        pieces.append(sizes)
    budget = problem.num_devices * problem.slots - int(sum(lo[e] for e in range(len(loads)) if loads[e] <= 0))
    while sum(len(p) for p in pieces) > budget:
        e = max((e for e in range(len(pieces)) if len(pieces[e]) > lo[e]), key=lambda e: (len(pieces[e]), -e))
        r = len(pieces[e]) - 1
        pieces[e] = [float(loads[e]) / r] * r
    return pieces


def lina_plan(problem: ExpertsRound, loads: np.ndarray | None = None) -> ReplicaPlan:
    """Lina's placement (module docstring) for per-expert ``loads`` (default: the round's); placed again
    with the replica minimums reserved when the text's rule leaves an expert below its minimum."""
    w = problem.loads if loads is None else np.asarray(loads, dtype=float)
    devs = _place(problem, w, reserve=False)
    if any(len(rows) < lo for rows, lo in zip(devs.rows, problem.min_replicas)):
        devs = _place(problem, w, reserve=True)
    return devs.plan(w)


def _place(problem: ExpertsRound, w: np.ndarray, *, reserve: bool) -> _Devices:
    """Steps 1-4 of the module docstring, with the replica minimums reserved first when ``reserve``."""
    W = float(w.sum())
    pieces = _pieces(problem, w)
    capacity = W * problem.speeds / problem.speeds.sum()
    devs = _Devices(problem, capacity, sum(len(p) for p in pieces) + int(problem.min_replicas.sum()), reserve)
    order = sorted(((size, e, k) for e, ps in enumerate(pieces) for k, size in enumerate(ps)),
                   key=lambda x: (-x[0], x[1], x[2]))
    for size, e, _ in order:
        devs.place(e, size, first_fit=True)
    free = [d for d in range(problem.num_devices) if not devs.hosts[:, d].any()]
    for e in (e for e in range(problem.num_experts) if not pieces[e]):
        for _ in range(int(problem.min_replicas[e])):
            open_ = devs.open_for(e)
            cand = [d for d in free if open_[d]]
            if cand:
                devs.put(e, min(cand, key=lambda d: (int(devs.hosts[:, d].sum()), d)), 0.0)
            else:
                devs.place(e, 0.0, first_fit=False)
    return devs


def uniform_plan(problem: ExpertsRound) -> ReplicaPlan:
    """The baseline placement (module docstring)."""
    E, D = problem.num_experts, problem.num_devices
    lo, hi = problem.min_replicas, problem.max_replicas
    free = np.full(D, problem.slots, dtype=np.int64)
    hosts = np.zeros((E, D), dtype=bool)
    count = np.minimum(np.maximum([max(1, len(range(e, D, E))) for e in range(E)], lo), hi)
    if count.sum() > D * problem.slots:
        count = lo
    for e in range(E):
        for j in range(int(count[e])):
            d = (e + j * E) % D
            for step in range(D):
                c = (d + step) % D
                if free[c] > 0 and not hosts[e, c]:
                    hosts[e, c] = True
                    free[c] -= 1
                    break
    share = hosts / hosts.sum(axis=1, keepdims=True)
    return ReplicaPlan(hosts, share)


__all__ = ["WHOLE_TOL", "lina_plan", "uniform_plan"]

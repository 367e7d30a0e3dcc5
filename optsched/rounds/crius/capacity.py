"""Node capacity in a Crius round: GPU *slots* per node and where Cells go.

A Cell of ``g`` GPUs of a type whose nodes hold up to ``U`` GPUs in their largest power-of-two part
(:meth:`~optsched.perf.crius.cell_estimator.CellEstimator.node_unit`) takes one part of ``g`` GPUs on
one node when ``g <= U``, else ``g / U`` parts of ``U`` GPUs on distinct nodes (the packed placement
its estimate assumes). With every part it takes CPUs and host memory in proportion:
:func:`slot_rates` gives per type ``c`` CPUs and ``m`` GiB a GPU, the least over the type's nodes of
``floor(CPUs / GPUs)`` and ``memory / GPUs`` (memory rounded down to whole MiB). A node's **slots**
are then ``min(free GPUs, floor(free CPUs / c), floor(free MiB / m))``.

**Packing rule** (used by the exact model and checked by brute force in the tests): part sizes are
powers of two, so each divides every larger one. A set of parts fits a type's nodes, whose free slots
are ``a_n`` (after what stays where it is), if and only if for every part size ``s``: the GPUs of all
parts of size ``>= s`` are at most ``s x sum_n floor(a_n / s)``. (Necessary: parts of size ``>= s``
use a multiple of ``s`` slots of a node. Sufficient: placing the parts largest first, each on any
node with room, a node keeps ``floor(a_n / s) - (used_n / s)`` places of size ``s`` when the parts of
size ``s`` arrive, and the condition says there are enough.) :func:`place` is that placement, with
best fit (the node with the fewest free slots that holds the part, then the first).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from optsched.core.allocation import NodeShare, Placement
from optsched.core.hardware import Cluster
from optsched.core.round import RoundProblem

MIB = 1024


def slot_rates(cluster: Cluster) -> dict[str, tuple[int, float]]:
    """Per GPU type: (CPUs, GiB) that go with one GPU (module docstring); memoised on the cluster."""
    key = ("crius_slot_rates",)
    got = cluster.memo.get(key)
    if got is None:
        got = {}
        for t in cluster.gpu_types:
            nodes = [n for n in cluster.nodes_of_type(t.name) if n.num_gpus > 0]
            if not nodes:
                continue
            cpg = min(n.num_cpus // n.num_gpus for n in nodes)
            mib = min(math.floor(n.memory_gib * MIB / n.num_gpus + 1e-6) for n in nodes)
            got[t.name] = (cpg, mib / MIB)
        cluster.memo[key] = got
    return got


@dataclass
class NodeState:
    """Free GPUs, CPUs and GiB per node of a round (numpy arrays, in cluster order), mutable."""

    names: list[str]
    types: np.ndarray
    gpus: np.ndarray
    cpus: np.ndarray
    mem: np.ndarray

    @classmethod
    def of(cls, problem: RoundProblem) -> "NodeState":
        names = [n.name for n in problem.cluster.nodes]
        g, c, m = problem.free_arrays(names)
        return cls(names, np.array([n.gpu_type for n in problem.cluster.nodes]), g, c, m)

    def copy(self) -> "NodeState":
        return NodeState(self.names, self.types, self.gpus.copy(), self.cpus.copy(), self.mem.copy())

    def take(self, placement: Placement, index: Mapping[str, int], sign: int = 1) -> None:
        """Subtract (``sign`` 1) or give back (-1) the shares of ``placement``."""
        for node, share in placement.shares:
            i = index[node]
            self.gpus[i] -= sign * share.gpus
            self.cpus[i] -= sign * share.cpus
            self.mem[i] -= sign * share.mem_gib

    def slots(self, rates: Mapping[str, tuple[int, float]]) -> np.ndarray:
        """Free slots per node (module docstring)."""
        out = self.gpus.astype(np.int64).copy()
        for t, (cpg, mpg) in rates.items():
            mask = self.types == t
            if cpg > 0:
                out[mask] = np.minimum(out[mask], self.cpus[mask] // cpg)
            if mpg > 0:
                out[mask] = np.minimum(out[mask], np.floor(self.mem[mask] / mpg + 1e-9).astype(np.int64))
        return np.maximum(out, 0)


def part_share(rates: Mapping[str, tuple[int, float]], gpu_type: str, gpus: int) -> NodeShare:
    """The share of a part of ``gpus`` GPUs of ``gpu_type`` (module docstring)."""
    cpg, mpg = rates[gpu_type]
    return NodeShare(gpus, cpg * gpus, mpg * gpus)


def place(slots: np.ndarray, types: np.ndarray, demands: Sequence[tuple[str, str, int, int]]
          ) -> dict[str, tuple[tuple[int, int], ...]] | None:
    """Place ``demands`` ``(key, GPU type, part size, parts)`` on nodes with ``slots`` free slots: parts
    largest first (then in the given order), each on the node of its type with the fewest free slots
    that holds it and that holds no other part of the same demand. Returns key -> ((node index,
    GPUs), ...), or None when a part fits nowhere. ``slots`` is not modified."""
    free = slots.copy()
    out: dict[str, list[tuple[int, int]]] = {}
    order = sorted(range(len(demands)), key=lambda i: (-demands[i][2], i))
    big = np.iinfo(np.int64).max
    for i in order:
        key, gtype, size, parts = demands[i]
        used = np.zeros(len(free), dtype=bool)
        got = out.setdefault(key, [])
        for _ in range(parts):
            ok = (types == gtype) & (free >= size) & ~used
            if not ok.any():
                return None
            k = int(np.argmin(np.where(ok, free, big)))
            free[k] -= size
            used[k] = True
            got.append((k, size))
    return {k: tuple(v) for k, v in out.items()}


def fits(slots: np.ndarray, types: np.ndarray, gpu_type: str, size: int, parts: int) -> bool:
    """Whether ``parts`` parts of ``size`` slots fit distinct nodes of ``gpu_type``."""
    return int(np.count_nonzero((types == gpu_type) & (slots >= size))) >= parts


__all__ = ["MIB", "NodeState", "fits", "part_share", "place", "slot_rates"]

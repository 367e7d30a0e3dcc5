"""Stage determination of a Cell (Crius Sec. 4.2, Fig. 7): which operators form each pipeline stage and
how many GPUs each stage gets.

For ``N`` GPUs and ``Ns`` stages on an :class:`~optsched.perf.crius.op_graph.OperatorGraph`:

1. **GPUs to operators by FLOPs.** Operator ``i`` is mapped ``N x flops_i / total flops`` GPUs (a
   fraction): every operator then takes the same time, ``FLOPs / GPUs`` ("even if each operator is
   an independent stage, the operators could construct a full-state pipeline").
2. **Cut at the least communication.** The ``Ns - 1`` boundaries (between consecutive operators of the
   topological order) with the fewest bytes crossing them become the stage boundaries (Fig. 7: "the
   smallest 3 inter-operator communication ... to slice the entire model into 4 pipeline stages").
   *Ties* (the paper is silent; uniform transformer layers make every boundary tie): the boundaries
   strictly below the tied value are taken, and the tied ones are added one at a time, each time the
   one that makes the stages' FLOPs most even (the smallest sum of squared stage FLOPs), then the
   leftmost; 24 equal layers in 4 stages get 6 each.
3. **Stage GPUs.** A stage's share is the sum of its operators'; stage GPU counts are powers of two
   (Sec. 4.2: "the number of GPUs accumulated for each stage approximates a power of 2") summing to
   ``N``: every stage starts at 1 GPU and, while GPUs are left, the stage with the largest share per
   GPU among those whose count can still double is doubled (ties: the first). With ``N`` a power of
   two this always ends at exactly ``N`` (a stage of the smallest count can always double), and it
   keeps the largest share per GPU as small as doubling allows.

Rules: ``N`` is a power of two, ``1 <= Ns <= min(N, number of operators)``; otherwise a
``ValidationError`` names the graph and the rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from optsched.core.checks import require_int
from optsched.core.errors import ValidationError
from optsched.perf.crius.op_graph import OperatorGraph

#: relative tolerance under which two boundaries carry "the same" bytes
TIE_RTOL = 1e-9


def is_power_of_two(n: int) -> bool:
    return isinstance(n, int) and not isinstance(n, bool) and n >= 1 and n & (n - 1) == 0


@dataclass(frozen=True)
class StagePartition:
    """Stages of a Cell: stage ``s`` holds the operators at topological positions ``starts[s]`` to
    ``starts[s+1] - 1`` (the last to the end) and runs on ``gpus[s]`` GPUs; ``shares[s]`` is its FLOPs
    share in GPUs (step 1 of the module docstring), ``cut_bytes[s]`` the bytes per sample crossing the
    boundary after stage ``s`` (``len(gpus) - 1`` entries)."""

    num_ops: int
    starts: tuple[int, ...]
    gpus: tuple[int, ...]
    shares: tuple[float, ...]
    cut_bytes: tuple[float, ...]

    @property
    def num_stages(self) -> int:
        return len(self.gpus)

    @property
    def num_gpus(self) -> int:
        return sum(self.gpus)

    def ops_of(self, stage: int) -> range:
        end = self.starts[stage + 1] if stage + 1 < len(self.starts) else self.num_ops
        return range(self.starts[stage], end)

    def bounds(self) -> np.ndarray:
        """``starts`` followed by the number of operators (for ``np.add.reduceat``-style sums)."""
        return np.array((*self.starts, self.num_ops), dtype=np.int64)


def _tie_break(flops: np.ndarray, chosen: list[int], tied: list[int], need: int) -> list[int]:
    """Add ``need`` boundaries of ``tied`` to ``chosen``, each the one minimising the sum of squared stage
    FLOPs (then the leftmost); a boundary ``b`` cuts after operator position ``b``. Splitting the stage
    ``[lo, hi)`` at ``b`` changes the sum by ``left^2 + right^2 - (left + right)^2 = -2 left right``, so
    the best boundary is the one with the largest product of its two sides."""
    prefix = np.concatenate(([0.0], np.cumsum(flops)))
    cuts = sorted(c + 1 for c in chosen)  # stage starts other than 0
    pool = np.array(sorted(tied), dtype=np.int64)
    taken = np.zeros(pool.size, dtype=bool)
    for _ in range(need):
        edges = np.array([0, *cuts, len(flops)])
        seg = np.searchsorted(edges, pool + 1, side="right") - 1
        left = prefix[pool + 1] - prefix[edges[seg]]
        right = prefix[edges[seg + 1]] - prefix[pool + 1]
        gain = np.where(taken, -np.inf, left * right)
        k = int(np.argmax(gain))
        taken[k] = True
        cuts = sorted([*cuts, int(pool[k]) + 1])
    return sorted(c - 1 for c in cuts)


def choose_cuts(graph: OperatorGraph, num_stages: int) -> tuple[int, ...]:
    """The ``num_stages - 1`` boundaries (positions: a cut after operator ``b``) of step 2."""
    k = num_stages - 1
    if k == 0:
        return ()
    b = graph.boundary_bytes
    order = np.argsort(b, kind="stable")
    threshold = b[order[k - 1]]
    tol = TIE_RTOL * max(1.0, abs(float(threshold)))
    below = [int(i) for i in np.flatnonzero(b < threshold - tol)]
    tied = [int(i) for i in np.flatnonzero(np.abs(b - threshold) <= tol)]
    if len(below) + len(tied) == k:
        return tuple(sorted(below + tied))
    return tuple(_tie_break(graph.column("flops"), below, tied, k - len(below)))


def round_stage_gpus(shares: np.ndarray, num_gpus: int) -> tuple[int, ...]:
    """Powers of two summing to ``num_gpus`` (a power of two >= ``len(shares)``), step 3 of the module
    docstring."""
    p = np.ones(len(shares), dtype=np.int64)
    left = num_gpus - len(shares)
    while left > 0:
        ratio = np.where(p <= left, shares / p, -np.inf)
        s = int(np.argmax(ratio))
        left -= int(p[s])
        p[s] *= 2
    return tuple(int(x) for x in p)


def determine_stages(graph: OperatorGraph, num_gpus: int, num_stages: int) -> StagePartition:
    """Stages of ``graph`` on ``num_gpus`` GPUs in ``num_stages`` stages (module docstring)."""
    return _determine(graph, num_gpus, num_stages)


@lru_cache(maxsize=8192)
def _determine(graph: OperatorGraph, num_gpus: int, num_stages: int) -> StagePartition:
    owner = f"stages of {graph.name!r}"
    require_int(owner, "GPUs", num_gpus, 1)
    require_int(owner, "stages", num_stages, 1)
    if not is_power_of_two(num_gpus):
        raise ValidationError(f"{owner}: {num_gpus} GPUs is not a power of two (Crius Sec. 4.2 gives every stage a "
                              "power of two of GPUs)")
    n = len(graph)
    if num_stages > min(num_gpus, n):
        raise ValidationError(f"{owner}: {num_stages} stages need at most as many stages as GPUs ({num_gpus}) and as "
                              f"operators ({n})")
    flops = graph.column("flops")
    share = num_gpus * flops / flops.sum()
    cuts = choose_cuts(graph, num_stages)
    starts = (0, *(c + 1 for c in cuts))
    bounds = np.array((*starts, n))
    stage_shares = np.add.reduceat(share, bounds[:-1])
    gpus = round_stage_gpus(stage_shares, num_gpus)
    cut_bytes = tuple(float(graph.boundary_bytes[c]) for c in cuts)
    return StagePartition(n, starts, gpus, tuple(float(x) for x in stage_shares), cut_bytes)


__all__ = ["StagePartition", "choose_cuts", "determine_stages", "is_power_of_two", "round_stage_gpus"]

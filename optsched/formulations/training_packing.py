"""The exact counterpart of Lina's training packing rule (thesis Sec. 4.4.2;
:mod:`optsched.perf.training_packing` for the problem and the layer time,
:func:`optsched.heuristics.lina_packing.packing_rule` for the rule): choose the experts per device ``p``
and which experts share a device so that the modelled MoE layer time is smallest.

**Method.** Every ``p`` that may be chosen (a candidate, within ``max_experts_per_device``, within memory
unless ``offload``) is tried. For a ``p``, the layer time is ``lambda x pipelined + swap_ms x offloaded``
with only ``lambda`` (the most loaded device's tokens over the balanced share) depending on which experts
share a device, so the best sets minimise the largest set load: a balanced partition of the experts into
``g = E / p`` sets of exactly ``p``. Under balanced load (``loads`` None), ``p = 1`` and ``p = E`` every
partition is as good (the consecutive one is kept); otherwise a CP-SAT model:

* ``x[e, s]`` (bool): expert ``e`` in set ``s``; ``sum_s x[e, s] = 1``, ``sum_e x[e, s] = p``;
* ``M >= sum_e q_e x[e, s]`` for every set, minimise ``M``, with ``q_e = round(RESOLUTION x w_e / W)``;
* symmetry breaking: expert ``e`` goes to a set ``s <= e`` (sets are interchangeable, so any partition is
  a relabelling of one that does).

Size: at most ``E x g`` booleans (fewer with the symmetry breaking) and ``M``; ``E + 2 g`` constraints
(16 experts in 8 sets of 2: 101 variables, 32 constraints). The decoded partition's ``lambda`` is
recomputed in floating point, and the ``p`` with the smallest layer time wins (ties: the smaller ``p``).
Quantisation: a partition optimal for ``q`` is within ``p / RESOLUTION`` of the true optimum's largest set
share (``p`` roundings of at most half a unit each, on either side); ``optimal`` means optimal up to that.

**Never worse than the rule.** The caller passes the rule's plan
(:func:`~optsched.heuristics.lina_packing.packing_rule`; this layer does not import heuristics) as
``fallback``; it is scored too and returned (status ``heuristic-fallback``) when no tried plan beats it,
which can happen only when a partition solve stops at its time limit without an optimum: the rule's ``p``
is among the tried ones and its consecutive sets are one partition of that ``p``.

**Deadline.** With ``deadline`` (a ``time.perf_counter()`` instant) the partition solves share what is
left of it equally, each given its share less the model's estimated build time (:data:`BUILD_S_PER_VAR` a
Boolean); a solve whose build would not fit its share is skipped (consecutive sets, not proven optimal), so
the call ends near the deadline whatever the number of experts.

**Warm start.** ``hint`` (a plan, e.g. the rule's) is given to the partition solve of its ``p`` as CP-SAT
hints, its sets relabelled by their smallest expert (which satisfies the symmetry breaking: the ``k``-th
smallest of distinct smallest experts is at least ``k``).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from optsched.core.checks import require_int, require_number
from optsched.perf.training_packing import OWNER, PackingPlan, PackingSetup, consecutive_sets, imbalance, layer_ms

log = logging.getLogger(__name__)

#: quantisation units of the total load (module docstring)
RESOLUTION = 1_000_000
#: seconds to build and load the partition model per Boolean: measured 6-10 us (256-1,024 experts at 2-8 per
#: device, 8.5 us for the 393,472 Booleans of 1,024 experts at 2), with a margin
BUILD_S_PER_VAR = 1.5e-5


def partition_vars(experts: int, experts_per_device: int) -> int:
    """Booleans of the partition model of ``experts_per_device`` (one per expert ``e`` and set ``s <= e``)."""
    g = experts // experts_per_device
    return sum(min(e + 1, g) for e in range(experts))


@dataclass(frozen=True)
class PackingResult:
    """The exact packing: the ``plan``, its ``layer_ms``, ``status`` (``optimal``, ``feasible`` when a
    partition solve stopped at its limit, ``heuristic-fallback``), the rule's ``heuristic_ms`` and the best
    layer time of every tried ``p`` (``by_p``); ``heuristic_ms`` is None without a ``fallback``."""

    plan: PackingPlan
    layer_ms: float
    status: str
    heuristic_ms: float | None
    by_p: tuple[tuple[int, float], ...]
    solve_seconds: float


def best_sets(setup: PackingSetup, experts_per_device: int, *, time_limit: float = 10.0, seed: int = 0,
              workers: int = 1, hint: Sequence[Sequence[int]] | None = None
              ) -> tuple[tuple[tuple[int, ...], ...], bool]:
    """The sets of ``experts_per_device`` experts with the smallest largest load (module docstring) and
    whether they are proven optimal; ``hint``: a partition of that size to warm-start the solver with."""
    E, p = setup.experts, experts_per_device
    if setup.loads is None or p in (1, E):
        return consecutive_sets(E, p), True
    from ortools.sat.python import cp_model  # OR-Tools on use (issue 26, item 4)

    from optsched.formulations.cpsat import cp_solver

    g = E // p
    q = np.round(setup.shares * RESOLUTION).astype(np.int64)
    m = cp_model.CpModel()
    x = [[m.new_bool_var(f"x_{e}_{s}") if s <= e else None for s in range(g)] for e in range(E)]
    for e in range(E):
        m.add_exactly_one(v for v in x[e] if v is not None)
    span = m.new_int_var(0, int(q.sum()), "largest")
    for s in range(g):
        members = [(e, x[e][s]) for e in range(E) if x[e][s] is not None]
        m.add(sum(v for _, v in members) == p)
        m.add(span >= sum(int(q[e]) * v for e, v in members))
    m.minimize(span)
    if hint is not None:
        for s, members in enumerate(sorted(hint, key=min)):
            for e in members:
                for t in range(g):
                    if x[e][t] is not None:
                        m.add_hint(x[e][t], int(t == s))
    solver = cp_solver(time_limit, seed, workers)
    status = solver.status_name(solver.solve(m))
    if status not in ("OPTIMAL", "FEASIBLE"):
        log.debug("training packing: no partition for p=%d (%s); consecutive sets", p, status)
        return consecutive_sets(E, p), False
    sets = tuple(tuple(e for e in range(E) if x[e][s] is not None and solver.value(x[e][s])) for s in range(g))
    return sets, status == "OPTIMAL"


def solve_packing(setup: PackingSetup, *, fallback: PackingPlan | None = None, time_limit: float = 10.0, seed: int = 0,
                  workers: int = 1, hint: PackingPlan | None = None, deadline: float | None = None) -> PackingResult:
    """The exact packing of ``setup`` (module docstring), never worse than ``fallback`` (the rule's plan);
    ``time_limit`` seconds per partition solve at most, all of them ending near ``deadline`` when given;
    ``hint`` warm-starts the partition solve of its ``p``."""
    require_number(OWNER, "time_limit", time_limit, 0.0, strict=True)
    require_int(OWNER, "workers", workers, 1)
    t0 = time.perf_counter()
    rule_ms = None if fallback is None else layer_ms(setup, fallback)
    best: tuple[float, PackingPlan] | None = None
    proven = True
    by_p: list[tuple[int, float]] = []
    tried = [c.experts_per_device for c in sorted(setup.candidates, key=lambda c: c.experts_per_device)
             if setup.allowed(c.experts_per_device)]
    modelled = [p for p in tried if setup.loads is not None and p not in (1, setup.experts)]
    for p in tried:
        warm = hint.sets if hint is not None and hint.experts_per_device == p else None
        limit = time_limit
        if deadline is not None and p in modelled:
            share = (deadline - time.perf_counter()) / (len(modelled) - modelled.index(p))
            limit = min(time_limit, share - BUILD_S_PER_VAR * partition_vars(setup.experts, p))
        if limit <= 0:
            log.debug("training packing: no time for the partition of p=%d; consecutive sets", p)
            sets, optimal = consecutive_sets(setup.experts, p), False
        else:
            sets, optimal = best_sets(setup, p, time_limit=limit, seed=seed, workers=workers, hint=warm)
        if imbalance(setup, consecutive_sets(setup.experts, p), p) < imbalance(setup, sets, p):
            sets = consecutive_sets(setup.experts, p)  # the solver stopped early on a worse partition
        proven &= optimal
        plan = PackingPlan(p, sets, setup.offloaded(p))
        ms = layer_ms(setup, plan)
        by_p.append((p, ms))
        if best is None or ms < best[0] - 1e-12:
            best = (ms, plan)
    assert best is not None  # p = 1 is always allowed (the setup checks it fits or offload is on)
    wall = time.perf_counter() - t0
    if fallback is not None and rule_ms is not None and rule_ms < best[0] - 1e-12:
        return PackingResult(fallback, rule_ms, "heuristic-fallback", rule_ms, tuple(by_p), wall)
    return PackingResult(best[1], best[0], "optimal" if proven else "feasible", rule_ms, tuple(by_p), wall)


__all__ = ["BUILD_S_PER_VAR", "PackingResult", "RESOLUTION", "best_sets", "partition_vars", "solve_packing"]

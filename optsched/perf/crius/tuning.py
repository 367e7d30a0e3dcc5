"""Exploring a Cell's own parallelism space (Crius Sec. 5.2): the full exploration that adaptive
parallelism would run (every data x tensor split of every stage; the optimum in our cost model) and
Crius's Cell-guided tuning, which keeps only the half of each stage's space its estimate favours.

**Full exploration** (:func:`full_exploration`): each stage of ``g = 2^k`` GPUs may run any split
``(2^(k-j), 2^j)``, ``j = 0 .. k``; the space holds ``prod_s (k_s + 1)`` plans and its best is found
exactly (:func:`~optsched.perf.crius.cell_estimator.best_pipeline`).

**Cell-guided tuning** (:func:`cell_guided_tuning`, Fig. 11): the split a stage takes in the Cell's
estimate (its best assembled plan) is its *favour*; half-hybrid parallelism is ``sqrt(g)`` data
replicas of ``sqrt(g)`` tensor ranks. A stage favouring data parallelism is tuned over the splits from
data-parallel only to half-hybrid (``j <= k / 2``), one favouring tensor parallelism over half-hybrid
to tensor-parallel only (``j >= k / 2``); a stage of one GPU has one split. (For ``g = 2`` the halves
are the two pure splits; for odd ``k`` half-hybrid is not a split and each half stops at the split
next to it.) A Cell without a feasible assembled plan has no favour; it is tuned over the full
space. The tuner's answer is the best plan of the pruned space, and it evaluates
``prod_s |half_s|`` plans.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from optsched.perf.crius.cell_estimator import (Cell, CellEstimate, CellEstimator, PipelinePlan, Split, all_splits,
                                                best_pipeline, plan_of)
from optsched.perf.crius.stages import determine_stages


@dataclass(frozen=True)
class TuningResult:
    """The best ``plan`` of an explored space (None when nothing in it runs) and how many plans the
    space holds (``plans_evaluated``)."""

    plan: PipelinePlan | None
    plans_evaluated: int

    @property
    def iteration_time_s(self) -> float:
        return math.inf if self.plan is None else self.plan.iteration_time_s


def half_space(gpus: int, favour: Split) -> tuple[Split, ...]:
    """The splits of a stage of ``gpus`` GPUs kept for ``favour`` (module docstring)."""
    k = gpus.bit_length() - 1
    splits = all_splits(gpus)
    if k == 0:
        return splits
    tp_favoured = favour[1] > favour[0]
    return tuple(s for j, s in enumerate(splits) if (2 * j >= k if tp_favoured else 2 * j <= k))


def explore(estimator: CellEstimator, cell: Cell, options: Sequence[Sequence[Split]]) -> TuningResult:
    """The best plan of ``cell`` over the per-stage ``options`` (exact)."""
    part = determine_stages(cell.model, cell.gpus, cell.stages)
    table = estimator.stage_table(cell, part, options)
    latency, choice = best_pipeline(table)
    plan = plan_of(table, options, choice, latency) if choice else None
    return TuningResult(plan, math.prod(len(o) for o in options))


def full_exploration(estimator: CellEstimator, cell: Cell) -> TuningResult:
    """Every split of every stage (module docstring): the adaptive-parallelism optimum of the Cell."""
    part = determine_stages(cell.model, cell.gpus, cell.stages)
    return explore(estimator, cell, [all_splits(g) for g in part.gpus])


def cell_guided_tuning(estimator: CellEstimator, cell: Cell, estimate: CellEstimate | None = None) -> TuningResult:
    """Crius Sec. 5.2 on ``cell`` guided by ``estimate`` (default: the estimator's own, and then the
    answer is memoised in the estimator; module docstring)."""
    if estimate is None:
        key = ("tuned", id(cell.model), cell.gpu_type, cell.gpus, cell.stages, cell.gpus_per_node)
        got = estimator.memo.get(key)
        if got is None or got[0] is not cell.model:  # type: ignore[index]
            got = estimator.memo[key] = (cell.model, _guided(estimator, cell, estimator.estimate(cell)))
        return got[1]  # type: ignore[index,return-value]
    return _guided(estimator, cell, estimate)


def _guided(estimator: CellEstimator, cell: Cell, est: CellEstimate) -> TuningResult:
    if est.plan is None:
        return full_exploration(estimator, cell)
    return explore(estimator, cell, [half_space(g, f) for g, f in zip(est.partition.gpus, est.plan.splits)])


__all__ = ["TuningResult", "cell_guided_tuning", "explore", "full_exploration", "half_space"]

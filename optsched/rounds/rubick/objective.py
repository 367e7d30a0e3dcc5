"""The objective of a Rubick round (Sec. 3, "cluster throughput as the sum of normalised throughputs"):

``sum_j w_j thr_j / ref_j - reconfig_penalty x #reconfigured - trim_penalty x #trimmed - preempt_penalty x #preempted``,

where ``ref_j`` is job j's reference throughput (its request's), ``w_j`` its ``weight`` (default 1), each
penalty the job's own (:meth:`~optsched.rounds.rubick.problem.RubickRound.penalties`: the round's
penalties times its weight, or derived from its restart and checkpoint seconds), a running job is *trimmed* when its
choice keeps its plan and its GPUs on the same nodes but changes its CPUs or memory
(:func:`~optsched.rounds.rubick.choice.is_trim`; issue 16, item 5), *reconfigured* when its choice
neither keeps it (:func:`~optsched.rounds.rubick.choice.is_kept`) nor trims it, and *preempted* when it
gets nothing (:func:`~optsched.rounds.rubick.choice.change_penalty`). One function scores every
method, so heuristic and exact decisions compare."""

from __future__ import annotations

from typing import Mapping

from optsched.perf.coefficients import CoefficientTable
from optsched.rounds.rubick.choice import Choice, change_penalty
from optsched.rounds.rubick.problem import RubickRound


def objective(problem: RubickRound, table: CoefficientTable, choices: Mapping[str, Choice]) -> float:
    """Rubick's round objective of ``choices`` (job name -> choice; absent jobs do not run)."""
    ref = table.reference_throughput
    total = 0.0
    for j, name in enumerate(table.jobs):
        choice = choices.get(name)
        running = table.current_row[j] >= 0
        if choice is not None:
            total += problem.weight(name) * float(table.throughput[choice.row] / ref[j])
            if running:
                total -= change_penalty(problem, table, j, choice)
        elif running:
            total -= problem.penalties(name).preempt
    return total


__all__ = ["objective"]

"""The objective of a Crius round; one function scores every method, so heuristic, exact and baseline
decisions compare.

* ``throughput`` (Crius Sec. 6; "we use the sum of all training jobs' throughput as the cluster
  throughput", each job's normalised by its reference so that models of different speeds add up):
  ``sum_j w_j - rescale_penalty x #rescaled - preempt_penalty x #suspended``, with ``w_j`` the weight
  (throughput / reference) of job j's row;
* ``deadline`` (Sec. 8.5): the same plus ``deadline_bonus`` for every job with a deadline that runs
  on a Cell meeting it.
"""

from __future__ import annotations

from typing import Mapping

from optsched.rounds.crius.choice import Choice, is_kept
from optsched.rounds.crius.problem import CriusRound
from optsched.rounds.crius.table import CriusTable


def objective(problem: CriusRound, table: CriusTable, choices: Mapping[str, Choice]) -> float:
    """The round's objective of ``choices`` (job name -> choice; absent jobs do not run)."""
    total = 0.0
    deadline_mode = problem.objective == "deadline"
    for j, job in enumerate(problem.jobs):
        choice = choices.get(job.name)
        running = table.current_row[j] >= 0
        if choice is not None:
            total += float(table.weight[choice.row])
            if deadline_mode and job.deadline is not None and table.deadline_ok[choice.row]:
                total += problem.deadline_bonus
            if running and not is_kept(problem, table, j, choice):
                total -= problem.rescale_penalty
        elif running:
            total -= problem.preempt_penalty
    return total


__all__ = ["objective"]

"""The objective of a Crius round; one function scores every method, so heuristic, exact and baseline
decisions compare. Per row the table holds the objective's ``value`` of a job running that Cell
(:mod:`~optsched.rounds.crius.table`).

* ``throughput`` (default; the paper's, Crius Sec. 2.2: "Like many works [31, 19, 32, 15], we use the
  sum of all training jobs' throughput as the cluster throughput"; Sec. 6: "Crius aims to maximize the
  cluster throughput"): ``sum_j thr_j``, the raw throughput (samples/s) of job j's Cell; no penalty.
* ``deadline`` (Sec. 8.5: "Crius provides strict deadline guarantees for each scheduled job while
  optimizing cluster-wide performance"): the same sum, under the deadline rules of
  :mod:`~optsched.rounds.crius.admission`.
* ``normalised`` (ours, not the paper's): ``sum_j w_j - rescale_penalty x #rescaled - preempt_penalty x
  #suspended``, ``w_j = thr_j / reference_j`` (so that models of different speeds add up alike);
* ``normalised-deadline`` (ours): that plus ``deadline_bonus`` for every job with a deadline that runs on
  a Cell meeting it, under the deadline rules.
"""

from __future__ import annotations

from typing import Mapping

from optsched.rounds.crius.choice import Choice, is_kept
from optsched.rounds.crius.problem import CriusRound
from optsched.rounds.crius.table import CriusTable


def objective(problem: CriusRound, table: CriusTable, choices: Mapping[str, Choice]) -> float:
    """The round's objective of ``choices`` (job name -> choice; absent jobs do not run)."""
    total = 0.0
    rescale, preempt, bonus = problem.rescale_cost, problem.preempt_cost, problem.bonus
    for j, job in enumerate(problem.jobs):
        choice = choices.get(job.name)
        running = table.current_row[j] >= 0
        if choice is not None:
            total += float(table.value[choice.row])
            if bonus and job.deadline is not None and table.deadline_ok[choice.row]:
                total += bonus
            if running and rescale and not is_kept(problem, table, j, choice):
                total -= rescale
        elif running:
            total -= preempt
    return total


__all__ = ["objective"]

"""A job's choice in a Crius round -- a row of the round's table and the nodes its parts go to -- and
what it means for a running job.

* **Kept**: a running job is kept when it chooses its current row (``current_row``) on exactly its
  current nodes with the same GPUs on each; it keeps its exact current shares.
* **Rescaled**: a running job that runs with any other choice (another Cell, or its Cell on other
  nodes); the search depth bounds how many there are (Sec. 6.1, :func:`depth_bound`).
* **Suspended**: a running job that gets nothing.

A part of ``g`` GPUs of a row of type ``t`` takes ``g`` GPUs with their CPUs and memory
(:func:`~optsched.rounds.crius.capacity.part_share`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from optsched.core.allocation import Placement
from optsched.rounds.crius.capacity import part_share, slot_rates
from optsched.rounds.crius.problem import CriusRound
from optsched.rounds.crius.table import CriusTable


@dataclass(frozen=True)
class Choice:
    """Table ``row`` chosen for a job and its ``parts``: ``((node, gpus), ...)``, one part per node."""

    row: int
    parts: tuple[tuple[str, int], ...]


def current_parts(problem: CriusRound, job: str) -> tuple[tuple[str, int], ...]:
    """``((node, gpus), ...)`` of a running job's allocation, sorted by node."""
    cur = problem.current(job)
    return () if cur is None else cur.placement.gpu_parts


def is_kept(problem: CriusRound, table: CriusTable, j: int, choice: Choice | None) -> bool:
    """Whether ``choice`` keeps running job index ``j`` exactly as it runs (module docstring)."""
    cur = int(table.current_row[j])
    return (choice is not None and cur >= 0 and choice.row == cur
            and tuple(sorted(choice.parts)) == current_parts(problem, table.jobs[j]))


def keep_choice(problem: CriusRound, table: CriusTable, j: int) -> Choice:
    """The choice that keeps running job index ``j`` as it runs."""
    return Choice(int(table.current_row[j]), current_parts(problem, table.jobs[j]))


def placement_of(problem: CriusRound, table: CriusTable, j: int, choice: Choice) -> Placement:
    """The per-node shares of ``choice`` (a kept job keeps its exact shares)."""
    if is_kept(problem, table, j, choice):
        cur = problem.current(table.jobs[j])
        assert cur is not None
        return cur.placement
    rates = slot_rates(problem.cluster)
    gtype = table.gpu_type[choice.row]
    return Placement.of({node: part_share(rates, gtype, g) for node, g in choice.parts})


def counts(problem: CriusRound, table: CriusTable, choices: Mapping[str, Choice]) -> tuple[int, int]:
    """(rescaled, suspended) running jobs of ``choices`` (module docstring)."""
    rescaled = suspended = 0
    for j, name in enumerate(table.jobs):
        if table.current_row[j] < 0:
            continue
        c = choices.get(name)
        if c is None:
            suspended += 1
        elif not is_kept(problem, table, j, c):
            rescaled += 1
    return rescaled, suspended


def is_late(problem: CriusRound, table: CriusTable, j: int) -> bool:
    """Whether job index ``j`` runs a Cell that misses its deadline under the deadline objective (Sec. 8.5:
    it may not stay as it is)."""
    cur = int(table.current_row[j])
    return (cur >= 0 and problem.deadline_aware and problem.jobs[j].deadline is not None
            and not bool(table.deadline_ok[cur]))


def scheduling_choices(problem: CriusRound, table: CriusTable, choices: Mapping[str, Choice]) -> int:
    """How many scheduling choices (Algorithm 1 line 18) a round's decision is made of: one per queued job
    it starts (``CellBasedSched(job)``, lines 6 and 10), one per late running deadline job it rescales
    (each its own choice, :func:`is_late`) and the extra scheduling of line 12 (``CellBasedSched()``)."""
    n = 1
    for j, name in enumerate(table.jobs):
        if name in choices and (table.current_row[j] < 0 or is_late(problem, table, j)):
            n += 1
    return n


def depth_bound(problem: CriusRound, table: CriusTable, choices: Mapping[str, Choice]) -> int:
    """The most running jobs ``choices`` may rescale: the search depth ``D`` per scheduling choice (Sec. 6.1:
    "a hyperparameter called search depth, which is the maximum job scaling times for generating a
    scheduling choice in Algorithm 1 line 18"), so ``D x`` :func:`scheduling_choices` in a round."""
    return problem.search_depth * scheduling_choices(problem, table, choices)


__all__ = ["Choice", "counts", "current_parts", "depth_bound", "is_kept", "is_late", "keep_choice", "placement_of",
           "scheduling_choices"]

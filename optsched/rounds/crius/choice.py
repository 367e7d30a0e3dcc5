"""A job's choice in a Crius round -- a row of the round's table and the nodes its parts go to -- and
what it means for a running job.

* **Kept**: a running job is kept when it chooses its current row (``current_row``) on exactly its
  current nodes with the same GPUs on each; it keeps its exact current shares.
* **Rescaled**: a running job that runs with any other choice (another Cell, or its Cell on other
  nodes); the round's search depth bounds how many there are (Sec. 6.1).
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


__all__ = ["Choice", "counts", "current_parts", "is_kept", "keep_choice", "placement_of"]

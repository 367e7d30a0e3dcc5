"""A job's choice in a Rubick round — a row of the round's coefficient table and the nodes its parts
go to — and how it lands on nodes.

* **Placement of a row**: a row's shape (GPUs per node) is mapped to distinct nodes of its GPU type;
  the part of s GPUs of a row with G GPUs, C CPUs and M GiB gets ``ceil(C s / G)`` CPUs and
  ``M s / G`` GiB (:func:`part_share`).
* **Kept**: a running job is *kept* when it runs its current plan on exactly its current per-node
  GPUs, with its current row or a row of the same CPUs and memory; a kept job keeps its exact
  current shares (:func:`placement_of`) and pays no reconfiguration penalty.
* **Trimmed** (issue 16, item 5): a running job that is not kept but runs its current plan on exactly
  its current per-node GPUs (the same nodes) with a row of other CPUs or memory: only its CPU and
  memory limits change, in place (:func:`is_trim`); it pays the round's ``trim_penalty`` instead of
  the reconfiguration penalty (:func:`change_penalty`). Every other change of a running job (plan,
  GPUs, nodes) is a *reconfiguration*.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from optsched.core.allocation import NodeShare, Placement
from optsched.core.errors import ValidationError
from optsched.perf.coefficients import CoefficientTable
from optsched.rounds.rubick.problem import RubickRound

#: tolerance of "same memory" in :func:`is_kept` (GiB)
KEPT_MEM_TOL = 1e-9


@dataclass(frozen=True)
class Choice:
    """Table ``row`` chosen for a job and its ``parts``: ``((node, gpus), ...)``, one part per node."""

    row: int
    parts: tuple[tuple[str, int], ...]


def check_round_table(problem: RubickRound, table: CoefficientTable, who: str = "coefficient table") -> None:
    """``ValidationError`` unless ``table`` is a round table of ``problem``: its jobs are the round's,
    in order, with ``reference_throughput`` and ``current_row``."""
    if table.jobs != tuple(j.name for j in problem.jobs):
        raise ValidationError(f"{who}: the coefficient table's jobs must be the round's jobs, in the round's order")
    if table.reference_throughput is None or table.current_row is None:
        raise ValidationError(f"{who}: a round table needs reference_throughput and current_row "
                              "(build it with optsched.rounds.rubick.table.build_round_table)")


def part_share(table: CoefficientTable, row: int, gpus: int) -> tuple[int, float]:
    """(CPUs, GiB) of the part of ``gpus`` GPUs of ``row`` (module docstring)."""
    g = int(table.gpus[row])
    return math.ceil(int(table.cpus[row]) * gpus / g - 1e-9), float(table.mem_gib[row]) * gpus / g


def is_kept(problem: RubickRound, table: CoefficientTable, job: int, choice: Choice | None) -> bool:
    """Whether ``choice`` keeps running job index ``job`` exactly as it runs (module docstring)."""
    cur_row = int(table.current_row[job])
    if choice is None or cur_row < 0:
        return False
    cur = problem.current(table.jobs[job])
    assert cur is not None
    row = choice.row
    return (table.plans[row] == cur.plan
            and sorted(choice.parts) == sorted(cur.placement.gpu_parts)
            and (row == cur_row or (table.cpus[row] == cur.placement.total_cpus
                                    and abs(table.mem_gib[row] - cur.placement.total_mem_gib) < KEPT_MEM_TOL)))


def _same_gpus(problem: RubickRound, table: CoefficientTable, job: int, choice: Choice) -> bool:
    """Whether ``choice`` runs running job index ``job``'s current plan on exactly its current per-node GPUs."""
    cur = problem.current(table.jobs[job])
    assert cur is not None
    return (table.plans[choice.row] == cur.plan
            and sorted(choice.parts) == sorted(cur.placement.gpu_parts))


def is_trim(problem: RubickRound, table: CoefficientTable, job: int, choice: Choice | None) -> bool:
    """Whether ``choice`` trims running job index ``job`` (module docstring): not kept, same plan, same
    GPUs on the same nodes."""
    if choice is None or table.current_row[job] < 0:
        return False
    return _same_gpus(problem, table, job, choice) and not is_kept(problem, table, job, choice)


def change_penalty(problem: RubickRound, table: CoefficientTable, job: int, choice: Choice) -> float:
    """What running ``choice`` costs job index ``job`` in the round objective (module docstring): 0 for a
    queued or kept job, its trim penalty for a trim, else its reconfiguration penalty
    (:meth:`~optsched.rounds.rubick.problem.RubickRound.penalties`)."""
    if table.current_row[job] < 0 or is_kept(problem, table, job, choice):
        return 0.0
    pen = problem.penalties(table.jobs[job])
    return pen.trim if _same_gpus(problem, table, job, choice) else pen.reconfig


def placement_of(problem: RubickRound, table: CoefficientTable, job: int, choice: Choice) -> Placement:
    """The per-node shares of ``choice`` (module docstring; a kept job keeps its exact shares)."""
    if is_kept(problem, table, job, choice):
        cur = problem.current(table.jobs[job])
        assert cur is not None
        return cur.placement
    shares = {}
    for node, gpus in choice.parts:
        cpus, mem = part_share(table, choice.row, gpus)
        shares[node] = NodeShare(gpus, cpus, mem)
    return Placement.of(shares)


__all__ = ["Choice", "KEPT_MEM_TOL", "change_penalty", "check_round_table", "is_kept", "is_trim", "part_share",
           "placement_of"]

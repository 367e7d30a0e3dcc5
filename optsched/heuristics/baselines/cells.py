"""What the baselines of the Crius evaluation (Sec. 8.1: FCFS, Gandiva, Gavel, ElasticFlow; one file
each) share, over a Crius round's table (:mod:`optsched.rounds.crius.table`).

* **Cells they run.** A baseline chooses a GPU type and a GPU count for a job; the job then runs the
  Cell of that type and count with the best stage count (``best_stages`` rows): Sec. 8.1, "we enable
  Alpa's adaptive parallelism in the baselines' job training process".
* **What they know.** Sec. 8.1: "only allow them to schedule jobs with data profiled from data
  parallelism": where a baseline compares throughputs it uses the table's data-parallel-only
  throughput of (type, GPUs) (``dp_throughput``; 0 when data parallelism does not fit the memory).
* **The request.** A job asks for its ``N_G`` GPUs; when no type has a Cell of ``N_G`` GPUs it asks
  for the least GPU count of its rows above (a job is never left unschedulable by its request).
* **Order and types.** Queues are FCFS (``(submit_time, name)``); a heterogeneity-unaware baseline
  tries the GPU types in the cluster's order (``cluster.gpu_types``).
* **Running jobs** start holding their exact shares (:class:`~optsched.heuristics.crius_state.CellState`)
  and move only where a baseline's rule says so. The search depth, opportunistic execution and the
  deadline rules (a deadline job only on Cells meeting its deadline, Sec. 8.5) are Crius's; the
  baselines are not bound by them, and they schedule for throughput under either objective (their
  decisions are scored by the round's objective all the same, and pass
  :func:`~optsched.rounds.crius.feasibility.violations` with ``search_depth=False,
  deadline_rows=False, suspensions=False``).
"""

from __future__ import annotations

from typing import Iterator

from optsched.rounds.crius.admission import CriusAdmission
from optsched.rounds.crius.problem import CriusRound
from optsched.rounds.crius.table import CriusTable

#: the admission the baselines stand for: nobody protected, guaranteed or dropped
NO_ADMISSION = CriusAdmission()


def cells_by_spec(table: CriusTable, j: int) -> dict[tuple[str, int], int]:
    """(GPU type, GPUs) -> the row a baseline runs for job index ``j`` (module docstring)."""
    out: dict[tuple[str, int], int] = {}
    for r in table.rows_of(j):
        r = int(r)
        if table.best_stages[r]:
            out[(table.gpu_type[r], int(table.gpus[r]))] = r
    return out


def request_gpus(problem: CriusRound, table: CriusTable, j: int) -> int | None:
    """The GPUs job index ``j`` asks a baseline for (module docstring); None without any Cell."""
    gpus = sorted({g for _, g in cells_by_spec(table, j)})
    req = problem.jobs[j].requested_gpus
    return req if req in gpus else next((g for g in gpus if g > req), gpus[-1] if gpus else None)


def dp_value(table: CriusTable, j: int, gpu_type: str, gpus: int) -> float:
    """Job index ``j``'s data-parallel-only throughput on ``gpus`` GPUs of ``gpu_type`` (0 when it has no
    such Cell or data parallelism does not fit)."""
    r = cells_by_spec(table, j).get((gpu_type, gpus))
    return 0.0 if r is None else float(table.dp_throughput[r])


def type_order(problem: CriusRound) -> list[str]:
    """The cluster's GPU types in its order."""
    have = {n.gpu_type for n in problem.cluster.nodes if n.num_gpus > 0}
    return [t.name for t in problem.cluster.gpu_types if t.name in have]


def fcfs(problem: CriusRound, table: CriusTable, *, queued: bool = True) -> Iterator[int]:
    """Job indices in FCFS order: the queued ones (``queued``) or the running ones."""
    want = [j for j in range(len(problem.jobs)) if (table.current_row[j] < 0) == queued]
    yield from sorted(want, key=lambda j: (problem.jobs[j].submit_time, problem.jobs[j].name))


__all__ = ["NO_ADMISSION", "cells_by_spec", "dp_value", "fcfs", "request_gpus", "type_order"]

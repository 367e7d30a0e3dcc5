"""The ablations of Crius Sec. 8.6 ("Attributes of Crius's Benefits"): "We follow Sia [21] to define adaptivity
scaling as changing the allocated number of GPUs, and heterogeneity scaling as changing the allocated GPU type";
Crius-NA runs "without adaptivity scaling", Crius-NH with "heterogeneity scaling" disabled. Both are
Algorithm 1 (:func:`~optsched.heuristics.crius.algorithm1`) with every choice, ScaleResource's rescalings
included, narrowed to some of the job's candidate Cells:

* **Crius-NA** (:class:`CriusNA`): only Cells of the job's requested GPU count (the count the baselines run,
  :func:`~optsched.heuristics.baselines.cells.request_gpus`: ``N_G``, or the least count above it with a Cell);
  the GPU type is free.
* **Crius-NH** (:class:`CriusNH`): only Cells of the job's one GPU type: the type it runs on when running,
  else the type it was given when first seen (remembered over the rounds of a run): the first type in the
  cluster's order with a Cell of its requested GPU count, as a heterogeneity-unaware scheduler gives it. (Sec.
  8.1 draws each job's "GPU amount and GPU type" from the trace; our traces keep no type per job, so the type a
  heterogeneity-unaware request gets stands for it: our choice.) The GPU count is free.

A running job may always keep its Cell (a keep is no choice).
"""

from __future__ import annotations

import numpy as np

from optsched.core.deadline import Deadline
from optsched.heuristics.baselines.cells import cells_by_spec, request_gpus, type_order
from optsched.heuristics.crius import algorithm1
from optsched.rounds.crius.decision import Schedule
from optsched.rounds.crius.problem import CriusRound
from optsched.rounds.crius.table import CriusTable


class CriusNA:
    """Crius-NA (module docstring); called as ``scheduler(problem, table, deadline=...)``."""

    def __call__(self, problem: CriusRound, table: CriusTable, *, deadline: Deadline | None = None) -> Schedule:
        want: dict[int, int | None] = {}  # found when Algorithm 1 first asks for a job's rows

        def keep(j: int, rows: np.ndarray) -> np.ndarray:
            if j not in want:
                want[j] = request_gpus(problem, table, j)
            return rows[table.gpus[rows] == want[j]] if want[j] is not None else rows[:0]
        return algorithm1(problem, table, deadline=deadline, row_filter=keep)


class CriusNH:
    """Crius-NH over the rounds of one run (module docstring); called as ``scheduler(problem, table,
    deadline=...)``."""

    def __init__(self) -> None:
        self.home: dict[str, str] = {}

    def home_type(self, problem: CriusRound, table: CriusTable, j: int) -> str | None:
        """Job index ``j``'s one GPU type (module docstring)."""
        name = table.jobs[j]
        cur = int(table.current_row[j])
        if cur >= 0:
            self.home[name] = table.gpu_type[cur]
        elif name not in self.home:
            g = request_gpus(problem, table, j)
            cells = cells_by_spec(table, j)
            first = next((t for t in type_order(problem) if (t, g) in cells), None)
            if first is None:
                return None
            self.home[name] = first
        return self.home[name]

    def __call__(self, problem: CriusRound, table: CriusTable, *, deadline: Deadline | None = None) -> Schedule:
        types = np.array(table.gpu_type, dtype=object)
        for j in np.flatnonzero(np.asarray(table.current_row) >= 0):  # a running job's home: where it runs
            self.home[table.jobs[j]] = table.gpu_type[int(table.current_row[j])]
        home: dict[int, str | None] = {}  # a queued job's, found when Algorithm 1 first asks for its rows

        def keep(j: int, rows: np.ndarray) -> np.ndarray:
            if j not in home:
                home[j] = self.home_type(problem, table, j)
            return rows[types[rows] == home[j]] if home[j] is not None else rows[:0]
        return algorithm1(problem, table, deadline=deadline, row_filter=keep)


__all__ = ["CriusNA", "CriusNH"]

"""Sia-like GPU scaling through the DP size (Jayaram Subramanya et al., SOSP'23), a baseline of Rubick
Table 4 (with its footnote 2); shared rules in :mod:`optsched.heuristics.baselines.common`."""

from __future__ import annotations

import logging
from typing import Mapping, Sequence

import numpy as np

from optsched.core.deadline import Deadline
from optsched.heuristics.baselines.common import (BaselineState, best_step, grow_greedily, held_when_out_of_time,
                                                  out_of_time, rows_allowed, run_deadline_jobs)
from optsched.perf.coefficients import CoefficientTable
from optsched.rounds.rubick.admission import Admission
from optsched.rounds.rubick.choice import Choice, check_round_table
from optsched.rounds.rubick.problem import RubickRound

log = logging.getLogger(__name__)


def schedule_sia(problem: RubickRound, table: CoefficientTable, *,
                 ladders: Mapping[str, Sequence[int]] | None = None,
                 deadline: Deadline | None = None, admission: Admission | None = None) -> dict[str, Choice]:
    """Sia-like GPU scaling through the DP size (Jayaram Subramanya et al., SOSP'23; Rubick Sec. 7.3
    and footnote 2).

    ``ladders[job]`` are the rows Sia may give the job (default: all its rows):
    :func:`optsched.rounds.rubick.baseline_tables.sia_table` builds them as the job's plan with its DP
    size scaled over the candidate GPU counts, at GPU-proportional CPUs (Sia ignores CPUs), a 3D plan
    being replaced by the fastest DP-family plan that runs on the request, or kept on its requested
    GPUs only (no scaling) when none does.

    1. Running jobs keep their allocation; it is their minimum (Sia never shrinks them here).
    2. Queued jobs in FIFO order get their minimum, the ladder row with the fewest GPUs (one DP
       replica of the plan; the fastest such row across GPU types), when it fits; else they wait and
       later jobs are still tried.
    3. Goodput-style growth: repeatedly, among every placed job and every ladder row of its GPU type
       with more GPUs than it holds, the step with the largest gain of normalised throughput per
       extra GPU is taken (the row is placed anew, the job preferring its own nodes), as long as the
       gain is positive. A running job's first change is a restart, so its gain is counted net of
       ``problem.reconfig_penalty``.

    Dropped from real Sia: statistical efficiency and time-to-accuracy (the global batch is fixed in
    this simulator, so goodput is throughput), its heterogeneity-aware throughput estimates (a job
    stays on the GPU type it starts on) and its per-round ILP (replaced by this greedy, which never
    shrinks or preempts a running job). Ties go to fewer extra GPUs, then the job name; a step that
    does not fit when tried is not retried in the round. Past the ``deadline`` no more jobs are
    started or grown (:func:`~optsched.heuristics.baselines.common.out_of_time`). The admitted deadline
    jobs of ``admission`` come first, on the rungs of their ladders
    (:func:`~optsched.heuristics.baselines.common.run_deadline_jobs`; Sia protects nobody, so they may
    preempt any running job without an admitted deadline); growth only raises their throughput."""
    check_round_table(problem, table, "sia")
    held = held_when_out_of_time(problem, table, deadline)
    if held is not None:
        return held
    st = BaselineState(problem, table)
    st.hold_running()
    allowed: dict[int, np.ndarray] = {}

    def rows_of(j: int) -> np.ndarray:
        if j not in allowed:
            allowed[j] = rows_allowed(table, ladders, j, "sia")
        return allowed[j]

    if admission is not None:
        run_deadline_jobs(st, admission, rows_of, lambda v: True)

    for j in st.queued():
        if out_of_time(deadline):
            break
        rows = rows_of(j)
        starts: list[int] = []
        for gt in sorted({table.gpu_type[r] for r in rows}):
            mine = [int(r) for r in rows if table.gpu_type[r] == gt]
            fewest = min(int(table.gpus[r]) for r in mine)
            starts.append(max((r for r in mine if table.gpus[r] == fewest),
                              key=lambda r: (float(st.value[r]), -r)))
        if not st.place_any(j, starts):
            log.debug("sia: job %r does not get its minimum and waits", st.names[j])
    blocked: set[tuple[int, int]] = set()

    def step(j: int) -> tuple[float, int, int] | None:
        return best_step(st, j, rows_of(j), table.gpus, blocked, same_gpu_type=True)

    best = {j: step(j) for j in range(len(st.names)) if st.config(j) is not None}
    grow_greedily(st.names, best, step, st.move, blocked, deadline)
    return st.choices()


__all__ = ["schedule_sia"]

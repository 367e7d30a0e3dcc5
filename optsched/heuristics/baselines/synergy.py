"""Synergy-like CPU tuning with fixed GPUs and plan (Mohan et al., OSDI'22), a baseline of Rubick
Table 4; shared rules in :mod:`optsched.heuristics.baselines.common`."""

from __future__ import annotations

import logging
from typing import Mapping, Sequence

import numpy as np

from optsched.core.deadline import Deadline
from optsched.core.errors import ValidationError
from optsched.core.pool import gpu_pool
from optsched.heuristics.baselines.common import (BaselineState, best_step, grow_greedily, held_when_out_of_time,
                                                  out_of_time, rows_allowed, run_deadline_jobs)
from optsched.perf.coefficients import CoefficientTable
from optsched.rounds.rubick.admission import Admission
from optsched.rounds.rubick.choice import Choice, check_round_table
from optsched.rounds.rubick.problem import RubickRound

log = logging.getLogger(__name__)

#: Synergy-TUNE: a job that does not fit with its proportional CPUs may start with the fewest CPUs
#: reaching this share of its throughput at proportional CPUs
SYNERGY_TUNE_FRACTION = 0.9


def _synergy_groups(st: BaselineState, rows: np.ndarray, j: int) -> list[np.ndarray]:
    """Job ``j``'s CPU ladders: its rows grouped by (GPU type, plan, shape), each sorted by CPUs. A
    running job has one, the group of its current row; a queued job one per GPU type (more is a table
    Synergy cannot use: it keeps the requested plan and GPUs)."""
    t = st.table
    cur = int(t.current_row[j])
    key = lambda r: (t.gpu_type[r], t.plans[r], t.gpus_per_node[r])  # noqa: E731
    if cur >= 0:
        k = key(cur)
        rows = np.array(sorted({*(int(r) for r in rows if key(r) == k), cur}), dtype=np.int64)
        return [rows[np.lexsort((rows, t.cpus[rows]))]]
    groups: dict[tuple, list[int]] = {}
    for r in rows:
        groups.setdefault(key(int(r)), []).append(int(r))
    per_type: dict[str, int] = {}
    for k in groups:
        per_type[k[0]] = per_type.get(k[0], 0) + 1
    many = sorted(gt for gt, n in per_type.items() if n > 1)
    if many:
        raise ValidationError(
            f"synergy: queued job {st.names[j]!r} has several plans or placements on {', '.join(many)} GPUs; Synergy "
            "keeps the requested plan and GPUs and only tunes CPUs (build the table with synergy_table)")
    out = []
    for k in sorted(groups, key=lambda k: k[0]):
        g = np.array(groups[k], dtype=np.int64)
        out.append(g[np.lexsort((g, t.cpus[g]))])
    return out


def _proportional_row(st: BaselineState, group: np.ndarray) -> int:
    """The row of ``group`` with GPU-proportional CPUs, else the most CPUs below them, else the fewest."""
    t = st.table
    r0 = int(group[0])
    prop = gpu_pool(st.problem.cluster, t.gpu_type[r0]).proportional_cpus_per_gpu * int(t.gpus[r0])
    below = [int(r) for r in group if t.cpus[r] <= prop]
    return max(below, key=lambda r: (int(t.cpus[r]), -r)) if below else r0


def _tuned_row(st: BaselineState, group: np.ndarray, prop_row: int, fraction: float) -> int:
    """Synergy-TUNE: the fewest-CPU row of ``group`` within ``fraction`` of ``prop_row``'s throughput."""
    t = st.table
    ok = [int(r) for r in group if t.throughput[r] >= fraction * t.throughput[prop_row] - 1e-12]
    return min(ok, key=lambda r: (int(t.cpus[r]), -float(t.throughput[r]), r)) if ok else prop_row


def schedule_synergy(problem: RubickRound, table: CoefficientTable, *,
                     options: Mapping[str, Sequence[int]] | None = None,
                     tune_fraction: float = SYNERGY_TUNE_FRACTION, backfill: bool = True,
                     deadline: Deadline | None = None, admission: Admission | None = None) -> dict[str, Choice]:
    """Synergy-like CPU tuning with fixed GPUs and plan (Mohan et al., OSDI'22; Rubick Sec. 7.3).

    ``options[job]`` are the rows the job may use (default: all its rows): for a queued job its
    requested plan on the packed requested GPUs at several CPU counts, one such ladder per GPU type;
    for a running job its current plan on its current nodes at several CPU counts (the ladder of its
    current row). :func:`optsched.rounds.rubick.baseline_tables.synergy_table` builds both.

    1. Running jobs keep their allocation (GPUs, nodes, CPUs).
    2. Queued jobs in FIFO order start on their GPU-proportional CPU share
       (:attr:`~optsched.core.pool.GpuPool.proportional_cpus_per_gpu` x GPUs; Synergy's fallback demand).
       One that does not fit
       tries the fewest CPUs whose throughput is within ``tune_fraction`` (90%) of the proportional one
       (the simple Synergy-TUNE shrink); if that does not fit either it waits and, with ``backfill``
       (default, Synergy packs greedily in policy order), later jobs are still tried; without it the
       queue stops there.
    3. Leftover CPUs: repeatedly, among every placed job and every larger CPU count of its ladder that
       fits on its own nodes (same GPUs per node, more CPUs per node), the step with the largest gain
       of normalised throughput per extra CPU is taken, as long as the gain is positive. Changing a
       running job's CPUs on its GPUs is a *trim* (its limits are updated in place, no restart; issue
       16, item 5), so its gain is counted net of ``problem.trim_penalty``: a running job gets more
       CPUs only when that pays for the trim.

    Where the papers are silent: host memory is not tuned — a row's memory is what its plan needs (the
    table's memory rule), the same at every CPU count, since the performance model has no
    memory-sensitive term (only ZeRO-Offload's throughput depends on CPUs); a step that does not fit
    when tried is not retried in the round; ties go to fewer extra CPUs, then the job name. Past the
    ``deadline`` no more jobs are started or tuned (:func:`~optsched.heuristics.baselines.common.out_of_time`).
    The admitted deadline jobs of ``admission`` come first, on the CPU counts of their ladders meeting
    their need (:func:`~optsched.heuristics.baselines.common.run_deadline_jobs`; Synergy protects
    nobody, so they may preempt any running job without an admitted deadline); tuning only raises
    their throughput."""
    check_round_table(problem, table, "synergy")
    held = held_when_out_of_time(problem, table, deadline)
    if held is not None:
        return held
    if not 0.0 < tune_fraction <= 1.0:
        raise ValidationError(f"synergy: tune_fraction must lie in (0, 1], got {tune_fraction!r}")
    st = BaselineState(problem, table)
    st.hold_running()
    if admission is not None:
        run_deadline_jobs(st, admission, lambda j: rows_allowed(table, options, j, "synergy"), lambda v: True)
    ladders: dict[int, np.ndarray] = {}
    for j in range(len(st.names)):
        if st.is_running(j):
            ladders[j] = _synergy_groups(st, rows_allowed(table, options, j, "synergy"), j)[0]
        elif (cfg := st.config(j)) is not None:  # a queued deadline job placed first: the ladder of its row
            ladders[j] = next(g for g in _synergy_groups(st, rows_allowed(table, options, j, "synergy"), j)
                              if cfg.row in g)
    for j in st.queued():
        if out_of_time(deadline):
            break
        groups = _synergy_groups(st, rows_allowed(table, options, j, "synergy"), j)
        props = [(_proportional_row(st, g), g) for g in groups]
        props.sort(key=lambda pg: (-float(st.value[pg[0]]), table.gpu_type[pg[0]], pg[0]))
        placed = False
        for prop, g in props:
            if st.place(j, prop):
                placed = True
            else:
                tuned = _tuned_row(st, g, prop, tune_fraction)
                placed = tuned != prop and table.cpus[tuned] < table.cpus[prop] and st.place(j, tuned)
            if placed:
                ladders[j] = g
                break
        if not placed and not backfill:
            log.debug("synergy: job %r does not fit and blocks the queue", st.names[j])
            break
    # leftover CPUs by gain per extra CPU
    blocked: set[tuple[int, int]] = set()
    best: dict[int, tuple[float, int, int] | None] = {}

    def step(j: int) -> tuple[float, int, int] | None:
        return best_step(st, j, ladders[j], table.cpus, blocked, same_gpu_type=False, in_place=True)

    for j in ladders:
        if st.config(j) is not None:
            best[j] = step(j)
    grow_greedily(st.names, best, step, st.reshare, blocked, deadline)
    return st.choices()


__all__ = ["SYNERGY_TUNE_FRACTION", "schedule_synergy"]

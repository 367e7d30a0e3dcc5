"""FIFO: first-in first-out with requested resources, strict or with backfilling (the simplest
baseline of Rubick Sec. 7.3; shared rules in :mod:`optsched.heuristics.baselines.common`)."""

from __future__ import annotations

import logging


from optsched.core.deadline import Deadline
from optsched.heuristics.baselines.common import (BaselineState, check_request_rows, held_when_out_of_time,
                                                  out_of_time, run_deadline_jobs)
from optsched.perf.coefficients import CoefficientTable
from optsched.rounds.rubick.admission import Admission
from optsched.rounds.rubick.choice import Choice, check_round_table
from optsched.rounds.rubick.problem import RubickRound

log = logging.getLogger(__name__)


def schedule_fifo(problem: RubickRound, table: CoefficientTable, *, backfill: bool = False,
                  deadline: Deadline | None = None, admission: Admission | None = None) -> dict[str, Choice]:
    """First-in first-out: queued jobs by ``(submit_time, name)`` each get exactly their request (the
    requested plan — or the best plan of the request when none was given — on the packed placement of
    the requested GPUs with the requested CPUs); running jobs keep their allocation untouched.

    Strict FIFO (the default): the first queued job that does not fit blocks every job behind it,
    even ones that would fit (no starvation of large jobs, idle GPUs possible). ``backfill=True``
    skips it instead and tries the next jobs (EASY-style backfilling without reservations). A request
    fits only in its packed shape: FIFO never spreads it over more nodes than needed, which would
    change the throughput the request stands for.

    ``table`` is the request-only table (``build_round_table(problem, fixed_plan=True,
    fixed_resources=True)``, :func:`~optsched.rounds.rubick.baseline_tables.request_table`); a queued
    job with another row raises ``ValidationError``. Past the ``deadline`` no more jobs are started
    (:func:`~optsched.heuristics.baselines.common.out_of_time`). The admitted deadline jobs of
    ``admission`` come first (:func:`~optsched.heuristics.baselines.common.run_deadline_jobs`; FIFO
    protects nobody, so they may preempt any running job without an admitted deadline)."""
    check_round_table(problem, table, "fifo")
    check_request_rows(problem, table, "fifo")
    held = held_when_out_of_time(problem, table, deadline)
    if held is not None:
        return held
    st = BaselineState(problem, table)
    st.hold_running()
    if admission is not None:
        run_deadline_jobs(st, admission, table.rows_of, lambda v: True)
    for j in st.queued():
        if out_of_time(deadline):
            break
        if st.place_any(j, table.rows_of(j)):
            continue
        if not backfill:
            log.debug("fifo: job %r does not fit and blocks the queue", st.names[j])
            break
    return st.choices()


__all__ = ["schedule_fifo"]

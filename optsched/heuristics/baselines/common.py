"""What the baselines of the Rubick evaluation (Sec. 7.3, Table 4 and footnote 2) share: FIFO
(:mod:`.fifo`), Synergy-like (:mod:`.synergy`), Sia-like (:mod:`.sia`) and AntMan-like (:mod:`.antman`),
each plain Python over a round's coefficient table.

Like :mod:`optsched.heuristics.rubick` the baselines never call the performance model: every
throughput, GPU, CPU and memory figure comes from the table (DESIGN.md). Which rows a baseline may use
is the table builder's business (:mod:`optsched.rounds.rubick.baseline_tables`): the request only for
FIFO and AntMan, the requested plan and GPUs at several CPU counts for Synergy, the DP-scaling ladder
for Sia. Each ``schedule_<name>(problem, table, ...)`` returns job name ->
:class:`~optsched.rounds.rubick.choice.Choice` for the jobs that run; every result passes
:func:`~optsched.rounds.rubick.feasibility.violations` with the admission the baseline stands for
(:data:`~optsched.rounds.rubick.admission.NO_GUARANTEES`, or AntMan's own).

Shared rules (the papers are silent on them):

* **Running jobs.** A simulator calls a policy at every arrival, completion and tick and charges a
  reconfiguration (78 s) when a running job's allocation changes and a restart after a preemption, so
  every baseline starts from every running job holding its exact current shares and moves a running
  job only where its rule says so (Synergy: more CPUs on the same GPUs, a *trim* done in place, worth
  more than ``problem.trim_penalty``; Sia: more GPUs, worth more than ``problem.reconfig_penalty``;
  AntMan: preempting a best-effort job for a guaranteed one). FIFO never touches a running job.
* **Queue order** is FIFO: ``(submit_time, name)``.
* **Placement** is the round state's row mapping
  (:meth:`~optsched.heuristics.round_state.RoundState.map_row`): a row's shape goes onto distinct
  nodes of its GPU type, largest part first, each part on the feasible node with the fewest free GPUs
  (best fit; ties by node name), a running job preferring its own nodes. The request's shape is the
  packed placement (whole nodes, then one node with the rest), i.e. as few nodes as possible.
* **Several GPU types.** A job with rows on several types tries them in descending (normalised)
  throughput of the row it would start with, then type name.
* **Guarantees and quotas.** Only AntMan has tenants and guarantees; FIFO, Synergy and Sia schedule
  guaranteed jobs like any other and ignore quotas (the Rubick base/BP traces have none), so their
  decisions protect nobody.
* **Scores** are normalised throughputs (throughput / reference throughput of the job's request), the
  unit of the round objective, with the reconfiguration and trim penalties in the same unit.
* **Deadlines** (:mod:`optsched.rounds.rubick.deadlines`). Every baseline starts, right after the
  running jobs hold their allocations, with :func:`run_deadline_jobs`: the admitted deadline jobs,
  earliest deadline first (running ones first), each on a row meeting the throughput its deadline
  needs, before the baseline's own rule. A job that does not fit preempts running jobs the baseline
  may preempt for it (latest submitted first; the ones it turns out not to need are restored, earliest
  submitted first, as AntMan does for guaranteed jobs). The baseline then runs on the rest (its queue
  skips jobs placed already) and never lowers a placed job's throughput (growth steps only gain). An
  admitted job left below its need is demoted by the policy
  (:func:`~optsched.rounds.rubick.deadlines.settle`).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np

from optsched.core.deadline import Deadline
from optsched.core.errors import ValidationError
from optsched.core.job import Job
from optsched.heuristics.round_state import EPS, Config, RoundState, held_running
from optsched.perf.coefficients import CoefficientTable
from optsched.rounds.rubick.admission import NO_GUARANTEES, Admission
from optsched.rounds.rubick.choice import Choice, part_share
from optsched.rounds.rubick.deadlines import floor_ok
from optsched.rounds.rubick.problem import RubickRound


def fifo_key(job: Job) -> tuple[float, str]:
    """Queue order of every baseline: submission time, then name."""
    return job.submit_time, job.name


def rows_allowed(table: CoefficientTable, options: Mapping[str, Sequence[int]] | None, j: int, who: str) -> np.ndarray:
    """Rows job index ``j`` may use: ``options[name]`` (checked to be its rows) or all its rows."""
    name = table.jobs[j]
    own = table.rows_of(j)
    if options is None or name not in options:
        return own
    rows = np.asarray(sorted({int(r) for r in options[name]}), dtype=np.int64)
    bad = [int(r) for r in rows if not (0 <= r < len(table)) or table.job_index[r] != j]
    if bad:
        raise ValidationError(f"{who}: options of job {name!r} name row(s) {bad} that are not its rows")
    return rows


class BaselineState(RoundState):
    """The round state of a baseline (no guarantees: :data:`NO_GUARANTEES`) with the moves the
    baselines make: start a job on a row, move it to another row, change its CPUs and memory in place."""

    def __init__(self, problem: RubickRound, table: CoefficientTable) -> None:
        super().__init__(problem, table, NO_GUARANTEES)
        self.jobs = {j.name: j for j in problem.jobs}
        self._candidates: dict[int, np.ndarray] = {}
        self._pos: list[dict[int, int] | None] = [None] * len(self.names)

    def is_running(self, j: int) -> bool:
        return bool(self.running[j])

    def row_of(self, j: int) -> int | None:
        c = self.config(j)
        return None if c is None else c.row

    def value_if_changed(self, j: int, row: int, in_place: bool = False) -> float:
        """Job ``j``'s objective term when it moves to ``row`` (not its kept configuration): with
        ``in_place`` on its nodes and GPUs per node (:meth:`reshare`; a trim for a running job on its
        current nodes with its current plan), else anywhere (a reconfiguration for a running job). The
        topology cost of a preferred rule is that of the job's nodes now (exact in place; a move maps
        onto as few domains as it can, so it is an estimate there)."""
        cfg = self.config(j)
        topo = 0.0 if cfg is None else self.topology_cost(j, cfg)
        if not self.is_running(j):
            return float(self.value[row]) - topo
        trim = in_place and self.same_plan(j, row) and self.current_parts[j] is not None
        return float(self.value[row]) - (self.trim_penalty[j] if trim else self.reconfig_penalty[j]) - topo

    # -- placement -------------------------------------------------------------------------------
    def _index(self, j: int, row: int) -> int:
        pos = self._pos[j]
        if pos is None:
            pos = {int(r): i for i, r in enumerate(self.rows[j].rows)}
            self._pos[j] = pos
        return pos[row]

    def map(self, j: int, row: int) -> Config | None:
        """``row`` mapped onto the free resources (best fit, own nodes first; a job with a topology rule
        in one domain when it can, and must under a required rule); None: it does not fit."""
        cand = self._candidates.get(j)
        if cand is None:
            cand = self._candidates[j] = np.flatnonzero(self.eligible[j])
        return self.map_row_in_domains(j, self._index(j, row), cand,
                                       (self.free_gpus, self.free_cpus, self.free_mem), None)

    def place(self, j: int, row: int) -> bool:
        """Start unplaced job ``j`` on ``row`` when it fits."""
        assert self.config(j) is None
        cfg = self.map(j, row)
        if cfg is None:
            return False
        self.set(j, cfg)
        return True

    def move(self, j: int, row: int) -> bool:
        """Move placed job ``j`` to ``row`` (its own resources count as free); unchanged when it does not fit."""
        old = self.config(j)
        self.set(j, None)
        cfg = self.map(j, row)
        self.set(j, cfg if cfg is not None else old)
        return cfg is not None

    def reshare(self, j: int, row: int) -> bool:
        """Put placed job ``j`` on ``row`` keeping its nodes and GPUs per node (``row`` must have its
        shape); its new CPUs and memory per node are ``part_share`` of ``row``. Unchanged when they do
        not fit."""
        old = self.config(j)
        assert old is not None
        kept, trim = self.on_current(j, row, old.shares)
        if kept:
            new = self.current[j]
            assert new is not None
        else:
            shares = []
            for n, g, _, _ in old.shares:
                cpus, mem = part_share(self.table, row, g)
                shares.append((n, g, cpus, mem))
            new = Config(row, tuple(shares), False, trim)
        self.set(j, None)
        ok = self.fits(new)
        self.set(j, new if ok else old)
        return ok

    # -- helpers ------------------------------------------------------------------------------------
    def queued(self) -> list[int]:
        """Indices of the queued jobs not placed yet (:func:`run_deadline_jobs` places some first) in FIFO order."""
        idx = [j for j in range(len(self.names)) if not self.is_running(j) and self.config(j) is None]
        return sorted(idx, key=lambda j: fifo_key(self.jobs[self.names[j]]))

    def by_preference(self, rows: Sequence[int]) -> list[int]:
        """Rows in descending normalised throughput, then GPU type name, then row index."""
        return sorted((int(r) for r in rows), key=lambda r: (-float(self.value[r]), self.table.gpu_type[r], r))

    def place_any(self, j: int, rows: Sequence[int]) -> bool:
        """Start job ``j`` on the first of ``rows`` (in :meth:`by_preference` order) that fits."""
        return any(self.place(j, r) for r in self.by_preference(rows))


def preempt_until(st: BaselineState, j: int, rows: Sequence[int], place: Callable[[], bool],
                  may_preempt: Callable[[int], bool]) -> list[str] | None:
    """Preempt running jobs ``may_preempt`` allows on nodes of ``rows``' GPU types, latest submitted first,
    until ``place()`` puts job ``j`` somewhere; then restore the victims it does not need, earliest
    submitted first. Returns the preempted jobs' names (``j`` placed), or None (nothing changed, ``j``
    unplaced)."""
    types = {st.table.gpu_type[r] for r in rows}
    node_types = {n.name: n.gpu_type for n in st.problem.cluster.nodes}
    victims = [v for v in range(len(st.names))
               if v != j and st.is_running(v) and (cfg := st.config(v)) is not None and may_preempt(v)
               and any(node_types[st.node_names[n]] in types for n, *_ in cfg.shares)]
    victims.sort(key=lambda v: (-st.jobs[st.names[v]].submit_time, st.names[v]))
    freed: list[tuple[int, Config]] = []
    placed = False
    for v in victims:
        old = st.config(v)
        assert old is not None
        st.set(v, None)
        freed.append((v, old))
        if place():
            placed = True
            break
    if not placed:
        for v, old in reversed(freed):
            st.set(v, old)
        return None
    for v, old in reversed(freed):  # earliest-started victims first
        if st.fits(old):
            st.set(v, old)
    return [st.names[v] for v, _ in freed if st.config(v) is None]


def run_deadline_jobs(st: BaselineState, admission: Admission, rows_of: Callable[[int], Sequence[int]],
                      may_preempt: Callable[[int], bool]) -> list[str]:
    """The admitted deadline jobs of ``admission``, in admission order (module docstring, "Deadlines"): a
    running one keeps its configuration when it meets its need, else it and every queued one get the
    cheapest row of ``rows_of(j)`` meeting it (fewest GPUs, then CPUs, then memory, fastest, row) that
    fits, preempting what ``may_preempt`` allows when none does (:func:`preempt_until`). A job that
    cannot be placed keeps what it held (a queued job: nothing). Returns the preempted jobs' names."""
    deadlines = admission.deadlines
    if deadlines is None or not deadlines.admitted:
        return []
    table = st.table
    meets = floor_ok(table, admission)  # per row of the table
    preempted: list[str] = []
    for name in deadlines.admitted:
        j = table.index_of(name)
        old = st.config(j)
        if old is not None and bool(meets[old.row]):
            continue
        rows = np.asarray(list(rows_of(j)), dtype=np.int64)
        rows = rows[meets[rows]]
        order = sorted(rows.tolist(), key=lambda r: (int(table.gpus[r]), int(table.cpus[r]), float(table.mem_gib[r]),
                                                     -float(table.throughput[r]), r))
        st.set(j, None)

        def place(j: int = j, order: list[int] = order) -> bool:
            return any(st.place(j, r) for r in order)

        if place():
            continue
        victims = preempt_until(st, j, order, place, lambda v: may_preempt(v) and st.names[v] not in deadlines.admitted)
        if victims is None:
            st.set(j, old)
            continue
        preempted.extend(victims)
    return preempted


def check_request_rows(problem: RubickRound, table: CoefficientTable, who: str) -> None:
    """FIFO and AntMan run the request only: every row of a queued job must be its request, or its
    stand-in request, one per GPU type (a table restricted to allowed configurations,
    :mod:`optsched.rounds.rubick.table`)."""
    for j, job in enumerate(problem.jobs):
        if table.current_row[j] >= 0:
            continue
        rows = table.rows_of(j)
        if len({table.gpu_type[r] for r in rows}) == len(rows):
            continue
        for r in rows:
            if table.gpus[r] != job.requested_gpus or (job.requested_plan is not None
                                                       and table.plans[r] != job.requested_plan):
                raise ValidationError(
                    f"{who}: queued job {job.name!r} has row {int(r)} ({table.plans[r].label} on "
                    f"{table.gpus_per_node[r]}) that is not its request of {job.requested_gpus} GPUs; build the "
                    "table with build_round_table(..., fixed_plan=True, fixed_resources=True)")


def best_step(st: BaselineState, j: int, rows: Sequence[int], amount: np.ndarray, blocked: set[tuple[int, int]], *,
              same_gpu_type: bool, in_place: bool = False) -> tuple[float, int, int] | None:
    """Job ``j``'s best growth step among ``rows``: ``(gain per extra unit, -extra units, row)`` of
    the row with the largest normalised-throughput gain per extra unit of ``amount`` (CPUs for
    Synergy, GPUs for Sia) over its current configuration, skipping ``blocked`` steps (and, with
    ``same_gpu_type``, rows on another GPU type); None when no row gains. ``in_place``: the step keeps
    the job's nodes and GPUs per node (Synergy's :meth:`BaselineState.reshare`), so a running job pays
    the trim penalty, not the reconfiguration penalty (:meth:`BaselineState.value_if_changed`)."""
    table = st.table
    cfg = st.config(j)
    assert cfg is not None
    gt, have, now = table.gpu_type[cfg.row], int(amount[cfg.row]), st.contrib(j, cfg)
    out: tuple[float, int, int] | None = None
    for r in rows:
        r = int(r)
        extra = int(amount[r]) - have
        if extra <= 0 or (same_gpu_type and table.gpu_type[r] != gt) or (j, r) in blocked:
            continue
        gain = st.value_if_changed(j, r, in_place) - now
        if gain <= EPS:
            continue
        cand = (gain / extra, -extra, r)
        if out is None or cand > out:
            out = cand
    return out


def out_of_time(deadline: Deadline | None) -> bool:
    """Whether a baseline must stop: its ``deadline`` has passed. A baseline that stops leaves the jobs
    it has not reached as they are (running jobs keep their allocation, queued ones wait); its policy
    marks the decision ``partial``."""
    return deadline is not None and deadline.expired()


def held_when_out_of_time(problem: RubickRound, table: CoefficientTable, deadline: Deadline | None
                          ) -> dict[str, Choice] | None:
    """The choices of a baseline whose ``deadline`` has passed before it starts (None while there is time): every
    running job keeps its allocation (:meth:`BaselineState.hold_running`, without building the state:
    :func:`~optsched.heuristics.round_state.held_running`, O(running jobs); issue 26, item 2) and nothing starts,
    not even an admitted deadline job (:func:`out_of_time`: the jobs not reached wait)."""
    if not out_of_time(deadline):
        return None
    return held_running(problem, table, NO_GUARANTEES)


def grow_greedily(names: Sequence[str], best: dict[int, Any], step: Callable[[int], Any],
                  apply: Callable[[int, Any], bool], blocked: set[tuple[int, Any]],
                  deadline: Deadline | None = None) -> None:
    """The marginal-gain loop Synergy's CPU tuning and Sia's GPU growth share: repeatedly apply the
    best step of any job (``best[j] = (gain per unit, -extra units, target row)`` from ``step(j)``:
    largest gain per unit, then fewest extra units, then job name), remember steps that do not fit in
    ``blocked`` and ask the job for its next step, until no job has one (or the ``deadline`` passes)."""
    while not out_of_time(deadline):
        live = [(b, names[j], j) for j, b in best.items() if b is not None]
        if not live:
            return
        b, _, j = min(live, key=lambda x: (-x[0][0], -x[0][1], x[1]))
        if not apply(j, b[2]):
            blocked.add((j, b[2]))
        best[j] = step(j)


__all__ = ["BaselineState", "best_step", "check_request_rows", "fifo_key", "grow_greedily", "held_when_out_of_time",
           "out_of_time", "preempt_until", "rows_allowed", "run_deadline_jobs"]

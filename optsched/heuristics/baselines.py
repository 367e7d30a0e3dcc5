"""Baseline round policies of the Rubick evaluation (Sec. 7.3, Table 4 and footnote 2), as plain Python
over a round's coefficient table: FIFO, Synergy-like, Sia-like and AntMan-like.

Like :mod:`optsched.heuristics.rubick` this module never calls the performance model: every
throughput, GPU, CPU and memory figure comes from the table (DESIGN.md). Which rows a baseline may use
is the table builder's business (:mod:`optsched.scheduling.baseline_policies`): the request only for
FIFO and AntMan, the requested plan and GPUs at several CPU counts for Synergy, the DP-scaling ladder
for Sia. Each ``schedule_<name>(problem, table, ...)`` returns job name -> ``(row, ((node, gpus),
...))`` (:data:`~optsched.scheduling.rubick_eval.Choice`) for the jobs that run; every result passes
:func:`~optsched.scheduling.rubick_eval.violations` with the admission the baseline stands for
(:data:`NO_GUARANTEES`, or :attr:`AntManResult.admission`).

Shared rules (the papers are silent on them):

* **Running jobs.** A simulator calls a policy at every arrival, completion and tick and charges a
  reconfiguration (78 s) when a running job's allocation changes and a restart after a preemption, so
  every baseline starts from every running job holding its exact current shares and moves a running
  job only where its rule says so (Synergy: more CPUs on the same GPUs, worth more than
  ``problem.reconfig_penalty``; Sia: more GPUs, likewise; AntMan: preempting a best-effort job for a
  guaranteed one). FIFO never touches a running job.
* **Queue order** is FIFO: ``(submit_time, name)``.
* **Placement** reuses Algorithm 1's ``map_row`` (:class:`optsched.heuristics.rubick._Engine`): a row's
  shape goes onto distinct nodes of its GPU type, largest part first, each part on the feasible node
  with the fewest free GPUs (best fit; ties by node name), a running job preferring its own nodes.
  The request's shape is the packed placement (whole nodes, then one node with the rest), i.e. as few
  nodes as possible.
* **Several GPU types.** A job with rows on several types tries them in descending (normalised)
  throughput of the row it would start with, then type name.
* **Guarantees and quotas.** Only AntMan has tenants and guarantees; FIFO, Synergy and Sia schedule
  guaranteed jobs like any other and ignore quotas (the Rubick base/BP traces have none), so their
  decisions protect nobody (:data:`NO_GUARANTEES`).
* **Scores** are normalised throughputs (throughput / reference throughput of the job's request), the
  unit of the round objective, with the reconfiguration penalty in the same unit.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from optsched.core.errors import ValidationError
from optsched.core.job import Job
from optsched.core.round import RoundProblem
from optsched.heuristics.rubick import _Config, _Engine
from optsched.perf.coefficients import CoefficientTable
from optsched.scheduling.rubick_eval import Admission, Choice, is_kept, part_share, reaches_guarantee

log = logging.getLogger(__name__)

#: tolerance of gain comparisons (normalised-throughput units)
EPS = 1e-9
#: Synergy-TUNE: a job that does not fit with its proportional CPUs may start with the fewest CPUs
#: reaching this share of its throughput at proportional CPUs
SYNERGY_TUNE_FRACTION = 0.9
#: the admission of the baselines without guarantees: nobody is protected, nobody waits for quota
NO_GUARANTEES = Admission({}, {})


def proportional_cpus_per_gpu(problem: RoundProblem, gpu_type: str) -> int:
    """GPU-proportional CPU share of ``gpu_type`` (Synergy's "proportional" allocation): the CPUs per
    GPU of the poorest node of that type, rounded down, at least 1 (96 / 8 = 12 on the A800 nodes)."""
    nodes = [n for n in problem.cluster.nodes_of_type(gpu_type) if n.num_gpus > 0]
    if not nodes:
        raise ValidationError(f"cluster {problem.cluster.name!r} has no node with {gpu_type} GPUs")
    return max(1, min(n.num_cpus // n.num_gpus for n in nodes))


def _check_table(problem: RoundProblem, table: CoefficientTable, who: str) -> None:
    if table.jobs != tuple(j.name for j in problem.jobs):
        raise ValidationError(f"{who}: the coefficient table's jobs must be the round's jobs, in the round's order")
    if table.reference_throughput is None or table.current_row is None:
        raise ValidationError(f"{who}: a round table needs reference_throughput and current_row "
                              "(build it with optsched.scheduling.rubick_table.build_round_table)")


def _fifo_key(job: Job) -> tuple[float, str]:
    return job.submit_time, job.name


def _options(table: CoefficientTable, options: Mapping[str, Sequence[int]] | None, j: int, who: str) -> np.ndarray:
    """Rows job index ``j`` may use: ``options[name]`` (checked to be its rows) or all its rows."""
    name = table.jobs[j]
    own = np.flatnonzero(table.job_index == j)
    if options is None or name not in options:
        return own
    rows = np.asarray(sorted({int(r) for r in options[name]}), dtype=np.int64)
    bad = [int(r) for r in rows if not (0 <= r < len(table)) or table.job_index[r] != j]
    if bad:
        raise ValidationError(f"{who}: options of job {name!r} name row(s) {bad} that are not its rows")
    return rows


class _State:
    """Free resources and each job's configuration, on Algorithm 1's engine (placement helpers)."""

    def __init__(self, problem: RoundProblem, table: CoefficientTable) -> None:
        self.p, self.t = problem, table
        self.eng = _Engine(problem, table, NO_GUARANTEES)
        self.norm = self.eng.norm
        self.names = table.jobs
        self.jobs = {j.name: j for j in problem.jobs}
        self.cand = [np.flatnonzero(self.eng.elig[j]) for j in range(len(self.names))]
        self._pos: list[dict[int, int] | None] = [None] * len(self.names)

    # -- state ----------------------------------------------------------------------------------
    def hold_running(self) -> None:
        """Every running job holds its exact current shares."""
        for j, cur in enumerate(self.eng.cur_cfg):
            if cur is not None:
                self.eng.set(j, cur)

    def running(self, j: int) -> bool:
        return bool(self.eng.running[j])

    def cfg(self, j: int) -> _Config | None:
        return self.eng.cfg[j]

    def row(self, j: int) -> int | None:
        c = self.eng.cfg[j]
        return None if c is None else c.row

    def set(self, j: int, cfg: _Config | None) -> None:
        self.eng.set(j, cfg)

    def fits(self, cfg: _Config) -> bool:
        return self.eng.fits(cfg, self.eng.fg, self.eng.fc, self.eng.fm)

    def contrib(self, j: int, cfg: _Config | None) -> float:
        """Job ``j``'s term of the round objective (normalised throughput minus penalties)."""
        return self.eng.contrib(j, cfg)

    def value_if_changed(self, j: int, row: int) -> float:
        """Job ``j``'s objective term when it moves to ``row`` (not its kept configuration)."""
        return float(self.norm[row]) - (self.eng.pen_reconf if self.running(j) else 0.0)

    # -- placement -------------------------------------------------------------------------------
    def _index(self, j: int, row: int) -> int:
        pos = self._pos[j]
        if pos is None:
            pos = {int(r): i for i, r in enumerate(self.eng.R[j].rows)}
            self._pos[j] = pos
        return pos[row]

    def map(self, j: int, row: int) -> _Config | None:
        """``row`` mapped onto the free resources (best fit, own nodes first); None: it does not fit."""
        return self.eng.map_row(j, self._index(j, row), self.cand[j], (self.eng.fg, self.eng.fc, self.eng.fm), None)

    def place(self, j: int, row: int) -> bool:
        """Start unplaced job ``j`` on ``row`` when it fits."""
        assert self.eng.cfg[j] is None
        cfg = self.map(j, row)
        if cfg is None:
            return False
        self.eng.set(j, cfg)
        return True

    def move(self, j: int, row: int) -> bool:
        """Move placed job ``j`` to ``row`` (its own resources count as free); unchanged when it does not fit."""
        old = self.eng.cfg[j]
        self.eng.set(j, None)
        cfg = self.map(j, row)
        self.eng.set(j, cfg if cfg is not None else old)
        return cfg is not None

    def reshare(self, j: int, row: int) -> bool:
        """Put placed job ``j`` on ``row`` keeping its nodes and GPUs per node (``row`` must have its
        shape); its new CPUs and memory per node are ``part_share`` of ``row``. Unchanged when they do
        not fit."""
        old = self.eng.cfg[j]
        assert old is not None
        parts = tuple(sorted((self.eng.node_names[n], g) for n, g, _, _ in old.shares if g > 0))
        kept = self.eng.cur_parts[j] is not None and is_kept(self.p, self.t, j, (row, parts))
        if kept:
            new = self.eng.cur_cfg[j]
            assert new is not None
        else:
            shares = []
            for n, g, _, _ in old.shares:
                cpus, mem = part_share(self.t, row, g)
                shares.append((n, g, cpus, mem))
            new = _Config(row, tuple(shares), False)
        self.eng.set(j, None)
        ok = self.fits(new)
        self.eng.set(j, new if ok else old)
        return ok

    def choices(self) -> dict[str, Choice]:
        out: dict[str, Choice] = {}
        for j, cfg in enumerate(self.eng.cfg):
            if cfg is not None:
                ordered = sorted(cfg.shares, key=lambda s: (-s[1], s[0]))
                parts = tuple((self.eng.node_names[n], g) for n, g, _, _ in ordered if g > 0)
                out[self.names[j]] = (cfg.row, parts)
        return out

    # -- helpers ------------------------------------------------------------------------------------
    def queued(self) -> list[int]:
        """Indices of the queued jobs in FIFO order."""
        idx = [j for j in range(len(self.names)) if not self.running(j)]
        return sorted(idx, key=lambda j: _fifo_key(self.jobs[self.names[j]]))

    def by_preference(self, rows: Sequence[int]) -> list[int]:
        """Rows in descending normalised throughput, then GPU type name, then row index."""
        return sorted((int(r) for r in rows), key=lambda r: (-float(self.norm[r]), self.t.gpu_type[r], r))

    def place_any(self, j: int, rows: Sequence[int]) -> bool:
        """Start job ``j`` on the first of ``rows`` (in :meth:`by_preference` order) that fits."""
        return any(self.place(j, r) for r in self.by_preference(rows))


# ---------------------------------------------------------------------------------------------------
def _check_request_rows(problem: RoundProblem, table: CoefficientTable, who: str) -> None:
    """FIFO and AntMan run the request only: every row of a queued job must be its request."""
    for j, job in enumerate(problem.jobs):
        if table.current_row[j] >= 0:
            continue
        for r in np.flatnonzero(table.job_index == j):
            if table.gpus[r] != job.requested_gpus or (job.requested_plan is not None
                                                       and table.plans[r] != job.requested_plan):
                raise ValidationError(
                    f"{who}: queued job {job.name!r} has row {int(r)} ({table.plans[r].label} on "
                    f"{table.gpus_per_node[r]}) that is not its request of {job.requested_gpus} GPUs; build the "
                    "table with build_round_table(..., fixed_plan=True, fixed_resources=True)")


def schedule_fifo(problem: RoundProblem, table: CoefficientTable, *, backfill: bool = False) -> dict[str, Choice]:
    """First-in first-out: queued jobs by ``(submit_time, name)`` each get exactly their request (the
    requested plan — or the best plan of the request when none was given — on the packed placement of
    the requested GPUs with the requested CPUs); running jobs keep their allocation untouched.

    Strict FIFO (the default): the first queued job that does not fit blocks every job behind it,
    even ones that would fit (no starvation of large jobs, idle GPUs possible). ``backfill=True``
    skips it instead and tries the next jobs (EASY-style backfilling without reservations). A request
    fits only in its packed shape: FIFO never spreads it over more nodes than needed, which would
    change the throughput the request stands for.

    ``table`` is the request-only table (``build_round_table(problem, fixed_plan=True,
    fixed_resources=True)``); a queued job with another row raises ``ValidationError``."""
    _check_table(problem, table, "fifo")
    _check_request_rows(problem, table, "fifo")
    st = _State(problem, table)
    st.hold_running()
    for j in st.queued():
        if st.place_any(j, np.flatnonzero(table.job_index == j)):
            continue
        if not backfill:
            log.debug("fifo: job %r does not fit and blocks the queue", st.names[j])
            break
    return st.choices()


# ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class AntManResult:
    """An AntMan round: the ``choices``, the ``admission`` it stands for (protected = the guaranteed
    jobs it runs — started within quota, or running already and never preempted — whose row reaches
    the throughput of their request; waiting = queued guaranteed jobs over their tenant's quota, with
    the reason) and the best-effort jobs ``preempted`` for guaranteed ones."""

    choices: Mapping[str, Choice]
    admission: Admission
    preempted: tuple[str, ...] = field(default=())


def antman_round(problem: RoundProblem, table: CoefficientTable) -> AntManResult:
    """AntMan-like multi-tenant scheduling (Xiao et al., OSDI'20; Rubick Sec. 7.3, MT trace).

    1. Running jobs keep their allocation; running guaranteed jobs are never preempted and count
       against their tenant's quota with their requested GPUs (even when that exceeds the quota, e.g.
       after a quota cut: they keep running, the tenant admits nothing new).
    2. Queued guaranteed jobs, by ``(submit_time, name)``: a job whose requested GPUs exceed its
       tenant's remaining quota (``problem.quota_of``; no quotas in the round = unlimited) waits. Else
       it gets exactly its request when it fits; when it does not, running best-effort jobs on nodes
       of its GPU type are preempted, latest-started first, until it fits; then the victims it turned
       out not to need are restored, earliest-started first ("fewest needed"). If it does not fit even
       with every such best-effort job gone, nothing is preempted and it waits, and later guaranteed
       jobs are still tried. Quota is consumed only by jobs that run.
    3. Queued best-effort jobs take what is left, exactly their request, by ``(submit_time, name)``
       with backfilling (a job that does not fit is skipped). They never preempt anyone.

    Where the papers are silent: jobs carry no start time, so "latest-started" is the latest
    ``submit_time`` (then name), which is the start order under FIFO; AntMan's GPU-sharing of
    opportunistic jobs (co-located on the same GPU) is not modelled: a GPU holds one job.

    ``table`` is the request-only table (``build_round_table(problem, fixed_plan=True,
    fixed_resources=True)``)."""
    _check_table(problem, table, "antman")
    _check_request_rows(problem, table, "antman")
    st = _State(problem, table)
    st.hold_running()
    used: dict[str, int] = {}
    protected: dict[str, int] = {}
    waiting: dict[str, str] = {}
    running_g = sorted((j for j in range(len(st.names)) if st.running(j) and st.jobs[st.names[j]].guaranteed),
                       key=lambda j: _fifo_key(st.jobs[st.names[j]]))
    for j in running_g:
        job = st.jobs[st.names[j]]
        used[job.tenant] = used.get(job.tenant, 0) + job.requested_gpus
        row = st.row(j)
        if row is not None and bool(reaches_guarantee(table, row)[0]):
            protected[job.name] = job.requested_gpus
    queued = st.queued()
    preempted: list[str] = []
    for j in (j for j in queued if st.jobs[st.names[j]].guaranteed):
        job = st.jobs[st.names[j]]
        quota = problem.quota_of(job.tenant)
        have = used.get(job.tenant, 0)
        if quota is not None and have + job.requested_gpus > quota:
            waiting[job.name] = (f"tenant {job.tenant!r} quota {quota} GPUs: {have} in use, job requests "
                                 f"{job.requested_gpus}")
            continue
        rows = np.flatnonzero(table.job_index == j)
        if not st.place_any(j, rows):
            victims = _preempt_for(st, j, rows)
            if victims is None:
                log.debug("antman: guaranteed job %r does not fit even without best-effort jobs", job.name)
                continue
            preempted.extend(victims)
        used[job.tenant] = have + job.requested_gpus
        row = st.row(j)
        assert row is not None
        if bool(reaches_guarantee(table, row)[0]):
            protected[job.name] = job.requested_gpus
    for j in (j for j in queued if not st.jobs[st.names[j]].guaranteed):
        st.place_any(j, np.flatnonzero(table.job_index == j))
    return AntManResult(st.choices(), Admission(protected, waiting), tuple(preempted))


def _preempt_for(st: _State, j: int, rows: np.ndarray) -> list[str] | None:
    """Preempt running best-effort jobs, latest-started first, until guaranteed job ``j`` fits on one
    of ``rows``; restore the victims it does not need, earliest-started first. Returns the names of
    the preempted jobs (``j`` placed), or None (nothing changed, ``j`` unplaced)."""
    types = {st.t.gpu_type[r] for r in rows}
    node_types = {n.name: n.gpu_type for n in st.p.cluster.nodes}
    victims = [v for v in range(len(st.names))
               if st.running(v) and not st.jobs[st.names[v]].guaranteed and st.cfg(v) is not None
               and any(node_types[st.eng.node_names[n]] in types for n, *_ in st.cfg(v).shares)]
    victims.sort(key=lambda v: (-st.jobs[st.names[v]].submit_time, st.names[v]))
    freed: list[tuple[int, _Config]] = []
    placed = False
    for v in victims:
        old = st.cfg(v)
        assert old is not None
        st.set(v, None)
        freed.append((v, old))
        if st.place_any(j, rows):
            placed = True
            break
    if not placed:
        for v, old in reversed(freed):
            st.set(v, old)
        return None
    for v, old in reversed(freed):  # earliest-started victims first
        if st.fits(old):
            st.set(v, old)
    return [st.names[v] for v, _ in freed if st.cfg(v) is None]


def schedule_antman(problem: RoundProblem, table: CoefficientTable) -> dict[str, Choice]:
    """The choices of :func:`antman_round`."""
    return dict(antman_round(problem, table).choices)


# ---------------------------------------------------------------------------------------------------
def _synergy_groups(st: _State, rows: np.ndarray, j: int) -> list[np.ndarray]:
    """Job ``j``'s CPU ladders: its rows grouped by (GPU type, plan, shape), each sorted by CPUs. A
    running job has one, the group of its current row; a queued job one per GPU type (more is a table
    Synergy cannot use: it keeps the requested plan and GPUs)."""
    t = st.t
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


def _proportional_row(st: _State, group: np.ndarray) -> int:
    """The row of ``group`` with GPU-proportional CPUs, else the most CPUs below them, else the fewest."""
    t = st.t
    r0 = int(group[0])
    prop = proportional_cpus_per_gpu(st.p, t.gpu_type[r0]) * int(t.gpus[r0])
    below = [int(r) for r in group if t.cpus[r] <= prop]
    return max(below, key=lambda r: (int(t.cpus[r]), -r)) if below else r0


def _tuned_row(st: _State, group: np.ndarray, prop_row: int, fraction: float) -> int:
    """Synergy-TUNE: the fewest-CPU row of ``group`` within ``fraction`` of ``prop_row``'s throughput."""
    t = st.t
    ok = [int(r) for r in group if t.throughput[r] >= fraction * t.throughput[prop_row] - 1e-12]
    return min(ok, key=lambda r: (int(t.cpus[r]), -float(t.throughput[r]), r)) if ok else prop_row


def schedule_synergy(problem: RoundProblem, table: CoefficientTable, *,
                     options: Mapping[str, Sequence[int]] | None = None,
                     tune_fraction: float = SYNERGY_TUNE_FRACTION, backfill: bool = True) -> dict[str, Choice]:
    """Synergy-like CPU tuning with fixed GPUs and plan (Mohan et al., OSDI'22; Rubick Sec. 7.3).

    ``options[job]`` are the rows the job may use (default: all its rows): for a queued job its
    requested plan on the packed requested GPUs at several CPU counts, one such ladder per GPU type;
    for a running job its current plan on its current nodes at several CPU counts (the ladder of its
    current row). :func:`optsched.scheduling.baseline_policies.synergy_table` builds both.

    1. Running jobs keep their allocation (GPUs, nodes, CPUs).
    2. Queued jobs in FIFO order start on their GPU-proportional CPU share
       (:func:`proportional_cpus_per_gpu` x GPUs; Synergy's fallback demand). One that does not fit
       tries the fewest CPUs whose throughput is within ``tune_fraction`` (90%) of the proportional one
       (the simple Synergy-TUNE shrink); if that does not fit either it waits and, with ``backfill``
       (default, Synergy packs greedily in policy order), later jobs are still tried; without it the
       queue stops there.
    3. Leftover CPUs: repeatedly, among every placed job and every larger CPU count of its ladder that
       fits on its own nodes (same GPUs per node, more CPUs per node), the step with the largest gain
       of normalised throughput per extra CPU is taken, as long as the gain is positive. Changing a
       running job's CPUs is a reconfiguration, so its gain is counted net of
       ``problem.reconfig_penalty``: a running job gets more CPUs only when that pays for it.

    Where the papers are silent: host memory is not tuned — a row's memory is what its plan needs (the
    table's memory rule), the same at every CPU count, since the performance model has no
    memory-sensitive term (only ZeRO-Offload's throughput depends on CPUs); a step that does not fit
    when tried is not retried in the round; ties go to fewer extra CPUs, then the job name."""
    _check_table(problem, table, "synergy")
    if not 0.0 < tune_fraction <= 1.0:
        raise ValidationError(f"synergy: tune_fraction must lie in (0, 1], got {tune_fraction!r}")
    st = _State(problem, table)
    st.hold_running()
    ladders: dict[int, np.ndarray] = {}
    for j in range(len(st.names)):
        if st.running(j):
            ladders[j] = _synergy_groups(st, _options(table, options, j, "synergy"), j)[0]
    for j in st.queued():
        groups = _synergy_groups(st, _options(table, options, j, "synergy"), j)
        props = [(_proportional_row(st, g), g) for g in groups]
        props.sort(key=lambda pg: (-float(st.norm[pg[0]]), table.gpu_type[pg[0]], pg[0]))
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
        return _best_step(st, j, ladders[j], table.cpus, blocked, same_gpu_type=False)

    for j in ladders:
        if st.cfg(j) is not None:
            best[j] = step(j)
    _grow_greedily(st.names, best, step, st.reshare, blocked)
    return st.choices()


# ---------------------------------------------------------------------------------------------------
def schedule_sia(problem: RoundProblem, table: CoefficientTable, *,
                 ladders: Mapping[str, Sequence[int]] | None = None) -> dict[str, Choice]:
    """Sia-like GPU scaling through the DP size (Jayaram Subramanya et al., SOSP'23; Rubick Sec. 7.3
    and footnote 2).

    ``ladders[job]`` are the rows Sia may give the job (default: all its rows):
    :func:`optsched.scheduling.baseline_policies.sia_table` builds them as the job's plan with its DP
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
    does not fit when tried is not retried in the round."""
    _check_table(problem, table, "sia")
    st = _State(problem, table)
    st.hold_running()
    rows_of = {j: _options(table, ladders, j, "sia") for j in range(len(st.names))}
    for j in st.queued():
        rows = rows_of[j]
        starts: list[int] = []
        for gt in sorted({table.gpu_type[r] for r in rows}):
            mine = [int(r) for r in rows if table.gpu_type[r] == gt]
            fewest = min(int(table.gpus[r]) for r in mine)
            starts.append(max((r for r in mine if table.gpus[r] == fewest),
                              key=lambda r: (float(st.norm[r]), -r)))
        if not st.place_any(j, starts):
            log.debug("sia: job %r does not get its minimum and waits", st.names[j])
    blocked: set[tuple[int, int]] = set()

    def step(j: int) -> tuple[float, int, int] | None:
        return _best_step(st, j, rows_of[j], table.gpus, blocked, same_gpu_type=True)

    best = {j: step(j) for j in range(len(st.names)) if st.cfg(j) is not None}
    _grow_greedily(st.names, best, step, st.move, blocked)
    return st.choices()


def _best_step(st: _State, j: int, rows: Sequence[int], amount: np.ndarray, blocked: set[tuple[int, int]], *,
               same_gpu_type: bool) -> tuple[float, int, int] | None:
    """Job ``j``'s best growth step among ``rows``: ``(gain per extra unit, -extra units, row)`` of
    the row with the largest normalised-throughput gain per extra unit of ``amount`` (CPUs for
    Synergy, GPUs for Sia) over its current configuration, skipping ``blocked`` steps (and, with
    ``same_gpu_type``, rows on another GPU type); None when no row gains."""
    table = st.t
    cfg = st.cfg(j)
    assert cfg is not None
    gt, have, now = table.gpu_type[cfg.row], int(amount[cfg.row]), st.contrib(j, cfg)
    out: tuple[float, int, int] | None = None
    for r in rows:
        r = int(r)
        extra = int(amount[r]) - have
        if extra <= 0 or (same_gpu_type and table.gpu_type[r] != gt) or (j, r) in blocked:
            continue
        gain = st.value_if_changed(j, r) - now
        if gain <= EPS:
            continue
        cand = (gain / extra, -extra, r)
        if out is None or cand > out:
            out = cand
    return out


def _grow_greedily(names: Sequence[str], best: dict[int, Any], step: Callable[[int], Any],
                   apply: Callable[[int, Any], bool], blocked: set[tuple[int, Any]]) -> None:
    """The marginal-gain loop Synergy's CPU tuning and Sia's GPU growth share: repeatedly apply the
    best step of any job (``best[j] = (gain per unit, -extra units, target row)`` from ``step(j)``:
    largest gain per unit, then fewest extra units, then job name), remember steps that do not fit in ``blocked`` and ask the job for its next step, until
    no job has one."""
    while True:
        live = [(b, names[j], j) for j, b in best.items() if b is not None]
        if not live:
            return
        b, _, j = min(live, key=lambda x: (-x[0][0], -x[0][1], x[1]))
        if not apply(j, b[2]):
            blocked.add((j, b[2]))
        best[j] = step(j)


__all__ = ["AntManResult", "NO_GUARANTEES", "SYNERGY_TUNE_FRACTION", "antman_round", "proportional_cpus_per_gpu",
           "schedule_antman", "schedule_fifo", "schedule_sia", "schedule_synergy"]

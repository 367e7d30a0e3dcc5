"""Rubick's scheduling heuristic (Algorithm 1, Sec. 5) on a round's coefficient table.

The table (:func:`optsched.rounds.rubick.table.build_round_table`) is the only source of
throughputs and resource needs; this module never calls the performance model. Values are
*normalised* throughputs (throughput / reference throughput of the job), the unit of the round
objective (:func:`optsched.rounds.rubick.objective.objective`), because raw samples/s of different
models are incomparable.

Algorithm 1, as implemented (paper lines in brackets):

* **Start state.** Every running job holds its current configuration on its current nodes (its exact
  current shares); a running guaranteed job that waits for quota (``admission.waiting``) is preempted.
* **Schedule** [lines 1-5]. First the *privileged* jobs (``admission.protected``) that do not yet run
  a row reaching their guarantee, in admission order [lines 2-3]; then
  ``SortBySlope(best-effort queued  U  running)`` [lines 4-5]: descending GPU slope, then CPU slope,
  then job name ("a greedy sort that compares the slopes of GPUs and then CPUs"), computed once at the
  start of the phase. Each job is scheduled once.
* **ScheduleJob** [lines 6-25]. The job gives up what it holds, then walks the nodes of its GPU types
  (its current nodes first, then by free GPUs, descending, then name; a privileged job ranks nodes by
  free GPUs plus GPUs held by best-effort jobs). On each node it sees the free resources [line 8] and,
  per resource type GPU then CPU [line 9], repeatedly shrinks the lowest-slope job over its minimum on
  that node (``GetLowestSlopeOverMinJob`` [line 10]) while line 14 allows it: (1) that slope is lower
  than the job's own growth slope, or (2) the job has not reached its minimum demand. The walk stops
  once the job can run its best row. ``GetBestPlan`` [line 21] is the highest-throughput row whose
  shape maps onto the gathered per-node amounts, each part on a distinct node of the row's GPU type
  with enough GPUs, CPUs and memory (``AllocMem`` [line 22]: ``part_share`` of the row, placed by
  :meth:`~optsched.heuristics.round_state.RoundState.map_row`); a running job may instead keep its exact
  current shares. What the chosen row does not use is given back: jobs
  shrunk during the walk are restored, most recently shrunk first, to their previous configuration
  when it fits again, else to the best row on their previous nodes.
* **minRes.** A protected job's minimum is "some row reaching its guarantee" (the fewest GPUs of such
  a row is its quota usage, :func:`~optsched.rounds.rubick.admission.admit`); shrinking a protected
  job is allowed only to a row that still reaches its guarantee. A protected job admitted on one GPU
  type (quotas per GPU type, :attr:`~optsched.rounds.rubick.admission.Admission.gpu_type`) reaches it
  only with rows of that type and is placed on nodes of that type only
  (:class:`~optsched.heuristics.round_state.RoundState`). A best-effort job's minimum is 0:
  shrinking it to nothing preempts it [Sec. 5, "Shrinking a job to 0 results in a preemption"].

Choices where the paper is silent (documented here, checked in ``tests/test_rubick_heuristic.py``):

* **Sensitivity curve** of a job: ``F(g, c)`` = best normalised throughput of any of its rows with at
  most ``g`` GPUs and ``c`` CPUs (running maximum, flat between valid points) [Sec. 5, Fig. 6]. The GPU
  curve leaves CPUs free, the CPU curve holds the GPUs fixed.
* **Growth slope** (the job being scheduled; also the SortBySlope key): from its position ``(g, v)`` —
  GPUs and value of the best row that maps onto what it has gathered (0 when none) — the gain per
  GPU to the *next better point* of the curve: ``g' = min{GPUs of a row with value > v, GPUs > g}``,
  slope ``(F(g') - v) / (g' - g)``; 0 when no row is better. The CPU slope is the same along CPUs with
  the GPUs capped at the GPUs gathered.
* **Shrink slope** (a job ``v`` on node ``n``): one unit Δr of the resource is taken from ``v``'s share
  on ``n``, and ``v`` is re-fitted to the best row that maps onto its remaining shares (a protected job
  only to a row reaching its guarantee; a best-effort job with no such row is preempted). The loss is
  the drop of ``v``'s term in the round objective (normalised throughput, plus the reconfiguration,
  trim or preemption penalty the move newly incurs); the slope is that loss per unit of the resource the
  re-fit frees on ``n`` (one unit, or several when the curve is flat below the current point, i.e.
  the loss per unit "down to the next lower point"). Re-fitting a job at every unit is equivalent to
  the paper's unit-by-unit shrinking on flat curves and keeps every intermediate state a valid
  configuration (needed on restricted tables, e.g. a job whose only row has 8 GPUs).
* **Penalties.** A ScheduleJob outcome is committed only if it raises the round objective (sum of
  normalised throughputs minus reconfiguration, trim and preemption penalties, Sec. 3) — line 14's
  case (1) intent, "the reallocation will increase total throughput" — or when it places a privileged
  job below its minimum (case (2)). Otherwise the state is rolled back.
* **Trims** (issue 16, item 5; the paper has no such action). A running job re-fitted on exactly its
  current nodes and GPUs with its current plan but other CPUs or memory is *trimmed*
  (:class:`~optsched.heuristics.round_state.Config` ``trim``): its term pays the round's
  ``trim_penalty`` instead of ``reconfig_penalty``. This is what a shrink of a running job's CPUs on
  its node usually gives (the re-fit keeps its nodes and GPUs), so the shrink slope of such a job
  counts the trim penalty, and GetBestPlan, the commit rule and give-back compare configurations by
  the same terms.
* **Repacking guarantees.** Algorithm 1 never moves a job it shrinks, so a protected job may find no
  node although moving another protected job would make room. When a privileged job cannot be
  placed, lines 2-3 are run again from the start state with every protected job released and placed
  again, most GPUs of minimum demand first, each preferring its current nodes (a running job keeps its
  exact shares when they still fit). Only if that fails too is the round declared infeasible.
* **Return to the queue.** Jobs left without resources (preempted or never placed) get one more try at
  the end on the free resources only, without shrinking anyone.
* **Topology** (issue "A round a real cluster scheduler can state", item 2;
  :mod:`optsched.rounds.rubick.constraints`). A job with a ``required`` rule walks the nodes of one
  domain of its level: the domain it runs in, then the domains whose free GPUs on the nodes it may use
  (plus those of best-effort jobs for a privileged job) hold its best row, fewest first (best fit),
  then the roomiest (:meth:`Algorithm1.topology_domains`), up to :data:`TOPOLOGY_TRIES`; each walk is
  a ScheduleJob rolled back, and the one that changes the objective most is done again and kept (the
  first that gives the job its best value and changes no other job is kept at once). A job with a
  ``preferred`` rule walks the domains one after another in that order; its walk's positions ignore
  the rule (as the walk's counts do), and the final GetBestPlan compares the best configuration on
  each single domain with the best on all visited nodes by the job's term of the objective, its
  topology cost included (:meth:`~optsched.heuristics.round_state.RoundState.best_in_domains`). Every
  other comparison of objective terms (the commit rule, shrink losses, give-back, the return to the
  queue) counts the cost too, and a running job that pays it is never answered by the running-best-row
  shortcut.

Raises :class:`UnreachableGuaranteeError` (an :class:`~optsched.core.errors.InfeasibleError`) naming
the job(s) when a protected job cannot reach its guarantee even after shrinking every job that may be
shrunk and repacking the protected jobs.

**Deferring unreachable guarantees** (:func:`schedule_with_deferral`; the paper is silent, a production
scheduler should not drop a whole round for one job). Admission counts GPUs, not node shapes, so an
admitted job may find no node shape reaching its guarantee. Instead of failing the round, the jobs
that fail are *deferred*: moved from ``admission.protected`` to ``admission.waiting``
(:meth:`~optsched.rounds.rubick.admission.Admission.defer`), i.e. treated for this round exactly like a
guaranteed job waiting for quota (it does not run and is not scheduled as best-effort either), and the
round is run again with the reduced admission until it succeeds. Which jobs are deferred: the
privileged jobs *Algorithm 1 proper* (lines 2-3, every other job holding its configuration) could not
place, as reported by :attr:`UnreachableGuaranteeError.jobs` — not those the repack fallback left
over, which would often be a running guaranteed job displaced by the repack (on the multi-tenant trace
the repack places the queued newcomer and then fails on a small running job); deferring Algorithm 1's
failures keeps running guarantees ahead of queued ones, as admission does. A running guaranteed job
is deferred only when Algorithm 1 must move it (its current row does not reach its guarantee) and it
fits nowhere; it is then *preempted* this round, since it cannot be given its guarantee. Each pass
defers at least one protected job, so there are at most (protected jobs + 1) passes; the deferred
jobs' quota is not handed to other guaranteed jobs (they keep their place in line for the next round).

**Deadlines** (:mod:`optsched.rounds.rubick.deadlines`). The privileged jobs are the protected
guaranteed jobs and then the admitted deadline jobs (earliest deadline first); an admitted deadline job's
minimum is a row meeting the throughput its deadline needs (the round state's "reaches its guarantee",
:mod:`optsched.heuristics.round_state`). Deadlines never fail a round: a deadline job Algorithm 1 cannot
place is *demoted* (at risk, best-effort) and the round run again; when a protected guaranteed job
cannot be placed and a pass with every deadline job demoted places it, the deadline jobs are in its way
and are demoted one at a time, latest deadline first, until it fits; otherwise the guarantee's own
rules apply (:class:`UnreachableGuaranteeError`, or deferral) with the deadline jobs as they were. Each
pass demotes one deadline job or ends, so there are at most 2 x (deadline jobs) + 1 extra passes, only
in rounds where node shapes defeat admission.

**Doing less for the same decisions** (measured in ``docs/rounds.md``, "Speed of Algorithm 1"). The
node walk keeps its position incrementally (:mod:`optsched.heuristics.rubick_walk`); besides:

* GetLowestSlopeOverMinJob is kept per node and resource (:meth:`Algorithm1.lowest`) until a holder
  on the node changes; a shrink is evaluated once per (configuration, node, resource).
* SortBySlope's keys are computed for all jobs at once (:meth:`Algorithm1.sort_keys`: segment minima
  and maxima over the rows, the same floats as :meth:`Algorithm1.sort_key`).
* A job that runs its best row as it runs (not forced) is answered without a walk
  (:meth:`Algorithm1._runs_best`): its ScheduleJob provably ends at its first node with its running
  configuration and is rolled back; only the rounding of the free memory on its nodes (released,
  reserved, both undone) is replayed, so the state stays bit-identical. In a simulator most jobs of a
  round are such jobs.
* Give-back restores a job in one ledger step when its configuration fits once the shrunk one is
  released (the same sums in the same order as releasing first).

Every shortcut keeps the ledger's arithmetic (same float operations in the same order), so the free
amounts stay bit-identical to the direct computation; ``tests/heuristics/test_rubick_incremental.py``
compares each one with it.
"""

from __future__ import annotations

import logging
import math
from bisect import bisect_right
from dataclasses import dataclass
from typing import Callable, Mapping

import numpy as np

from optsched.core.deadline import Deadline
from optsched.core.errors import InfeasibleError
from optsched.heuristics.placement import MEM_TOL
from optsched.heuristics import round_state
from optsched.heuristics.round_state import EPS, Config, JobRows
from optsched.heuristics.rubick_walk import GPU as _GPU
from optsched.heuristics.rubick_walk import NodeWalk, Shrink, WalkEngine, _Parts
from optsched.perf.coefficients import CoefficientTable
from optsched.rounds.rubick.admission import Admission
from optsched.rounds.rubick.choice import Choice, is_kept
from optsched.rounds.rubick.deadlines import admit_round, demote, floor_ok, privileged, set_aside
from optsched.rounds.rubick.decision import Schedule
from optsched.rounds.rubick.problem import RubickRound

log = logging.getLogger(__name__)


class UnreachableGuaranteeError(InfeasibleError):
    """Some protected job cannot be placed at a row reaching its guarantee (module docstring).
    ``job_reasons`` maps each protected job Algorithm 1 proper could not place (every other job holding
    its configuration) to why — the jobs :func:`schedule_with_deferral` defers; ``jobs`` are their
    names in admission order. ``reasons`` also lists what the repack fallback left unplaced."""

    def __init__(self, message: str, reasons: tuple[str, ...] = (), job_reasons: Mapping[str, str] | None = None
                 ) -> None:
        super().__init__(message, reasons)
        self.job_reasons: dict[str, str] = dict(job_reasons or {})
        self.jobs: tuple[str, ...] = tuple(self.job_reasons)


@dataclass(frozen=True)
class DeferralResult:
    """What :func:`schedule_with_deferral` returns: the ``choices`` (as :func:`schedule`), the reduced
    ``admission`` they satisfy, and the ``deferred`` jobs (name -> why its guarantee is unreachable),
    in the order they were deferred (empty when nothing had to be deferred)."""

    choices: Mapping[str, Choice]
    admission: Admission
    deferred: Mapping[str, str]


_MISSING = object()


def _slope_gpu(rows: JobRows, v: float, g: int) -> float:
    """Growth slope of a job with ``rows`` along its GPU curve from ``(g, v)`` (module docstring)."""
    py = rows.py
    g2 = min((gg for vv, gg in zip(py.value, py.gpus) if vv > v + EPS and gg > g), default=None)
    if g2 is None:
        return 0.0
    return (max(vv for vv, gg in zip(py.value, py.gpus) if gg <= g2) - v) / (g2 - g)


def _slope_cpu(rows: JobRows, v: float, c: int, g_cap: int) -> float:
    """Growth slope along the CPU curve from ``(c, v)`` with at most ``g_cap`` GPUs."""
    py = rows.py
    c2 = min((cc for vv, gg, cc in zip(py.value, py.gpus, py.cpus) if gg <= g_cap and vv > v + EPS and cc > c),
             default=None)
    if c2 is None:
        return 0.0
    return (max(vv for vv, gg, cc in zip(py.value, py.gpus, py.cpus) if gg <= g_cap and cc <= c2) - v) / (c2 - c)


class Algorithm1(WalkEngine):
    """One call of :func:`schedule`: the round state plus Algorithm 1's slopes, shrinking and
    ScheduleJob (module docstring)."""

    def __init__(self, problem: RubickRound, table: CoefficientTable, admission: Admission) -> None:
        super().__init__(problem, table, admission)
        n_nodes = len(self.node_names)
        #: scratch amounts per node (a job's shares while it is re-fitted in :meth:`shrink`)
        self.scratch = (np.zeros(n_nodes, dtype=np.int64), np.zeros(n_nodes, dtype=np.int64),
                        np.zeros(n_nodes, dtype=float))
        #: per job index: its rank by name (ties of shrink slopes)
        self.name_rank = [0] * len(self.names)
        for r, j in enumerate(sorted(range(len(self.names)), key=lambda j: self.names[j])):
            self.name_rank[j] = r
        #: (configuration, node, resource) -> :meth:`shrink` (a configuration's row names its job)
        self.shrink_cache: dict[tuple[Config, int, int], Shrink | None] = {}
        #: the same by the configuration's identity, read first (hashing a configuration costs more; the
        #: entry holds the configuration, so its id is not reused while the entry lives)
        self._shrink_by_id: dict[tuple[int, int, int], tuple[Config, Shrink | None]] = {}
        self._parts: dict[int, _Parts] = {}
        self._keepable: dict[int, list[bool]] = {}
        self._trimmable: dict[int, list[bool]] = {}
        self._slope_memo: dict[tuple[int, float, int], float] = {}
        self._slope_cpu_memo: dict[tuple[int, float, int, int], float] = {}
        #: per resource and node: the lowest shrink (:meth:`lowest` of every job there) and whether it is
        #: still valid (the node's holders have not changed since)
        self.low: tuple[list[tuple[int, Shrink] | None], ...] = ([None] * n_nodes, [None] * n_nodes)
        self.low_ok: tuple[list[bool], ...] = ([False] * n_nodes, [False] * n_nodes)

    # -- slopes ---------------------------------------------------------------------------------
    def slope_gpu(self, j: int, v: float, g: int) -> float:
        """Growth slope along the GPU curve from ``(g, v)`` (module docstring); memoised (a walk asks
        for the same position many times)."""
        key = (j, v, g)
        out = self._slope_memo.get(key)
        if out is None:
            out = self._slope_memo[key] = _slope_gpu(self.rows[j], v, g)
        return out

    def slope_cpu(self, j: int, v: float, c: int, g_cap: int) -> float:
        """Growth slope along the CPU curve from ``(c, v)`` with at most ``g_cap`` GPUs; memoised by the
        rows within the cap (how many distinct GPU counts of rows ``g_cap`` reaches)."""
        rows = self.rows[j]
        key = (j, v, c, bisect_right(rows.py.gpu_steps, g_cap))
        out = self._slope_cpu_memo.get(key)
        if out is None:
            out = self._slope_cpu_memo[key] = _slope_cpu(rows, v, c, g_cap)
        return out

    # -- GetLowestSlopeOverMinJob -----------------------------------------------------------------
    def shrink(self, v: int, n: int, res: int) -> Shrink | None:
        """Shrinking job ``v`` by one unit of ``res`` on node ``n`` (None: not allowed, i.e. not over
        its minimum); cached per (configuration, node, resource)."""
        cfg = self.ledger.holding[v]
        assert cfg is not None
        key = (cfg, n, res)
        out = self.shrink_cache.get(key, _MISSING)
        if out is _MISSING:
            out = self.shrink_cache[key] = self._shrink_of(v, cfg, n, res)  # type: ignore[assignment]
        return out  # type: ignore[return-value]

    def _shrink_of(self, v: int, cfg: Config, n: int, res: int) -> Shrink | None:
        g, c, _ = cfg.share_on(n)
        if (g if res == _GPU else c) <= 0:
            return None
        # GetBestPlan on the job's own shares, one unit less on ``n`` (nothing elsewhere)
        shares = cfg.shares
        if len(shares) <= round_state.SMALL_CANDIDATES:
            nodes = [s[0] for s in shares]
            ag, ac, am = [s[1] for s in shares], [s[2] for s in shares], [s[3] for s in shares]
            at = nodes.index(n)
            if res == _GPU:
                ag[at] -= 1
            else:
                ac[at] -= 1
            new = self.best_on(v, nodes, ag, ac, am, None, None, guarantee=bool(self.protected[v]))
        else:
            sg, sc, sm = self.scratch
            cand = np.array([s[0] for s in shares], dtype=np.int64)
            for nn, gg, cc, mm in shares:
                sg[nn], sc[nn], sm[nn] = gg, cc, mm
            if res == _GPU:
                sg[n] -= 1
            else:
                sc[n] -= 1
            new = self.best(v, cand, self.scratch, guarantee=bool(self.protected[v]), keep=False)
            sg[cand] = 0
            sc[cand] = 0
            sm[cand] = 0.0
        if new is None and self.protected[v]:
            return None
        ng, nc, _ = new.share_on(n) if new is not None else (0, 0, 0.0)
        released = (g - ng) if res == _GPU else (c - nc)
        if released <= 0:
            return None
        loss = self.contrib(v, cfg) - self.contrib(v, new)
        return Shrink(new, loss, released, loss / released)

    def lowest(self, n: int, res: int, exclude: int) -> tuple[int, Shrink] | None:
        """GetLowestSlopeOverMinJob [line 10]: the job on node ``n`` (not ``exclude``) with the lowest
        shrink slope for ``res`` (ties: job name) and its shrink; None when no job there can be shrunk.
        Kept per node and resource until the node's holders change (``ledger.touched``)."""
        if exclude in self.ledger.holders_on[n]:
            return self._lowest(n, res, exclude)
        if self.ledger.touched:
            self.flush_touched()
        if self.low_ok[res][n]:
            return self.low[res][n]
        out = self.low[res][n] = self._lowest(n, res, -1)
        self.low_ok[res][n] = True
        return out

    def _lowest(self, n: int, res: int, exclude: int) -> tuple[int, Shrink] | None:
        best_v, best_ev, best_slope = -1, None, math.inf
        rank, holding, by_id = self.name_rank, self.ledger.holding, self._shrink_by_id
        for v in self.ledger.holders_on[n]:
            if v == exclude:
                continue
            cfg = holding[v]
            hit = by_id.get((id(cfg), n, res))
            if hit is not None and hit[0] is cfg:
                ev = hit[1]
            else:
                ev = self.shrink(v, n, res)
                by_id[(id(cfg), n, res)] = (cfg, ev)
            if ev is None:
                continue
            slope = ev.slope  # type: ignore[union-attr]
            # lowest (slope, name rank); the first candidate is taken whatever its slope
            if best_v < 0 or slope < best_slope or (slope == best_slope and rank[v] < rank[best_v]):
                best_v, best_ev, best_slope = v, ev, slope
        return None if best_v < 0 else (best_v, best_ev)  # type: ignore[return-value]

    def flush_touched(self) -> None:
        """Forget the lowest shrinks (:attr:`low`) of the nodes whose holders changed."""
        touched = self.ledger.touched
        if touched:
            ok0, ok1 = self.low_ok
            for m in touched:
                ok0[m] = ok1[m] = False
            touched.clear()

    # -- ScheduleJob ----------------------------------------------------------------------------
    def held_by_best_effort(self) -> np.ndarray:
        """GPUs per node held by jobs that are not protected (a live view: do not modify)."""
        return self.ledger.group_gpus[0]

    def walk_order(self, j: int, privileged: bool, domain: int | None = None) -> np.ndarray:
        """The nodes ScheduleJob walks for job ``j`` (module docstring): its current nodes, then by free
        GPUs (plus GPUs of best-effort jobs when ``privileged``) descending, then index; only the nodes
        of ``domain`` when given (a required topology rule). A job with a preferred topology rule walks
        the domains one after another (:meth:`topology_domains` order), each as above."""
        cur = self.current[j]
        mask = self.eligible[j]
        dom = self.topo_dom[j]
        if domain is not None:
            assert dom is not None
            mask = mask & (dom == domain)
        first = [n for n, *_ in cur.shares if mask[n]] if cur is not None else []
        rest = np.flatnonzero(mask & ~self.on_current_node[j])
        score = self.free_gpus[rest]
        if privileged:
            score = score + self.held_by_best_effort()[rest]
        # by score descending, then node index (``rest`` is ascending and the sort stable)
        rest = rest[np.argsort(-score, kind="stable")]
        if domain is None and dom is not None and rest.size:  # a preferred rule: domain by domain
            ranked = self.topology_domains(j, privileged)
            rank = np.full(int(dom.max()) + 1, len(ranked), dtype=np.int64)
            rank[ranked] = np.arange(len(ranked))
            rest = rest[np.argsort(rank[dom[rest]], kind="stable")]
        return np.concatenate([np.array(first, dtype=np.int64), rest]) if first else rest

    def topology_domains(self, j: int, privileged: bool) -> list[int]:
        """The domains of job ``j``'s topology level where it may get GPUs, in the order ScheduleJob
        tries them (module docstring, "Topology"): the domain it runs in, then the domains whose free GPUs
        (plus GPUs of best-effort jobs when ``privileged``) on the nodes it may use hold its best row,
        fewest first (best fit), then the others, most first; ties by domain id."""
        dom = self.topo_dom[j]
        assert dom is not None
        nodes = np.flatnonzero(self.eligible[j])
        score = self.free_gpus[nodes] + (self.held_by_best_effort()[nodes] if privileged else 0)
        ids, inverse = np.unique(dom[nodes], return_inverse=True)
        room = np.bincount(inverse, weights=score, minlength=ids.size)
        rows = self.rows[j]
        need = int(rows.py.gpus[0]) if rows.py.gpus else 0
        fit = room >= need
        order = np.lexsort((ids, np.where(fit, room, -room), ~fit))
        out = [int(d) for d in ids[order]]
        cur = self.current[j]
        if cur is not None:
            mine = int(dom[cur.shares[0][0]])
            out = [mine] + [d for d in out if d != mine]
        return out

    def keepable(self, j: int) -> list[bool]:
        """Per row of job ``j`` (in :class:`~optsched.heuristics.round_state.JobRows` order): whether a
        mapping of it onto the job's current placement keeps the job as it runs
        (:func:`~optsched.rounds.rubick.choice.is_kept`: same plan, the shape of the current placement,
        its CPUs and memory); all False for a queued job. Made once per job."""
        return self._on_current_shape(j, self._keepable, lambda i, row, parts: is_kept(
            self.problem, self.table, j, Choice(row, parts)))

    def trimmable(self, j: int) -> list[bool]:
        """Per row of job ``j`` (in :class:`~optsched.heuristics.round_state.JobRows` order): whether a
        mapping of it onto the job's current placement trims the job (its current plan, the shape of its
        current placement, not keepable: :meth:`keepable`); all False for a queued job. Made once per job."""
        keep = self.keepable(j)
        return self._on_current_shape(j, self._trimmable, lambda i, row, _: not keep[i] and self.same_plan(j, row))

    def _on_current_shape(self, j: int, cache: dict[int, list[bool]],
                          test: Callable[[int, int, tuple[tuple[str, int], ...]], bool]) -> list[bool]:
        """Per row of job ``j``: whether the row has the shape of the job's current placement and
        ``test(i, row, current parts)`` holds (all False for a queued job); made once per job in ``cache``."""
        out = cache.get(j)
        if out is None:
            parts = self.current_parts[j]
            py = self.rows[j].py
            if parts is None:
                out = [False] * len(py.rows)
            else:
                shape = sorted(g for _, g in parts)
                out = [sorted(py.shapes[i]) == shape and test(i, row, parts) for i, row in enumerate(py.rows)]
            cache[j] = out
        return out

    def walk_parts(self, j: int) -> _Parts:
        """Job ``j``'s rows as part demands (:class:`~optsched.heuristics.rubick_walk.NodeWalk`)."""
        parts = self._parts.get(j)
        if parts is None:
            parts = self._parts[j] = _Parts(self, j)
        return parts

    def schedule_job(self, j: int, forced: bool) -> bool:
        """ScheduleJob [Algorithm 1, lines 6-25] for job index ``j``; True when committed. ``forced``:
        a privileged job below its minimum (committed whenever it reaches its guarantee). The node walk
        is :class:`~optsched.heuristics.rubick_walk.NodeWalk`. A job running its best row as it runs is
        answered without the walk (:meth:`_runs_best`). A job with a required topology rule walks one
        domain at a time, up to :data:`TOPOLOGY_TRIES` of them (:meth:`topology_domains`), and keeps the
        outcome that raises the objective most (module docstring, "Topology")."""
        if not forced and self._runs_best(j):
            return False
        if not self.topo_required[j]:
            return self._schedule_on(j, forced, self.walk_order(j, forced), final_try=True)
        orders = [self.walk_order(j, forced, d) for d in self.topology_domains(j, forced)[:TOPOLOGY_TRIES]]
        best_i, best_delta = -1, -math.inf
        for i, order in enumerate(orders):
            delta = self._schedule_on(j, forced, order, final_try=len(orders) == 1)
            if delta is True or delta is False:  # decided: committed (the best outcome) or a single try
                return delta
            if delta is not None and delta > best_delta + EPS:
                best_i, best_delta = i, delta
        if best_i < 0:
            return False
        return self._schedule_on(j, forced, orders[best_i], final_try=True) is True

    def _schedule_on(self, j: int, forced: bool, order: np.ndarray, *, final_try: bool) -> bool | float | None:
        """ScheduleJob of job ``j`` walking ``order``. With ``final_try``: commit when it raises the
        objective or ``forced`` places the job, True when committed, else False. Otherwise (one of
        several domains tried): commit and return True when the job gets its best value and nothing else
        changes (no other try can do better); else roll back and return the change of the objective
        when it would be committed, or None."""
        self.ledger.begin()
        prot = bool(self.protected[j])
        self.set(j, None)
        free = (self.free_gpus, self.free_cpus, self.free_mem)
        base = self.free_gpus.copy()
        walk = NodeWalk(self, j, order, prot, base)
        k = walk.run()
        final = self.best(j, order[:k + 1], free, guarantee=prot, keep=True, base=base)
        if final is None:
            self.ledger.rollback()
            return False if final_try else None
        self.set(j, final)
        # what every changed job held when this ScheduleJob began (give-back changes only jobs the walk
        # shrank, which are in it already)
        first = self.ledger.first_holdings()
        self.give_back(walk.shrunk, first)
        holding = self.ledger.holding
        delta = sum(self.contrib(job, holding[job]) - self.contrib(job, old)  # type: ignore[arg-type]
                    for job, old in first.items())
        ok = forced or delta > EPS
        if ok and (final_try or (self.contrib(j, final) >= self.rows.best_value(j) - EPS
                                 and all(holding[v] is old for v, old in first.items() if v != j))):
            self.ledger.commit()
            return True
        self.ledger.rollback()
        return False if final_try else (delta if ok else None)

    def _runs_best(self, j: int) -> bool:
        """Whether ScheduleJob of job ``j`` (not forced) is known to change nothing, and if so its effect
        on the free memory. That is the case when ``j`` holds its running configuration, which is as
        good as its best row, reaches its guarantee if it is protected and fits again once released:
        the walk then ends at its first node with the running configuration (GetBestPlan keeps it and
        no row beats it), the final GetBestPlan keeps it too, the objective does not change and the
        transaction is rolled back. What remains of all that is the rounding of the free memory on its
        nodes (released, reserved, then both undone), which is replayed: same sums, same order."""
        cur = self.current[j]
        if cur is None or self.ledger.holding[j] is not cur or self.topology_cost(j, cur) > 0.0:
            return False
        v = float(self.value[cur.row])
        top = self.rows.best_value(j)
        if not (top <= v + EPS and v >= top - EPS):
            return False
        if self.protected[j] and not self.reaches(cur.row):
            return False
        fg, fc, fm = self.free_views
        for n, g, c, m in cur.shares:
            if not (fg[n] + g >= g and fc[n] + c >= c and fm[n] + m >= m - MEM_TOL):
                return False
        for n, _, _, m in cur.shares:
            fm[n] = (((fm[n] + m) - m) + m) - m
        return True

    def give_back(self, shrunk: list[int], before: Mapping[int, Config | None] | None = None) -> None:
        """Return what the chosen row does not use: restore shrunk jobs, most recently shrunk first, to
        their configuration before this ScheduleJob when it fits again, else to the best row on their
        previous nodes when that beats their shrunk state."""
        before = self.ledger.first_holdings() if before is None else before  # type: ignore[assignment]
        free = (self.free_gpus, self.free_cpus, self.free_mem)
        holding, assign = self.ledger.holding, self.ledger.assign
        for v in reversed(shrunk):
            orig, cur = before[v], holding[v]
            if cur is orig or orig is None:
                continue
            if self._fits_instead(orig, cur):  # type: ignore[arg-type]
                assign(v, orig)  # releases ``cur``, then reserves ``orig``: as two steps would
                continue
            self.set(v, None)
            cand = np.array([s[0] for s in orig.shares], dtype=np.int64)
            new = self.best(v, cand, free, guarantee=bool(self.protected[v]), keep=False)
            if new is not None and self.contrib(v, new) > self.contrib(v, cur) + EPS:
                self.set(v, new)
            else:
                self.set(v, cur)

    def _fits_instead(self, new: Config, old: Config | None) -> bool:
        """Whether ``new`` fits the free resources once ``old`` (held by the same job) is released: the
        amounts are those :meth:`set` would leave, the same sums in the same order."""
        fg, fc, fm = self.free_views
        if old is not None and len(old.shares) == 1:  # the common case, without a look-up table
            on, hg1, hc1, hm1 = old.shares[0]
            for n, g, c, m in new.shares:
                hg, hc, hm = (hg1, hc1, hm1) if n == on else (0, 0, 0.0)
                if not (fg[n] + hg >= g and fc[n] + hc >= c and fm[n] + hm >= m - MEM_TOL):
                    return False
            return True
        held = {} if old is None else {n: (g, c, m) for n, g, c, m in old.shares}
        for n, g, c, m in new.shares:
            hg, hc, hm = held.get(n, (0, 0, 0.0))
            if not (fg[n] + hg >= g and fc[n] + hc >= c and fm[n] + hm >= m - MEM_TOL):
                return False
        return True

    def fill(self, j: int) -> None:
        """A job without resources tries the free resources only ("returns to the queue")."""
        cand = np.flatnonzero(self.eligible[j] & (self.free_gpus > 0))
        new = self.best(j, cand, (self.free_gpus, self.free_cpus, self.free_mem),
                        guarantee=bool(self.protected[j]), keep=True)
        if new is not None and self.contrib(j, new) > self.contrib(j, None) + EPS:
            self.set(j, new)

    def sort_keys(self, jobs: list[int]) -> list[tuple[float, float, str]]:
        """:meth:`sort_key` of each of ``jobs`` (which have rows), computed over all their rows at once:
        per job the first GPU count above its position with a better row, the best value up to it, and
        the same along CPUs; the same floats as :meth:`sort_key` (the same operations on the same
        numbers, minima and maxima exact)."""
        if not jobs:
            return []
        rows = self.rows
        js = np.asarray(jobs, dtype=np.int64)
        lo, hi = rows.bounds_array[js], rows.bounds_array[js + 1]
        count = hi - lo
        first = np.concatenate(([0], np.cumsum(count)[:-1]))  # each job's first position in the gathered rows
        seg = np.repeat(np.arange(js.size), count)
        at = np.arange(int(count.sum())) - first[seg] + lo[seg]
        val, gpus, cpus = (c[at] for c in rows.cols[:3])
        cur = np.array([-1 if (cfg := self.ledger.holding[j]) is None else cfg.row for j in jobs],  # type: ignore[attr-defined]
                       dtype=np.int64)
        held = cur >= 0
        v = np.where(held, self.value[cur], 0.0)
        g = np.where(held, self.table.gpus[cur], 0)
        c = np.where(held, self.table.cpus[cur], 0)
        g_cap = np.where(held, g, np.minimum.reduceat(gpus, first))
        big = np.iinfo(np.int64).max
        out = []
        for up, amount, mine, within in ((gpus > g[seg], gpus, g, None), (None, cpus, c, gpus <= g_cap[seg])):
            better = val > (v + EPS)[seg]
            better &= up if within is None else (within & (cpus > c[seg]))
            nxt = np.minimum.reduceat(np.where(better, amount, big), first)  # the next better point
            found = nxt < big
            upto = amount <= nxt[seg] if within is None else within & (amount <= nxt[seg])
            top = np.maximum.reduceat(np.where(upto, val, -math.inf), first)
            slope = np.zeros(js.size)
            slope[found] = (top[found] - v[found]) / (nxt[found] - mine[found])
            out.append((-slope).tolist())
        names = self.names
        return [(a, b, names[j]) for a, b, j in zip(out[0], out[1], jobs)]

    def sort_key(self, j: int) -> tuple[float, float, str]:
        """SortBySlope key: GPU slope, then CPU slope (descending), then name."""
        cfg = self.config(j)
        v, g, c = self.position(cfg)
        rows = self.rows[j]
        g_cap = g if cfg is not None else min(rows.py.gpus, default=0)
        # asked once per job: computed directly, the memo would cost more than it saves
        return -_slope_gpu(rows, v, g), -_slope_cpu(rows, v, c, g_cap), self.names[j]

    def infeasible_reason(self, j: int) -> str:
        rows = self.rows[j]
        ok = np.flatnonzero(rows.reaches)
        need = int(rows.gpus[ok].min()) if ok.size else 0
        shapes = sorted({rows.shapes[i] for i in ok if rows.gpus[i] == need})
        types = sorted({self.table.gpu_type[int(rows.rows[i])] for i in ok if rows.gpus[i] == need})
        mask = np.isin(self.node_type, [self.type_id[x] for x in types])
        avail = (self.free_gpus + self.held_by_best_effort())[mask]
        most = int(avail.max()) if avail.size else 0
        dom = self.topo_dom[j]
        domain = ""
        if self.topo_required[j] and dom is not None:
            mine = mask & self.eligible[j]
            room = np.bincount(dom[mine], weights=(self.free_gpus + self.held_by_best_effort())[mine])
            level = self.problem.job(self.names[j]).topology.level  # type: ignore[union-attr]
            domain = f"; its topology rule requires one {level} domain, which has at most {int(room.max(initial=0))}"
        what = (f"deadline job {self.names[j]!r} needs {need} {'/'.join(types)} GPUs (shape "
                f"{' or '.join(map(str, shapes))}) to meet the {float(self.deadline_need[j]):.4g} samples/s its "
                "deadline needs" if self.deadline_need[j] > 0 else
                f"guaranteed job {self.names[j]!r} needs {need} {'/'.join(types)} GPUs "
                f"(shape {' or '.join(map(str, shapes))}) to reach its reference throughput "
                f"{float(self.table.reference_throughput[j]):.4g} samples/s")
        return (f"{what}, but only {int(avail.sum())} GPUs of that type are free or held by best-effort jobs (at "
                f"most {most} on one node{domain})")


#: the most domains ScheduleJob tries for a job with a required topology rule (:meth:`Algorithm1.schedule_job`)
TOPOLOGY_TRIES = 3

#: why a protected job is left out when the time limit runs out before its turn
TIME_LIMIT_REASON = "the time limit ran out before Algorithm 1 reached it"


@dataclass(frozen=True)
class _Outcome:
    """One pass of Algorithm 1: the ``choices``, the protected jobs it had no time for (name -> why;
    a running one is preempted) and whether it stopped early (``cut``: jobs were left as they were)."""

    choices: dict[str, Choice]
    timed_out: dict[str, str]
    cut: bool


#: jobs between two looks at the clock while sort keys are computed (each batch at once)
_SORT_CHECK_EVERY = 4096


def _by_slope(eng: Algorithm1, jobs: list[int], deadline: Deadline | None) -> list[int] | None:
    """``jobs`` in SortBySlope order (:meth:`Algorithm1.sort_key`); None when the ``deadline`` passes
    while the keys are computed."""
    keys = []
    for at in range(0, len(jobs), _SORT_CHECK_EVERY):
        if deadline is not None and deadline.expired():
            return None
        part = jobs[at:at + _SORT_CHECK_EVERY]
        keys.extend(zip(eng.sort_keys(part), part))
    keys.sort()
    return [j for _, j in keys]


def _privileged_phase(problem: RubickRound, table: CoefficientTable, admission: Admission, *, repack: bool,
                      deadline: Deadline | None = None
                      ) -> tuple[Algorithm1, list[int], list[tuple[int, str]], list[int]]:
    """Start state and Algorithm 1 lines 2-3. Running jobs hold their current configuration, waiting
    guaranteed jobs do not run; then every privileged job not yet at a row reaching its guarantee is
    scheduled (forced), in admission order. With ``repack`` (the fallback when that fails, since
    Algorithm 1 never moves a job it shrinks) every protected job first gives up its resources and
    all are placed again, most GPUs of minimum demand first (then admission order), each preferring
    its current nodes. Returns the engine, the privileged jobs, the failures (job index, reason) and
    the privileged jobs the ``deadline`` left no time for (they hold nothing)."""
    eng = Algorithm1(problem, table, admission)
    eng.hold_running(skip_waiting=True)
    minimum = privileged(admission)  # protected guaranteed jobs, then admitted deadline jobs
    admitted = [table.index_of(name) for name in minimum]
    if repack:
        at = {j: i for i, j in enumerate(admitted)}
        privileged_jobs = sorted(admitted, key=lambda j: (-minimum[eng.names[j]], at[j]))
        for j in privileged_jobs:
            eng.set(j, None)
    else:
        privileged_jobs = [j for j in admitted if (cfg := eng.config(j)) is None or not eng.reaches(cfg.row)]
    failures: list[tuple[int, str]] = []
    for at, j in enumerate(privileged_jobs):
        if deadline is not None and deadline.expired():
            skipped = privileged_jobs[at:]
            for k in skipped:
                eng.set(k, None)
            return eng, privileged_jobs, failures, skipped
        if not eng.schedule_job(j, forced=True):
            failures.append((j, eng.infeasible_reason(j)))
    return eng, privileged_jobs, failures, []


def schedule(problem: RubickRound, table: CoefficientTable, admission: Admission | None = None) -> dict[str, Choice]:
    """Rubick Algorithm 1 on the round's coefficient table. Returns job name -> (row, ((node, gpus),
    ...)) for every job that runs (module docstring for the algorithm and the choices made).

    ``admission`` defaults to :func:`~optsched.rounds.rubick.admission.admit`. The result always passes
    :func:`~optsched.rounds.rubick.feasibility.violations`. Raises :class:`UnreachableGuaranteeError`
    (an ``InfeasibleError``) naming every protected job that cannot reach its guarantee, with the GPUs
    it needs and what is free or held by best-effort jobs; :func:`schedule_with_deferral` defers them
    instead. Admitted deadline jobs it cannot place are demoted (module docstring, "Deadlines").
    Deterministic: ties are broken by job and node name."""
    return _algorithm1_deadlines(problem, table, admission or admit_round(problem, table), None)[0].choices


def schedule_with_deferral(problem: RubickRound, table: CoefficientTable, admission: Admission | None = None,
                           deadline: Deadline | None = None) -> DeferralResult:
    """:func:`schedule`, deferring the protected jobs whose guarantee is unreachable this round instead
    of raising (module docstring, "Deferring unreachable guarantees"): each failure's
    :attr:`UnreachableGuaranteeError.jobs` move to ``waiting`` (a running one is preempted) and the round
    is run again with the reduced admission. Returns the choices, which pass
    :func:`~optsched.rounds.rubick.feasibility.violations` for the returned (reduced) admission, that
    admission and the deferred jobs with their reasons. When nothing is unreachable the choices are
    exactly :func:`schedule`'s and the admission is unchanged. With a ``deadline`` see
    :func:`algorithm1`."""
    return _with_deferral(problem, table, admission or admit_round(problem, table), deadline)[0]


def _with_deferral(problem: RubickRound, table: CoefficientTable, admission: Admission, deadline: Deadline | None
                   ) -> tuple[DeferralResult, bool]:
    deferred: dict[str, str] = {}
    while True:  # every failing pass defers >= 1 protected job; with none left Algorithm 1 cannot fail
        try:
            outcome, admission = _algorithm1_deadlines(problem, table, admission, deadline)
        except UnreachableGuaranteeError as e:
            new = {name: why for name, why in e.job_reasons.items() if name in admission.protected}
            if not new:  # pragma: no cover - the failing jobs are always protected ones
                raise
            log.info("rubick heuristic: deferring guaranteed job(s) %s: guarantee unreachable this round",
                     ", ".join(map(repr, new)))
            deferred.update(new)
            admission = admission.defer(new)
            continue
        if outcome.timed_out:
            deferred.update({n: why for n, why in outcome.timed_out.items() if n in admission.protected})
            admission = set_aside(admission, outcome.timed_out)
        return DeferralResult(outcome.choices, admission, deferred), outcome.cut


#: why an admitted deadline job that Algorithm 1 could not place is at risk (followed by the details)
_UNPLACED = "admitted, but no node shape fits a configuration meeting it this round"
#: why an admitted deadline job is demoted for a guaranteed job (module docstring, "Deadlines")
_IN_THE_WAY = ("admitted, but its configuration would leave an admitted guaranteed job without a node shape "
               "reaching its guarantee this round")


def _algorithm1_deadlines(problem: RubickRound, table: CoefficientTable, admission: Admission,
                          deadline: Deadline | None) -> tuple[_Outcome, Admission]:
    """:func:`_algorithm1`, demoting the admitted deadline jobs it cannot place or that keep a protected
    job from its guarantee (module docstring, "Deadlines"); the outcome and the admission it satisfies.
    Raises :class:`UnreachableGuaranteeError` only for protected jobs that fail without deadline jobs in
    their way."""
    in_the_way = False
    while True:
        try:
            return _algorithm1(problem, table, admission, deadline), admission
        except UnreachableGuaranteeError as e:
            dl = admission.deadlines
            admitted = [] if dl is None else list(dl.admitted)
            failing = {n: f"{_UNPLACED}: {why}" for n, why in e.job_reasons.items() if n in admitted}
            if failing:
                log.info("rubick heuristic: deadline job(s) %s demoted: no node shape meets them this round",
                         ", ".join(map(repr, failing)))
                admission = demote(admission, failing)
                continue
            if not admitted:
                raise
            if not in_the_way:  # are the deadline jobs in the protected jobs' way at all?
                try:
                    _algorithm1(problem, table, demote(admission, {n: _IN_THE_WAY for n in admitted}), deadline)
                except UnreachableGuaranteeError:
                    raise e from None
                in_the_way = True
            admission = demote(admission, {admitted[-1]: _IN_THE_WAY})


def _held(problem: RubickRound, table: CoefficientTable, admission: Admission) -> _Outcome:
    """The pass of Algorithm 1 whose ``deadline`` has passed before it starts, without building its engine: the
    start state of :func:`_privileged_phase` and nothing scheduled. Every running job holds its current
    configuration (:func:`~optsched.heuristics.round_state.held_running`: not a guaranteed job waiting for quota,
    nor one that must leave a draining node), except a privileged job whose current row does not keep its
    floor; the privileged jobs not held are timed out (lines 2-3 had no time for them). The same outcome as the
    engine's (``tests/heuristics/test_rubick_time_limit.py``) in O(running jobs) instead of the engine's O(jobs +
    rows) start: a 100,000-job round at a 1 s time limit (issue 26, item 2)."""
    floors = privileged(admission)
    choices = round_state.held_running(problem, table, admission)
    floored = [name for name in choices if name in floors]
    if floored:
        rows = [choices[name].row for name in floored]
        for name, ok in zip(floored, floor_ok(table, admission, np.array(rows, dtype=np.int64)).tolist()):
            if not ok:
                del choices[name]
    return _Outcome(choices, {name: TIME_LIMIT_REASON for name in floors if name not in choices}, True)


def _algorithm1(problem: RubickRound, table: CoefficientTable, admission: Admission,
                deadline: Deadline | None = None) -> _Outcome:
    """One pass of Algorithm 1 for a given admission. Past the ``deadline`` it schedules no more jobs:
    protected jobs it has not reached are left out (:attr:`_Outcome.timed_out`), the others keep what
    they hold (running jobs their allocation, queued jobs nothing); past it before it starts, :func:`_held`."""
    if deadline is not None and deadline.expired():
        return _held(problem, table, admission)
    eng, privileged_jobs, failures, skipped = _privileged_phase(problem, table, admission, repack=False,
                                                                deadline=deadline)
    if failures:
        log.debug("rubick heuristic: %d protected job(s) unplaced; repacking every protected job", len(failures))
        first = {eng.names[j]: why for j, why in failures}
        if not skipped:
            eng, privileged_jobs, failures, skipped = _privileged_phase(problem, table, admission, repack=True,
                                                                        deadline=deadline)
        if failures or skipped:
            repacked = tuple(f"repacking every protected job does not help either: {why}" for _, why in failures)
            raise UnreachableGuaranteeError("Rubick heuristic: a protected job cannot reach its performance guarantee",
                                            (*first.values(), *repacked), first)
    timed_out = {eng.names[j]: TIME_LIMIT_REASON for j in skipped}
    if skipped:
        return _Outcome(eng.choices(), timed_out, True)
    # lines 4-5: SortBySlope(best-effort queued U running), each scheduled once
    # (a job without rows cannot be scheduled: leaving it out of the sort changes nothing)
    done = set(privileged_jobs)
    has_rows = np.bincount(table.job_index, minlength=len(eng.names)) > 0
    rest = [j for j in np.flatnonzero(has_rows & ~eng.waiting).tolist() if j not in done
            and (not eng.protected[j] or eng.current[j] is not None)]
    ordered = _by_slope(eng, rest, deadline)
    committed = 0
    cut = ordered is None
    for j in ordered or ():
        if deadline is not None and deadline.expired():
            cut = True
            break
        committed += eng.schedule_job(j, forced=False)
    # preempted / unplaced jobs return to the queue: one try on the free resources
    left = [] if cut else [j for j in np.flatnonzero(has_rows & ~eng.waiting).tolist() if eng.config(j) is None]
    ordered = _by_slope(eng, left, deadline)
    cut = cut or ordered is None
    for j in ordered or ():
        if deadline is not None and deadline.expired():
            cut = True
            break
        eng.fill(j)
    out = eng.choices()
    log.debug("rubick heuristic: %d privileged, %d sorted jobs (%d changed), %d jobs run%s",
              len(privileged_jobs), len(rest), committed, len(out), " (cut by the time limit)" if cut else "")
    return _Outcome(out, timed_out, cut)


def deferral_message(problem: RubickRound, deferred: Mapping[str, str]) -> str:
    """The part of a decision's message naming every deferred guaranteed job and why ("" if none)."""
    if not deferred:
        return ""
    parts = [f"{name!r} ({'running, preempted' if problem.current(name) is not None else 'queued'}): {why}"
             for name, why in deferred.items()]
    return (f"deferred {len(deferred)} guaranteed job(s) whose performance guarantee cannot be reached this round "
            f"(they wait as if for quota): " + "; ".join(parts))


def algorithm1(problem: RubickRound, table: CoefficientTable, admission: Admission | None = None, *,
               defer: bool = False, deadline: Deadline | None = None) -> Schedule:
    """Algorithm 1 as a :class:`~optsched.rounds.rubick.decision.Schedule`: :func:`schedule` (raising
    :class:`UnreachableGuaranteeError`), or with ``defer`` :func:`schedule_with_deferral`, whose reduced
    admission the schedule carries and whose deferred jobs its message names.

    With a ``deadline`` Algorithm 1 stops scheduling once it has passed (between two jobs): the
    protected jobs it has not reached wait this round (a running one is preempted; they are moved to
    ``waiting`` like deferred jobs, with or without ``defer``), the other jobs keep what they hold, and
    the schedule is marked incomplete with a message saying so."""
    admission = admission or admit_round(problem, table)
    if not defer:
        outcome, admission = _algorithm1_deadlines(problem, table, admission, deadline)
        timed_out = {n: why for n, why in outcome.timed_out.items() if n in admission.protected}
        if outcome.timed_out:
            admission = set_aside(admission, outcome.timed_out)
        return Schedule(outcome.choices, admission, _cut_message(problem, outcome.cut, timed_out),
                        complete=not outcome.cut)
    result, cut = _with_deferral(problem, table, admission, deadline)
    timed_out = {k: v for k, v in result.deferred.items() if v == TIME_LIMIT_REASON}
    late = {k: v for k, v in result.deferred.items() if v != TIME_LIMIT_REASON}
    message = "; ".join(m for m in (deferral_message(problem, late), _cut_message(problem, cut, timed_out)) if m)
    return Schedule(result.choices, result.admission, message, complete=not cut)


def _cut_message(problem: RubickRound, cut: bool, timed_out: Mapping[str, str]) -> str:
    if not cut:
        return ""
    names = ", ".join(map(repr, list(timed_out)[:10])) + (" ..." if len(timed_out) > 10 else "")
    left = f"; guaranteed job(s) left waiting: {names}" if timed_out else ""
    return (f"partial: the time limit ran out during Algorithm 1, the jobs it had not reached keep their "
            f"allocation or wait{left}")


__all__ = ["Algorithm1", "DeferralResult", "TIME_LIMIT_REASON", "UnreachableGuaranteeError", "algorithm1",
           "deferral_message", "schedule", "schedule_with_deferral"]

"""The mutable state of a heuristic working on a Rubick round: which configuration (table row and
per-node shares) each job holds, on a :class:`~optsched.heuristics.placement.NodeLedger`, with the
operations Algorithm 1 and the baselines share: a job's objective term, mapping a table row onto
nodes, and GetBestPlan (Rubick Algorithm 1, line 21).

Values are *normalised* throughputs (throughput / reference throughput of the job), the unit of the
round objective (:func:`~optsched.rounds.rubick.objective.objective`).

* **Start.** Nothing is held; :meth:`RoundState.hold_running` gives every running job its exact
  current shares (its *current* configuration, which is *kept*: no reconfiguration penalty).
* **Mapping a row** (:meth:`RoundState.map_row`): the row's parts, largest first, go to distinct nodes
  of its GPU type by :meth:`~optsched.heuristics.placement.NodeLedger.best_fit` with the job's current
  nodes preferred; the part of s GPUs of a row with G GPUs, C CPUs and M GiB needs ``ceil(C s / G)``
  CPUs and ``M s / G`` GiB (:func:`~optsched.rounds.rubick.choice.part_share`'s rule). When the mapping
  is exactly the job's current placement and the row keeps it, the job keeps its exact current shares;
  when it is exactly the current placement with the current plan and the row does not keep it, the
  configuration is a *trim* (:func:`~optsched.rounds.rubick.choice.is_trim`: only CPUs or memory
  change, in place).
* **Objective terms** (:meth:`RoundState.contrib`, :meth:`RoundState.penalty`): normalised throughput
  times the job's weight, less the penalty of the configuration: 0 for a queued or kept job, the job's
  trim penalty for a trim, its reconfiguration penalty for any other change of a running job (issue 16,
  item 5; :meth:`~optsched.rounds.rubick.problem.RubickRound.penalties`). ``value`` holds the weighted
  normalised throughput of every row.
* **GetBestPlan** (:meth:`RoundState.best`): the row of highest normalised throughput that maps onto
  the given amounts (optionally only rows reaching the job's guarantee), or the job's running
  configuration when it fits and the penalty of the row's configuration (reconfiguration or trim)
  makes it the better choice.
* **Deadlines** (:mod:`optsched.rounds.rubick.deadlines`). An admitted deadline job is *protected* here
  like a protected guaranteed job (:func:`~optsched.rounds.rubick.deadlines.privileged`), and "reaches
  its guarantee" means "keeps its floor" (:func:`~optsched.rounds.rubick.deadlines.floor_ok`: meets the
  throughput its deadline needs, and its guarantee when it has one), so every rule on protected jobs
  binds it.
* **Topology** (:mod:`optsched.rounds.rubick.constraints`). The objective term of a job with a
  ``preferred`` rule includes its topology cost (:meth:`RoundState.topology_cost`, the rule of
  :func:`~optsched.rounds.rubick.objective.topology_cost` on node domain ids). GetBestPlan of a job
  with a rule (:meth:`RoundState.best_in_domains`) is GetBestPlan on each domain of the given nodes
  alone, fewest free GPUs first (best fit), and for a ``preferred`` rule also on all of them, the best
  by the job's objective term; mapping one row (:meth:`RoundState.map_row_in_domains`, the baselines')
  takes the first domain that holds it in the same order, or, for a ``preferred`` rule when none does,
  all the nodes.

Speed (same results): GetBestPlan on at most :data:`SMALL_CANDIDATES` nodes runs in plain Python on
lists (:meth:`RoundState.best_on`; numpy's per-call cost dominates on a few nodes); memory totals of 8
or more nodes are still summed by numpy, whose pairwise sum rounds differently from a running sum. The
ledger (:class:`RoundLedger`) reads and writes the free amounts through memoryviews of the same arrays.
A job's rows (:class:`JobRows`, with :class:`RowLists`) are made on first use and their parts per row
on first use.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from optsched.perf.coefficients import CoefficientTable
from optsched.heuristics.placement import MEM_TOL, Holding, NodeLedger, Share
from optsched.rounds.rubick.admission import Admission
from optsched.rounds.rubick.choice import Choice, is_kept
from optsched.rounds.rubick.constraints import must_leave, new_work_mask, node_constrained, node_rule_key
from optsched.rounds.rubick.deadlines import admitted_needs, floor_ok, privileged
from optsched.rounds.rubick.objective import topology_rules
from optsched.rounds.rubick.problem import RubickRound

#: tolerance of slope and objective comparisons (normalised-throughput units)
EPS = 1e-9

#: free amounts indexed by node: (GPUs, CPUs, GiB)
Amounts = tuple[np.ndarray, np.ndarray, np.ndarray]


class Config(NamedTuple):
    """A job's configuration: table ``row`` and its shares ``((node index, gpus, cpus, mem_gib), ...)``
    sorted by node index; ``kept`` when it is exactly the job's running configuration (no
    reconfiguration penalty), ``trim`` when it is a trim of it (the current plan and GPUs on the
    current nodes, other CPUs or memory: the trim penalty). A named tuple (immutable; hashing,
    comparison and field access in C: configurations key Algorithm 1's shrink cache, looked up
    millions of times)."""

    row: int
    shares: tuple[Share, ...]
    kept: bool
    trim: bool = False

    def share_on(self, node: int) -> tuple[int, int, float]:
        for n, g, c, m in self.shares:
            if n == node:
                return g, c, m
        return 0, 0, 0.0


@dataclass(eq=False, slots=True)
class JobRows:
    """A job's rows sorted by normalised throughput descending (then fewer GPUs, CPUs, memory, row):
    table ``rows`` and, aligned with them, their normalised ``value``, ``gpus``, ``cpus``, ``mem``,
    largest part (``max_part``), whether they meet the guarantee (``reaches``: reach the reference
    throughput, on the job's admission type when it has one,
    :meth:`~optsched.rounds.rubick.admission.Admission.meets_guarantee`), GPU type id
    (``type_id``) and shape; ``best_value`` is the first value (0 without rows). Read-only.

    The same columns as plain Python lists (``py``: :class:`RowLists`) serve the loops over a few rows
    and nodes, where numpy's per-call cost would dominate."""

    rows: np.ndarray
    value: np.ndarray
    gpus: np.ndarray
    cpus: np.ndarray
    mem: np.ndarray
    max_part: np.ndarray
    reaches: np.ndarray
    type_id: np.ndarray
    shapes: tuple[tuple[int, ...], ...]
    best_value: float
    py: "RowLists"


class RowLists:
    """:class:`JobRows`' columns as Python lists (same order; read-only), the most GPUs of a row
    (``max_gpus``, 0 without rows), the distinct GPU counts ascending (``gpu_steps``) and each row's
    parts (:meth:`part`)."""

    __slots__ = ("rows", "value", "gpus", "cpus", "mem", "max_part", "reaches", "type_id", "shapes", "max_gpus",
                 "gpu_steps", "_parts")

    def __init__(self, rows: list[int], value: list[float], gpus: list[int], cpus: list[int], mem: list[float],
                 max_part: list[int], reaches: list[bool], type_id: list[int],
                 shapes: tuple[tuple[int, ...], ...]) -> None:
        self.rows, self.value, self.gpus, self.cpus, self.mem = rows, value, gpus, cpus, mem
        self.max_part, self.reaches, self.type_id, self.shapes = max_part, reaches, type_id, shapes
        self.max_gpus = max(gpus, default=0)
        #: the distinct GPU counts of the rows, ascending
        self.gpu_steps = sorted(set(gpus))
        self._parts: list[list[tuple[int, int, float]] | None] = [None] * len(rows)

    def part(self, i: int) -> list[tuple[int, int, float]]:
        """Row ``i``'s parts: ``(gpus, cpus, mem)`` per part of its shape, largest first, by
        :func:`~optsched.rounds.rubick.choice.part_share`'s rule (``ceil(C s / G)`` CPUs and ``M s / G``
        GiB for a part of ``s`` of the row's G GPUs, C CPUs and M GiB); made on first use (a round
        looks at few rows of most jobs)."""
        out = self._parts[i]
        if out is None:
            G, C, M = self.gpus[i], self.cpus[i], self.mem[i]
            out = self._parts[i] = [(s, math.ceil(C * s / G - 1e-9), M * s / G) for s in self.shapes[i]]
        return out

    @property
    def parts(self) -> list[list[tuple[int, int, float]]]:
        """:meth:`part` of every row."""
        return [self.part(i) for i in range(len(self.rows))]


class _RowsOfJobs(dict[int, JobRows]):
    """:class:`JobRows` of every job of a table, by job index; each made on first use (``__missing__``:
    a look-up of a job already made is a plain dict look-up) from one sort of all rows (by job, then
    normalised throughput descending, fewer GPUs, CPUs, memory, row index)."""

    def __init__(self, table: CoefficientTable, value: np.ndarray, row_type: np.ndarray, reaches_all: np.ndarray
                 ) -> None:
        super().__init__()
        k_all = np.arange(len(table))
        self._table = table
        self._order = order = np.lexsort((k_all, table.mem_gib, table.cpus, table.gpus, -value, table.job_index))
        #: job j's rows are positions ``bounds[j]:bounds[j + 1]`` of the sorted columns (``cols``)
        self.bounds_array = np.searchsorted(table.job_index[order], np.arange(len(table.jobs) + 1))
        self._bounds: list[int] = self.bounds_array.tolist()
        max_part = np.fromiter((max(s) for s in table.gpus_per_node), dtype=np.int64, count=len(table))
        #: per table row: whether it keeps its job's floor, its guarantee or its deadline's need (Python
        #: list: read one at a time)
        self.reaches_row: list[bool] = reaches_all.tolist()
        #: every row's value, GPUs, CPUs, GiB, largest part, whether it reaches the guarantee and GPU type,
        #: sorted by job, then as :class:`JobRows`
        self.cols = self._cols = tuple(x[order] for x in (value, table.gpus, table.cpus, table.mem_gib, max_part,
                                                          reaches_all, row_type))
        self._best: list[float] | None = None

    def best_value(self, j: int) -> float:
        """The best normalised throughput of job ``j`` (:attr:`JobRows.best_value`, without making its
        :class:`JobRows`)."""
        if j in self:
            return self[j].best_value
        if self._best is None:
            self._best = self._cols[0].tolist()
        a, b = self._bounds[j], self._bounds[j + 1]
        return self._best[a] if b > a else 0.0

    def __missing__(self, j: int) -> JobRows:
        if not 0 <= j < len(self._bounds) - 1:
            raise IndexError(f"job index {j} out of range")
        a, b = self._bounds[j], self._bounds[j + 1]
        rows = self._order[a:b]
        cols = [x[a:b] for x in self._cols]
        val = cols[0]
        rows_l = rows.tolist()
        gpn = self._table.gpus_per_node
        shapes = tuple([gpn[k] for k in rows_l])
        out = self[j] = JobRows(rows, *cols, shapes, float(val[0]) if b > a else 0.0,  # type: ignore[call-arg]
                                RowLists(rows_l, *(x.tolist() for x in cols), shapes))  # type: ignore[arg-type]
        return out


class RoundLedger(NodeLedger):
    """The node ledger of a Rubick round: free GPUs and CPUs as int64 and GiB as float64 arrays (as
    :meth:`~optsched.core.round.RoundProblem.free_arrays` makes them), read and written one node at a
    time through memoryviews of the same arrays (``views``: GPUs, CPUs, GiB), which cost a fraction of
    numpy's scalar indexing and give Python numbers. :meth:`assign` is :meth:`NodeLedger.assign`
    through them: the same arithmetic, in the same order, on the same arrays."""

    def __init__(self, node_names: list[str], node_types: np.ndarray, free_gpus: np.ndarray, free_cpus: np.ndarray,
                 free_mem: np.ndarray, holders: int, groups: np.ndarray) -> None:
        super().__init__(node_names, node_types, free_gpus, free_cpus, free_mem, holders, groups=groups)
        for a, kind in ((free_gpus, "i"), (free_cpus, "i"), (free_mem, "f")):
            assert a.dtype.kind == kind and a.dtype.itemsize == 8 and a.ndim == 1, a.dtype
        self.views = (memoryview(free_gpus), memoryview(free_cpus), memoryview(free_mem))
        self._held = [memoryview(row) for row in self.group_gpus]
        self._group: list[int] = self.groups.tolist()

    def assign(self, holder: int, new: Holding | None) -> None:
        old = self.holding[holder]
        if old is new:
            return
        fg, fc, fm = self.views
        held, on, touched = self._held[self._group[holder]], self.holders_on, self.touched
        if old is not None and new is not None and len(old.shares) == 1 == len(new.shares) \
                and old.shares[0][0] == new.shares[0][0]:
            # one node before and after (a shrink, a restore): the same arithmetic, no set changes
            (n, g, c, m), (_, g2, c2, m2) = old.shares[0], new.shares[0]
            fg[n] += g
            fc[n] += c
            fm[n] += m
            held[n] -= g
            fg[n] -= g2
            fc[n] -= c2
            fm[n] -= m2
            held[n] += g2
            touched.add(n)
            self.holding[holder] = new
            if self.log is not None:
                self.log.append((holder, old))
            return
        if old is not None:
            for n, g, c, m in old.shares:
                fg[n] += g
                fc[n] += c
                fm[n] += m
                held[n] -= g
                on[n].discard(holder)
                touched.add(n)
        if new is not None:
            for n, g, c, m in new.shares:
                fg[n] -= g
                fc[n] -= c
                fm[n] -= m
                held[n] += g
                on[n].add(holder)
                touched.add(n)
        self.holding[holder] = new
        if self.log is not None:
            self.log.append((holder, old))


class _EligibleMasks:
    """``masks[j]``: the read-only node mask of :attr:`RoundState.eligible` for job ``j``, made on first use and
    shared by every job with the same GPU types, node rule and admission type (so a round of J jobs on N nodes
    holds a few masks of N booleans, not a J x N matrix: 800 MB at 100,000 jobs on 8,000 nodes)."""

    def __init__(self, problem: RubickRound, names: list[str], node_names: list[str], node_type: np.ndarray,
                 job_types: np.ndarray, admitted_type: dict[str, int], node_rules: bool) -> None:
        self.problem, self.names, self.node_names, self.node_type = problem, names, node_names, node_type
        self.job_types, self.admitted_type, self.node_rules = job_types, admitted_type, node_rules
        self._of_job: dict[int, np.ndarray] = {}
        self._of_key: dict[tuple, np.ndarray] = {}

    def __getitem__(self, j: int) -> np.ndarray:
        mask = self._of_job.get(j)
        if mask is None:
            name = self.names[j]
            job = self.problem.job(name) if self.node_rules else None
            key = (self.job_types[j].tobytes(), node_rule_key(job) if job is not None else None,
                   self.admitted_type.get(name))
            mask = self._of_key.get(key)
            if mask is None:
                mask = self.job_types[j][self.node_type]
                if job is not None:
                    mask &= new_work_mask(self.problem, job, self.node_names)
                if key[2] is not None:  # a protected job admitted on one GPU type runs there
                    mask &= self.node_type == key[2]
                mask.setflags(write=False)
                self._of_key[key] = mask
            self._of_job[j] = mask
        return mask


class _CurrentNodeMasks:
    """``masks[j]`` (or ``masks[j, nodes]``): the nodes of job ``j``'s current shares
    (:attr:`RoundState.current_nodes`) as a boolean mask over the nodes, made on use."""

    def __init__(self, state: "RoundState", n_nodes: int) -> None:
        self.state, self.n_nodes = state, n_nodes

    def __getitem__(self, key: int | tuple[int, np.ndarray]) -> np.ndarray:
        j, nodes = key if isinstance(key, tuple) else (key, None)
        mask = np.zeros(self.n_nodes, dtype=bool)
        mine = self.state.current_nodes[j]
        if mine:
            mask[list(mine)] = True
        return mask if nodes is None else mask[nodes]


def keepable(problem: RubickRound, job: str, node_rules: bool) -> bool:
    """Whether running ``job`` has a current configuration to keep: not when it runs on a draining node (it is
    placed anew or preempted); ``node_rules``: :func:`~optsched.rounds.rubick.constraints.node_constrained`."""
    return not (node_rules and must_leave(problem, problem.job(job)))


def held_running(problem: RubickRound, table: CoefficientTable, admission: Admission) -> dict[str, Choice]:
    """The choices of :meth:`RoundState.hold_running` with ``skip_waiting`` (every running job on its current
    row and parts, in job order, but a guaranteed job ``admission`` keeps waiting and a job that must leave a
    draining node, :func:`keepable`) without building the state: O(running jobs), for a method whose time limit
    has passed before it starts (issue 26, item 2: a 100,000-job round at a 1 s limit)."""
    node_rules = node_constrained(problem)
    current_row = table.current_row
    out: dict[str, Choice] = {}
    for j in np.flatnonzero(current_row >= 0).tolist():
        name = table.jobs[j]
        cur = problem.current(name)
        if cur is None or name in admission.waiting or not keepable(problem, name, node_rules):
            continue
        parts = tuple(sorted(cur.placement.gpu_parts, key=lambda p: (-p[1], p[0])))  # RoundState.choices' order
        out[name] = Choice(int(current_row[j]), parts)
    return out


class RoundState:
    """Configurations of the jobs of a Rubick round on a node ledger (module docstring)."""

    def __init__(self, problem: RubickRound, table: CoefficientTable, admission: Admission) -> None:
        self.problem, self.table, self.admission = problem, table, admission
        nodes = sorted(problem.cluster.nodes, key=lambda n: n.name)
        node_names = [n.name for n in nodes]
        types = sorted({n.gpu_type for n in nodes} | set(table.gpu_type))
        self.type_id = {name: i for i, name in enumerate(types)}
        node_type = np.array([self.type_id[n.gpu_type] for n in nodes], dtype=np.int64)
        n_jobs, n_nodes = len(table.jobs), len(nodes)
        self.names = table.jobs
        floors = privileged(admission)  # protected guaranteed jobs and admitted deadline jobs (module docstring)
        self.protected = np.array([name in floors for name in self.names], dtype=bool)
        #: per job: the samples/s its admitted deadline needs (0: none)
        self.deadline_need = admitted_needs(table, admission)
        #: ledger groups: 1 = protected jobs, 0 = the others
        self.ledger = ledger = RoundLedger(node_names, node_type, *problem.free_arrays(node_names), n_jobs,
                                           groups=self.protected.astype(np.int64))
        #: memoryviews of the free amounts (GPUs, CPUs, GiB): one node at a time, as Python numbers
        self.free_views = ledger.views
        self.node_names = ledger.names
        self.node_type = node_type
        self.node_type_list: list[int] = node_type.tolist()
        self.free_gpus, self.free_cpus, self.free_mem = ledger.free_gpus, ledger.free_cpus, ledger.free_mem
        #: per job: its weight and its penalties (RubickRound.penalties), as Python floats
        pens = [problem.penalties(name) for name in self.names]
        self.weight: list[float] = [problem.weight(name) for name in self.names]
        self.value = table.throughput / table.reference_throughput[table.job_index]
        if any(w != 1.0 for w in self.weight):
            self.value = self.value * np.asarray(self.weight)[table.job_index]
        self.waiting = np.array([name in admission.waiting for name in self.names], dtype=bool)
        self.running = np.asarray(table.current_row) >= 0
        self.reconfig_penalty: list[float] = [p.reconfig for p in pens]
        self.trim_penalty: list[float] = [p.trim for p in pens]
        self.preempt_penalty: list[float] = [p.preempt for p in pens]
        #: on_current_node[j]: the nodes of job j's current shares, as a mask (made on use)
        self.on_current_node = _CurrentNodeMasks(self, n_nodes)
        self.current: list[Config | None] = [None] * n_jobs
        self.current_parts: list[tuple[tuple[str, int], ...] | None] = [None] * n_jobs
        #: per row: whether it has its job's current plan (a mapping onto the current placement trims
        #: the job unless it keeps it); made on first use
        self._same_plan: dict[int, bool] = {}
        #: the nodes of each job's current shares (empty for a queued job)
        self.current_nodes: list[frozenset[int]] = [frozenset()] * n_jobs
        row_type = np.array([self.type_id[x] for x in table.gpu_type], dtype=np.int64)
        job_types = np.zeros((n_jobs, len(types)), dtype=bool)
        job_types[table.job_index, row_type] = True
        #: eligible[j]: the nodes with a GPU type job j has rows on (its admission type when it has one:
        #: :attr:`~optsched.rounds.rubick.admission.Admission.gpu_type`) where job j may get new GPUs (a
        #: ready node its selector matches: :func:`~optsched.rounds.rubick.constraints.new_work_mask`;
        #: a job on a cordoned node keeps, trims or shrinks its shares there, never through a new mapping);
        #: a read-only mask per job, shared by the jobs with the same types and rules (:class:`_EligibleMasks`)
        self.eligible = _EligibleMasks(problem, self.names, node_names, node_type, job_types,
                                       {name: self.type_id[t] for name, t in admission.gpu_type.items()},
                                       node_constrained(problem))
        #: topology rules (module docstring, "Topology"): per job, the domain id of every node at its
        #: rule's level (None: no rule, or a preferred one that costs nothing), as an array and a list
        self.topo_dom: list[np.ndarray | None] = [None] * n_jobs
        self.topo_dom_list: list[list[int] | None] = [None] * n_jobs
        #: per job: whether its rule is required, and the cost per extra domain of a preferred one
        self.topo_required: list[bool] = [False] * n_jobs
        self.topo_cost: list[float] = [0.0] * n_jobs
        for j, (dom, required, cost) in topology_rules(problem, self.names, node_names).items():
            self.topo_dom[j], self.topo_dom_list[j] = dom, dom.tolist()
            self.topo_required[j], self.topo_cost[j] = required, cost
        #: every job's rows sorted (made per job on first use: a large queue is mostly never looked at)
        self.rows = _RowsOfJobs(table, self.value, row_type, floor_ok(table, admission))
        for j in np.flatnonzero(np.asarray(table.current_row) >= 0):
            j = int(j)
            cur = problem.current(self.names[j])
            if cur is not None and keepable(problem, self.names[j], self.eligible.node_rules):
                shares = tuple(sorted((self.ledger.index[n], s.gpus, s.cpus, float(s.mem_gib))
                                      for n, s in cur.placement.shares))
                self.current[j] = Config(int(table.current_row[j]), shares, True)
                self.current_parts[j] = tuple(sorted(cur.placement.gpu_parts))
                self.current_nodes[j] = frozenset(n for n, *_ in shares)

    # -- state ----------------------------------------------------------------------------------
    def config(self, j: int) -> Config | None:
        return self.ledger.holding[j]  # type: ignore[return-value]

    def set(self, j: int, new: Config | None) -> None:
        self.ledger.assign(j, new)

    def hold_running(self, skip_waiting: bool = False) -> None:
        """Every running job holds its exact current shares (with ``skip_waiting``, not the guaranteed
        jobs waiting for quota)."""
        for j, cur in enumerate(self.current):
            if cur is not None and not (skip_waiting and self.waiting[j]):
                self.set(j, cur)

    def contrib(self, j: int, cfg: Config | None) -> float:
        """Job ``j``'s term of the round objective under ``cfg`` (its topology cost included)."""
        if cfg is None:
            return -self.preempt_penalty[j] if self.running[j] else 0.0
        if self.topo_cost[j]:
            return float(self.value[cfg.row]) - self.penalty(j, cfg) - self.topology_cost(j, cfg)
        if cfg.kept or not self.running[j]:  # :meth:`penalty`, inlined (called millions of times)
            return float(self.value[cfg.row])
        return float(self.value[cfg.row]) - (self.trim_penalty[j] if cfg.trim else self.reconfig_penalty[j])

    def topology_cost(self, j: int, cfg: Config) -> float:
        """What the domains of ``cfg`` beyond the first cost job ``j`` (a preferred topology rule,
        :func:`~optsched.rounds.rubick.objective.topology_cost`; 0 for any other job)."""
        cost = self.topo_cost[j]
        if not cost:
            return 0.0
        dom = self.topo_dom_list[j]
        assert dom is not None
        return cost * (len({dom[n] for n, g, _, _ in cfg.shares if g > 0}) - 1)

    def penalty(self, j: int, cfg: Config) -> float:
        """What ``cfg`` costs job ``j`` (module docstring, "Objective terms")."""
        if cfg.kept or not self.running[j]:
            return 0.0
        return self.trim_penalty[j] if cfg.trim else self.reconfig_penalty[j]

    def same_plan(self, j: int, row: int) -> bool:
        """Whether table ``row`` (of running job ``j``) has the job's current plan."""
        out = self._same_plan.get(row)
        if out is None:
            cur = self.problem.current(self.names[j])
            out = self._same_plan[row] = cur is not None and self.table.plans[row] == cur.plan
        return out

    def on_current(self, j: int, row: int, shares: "list[Share] | tuple[Share, ...]") -> tuple[bool, bool]:
        """(kept, trim) of job ``j`` on ``row`` with ``shares``: whether they are exactly its current
        placement (same nodes, same GPUs) and the row keeps it, or trims it (module docstring)."""
        if self.current_parts[j] is None:
            return False, False
        placed = tuple(sorted((self.node_names[n], g) for n, g, _, _ in shares if g > 0))
        if placed != self.current_parts[j]:
            return False, False
        if is_kept(self.problem, self.table, j, Choice(row, placed)):
            return True, False
        return False, self.same_plan(j, row)

    def fits(self, cfg: Config, amounts: Amounts | None = None) -> bool:
        return self.ledger.fits(cfg.shares, *(amounts or self.free_views))

    def reaches(self, row: int) -> bool:
        """Whether ``row`` keeps its job's floor: its guarantee, on its admission type when it has one, or its
        deadline's need (module docstring, "Deadlines")."""
        return self.rows.reaches_row[row]

    def position(self, cfg: Config | None) -> tuple[float, int, int]:
        """(normalised throughput, GPUs, CPUs) of ``cfg`` (zeros for none)."""
        if cfg is None:
            return 0.0, 0, 0
        return float(self.value[cfg.row]), int(self.table.gpus[cfg.row]), int(self.table.cpus[cfg.row])

    def choices(self) -> dict[str, Choice]:
        """Job name -> choice of every job holding a configuration (parts largest first, then node)."""
        out: dict[str, Choice] = {}
        for j in range(len(self.names)):
            cfg = self.config(j)
            if cfg is not None:
                ordered = sorted(cfg.shares, key=lambda s: (-s[1], s[0]))
                out[self.names[j]] = Choice(cfg.row, tuple((self.node_names[n], g) for n, g, _, _ in ordered if g > 0))
        return out

    # -- mapping rows and GetBestPlan -------------------------------------------------------------------
    def map_row(self, j: int, i: int, cand: np.ndarray, amounts: Amounts, base: np.ndarray | None) -> Config | None:
        """Map row ``rows[j].rows[i]`` onto distinct nodes of ``cand`` with ``amounts`` (module
        docstring): best fit, the job's current nodes first, then nodes where the part fits in ``base``
        (free before a walk), then the fewest free GPUs, then ``cand`` order."""
        rows = self.rows[j]
        shares = self.ledger.best_fit(rows.py.part(i), cand, amounts=amounts,
                                      allowed=self.node_type[cand] == rows.type_id[i],
                                      prefer=self.on_current_node[j, cand], base=base)
        return None if shares is None else self._config(j, rows.py.rows[i], shares, amounts)

    def map_row_in_domains(self, j: int, i: int, cand: np.ndarray, amounts: Amounts,
                           base: np.ndarray | None) -> Config | None:
        """:meth:`map_row` for any job: one with a topology rule maps the row onto one domain of ``cand``
        (the first that holds it, fewest free GPUs first: :meth:`domain_groups`), or, for a preferred
        rule when no domain does, onto all of ``cand``."""
        if self.topo_dom[j] is None:
            return self.map_row(j, i, cand, amounts, base)
        for group in self.domain_groups(j, cand, amounts, self.rows[j].py.gpus[i]):
            cfg = self.map_row(j, i, group, amounts, base)
            if cfg is not None:
                return cfg
        return None if self.topo_required[j] else self.map_row(j, i, cand, amounts, base)

    def _config(self, j: int, row: int, shares: list[Share], amounts: Amounts | None,
                lists: tuple[list[int], list[int], list[int], list[float]] | None = None) -> Config | None:
        """Job ``j`` on ``row`` with ``shares``: its exact current shares when the mapping is its current
        placement and the row keeps it (None if those do not fit), else a new configuration. What is
        available is ``amounts`` (indexed by node) or, when None, ``lists``: (nodes, GPUs, CPUs, GiB)
        with nothing elsewhere (:meth:`best_on`)."""
        trim = False
        if self.current_parts[j] is not None:
            kept, trim = self.on_current(j, row, shares)
            if kept:
                cur = self.current[j]
                assert cur is not None
                cfg = Config(row, cur.shares, True)
                if amounts is not None:
                    return cfg if self.fits(cfg, amounts) else None
                assert lists is not None
                nodes, ag, ac, am = lists
                at = {n: p for p, n in enumerate(nodes)}
                for n, g, c, m in cfg.shares:
                    p = at.get(n)
                    have = (0, 0, 0.0) if p is None else (ag[p], ac[p], am[p])
                    if not (have[0] >= g and have[1] >= c and have[2] >= m - MEM_TOL):
                        return None
                return cfg
        return Config(row, tuple(sorted(shares)), False, trim)

    def best(self, j: int, cand: np.ndarray, amounts: Amounts, *, guarantee: bool, keep: bool,
             base: np.ndarray | None = None, topology: bool = True) -> Config | None:
        """GetBestPlan (module docstring): the best configuration of job ``j`` on ``amounts`` of the
        nodes ``cand``; ``keep`` allows its running configuration, ``guarantee`` restricts to rows
        reaching the job's reference throughput. Up to :data:`SMALL_CANDIDATES` nodes are handled by
        :meth:`best_on` in plain Python (same result, without numpy's per-call cost). A job with a
        topology rule is placed by :meth:`best_in_domains` unless ``topology`` is False (the caller's
        ``cand`` then lies in one domain, or the caller reads only a position that ignores the rule)."""
        if topology and self.topo_dom[j] is not None:
            return self.best_in_domains(j, cand, amounts, guarantee=guarantee, keep=keep, base=base)
        return self._best(j, cand, amounts, guarantee=guarantee, keep=keep, base=base)

    def domain_groups(self, j: int, cand: np.ndarray, amounts: Amounts, least: int = 0) -> list[np.ndarray]:
        """The nodes of ``cand`` by domain of job ``j``'s topology level (each in ``cand`` order), the
        domains with at least ``least`` free GPUs only, fewest free GPUs first (best fit), then domain id."""
        dom = self.topo_dom[j]
        assert dom is not None
        d = dom[cand]
        if d.size == 0:
            return []
        if d.min() == d.max():
            return [cand] if int(amounts[0][cand].sum()) >= least else []
        order = np.argsort(d, kind="stable")
        ids, starts = np.unique(d[order], return_index=True)
        groups = np.split(cand[order], starts[1:])
        room = np.add.reduceat(amounts[0][cand[order]], starts)
        keep = np.flatnonzero(room >= least)
        keep = keep[np.lexsort((ids[keep], room[keep]))]
        return [groups[i] for i in keep]

    def best_in_domains(self, j: int, cand: np.ndarray, amounts: Amounts, *, guarantee: bool, keep: bool,
                        base: np.ndarray | None = None) -> Config | None:
        """GetBestPlan of a job with a topology rule (module docstring, "Topology"): the best of
        GetBestPlan on each domain of ``cand`` alone (best fit first: fewest free GPUs; a domain too small
        for any row is skipped; done once a configuration scores the job's best value), and for a
        preferred rule also on all of ``cand``, by the job's term of the objective (its topology cost
        included); ties go to the first found."""
        rows = self.rows[j]
        chosen: Config | None = None
        score = -math.inf
        top = rows.best_value - EPS
        for group in self.domain_groups(j, cand, amounts, rows.py.gpu_steps[0] if rows.py.gpu_steps else 0):
            cfg = self._best(j, group, amounts, guarantee=guarantee, keep=keep, base=base)
            if cfg is None:
                continue
            s = self.contrib(j, cfg)
            if s > score + EPS:
                chosen, score = cfg, s
                if score >= top:
                    return chosen
        if not self.topo_required[j]:
            cfg = self._best(j, cand, amounts, guarantee=guarantee, keep=keep, base=base)
            if cfg is not None and self.contrib(j, cfg) > score + EPS:
                chosen = cfg
        elif keep and chosen is None and self.current[j] is not None:
            chosen = self._best(j, cand[:0], amounts, guarantee=guarantee, keep=True)  # kept, if it fits
        return chosen

    def _best(self, j: int, cand: np.ndarray, amounts: Amounts, *, guarantee: bool, keep: bool,
              base: np.ndarray | None = None) -> Config | None:
        """:meth:`best` without topology rules."""
        rows = self.rows[j]
        chosen: Config | None = None
        score = -math.inf
        if keep and self.current[j] is not None:
            cur = self.current[j]
            assert cur is not None
            if (not guarantee or self.reaches(cur.row)) and self.fits(cur, amounts):
                chosen, score = cur, float(self.value[cur.row])
        if cand.size == 0 or rows.rows.size == 0:
            return chosen
        if cand.size <= SMALL_CANDIDATES:
            return self.best_on(j, cand.tolist(), amounts[0][cand].tolist(), amounts[1][cand].tolist(),
                                amounts[2][cand].tolist(), None if base is None else base[cand].tolist(), amounts,
                                guarantee=guarantee, chosen=chosen, score=score)
        ag, ac, am = amounts[0][cand], amounts[1][cand], amounts[2][cand]
        mask = ((rows.gpus <= ag.sum()) & (rows.max_part <= ag.max()) & (rows.cpus <= ac.sum())
                & (rows.mem <= am.sum() + MEM_TOL))
        if guarantee:
            mask &= rows.reaches
        for i in np.flatnonzero(mask):
            if rows.value[i] <= score + EPS:
                break
            cfg = self.map_row(j, int(i), cand, amounts, base)
            if cfg is None:
                continue
            s = float(rows.value[i]) - self.penalty(j, cfg)
            if s > score + EPS:
                chosen, score = cfg, s
            break
        return chosen

    def best_on(self, j: int, nodes: list[int], ag: list[int], ac: list[int], am: list[float],
                base: list[int] | None, amounts: Amounts | None, *, guarantee: bool, chosen: Config | None = None,
                score: float = -math.inf) -> Config | None:
        """:meth:`best` on a few ``nodes`` given as lists: their amounts ``ag``, ``ac``, ``am`` (aligned
        with ``nodes``; ``amounts`` indexed by node for the kept check of :meth:`_config`, or None when
        nothing is available elsewhere) and ``base`` GPUs; ``chosen`` and ``score`` are the running
        configuration's, when allowed. The
        same rows are tried in the same order as :meth:`best`: a row below ``score`` ends the search
        whether or not it passes the totals filter, since every later row is lower still."""
        py = self.rows[j].py
        tg, mg, tc = sum(ag), max(ag), sum(ac)
        # numpy sums 8 or more floats pairwise: the same total as the table's filter in :meth:`best`
        tm = (sum(am) if len(am) < 8 else float(np.array(am).sum())) + MEM_TOL
        value, gpus, max_part, cpus, mem, reaches = py.value, py.gpus, py.max_part, py.cpus, py.mem, py.reaches
        for i in range(len(value)):
            val = value[i]
            if val <= score + EPS:
                break
            if (gpus[i] > tg or max_part[i] > mg or cpus[i] > tc or mem[i] > tm) or (guarantee and not reaches[i]):
                continue
            shares = self._best_fit_on(j, py.type_id[i], py.part(i), nodes, ag, ac, am, base)
            if shares is None:
                continue
            cfg = self._config(j, py.rows[i], shares, amounts, (nodes, ag, ac, am))
            if cfg is None:
                continue
            s = val - self.penalty(j, cfg)
            if s > score + EPS:
                chosen, score = cfg, s
            break
        return chosen

    def _best_fit_on(self, j: int, type_id: int, parts: list[tuple[int, int, float]], nodes: list[int],
                     ag: list[int], ac: list[int], am: list[float], base: list[int] | None) -> list[Share] | None:
        """:meth:`~optsched.heuristics.placement.NodeLedger.best_fit` of ``parts`` on a few ``nodes`` (of
        ``type_id``), with the job's current nodes preferred: the same ranking as :meth:`map_row`'s."""
        types, mine = self.node_type_list, self.current_nodes[j]
        open_ = [types[n] == type_id for n in nodes]
        shares: list[Share] = []
        for g, c, m in parts:
            m_tol = m - MEM_TOL
            at, key = -1, None
            for p, n in enumerate(nodes):
                if open_[p] and ag[p] >= g and ac[p] >= c and am[p] >= m_tol:
                    k = ((0 if n in mine else 2) + (1 if base is not None and base[p] < g else 0), ag[p], p)
                    if at < 0 or k < key:  # type: ignore[operator]
                        at, key = p, k
            if at < 0:
                return None
            open_[at] = False
            shares.append((nodes[at], g, c, m))
        return shares


#: GetBestPlan on at most this many nodes runs in plain Python (:meth:`RoundState.best_on`)
SMALL_CANDIDATES = 24


__all__ = ["Amounts", "Config", "EPS", "JobRows", "RoundLedger", "RoundState", "RowLists", "SMALL_CANDIDATES"]

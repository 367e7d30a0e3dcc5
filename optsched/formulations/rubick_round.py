"""The Rubick round as an exact CP-SAT model (Rubick Sec. 3 and 5; the heuristic it must never lose
to is :mod:`optsched.heuristics.rubick`).

Given a :class:`~optsched.rounds.rubick.problem.RubickRound` and its coefficient table (rows = candidate
configurations: plan, GPUs per node, CPUs, memory, throughput), choose at most one row per job and
map the row's per-node parts onto distinct nodes:

* ``y[k]`` (bool): row k is chosen. ``sum_k y[k] <= 1`` per job; ``= 1`` over the rows reaching the
  reference throughput (on its admission type when it has one, quotas per GPU type) for a *protected*
  guaranteed job (performance guarantee) and over the rows meeting the throughput its deadline needs for
  an *admitted deadline job* (both for a job that is both; :func:`~optsched.rounds.rubick.deadlines.floor_ok`);
  no row for a guaranteed job waiting for quota (admission in
  :func:`~optsched.rounds.rubick.deadlines.admit_round` fixes which guaranteed jobs the quotas cover and
  which deadline jobs are admitted, so both are decided before the model).
* ``x[k, s, n]`` (bool): a part of s GPUs of row k lies on node n; ``sum_n x[k,s,n] = mult_k(s) y[k]``
  and at most one part of a row per node. Only nodes of the row's GPU type with room for the part
  alone get a variable. TP groups stay inside a node because a row's parts are the shapes the
  performance model validated (TP never spans a part).
* A running job's current row has two variables: ``y[current]`` keeps it where it runs, with its exact
  shares and no ``x`` (``keep``); ``m[current]`` moves it, the same plan and resources on other nodes,
  with ``x`` like any row (a reconfiguration: Algorithm 1 makes such moves, and a protected job's only
  rows reaching its guarantee may be its current one, so a model without them can be infeasible where
  the heuristic is not; one more row per running job). A job on a draining node cannot be kept: its
  current row is an ordinary row (``x`` off the draining node, a reconfiguration) and it has no rows in
  place.
* ``t[k]`` (bool, running jobs only): row k *in place* — a row of the job's current plan and the shape
  of its current placement (:func:`in_place_rows`) on exactly its current nodes with its current GPUs
  per node: a *trim* (issue 16, item 5; :func:`~optsched.rounds.rubick.choice.is_trim`), each part
  getting ``part_share`` of row k, for ``trim_penalty``; or, for a row of the CPUs and memory the job
  holds, the job kept on its exact current shares, for nothing (both by
  :func:`~optsched.rounds.rubick.choice.placement_of` and
  :func:`~optsched.rounds.rubick.choice.change_penalty`, so the model prices every choice as the
  objective does). Like the current row it has no ``x``; it counts in the job's at-most-one
  (exactly-one when protected) with the ``y`` of the same job. Row k may still be chosen as ``y[k]``
  with its parts elsewhere, which is a reconfiguration.
* Node capacities: GPUs, CPUs and memory (memory in MiB, part demands rounded up and capacities down,
  so a model-feasible answer is feasible).
* Objective: ``max sum_k w_j (thr_k / ref_j) (y[k] + t[k]) - reconfig_penalty (running jobs reconfigured)
  - trim_penalty (running jobs trimmed: t of a trim) - preempt_penalty (running jobs not running)``, with
  ``w_j`` the job's weight and each penalty the job's own
  (:meth:`~optsched.rounds.rubick.problem.RubickRound.penalties`),
  weights scaled by 10^6 to integers (the reported objective is recomputed in floating point by
  :func:`~optsched.rounds.rubick.objective.objective`).

**Encodings.** ``per-node`` is the model above: ``|rows| + |in-place rows| + sum_k |parts_k| x
|eligible nodes|`` variables and ``|jobs| + |rows| + 3 |nodes|`` constraints (8x8 GPUs, 40 jobs: about
5,000 variables; the in-place rows are a running job's rows of its current plan and shape, a few per
job).
When the per-node variables exceed ``max_node_vars`` the ``aggregated`` encoding is used: nodes with
the same GPU type and number of free GPUs form a class, ``z[k, s, C]`` counts parts per class (a part
may use a class when it fits the class's roomiest node), the class's GPUs, CPUs and memory are
summed, and at most ``|C|`` parts larger than half a node's free GPUs go to a class. It
is a relaxation (every per-node solution maps onto it), so its CP-SAT bound is a valid upper bound on
the round; its solution is mapped to nodes by best-fit decreasing (:func:`_repair`), which may lose a
little, and the reported gap is against the relaxation's bound. A row's parts of one size that only
one class can hold need no count: ``y[k]`` stands for ``mult_k(s)`` parts there (no ``z``, no linking
constraint; most rows of clusters with few GPU types). Size: ``|rows| + sum_k |parts_k| x |classes|``
variables at most, ``|jobs| + 4 |classes|`` constraints plus one per row whose parts more than one class
can hold.

The ``pooled`` encoding (the default, at every size, when no job selects nodes or has a topology rule; measured on
Sia-shaped rounds of 32-128 GPUs, seeds 0-2: the same proven optimum as per node, 2.4-33x sooner, e.g. 0.018-0.023 s
against 0.195-0.372 s at 64 GPUs, ``hard``) pools the nodes of a GPU type and state whatever their free GPUs, and
replaces the per-class GPU totals and the half-node count by one limit per part size ``s`` in use
(:func:`_pool_limits`): with sizes that divide one another (1, 2, 4, 8 GPUs and whole nodes, as Sia's
and most schedulers' configurations are), the GPUs of parts of at least ``s`` GPUs are at most
``sum_n floor(free_n / s) s``; otherwise their count is at most ``sum_n floor(free_n / s)``. Every
per-node solution satisfies these, so it is a relaxation too; on GPUs it is exact for divisible sizes
(placing parts largest first, each where it fits, never fails when the limits hold), so with no running
job kept in place and CPUs and memory to spare its optimum is the per-node optimum and :func:`_repair`
loses nothing (issue 29: 9,622 variables and 3,095 constraints aggregated against 2,766 and about 330
pooled on a 1,024-GPU Sia-shaped round; CP-SAT 1.1-1.2 s against 0.4 s). CPUs and memory are pool
totals, a part may use a pool when it fits the pool's roomiest node. Size: ``|rows|`` variables plus a
count per part and pool for parts more than one pool can hold; ``|jobs| + |pools| x (2 + part sizes)``
constraints.

**Node rules** (:mod:`optsched.rounds.rubick.constraints`). A part variable exists only where the job
may hold that part: a ``ready`` node its ``node_selector`` matches (and that has a domain of the level
its topology rule requires, if any), or a cordoned node where it holds at least as many GPUs now. The
aggregated encoding splits classes by node state (a cordoned node is a class of its own) but not by
labels: a job that selects nodes or requires a topology level gets its part variables per *sub-class*
(the nodes of a class with the same values of the selected labels and the same required levels
present), and what the selecting jobs hold of a sub-class must fit it (GPUs, CPUs, memory, parts
larger than half a node), besides the class totals every job shares. Every per-node solution maps
onto that, so it stays a relaxation, and the classes stay as few as without selectors.

**Topology** (:mod:`optsched.rounds.rubick.constraints`; the cost is
:func:`~optsched.rounds.rubick.objective.topology_weight` per extra domain). A row of a job with a
``required`` rule that fits no single domain alone (its parts, largest first: the r-th part fits at
least r of the domain's nodes it may use, with the round's free resources; :meth:`_Topology.fits_one`)
gets no ``y``, in both encodings. Per node, a job with a topology rule also has ``d[j, D]`` (bool) per
domain ``D`` where it has part variables: ``sum of its x on D's nodes <= P_j d[j, D]`` (``P_j`` the
most parts of any of its rows); ``required``: at most one ``d[j, D]``; ``preferred``: each ``d[j, D]``
costs ``w_j`` (the cost per extra domain) and each of its rows with ``x`` earns ``w_j`` back, so the
objective pays ``w_j`` per domain beyond the first exactly. A kept or in-place row's domains are known:
its weight carries their cost. Size: ``sum_j |domains of j|`` more variables and constraints (at most
one per node and job with a rule) and one at-most-one per required job. The aggregated encoding has no
domain variables: its classes are not split by domain (that would multiply the classes by the
domains), so a required rule binds there through the rows only and a preferred one costs ``w_j`` on
the rows that fit no single domain (a lower bound of the cost: they span at least two): every per-node
solution maps onto it, so it stays a relaxation. :func:`_repair` puts each row of a required job on
the one domain that holds it with the fewest free GPUs (best fit; none: the row is not taken), and a
row of a preferred job there too when one domain holds it, else on nodes of the domains it already
uses first.

**Back ends.** The model is built in CP-SAT and solved by CP-SAT (default) or, being made of linear,
at-most-one and bool-or constraints only, as a MILP through pulp with CBC or HiGHS
(:mod:`optsched.formulations.milp`, ``solve(..., backend=...)``); both decode the solution's variable
values with the same :func:`_decode`. :func:`lp_relaxation_bound` is the LP relaxation's bound.
"""

from __future__ import annotations

import logging
import math
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import numpy as np
from ortools.sat.python import cp_model

from optsched.core.deadline import Deadline
from optsched.core.errors import ValidationError
from optsched.core.phases import phase
from optsched.formulations import milp
from optsched.formulations.cpsat import cp_solver
from optsched.formulations.solution import (CPSAT_BACKENDS, MIN_SOLVER_SECONDS, ModelSize, OutOfTime, Solution,
                                           solver_seconds)
from optsched.formulations.switch import solve_scaled_by
from optsched.perf.coefficients import CoefficientTable
from optsched.rounds.rubick.admission import Admission
from optsched.rounds.rubick.choice import Choice, change_penalty, part_share, placement_of
from optsched.rounds.rubick.constraints import (held_on_cordoned, must_leave, new_work_mask,
                                                node_constrained, node_rule_key, requires_topology)
from optsched.rounds.rubick.deadlines import admit_round, floor_ok, privileged
from optsched.rounds.rubick.objective import objective, topology_rules
from optsched.rounds.rubick.problem import RubickRound

log = logging.getLogger(__name__)

SCALE = 1_000_000
MIB = 1024
#: the per-node encoding is never built with more part variables than this
DEFAULT_MAX_NODE_VARS = 60_000
#: a round with a node rule (selector, topology) of up to this many part variables is solved per node directly;
#: above, the aggregated encoding first (measured, ``benchmarks/gap_study.py``: per-node rounds of 192-512 GPUs
#: spent the whole 10 s in presolve probing without a solution, the aggregated encoding proved them optimal in
#: 0.4-1.2 s), then the per-node one, hinted with the aggregated answer and without probing, when the
#: aggregated answer is not proven optimal and time is left
PER_NODE_FIRST_VARS = 5_000
#: the encodings of :func:`build` (module docstring, "Encodings")
ENCODINGS = ("per-node", "pooled", "aggregated")
#: the solvers :func:`solve` runs the model on: CP-SAT, CP-SAT then HiGHS when it stalls
#: (:mod:`optsched.formulations.switch`), or the MILP of the same model through pulp (:mod:`optsched.formulations.milp`)
BACKENDS = (*CPSAT_BACKENDS, *milp.BACKENDS)


@dataclass
class _Nodes:
    names: list[str]
    types: list[str]
    gpus: np.ndarray
    cpus: np.ndarray
    mem: np.ndarray  # MiB, floored

    def __post_init__(self) -> None:
        #: GPU type -> mask over the nodes of that type
        self.type_mask = {t: np.array([x == t for x in self.types], dtype=bool) for t in set(self.types)}


class _NodeRules:
    """Where each job may hold GPUs (:mod:`optsched.rounds.rubick.constraints`): new GPUs only on
    ``ready`` nodes its selector matches, and on a cordoned node at most what it holds there now.
    ``active`` is False when every node is ready and no job selects (then every mask is all True)."""

    def __init__(self, problem: RubickRound, table: CoefficientTable, nodes: _Nodes) -> None:
        self.active = node_constrained(problem)
        self.n = len(nodes.names)
        self._allow: dict[int, np.ndarray] = {}
        self._held: dict[int, dict[int, int]] = {}
        if not self.active:
            return
        index = {n: i for i, n in enumerate(nodes.names)}
        by_key: dict[tuple, np.ndarray] = {}
        #: per job index: what its node mask depends on (:func:`~optsched.rounds.rubick.constraints.node_rule_key`,
        #: and what it holds on cordoned nodes)
        self.key: dict[int, tuple] = {}
        for j, name in enumerate(table.jobs):
            job = problem.job(name)
            key = node_rule_key(job)
            mask = by_key.get(key)
            if mask is None:
                mask = by_key[key] = new_work_mask(problem, job, nodes.names)
            self._allow[j] = mask
            held = held_on_cordoned(problem, job)
            if held:
                self._held[j] = {index[n]: g for n, g in held.items()}
            self.key[j] = (key, tuple(sorted(self._held.get(j, {}).items())))
        cordoned = {i for i, n in enumerate(nodes.names) if problem.cluster.node(n).state == "cordoned"}
        keys = sorted({k for j in problem.jobs for k, _ in j.node_selector})
        #: what splits nodes into aggregated classes besides GPU type and free GPUs: the state, and a
        #: cordoned node is a class of its own (a job's cap there is its own)
        self.signature = [(problem.cluster.node(n).state, i if i in cordoned else -1)
                          for i, n in enumerate(nodes.names)]
        levels = sorted({lv for j in problem.jobs if (lv := requires_topology(j)) is not None})
        #: per node, the values of the labels some job selects and whether it has each topology level some
        #: job requires: what splits a class into the sub-classes of the selecting jobs (module docstring,
        #: "Node rules")
        self.labels = [tuple(problem.cluster.node(n).label(k) or "" for k in keys)
                       + tuple(problem.cluster.node(n).domain(lv) is not None for lv in levels) for n in nodes.names]
        #: the jobs that select nodes or require a topology level (their parts go to sub-classes in the
        #: aggregated encoding; :meth:`bind` leaves out those requiring a level that every node of each
        #: class has or lacks alike)
        self.selecting = {j for j, name in enumerate(table.jobs)
                          if problem.job(name).node_selector or requires_topology(problem.job(name)) is not None}
        self._selects = {j for j in self.selecting if problem.job(table.jobs[j]).node_selector}

    def nodes_for(self, j: int, s: int) -> np.ndarray:
        """Per node: whether job ``j`` may hold a part of ``s`` GPUs there."""
        if not self.active:
            return np.ones(self.n, dtype=bool)
        held = self._held.get(j)
        if not held:
            return self._allow[j]
        out = self._allow[j].copy()
        for i, g in held.items():
            out[i] = s <= g
        return out

    def bind(self, classes: list[list[int]]) -> None:
        """Use ``classes`` (nodes of one signature each, :attr:`signature`) in :meth:`classes_for`, and
        split each into the sub-classes of :meth:`subclasses`."""
        self._first = np.array([c[0] for c in classes], dtype=np.int64)
        uniform: dict[int, bool] = {}  # per node mask: whether each class is all in or all out of it
        for j in sorted(self.selecting - self._selects):
            mask = self._allow[j]
            if id(mask) not in uniform:
                uniform[id(mask)] = all(bool(mask[c].all()) or not mask[c].any() for c in classes)
            if uniform[id(mask)]:  # a required level every node of a class has or lacks: the class decides
                self.selecting.discard(j)
        self._class_allow: dict[int, np.ndarray] = {}
        self._subs: list[dict[tuple, list[int]]] = []
        for c in classes:
            subs: dict[tuple, list[int]] = defaultdict(list)
            for i in c:
                subs[self.labels[i]].append(i)
            self._subs.append(dict(subs))

    def subclasses(self, ci: int) -> dict[tuple, list[int]]:
        """The nodes of class ``ci`` of :meth:`bind` by the values of the selected labels."""
        return self._subs[ci]

    def classes_for(self, j: int, s: int) -> np.ndarray:
        """Per class of :meth:`bind`: whether job ``j`` may hold a part of ``s`` GPUs on its nodes."""
        if j in self._held:
            return self.nodes_for(j, s)[self._first]
        out = self._class_allow.get(id(self._allow[j]))
        if out is None:  # one array per selector: jobs of the same selector share their node mask
            out = self._class_allow[id(self._allow[j])] = self._allow[j][self._first]
        return out


class _Topology:
    """The topology rules of a round's jobs (:mod:`optsched.rounds.rubick.constraints`, module docstring
    "Topology" here): per job index with a required rule or a preferred one of positive cost, the domain
    id of every node at the rule's level (:func:`~optsched.rounds.rubick.constraints.domain_ids`; a node
    lacking the level has an id of its own), whether the rule is required and the cost per extra domain
    (:func:`~optsched.rounds.rubick.objective.topology_weight`)."""

    def __init__(self, problem: RubickRound, table: CoefficientTable, nodes: _Nodes) -> None:
        self.nodes = nodes
        self.jobs: dict[int, tuple[np.ndarray, bool, float]] = topology_rules(problem, table.jobs, nodes.names)
        self._counts: dict[tuple, np.ndarray] = {}

    def fits_one(self, table: CoefficientTable, rules: _NodeRules, j: int, k: int) -> np.ndarray:
        """Per domain id of job ``j``'s level: whether row ``k`` fits that domain's nodes alone (the free
        resources of the round, the nodes the job may use): with the row's parts largest first, the r-th
        part fits at least r of the domain's nodes (nodes fitting a part fit every smaller one)."""
        dom = self.jobs[j][0]
        n_dom = int(dom.max()) + 1 if dom.size else 0
        nodes = self.nodes
        ok = np.ones(n_dom, dtype=bool)
        need = 0
        for s, mult in sorted(Counter(table.gpus_per_node[k]).items(), reverse=True):
            cpus, mem = part_share(table, k, s)
            need += mult
            key = (table.gpu_type[k], s, cpus, _mib_up(mem), id(dom), rules.key.get(j, ()) if rules.active else ())
            count = self._counts.get(key)
            if count is None:
                mask = nodes.type_mask.get(table.gpu_type[k], np.zeros(len(nodes.names), dtype=bool)) \
                    & (nodes.gpus >= s) & (nodes.cpus >= cpus) & (nodes.mem >= key[3])
                if rules.active:
                    mask = mask & rules.nodes_for(j, s)
                count = self._counts[key] = np.bincount(dom[mask], minlength=n_dom)
            ok &= count >= need
        return ok


def _nodes(problem: RubickRound) -> _Nodes:
    names, types, g, c, m = [], [], [], [], []
    for n in problem.cluster.nodes:
        f = problem.free(n.name)
        names.append(n.name)
        types.append(n.gpu_type)
        g.append(f.gpus)
        c.append(f.cpus)
        m.append(math.floor(f.mem_gib * MIB + 1e-6))
    return _Nodes(names, types, np.array(g), np.array(c), np.array(m))


def _mib_up(gib: float) -> int:
    return math.ceil(gib * MIB - 1e-6)


@dataclass
class RubickRoundModel:
    """A built model: the CP-SAT model and the maps from variables back to rows and nodes."""

    problem: RubickRound
    table: CoefficientTable
    admission: Admission
    encoding: str
    model: cp_model.CpModel
    y: dict[int, cp_model.IntVar]
    parts: dict[tuple[int, int, int], cp_model.IntVar]  # (row, part size, node or class) -> var
    trims: dict[int, cp_model.IntVar]  # row -> t: the row in place, on its running job's current nodes
    classes: list[list[int]]  # aggregated: node indices of each class; per-node: [[0], [1], ...]
    nodes: _Nodes
    offset: float  # constant part of the objective (-preempt penalty of every running job)
    n_constraints: int
    rules: _NodeRules  # where each job may hold GPUs
    #: aggregated encoding, jobs that select nodes: (row, size, class, label values) -> var
    sub_parts: dict[tuple[int, int, int, tuple], cp_model.IntVar]
    banned: frozenset[int]  # running jobs (indices) on a draining node: their current row is no keep
    topo: _Topology  # the jobs' topology rules
    #: per-node encoding: (job index, domain id) -> whether the job's parts use the domain (topology rules)
    domains: dict[tuple[int, int], cp_model.IntVar]
    #: a running job's current row moved off its current shares (row -> var; module docstring)
    moves: dict[int, cp_model.IntVar] = field(default_factory=dict)
    #: pooled encoding: (node index, part size s) -> blocks of s GPUs the node keeps for parts of at least s
    #: beside the parts held in place there (:func:`_pool_limits`)
    blocks: dict[tuple[int, int], cp_model.IntVar] = field(default_factory=dict)

    @property
    def size(self) -> ModelSize:
        return ModelSize(len(self.y) + len(self.parts) + len(self.sub_parts) + len(self.trims) + len(self.domains)
                         + len(self.moves) + len(self.blocks),
                         self.n_constraints, self.encoding)


def allowed_rows(table: CoefficientTable, admission: Admission) -> dict[int, np.ndarray]:
    """Rows each job may choose: none while waiting for quota, rows keeping its floor when it has one
    (protected: reaching the guarantee on its admission type; an admitted deadline: meeting its need;
    :func:`~optsched.rounds.rubick.deadlines.floor_ok`), every row otherwise."""
    out: dict[int, np.ndarray] = {}
    floors = privileged(admission)
    keeps = floor_ok(table, admission) if floors else None  # per row of the table
    for j, name in enumerate(table.jobs):
        rows = table.configs_of(name)
        if name in admission.waiting:
            rows = rows[:0]
        elif name in floors and rows.size:
            assert keeps is not None
            rows = rows[keeps[rows]]
        out[j] = rows
    return out


def in_place_rows(problem: RubickRound, table: CoefficientTable, j: int, rows: np.ndarray) -> list[int]:
    """The rows of ``rows`` that running job index ``j`` can run in place (module docstring): not its
    current row, its current plan and GPU type and the GPUs per node of its current placement. Empty for
    a queued job."""
    cur_row = int(table.current_row[j])
    if cur_row < 0:
        return []
    cur = problem.current(table.jobs[j])
    assert cur is not None
    shape = tuple(sorted((s.gpus for _, s in cur.placement.shares if s.gpus > 0), reverse=True))
    gtype = problem.cluster.node(cur.placement.shares[0][0]).gpu_type
    return [int(k) for k in rows if int(k) != cur_row and table.gpus_per_node[k] == shape
            and table.gpu_type[k] == gtype and table.plans[k] == cur.plan]


def _in_place(problem: RubickRound, table: CoefficientTable, names: list[str], j: int, k: int
              ) -> tuple[Choice, list[tuple[int, int, int, int]]]:
    """Row ``k`` of running job index ``j`` in place (module docstring): its choice and its shares as
    (node index in ``names``, GPUs, CPUs, MiB rounded up)."""
    cur = problem.current(table.jobs[j])
    assert cur is not None
    choice = Choice(k, cur.placement.gpu_parts)
    return choice, [(names.index(n), s.gpus, s.cpus, _mib_up(s.mem_gib))
                    for n, s in placement_of(problem, table, j, choice).shares]


def _eligible(nodes: _Nodes, gtype: str, s: int, cpus: int, mem: int) -> np.ndarray:
    mask = nodes.type_mask.get(gtype)
    if mask is None:
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero(mask & (nodes.gpus >= s) & (nodes.cpus >= cpus) & (nodes.mem >= mem))


class ModelTooLarge(ValidationError):
    """The per-node encoding was asked for but would need more part variables than ``max_node_vars``
    (counted before any variable is made)."""


def build(problem: RubickRound, table: CoefficientTable, *, admission: Admission | None = None,
          max_node_vars: int = DEFAULT_MAX_NODE_VARS, encoding: str | None = None,
          deadline: Deadline | None = None) -> RubickRoundModel:
    """Build the CP-SAT model (module docstring). ``encoding`` forces one of :data:`ENCODINGS`;
    by default pooled, or, when a job selects nodes or has a topology rule, per-node when it needs at most
    :data:`PER_NODE_FIRST_VARS` part variables (and ``max_node_vars``), else aggregated. Raises
    :class:`OutOfTime` when ``deadline`` passes during the build and :class:`ModelTooLarge` when the per-node
    encoding is forced on a round that needs more than ``max_node_vars`` part variables (both before a variable
    is made: the count is taken first, and each variable costs about 30 us to make)."""
    admission = admission or admit_round(problem, table)
    floors = privileged(admission)  # the jobs that must run (protected, admitted deadlines)
    nodes = _nodes(problem)
    rules = _NodeRules(problem, table, nodes)
    topo = _Topology(problem, table, nodes)
    rows_of = allowed_rows(table, admission)
    #: running jobs on a draining node: their current row is an ordinary row (a move), never kept
    banned = {j for j in range(len(table.jobs)) if table.current_row[j] >= 0
              and must_leave(problem, problem.job(table.jobs[j]))}

    # per row: its parts and their per-node demand
    demand: dict[int, list[tuple[int, int, int, int]]] = {}  # row -> [(size, mult, cpus, mem MiB)]
    #: rows of a job with a topology rule that fit no single domain alone (module docstring, "Topology"):
    #: never chosen under a required rule, at least one extra domain under a preferred one
    spread: set[int] = set()
    n_node_vars = 0
    n_eligible: dict[tuple[str, int, int, int], int] = {}
    #: a row's GPUs per node -> its part sizes, largest first, with how many parts of each (rows share shapes)
    shapes: dict[tuple[int, ...], list[tuple[int, int]]] = {}
    for j, rows in rows_of.items():
        if deadline is not None and deadline.expired():
            raise OutOfTime
        for k in rows:
            k = int(k)
            if j in topo.jobs and not topo.fits_one(table, rules, j, k).any():
                spread.add(k)
                if topo.jobs[j][1]:  # required: the row is no candidate
                    continue
            d = []
            gpn = tuple(table.gpus_per_node[k])
            sizes = shapes.get(gpn)
            if sizes is None:
                sizes = shapes[gpn] = sorted(Counter(gpn).items(), reverse=True)
            for s, mult in sizes:
                cpus, mem = part_share(table, k, s)
                need = (table.gpu_type[k], s, cpus, _mib_up(mem))
                d.append((s, mult, cpus, need[3]))
                if need not in n_eligible:
                    n_eligible[need] = len(_eligible(nodes, *need))
                n_node_vars += n_eligible[need]
            demand[k] = d
    if encoding is None:
        encoding = ("pooled" if not (rules.active or topo.jobs)
                    else "per-node" if n_node_vars <= min(max_node_vars, PER_NODE_FIRST_VARS) else "aggregated")
    if encoding not in ENCODINGS:
        raise ValidationError(f"unknown encoding {encoding!r}; known: {', '.join(ENCODINGS)}")
    if encoding == "per-node" and n_node_vars > max_node_vars:
        raise ModelTooLarge(f"the per-node encoding of this round needs {n_node_vars} part variables, more than "
                            f"max_node_vars={max_node_vars}")

    pooled = encoding == "pooled"
    if encoding == "per-node":
        classes = [[i] for i in range(len(nodes.names))]
    else:  # pooled: one class (pool) per GPU type and node state, whatever its nodes' free GPUs
        groups: dict[tuple, list[int]] = defaultdict(list)
        for i in range(len(nodes.names)):
            sig = rules.signature[i] if rules.active else ()
            groups[(nodes.types[i], 0 if pooled else int(nodes.gpus[i]), sig)].append(i)
        classes = [groups[key] for key in sorted(groups)]
    cls_type = [nodes.types[c[0]] for c in classes]
    cls_type_arr = np.array(cls_type)
    if rules.active:
        rules.bind(classes)
    #: aggregated with selecting jobs: their parts go to sub-classes (module docstring, "Node rules")
    sub_classes = encoding == "aggregated" and rules.active and bool(rules.selecting)
    sub_parts: dict[tuple[int, int, int, tuple], cp_model.IntVar] = {}
    sub_use: dict[tuple[int, tuple], list[tuple[cp_model.IntVar, int, int, int]]] = defaultdict(list)
    cls_g = np.array([nodes.gpus[c].max() for c in classes])
    # a part may go to a class when it fits its roomiest node; capacities are the class totals
    cls_c = np.array([nodes.cpus[c].max() for c in classes])
    cls_m = np.array([nodes.mem[c].max() for c in classes])
    cls_n = np.array([len(c) for c in classes])
    tot_c = np.array([nodes.cpus[c].sum() for c in classes])
    tot_m = np.array([nodes.mem[c].sum() for c in classes])
    class_of = {i: ci for ci, c in enumerate(classes) for i in c}
    node_index = {n: i for i, n in enumerate(nodes.names)}

    m = cp_model.CpModel()
    y: dict[int, cp_model.IntVar] = {}
    parts: dict[tuple[int, int, int], cp_model.IntVar] = {}
    trims: dict[int, cp_model.IntVar] = {}
    #: a running job's current row moved to other nodes (the same plan and resources: a reconfiguration)
    moves: dict[int, cp_model.IntVar] = {}
    n_cons = 0
    obj_terms: list[tuple[cp_model.IntVar, int]] = []
    #: per-node encoding, jobs with a topology rule: (job, domain id) -> its part variables on the domain's nodes
    dom_terms: dict[tuple[int, int], list[cp_model.IntVar]] = defaultdict(list)
    offset = 0.0
    use_g: list[list] = [[] for _ in classes]
    use_c: list[list] = [[] for _ in classes]
    use_m: list[list] = [[] for _ in classes]
    big: list[list] = [[] for _ in classes]
    #: pooled: (variable, part size, parts per unit of the variable) per class, and per node the parts held in
    #: place there (variable, GPUs), for :func:`_pool_limits`
    sized: list[list[tuple[cp_model.IntVar, int, int]]] = [[] for _ in classes]
    held_at: dict[int, list[tuple[cp_model.IntVar, int]]] = defaultdict(list)
    blocks: dict[tuple[int, int], cp_model.IntVar] = {}
    #: (part GPUs, CPUs, memory, GPU type) -> the classes that can hold such a part (no node rule applying)
    holders: dict[tuple[int, int, int, str], np.ndarray] = {}
    for j, rows in rows_of.items():
        if deadline is not None and deadline.expired():
            raise OutOfTime
        name = table.jobs[j]
        ref = float(table.reference_throughput[j]) / problem.weight(name)  # weight x thr / ref (objective.py)
        pen = problem.penalties(name)
        cur = int(table.current_row[j])
        running = cur >= 0
        ys = []
        rule = topo.jobs.get(j)
        dom = None if rule is None or encoding != "per-node" else rule[0]
        for k in rows:
            k = int(k)
            keep = k == cur and j not in banned
            if keep:
                v = m.new_bool_var(f"y{k}")
                y[k] = v
                ys.append(v)
                w = float(table.throughput[k]) / ref + pen.preempt
                if rule is not None and rule[2] > 0.0:  # a preferred rule's cost (module docstring, "Topology")
                    w -= rule[2] * (len({int(rule[0][node_index[n]]) for n, _ in _current_parts_of(problem, name)})
                                    - 1)
                obj_terms.append((v, round(w * SCALE)))
                alloc = problem.current(name)
                assert alloc is not None
                for node, share in alloc.placement.shares:
                    ci = class_of[node_index[node]]
                    use_g[ci].append((v, share.gpus))
                    use_c[ci].append((v, share.cpus))
                    use_m[ci].append((v, _mib_up(share.mem_gib)))
                    if encoding == "aggregated" and share.gpus * 2 > cls_g[ci]:
                        big[ci].append((v, 1))
                    if pooled:
                        held_at[node_index[node]].append((v, share.gpus))
            if k not in demand:  # a row of a required topology rule that fits no domain
                continue
            v = m.new_bool_var(f"m{k}" if keep else f"y{k}")
            (moves if keep else y)[k] = v
            ys.append(v)
            w = float(table.throughput[k]) / ref
            if running:
                w += pen.preempt - pen.reconfig
            if rule is not None and rule[2] > 0.0:  # a preferred rule's cost (module docstring, "Topology")
                if encoding == "per-node":
                    w += rule[2]  # each domain the row's parts use costs rule[2] (below): the first is free
                elif k in spread:
                    w -= rule[2]  # the aggregated encoding's lower bound: a second domain at least
            obj_terms.append((v, round(w * SCALE)))
            per_node: dict[int, list] = defaultdict(list)
            for s, mult, cpus, mem in demand[k]:
                by_sub = sub_classes and j in rules.selecting  # its nodes are chosen per sub-class below
                if rules.active and not by_sub:
                    ok = np.flatnonzero((cls_g >= s) & (cls_c >= cpus) & (cls_m >= mem)
                                        & (cls_type_arr == table.gpu_type[k]) & rules.classes_for(j, s))
                else:  # the classes that hold such a part depend on the part alone: found once per kind of part
                    key = (s, cpus, mem, table.gpu_type[k])
                    ok = holders.get(key)
                    if ok is None:
                        ok = holders[key] = np.flatnonzero((cls_g >= s) & (cls_c >= cpus) & (cls_m >= mem)
                                                           & (cls_type_arr == table.gpu_type[k]))
                if encoding != "per-node" and not by_sub and ok.size == 1:
                    # one class can hold these parts: their count is mult x v, so v stands for it (no count
                    # variable, no linking constraint; module docstring, "Encodings")
                    ci = int(ok[0])
                    if mult > cls_n[ci]:
                        m.add(v == 0)  # more parts than the class has nodes
                        n_cons += 1
                        continue
                    use_g[ci].append((v, s * mult))
                    use_c[ci].append((v, cpus * mult))
                    use_m[ci].append((v, mem * mult))
                    if encoding == "aggregated" and s * 2 > cls_g[ci]:
                        big[ci].append((v, mult))
                    if pooled:
                        sized[ci].append((v, s, mult))
                    continue
                vs = []
                for ci in ok:
                    if by_sub:  # a selecting job: the sub-classes it selects
                        allow = rules.nodes_for(j, s)
                        places = [(lab, len(members)) for lab, members in rules.subclasses(int(ci)).items()
                                  if allow[members[0]]]
                    else:
                        places = [(None, int(cls_n[ci]))]
                    for lab, count in places:
                        ub = min(mult, count)
                        tag = f"x{k}_{s}_{ci}" if lab is None else f"x{k}_{s}_{ci}_{len(sub_parts)}"
                        p = m.new_int_var(0, ub, tag) if ub > 1 else m.new_bool_var(tag)
                        if lab is None:
                            parts[(k, s, int(ci))] = p
                        else:
                            sub_parts[(k, s, int(ci), lab)] = p
                            sub_use[(int(ci), lab)].append((p, s, cpus, mem))
                        vs.append(p)
                        per_node[int(ci)].append(p)
                        if dom is not None:
                            dom_terms[(j, int(dom[ci]))].append(p)
                        use_g[ci].append((p, s))
                        use_c[ci].append((p, cpus))
                        use_m[ci].append((p, mem))
                        if encoding == "aggregated" and s * 2 > cls_g[ci]:
                            big[ci].append((p, 1))
                        if pooled:
                            sized[ci].append((p, s, 1))
                m.add(sum(vs) == mult * v) if vs else m.add(v == 0)
                n_cons += 1
            if encoding == "per-node":
                for ps in per_node.values():
                    if len(ps) > 1:
                        m.add(sum(ps) <= 1)
                        n_cons += 1
        if running:
            offset -= pen.preempt
            for k in ([] if j in banned else in_place_rows(problem, table, j, rows)):
                choice, need = _in_place(problem, table, nodes.names, j, k)
                if any(c > nodes.cpus[i] or mem > nodes.mem[i] for i, _, c, mem in need):
                    continue  # a part does not fit its node alone
                v = m.new_bool_var(f"t{k}")
                trims[k] = v
                ys.append(v)
                w = float(table.throughput[k]) / ref + pen.preempt - change_penalty(problem, table, j, choice)
                if rule is not None:
                    w -= rule[2] * (len({int(rule[0][i]) for i, *_ in need}) - 1)
                obj_terms.append((v, round(w * SCALE)))
                for i, s, c, mem in need:
                    ci = class_of[i]
                    use_g[ci].append((v, s))
                    use_c[ci].append((v, c))
                    use_m[ci].append((v, mem))
                    if encoding == "aggregated" and s * 2 > cls_g[ci]:
                        big[ci].append((v, 1))
                    if pooled:
                        held_at[i].append((v, s))
        if name in floors:
            m.add(sum(ys) == 1) if ys else m.add_bool_or([])
            n_cons += 1
        elif len(ys) > 1:
            m.add_at_most_one(ys)
            n_cons += 1
    domains: dict[tuple[int, int], cp_model.IntVar] = {}
    by_job: dict[int, list[cp_model.IntVar]] = defaultdict(list)
    most_parts: dict[int, int] = {}
    for (j, d), terms in dom_terms.items():  # per-node encoding: the domains a topology job's parts use
        _, required, w = topo.jobs[j]
        most = most_parts.get(j)
        if most is None:
            most = most_parts[j] = max(len(table.gpus_per_node[int(k)]) for k in rows_of[j])
        v = domains[(j, d)] = m.new_bool_var(f"d{j}_{d}")
        m.add(sum(terms) <= most * v)
        n_cons += 1
        by_job[j].append(v)
        if not required:
            obj_terms.append((v, -round(w * SCALE)))
    for j, vs in by_job.items():
        if topo.jobs[j][1] and len(vs) > 1:  # required: one domain
            m.add_at_most_one(vs)
            n_cons += 1
    for ci in range(len(classes)):
        gpu_terms = [] if pooled else [(use_g[ci], cls_g[ci] * cls_n[ci])]
        pool_terms = _pool_limits(m, sized[ci], classes[ci], nodes.gpus, held_at, blocks) if pooled else []
        for terms, cap in (*gpu_terms, (use_c[ci], tot_c[ci]), (use_m[ci], tot_m[ci]), (big[ci], cls_n[ci]),
                           *pool_terms):
            if terms and sum(c for _, c in terms if c > 0) > cap:  # else it always holds (blocks count >= 0)
                m.add(_weighted(terms) <= int(cap))
                n_cons += 1
    for (ci, lab), terms in sub_use.items():  # what the selecting jobs hold of a sub-class fits it
        members = rules.subclasses(ci)[lab]
        caps = (int(cls_g[ci]) * len(members), int(nodes.cpus[members].sum()), int(nodes.mem[members].sum()))
        for pos, cap in enumerate(caps):
            if sum(t[1 + pos] for t in terms) > cap:
                m.add(sum(t[1 + pos] * t[0] for t in terms) <= cap)
                n_cons += 1
        large = [t[0] for t in terms if t[1] * 2 > cls_g[ci]]
        if len(large) > len(members):
            m.add(sum(large) <= len(members))
            n_cons += 1
    m.maximize(_weighted(obj_terms))
    n_cons += len(blocks)
    return RubickRoundModel(problem, table, admission, encoding, m, y, parts, trims, classes, nodes, offset, n_cons,
                            rules, sub_parts, frozenset(banned), topo, domains, moves, blocks)


def _weighted(terms: Sequence[tuple[cp_model.IntVar, int]]) -> cp_model.LinearExprT:
    """``sum c v`` over ``terms`` (variable, coefficient), made by CP-SAT in one call (a Python ``sum`` builds one
    expression node a term)."""
    return cp_model.LinearExpr.weighted_sum([v for v, _ in terms], [int(c) for _, c in terms])


def _pool_limits(m: cp_model.CpModel, sized: Sequence[tuple[cp_model.IntVar, int, int]], members: Sequence[int],
                 free: np.ndarray, held_at: Mapping[int, Sequence[tuple[cp_model.IntVar, int]]],
                 blocks: dict[tuple[int, int], cp_model.IntVar]) -> list[tuple[list[tuple[cp_model.IntVar, int]], int]]:
    """The GPU limits of one pool (module docstring, "Encodings"), as (terms, capacity) with terms
    (variable, coefficient): per part size ``s`` in use (``sized``: variable, part size, parts per unit),
    the parts of at least ``s`` GPUs fit the pool's nodes ``members`` (``free``: free GPUs per node). A node
    where parts are held in place (``held_at``: node -> (variable, GPUs) of kept rows and rows in place)
    offers ``b[n, s]`` blocks of ``s`` GPUs (``s b[n, s] + held GPUs <= free_n``, added to the model and to
    ``blocks``), an empty one ``floor(free_n / s)``. When the sizes in use form a divisible chain (each
    divides the next) the GPUs of parts of at least ``s`` GPUs are at most ``s`` times the blocks, which
    is exact for GPUs (a part of size ``s`` fits wherever the condition leaves room, largest first);
    otherwise their count is at most the blocks, and all their GPUs at most what is free."""
    held = [i for i in members if i in held_at]
    sizes = sorted({s for _, s, _ in sized})
    if not sizes:  # only parts held in place: each node holds its own
        return [(list(held_at[i]), int(free[i])) for i in held]
    divisible = all(b % a == 0 for a, b in zip(sizes, sizes[1:]))
    empty = np.array([free[i] for i in members if i not in held_at], dtype=np.int64)
    out = []
    for s in sizes:
        terms = [(v, (size if divisible else 1) * mult) for v, size, mult in sized if size >= s]
        cap = int((empty // s).sum())
        for i in held:
            if divisible and int(free[i]) % s == 0 and all(g % s == 0 for _, g in held_at[i]):
                # what is held there is whole blocks of s: the node's blocks are free / s less the held ones
                terms += [(v, g) for v, g in held_at[i]]
                cap += int(free[i]) // s
                continue
            top = int(free[i]) // s
            b = blocks[(i, s)] = m.new_int_var(0, top, f"b{i}_{s}") if top > 1 else m.new_bool_var(f"b{i}_{s}")
            m.add(s * b + sum(g * v for v, g in held_at[i]) <= int(free[i]))
            if top == 1:  # one block at most: any held part that leaves less than s free excludes it (tighter)
                for v, g in held_at[i]:
                    if g > int(free[i]) - s:
                        m.add(b + v <= 1)
            terms.append((b, -(s if divisible else 1)))
        out.append((terms, cap * (s if divisible else 1)))
    if not divisible:
        out.append(([(v, size * mult) for v, size, mult in sized]
                    + [(v, g) for i in held for v, g in held_at[i]], int(sum(int(free[i]) for i in members))))
    return out


def _hint_values(built: RubickRoundModel, hint: Mapping[str, Choice]) -> list[tuple[cp_model.IntVar, int]]:
    """The value of every variable of ``built`` under ``hint`` (job -> choice): ``t`` 1 for the rows in
    place, ``y`` 1 for the other chosen rows, parts counted per (row, size, node or class); rows first,
    then parts, then rows in place, then the domains a topology job's parts use."""
    class_of = {built.nodes.names[i]: ci for ci, c in enumerate(built.classes) for i in c}
    trimmed = {ch.row for name, ch in hint.items() if ch.row in built.trims
               and sorted(ch.parts) == sorted(_current_parts(built, name))}
    #: current rows kept where they run (no part variables), and current rows moved elsewhere
    kept = {ch.row for name, ch in hint.items() if ch.row in built.moves
            and sorted(ch.parts) == sorted(_current_parts(built, name))}
    moved = {ch.row for ch in hint.values() if ch.row in built.moves} - kept
    chosen_rows = {ch.row for ch in hint.values()} - trimmed - moved
    index = {n: i for i, n in enumerate(built.nodes.names)}
    counts: Counter = Counter()
    for ch in hint.values():
        if ch.row not in trimmed and ch.row not in kept:
            for node, g in ch.parts:
                counts[(ch.row, g, class_of[node])] += 1
                if built.sub_parts:
                    counts[(ch.row, g, class_of[node], built.rules.labels[index[node]])] += 1
    used: set[tuple[int, int]] = set()  # (job, domain id) of the hinted parts of jobs with a topology rule
    if built.domains:
        t = built.table
        for name, ch in hint.items():
            j = t.job_position.get(name)
            if j is None or j not in built.topo.jobs or ch.row in trimmed or ch.row not in built.y:
                continue
            if ch.row in kept:
                continue  # kept: no part variables
            dom = built.topo.jobs[j][0]
            used.update((j, int(dom[index[node]])) for node, _ in ch.parts)
    out = [(v, 1 if k in chosen_rows else 0) for k, v in built.y.items()]
    out.extend((v, counts.get(key, 0)) for key, v in built.parts.items())
    out.extend((v, counts.get(key, 0)) for key, v in built.sub_parts.items())
    out.extend((v, 1 if k in trimmed else 0) for k, v in built.trims.items())
    out.extend((v, 1 if key in used else 0) for key, v in built.domains.items())
    out.extend((v, 1 if k in moved else 0) for k, v in built.moves.items())
    if built.blocks:  # pooled: the blocks each node keeps beside what the hint holds in place there
        held: Counter = Counter()
        for name, ch in hint.items():
            j = built.table.job_position.get(name)
            in_place = ch.row in trimmed or (j is not None and ch.row == int(built.table.current_row[j])
                                             and j not in built.banned
                                             and sorted(ch.parts) == sorted(_current_parts(built, name)))
            if in_place:
                for node, g in ch.parts:
                    held[index[node]] += g
        out.extend((v, max(0, (int(built.nodes.gpus[i]) - held[i]) // s)) for (i, s), v in built.blocks.items())
    return out


def _hint(built: RubickRoundModel, hint: Mapping[str, Choice]) -> None:
    for v, value in _hint_values(built, hint):
        built.model.add_hint(v, value)


def _decode(built: RubickRoundModel, values: Sequence[int]) -> dict[str, Choice] | None:
    """The choices of a solution given as a value per model variable index (CP-SAT's response or a
    MILP's): read off the parts per node, or, aggregated, the chosen rows mapped to nodes by
    :func:`_repair` (None when a protected job does not fit there)."""
    if built.encoding == "per-node":
        return _choices_per_node(built, values)
    t = built.table
    chosen = {t.jobs[int(t.job_index[k])]: (k, False) for k, v in built.y.items() if values[v.index]}
    chosen.update({t.jobs[int(t.job_index[k])]: (k, True) for k, v in built.trims.items() if values[v.index]})
    moved = {t.jobs[int(t.job_index[k])] for k, v in built.moves.items() if values[v.index]}
    chosen.update({name: (int(t.current_row[t.index_of(name)]), False) for name in moved})
    return _repair(built, chosen, frozenset(moved))


def _current_parts(built: RubickRoundModel, name: str) -> tuple[tuple[str, int], ...]:
    """(node, GPUs) of running job ``name``'s current placement."""
    return _current_parts_of(built.problem, name)


def _current_parts_of(problem: RubickRound, name: str) -> tuple[tuple[str, int], ...]:
    """(node, GPUs) of running job ``name``'s current placement."""
    alloc = problem.current(name)
    assert alloc is not None
    return alloc.placement.gpu_parts


def _choices_per_node(built: RubickRoundModel, values: Sequence[int]) -> dict[str, Choice]:
    t = built.table
    out: dict[str, Choice] = {}
    placed: dict[int, list[tuple[str, int]]] = defaultdict(list)
    for (k, s, ci), v in built.parts.items():
        if values[v.index]:
            placed[k].append((built.nodes.names[built.classes[ci][0]], s))
    for k, v in built.y.items():
        if values[v.index]:
            j = int(t.job_index[k])
            name = t.jobs[j]
            if k == int(t.current_row[j]) and j not in built.banned:
                out[name] = Choice(k, _current_parts(built, name))
            else:
                out[name] = Choice(k, tuple(sorted(placed[k])))
    for k, v in built.trims.items():
        if values[v.index]:
            name = t.jobs[int(t.job_index[k])]
            out[name] = Choice(k, _current_parts(built, name))
    for k, v in built.moves.items():
        if values[v.index]:
            out[t.jobs[int(t.job_index[k])]] = Choice(k, tuple(sorted(placed[k])))
    return out


def best_fit_parts(table: CoefficientTable, k: int, free_g: np.ndarray, free_c: np.ndarray, free_m: np.ndarray,
                   allowed: Callable[[int, int, int], np.ndarray], prefer: np.ndarray | None = None
                   ) -> list[tuple[int, int]] | None:
    """Row ``k``'s parts, largest first, each on a node ``allowed(gpus, cpus, MiB)`` marks (given what is free)
    with the fewest free GPUs (lowest index on ties), parts of the row on distinct nodes; with ``prefer`` (a
    domain id per node), nodes of the domains already used first. Takes them from the free GPUs, CPUs and MiB
    per node and returns (node index, GPUs) per part; None (nothing taken) when a part fits nowhere. The one
    best-fit placement of :func:`_repair` and of the price path (:mod:`optsched.formulations.rubick_prices`)."""
    used: list[tuple[int, int, int, int]] = []
    for s in table.gpus_per_node[k]:
        cpus, mem = part_share(table, k, s)
        mem_mib = _mib_up(mem)
        ok = allowed(s, cpus, mem_mib)
        for i, *_ in used:
            ok[i] = False
        cand = np.flatnonzero(ok)
        if not cand.size:
            for i, g, c, m in used:
                free_g[i] += g
                free_c[i] += c
                free_m[i] += m
            return None
        score = free_g[cand] - s
        if prefer is not None and used:
            score = score + (~np.isin(prefer[cand], prefer[[u[0] for u in used]])) * (int(free_g.max()) + 1)
        i = int(cand[np.argmin(score)])
        free_g[i] -= s
        free_c[i] -= cpus
        free_m[i] -= mem_mib
        used.append((i, s, cpus, mem_mib))
    return [(i, g) for i, g, _, _ in used]


def _repair(built: RubickRoundModel, chosen: Mapping[str, tuple[int, bool]], moved: frozenset[str] = frozenset()
            ) -> dict[str, Choice] | None:
    """Map an aggregated solution (job -> (row, whether it is in place); ``moved``: the jobs whose current
    row goes elsewhere) to nodes: the kept current rows and the rows in place on the job's current nodes,
    the other rows (moved current rows too) by best-fit decreasing; a part that does
    not fit makes its job fall back to its best row that does (a row that can be in place on its current
    nodes first), or to nothing, unless protected; then jobs left out get their best fitting row. A job
    with a topology rule goes to one domain (module docstring, "Topology"). None when a protected job
    cannot be placed."""
    p, t, nodes = built.problem, built.table, built.nodes
    free_g, free_c = nodes.gpus.astype(np.int64).copy(), nodes.cpus.astype(np.int64).copy()
    free_m = nodes.mem.astype(np.int64).copy()
    types = np.array(nodes.types)
    out: dict[str, Choice] = {}
    rows_of = allowed_rows(t, built.admission)
    floors = privileged(built.admission)

    in_place = set(built.trims)

    def take(k: int, j: int, trim: bool = False, move: bool = False) -> Choice | None:
        if trim:  # row k in place: on the job's current nodes with their GPUs
            choice, need = _in_place(p, t, nodes.names, j, k)
            if not all(free_g[i] >= s and free_c[i] >= c and free_m[i] >= mem for i, s, c, mem in need):
                return None
            for i, s, c, mem in need:
                free_g[i] -= s
                free_c[i] -= c
                free_m[i] -= mem
            return choice
        if k == int(t.current_row[j]) and j not in built.banned and not move:
            alloc = p.current(t.jobs[j])
            assert alloc is not None
            idx = [(nodes.names.index(n), s) for n, s in alloc.placement.shares]
            if all(free_g[i] >= s.gpus and free_c[i] >= s.cpus and free_m[i] >= _mib_up(s.mem_gib) for i, s in idx):
                for i, s in idx:
                    free_g[i] -= s.gpus
                    free_c[i] -= s.cpus
                    free_m[i] -= _mib_up(s.mem_gib)
                return Choice(k, alloc.placement.gpu_parts)
            return None
        rule = built.topo.jobs.get(j)
        if rule is None:
            return place(k, j)
        dom, required, _ = rule
        fit = np.ones(int(dom.max()) + 1, dtype=bool)
        need = 0
        for s, mult in sorted(Counter(t.gpus_per_node[k]).items(), reverse=True):
            need += mult
            fit &= np.bincount(dom[fits(k, j, s)], minlength=fit.size) >= need
        doms = np.flatnonzero(fit)
        if doms.size:  # one domain holds the row: the one with the fewest free GPUs for it (best fit)
            small = fits(k, j, min(t.gpus_per_node[k]))
            room = np.bincount(dom[small], weights=free_g[small], minlength=fit.size)
            d = int(doms[np.argmin(room[doms])])
            return place(k, j, dom == d)
        return None if required else place(k, j, prefer=dom)

    def fits(k: int, j: int, s: int) -> np.ndarray:
        """Per node: whether a part of ``s`` GPUs of row ``k`` of job ``j`` fits what is free there."""
        cpus, mem = part_share(t, k, s)
        ok = (free_g >= s) & (free_c >= cpus) & (free_m >= _mib_up(mem)) & (types == t.gpu_type[k])
        if built.rules.active:
            ok &= built.rules.nodes_for(j, s)
        return ok

    def place(k: int, j: int, within: np.ndarray | None = None, prefer: np.ndarray | None = None) -> Choice | None:
        """Row ``k``'s parts by :func:`best_fit_parts` among ``within`` (and, with ``prefer``, the domains
        already used first). None (nothing taken) when a part fits nowhere."""
        def allowed(s: int, cpus: int, mem: int) -> np.ndarray:
            ok = fits(k, j, s)
            return ok if within is None else ok & within
        used = best_fit_parts(t, k, free_g, free_c, free_m, allowed, prefer)
        return None if used is None else Choice(k, tuple(sorted((nodes.names[i], g) for i, g in used)))

    def fallback(j: int) -> Choice | None:
        rows = sorted((int(k) for k in rows_of[j]), key=lambda k: (-t.throughput[k], t.gpus[k], k))
        for k in rows:
            c = (take(k, j, trim=True) if k in in_place else None) or take(k, j)
            if c is None and k == int(t.current_row[j]) and j not in built.banned:
                c = take(k, j, move=True)  # the current row elsewhere
            if c is not None:
                return c
        return None

    order = sorted(chosen.items(), key=lambda kv: ((not kv[1][1] and kv[1][0] != int(t.current_row[t.index_of(kv[0])]))
                                                   or kv[0] in moved, kv[0] not in floors,
                                                   -max(t.gpus_per_node[kv[1][0]]), kv[0]))
    for name, (k, trim) in order:
        j = t.index_of(name)
        c = take(k, j, trim, name in moved) or fallback(j)
        if c is None and name in floors:
            return None
        if c is not None:
            out[name] = c
    for j, name in enumerate(t.jobs):  # fill with what is left
        if name not in out and rows_of[j].size:
            c = fallback(j)
            if c is not None:
                out[name] = c
    return out


def solve(problem: RubickRound, table: CoefficientTable, *, time_limit: float, seed: int = 0, workers: int = 1,
          hint: Mapping[str, Choice] | None = None, admission: Admission | None = None,
          max_node_vars: int = DEFAULT_MAX_NODE_VARS, encoding: str | None = None,
          backend: str = "cpsat", trace: list[tuple[float, float, float]] | None = None) -> Solution:
    """Build and solve within ``time_limit`` seconds (building included in the wall time, the solver
    gets what is left, at least :data:`~optsched.formulations.solution.MIN_SOLVER_SECONDS`). ``hint``
    (e.g. the heuristic's choices) warm-starts the solver. ``encoding`` forces one encoding; by default
    the encoding :func:`build` picks (pooled; with node rules, small rounds per node and larger ones
    aggregated), then per node when that is not proven optimal, at least 1 s is left and the per-node model
    has at most ``max_node_vars`` part variables; the better answer is returned with the tighter of the two
    bounds.
    A forced per-node encoding over ``max_node_vars`` raises :class:`ModelTooLarge`. ``backend``
    (:data:`BACKENDS`): ``"cpsat"``, or ``"cbc"``/``"highs"``, the same model solved as a MILP through
    pulp (:func:`optsched.formulations.milp.solve_milp`, on ``workers`` threads; ``seed`` is CP-SAT's
    only). CBC reports no bound before it proves optimality, so a
    time-limited CBC answer has no bound (and no gap). The payload is ``{"choices": {job: Choice},
    "backend": backend}`` (no choices when nothing was found). Status ``infeasible`` means the protected
    jobs cannot all be placed (proven, on a relaxation in the aggregated encoding). Status ``unknown``
    with payload ``{"reason": ...}`` when the time limit passes while the model is being built. Raises
    :class:`~optsched.core.errors.ValidationError` for an unknown backend and
    :class:`~optsched.formulations.milp.BackendUnavailableError` when a MILP backend is not installed.
    ``trace``, when given, receives (seconds since the call, objective, bound) in round units at every
    solution CP-SAT finds (the model's objective, weights rounded to 1/SCALE; gap studies read it)."""
    milp.check_solve_options(time_limit, backend, BACKENDS)
    t0 = time.perf_counter()
    first = _solve_once(problem, table, t0, time_limit, seed, workers, hint, admission, max_node_vars, encoding, {},
                        backend=backend, trace=trace)
    if (encoding is not None or first.size.encoding == "per-node" or first.status in ("optimal", "infeasible")
            or time_limit - (time.perf_counter() - t0) < 1.0):
        return first
    refine_hint = first.payload.get("choices") or hint
    try:
        second = _solve_once(problem, table, t0, time_limit, seed, workers, refine_hint, admission, max_node_vars,
                             "per-node", {"cp_model_probing_level": 0}, backend=backend, trace=trace)
    except ModelTooLarge:
        return first
    return _better(problem, table, first, second, time.perf_counter() - t0)


def _better(problem: RubickRound, table: CoefficientTable, a: Solution, b: Solution, wall: float) -> Solution:
    """The better answer of two encodings of the same round, with the tighter bound (both bounds are
    valid upper bounds of the round)."""
    bounds = [x.bound for x in (a, b) if x.bound is not None]
    bound = min(bounds) if bounds else None
    best = max((x for x in (a, b) if x.objective is not None), key=lambda x: x.objective, default=None)
    size = ModelSize(a.size.variables + b.size.variables, a.size.constraints + b.size.constraints,
                     f"{a.size.encoding}+{b.size.encoding}")
    if best is None:
        status = "infeasible" if "infeasible" in (a.status, b.status) else "unknown"
        return Solution(status, None, bound, wall, a.warm_start, size, {**a.payload, **b.payload})
    slack = 0.5 * len(table.jobs) / SCALE + 1e-9
    proven = best.status == "optimal" or (bound is not None and best.objective >= bound - slack)
    if proven and bound is not None:
        bound = max(best.objective, min(bound, best.objective + 1e-6 * max(1.0, abs(best.objective))))
    return Solution("optimal" if proven else "feasible", best.objective, bound, wall, a.warm_start, size,
                    dict(best.payload))


def _solve_once(problem: RubickRound, table: CoefficientTable, t0: float, time_limit: float, seed: int, workers: int,
                hint: Mapping[str, Choice] | None, admission: Admission | None, max_node_vars: int,
                encoding: str | None, params: Mapping[str, object],
                backend: str = "cpsat", trace: list[tuple[float, float, float]] | None = None) -> Solution:
    """One build and solve in what is left of ``time_limit`` since ``t0``; ``params`` are CP-SAT
    parameters beyond the defaults below. Raises :class:`ModelTooLarge` as :func:`build` does."""
    left = time_limit - (time.perf_counter() - t0)
    tag = {"backend": backend}
    try:
        with phase("build"):
            built = build(problem, table, admission=admission, max_node_vars=max_node_vars, encoding=encoding,
                          deadline=Deadline(max(left - MIN_SOLVER_SECONDS, 1e-9)))
    except OutOfTime:
        return Solution("unknown", None, None, time.perf_counter() - t0, bool(hint), ModelSize(0, 0, "unbuilt"),
                        {"reason": f"the time limit ({time_limit:g} s) passed while the model was being built", **tag})
    if backend in CPSAT_BACKENDS:
        if hint:
            _hint(built, hint)
        solver = cp_solver(solver_seconds(time_limit, t0), seed, workers)
        # measured (benchmarks/rubick_round.py): the default level leaves a 25% gap on 1,280 GPUs and
        # 400 jobs after 25 s; level 2 (full LP relaxation with cuts) proves optimality there in < 20 s
        solver.parameters.linearization_level = 2
        if built.encoding == "pooled":
            # measured (issue 29, one run each): presolve off proves pooled models optimal 1.7-16x sooner, e.g. the
            # generated 240 x 8 GPU / 3,000-job round in 1.3 s against 7.1 s, the 2,048-GPU Sia-shaped "hard" one
            # in 2.0 s against 4.1 s (the pooled model has little for presolve to remove)
            solver.parameters.cp_model_presolve = False
        for key, value in params.items():
            setattr(solver.parameters, key, value)
        with phase("solver"):
            name, found, bound, values, ran = solve_scaled_by(backend, solver, built.model, SCALE, built.offset,
                                                              t0 + time_limit, trace, t0)
        tag.update(ran)
    else:
        start = None if not hint else {v.index: value for v, value in _hint_values(built, hint)}
        with phase("solver"):
            res = milp.solve_milp(built.model, backend, solver_seconds(time_limit, t0), hint=start or {},
                                  threads=workers)
        name = res.status.upper()
        found = name in ("OPTIMAL", "FEASIBLE")
        bound = res.bound / SCALE + built.offset if found and res.bound is not None else None
        values = res.values
    choices: dict[str, Choice] = {}
    if found:
        assert values is not None
        decoded = _decode(built, values)
        if decoded is None:  # a protected job did not fit after mapping to nodes
            return Solution("unknown", None, bound, time.perf_counter() - t0, bool(hint), built.size, tag)
        choices = decoded
    wall = time.perf_counter() - t0
    if name == "INFEASIBLE":
        return Solution("infeasible", None, None, wall, bool(hint), built.size, tag)
    if not found:
        return Solution("unknown", None, None, wall, bool(hint), built.size, tag)
    obj = objective(problem, table, choices)
    slack = 0.5 * len(table.jobs) / SCALE + 1e-9  # objective weights are rounded to 1/SCALE
    proven = name == "OPTIMAL" and (built.encoding == "per-node" or (bound is not None and obj >= bound - slack))
    if proven and bound is not None:
        bound = max(obj, min(bound, obj + 1e-6 * max(1.0, abs(obj))))
    log.debug("rubick round %s (%s): %s, objective %.6g, bound %s, %.2f s", built.encoding, backend, name, obj,
              bound, wall)
    return Solution("optimal" if proven else "feasible", obj, bound, wall, bool(hint), built.size,
                    {"choices": choices, "solver_status": name, **tag})


def lp_relaxation_bound(problem: RubickRound, table: CoefficientTable, admission: Admission | None = None,
                        time_limit: float = 10.0, *, encoding: str | None = None) -> float | None:
    """An upper bound of the round's objective from the LP relaxation of its model (every variable
    continuous), solved by CBC through pulp (:func:`optsched.formulations.milp.lp_bound`) within
    ``time_limit`` seconds (the build included). The model is the per-node encoding when it is small
    and the aggregated one otherwise (the default of :func:`build`; ``encoding`` forces one): the LP of
    either bounds the round, since the aggregated model is itself a relaxation. In round-objective units:
    the LP optimum over :data:`SCALE`, plus the model's offset, plus the rounding of the weights to
    1/SCALE (half a unit per job) so that it bounds the objective recomputed in floating point. ``None``
    when the LP is not solved in time or is infeasible (the protected jobs cannot all be placed), or
    when the time passes while the model is built."""
    if not (isinstance(time_limit, (int, float)) and time_limit > 0):
        raise ValidationError(f"time_limit must be a positive number of seconds, got {time_limit!r}")
    t0 = time.perf_counter()
    try:
        built = build(problem, table, admission=admission, encoding=encoding,
                      deadline=Deadline(max(time_limit - MIN_SOLVER_SECONDS, 1e-9)))
    except OutOfTime:
        return None
    lp = milp.lp_bound(built.model, solver_seconds(time_limit, t0))
    if lp is None:
        return None
    return lp / SCALE + built.offset + 0.5 * len(table.jobs) / SCALE


__all__ = ["BACKENDS", "DEFAULT_MAX_NODE_VARS", "ENCODINGS", "best_fit_parts",
           "PER_NODE_FIRST_VARS", "ModelTooLarge", "OutOfTime", "RubickRoundModel",
           "allowed_rows", "build", "in_place_rows", "lp_relaxation_bound", "solve"]

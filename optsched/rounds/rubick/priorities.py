"""Priorities in Rubick rounds (issue "A round a real cluster scheduler can state", item 2): a job is
never preempted, shrunk or kept waiting to make room for a job of lower priority.

**The rule, precisely** (what :func:`priority_broken` checks and :func:`enforce_priorities` makes
hold). A job H is *hurt* by a decision when it

* waits: it is queued and gets nothing, and not because admission keeps it waiting (a guaranteed job
  waiting for quota or deferred, :mod:`~optsched.rounds.rubick.admission`);
* is preempted: it runs now and gets nothing; or
* is shrunk: it runs now and gets fewer GPUs than it holds, for a smaller term of the objective than
  keeping its configuration would give.

Its *target* is its current configuration (exact shares, on its nodes) when it is preempted or shrunk,
and, when it waits or must leave a draining node, any configuration of its table (every row it may
choose — a protected job's rows reaching its guarantee — with parts on distinct nodes it may get new
work on, :func:`~optsched.rounds.rubick.constraints.new_work_mask`, all in one domain under a required
topology rule). The decision breaks the rule when a
hurt job's target fits the resources free in the decision plus its own plus those of the jobs of
**lower** priority that are not bound to a floor (a protected guarantee or an admitted deadline,
:func:`~optsched.rounds.rubick.deadlines.privileged`), but does not fit the free resources plus its
own alone. The second clause is what "to make room for a job of lower priority" means: a method that
leaves a job out although free resources would hold it (FIFO behind a blocked head, say) does so for
reasons of its own, which priorities do not change. Guarantees and admitted deadlines come before
priorities: a protected job (a guaranteed job its tenant's quota covers) or an admitted deadline job is
never evicted for a higher-priority one; its resources do not count as room.

**Enforcement** (one place, every method: exact, Algorithm 1 and its ablations, every baseline). The
method solves the round; :func:`enforce_priorities` then takes the jobs by priority, highest first (ties
by round order), and each one whose target needs lower-priority resources gets it: for each part (largest
first) the node of least eviction cost (what the evicted jobs' terms lose), evicting on that node the
jobs of lowest priority first, then of least loss; a waiting job (or one leaving a draining node) takes,
among its :data:`MAX_ROWS_TRIED` rows of highest value, the one whose term less the evicted jobs' losses
is largest. Evicted jobs get nothing this round (a running one is preempted and pays its penalty); their
resources beyond what was needed stay free, and a later hurt job (lower priority, same order) that fits
only thanks to them takes them, evicting nobody more. Jobs of higher priority come first, so a placement
never hurts a job decided before it. The objective, the exact method's bound (a bound of the round without the
priority rule, so a valid one) and the decision's status describe the decision returned: an exact answer
that the enforcement changed is ``feasible``, not ``optimal``.

Size: per hurt job, O(rows tried x parts x nodes) array work plus its victims; nothing runs when every
job has the same priority. Measured on the generated 1,280 x 8 GPU / 2,000-job round with a quarter of its
jobs at priority 1 or 2: 1.25 s (40 jobs placed, 43 evicted; 2 busy cores). The policies keep
:data:`~optsched.policies.rubick.PRIORITY_S_PER_JOB` a job of their time limit for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from optsched.perf.coefficients import CoefficientTable
from optsched.rounds.rubick.admission import Admission
from optsched.rounds.rubick.choice import Choice, change_penalty, is_kept, part_share, placement_of
from optsched.rounds.rubick.constraints import (domain_ids, must_leave, new_work_mask, node_rule_key,
                                                requires_topology)
from optsched.rounds.rubick.deadlines import floor_ok, privileged
from optsched.rounds.rubick.objective import topology_cost
from optsched.rounds.rubick.problem import RubickRound

#: tolerance of term comparisons and of memory fits (normalised throughput, GiB)
EPS = 1e-9
#: a waiting job's rows tried for room, by value (highest first); the one losing the least objective wins
MAX_ROWS_TRIED = 16


def prioritised(problem: RubickRound) -> bool:
    """Whether ``problem``'s jobs have more than one priority (else the rule holds trivially)."""
    return len({j.priority for j in problem.jobs}) > 1


@dataclass
class _Holdings:
    """Free resources per node and what each job holds, under a set of choices."""

    problem: RubickRound
    table: CoefficientTable
    names: list[str]
    free_g: np.ndarray
    free_c: np.ndarray
    free_m: np.ndarray
    shares: dict[str, list[tuple[int, int, int, float]]]  # job -> [(node index, gpus, cpus, GiB)]
    index: dict[str, int]  # node name -> its index in ``names``

    @classmethod
    def of(cls, problem: RubickRound, table: CoefficientTable, choices: Mapping[str, Choice]) -> "_Holdings":
        names = [n.name for n in problem.cluster.nodes]
        index = {n: i for i, n in enumerate(names)}
        g, c, m = problem.free_arrays(names)
        g, c, m = g.astype(np.int64), c.astype(np.int64), m.astype(float)
        shares: dict[str, list[tuple[int, int, int, float]]] = {}
        for name, choice in choices.items():
            placement = placement_of(problem, table, table.index_of(name), choice)
            held = [(index[n], s.gpus, s.cpus, float(s.mem_gib)) for n, s in placement.shares]
            shares[name] = held
            for i, sg, sc, sm in held:
                g[i] -= sg
                c[i] -= sc
                m[i] -= sm
        return cls(problem, table, names, g, c, m, shares, index)

    def release(self, name: str) -> list[tuple[int, int, int, float]]:
        held = self.shares.pop(name, [])
        for i, g, c, m in held:
            self.free_g[i] += g
            self.free_c[i] += c
            self.free_m[i] += m
        return held

    def take(self, name: str, held: list[tuple[int, int, int, float]]) -> None:
        self.shares[name] = held
        for i, g, c, m in held:
            self.free_g[i] -= g
            self.free_c[i] -= c
            self.free_m[i] -= m


class _Rule:
    """The rule's reading of one round and decision (module docstring)."""

    def __init__(self, problem: RubickRound, table: CoefficientTable, choices: Mapping[str, Choice],
                 admission: Admission) -> None:
        self.problem, self.table, self.admission = problem, table, admission
        self.choices = dict(choices)
        self.hold = _Holdings.of(problem, table, choices)
        self.node_type = np.array([n.gpu_type for n in problem.cluster.nodes])
        self.priority = {j.name: j.priority for j in problem.jobs}
        #: jobs bound to a floor (protected guarantees, admitted deadlines): never evicted for a priority
        self.floored = set(privileged(admission))
        self._masks: dict[tuple, list[np.ndarray]] = {}
        self._room: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray, dict[int, list[str]]]] = {}
        self._loss: dict[str, float] = {}

    def changed(self) -> None:
        """Forget what depends on the holdings (after a placement and its evictions)."""
        self._room.clear()
        self._loss.clear()

    # -- terms -------------------------------------------------------------------------------------
    def term(self, name: str, choice: Choice | None) -> float:
        """Job ``name``'s term of the objective under ``choice`` (rounds/rubick/objective.py)."""
        j = self.table.index_of(name)
        running = self.table.current_row[j] >= 0
        if choice is None:
            return -self.problem.penalties(name).preempt if running else 0.0
        value = self.problem.weight(name) * float(self.table.throughput[choice.row]
                                                  / self.table.reference_throughput[j])
        value -= topology_cost(self.problem, self.problem.job(name), (n for n, _ in choice.parts))
        return value - (change_penalty(self.problem, self.table, j, choice) if running else 0.0)

    def loss(self, name: str) -> float:
        """What evicting job ``name`` costs the objective (its term now less its term with nothing)."""
        out = self._loss.get(name)
        if out is None:
            out = self._loss[name] = self.term(name, self.choices.get(name)) - self.term(name, None)
        return out

    def keep_term(self, name: str) -> float:
        cur = self.problem.current(name)
        assert cur is not None
        j = self.table.index_of(name)
        return self.term(name, Choice(int(self.table.current_row[j]), cur.placement.gpu_parts))

    # -- who is hurt, and what would make it whole -------------------------------------------------
    def hurt(self, name: str) -> str | None:
        """``"wait"``, ``"preempt"``, ``"shrink"`` or None (module docstring)."""
        j = self.table.index_of(name)
        choice = self.choices.get(name)
        running = self.table.current_row[j] >= 0
        if name in self.admission.waiting:
            return None
        if choice is None:
            return "preempt" if running else "wait"
        if not running or is_kept(self.problem, self.table, j, choice):
            return None
        cur = self.problem.current(name)
        assert cur is not None
        if (self.table.gpus[choice.row] < cur.placement.total_gpus
                and self.term(name, choice) < self.keep_term(name) - EPS):
            return "shrink"
        return None

    def rows_of(self, name: str) -> list[int]:
        """The rows ``name`` may run, by value, highest first."""
        rows = self.table.configs_of(name)
        if name in self.floored and rows.size:
            rows = rows[floor_ok(self.table, self.admission, rows)]
        return sorted((int(k) for k in rows), key=lambda k: (-float(self.table.throughput[k]), int(self.table.gpus[k]),
                                                              k))

    def masks(self, name: str) -> list[np.ndarray]:
        """The node sets ``name`` may get new work on, one configuration within one set: the nodes
        :func:`~optsched.rounds.rubick.constraints.new_work_mask` allows, split by domain under a required
        topology rule (each domain alone)."""
        job = self.problem.job(name)
        key = node_rule_key(job)
        out = self._masks.get(key)
        if out is None:
            allowed = new_work_mask(self.problem, job, self.hold.names)
            out = [allowed]
            if requires_topology(job) is not None:
                dom = domain_ids(self.problem, requires_topology(job), self.hold.names)
                out = [allowed & (dom == d) for d in np.unique(dom[allowed])]
            self._masks[key] = out
        return out

    def current_shares(self, name: str) -> list[tuple[int, int, int, float]] | None:
        """The current configuration's shares of a running job that may stay where it runs."""
        cur = self.problem.current(name)
        if cur is None or must_leave(self.problem, self.problem.job(name)):
            return None
        index = self.hold.index
        return [(index[n], s.gpus, s.cpus, float(s.mem_gib)) for n, s in cur.placement.shares]

    def room(self, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[int, list[str]]]:
        """Per node: what the jobs of lower priority than ``name`` that are not protected hold (GPUs, CPUs,
        GiB), and who they are, lowest priority first, then least loss (:meth:`loss`)."""
        p = self.priority[name]
        cached = self._room.get(p)
        if cached is not None:
            return cached
        n = len(self.hold.names)
        g, c, m = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64), np.zeros(n)
        on: dict[int, list[str]] = {}
        for other, held in self.hold.shares.items():
            if self.priority[other] >= p or other in self.floored:
                continue
            for i, sg, sc, sm in held:
                g[i] += sg
                c[i] += sc
                m[i] += sm
                on.setdefault(i, []).append(other)
        for i, who in on.items():
            who.sort(key=lambda o: (self.priority[o], self.loss(o), o))
        out = self._room[p] = (g, c, m, on)
        return out


def _fits(free: tuple[np.ndarray, np.ndarray, np.ndarray], i: int, g: int, c: int, m: float) -> bool:
    return bool(free[0][i] >= g and free[1][i] >= c and free[2][i] >= m - EPS)


def _plan_for(rule: _Rule, name: str, kind: str, extra: bool, base: list[np.ndarray] | None = None
              ) -> tuple[Choice | None, list[tuple[int, int, int, float]], list[str]] | None:
    """A target of hurt job ``name`` (module docstring) on the free resources (``base``, default: what is
    free now) plus its own, and with ``extra`` also those of lower priority: (choice, shares, jobs to
    evict), or None when it fits nowhere."""
    hold = rule.hold
    own = hold.shares.get(name, [])
    free = [a.copy() for a in base] if base is not None else [hold.free_g.copy(), hold.free_c.copy(),
                                                              hold.free_m.copy()]
    for i, g, c, m in own:
        free[0][i] += g
        free[1][i] += c
        free[2][i] += m
    low = rule.room(name) if extra else None
    if low is not None and not low[0].any():
        return None  # nothing of lower priority runs: "extra" would find what the plain pass found
    if kind in ("preempt", "shrink"):
        shares = rule.current_shares(name)
        if shares is not None:
            victims = _evict_for(rule, free, low, shares)
            if victims is not None:
                cur = rule.problem.current(name)
                assert cur is not None
                j = rule.table.index_of(name)
                return Choice(int(rule.table.current_row[j]), cur.placement.gpu_parts), shares, victims
            return None
    best: tuple[float, tuple[Choice, list, list[str]]] | None = None
    for k in rule.rows_of(name)[:MAX_ROWS_TRIED]:
        for mask in rule.masks(name):
            placed = _place_row(rule, name, k, free, low, mask)
            if placed is None:
                continue
            if not extra:
                return placed
            score = rule.term(name, placed[0]) - sum(rule.loss(v) for v in dict.fromkeys(placed[2]))
            if best is None or score > best[0] + EPS:
                best = (score, placed)
    return None if best is None else best[1]


def _evict_for(rule: _Rule, free: list[np.ndarray], low: tuple | None,
               shares: list[tuple[int, int, int, float]]) -> list[str] | None:
    """The jobs to evict (from ``low``'s lists) so that ``shares`` fit ``free``; None when they cannot."""
    victims: list[str] = []
    trial = [a.copy() for a in free]
    for i, g, c, m in shares:
        while not _fits(trial, i, g, c, m):
            cand = [] if low is None else [v for v in low[3].get(i, []) if v not in victims]
            if not cand:
                return None
            v = cand[0]
            victims.append(v)
            for vi, vg, vc, vm in rule.hold.shares[v]:
                trial[0][vi] += vg
                trial[1][vi] += vc
                trial[2][vi] += vm
    return victims


def _evict_on(rule: _Rule, free: list[np.ndarray], low: tuple | None, i: int, g: int, c: int, m: float
              ) -> list[str] | None:
    """:func:`_evict_for` of one share on node ``i``: only the victims' shares on ``i`` matter, so it adds
    them up as numbers, no array copied (called for every candidate node of every part)."""
    fg, fc, fm = int(free[0][i]), int(free[1][i]), float(free[2][i])
    victims: list[str] = []
    for v in ([] if low is None else low[3].get(i, [])):
        if fg >= g and fc >= c and fm >= m - EPS:
            break
        victims.append(v)
        for vi, vg, vc, vm in rule.hold.shares[v]:
            if vi == i:
                fg, fc, fm = fg + vg, fc + vc, fm + vm
    return victims if fg >= g and fc >= c and fm >= m - EPS else None


def _place_row(rule: _Rule, name: str, k: int, free: list[np.ndarray], low: tuple | None, mask: np.ndarray
               ) -> tuple[Choice, list[tuple[int, int, int, float]], list[str]] | None:
    """Row ``k`` of ``name`` on distinct allowed nodes, each part (largest first) on the node that needs the
    cheapest evictions (then the best fit in GPUs); None when a part fits nowhere."""
    table = rule.table
    trial = [a.copy() for a in free]
    victims: list[str] = []
    used: set[int] = set()
    shares: list[tuple[int, int, int, float]] = []
    parts: list[tuple[str, int]] = []
    type_ok = mask & (rule.node_type == table.gpu_type[k])
    reach = [trial[0] + (0 if low is None else low[0]), trial[1] + (0 if low is None else low[1]),
             trial[2] + (0 if low is None else low[2])]
    for s in sorted(table.gpus_per_node[k], reverse=True):
        c, m = part_share(table, k, s)
        ok = type_ok.copy()
        ok[list(used)] = False
        alone = np.flatnonzero(ok & (trial[0] >= s) & (trial[1] >= c) & (trial[2] >= m - EPS))
        cand = alone if alone.size else np.flatnonzero(ok & (reach[0] >= s) & (reach[1] >= c) & (reach[2] >= m - EPS))
        best: tuple[float, int, int, list[str]] | None = None
        if alone.size:  # no eviction needed: the best fit in GPUs (lowest index on ties)
            i = int(alone[np.argmin(trial[0][alone] - s)])
            best = (0.0, int(trial[0][i]) - s, i, [])
            cand = alone[:0]
        for i in cand:
            i = int(i)
            if i in used:
                continue
            need = _evict_on(rule, trial, low, i, s, c, m)
            if need is None:
                continue
            cost = sum(rule.loss(v) for v in need)
            key = (cost, int(trial[0][i]) - s, i, need)
            if best is None or key[:3] < best[:3]:
                best = key
        if best is None:
            return None
        i, need = best[2], best[3]
        for v in need:
            victims.append(v)
            for vi, vg, vc, vm in rule.hold.shares[v]:
                trial[0][vi] += vg
                trial[1][vi] += vc
                trial[2][vi] += vm
        trial[0][i] -= s
        trial[1][i] -= c
        trial[2][i] -= m
        used.add(i)
        shares.append((i, s, c, m))
        parts.append((rule.hold.names[i], s))
    return Choice(k, tuple(sorted(parts))), shares, victims


def priority_broken(problem: RubickRound, table: CoefficientTable, choices: Mapping[str, Choice],
                    admission: Admission) -> list[str]:
    """A phrase per job that ``choices`` hurt to make room for jobs of lower priority (module docstring)."""
    if not prioritised(problem):
        return []
    rule = _Rule(problem, table, choices, admission)
    out = []
    for job in problem.jobs:
        kind = rule.hurt(job.name)
        if kind is None or _plan_for(rule, job.name, kind, extra=False) is not None:
            continue
        plan = _plan_for(rule, job.name, kind, extra=True)
        if plan is not None:
            out.append(f"job {job.name!r} (priority {job.priority}) is {_PAST[kind]} although it fits if jobs of "
                       f"lower priority ({', '.join(sorted(set(plan[2])))}) gave up their resources")
    return out


_PAST = {"wait": "kept waiting", "preempt": "preempted", "shrink": "shrunk"}


@dataclass(frozen=True)
class Enforced:
    """What :func:`enforce_priorities` did: the new ``choices``, the jobs it ``placed`` and those it
    ``evicted`` (each with the job it made room for)."""

    choices: dict[str, Choice]
    placed: tuple[str, ...]
    evicted: Mapping[str, str]

    @property
    def changed(self) -> bool:
        return bool(self.placed)

    def reasons(self, problem: RubickRound) -> dict[str, str]:
        """Why each evicted job does not run (a decision's per-job ``reason``)."""
        return {v: f"evicted to make room for job {h!r} of higher priority ({problem.job(h).priority} > "
                   f"{problem.job(v).priority})" for v, h in self.evicted.items()}

    def note(self) -> str:
        if not self.placed:
            return ""
        shown = ", ".join(f"{v!r} for {h!r}" for v, h in list(self.evicted.items())[:10])
        more = " ..." if len(self.evicted) > 10 else ""
        return (f"priorities: {len(self.placed)} job(s) given room by evicting {len(self.evicted)} job(s) of lower "
                f"priority ({shown}{more})")


def enforce_priorities(problem: RubickRound, table: CoefficientTable, choices: Mapping[str, Choice],
                       admission: Admission) -> Enforced:
    """``choices`` with the priority rule made to hold (module docstring, "Enforcement")."""
    out = dict(choices)
    if not prioritised(problem):
        return Enforced(out, (), {})
    rule = _Rule(problem, table, out, admission)
    order = sorted(range(len(problem.jobs)), key=lambda i: (-problem.jobs[i].priority, i))
    placed: list[str] = []
    evicted: dict[str, str] = {}
    #: what the method left free: room free now and not then was freed by evictions
    before = [rule.hold.free_g.copy(), rule.hold.free_c.copy(), rule.hold.free_m.copy()]
    for i in order:
        name = problem.jobs[i].name
        kind = rule.hurt(name)
        if kind is None:
            continue
        plan = _plan_for(rule, name, kind, extra=False)
        if plan is not None and (not evicted or _plan_for(rule, name, kind, extra=False, base=before) is not None):
            continue  # it fits what the method left free: the method's own choice
        if plan is None:  # else it fits only the room evictions freed: it takes it, evicting nobody more
            plan = _plan_for(rule, name, kind, extra=True)
        if plan is None:
            continue
        choice, shares, victims = plan
        for v in dict.fromkeys(victims):
            rule.hold.release(v)
            rule.choices.pop(v, None)
            evicted[v] = name
        rule.hold.release(name)
        rule.hold.take(name, shares)
        assert choice is not None
        rule.choices[name] = choice
        rule.changed()
        placed.append(name)
    return Enforced(rule.choices, tuple(placed), evicted)


__all__ = ["EPS", "Enforced", "enforce_priorities", "priority_broken", "prioritised"]

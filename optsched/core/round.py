"""One scheduling round and its decision: the values that cross from a scheduler (or the simulator)
into a policy and back (DESIGN.md, "One picture").

A :class:`RoundProblem` is a snapshot: the cluster, the resources held by work outside the round
(``occupied``), every job the round may (re)schedule — running jobs with their current allocation
and queued jobs — tenant GPU quotas, and the penalties for disturbing running jobs (Rubick Sec. 3
and 5). Its ``kind`` names the round type so one ``optsched solve`` command serves every system;
this module defines the ``"rubick"`` kind, later kinds add theirs to :data:`ROUND_KINDS`.

A :class:`Decision` lists, per job, the allocation (plan and placement ``{node: {gpus, cpus,
mem_gb}}``) or none, with the predicted throughput, and at top level the solver status, objective,
best bound, gap, wall time and the objective of the heuristic that warm-started it.

Choices where the papers are silent (each checked in ``tests/test_round.py``):

* **Free resources.** A node's capacity for the round is its capacity minus ``occupied`` (work
  the round may not touch); the current allocations of running jobs are inside it, since the round
  may move or shrink them. A snapshot whose running allocations and occupied shares overflow a node
  is rejected, naming the node and the resource.
* **Quotas.** ``quotas`` maps tenants to GPUs. An empty mapping means no quota is enforced (every
  guaranteed job is admitted); once any quota is given, a tenant without an entry has quota 0.
* **Penalties** are in units of normalised throughput (one job running exactly as requested = 1):
  ``reconfig_penalty`` is charged when a running job's plan or placement changes,
  ``preempt_penalty`` when a running job gets nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from optsched.core.allocation import Allocation, NodeShare, Placement
from optsched.core.checks import require_keys, require_name, require_number, require_int
from optsched.core.errors import UnknownNameError, ValidationError
from optsched.core.hardware import Cluster
from optsched.core.job import Job

#: Round kinds ``optsched solve`` understands; each names a :class:`RoundProblem` flavour.
ROUND_KINDS: tuple[str, ...] = ("rubick",)
ROUND_FORMAT = "optsched.round/1"
DECISION_FORMAT = "optsched.decision/1"

#: Default penalties (normalised-throughput units, see module docstring).
DEFAULT_RECONFIG_PENALTY = 0.05
DEFAULT_PREEMPT_PENALTY = 0.25

_RESOURCES = (("gpus", "GPUs"), ("cpus", "CPUs"), ("mem_gib", "GiB of memory"))


@dataclass(frozen=True)
class RoundProblem:
    """A scheduling round (module docstring). ``running`` holds the current allocation of every
    running job (each names a job of ``jobs``); jobs without one are queued."""

    cluster: Cluster
    jobs: tuple[Job, ...]
    running: tuple[Allocation, ...] = ()
    occupied: tuple[tuple[str, NodeShare], ...] = ()
    quotas: tuple[tuple[str, int], ...] = ()
    reconfig_penalty: float = DEFAULT_RECONFIG_PENALTY
    preempt_penalty: float = DEFAULT_PREEMPT_PENALTY
    time: float = 0.0
    kind: str = "rubick"
    _jobs: dict[str, Job] = field(init=False, repr=False, compare=False)
    _running: dict[str, Allocation] = field(init=False, repr=False, compare=False)
    _free: dict[str, NodeShare] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.kind not in ROUND_KINDS:
            raise UnknownNameError("round kind", self.kind, ROUND_KINDS)
        if not isinstance(self.cluster, Cluster):
            raise ValidationError("round: cluster must be a Cluster")
        object.__setattr__(self, "jobs", tuple(self.jobs))
        object.__setattr__(self, "running", tuple(self.running))
        occupied_items = list(self.occupied.items()) if isinstance(self.occupied, Mapping) else list(self.occupied)
        names = [n for n, _ in occupied_items]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValidationError(f"round: occupied lists node(s) {', '.join(map(repr, dup))} more than once")
        occupied = tuple(sorted(occupied_items, key=lambda kv: kv[0]))
        quotas = tuple(sorted(dict(self.quotas).items())) if isinstance(self.quotas, Mapping) \
            else tuple(sorted(self.quotas))
        object.__setattr__(self, "occupied", occupied)
        object.__setattr__(self, "quotas", quotas)
        require_number("round", "reconfig_penalty", self.reconfig_penalty, 0.0)
        require_number("round", "preempt_penalty", self.preempt_penalty, 0.0)
        require_number("round", "time", self.time, 0.0)
        jobs: dict[str, Job] = {}
        for j in self.jobs:
            if not isinstance(j, Job):
                raise ValidationError(f"round: jobs must hold Job objects, got {j!r}")
            if j.name in jobs:
                raise ValidationError(f"round: job name {j.name!r} used twice")
            if j.gpu_type is not None:
                try:
                    self.cluster.gpu_type(j.gpu_type)
                except UnknownNameError as e:
                    raise ValidationError(f"round: job {j.name!r} is pinned to {e}") from None
            jobs[j.name] = j
        for tenant, gpus in quotas:
            require_name("round quota tenant", tenant)
            require_int(f"round: quota of tenant {tenant!r}", "GPUs", gpus, 0)
        used: dict[str, list[float]] = {n.name: [0, 0, 0.0] for n in self.cluster.nodes}
        for name, share in occupied:
            if not isinstance(share, NodeShare):
                raise ValidationError(f"round: occupied share of node {name!r} must be a NodeShare")
            self._add(used, name, share, "occupied")
        running: dict[str, Allocation] = {}
        for a in self.running:
            if not isinstance(a, Allocation):
                raise ValidationError(f"round: running must hold Allocation objects, got {a!r}")
            if a.job not in jobs:
                raise ValidationError(f"round: running allocation names job {a.job!r}, which is not among the jobs")
            if a.job in running:
                raise ValidationError(f"round: job {a.job!r} has two running allocations")
            job = jobs[a.job]
            types = {self._node(n, f"running job {a.job!r}").gpu_type for n, sh in a.placement.shares if sh.gpus > 0}
            if len(types) > 1:
                raise ValidationError(f"round: running job {a.job!r} spans GPU types {', '.join(sorted(types))}; "
                                      "a job runs on one GPU type")
            for node_name, share in a.placement.shares:
                node = self._node(node_name, f"running job {a.job!r}")
                if job.gpu_type is not None and node.gpu_type != job.gpu_type:
                    raise ValidationError(
                        f"round: running job {a.job!r} is pinned to {job.gpu_type} GPUs but runs on node "
                        f"{node_name!r} of type {node.gpu_type}")
                self._add(used, node_name, share, f"job {a.job!r}")
            running[a.job] = a
        object.__setattr__(self, "_jobs", jobs)
        object.__setattr__(self, "_running", running)
        object.__setattr__(self, "_free", {})

    def _node(self, name: str, who: str) -> Any:
        try:
            return self.cluster.node(name)
        except UnknownNameError as e:
            raise ValidationError(f"round: {who} uses {e}") from None

    def _add(self, used: dict[str, list[float]], node_name: str, share: NodeShare, who: str) -> None:
        node = self._node(node_name, who)
        caps = (node.num_gpus, node.num_cpus, node.memory_gib)
        u = used[node_name]
        for i, (attr, unit) in enumerate(_RESOURCES):
            u[i] += getattr(share, attr)
            if u[i] > caps[i] + 1e-9:
                raise ValidationError(
                    f"round: node {node_name!r} is over capacity in {unit}: {who} brings the total held "
                    f"there to {u[i]:g}, capacity {caps[i]:g}")

    # -- look-ups -------------------------------------------------------------------------------
    def job(self, name: str) -> Job:
        try:
            return self._jobs[name]
        except KeyError:
            raise UnknownNameError("job", name, list(self._jobs)) from None

    def current(self, job: str) -> Allocation | None:
        """The running allocation of ``job`` (None when it is queued)."""
        return self._running.get(job)

    @property
    def quota_map(self) -> dict[str, int]:
        return dict(self.quotas)

    def quota_of(self, tenant: str) -> int | None:
        """GPU quota of ``tenant``; None when the round enforces no quotas (module docstring)."""
        if not self.quotas:
            return None
        return dict(self.quotas).get(tenant, 0)

    def free(self, node: str) -> NodeShare:
        """What ``node`` offers the round: capacity minus the ``occupied`` share (computed once per
        node and remembered; the round is immutable)."""
        share = self._free.get(node)
        if share is None:
            n = self.cluster.node(node)
            occ = dict(self.occupied).get(node, NodeShare(0))
            share = NodeShare(n.num_gpus - occ.gpus, n.num_cpus - occ.cpus, max(0.0, n.memory_gib - occ.mem_gib))
            self._free[node] = share
        return share

    def free_arrays(self, nodes: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Free GPUs, CPUs and GiB of ``nodes`` (in that order) as fresh, writable numpy arrays
        (int64, int64, float): :meth:`free` for many nodes at once."""
        occupied = dict(self.occupied)
        g = np.empty(len(nodes), dtype=np.int64)
        c = np.empty(len(nodes), dtype=np.int64)
        m = np.empty(len(nodes), dtype=float)
        for i, name in enumerate(nodes):
            n = self.cluster.node(name)
            occ = occupied.get(name)
            if occ is None:
                g[i], c[i], m[i] = n.num_gpus, n.num_cpus, n.memory_gib
            else:
                g[i], c[i], m[i] = n.num_gpus - occ.gpus, n.num_cpus - occ.cpus, max(0.0, n.memory_gib - occ.mem_gib)
        return g, c, m

    # -- JSON -----------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {"format": ROUND_FORMAT, "kind": self.kind, "time": self.time,
                "cluster": self.cluster.to_dict(), "jobs": [j.to_dict() for j in self.jobs],
                "running": [a.to_dict() for a in self.running],
                "occupied": {n: s.to_dict() for n, s in self.occupied},
                "quotas": dict(self.quotas), "reconfig_penalty": self.reconfig_penalty,
                "preempt_penalty": self.preempt_penalty}

    @classmethod
    def from_dict(cls, data: Any, clusters: Mapping[str, Cluster] | None = None) -> "RoundProblem":
        """Parse a round file. ``cluster`` may be an object or the name of a cluster in ``clusters``
        (the built-in catalogue by default)."""
        require_keys("round", data, ("kind", "cluster", "jobs"),
                     ("format", "time", "running", "occupied", "quotas", "reconfig_penalty", "preempt_penalty"))
        if data.get("format", ROUND_FORMAT) != ROUND_FORMAT:
            raise ValidationError(f"round: unsupported format {data['format']!r}, expected {ROUND_FORMAT}")
        cluster_data = data["cluster"]
        if isinstance(cluster_data, str):
            if clusters is None:
                from optsched.core.catalog import get_cluster
                cluster = get_cluster(cluster_data)
            elif cluster_data in clusters:
                cluster = clusters[cluster_data]
            else:
                raise UnknownNameError("cluster", cluster_data, list(clusters))
        else:
            cluster = Cluster.from_dict(cluster_data)
        for key, kind in (("jobs", list), ("running", list), ("occupied", dict), ("quotas", dict)):
            if key in data and not isinstance(data[key], kind):
                raise ValidationError(f"round: {key} must be a JSON {'array' if kind is list else 'object'}")
        jobs = []
        for i, j in enumerate(data["jobs"]):
            try:
                jobs.append(Job.from_dict(j))
            except ValidationError as e:
                raise ValidationError(f"round: jobs[{i}]: {e}") from None
            except TypeError as e:  # pragma: no cover - require_keys catches unknown fields first
                raise ValidationError(f"round: jobs[{i}]: {e}") from None
        running = []
        for i, a in enumerate(data.get("running", [])):
            try:
                running.append(Allocation.from_dict(a))
            except ValidationError as e:
                raise ValidationError(f"round: running[{i}]: {e}") from None
        occupied = {}
        for n, sh in data.get("occupied", {}).items():
            try:
                occupied[n] = NodeShare.from_dict(sh)
            except ValidationError as e:
                raise ValidationError(f"round: occupied share of node {n!r}: {e}") from None
        return cls(cluster=cluster, jobs=tuple(jobs), running=tuple(running), occupied=tuple(occupied.items()),
                   quotas=tuple(data.get("quotas", {}).items()),
                   reconfig_penalty=data.get("reconfig_penalty", DEFAULT_RECONFIG_PENALTY),
                   preempt_penalty=data.get("preempt_penalty", DEFAULT_PREEMPT_PENALTY),
                   time=data.get("time", 0.0), kind=data["kind"])


# ---------------------------------------------------------------------------------------------------
#: What happened to a job in a decision.
ACTIONS = ("start", "keep", "reconfigure", "preempt", "wait")

#: Solver statuses: proven optimal; feasible with a gap; a heuristic's decision (asked for);
#: the heuristic's decision returned because the solver found nothing better in its time limit.
STATUSES = ("optimal", "feasible", "heuristic", "heuristic-fallback")


@dataclass(frozen=True)
class JobDecision:
    """One job's outcome: its new ``allocation`` (None: it does not run this round), the predicted
    ``throughput`` (samples/s) and ``normalised`` throughput (divided by the throughput of its
    request), whether its performance guarantee was enforced (``protected``), and the ``action``."""

    job: str
    allocation: Allocation | None
    throughput: float
    normalised: float
    action: str
    protected: bool = False

    def __post_init__(self) -> None:
        require_name("JobDecision", self.job)
        if self.action not in ACTIONS:
            raise UnknownNameError("action", self.action, ACTIONS)
        if self.allocation is not None and self.allocation.job != self.job:
            raise ValidationError(f"decision of job {self.job!r} carries an allocation of {self.allocation.job!r}")
        if (self.allocation is None) != (self.action in ("preempt", "wait")):
            raise ValidationError(f"decision of job {self.job!r}: action {self.action!r} does not match its allocation")

    def to_dict(self) -> dict[str, Any]:
        a = self.allocation
        return {"job": self.job, "action": self.action, "protected": self.protected,
                "plan": None if a is None else a.plan.to_dict(),
                "placement": {} if a is None else a.placement.to_dict(),
                "throughput": self.throughput, "normalised_throughput": self.normalised}

    @classmethod
    def from_dict(cls, data: Any) -> "JobDecision":
        require_keys("job decision", data, ("job", "action", "plan", "placement", "throughput"),
                     ("protected", "normalised_throughput"))
        from optsched.core.plan import ExecutionPlan
        alloc = None
        if data["plan"] is None and data["placement"]:
            raise ValidationError(f"decision of job {data['job']!r}: a placement without a plan")
        if data["plan"] is not None:
            alloc = Allocation(data["job"], ExecutionPlan.from_dict(data["plan"]), Placement.from_dict(data["placement"]))
        return cls(data["job"], alloc, float(data["throughput"]), float(data.get("normalised_throughput", 0.0)),
                   data["action"], bool(data.get("protected", False)))


@dataclass(frozen=True)
class Decision:
    """The answer to a round (module docstring). ``bound`` is the solver's proven upper bound on the
    objective (None for a heuristic), ``gap = (bound - objective) / max(|bound|, 1e-9)``."""

    kind: str
    method: str
    status: str
    objective: float
    jobs: tuple[JobDecision, ...]
    bound: float | None = None
    gap: float | None = None
    solve_seconds: float = 0.0
    heuristic_objective: float | None = None
    warm_start: bool = False
    message: str = ""

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise UnknownNameError("status", self.status, STATUSES)
        object.__setattr__(self, "jobs", tuple(self.jobs))

    def job(self, name: str) -> JobDecision:
        for d in self.jobs:
            if d.job == name:
                return d
        raise UnknownNameError("job", name, [d.job for d in self.jobs])

    @property
    def allocations(self) -> dict[str, Allocation]:
        return {d.job: d.allocation for d in self.jobs if d.allocation is not None}

    def to_dict(self) -> dict[str, Any]:
        return {"format": DECISION_FORMAT, "kind": self.kind, "method": self.method, "status": self.status,
                "objective": self.objective, "bound": self.bound, "gap": self.gap,
                "solve_seconds": self.solve_seconds, "heuristic_objective": self.heuristic_objective,
                "warm_start": self.warm_start, "message": self.message,
                "jobs": [d.to_dict() for d in self.jobs]}

    @classmethod
    def from_dict(cls, data: Any) -> "Decision":
        require_keys("decision", data, ("kind", "method", "status", "objective", "jobs"),
                     ("format", "bound", "gap", "solve_seconds", "heuristic_objective", "warm_start", "message"))
        if data.get("format", DECISION_FORMAT) != DECISION_FORMAT:
            raise ValidationError(f"decision: unsupported format {data['format']!r}, expected {DECISION_FORMAT}")
        if data["kind"] not in ROUND_KINDS:
            raise UnknownNameError("round kind", data["kind"], ROUND_KINDS)
        for key in ("objective", "bound", "gap", "solve_seconds", "heuristic_objective"):
            v = data.get(key)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
                raise ValidationError(f"decision: {key} must be a number or null, got {v!r}")
        if not isinstance(data["jobs"], list):
            raise ValidationError("decision: jobs must be a JSON array")
        names = [d.get("job") if isinstance(d, dict) else None for d in data["jobs"]]
        if len(set(names)) != len(names):
            raise ValidationError("decision: a job appears twice")
        return cls(data["kind"], data["method"], data["status"], float(data["objective"]),
                   tuple(JobDecision.from_dict(d) for d in data["jobs"]), data.get("bound"), data.get("gap"),
                   float(data.get("solve_seconds", 0.0)), data.get("heuristic_objective"),
                   bool(data.get("warm_start", False)), str(data.get("message", "")))


__all__ = ["ACTIONS", "DECISION_FORMAT", "DEFAULT_PREEMPT_PENALTY", "DEFAULT_RECONFIG_PENALTY", "Decision",
           "JobDecision", "ROUND_FORMAT", "ROUND_KINDS", "RoundProblem", "STATUSES"]

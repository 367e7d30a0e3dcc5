"""The base of every round kind: the snapshot of a cluster that crosses from a scheduler (or the
simulator) into a policy (DESIGN.md, "One picture").

A :class:`RoundProblem` holds what every kind shares: the cluster, the resources held by work outside
the round (``occupied``), every job the round may (re)schedule — running jobs with their current
allocation and queued jobs — and the time. A kind subclasses it with its own fields (Rubick: tenant
quotas and penalties, :mod:`optsched.rounds.rubick.problem`), sets ``KIND`` and registers the class
(:mod:`optsched.core.kinds`). ``RoundProblem.from_dict`` reads a round file of any registered kind
(it dispatches on ``kind``); ``Kind.from_dict`` reads one of its own kind.

Rules of the common part (each checked in the tests of ``core``):

* **Free resources.** A node's capacity for the round is its capacity minus ``occupied`` (work the
  round may not touch); the current allocations of running jobs are inside it, since the round may
  move or shrink them. A snapshot whose running allocations and occupied shares overflow a node is
  rejected, naming the node and the resource.
* A running job runs on one GPU type, on nodes of its pinned type when it has one; every node named
  exists; job names are unique; every running allocation names a job of the round.
* **Own models** (issue 16, self-contained rounds). A job's ``model`` in JSON is a catalogue name or a
  model object with the fields of :class:`~optsched.core.model.ModelSpec` (``name``, ``num_params``,
  ``hidden``, ``layers``, ``seq_len``, ``global_batch``, ``num_heads``); the job then holds the name and
  the round the object (``own_models``). An object whose name is a catalogue model must have that model's
  shape (it is the catalogue model then and is not stored); two objects of one name must agree.
  ``to_dict`` writes a job's model as the object again, so the round stays self-contained.
* **Finished and future jobs** (issue 26). A job with no work left (``completed_iterations`` equal to
  ``total_iterations``) is refused naming it, a per-job rule (``on_invalid_job: "skip"`` skips it): every
  kind would otherwise start or keep it. A job whose ``submit_time`` is after the round's ``time`` is
  valid (hand-made rounds at time 0 use ``submit_time`` as the queue order) but :meth:`warnings` names it:
  the round schedules it as if it were already submitted.

**Invalid jobs** (``on_invalid_job``; docs/rounds.md, "Invalid jobs"; :mod:`optsched.core.skip`). With
``"error"`` (the default) the first rule a job breaks fails the round, as always. With ``"skip"`` (kinds
whose ``SKIPS_INVALID_JOBS`` is true; any other kind refuses it naming the field) a job that breaks a
per-job rule is left out of the round and listed in ``skipped`` with the error text as its reason:
its JSON (field types, unknown fields, its model object), its running allocation's JSON, every rule of
this class about one job (name used twice: every job of that name is left out; an unbound field; an
unknown GPU type; its running allocation naming no job of the round, unknown nodes, two GPU types or
nodes off its pinned type, or bringing a node over capacity) and the kind's per-job rules (each raises
:class:`~optsched.core.skip.JobError`). What is not about one job stays an error of the round: the file's
shape and format, the cluster, ``occupied``, ``time`` and the kind's round fields. A skipped job that was
running keeps its GPUs for the round: its allocation is added to ``occupied`` when it fits beside
``occupied``, every valid running allocation and the skipped ones held before it (in round order), so no
other job is given them; an allocation that does not fit (or names unknown nodes, or could not be read)
is released and the reason says so (the caller then decides what happens to that job). ``skipped`` is
part of the round object (what :meth:`without` and ``from_dict`` left out) but not of its JSON: the round
written back is the round that was solved.

**Subclassing.** A kind adds dataclass fields with defaults, checks them in ``_check_fields``, writes
them in ``_fields_to_dict`` and reads them in ``_fields_from_dict`` (returning constructor keyword
arguments), and lists their JSON keys in ``FIELD_KEYS``.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import operator
from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable, ClassVar, Mapping, Sequence

import numpy as np

from optsched.core.allocation import Allocation, NodeShare
from optsched.core.capacity import NodeUsage
from optsched.core.checks import require_keys, require_number
from optsched.core.errors import UnknownNameError, ValidationError
from optsched.core.hardware import Cluster, Node
from optsched.core.job import CONSTRAINT_FIELDS, OBJECTIVE_FIELDS, Job
from optsched.core.kinds import round_kind, round_kinds
from optsched.core.model import ModelSpec
from optsched.core.skip import DEFAULT_ON_INVALID_JOB, JobError, SkippedJob, check_mode, check_unique, job_errors
from optsched.core.units import unit_warnings

ROUND_FORMAT = "optsched.round/1"

_COMMON_REQUIRED = ("kind", "cluster", "jobs")
_COMMON_OPTIONAL = ("format", "time", "running", "occupied", "on_invalid_job")
#: the default of every job field that has one (what :meth:`RoundProblem._check_bound` compares with)
_JOB_DEFAULTS = {f.name: f.default for f in dataclasses.fields(Job)}
_NODE_DEFAULTS = {f.name: f.default for f in dataclasses.fields(Node)}
#: tolerance of the snapshot's capacity check
_SNAPSHOT_TOL = 1e-9


@functools.cache
def _unbound_fields(names: tuple[str, ...],
                    of: str = "job") -> tuple[Callable[[Any], tuple[Any, ...]], tuple[Any, ...]]:
    """(a job's or node's (``of``) values of the fields ``names``, as a tuple; their defaults): what the checks of
    fields a kind does not bind compare (:meth:`RoundProblem._check_bound`; a round has thousands of each)."""
    get = operator.attrgetter(*names) if names else (lambda item: ())
    values = get if len(names) > 1 else (lambda item: (get(item),)) if names else get
    return values, tuple((_JOB_DEFAULTS if of == "job" else _NODE_DEFAULTS)[n] for n in names)


@dataclass(frozen=True)
class RoundProblem:
    """A scheduling round (module docstring). ``running`` holds the current allocation of every
    running job (each names a job of ``jobs``); jobs without one are queued. Instantiate a kind's
    subclass, not this class."""

    KIND: ClassVar[str] = ""
    FIELD_KEYS: ClassVar[tuple[str, ...]] = ()
    #: job fields the kind does not bind: a job that sets one (to other than its default) is refused,
    #: naming the field, rather than silently ignored (default: every hard constraint of
    #: :data:`~optsched.core.job.CONSTRAINT_FIELDS` and :data:`~optsched.core.job.OBJECTIVE_FIELDS`; a kind
    #: that binds some narrows this)
    UNBOUND_JOB_FIELDS: ClassVar[tuple[str, ...]] = CONSTRAINT_FIELDS + OBJECTIVE_FIELDS
    #: node fields the kind does not bind (default: ``labels``, ``state`` and ``topology``); a node that
    #: sets one is refused, naming the field
    UNBOUND_NODE_FIELDS: ClassVar[tuple[str, ...]] = ("labels", "state", "topology")
    #: fields of a running allocation the kind does not bind (default: ``since``); an allocation that
    #: sets one is refused, naming the job and the field
    UNBOUND_ALLOCATION_FIELDS: ClassVar[tuple[str, ...]] = ("since",)
    #: whether rounds of the kind may say ``on_invalid_job: "skip"`` (module docstring, "Invalid jobs")
    SKIPS_INVALID_JOBS: ClassVar[bool] = False

    cluster: Cluster
    jobs: tuple[Job, ...] = ()
    running: tuple[Allocation, ...] = ()
    occupied: tuple[tuple[str, NodeShare], ...] = ()
    time: float = 0.0
    own_models: tuple[ModelSpec, ...] = ()
    #: ``"error"`` or ``"skip"`` (module docstring, "Invalid jobs")
    on_invalid_job: str = field(default=DEFAULT_ON_INVALID_JOB, kw_only=True)
    #: the jobs left out of the round, with their reasons (module docstring, "Invalid jobs")
    skipped: tuple[SkippedJob, ...] = field(default=(), kw_only=True)
    _jobs: dict[str, Job] = field(init=False, repr=False, compare=False)
    _running: dict[str, Allocation] = field(init=False, repr=False, compare=False)
    _free: dict[str, NodeShare] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not type(self).KIND:
            raise ValidationError("RoundProblem is the base of the round kinds; build the problem class of a kind "
                                  f"(registered kinds: {', '.join(round_kinds()) or 'none'})")
        if not isinstance(self.cluster, Cluster):
            raise ValidationError("round: cluster must be a Cluster")
        object.__setattr__(self, "jobs", tuple(self.jobs))
        values, defaults = _unbound_fields(type(self).UNBOUND_NODE_FIELDS, "node")
        for node in self.cluster.nodes:
            if values(node) == defaults:
                continue
            for name in type(self).UNBOUND_NODE_FIELDS:
                if getattr(node, name) != _NODE_DEFAULTS[name]:
                    raise ValidationError(f"round: node {node.name!r} sets {name}, which {self.kind} rounds do not "
                                          "support (it would be ignored)")
        object.__setattr__(self, "running", tuple(self.running))
        occupied_items = list(self.occupied.items()) if isinstance(self.occupied, Mapping) else list(self.occupied)
        names = [n for n, _ in occupied_items]
        dup = sorted(n for n, k in Counter(names).items() if k > 1)
        if dup:
            raise ValidationError(f"round: occupied lists node(s) {', '.join(map(repr, dup))} more than once")
        occupied = tuple(sorted(occupied_items, key=lambda kv: kv[0]))
        object.__setattr__(self, "occupied", occupied)
        require_number("round", "time", self.time, 0.0)
        self._check_skip_fields()
        jobs: dict[str, Job] = {}
        for j in self.jobs:
            if not isinstance(j, Job):
                raise ValidationError(f"round: jobs must hold Job objects, got {j!r}")
            with job_errors(j.name):
                if j.name in jobs:
                    raise ValidationError(f"round: job name {j.name!r} used twice")
                self._check_bound(j)
                if j.completed_iterations >= j.total_iterations:
                    raise ValidationError(f"round: job {j.name!r} has no work left (completed_iterations "
                                          f"{j.completed_iterations:g} of total_iterations {j.total_iterations}): a "
                                          "finished job is not scheduled (drop it from the round)")
                if j.gpu_type is not None:
                    try:
                        self.cluster.gpu_type(j.gpu_type)
                    except UnknownNameError as e:
                        raise ValidationError(f"round: job {j.name!r} is pinned to {e}") from None
            jobs[j.name] = j
        usage = NodeUsage()
        for name, share in occupied:
            if not isinstance(share, NodeShare):
                raise ValidationError(f"round: occupied share of node {name!r} must be a NodeShare")
            self._hold(usage, name, share, "occupied")
        running: dict[str, Allocation] = {}
        node_of = self.cluster.node
        for a in self.running:
            if not isinstance(a, Allocation):
                raise ValidationError(f"round: running must hold Allocation objects, got {a!r}")
            with job_errors(a.job):
                if a.job not in jobs:
                    raise ValidationError(f"round: running allocation names job {a.job!r}, which is not among the "
                                          "jobs")
                if a.job in running:
                    raise ValidationError(f"round: job {a.job!r} has two running allocations")
                job = jobs[a.job]
                for f in type(self).UNBOUND_ALLOCATION_FIELDS:
                    if getattr(a, f) is not None:
                        raise ValidationError(f"round: the running allocation of job {a.job!r} sets {f}, which "
                                              f"{self.kind} rounds do not support (it would be ignored)")
                try:
                    nodes = [(node_of(n), sh) for n, sh in a.placement.shares]
                except UnknownNameError as e:
                    raise ValidationError(f"round: running job {a.job!r} uses {e}") from None
                types = {node.gpu_type for node, sh in nodes if sh.gpus > 0}
                if len(types) > 1:
                    raise ValidationError(f"round: running job {a.job!r} spans GPU types {', '.join(sorted(types))}; "
                                          "a job runs on one GPU type")
                who = f"job {a.job!r}"
                for node, share in nodes:
                    if job.gpu_type is not None and node.gpu_type != job.gpu_type:
                        raise ValidationError(
                            f"round: running job {a.job!r} is pinned to {job.gpu_type} GPUs but runs on node "
                            f"{node.name!r} of type {node.gpu_type}")
                    self._hold(usage, node.name, share, who, node)
            running[a.job] = a
        object.__setattr__(self, "_jobs", jobs)
        object.__setattr__(self, "_running", running)
        object.__setattr__(self, "_free", {})
        object.__setattr__(self, "own_models", _own_models(self.own_models))
        self._check_fields()

    def warnings(self) -> list[str]:
        """What in the round is valid but likely not meant (numbers implausible for their unit,
        :func:`~optsched.core.units.unit_warnings`, and what the kind adds: :meth:`_warnings`); ``optsched.solve``
        puts them in the decision's message, ``optsched solve`` also on stderr. Found once per round (the round
        is immutable; a scan of every job, 0.02 s at 20,000 jobs, that the command and the solve both ask for)."""
        return list(self._warnings_once)

    @cached_property
    def _warnings_once(self) -> tuple[str, ...]:
        """:meth:`_warnings`, found on first use (the round is immutable)."""
        return tuple(self._warnings())

    def _warnings(self) -> list[str]:
        """The warnings of :meth:`warnings`, found afresh (kinds add theirs by extending this)."""
        out = unit_warnings(self.cluster, self.jobs)
        future = [j.name for j in self.jobs if j.submit_time > self.time]
        if future:  # module docstring, "Finished and future jobs"
            named = ", ".join(map(repr, future[:5])) + (f" and {len(future) - 5} more" if len(future) > 5 else "")
            out.append(f"{len(future)} job(s) have a submit_time after the round's time {self.time:g} s ({named}): "
                       "they are scheduled as if already submitted (set the round's time, or leave them out until "
                       "then)")
        return out

    def _check_bound(self, job: Job) -> None:
        """A ``ValidationError`` when ``job`` sets a field the kind does not bind (:attr:`UNBOUND_JOB_FIELDS`)."""
        values, defaults = _unbound_fields(type(self).UNBOUND_JOB_FIELDS)
        if values(job) == defaults:
            return  # every unbound field at its default: one comparison of tuples (a round has thousands of jobs)
        for name in type(self).UNBOUND_JOB_FIELDS:
            if getattr(job, name) != _JOB_DEFAULTS[name]:
                raise ValidationError(f"round: job {job.name!r} sets {name}, which {self.kind} rounds do not support "
                                      "(it would be ignored)")

    def _check_fields(self) -> None:
        """Validate the kind's own fields (subclasses; module docstring)."""

    def _check_skip_fields(self) -> None:
        """``on_invalid_job`` is a mode the kind supports; ``skipped`` holds :class:`SkippedJob` entries, each
        job once and none a job of the round (module docstring, "Invalid jobs")."""
        type(self).check_on_invalid_job(self.on_invalid_job)
        object.__setattr__(self, "skipped", tuple(self.skipped))
        for s in self.skipped:
            if not isinstance(s, SkippedJob):
                raise ValidationError(f"round: skipped must hold SkippedJob objects, got {s!r}")
        check_unique(self.skipped, "round")
        names = {j.name for j in self.jobs if isinstance(j, Job)}
        both = sorted(names & {s.job for s in self.skipped})
        if both:
            raise ValidationError(f"round: job(s) {', '.join(map(repr, both))} both skipped and in the round")

    # -- invalid jobs (module docstring, "Invalid jobs") -------------------------------------------
    @classmethod
    def check_on_invalid_job(cls, mode: Any) -> str:
        """``mode`` when it is an ``on_invalid_job`` mode this kind supports; otherwise a
        ``ValidationError`` naming the field (``"skip"`` in a kind whose ``SKIPS_INVALID_JOBS`` is false)."""
        check_mode(mode)
        if mode == "skip" and not cls.SKIPS_INVALID_JOBS:
            able = [k for k in round_kinds() if round_kind(k).problem.SKIPS_INVALID_JOBS]
            raise ValidationError(f"round: on_invalid_job 'skip' is not supported by {cls.KIND} rounds (kinds that "
                                  f"support it: {', '.join(able) or 'none'}); use 'error'")
        return mode

    @classmethod
    def _fields_without(cls, fields: Mapping[str, Any], names: frozenset[str]) -> dict[str, Any]:
        """The kind's constructor keyword arguments ``fields`` that mention the jobs ``names``, with those
        jobs taken out (subclasses whose fields name jobs; only the changed ones are returned)."""
        return {}

    def _kind_fields(self) -> dict[str, Any]:
        """The kind's own fields of this round as constructor keyword arguments."""
        common = {f.name for f in dataclasses.fields(RoundProblem)}
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.init and f.name not in common}

    def without(self, skipped: Sequence[SkippedJob]) -> "RoundProblem":
        """This round less the jobs of ``skipped`` (their running allocations held or released, module
        docstring, "Invalid jobs"), the entries added to :attr:`skipped`; ``self`` when ``skipped`` is empty."""
        if not skipped:
            return self
        names = frozenset(s.job for s in skipped)
        gone = [a for a in self.running if a.job in names]
        kept = dataclasses.replace(self, jobs=tuple(j for j in self.jobs if j.name not in names),
                             running=tuple(a for a in self.running if a.job not in names),
                             **type(self)._fields_without(self._kind_fields(), names))
        return kept._holding(gone, tuple(self.skipped) + tuple(skipped))

    def _holding(self, allocations: Sequence[Allocation], skipped: tuple[SkippedJob, ...]) -> "RoundProblem":
        """This round with ``skipped`` as its skipped jobs and their running ``allocations`` added to
        ``occupied`` where they fit (module docstring, "Invalid jobs"); a released allocation's reason says why."""
        usage = NodeUsage()
        for name, share in self.occupied:
            usage.add(name, share)
        for a in self.running:
            usage.add_all(a.placement.shares)
        held: dict[str, NodeShare] = dict(self.occupied)
        notes: dict[str, str] = {}
        for a in allocations:
            trial = copy.deepcopy(usage)
            try:
                for node, share in a.placement.shares:
                    self._hold(trial, node, share, f"job {a.job!r}")
            except ValidationError as e:
                notes[a.job] = (f"; its running allocation is released ({e}): the round may give its resources to "
                                "other jobs")
                continue
            usage = trial
            for node, share in a.placement.shares:
                old = held.get(node, NodeShare(0))
                held[node] = NodeShare(old.gpus + share.gpus, old.cpus + share.cpus, old.mem_gib + share.mem_gib)
        skipped = tuple(SkippedJob(s.job, s.reason + notes[s.job]) if s.job in notes else s for s in skipped)
        return dataclasses.replace(self, occupied=tuple(held.items()), skipped=skipped)

    def _node(self, name: str, who: str) -> Any:
        try:
            return self.cluster.node(name)
        except UnknownNameError as e:
            raise ValidationError(f"round: {who} uses {e}") from None

    def _hold(self, usage: NodeUsage, node_name: str, share: NodeShare, who: str, node: Node | None = None) -> None:
        """Add ``share`` of ``node_name`` to ``usage``; a ``ValidationError`` naming ``who`` when the node is then
        over capacity. ``node``: the node, when the caller has looked it up already."""
        if node is None:
            node = self._node(node_name, who)
        usage.add(node_name, share)
        if usage.within(node_name, node.num_gpus, node.num_cpus, node.memory_gib, _SNAPSHOT_TOL):
            return
        over = usage.excess(node_name, NodeShare(node.num_gpus, node.num_cpus, float(node.memory_gib)), _SNAPSHOT_TOL)
        if over:
            o = over[0]
            unit = "GiB of memory" if o.unit == "GiB" else o.unit
            raise ValidationError(f"round: node {node_name!r} is over capacity in {unit}: {who} brings the total "
                                  f"held there to {o.used:g}, capacity {o.capacity:g}")

    # -- look-ups -------------------------------------------------------------------------------
    @property
    def kind(self) -> str:
        return type(self).KIND

    def job(self, name: str) -> Job:
        try:
            return self._jobs[name]
        except KeyError:
            raise UnknownNameError("job", name, list(self._jobs)) from None

    def model_spec(self, name: str) -> ModelSpec | None:
        """The model ``name`` as the round knows it: one of its ``own_models``, else the catalogue's;
        None when neither has it."""
        from optsched.core.catalog import MODELS
        for m in self.own_models:
            if m.name == name:
                return m
        return MODELS.get(name)

    def current(self, job: str) -> Allocation | None:
        """The running allocation of ``job`` (None when it is queued)."""
        return self._running.get(job)

    @cached_property
    def _occupied_by_node(self) -> dict[str, NodeShare]:
        """``occupied`` as a mapping (made on first use: :meth:`free` of every node of a 100,000-job round)."""
        return dict(self.occupied)

    def free(self, node: str) -> NodeShare:
        """What ``node`` offers the round: capacity minus the ``occupied`` share (computed once per
        node and remembered; the round is immutable)."""
        share = self._free.get(node)
        if share is None:
            n = self.cluster.node(node)
            occ = self._occupied_by_node.get(node, NodeShare(0))
            share = NodeShare(n.num_gpus - occ.gpus, n.num_cpus - occ.cpus, max(0.0, n.memory_gib - occ.mem_gib))
            self._free[node] = share
        return share

    def free_gpus(self, node: str) -> int:
        """``free(node).gpus`` without making the share (a check over every node of a 100,000-job round)."""
        share = self._free.get(node)
        if share is not None:
            return share.gpus
        occ = self._occupied_by_node.get(node)
        return self.cluster.node(node).num_gpus - (0 if occ is None else occ.gpus)

    def free_arrays(self, nodes: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Free GPUs, CPUs and GiB of ``nodes`` (in that order) as fresh, writable numpy arrays
        (int64, int64, float): :meth:`free` for many nodes at once."""
        occupied = self._occupied_by_node
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

    def free_gpus_by_type(self) -> dict[str, int]:
        """Free GPUs of the round per GPU type."""
        out: dict[str, int] = {}
        for n in self.cluster.nodes:
            out[n.gpu_type] = out.get(n.gpu_type, 0) + self.free(n.name).gpus
        return out

    # -- JSON -----------------------------------------------------------------------------------
    def _fields_to_dict(self) -> dict[str, Any]:
        """The kind's own fields as JSON (subclasses)."""
        return {}

    @classmethod
    def _fields_from_dict(cls, data: Mapping[str, Any]) -> dict[str, Any]:
        """Constructor keyword arguments of the kind's own fields read from a round file (subclasses)."""
        return {}

    def _jobs_to_dict(self) -> list[dict[str, Any]]:
        jobs = [j.to_dict() for j in self.jobs]
        if self.own_models:
            own = {m.name: m.to_dict() for m in self.own_models}
            for d in jobs:
                if d["model"] in own:
                    d["model"] = own[d["model"]]
        return jobs

    def to_dict(self) -> dict[str, Any]:
        return {"format": ROUND_FORMAT, "kind": self.kind, "time": self.time,
                "cluster": self.cluster.to_dict(), "jobs": self._jobs_to_dict(),
                "running": [a.to_dict() for a in self.running],
                "occupied": {n: s.to_dict() for n, s in self.occupied}, **self._fields_to_dict(),
                **({"on_invalid_job": self.on_invalid_job} if self.on_invalid_job != DEFAULT_ON_INVALID_JOB else {})}

    @classmethod
    def from_dict(cls, data: Any, clusters: Mapping[str, Cluster] | None = None, *,
                  on_invalid_job: str | None = None) -> "RoundProblem":
        """Parse a round file. On the base class the file's ``kind`` picks the problem class; on a kind's
        class the file must be of that kind. ``cluster`` may be an object or the name of a cluster in
        ``clusters`` (the built-in catalogue by default). ``on_invalid_job`` is the mode of a file that does
        not state one (default ``"error"``); a file's own ``on_invalid_job`` wins (module docstring,
        "Invalid jobs")."""
        if not isinstance(data, dict):
            raise ValidationError(f"round: expected a JSON object, got {type(data).__name__}")
        if "kind" not in data:
            raise ValidationError("round: missing field(s) kind")
        if not cls.KIND:
            return round_kind(data["kind"]).problem.from_dict(data, clusters, on_invalid_job=on_invalid_job)
        if data["kind"] != cls.KIND:
            if data["kind"] not in round_kinds():
                raise UnknownNameError("round kind", str(data["kind"]), round_kinds())
            raise ValidationError(f"round: kind {data['kind']!r} is not {cls.KIND!r}")
        require_keys("round", data, _COMMON_REQUIRED, _COMMON_OPTIONAL + cls.FIELD_KEYS)
        if data.get("format", ROUND_FORMAT) != ROUND_FORMAT:
            raise ValidationError(f"round: unsupported format {data['format']!r}, expected {ROUND_FORMAT}")
        mode = cls.check_on_invalid_job(data.get("on_invalid_job", on_invalid_job or DEFAULT_ON_INVALID_JOB))
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
        for key, kind in (("jobs", list), ("running", list), ("occupied", dict)):
            if key in data and not isinstance(data[key], kind):
                raise ValidationError(f"round: {key} must be a JSON {'array' if kind is list else 'object'}")
        skipped: list[SkippedJob] = []
        jobs = []
        models: dict[str, ModelSpec] = {}
        for i, j in enumerate(data["jobs"]):
            try:
                j = _with_model_name(j, models)
                jobs.append(Job.from_dict(j))
            except (ValidationError, TypeError) as e:  # TypeError: pragma: no cover (require_keys comes first)
                error = ValidationError(f"round: jobs[{i}]: {e}")
                if mode != "skip":
                    raise error from None
                skipped.append(SkippedJob(_entry_name(j, "name", f"jobs[{i}]"), str(error)))
        running = []
        for i, a in enumerate(data.get("running", [])):
            try:
                running.append(Allocation.from_dict(a))
            except ValidationError as e:
                error = ValidationError(f"round: running[{i}]: {e}")
                name = _entry_name(a, "job", None)
                if mode != "skip" or name is None:
                    raise error from None
                skipped.append(SkippedJob(name, f"{error}; its running allocation is released (unreadable): the "
                                                "round may give its resources to other jobs"))
        occupied = {}
        for n, sh in data.get("occupied", {}).items():
            try:
                occupied[n] = NodeShare.from_dict(sh)
            except ValidationError as e:
                raise ValidationError(f"round: occupied share of node {n!r}: {e}") from None
        common = {"cluster": cluster, "occupied": tuple(occupied.items()), "time": data.get("time", 0.0),
                  "own_models": tuple(models.values()), "on_invalid_job": mode}
        fields = cls._fields_from_dict(data)
        if mode != "skip":
            return cls(jobs=tuple(jobs), running=tuple(running), **common, **fields)
        return cls._valid_part(common, fields, jobs, running, skipped)

    @classmethod
    def _valid_part(cls, common: dict[str, Any], fields: dict[str, Any], jobs: list[Job],
                    running: list[Allocation], skipped: list[SkippedJob]) -> "RoundProblem":
        """The round of the valid jobs among ``jobs``, the others added to ``skipped`` (module docstring,
        "Invalid jobs"): built again without each job a :class:`~optsched.core.skip.JobError` names until
        no job breaks a rule, then the skipped jobs' running allocations held where they fit."""
        dropped = {s.job for s in skipped}
        while True:
            fields = {**fields, **cls._fields_without(fields, frozenset(dropped))}
            try:
                valid = cls(jobs=tuple(j for j in jobs if j.name not in dropped),
                            running=tuple(a for a in running if a.job not in dropped), **common, **fields)
                break
            except JobError as e:
                if e.job in dropped:  # pragma: no cover - a check naming a job it was not given
                    raise
                dropped.add(e.job)
                skipped.append(SkippedJob(e.job, str(e)))
        by_job: dict[str, SkippedJob] = {}
        for s in skipped:  # a job skipped twice (its JSON and its allocation): one entry, both reasons
            by_job[s.job] = s if s.job not in by_job else SkippedJob(s.job, f"{by_job[s.job].reason}; {s.reason}")
        return valid._holding([a for a in running if a.job in dropped], tuple(by_job.values()))


def _entry_name(entry: Any, key: str, default: str | None) -> str | None:
    """The name under ``key`` of a JSON entry that failed to parse, when it is a non-empty string."""
    name = entry.get(key) if isinstance(entry, dict) else None
    return name if isinstance(name, str) and name.strip() else default


def _with_model_name(job: Any, models: dict[str, ModelSpec]) -> Any:
    """A job's JSON with a model object replaced by its name, the object added to ``models``
    (module docstring, "Own models")."""
    if not isinstance(job, dict) or not isinstance(job.get("model"), dict):
        return job
    try:
        spec = ModelSpec.from_dict(job["model"])
    except (ValidationError, TypeError) as e:
        raise ValidationError(f"model object: {e}") from None
    old = models.get(spec.name)
    if old is not None and old != spec:
        raise ValidationError(f"model object {spec.name!r} differs from an earlier job's object of the same name "
                              f"({_shape_diff(old, spec)}); one name, one model")
    models[spec.name] = spec
    return {**job, "model": spec.name}


def _shape_diff(a: ModelSpec, b: ModelSpec) -> str:
    da, db = a.to_dict(), b.to_dict()
    return ", ".join(f"{k} {da[k]} vs {db[k]}" for k in da if da[k] != db[k])


def _own_models(models: Any) -> tuple[ModelSpec, ...]:
    """The round's own models, checked (module docstring, "Own models"): catalogue models given with
    their catalogue shape are dropped; another shape under a catalogue name, or two shapes under one
    name, is a ``ValidationError``."""
    if not models:
        return ()
    from optsched.core.catalog import MODELS
    out: dict[str, ModelSpec] = {}
    for m in tuple(models):
        if not isinstance(m, ModelSpec):
            raise ValidationError(f"round: own_models must hold ModelSpec objects, got {m!r}")
        known = MODELS.get(m.name)
        if known is not None:
            if known != m:
                raise ValidationError(f"round: model object {m.name!r} shadows the catalogue model of that name with "
                                      f"another shape ({_shape_diff(known, m)}); give it another name")
            continue
        if m.name in out and out[m.name] != m:
            raise ValidationError(f"round: two model objects named {m.name!r} ({_shape_diff(out[m.name], m)})")
        out[m.name] = m
    return tuple(sorted(out.values(), key=lambda m: m.name))


__all__ = ["ROUND_FORMAT", "RoundProblem"]

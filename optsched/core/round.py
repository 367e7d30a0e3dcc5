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

**Subclassing.** A kind adds dataclass fields with defaults, checks them in ``_check_fields``, writes
them in ``_fields_to_dict`` and reads them in ``_fields_from_dict`` (returning constructor keyword
arguments), and lists their JSON keys in ``FIELD_KEYS``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping, Sequence

import numpy as np

from optsched.core.allocation import Allocation, NodeShare
from optsched.core.capacity import NodeUsage
from optsched.core.checks import require_keys, require_number
from optsched.core.errors import UnknownNameError, ValidationError
from optsched.core.hardware import Cluster, Node
from optsched.core.job import CONSTRAINT_FIELDS, Job
from optsched.core.kinds import round_kind, round_kinds
from optsched.core.model import ModelSpec

ROUND_FORMAT = "optsched.round/1"

_COMMON_REQUIRED = ("kind", "cluster", "jobs")
_COMMON_OPTIONAL = ("format", "time", "running", "occupied")
#: the default of every job field that has one (what :meth:`RoundProblem._check_bound` compares with)
_JOB_DEFAULTS = {f.name: f.default for f in dataclasses.fields(Job)}
_NODE_DEFAULTS = {f.name: f.default for f in dataclasses.fields(Node)}
#: tolerance of the snapshot's capacity check
_SNAPSHOT_TOL = 1e-9


@dataclass(frozen=True)
class RoundProblem:
    """A scheduling round (module docstring). ``running`` holds the current allocation of every
    running job (each names a job of ``jobs``); jobs without one are queued. Instantiate a kind's
    subclass, not this class."""

    KIND: ClassVar[str] = ""
    FIELD_KEYS: ClassVar[tuple[str, ...]] = ()
    #: job fields the kind does not bind: a job that sets one (to other than its default) is refused,
    #: naming the field, rather than silently ignored (default: every hard constraint of
    #: :data:`~optsched.core.job.CONSTRAINT_FIELDS`; a kind that binds some narrows this)
    UNBOUND_JOB_FIELDS: ClassVar[tuple[str, ...]] = CONSTRAINT_FIELDS
    #: node fields the kind does not bind (default: ``labels`` and ``state``); a node that sets one is
    #: refused, naming the field
    UNBOUND_NODE_FIELDS: ClassVar[tuple[str, ...]] = ("labels", "state")

    cluster: Cluster
    jobs: tuple[Job, ...] = ()
    running: tuple[Allocation, ...] = ()
    occupied: tuple[tuple[str, NodeShare], ...] = ()
    time: float = 0.0
    own_models: tuple[ModelSpec, ...] = ()
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
        for node in self.cluster.nodes:
            for name in type(self).UNBOUND_NODE_FIELDS:
                if getattr(node, name) != _NODE_DEFAULTS[name]:
                    raise ValidationError(f"round: node {node.name!r} sets {name}, which {self.kind} rounds do not "
                                          "support (it would be ignored)")
        object.__setattr__(self, "running", tuple(self.running))
        occupied_items = list(self.occupied.items()) if isinstance(self.occupied, Mapping) else list(self.occupied)
        names = [n for n, _ in occupied_items]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValidationError(f"round: occupied lists node(s) {', '.join(map(repr, dup))} more than once")
        occupied = tuple(sorted(occupied_items, key=lambda kv: kv[0]))
        object.__setattr__(self, "occupied", occupied)
        require_number("round", "time", self.time, 0.0)
        jobs: dict[str, Job] = {}
        for j in self.jobs:
            if not isinstance(j, Job):
                raise ValidationError(f"round: jobs must hold Job objects, got {j!r}")
            if j.name in jobs:
                raise ValidationError(f"round: job name {j.name!r} used twice")
            self._check_bound(j)
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
                self._hold(usage, node_name, share, f"job {a.job!r}")
            running[a.job] = a
        object.__setattr__(self, "_jobs", jobs)
        object.__setattr__(self, "_running", running)
        object.__setattr__(self, "_free", {})
        object.__setattr__(self, "own_models", _own_models(self.own_models))
        self._check_fields()

    def _check_bound(self, job: Job) -> None:
        """A ``ValidationError`` when ``job`` sets a field the kind does not bind (:attr:`UNBOUND_JOB_FIELDS`)."""
        for name in type(self).UNBOUND_JOB_FIELDS:
            if getattr(job, name) != _JOB_DEFAULTS[name]:
                raise ValidationError(f"round: job {job.name!r} sets {name}, which {self.kind} rounds do not support "
                                      "(it would be ignored)")

    def _check_fields(self) -> None:
        """Validate the kind's own fields (subclasses; module docstring)."""

    def _node(self, name: str, who: str) -> Any:
        try:
            return self.cluster.node(name)
        except UnknownNameError as e:
            raise ValidationError(f"round: {who} uses {e}") from None

    def _hold(self, usage: NodeUsage, node_name: str, share: NodeShare, who: str) -> None:
        node = self._node(node_name, who)
        usage.add(node_name, share)
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
                "occupied": {n: s.to_dict() for n, s in self.occupied}, **self._fields_to_dict()}

    @classmethod
    def from_dict(cls, data: Any, clusters: Mapping[str, Cluster] | None = None) -> "RoundProblem":
        """Parse a round file. On the base class the file's ``kind`` picks the problem class; on a kind's
        class the file must be of that kind. ``cluster`` may be an object or the name of a cluster in
        ``clusters`` (the built-in catalogue by default)."""
        if not isinstance(data, dict):
            raise ValidationError(f"round: expected a JSON object, got {type(data).__name__}")
        if "kind" not in data:
            raise ValidationError("round: missing field(s) kind")
        if not cls.KIND:
            return round_kind(data["kind"]).problem.from_dict(data, clusters)
        if data["kind"] != cls.KIND:
            if data["kind"] not in round_kinds():
                raise UnknownNameError("round kind", str(data["kind"]), round_kinds())
            raise ValidationError(f"round: kind {data['kind']!r} is not {cls.KIND!r}")
        require_keys("round", data, _COMMON_REQUIRED, _COMMON_OPTIONAL + cls.FIELD_KEYS)
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
        for key, kind in (("jobs", list), ("running", list), ("occupied", dict)):
            if key in data and not isinstance(data[key], kind):
                raise ValidationError(f"round: {key} must be a JSON {'array' if kind is list else 'object'}")
        jobs = []
        models: dict[str, ModelSpec] = {}
        for i, j in enumerate(data["jobs"]):
            try:
                j = _with_model_name(j, models)
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
                   time=data.get("time", 0.0), own_models=tuple(models.values()), **cls._fields_from_dict(data))


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

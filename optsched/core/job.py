"""Jobs: what a user submitted and how far it has come (Rubick Sec. 3, Lyra Sec. 3.3, Crius Sec. 4)."""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any

from optsched.core.checks import json_fields, require_int, require_keys, require_name, require_number, string_pairs
from optsched.core.construct import frozen_builder
from optsched.core.errors import ValidationError
from optsched.core.plan import ExecutionPlan

#: the types of a JSON number field (not bool)
_NUMBER = (int, float)

#: CPUs per GPU of the Rubick measurements and workload traces: what a job that requests no CPUs is
#: taken to request (capped by the nodes' CPUs per GPU, :meth:`Job.cpus_or_default`), what generated
#: trace jobs request, and the share at which reference throughputs are taken.
DEFAULT_CPUS_PER_GPU = 8

#: the hard constraints of a job on its configurations (class docstring); a kind that does not bind
#: one refuses a job that sets it (:attr:`optsched.core.round.RoundProblem.UNBOUND_JOB_FIELDS`)
CONSTRAINT_FIELDS = ("plan_fixed", "max_nodes", "min_cpus_per_gpu", "node_selector", "topology", "priority")
#: fields that shape a job's term of the objective and its penalties (issue "A round a real cluster
#: scheduler can state", items 2 and 6); a kind that does not read them refuses a job that sets them
OBJECTIVE_FIELDS = ("weight", "restart_seconds", "checkpoint_age_s")
#: the modes of a job's ``topology`` rule
TOPOLOGY_MODES = ("required", "preferred")


@dataclass(frozen=True)
class TopologyRule:
    """A job's topology rule (JSON ``{"level": ..., "mode": ...}``): ``level`` is a key of the nodes'
    ``topology`` objects (e.g. ``"rack"``); ``mode`` ``"required"`` puts every GPU of the job in one
    domain of that level, ``"preferred"`` charges a cost for each domain beyond the first."""

    level: str
    mode: str = "required"

    def __post_init__(self) -> None:
        require_name("topology level", self.level)
        if self.mode not in TOPOLOGY_MODES:
            raise ValidationError(f"topology mode must be one of {', '.join(TOPOLOGY_MODES)}, got {self.mode!r}")

    def to_dict(self) -> dict[str, str]:
        return {"level": self.level, "mode": self.mode}

    @classmethod
    def from_dict(cls, data: Any) -> "TopologyRule":
        require_keys("topology", data, ("level",), ("mode",))
        return cls(**data)


@dataclass(frozen=True)
class Job:
    """A training job.

    * ``model``: name of a :class:`~optsched.core.model.ModelSpec` in the catalogue in use;
    * ``tenant`` and ``guaranteed``: a guaranteed job consumes its tenant's quota and is promised at
      least the throughput of its requested resources and plan (Rubick's performance guarantee);
      best-effort jobs may get nothing or be preempted;
    * ``requested_gpus/cpus/mem_gib`` and ``requested_plan``: the user's request (plan ``None``
      means "any plan the scheduler likes"; the guarantee then uses the best plan on the request);
    * ``min_gpus``/``max_gpus``: the elastic range (Lyra); defaults to 1..requested for best-effort
      scaling, the scheduler may ignore it for non-elastic policies;
    * ``total_iterations``/``completed_iterations``: the work, in iterations of the global batch;
    * ``submit_time`` and ``deadline`` in seconds of simulated time; ``gpu_type`` pins a GPU type;
    * ``gpus_per_worker``, ``fungible``, ``checkpointing`` (Lyra Sec. 3.2, 3.7.1): GPUs of one worker
      (``requested_gpus``, ``min_gpus`` and ``max_gpus`` count whole workers in Lyra's rounds), whether
      the job may run on other GPU types (loaned inference servers) and whether it checkpoints (a
      preemption then loses no progress). Written to JSON only when not the default;
    * hard constraints a scheduler states (:data:`CONSTRAINT_FIELDS`; a kind binds them or refuses
      them, :attr:`~optsched.core.round.RoundProblem.UNBOUND_JOB_FIELDS`): ``plan_fixed`` (the
      ``requested_plan`` is the only plan the job may run), ``max_nodes`` (the most nodes the job may
      span; 1 = one node), ``min_cpus_per_gpu`` (a CPU floor per GPU) and ``node_selector`` (label ->
      value: every node the job runs on has these labels), ``topology`` (a :class:`TopologyRule`) and
      ``priority`` (integer, default 0: a job is never preempted, shrunk or kept waiting to make room for
      a job of lower priority). Written to JSON only when set;
    * what shapes its term of the objective (:data:`OBJECTIVE_FIELDS`): ``weight`` (> 0, default 1,
      multiplies the job's term), ``restart_seconds`` (what a start, reconfiguration or resume costs it)
      and ``checkpoint_age_s`` (the progress a preemption loses, in seconds of its work). Written to JSON
      only when set.
    """

    name: str
    model: str
    requested_gpus: int
    total_iterations: int
    requested_cpus: int = 0
    requested_mem_gib: float = 0.0
    requested_plan: ExecutionPlan | None = None
    tenant: str = "default"
    guaranteed: bool = False
    submit_time: float = 0.0
    completed_iterations: float = 0.0
    min_gpus: int = 1
    max_gpus: int | None = None
    deadline: float | None = None
    gpu_type: str | None = None
    gpus_per_worker: int = 1
    fungible: bool = False
    checkpointing: bool = False
    plan_fixed: bool = False
    max_nodes: int | None = None
    min_cpus_per_gpu: int | None = None
    node_selector: tuple[tuple[str, str], ...] = ()
    topology: TopologyRule | None = None
    priority: int = 0
    weight: float = 1.0
    restart_seconds: float | None = None
    checkpoint_age_s: float | None = None

    def __post_init__(self) -> None:
        if self._plain():
            return  # fast path (a round reads thousands of jobs): the checks below would all pass
        require_name("Job", self.name)
        owner = f"job {self.name!r}"
        require_name(owner + " model", self.model)
        require_name(owner + " tenant", self.tenant)
        require_int(owner, "requested_gpus", self.requested_gpus, 1)
        require_int(owner, "requested_cpus", self.requested_cpus, 0)
        require_number(owner, "requested_mem_gib", self.requested_mem_gib, 0.0)
        require_int(owner, "total_iterations", self.total_iterations, 1)
        require_number(owner, "completed_iterations", self.completed_iterations, 0.0)
        require_number(owner, "submit_time", self.submit_time, 0.0)
        require_int(owner, "min_gpus", self.min_gpus, 1)
        if not isinstance(self.guaranteed, bool):
            raise ValidationError(f"{owner}: guaranteed must be true or false")
        require_int(owner, "gpus_per_worker", self.gpus_per_worker, 1)
        for flag in ("fungible", "checkpointing", "plan_fixed"):
            if not isinstance(getattr(self, flag), bool):
                raise ValidationError(f"{owner}: {flag} must be true or false")
        if self.max_gpus is not None:
            require_int(owner, "max_gpus", self.max_gpus, self.min_gpus)
        if self.deadline is not None:
            require_number(owner, "deadline", self.deadline, 0.0)
        if self.max_nodes is not None:
            require_int(owner, "max_nodes", self.max_nodes, 1)
        if self.min_cpus_per_gpu is not None:
            require_int(owner, "min_cpus_per_gpu", self.min_cpus_per_gpu, 1)
        object.__setattr__(self, "node_selector", string_pairs(owner + " node_selector", self.node_selector))
        if self.topology is not None and not isinstance(self.topology, TopologyRule):
            raise ValidationError(f"{owner}: topology must be a TopologyRule")
        require_int(owner, "priority", self.priority, -(2 ** 31))
        require_number(owner, "weight", self.weight, 0.0, strict=True)
        for f in ("restart_seconds", "checkpoint_age_s"):
            if getattr(self, f) is not None:
                require_number(owner, f, getattr(self, f), 0.0)
        if self.plan_fixed and self.requested_plan is None:
            raise ValidationError(f"{owner}: plan_fixed needs a requested_plan (the plan the job must run)")
        if self.completed_iterations > self.total_iterations:
            raise ValidationError(
                f"{owner}: completed_iterations {self.completed_iterations} exceeds total_iterations "
                f"{self.total_iterations}")
        if self.requested_plan is not None and self.requested_plan.num_gpus != self.requested_gpus:
            raise ValidationError(
                f"{owner}: requested plan {self.requested_plan.label} uses {self.requested_plan.num_gpus} "
                f"GPUs but the job requests {self.requested_gpus}")

    def _plain(self) -> bool:
        """Whether every field has its plain type and value range and no optional rule is set (no deadline,
        constraint or objective field, no plan bound to the job): what :meth:`__post_init__` accepts without
        looking further, checked in one expression."""
        return (type(self.name) is str and type(self.model) is str and type(self.tenant) is str
                and type(self.requested_gpus) is int and type(self.total_iterations) is int
                and type(self.requested_cpus) is int and type(self.min_gpus) is int
                and type(self.gpus_per_worker) is int and type(self.priority) is int
                and type(self.requested_mem_gib) in _NUMBER and type(self.completed_iterations) in _NUMBER
                and type(self.submit_time) in _NUMBER and type(self.weight) in _NUMBER
                and type(self.guaranteed) is bool and type(self.fungible) is bool
                and type(self.checkpointing) is bool and self.plan_fixed is False
                and self.deadline is None and self.max_nodes is None and self.min_cpus_per_gpu is None
                and self.node_selector == () and self.topology is None and self.restart_seconds is None
                and self.checkpoint_age_s is None
                and bool(self.name.strip()) and bool(self.model.strip()) and bool(self.tenant.strip())
                and self.requested_gpus >= 1 and self.total_iterations >= 1 and self.requested_cpus >= 0
                and self.min_gpus >= 1 and self.gpus_per_worker >= 1 and self.priority >= -(2 ** 31)
                and 0.0 <= self.requested_mem_gib < math.inf and 0.0 <= self.submit_time < math.inf
                and 0.0 <= self.completed_iterations <= self.total_iterations and 0.0 < self.weight < math.inf
                and (self.max_gpus is None or (type(self.max_gpus) is int and self.max_gpus >= self.min_gpus))
                and (self.requested_plan is None or (type(self.requested_plan) is ExecutionPlan
                                                     and self.requested_plan.num_gpus == self.requested_gpus)))

    def with_progress(self, completed_iterations: float) -> "Job":
        """This job with ``completed_iterations`` done (0 <= value <= total). A cheap copy for the
        simulator, which updates every job's progress at every round: only the new value is checked."""
        done = float(completed_iterations)
        if not 0.0 <= done <= self.total_iterations:
            raise ValidationError(f"job {self.name!r}: completed_iterations {completed_iterations!r} must lie in "
                                  f"0..{self.total_iterations}")
        new = copy.copy(self)
        object.__setattr__(new, "completed_iterations", done)
        return new

    def cpus_or_default(self, node_cpus_per_gpu: float) -> int:
        """The requested CPUs, or ``min(DEFAULT_CPUS_PER_GPU, node_cpus_per_gpu)`` per requested GPU
        (at least one per GPU) when the job requested none."""
        if self.requested_cpus > 0:
            return self.requested_cpus
        return max(self.requested_gpus, int(self.requested_gpus * min(DEFAULT_CPUS_PER_GPU, node_cpus_per_gpu)))

    @property
    def remaining_iterations(self) -> float:
        return self.total_iterations - self.completed_iterations

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "name": self.name, "model": self.model, "requested_gpus": self.requested_gpus,
            "total_iterations": self.total_iterations, "requested_cpus": self.requested_cpus,
            "requested_mem_gib": self.requested_mem_gib, "tenant": self.tenant,
            "guaranteed": self.guaranteed, "submit_time": self.submit_time,
            "completed_iterations": self.completed_iterations, "min_gpus": self.min_gpus}
        if self.requested_plan is not None:
            d["requested_plan"] = self.requested_plan.to_dict()
        if self.node_selector:
            d["node_selector"] = dict(self.node_selector)
        if self.topology is not None:
            d["topology"] = self.topology.to_dict()
        for f in ("max_gpus", "deadline", "gpu_type", "max_nodes", "min_cpus_per_gpu", "restart_seconds",
                  "checkpoint_age_s"):
            if getattr(self, f) is not None:
                d[f] = getattr(self, f)
        for f, default in (("gpus_per_worker", 1), ("fungible", False), ("checkpointing", False),
                           ("plan_fixed", False), ("priority", 0), ("weight", 1.0)):
            if getattr(self, f) != default:
                d[f] = getattr(self, f)
        return d

    @classmethod
    def from_dict(cls, data: Any) -> "Job":
        require_keys("Job", data, ("name", "model", "requested_gpus", "total_iterations"),
                     ("requested_cpus", "requested_mem_gib", "requested_plan", "tenant", "guaranteed",
                      "submit_time", "completed_iterations", "min_gpus", "max_gpus", "deadline",
                      "gpu_type", "gpus_per_worker", "fungible", "checkpointing", "plan_fixed", "max_nodes",
                      "min_cpus_per_gpu", "node_selector", "topology", "priority", "weight", "restart_seconds",
                      "checkpoint_age_s"))
        kwargs = json_fields(cls, data)
        if kwargs.get("requested_plan") is not None:
            kwargs["requested_plan"] = ExecutionPlan.from_dict(kwargs["requested_plan"])
        if kwargs.get("topology") is not None:
            try:
                kwargs["topology"] = TopologyRule.from_dict(kwargs["topology"])
            except ValidationError as e:
                raise ValidationError(f"job {data['name']!r}: {e}") from None
        return _build_job(**kwargs) if cls is Job else cls(**kwargs)


#: :class:`Job` from checked JSON members, without the frozen ``__init__``'s 30 attribute sets
#: (:mod:`optsched.core.construct`)
_build_job = frozen_builder(Job)

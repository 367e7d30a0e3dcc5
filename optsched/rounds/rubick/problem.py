"""The Rubick round (Rubick Sec. 3 and 5): the common round (cluster, jobs, running allocations,
outside work, time; :class:`~optsched.core.round.RoundProblem`) plus tenant GPU quotas and the
penalties for disturbing running jobs.

Choices where the paper is silent (checked in ``tests/rounds/test_rubick_problem.py``):

* **Quotas** (per GPU type: issue 24, item 5; forms, checks and accounting in
  :mod:`optsched.rounds.rubick.quotas`). ``quotas`` maps tenants to GPUs: ``{tenant: integer |
  {gpu_type: integer, "*": integer}}``. An integer ``n`` (the old form) means ``{"*": n}``, ``n`` GPUs
  over all GPU types; an object also caps the tenant per GPU type of the cluster (an unknown type is an
  error naming the tenant and the type; ``{}`` is quota 0). An empty mapping means no quota is enforced
  (every guaranteed job is admitted); once any quota is given, a tenant without an entry has quota 0,
  and a GPU type a tenant's object neither names nor covers by ``"*"`` has quota 0 for it. How a
  guaranteed job's usage counts (its minRes GPUs on the one GPU type it is admitted on, against that
  type's entry and ``"*"``) and how that type is picked: :mod:`optsched.rounds.rubick.admission`.
  ``to_dict`` writes the integer form for a tenant whose quota names no GPU type, so old rounds are
  written back unchanged.
* **Penalties** are in units of normalised throughput (one job running exactly as requested = 1):
  ``reconfig_penalty`` is charged when a running job's plan or placement changes,
  ``preempt_penalty`` when a running job gets nothing.
* **Trim penalty** (issue 16, item 5; the paper has no such action). ``trim_penalty`` is charged instead
  of ``reconfig_penalty`` when a running job keeps its plan and its GPUs on the same nodes and only its
  CPUs or host memory change (a *trim*, :func:`~optsched.rounds.rubick.choice.is_trim`): a cluster
  applies that by updating the container's CPU and memory limits in place (cgroups), without the
  checkpoint-and-restart a reconfiguration costs (78 s on average, Rubick Sec. 7.3). Default: a tenth
  of ``reconfig_penalty`` (:data:`TRIM_PENALTY_RATIO`), 0.005 at the default 0.05. It is not
  0 because a trim is not free either: the job's data loaders were sized for the CPUs it had (fewer
  CPUs slow them until the job next restarts), a lower memory limit can push a job that holds more
  host memory than its estimate (page cache, pinned buffers) into reclaim or OOM, and without a price
  rounds would move CPUs back and forth between jobs for gains at the level of rounding; 0.005 asks a
  trim to gain at least half a percent of one job's requested throughput. Checked: ``0 <=
  trim_penalty <= reconfig_penalty`` (a trim is never dearer than the restart it avoids). Written by
  ``to_dict`` always; a file without it gets the default.
* **Weights and penalties per job** (issue "A round a real cluster scheduler can state", items 2 and 6;
  :meth:`RubickRound.penalties`). A job's ``weight`` (default 1) multiplies its term of the objective:
  its normalised throughput and each penalty it pays. Without ``restart_seconds`` and
  ``checkpoint_age_s`` a job pays the round's penalties: ``weight x reconfig_penalty`` per
  reconfiguration, ``weight x preempt_penalty`` per preemption, ``weight x trim_penalty`` per trim. With
  either, its penalties are derived in the objective's own units, a fraction of a round in which the job
  runs at its requested throughput (normalised throughput 1) for ``round_interval_s`` seconds (required
  then): a reconfiguration costs the restart, ``R = restart_seconds / round_interval_s``; a preemption
  costs the restart it will pay when it resumes plus the progress it loses,
  ``R + A`` with ``A = checkpoint_age_s / round_interval_s``; each term the job does not give falls back
  to the round's default share (``R = reconfig_penalty``, ``A = max(0, preempt_penalty -
  reconfig_penalty)``), and both are multiplied by ``weight``. A trim costs ``weight x trim_penalty``,
  at most the job's reconfiguration penalty (a trim is a change in place, no restart). A start of a
  queued job costs nothing: its restart is paid whenever it starts, so it does not change which round is
  best. Example: a 78 s restart in a 300 s round is ``R = 0.26``; with a checkpoint 120 s old, a
  preemption costs ``0.26 + 0.40 = 0.66``.
* **Holds** (``min_hold_s``, with each running allocation's ``since``): a running job changed less than
  ``min_hold_s`` seconds ago is kept unless a drain or its own guarantee forces a change
  (:mod:`optsched.rounds.rubick.holds`). Not written when unset, like ``round_interval_s``.
* **Topology cost** (issue "A round a real cluster scheduler can state", item 2). A job whose
  ``topology`` rule is ``preferred`` costs ``topology_penalty x weight`` for each domain of the rule's
  level beyond the first that its placement spans, in the same units
  (:func:`~optsched.rounds.rubick.objective.topology_cost`). Default :data:`DEFAULT_TOPOLOGY_PENALTY`
  (0.02: two percent of one job's requested throughput per extra domain, less than a reconfiguration,
  so no running job is moved only to gather it); checked ``>= 0``; written by ``to_dict`` always; a
  file without it gets the default.
* **Self-contained rounds** (issue 16). ``perf_params``: fitted parameters per (model, GPU type) in the
  params-file format (``optsched.perf-params/1``, :meth:`~optsched.perf.performance_model.PerformanceModel.to_dict`;
  checked by :func:`~optsched.perf.lookup.check_round_params`). ``coefficients``: per job name the
  caller's own candidate configurations (:mod:`optsched.core.coefficient_rows`); such a job's table
  holds exactly those rows (:mod:`optsched.rounds.rubick.own_rows` says how each method chooses among
  them). Both are written by ``to_dict`` only when non-empty, so rounds without them read as before.
* **Deadlines** (issue "A round a real cluster scheduler can state", item 3; what they mean for the
  methods: :mod:`optsched.rounds.rubick.deadlines`). Two rules are the round's (:meth:`RubickRound.deadline_passed`,
  :meth:`RubickRound.samples_per_iteration`): a *queued* job whose ``deadline`` is at or before the round's
  ``time`` is invalid (a :class:`~optsched.core.skip.JobError` naming the job, so ``on_invalid_job: "skip"``
  leaves it out), while a *running* one is not an error (its deadline is reported missed and it is
  scheduled as a job without one); and a job with a deadline needs a known global batch (its model in
  the catalogue, as a model object of the round or in ``perf_params``), the samples of one iteration that
  turn its remaining iterations into the samples/s of the table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Mapping, NamedTuple

from optsched.core.checks import require_number
from optsched.core.coefficient_rows import (CoefficientRow, Coefficients, check_coefficients, coefficients_from_dict,
                                            coefficients_to_dict, normalise_coefficients)
from optsched.core.errors import ValidationError
from optsched.core.job import Job
from optsched.core.plan import check_plan_for_model
from optsched.core.round import RoundProblem
from optsched.core.skip import JobError, job_errors
from optsched.perf.lookup import check_round_params
from optsched.perf.performance_model import PerformanceModel
from optsched.rounds.rubick.constraints import check_job, check_running
from optsched.rounds.rubick.quotas import (ANY_TYPE, QuotaLedger, Quotas, QuotaValue, entries, normalise_quotas,
                                           quotas_from_json, quotas_to_json)

#: Default penalties (normalised-throughput units, see module docstring).
DEFAULT_RECONFIG_PENALTY = 0.05
DEFAULT_PREEMPT_PENALTY = 0.25
#: default cost per extra topology domain of a job with a preferred topology rule (module docstring)
DEFAULT_TOPOLOGY_PENALTY = 0.02
#: the default ``trim_penalty`` is ``reconfig_penalty`` divided by this (module docstring)
TRIM_PENALTY_RATIO = 10


class JobPenalties(NamedTuple):
    """What a change costs one job in the round objective (module docstring, "Weights and penalties per
    job"), its ``weight`` included."""

    reconfig: float
    trim: float
    preempt: float


@dataclass(frozen=True)
class RubickRound(RoundProblem):
    """A Rubick round (module docstring)."""

    KIND: ClassVar[str] = "rubick"
    #: binds every hard constraint of :mod:`optsched.rounds.rubick.constraints` (topology rules included),
    #: deadlines (:mod:`optsched.rounds.rubick.deadlines`) and priorities
    #: (:mod:`optsched.rounds.rubick.priorities`); refuses Lyra's worker fields
    UNBOUND_JOB_FIELDS: ClassVar[tuple[str, ...]] = ("gpus_per_worker", "fungible", "checkpointing")
    #: binds node labels (job ``node_selector``), node states and node topology (job ``topology``;
    #: :mod:`optsched.rounds.rubick.constraints`)
    UNBOUND_NODE_FIELDS: ClassVar[tuple[str, ...]] = ()
    SKIPS_INVALID_JOBS: ClassVar[bool] = True
    FIELD_KEYS: ClassVar[tuple[str, ...]] = ("quotas", "reconfig_penalty", "preempt_penalty", "perf_params",
                                             "coefficients", "trim_penalty", "topology_penalty", "round_interval_s",
                                             "min_hold_s")
    #: binds ``since`` (read by ``min_hold_s``, :mod:`optsched.rounds.rubick.holds`)
    UNBOUND_ALLOCATION_FIELDS: ClassVar[tuple[str, ...]] = ()

    #: ``(tenant, GPUs | ((key, GPUs), ...))`` sorted by tenant after construction (module docstring); a
    #: mapping or pairs in the forms of :func:`~optsched.rounds.rubick.quotas.normalise_quotas` before
    quotas: Quotas = ()
    reconfig_penalty: float = DEFAULT_RECONFIG_PENALTY
    preempt_penalty: float = DEFAULT_PREEMPT_PENALTY
    perf_params: tuple[PerformanceModel, ...] = ()
    coefficients: Coefficients = ()
    #: None: ``reconfig_penalty / TRIM_PENALTY_RATIO`` (module docstring); a number after construction
    trim_penalty: float | None = None
    #: seconds between rounds: what turns a job's ``restart_seconds`` and ``checkpoint_age_s`` into
    #: penalties (module docstring, "Weights and penalties per job")
    round_interval_s: float | None = None
    #: a running job whose allocation changed (``since``) less than this many seconds ago is kept
    #: (:mod:`optsched.rounds.rubick.holds`)
    min_hold_s: float | None = None
    #: per domain beyond the first of a job with a preferred topology rule, times its weight (module docstring)
    topology_penalty: float = DEFAULT_TOPOLOGY_PENALTY

    def _check_fields(self) -> None:
        for job in self.jobs:
            with job_errors(job.name):
                check_job(job)
        check_running(self)
        object.__setattr__(self, "quotas", normalise_quotas(self.quotas, (g.name for g in self.cluster.gpu_types)))
        require_number("round", "reconfig_penalty", self.reconfig_penalty, 0.0)
        require_number("round", "preempt_penalty", self.preempt_penalty, 0.0)
        if self.trim_penalty is None:
            object.__setattr__(self, "trim_penalty", float(self.reconfig_penalty) / TRIM_PENALTY_RATIO)
        require_number("round", "trim_penalty", self.trim_penalty, 0.0)
        require_number("round", "topology_penalty", self.topology_penalty, 0.0)
        if self.trim_penalty > self.reconfig_penalty:  # type: ignore[operator]
            raise ValidationError(f"round: trim_penalty ({self.trim_penalty:g}) must be <= reconfig_penalty "
                                  f"({self.reconfig_penalty:g}): a trim (CPUs or memory changed in place) never costs "
                                  "more than the restart of a reconfiguration")
        if self.round_interval_s is not None:
            require_number("round", "round_interval_s", self.round_interval_s, 0.0, strict=True)
        if self.min_hold_s is not None:
            require_number("round", "min_hold_s", self.min_hold_s, 0.0)
        for a in self.running:
            if a.since is not None and a.since > self.time:
                raise JobError(a.job, f"round: the running allocation of job {a.job!r} has since {a.since:g}, after "
                                      f"the round's time {self.time:g}")
        object.__setattr__(self, "_penalties", {j.name: self._job_penalties(j) for j in self.jobs
                                                if j.weight != 1.0 or j.restart_seconds is not None
                                                or j.checkpoint_age_s is not None})
        object.__setattr__(self, "perf_params", tuple(self.perf_params))
        check_round_params(self.perf_params, self.cluster, self.own_models)
        for job in self.jobs:
            if job.deadline is not None:
                self._check_deadline(job)
        coefficients = normalise_coefficients(self.coefficients) if self.coefficients else ()
        object.__setattr__(self, "coefficients", coefficients)
        if coefficients:
            check_coefficients(coefficients, {j.name: j for j in self.jobs}, self.cluster)
            self._check_row_plans(coefficients)
        object.__setattr__(self, "_own_rows", dict(coefficients))

    def _job_penalties(self, job: Any) -> JobPenalties:
        """``job``'s penalties (module docstring, "Weights and penalties per job")."""
        w = float(job.weight)
        if job.restart_seconds is None and job.checkpoint_age_s is None:
            return JobPenalties(w * self.reconfig_penalty, w * self.trim_penalty,  # type: ignore[operator]
                                w * self.preempt_penalty)
        if self.round_interval_s is None:
            field = "restart_seconds" if job.restart_seconds is not None else "checkpoint_age_s"
            raise ValidationError(f"round: job {job.name!r} sets {field}, which needs the round's round_interval_s "
                                  "(the seconds between rounds turn seconds of work into penalties)")
        interval = float(self.round_interval_s)
        restart = job.restart_seconds / interval if job.restart_seconds is not None else self.reconfig_penalty
        lost = job.checkpoint_age_s / interval if job.checkpoint_age_s is not None \
            else max(0.0, self.preempt_penalty - self.reconfig_penalty)
        return JobPenalties(w * restart, min(w * self.trim_penalty, w * restart),  # type: ignore[operator]
                            w * (restart + lost))

    def penalties(self, job: str) -> JobPenalties:
        """What a reconfiguration, a trim and a preemption cost job ``job`` in the objective (module
        docstring, "Weights and penalties per job")."""
        out = self._penalties.get(job)  # type: ignore[attr-defined]
        if out is None:
            return JobPenalties(float(self.reconfig_penalty), float(self.trim_penalty),  # type: ignore[arg-type]
                                float(self.preempt_penalty))
        return out

    def weight(self, job: str) -> float:
        """Job ``job``'s weight in the objective (module docstring)."""
        return float(self.job(job).weight)
    def deadline_passed(self, job: Job) -> bool:
        """Whether ``job`` has a deadline at or before the round's ``time`` (module docstring, "Deadlines")."""
        return job.deadline is not None and job.deadline <= self.time

    def samples_per_iteration(self, job: Job) -> int | None:
        """The global batch of ``job``'s model (samples per iteration): of the round's own model object, the
        catalogue's model or the model of its ``perf_params``; None when the round knows none of them."""
        spec = self.model_spec(job.model)
        if spec is None:
            spec = next((pm.model for pm in self.perf_params if pm.model.name == job.model), None)
        return None if spec is None else int(spec.global_batch)

    def _check_deadline(self, job: Job) -> None:
        """The round's deadline rules (module docstring, "Deadlines"), a ``JobError`` naming the job."""
        if self.deadline_passed(job) and self.current(job.name) is None:
            raise JobError(job.name, f"round: queued job {job.name!r} has deadline {job.deadline:g} s, at or before "
                                     f"the round's time {self.time:g} s: it cannot be met (remove the deadline, "
                                     "or drop the job)")
        if self.samples_per_iteration(job) is None:
            raise JobError(job.name, f"round: job {job.name!r} has a deadline but the round does not know the global "
                                     f"batch of its model {job.model!r} (samples per iteration, what turns its "
                                     "remaining iterations into samples/s): give the model as an object")

    def _warnings(self) -> list[str]:
        """The common warnings, and a reconfiguration penalty above the preemption penalty: a method then
        prefers preempting a running job to moving it, which is rarely meant (issue "A round a real
        cluster scheduler can state", item 6)."""
        out = super()._warnings()
        if self.reconfig_penalty > self.preempt_penalty:
            out.append(f"reconfig_penalty {self.reconfig_penalty:g} exceeds preempt_penalty {self.preempt_penalty:g}: "
                       "preempting a running job then costs less than reconfiguring it")
        return out

    def _check_row_plans(self, coefficients: Coefficients) -> None:
        """Each own row's plan suits the job's model where the round knows its shape (batch divisibility,
        TP dividing the heads, PP within the layers; :func:`~optsched.core.plan.check_plan_for_model`)."""
        shapes = {pm.model.name: pm.model for pm in self.perf_params}
        for name, rows in coefficients:
            model = self.job(name).model
            spec = self.model_spec(model) or shapes.get(model)
            if spec is None:
                continue
            for i, row in enumerate(rows):
                try:
                    check_plan_for_model(row.plan, spec)
                except ValidationError as e:
                    raise JobError(name, f"coefficients[{name!r}][{i}]: {e}") from None

    @classmethod
    def _fields_without(cls, fields: Mapping[str, Any], names: frozenset[str]) -> dict[str, Any]:
        """``coefficients`` without the rows of the jobs ``names`` (they are left out of the round)."""
        given = fields.get("coefficients") or ()
        pairs = list(given.items()) if isinstance(given, Mapping) else list(given)
        kept = tuple((n, rows) for n, rows in pairs if n not in names)
        return {"coefficients": kept} if len(kept) != len(pairs) else {}

    def own_rows(self, job: str) -> tuple[CoefficientRow, ...] | None:
        """The caller's own configurations of ``job`` (``coefficients``), None when it has none."""
        return self._own_rows.get(job)  # type: ignore[attr-defined]

    @property
    def quota_map(self) -> dict[str, QuotaValue]:
        """Tenant -> its quota in normal form (GPUs over all types, or ``((key, GPUs), ...)``)."""
        return dict(self.quotas)

    def quota_of(self, tenant: str, gpu_type: str | None = None) -> int | None:
        """The most GPUs ``tenant`` may use (module docstring): on ``gpu_type`` (the smaller of that type's
        entry and ``"*"``, 0 when neither is given), or without ``gpu_type`` over all types (``"*"``, else
        the sum of its type entries). None when the round enforces no quotas. Admission and AntMan count
        usage with :meth:`quota_ledger`, not with this."""
        if not self.quotas:
            return None
        given = entries(dict(self.quotas).get(tenant, 0))
        if gpu_type is None:
            return given[ANY_TYPE] if ANY_TYPE in given else sum(given.values())
        caps = [given[k] for k in (gpu_type, ANY_TYPE) if k in given]
        return min(caps) if caps else 0

    def quota_ledger(self) -> QuotaLedger:
        """A fresh :class:`~optsched.rounds.rubick.quotas.QuotaLedger` of the round's quotas (nothing used)."""
        return QuotaLedger(self.quotas)

    def _fields_to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"quotas": quotas_to_json(self.quotas), "reconfig_penalty": self.reconfig_penalty,
                               "preempt_penalty": self.preempt_penalty, "trim_penalty": self.trim_penalty,
                               "topology_penalty": self.topology_penalty}
        if self.perf_params:
            out["perf_params"] = [pm.to_dict() for pm in self.perf_params]
        if self.coefficients:
            out["coefficients"] = coefficients_to_dict(self.coefficients)
        for f in ("round_interval_s", "min_hold_s"):
            if getattr(self, f) is not None:
                out[f] = getattr(self, f)
        return out

    @classmethod
    def _fields_from_dict(cls, data: Mapping[str, Any]) -> dict[str, Any]:
        params = data.get("perf_params", [])
        if not isinstance(params, list):
            raise ValidationError("round: perf_params must be a JSON array of params-file objects")
        parsed = []
        for i, item in enumerate(params):
            try:
                parsed.append(PerformanceModel.from_dict(item))
            except (ValidationError, TypeError) as e:
                raise ValidationError(f"round: perf_params[{i}]: {e}") from None
        return {"quotas": quotas_from_json(data.get("quotas", {})),
                "reconfig_penalty": data.get("reconfig_penalty", DEFAULT_RECONFIG_PENALTY),
                "preempt_penalty": data.get("preempt_penalty", DEFAULT_PREEMPT_PENALTY),
                "perf_params": tuple(parsed),
                "coefficients": coefficients_from_dict(data["coefficients"]) if "coefficients" in data else (),
                "trim_penalty": data.get("trim_penalty"),
                "topology_penalty": data.get("topology_penalty", DEFAULT_TOPOLOGY_PENALTY),
                "round_interval_s": data.get("round_interval_s"), "min_hold_s": data.get("min_hold_s")}


__all__ = ["DEFAULT_PREEMPT_PENALTY", "DEFAULT_RECONFIG_PENALTY", "DEFAULT_TOPOLOGY_PENALTY", "JobPenalties",
           "RubickRound", "TRIM_PENALTY_RATIO"]

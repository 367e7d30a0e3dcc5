"""The Rubick round (Rubick Sec. 3 and 5): the common round (cluster, jobs, running allocations,
outside work, time; :class:`~optsched.core.round.RoundProblem`) plus tenant GPU quotas and the
penalties for disturbing running jobs.

Choices where the paper is silent (checked in ``tests/rounds/test_rubick_problem.py``):

* **Quotas.** ``quotas`` maps tenants to GPUs. An empty mapping means no quota is enforced (every
  guaranteed job is admitted); once any quota is given, a tenant without an entry has quota 0.
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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Mapping

from optsched.core.checks import json_ints, require_int, require_name, require_number
from optsched.core.coefficient_rows import (CoefficientRow, Coefficients, check_coefficients, coefficients_from_dict,
                                            coefficients_to_dict, normalise_coefficients)
from optsched.core.errors import ValidationError
from optsched.core.job import OBJECTIVE_FIELDS
from optsched.core.plan import check_plan_for_model
from optsched.core.round import RoundProblem
from optsched.core.skip import JobError, job_errors
from optsched.perf.lookup import check_round_params
from optsched.perf.performance_model import PerformanceModel
from optsched.rounds.rubick.constraints import check_job, check_running

#: Default penalties (normalised-throughput units, see module docstring).
DEFAULT_RECONFIG_PENALTY = 0.05
DEFAULT_PREEMPT_PENALTY = 0.25
#: default cost per extra topology domain of a job with a preferred topology rule (module docstring)
DEFAULT_TOPOLOGY_PENALTY = 0.02
#: the default ``trim_penalty`` is ``reconfig_penalty`` divided by this (module docstring)
TRIM_PENALTY_RATIO = 10


@dataclass(frozen=True)
class RubickRound(RoundProblem):
    """A Rubick round (module docstring)."""

    KIND: ClassVar[str] = "rubick"
    #: binds every hard constraint of :mod:`optsched.rounds.rubick.constraints` (topology rules
    #: included); refuses Lyra's worker fields, and deadlines and priorities (not bound in Rubick rounds yet)
    UNBOUND_JOB_FIELDS: ClassVar[tuple[str, ...]] = ("deadline", "gpus_per_worker", "fungible", "checkpointing",
                                                     "priority", *OBJECTIVE_FIELDS)
    #: binds node labels (job ``node_selector``), node states and node topology (job ``topology``;
    #: :mod:`optsched.rounds.rubick.constraints`)
    UNBOUND_NODE_FIELDS: ClassVar[tuple[str, ...]] = ()
    SKIPS_INVALID_JOBS: ClassVar[bool] = True
    FIELD_KEYS: ClassVar[tuple[str, ...]] = ("quotas", "reconfig_penalty", "preempt_penalty", "perf_params",
                                             "coefficients", "trim_penalty", "topology_penalty")

    quotas: tuple[tuple[str, int], ...] = ()
    reconfig_penalty: float = DEFAULT_RECONFIG_PENALTY
    preempt_penalty: float = DEFAULT_PREEMPT_PENALTY
    perf_params: tuple[PerformanceModel, ...] = ()
    coefficients: Coefficients = ()
    #: None: ``reconfig_penalty / TRIM_PENALTY_RATIO`` (module docstring); a number after construction
    trim_penalty: float | None = None
    #: per domain beyond the first of a job with a preferred topology rule, times its weight (module docstring)
    topology_penalty: float = DEFAULT_TOPOLOGY_PENALTY

    def _check_fields(self) -> None:
        for job in self.jobs:
            with job_errors(job.name):
                check_job(job)
        check_running(self)
        quotas = tuple(sorted(dict(self.quotas).items())) if isinstance(self.quotas, Mapping) \
            else tuple(sorted(self.quotas))
        object.__setattr__(self, "quotas", quotas)
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
        for tenant, gpus in quotas:
            require_name("round quota tenant", tenant)
            require_int(f"round: quota of tenant {tenant!r}", "GPUs", gpus, 0)
        object.__setattr__(self, "perf_params", tuple(self.perf_params))
        check_round_params(self.perf_params, self.cluster, self.own_models)
        coefficients = normalise_coefficients(self.coefficients) if self.coefficients else ()
        object.__setattr__(self, "coefficients", coefficients)
        if coefficients:
            check_coefficients(coefficients, {j.name: j for j in self.jobs}, self.cluster)
            self._check_row_plans(coefficients)
        object.__setattr__(self, "_own_rows", dict(coefficients))

    def warnings(self) -> list[str]:
        """The common warnings, and a reconfiguration penalty above the preemption penalty: a method then
        prefers preempting a running job to moving it, which is rarely meant (issue "A round a real
        cluster scheduler can state", item 6)."""
        out = super().warnings()
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
    def quota_map(self) -> dict[str, int]:
        return dict(self.quotas)

    def quota_of(self, tenant: str) -> int | None:
        """GPU quota of ``tenant``; None when the round enforces no quotas (module docstring)."""
        if not self.quotas:
            return None
        return dict(self.quotas).get(tenant, 0)

    def _fields_to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"quotas": dict(self.quotas), "reconfig_penalty": self.reconfig_penalty,
                               "preempt_penalty": self.preempt_penalty, "trim_penalty": self.trim_penalty,
                               "topology_penalty": self.topology_penalty}
        if self.perf_params:
            out["perf_params"] = [pm.to_dict() for pm in self.perf_params]
        if self.coefficients:
            out["coefficients"] = coefficients_to_dict(self.coefficients)
        return out

    @classmethod
    def _fields_from_dict(cls, data: Mapping[str, Any]) -> dict[str, Any]:
        if "quotas" in data and not isinstance(data["quotas"], dict):
            raise ValidationError("round: quotas must be a JSON object")
        params = data.get("perf_params", [])
        if not isinstance(params, list):
            raise ValidationError("round: perf_params must be a JSON array of params-file objects")
        parsed = []
        for i, item in enumerate(params):
            try:
                parsed.append(PerformanceModel.from_dict(item))
            except (ValidationError, TypeError) as e:
                raise ValidationError(f"round: perf_params[{i}]: {e}") from None
        return {"quotas": tuple(json_ints(data.get("quotas", {})).items()),
                "reconfig_penalty": data.get("reconfig_penalty", DEFAULT_RECONFIG_PENALTY),
                "preempt_penalty": data.get("preempt_penalty", DEFAULT_PREEMPT_PENALTY),
                "perf_params": tuple(parsed),
                "coefficients": coefficients_from_dict(data["coefficients"]) if "coefficients" in data else (),
                "trim_penalty": data.get("trim_penalty"),
                "topology_penalty": data.get("topology_penalty", DEFAULT_TOPOLOGY_PENALTY)}


__all__ = ["DEFAULT_PREEMPT_PENALTY", "DEFAULT_RECONFIG_PENALTY", "DEFAULT_TOPOLOGY_PENALTY", "RubickRound",
           "TRIM_PENALTY_RATIO"]

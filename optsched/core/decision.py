"""The answer to a round: a common top level every kind shares and a per-kind payload.

Top level: the ``kind`` and ``method``, the solver ``status``, the ``objective`` of the decision, the
proven upper ``bound`` on the objective (None for a heuristic), the relative ``gap``
(:func:`relative_gap`), the wall time ``solve_seconds`` of the whole call, the objective of the
heuristic that warm-started a solver (``heuristic_objective``), whether a warm start was used, and a
``message``. The payload is what the kind decides: :class:`JobAllocations` (per job: its allocation or
none, with the predicted throughput) for kinds that place jobs, other payload classes for decisions
of other shapes (servers to return, expert replica placements). In JSON the payload's fields sit next
to the top-level ones (a Rubick decision has ``"jobs": [...]``), so decision files of format
``optsched.decision/1`` read as before.

**The rule of the top level** (every kind, every method; ``tests/policies/test_decision_top_level.py``):

* ``objective`` is the kind's round objective, higher is better; a kind that minimises a cost reports
  ``objective = -cost`` and ``bound = -(proven lower bound)``.
* A heuristic method or baseline (no solver): status ``heuristic``, ``bound`` and ``gap`` None,
  ``heuristic_objective == objective``, ``warm_start`` False.
* A solver method: status ``optimal`` or ``feasible`` with the solver's proven ``bound`` (>=
  ``objective``), or ``heuristic-fallback`` (the heuristic's decision, the solver found nothing
  better; ``bound`` is the solver's when it proved one); ``heuristic_objective`` is the objective of
  the heuristic decision that warm-started the solver or ran after it (None when there was none: also
  an ``optimal`` answer of a kind whose heuristic runs only after a solve not proven optimal,
  :mod:`optsched.policies.exact`, step 2), and ``objective >= heuristic_objective``; ``warm_start``
  says whether the solver was given that decision as a hint.
* ``gap == relative_gap(bound, objective)`` always; ``optimal`` means a gap of 0 up to the solver's
  tolerance. ``partial`` (a method its time limit cut short) follows the rule of its method otherwise.

**Skipped jobs** (``on_invalid_job: "skip"``, :mod:`optsched.core.skip`). ``skipped`` lists the jobs the
round left out because they failed validation, ``[{"job": name, "reason": text}]``, the same list for
every method of a round. A skipped job is not in the payload (no ``wait`` entry: it was not part of the
round solved; its running allocation, when it had one, is held or released as
:mod:`optsched.core.round` says). Written only when non-empty, so decisions of rounds without skipped
jobs read and hash as before.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from optsched.core.allocation import Allocation, Placement
from optsched.core.checks import require_keys, require_name, require_number
from optsched.core.errors import UnknownNameError, ValidationError
from optsched.core.kinds import DecisionPayload, round_kind
from optsched.core.skip import SkippedJob, check_unique, skipped_from_dict

DECISION_FORMAT = "optsched.decision/1"

#: What happened to a job in a decision.
#: ``trim``: a running job keeps its plan and its GPUs on the same nodes, only its CPUs or memory change
#: (in place, no restart; issue 16, item 5)
ACTIONS = ("start", "keep", "reconfigure", "preempt", "wait", "trim")

#: Solver statuses: proven optimal; feasible with a gap; a heuristic's decision (asked for);
#: the heuristic's decision returned because the solver found nothing better in its time limit; a
#: feasible decision of a method its time limit cut short before it considered every job (the
#: message says what was left out).
STATUSES = ("optimal", "feasible", "heuristic", "heuristic-fallback", "partial")

#: the denominator floor of :func:`relative_gap`
GAP_FLOOR = 1e-9

#: the top-level fields of a decision's JSON; ``queued_seconds`` is written by the service only (the seconds a
#: request waited for a worker, :mod:`optsched.service`) and is read but not kept by :meth:`Decision.from_dict`
_TOP_LEVEL = ("format", "kind", "method", "status", "objective", "bound", "gap", "solve_seconds",
              "heuristic_objective", "warm_start", "message", "skipped", "queued_seconds")


def relative_gap(bound: float | None, objective: float | None) -> float | None:
    """Relative optimality gap of a maximisation, ``max(0, (bound - objective) / max(|bound|, 1e-9))``;
    None without a bound or an objective. The one gap formula of every decision and solution."""
    if bound is None or objective is None:
        return None
    return max(0.0, (bound - objective) / max(abs(bound), GAP_FLOOR))


@dataclass(frozen=True)
class JobDecision:
    """One job's outcome: its new ``allocation`` (None: it does not run this round), the predicted
    ``throughput`` (samples/s) and ``normalised`` throughput (divided by the throughput of its
    request), whether its performance guarantee was enforced (``protected``), and the ``action``;
    ``reason`` says why a job does not run (``wait``, ``preempt``; empty otherwise) and ``penalty`` is
    what its action costs the objective (a kind's reconfiguration, trim or preemption penalty, else 0)."""

    job: str
    allocation: Allocation | None
    throughput: float
    normalised: float
    action: str
    protected: bool = False
    reason: str = ""
    penalty: float = 0.0

    def __post_init__(self) -> None:
        require_name("JobDecision", self.job)
        if self.action not in ACTIONS:
            raise UnknownNameError("action", self.action, ACTIONS)
        if self.allocation is not None and self.allocation.job != self.job:
            raise ValidationError(f"decision of job {self.job!r} carries an allocation of {self.allocation.job!r}")
        if (self.allocation is None) != (self.action in ("preempt", "wait")):
            raise ValidationError(f"decision of job {self.job!r}: action {self.action!r} does not match its allocation")

    @classmethod
    def assembled(cls, job: str, allocation: Allocation | None, throughput: float, normalised: float, action: str,
                  protected: bool = False, reason: str = "", penalty: float = 0.0) -> "JobDecision":
        """The same :class:`JobDecision` without :meth:`__post_init__`'s checks, for a kind's decision assembly,
        which builds the name from its validated round and the action from the allocation (about 0.8 us a job
        instead of 2 us: a 100,000-job round's decision within a 1 s time limit, issue 26). Input from outside
        the library goes through the constructor or :meth:`from_dict`."""
        out = object.__new__(cls)
        out.__dict__.update(job=job, allocation=allocation, throughput=throughput, normalised=normalised,
                            action=action, protected=protected, reason=reason, penalty=penalty)
        return out

    def to_dict(self) -> dict[str, Any]:
        a = self.allocation
        return {"job": self.job, "action": self.action, "protected": self.protected,
                "plan": None if a is None else a.plan.to_dict(),
                "placement": {} if a is None else a.placement.to_dict(),
                "throughput": self.throughput, "normalised_throughput": self.normalised, "reason": self.reason,
                "penalty": self.penalty}

    @classmethod
    def from_dict(cls, data: Any) -> "JobDecision":
        require_keys("job decision", data, ("job", "action", "plan", "placement", "throughput"),
                     ("protected", "normalised_throughput", "reason", "penalty"))
        from optsched.core.plan import ExecutionPlan
        alloc = None
        if data["plan"] is None and data["placement"]:
            raise ValidationError(f"decision of job {data['job']!r}: a placement without a plan")
        if data["plan"] is not None:
            alloc = Allocation(data["job"], ExecutionPlan.from_dict(data["plan"]),
                               Placement.from_dict(data["placement"]))
        return cls(data["job"], alloc, float(data["throughput"]), float(data.get("normalised_throughput", 0.0)),
                   data["action"], bool(data.get("protected", False)), str(data.get("reason", "")),
                   float(data.get("penalty", 0.0)))


def _time_or_none(owner: str, name: str, value: Any) -> float | None:
    if value is None:
        return None
    require_number(owner, name, value, 0.0)  # finite
    return float(value)


@dataclass(frozen=True)
class DeadlineAtRisk:
    """A job whose deadline the decision does not promise to meet (module docstring, "Deadlines"): its
    ``deadline`` (s), the ``reason``, the throughput it ``needs`` from the round's time on (samples/s),
    ``best_finish`` (the round's time plus its remaining samples over the best throughput of any of its
    configurations; None when it has none) and ``planned_finish`` (the same at the decision's throughput;
    None when it does not run). JSON: ``{"job", "deadline", "reason", "needed_throughput", "best_finish",
    "planned_finish"}``."""

    job: str
    deadline: float
    reason: str
    needs: float
    best_finish: float | None = None
    planned_finish: float | None = None

    def __post_init__(self) -> None:
        require_name("deadline_at_risk job", self.job)
        owner = f"deadline_at_risk of job {self.job!r}"
        require_number(owner, "deadline", self.deadline, 0.0)
        require_number(owner, "needed_throughput", self.needs, 0.0)
        if not isinstance(self.reason, str) or not self.reason.strip():
            raise ValidationError(f"{owner}: reason must be a non-empty string")
        object.__setattr__(self, "best_finish", _time_or_none(owner, "best_finish", self.best_finish))
        object.__setattr__(self, "planned_finish", _time_or_none(owner, "planned_finish", self.planned_finish))

    def to_dict(self) -> dict[str, Any]:
        return {"job": self.job, "deadline": self.deadline, "reason": self.reason, "needed_throughput": self.needs,
                "best_finish": self.best_finish, "planned_finish": self.planned_finish}

    @classmethod
    def from_dict(cls, data: Any) -> "DeadlineAtRisk":
        require_keys("deadline_at_risk entry", data, ("job", "deadline", "reason", "needed_throughput"),
                     ("best_finish", "planned_finish"))
        return cls(data["job"], data["deadline"], data["reason"], data["needed_throughput"], data.get("best_finish"),
                   data.get("planned_finish"))


@dataclass(frozen=True)
class DeadlineMissed:
    """A running job whose ``deadline`` (s) had passed at the round's time (module docstring, "Deadlines").
    JSON: ``{"job", "deadline"}``."""

    job: str
    deadline: float

    def __post_init__(self) -> None:
        require_name("deadline_missed job", self.job)
        require_number(f"deadline_missed of job {self.job!r}", "deadline", self.deadline, 0.0)

    def to_dict(self) -> dict[str, Any]:
        return {"job": self.job, "deadline": self.deadline}

    @classmethod
    def from_dict(cls, data: Any) -> "DeadlineMissed":
        require_keys("deadline_missed entry", data, ("job", "deadline"))
        return cls(data["job"], data["deadline"])


def _entries(data: dict[str, Any], key: str, kind: Any) -> tuple[Any, ...]:
    items = data.get(key, [])
    if not isinstance(items, list):
        raise ValidationError(f"decision: {key} must be a JSON array")
    return tuple(kind.from_dict(x) for x in items)


@dataclass(frozen=True)
class JobAllocations:
    """The payload of kinds that place jobs: one :class:`JobDecision` per job of the round, each job
    once, and the deadline reports (module docstring, "Deadlines"; each job at most once, a job of
    ``jobs``). JSON: ``{"jobs": [job decision, ...]}`` plus ``deadline_at_risk`` and ``deadline_missed``
    when non-empty."""

    KEYS: ClassVar[tuple[tuple[str, ...], tuple[str, ...]]] = (("jobs",), ("deadline_at_risk", "deadline_missed"))

    jobs: tuple[JobDecision, ...]
    deadline_at_risk: tuple[DeadlineAtRisk, ...] = field(default=(), kw_only=True)
    deadline_missed: tuple[DeadlineMissed, ...] = field(default=(), kw_only=True)

    def __post_init__(self) -> None:
        jobs = tuple(self.jobs)
        for d in jobs:
            if not isinstance(d, JobDecision):
                raise ValidationError(f"decision: jobs must hold JobDecision objects, got {d!r}")
        names = [d.job for d in jobs]
        if len(set(names)) != len(names):
            dup = sorted({n for n in names if names.count(n) > 1})
            raise ValidationError(f"decision: job(s) {', '.join(map(repr, dup))} appear twice")
        object.__setattr__(self, "jobs", jobs)
        known = set(names)
        reported: set[str] = set()
        for key, kind in (("deadline_at_risk", DeadlineAtRisk), ("deadline_missed", DeadlineMissed)):
            entries = tuple(getattr(self, key))
            for e in entries:
                if not isinstance(e, kind):
                    raise ValidationError(f"decision: {key} must hold {kind.__name__} objects, got {e!r}")
                if e.job not in known or e.job in reported:
                    raise ValidationError(f"decision: {key} names job {e.job!r}, which must be a job of the decision "
                                          "listed once in deadline_at_risk and deadline_missed")
                reported.add(e.job)
            object.__setattr__(self, key, entries)

    def job(self, name: str) -> JobDecision:
        for d in self.jobs:
            if d.job == name:
                return d
        raise UnknownNameError("job", name, [d.job for d in self.jobs])

    @property
    def allocations(self) -> dict[str, Allocation]:
        """Job name -> allocation of every job that runs."""
        return {d.job: d.allocation for d in self.jobs if d.allocation is not None}

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"jobs": [d.to_dict() for d in self.jobs]}
        if self.deadline_at_risk:
            out["deadline_at_risk"] = [e.to_dict() for e in self.deadline_at_risk]
        if self.deadline_missed:
            out["deadline_missed"] = [e.to_dict() for e in self.deadline_missed]
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "JobAllocations":
        if not isinstance(data.get("jobs"), list):
            raise ValidationError("decision: jobs must be a JSON array")
        names = [d.get("job") if isinstance(d, dict) else None for d in data["jobs"]]
        if len(set(names)) != len(names):
            raise ValidationError("decision: a job appears twice")
        return cls(tuple(JobDecision.from_dict(d) for d in data["jobs"]),
                   deadline_at_risk=_entries(data, "deadline_at_risk", DeadlineAtRisk),
                   deadline_missed=_entries(data, "deadline_missed", DeadlineMissed))


@dataclass(frozen=True)
class Decision:
    """The answer to a round (module docstring). ``payload`` must be an instance of the payload class
    registered for ``kind``. :attr:`jobs`, :meth:`job` and :attr:`allocations` read a
    :class:`JobAllocations` payload (an error for kinds whose payload has no jobs)."""

    kind: str
    method: str
    status: str
    objective: float
    payload: DecisionPayload
    bound: float | None = None
    gap: float | None = None
    solve_seconds: float = 0.0
    heuristic_objective: float | None = None
    warm_start: bool = False
    message: str = ""
    #: the jobs the round left out (module docstring, "Skipped jobs")
    skipped: tuple[SkippedJob, ...] = ()

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise UnknownNameError("status", self.status, STATUSES)
        expected = round_kind(self.kind).payload
        if not isinstance(self.payload, expected):
            raise ValidationError(f"decision of kind {self.kind!r}: payload must be a {expected.__name__}, got "
                                  f"{type(self.payload).__name__}")
        object.__setattr__(self, "skipped", tuple(self.skipped))
        if not all(isinstance(s, SkippedJob) for s in self.skipped):
            raise ValidationError("decision: skipped must hold SkippedJob objects")
        check_unique(self.skipped, "decision")
        if self.skipped and isinstance(self.payload, JobAllocations):
            both = sorted({s.job for s in self.skipped} & {d.job for d in self.payload.jobs})
            if both:
                raise ValidationError(f"decision: job(s) {', '.join(map(repr, both))} both skipped and decided")

    def _job_payload(self) -> JobAllocations:
        if not isinstance(self.payload, JobAllocations):
            raise ValidationError(f"decisions of kind {self.kind!r} carry {type(self.payload).__name__}, not per-job "
                                  "allocations; read decision.payload")
        return self.payload

    @property
    def jobs(self) -> tuple[JobDecision, ...]:
        return self._job_payload().jobs

    def job(self, name: str) -> JobDecision:
        return self._job_payload().job(name)

    @property
    def allocations(self) -> dict[str, Allocation]:
        return self._job_payload().allocations

    def to_dict(self) -> dict[str, Any]:
        return {"format": DECISION_FORMAT, "kind": self.kind, "method": self.method, "status": self.status,
                "objective": self.objective, "bound": self.bound, "gap": self.gap,
                "solve_seconds": self.solve_seconds, "heuristic_objective": self.heuristic_objective,
                "warm_start": self.warm_start, "message": self.message,
                **({"skipped": [s.to_dict() for s in self.skipped]} if self.skipped else {}), **self.payload.to_dict()}

    @classmethod
    def from_dict(cls, data: Any) -> "Decision":
        if not isinstance(data, dict):
            raise ValidationError(f"decision: expected a JSON object, got {type(data).__name__}")
        kind = round_kind(data["kind"]) if "kind" in data else None
        required, optional = kind.payload.KEYS if kind is not None else ((), ())
        require_keys("decision", data, ("kind", "method", "status", "objective", *required), (*_TOP_LEVEL, *optional))
        assert kind is not None
        if data.get("format", DECISION_FORMAT) != DECISION_FORMAT:
            raise ValidationError(f"decision: unsupported format {data['format']!r}, expected {DECISION_FORMAT}")
        for key in ("objective", "bound", "gap", "solve_seconds", "heuristic_objective", "queued_seconds"):
            v = data.get(key)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
                raise ValidationError(f"decision: {key} must be a number or null, got {v!r}")
        payload = kind.payload.from_dict({k: v for k, v in data.items() if k not in _TOP_LEVEL})
        return cls(data["kind"], data["method"], data["status"], float(data["objective"]), payload,
                   data.get("bound"), data.get("gap"), float(data.get("solve_seconds", 0.0)),
                   data.get("heuristic_objective"), bool(data.get("warm_start", False)), str(data.get("message", "")),
                   skipped_from_dict(data.get("skipped", []), "decision"))


__all__ = ["ACTIONS", "DECISION_FORMAT", "DeadlineAtRisk", "DeadlineMissed", "Decision", "DecisionPayload", "GAP_FLOOR",
           "JobAllocations", "JobDecision", "STATUSES", "relative_gap"]

"""The Rubick round (Rubick Sec. 3 and 5): the common round (cluster, jobs, running allocations,
outside work, time; :class:`~optsched.core.round.RoundProblem`) plus tenant GPU quotas and the
penalties for disturbing running jobs.

Choices where the paper is silent (checked in ``tests/rounds/test_rubick_problem.py``):

* **Quotas.** ``quotas`` maps tenants to GPUs. An empty mapping means no quota is enforced (every
  guaranteed job is admitted); once any quota is given, a tenant without an entry has quota 0.
* **Penalties** are in units of normalised throughput (one job running exactly as requested = 1):
  ``reconfig_penalty`` is charged when a running job's plan or placement changes,
  ``preempt_penalty`` when a running job gets nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Mapping

from optsched.core.checks import require_int, require_name, require_number
from optsched.core.errors import ValidationError
from optsched.core.round import RoundProblem

#: Default penalties (normalised-throughput units, see module docstring).
DEFAULT_RECONFIG_PENALTY = 0.05
DEFAULT_PREEMPT_PENALTY = 0.25


@dataclass(frozen=True)
class RubickRound(RoundProblem):
    """A Rubick round (module docstring)."""

    KIND: ClassVar[str] = "rubick"
    FIELD_KEYS: ClassVar[tuple[str, ...]] = ("quotas", "reconfig_penalty", "preempt_penalty")

    quotas: tuple[tuple[str, int], ...] = ()
    reconfig_penalty: float = DEFAULT_RECONFIG_PENALTY
    preempt_penalty: float = DEFAULT_PREEMPT_PENALTY

    def _check_fields(self) -> None:
        quotas = tuple(sorted(dict(self.quotas).items())) if isinstance(self.quotas, Mapping) \
            else tuple(sorted(self.quotas))
        object.__setattr__(self, "quotas", quotas)
        require_number("round", "reconfig_penalty", self.reconfig_penalty, 0.0)
        require_number("round", "preempt_penalty", self.preempt_penalty, 0.0)
        for tenant, gpus in quotas:
            require_name("round quota tenant", tenant)
            require_int(f"round: quota of tenant {tenant!r}", "GPUs", gpus, 0)

    @property
    def quota_map(self) -> dict[str, int]:
        return dict(self.quotas)

    def quota_of(self, tenant: str) -> int | None:
        """GPU quota of ``tenant``; None when the round enforces no quotas (module docstring)."""
        if not self.quotas:
            return None
        return dict(self.quotas).get(tenant, 0)

    def _fields_to_dict(self) -> dict[str, Any]:
        return {"quotas": dict(self.quotas), "reconfig_penalty": self.reconfig_penalty,
                "preempt_penalty": self.preempt_penalty}

    @classmethod
    def _fields_from_dict(cls, data: Mapping[str, Any]) -> dict[str, Any]:
        if "quotas" in data and not isinstance(data["quotas"], dict):
            raise ValidationError("round: quotas must be a JSON object")
        return {"quotas": tuple(data.get("quotas", {}).items()),
                "reconfig_penalty": data.get("reconfig_penalty", DEFAULT_RECONFIG_PENALTY),
                "preempt_penalty": data.get("preempt_penalty", DEFAULT_PREEMPT_PENALTY)}


__all__ = ["DEFAULT_PREEMPT_PENALTY", "DEFAULT_RECONFIG_PENALTY", "RubickRound"]

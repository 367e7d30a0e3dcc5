"""A base for round kinds that schedule something other than jobs (the MoE kinds ``experts``,
``moe-comm`` and ``training-packing``): their rounds take no jobs and no running allocations, and their
files may leave ``jobs`` out. The cluster still describes the hardware (devices, link bandwidth)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from optsched.core.errors import ValidationError
from optsched.core.round import RoundProblem


@dataclass(frozen=True)
class JoblessRound(RoundProblem):
    """A round without jobs (module docstring); subclasses call :meth:`_require_no_jobs` first in
    ``_check_fields``."""

    def _require_no_jobs(self, what: str) -> None:
        if self.jobs or self.running:
            raise ValidationError(f"round: a {self.kind} round {what}; it takes no jobs and no running allocations")

    @classmethod
    def from_dict(cls, data: Any, clusters: Any = None, *, on_invalid_job: str | None = None) -> RoundProblem:
        """Parse a round file; ``jobs`` may be left out."""
        if isinstance(data, dict) and data.get("kind") == cls.KIND and "jobs" not in data:
            data = {**data, "jobs": []}
        return super().from_dict(data, clusters, on_invalid_job=on_invalid_job)


__all__ = ["JoblessRound"]

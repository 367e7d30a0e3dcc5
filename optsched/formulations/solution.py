"""What every formulation's ``solve`` returns (DESIGN.md, ``optsched/formulations``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

#: Formulation statuses: proven optimal; a solution with a gap; proven infeasible; nothing found in time.
SOLUTION_STATUSES = ("optimal", "feasible", "infeasible", "unknown")


@dataclass(frozen=True)
class ModelSize:
    """Size of a built model: variables, constraints, and which encoding was used."""

    variables: int
    constraints: int
    encoding: str

    def to_dict(self) -> dict[str, Any]:
        return {"variables": self.variables, "constraints": self.constraints, "encoding": self.encoding}


@dataclass(frozen=True)
class Solution:
    """A solver's answer: ``status``, ``objective`` of ``payload`` (None when there is none), the
    proven upper ``bound`` of a maximisation, relative ``gap``, wall time of the solve, whether a warm
    start (hint) was given, the model size, and the solution itself (formulation specific)."""

    status: str
    objective: float | None
    bound: float | None
    wall_seconds: float
    warm_start: bool
    size: ModelSize
    payload: Mapping[str, Any] = field(default_factory=dict)

    @property
    def gap(self) -> float | None:
        if self.objective is None or self.bound is None:
            return None
        return max(0.0, (self.bound - self.objective) / max(abs(self.bound), 1e-9))


__all__ = ["ModelSize", "SOLUTION_STATUSES", "Solution"]

"""What every formulation's ``solve`` returns (DESIGN.md, ``optsched/formulations``)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Mapping

from optsched.core.decision import relative_gap

#: the least wall time a solver call is given (seconds), however little of a time limit is left: a
#: solver needs a moment to return the hint it was given
MIN_SOLVER_SECONDS = 0.1

#: Formulation statuses: proven optimal; a solution with a gap; proven infeasible; nothing found in time.
SOLUTION_STATUSES = ("optimal", "feasible", "infeasible", "unknown")


class OutOfTime(Exception):
    """A model's building or translation passed its deadline (raised by the formulations, caught by their
    ``solve``: the answer is then the warm start, or nothing)."""


#: the MILP back ends (:mod:`optsched.formulations.milp`), named here so that checking an option does not import
#: pulp and OR-Tools
MILP_BACKENDS = ("cbc", "highs")
#: the back ends that search with CP-SAT: ``"cpsat"`` alone, or ``"switch"``, HiGHS after CP-SAT stalls
#: (:mod:`optsched.formulations.switch`)
CPSAT_BACKENDS = ("cpsat", "switch")


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
        return relative_gap(self.bound, self.objective)


def solver_seconds(time_limit: float, started: float) -> float:
    """What is left of ``time_limit`` seconds since ``started`` (a ``time.perf_counter()`` reading),
    at least :data:`MIN_SOLVER_SECONDS`."""
    return max(MIN_SOLVER_SECONDS, time_limit - (time.perf_counter() - started))


__all__ = ["CPSAT_BACKENDS", "MILP_BACKENDS", "MIN_SOLVER_SECONDS", "ModelSize", "OutOfTime", "SOLUTION_STATUSES",
           "Solution", "solver_seconds"]

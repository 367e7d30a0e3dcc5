"""The policies of the ``experts`` round kind (:mod:`optsched.rounds.experts`): place the experts of one
MoE layer on devices.

Methods (registered under kind ``experts``):

* ``exact``: the CP-SAT model (:mod:`optsched.formulations.expert_packing`, or the same model as a MILP
  with ``backend``) warm-started by Lina's placement; the plan with the smaller makespan is returned, so
  ``exact`` is never worse than ``lina`` (status ``heuristic-fallback`` when the solver found nothing
  better in its time limit). The time limit covers the whole call: Lina's plan, the model's build, the
  solver and the share LP. Should Lina's plan break a rule of the round, the ``uniform`` plan is the
  warm start and fallback instead (named in the message).
* ``lina``: Lina's phase-one rule, Eq. 4.1 device counts and first-fit decreasing
  (:func:`~optsched.heuristics.lina.lina_plan`).
* ``uniform``: the baseline, experts on devices round-robin with equal shares
  (:func:`~optsched.heuristics.lina.uniform_plan`).

Decisions report ``objective = -makespan`` and ``bound = -(lower bound)`` (the kind's convention,
:mod:`optsched.rounds.experts.problem`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, ClassVar

from optsched.core.deadline import Deadline
from optsched.core.decision import Decision
from optsched.core.round import RoundProblem
from optsched.formulations import expert_packing
from optsched.formulations.solution import MIN_SOLVER_SECONDS
from optsched.heuristics.lina import lina_plan, uniform_plan
from optsched.policies.checks import round_of
from optsched.policies.options import DEFAULT_TIME_LIMIT, PolicyOptions
from optsched.policies.registry import register_method
from optsched.rounds.experts.decision import to_decision
from optsched.rounds.experts.plan import ReplicaPlan, makespan, violations
from optsched.rounds.experts.problem import ExpertsRound


@dataclass(frozen=True)
class ExpertsHeuristicPolicy:
    """A placement rule (``rule``: round -> plan) as a policy; status ``heuristic``."""

    kind: ClassVar[str] = "experts"

    name: str
    rule: Callable[[ExpertsRound], ReplicaPlan]

    def decide(self, problem: RoundProblem) -> Decision:
        t0 = time.perf_counter()
        experts = round_of(problem, ExpertsRound, self.name)
        plan = self.rule(experts)
        return to_decision(experts, plan, method=self.name, status="heuristic", solve_seconds=time.perf_counter() - t0,
                           heuristic_makespan=makespan(experts, plan))


@dataclass(frozen=True)
class ExpertsExactPolicy:
    """The exact model warm-started by Lina (module docstring); the time limit counts from
    ``clock_start`` (a ``time.perf_counter()`` reading) or from the call of :meth:`decide`."""

    kind: ClassVar[str] = "experts"

    name: str = "exact"
    time_limit: float = DEFAULT_TIME_LIMIT
    seed: int = 0
    workers: int = 1
    clock_start: float | None = None
    backend: str = "cpsat"

    def decide(self, problem: RoundProblem) -> Decision:
        t0 = time.perf_counter()
        deadline = Deadline.since(self.time_limit, self.clock_start)
        experts = round_of(problem, ExpertsRound, self.name)
        hint, rule = lina_plan(experts), "Lina"
        broken = violations(experts, hint)
        if broken:
            hint, rule = uniform_plan(experts), f"uniform (Lina's plan breaks the round: {broken[0]})"
        h_cost = makespan(experts, hint)
        if deadline.expired(reserve=MIN_SOLVER_SECONDS):
            return to_decision(experts, hint, method=self.name, status="heuristic-fallback",
                               solve_seconds=time.perf_counter() - t0, heuristic_makespan=h_cost,
                               message=f"no time left for the solver within {self.time_limit:g} s; plan of {rule}")
        sol = expert_packing.solve(experts, time_limit=max(deadline.remaining(), MIN_SOLVER_SECONDS), seed=self.seed,
                                   workers=self.workers, hint=hint, backend=self.backend)
        size = sol.size
        note = (f"model variables={size.variables} constraints={size.constraints} backend={self.backend}; "
                f"warm start {rule}")
        bound = None if sol.bound is None else -sol.bound
        plan = sol.payload.get("plan")
        if plan is not None and sol.objective is not None and -sol.objective <= h_cost * (1 + 1e-12):
            return to_decision(experts, plan, method=self.name, status=sol.status, lower_bound=bound,
                               solve_seconds=time.perf_counter() - t0, heuristic_makespan=h_cost,
                               warm_start=sol.warm_start, message=note)
        why = ("the solver found no solution" if plan is None
               else f"the solver's best makespan ({-sol.objective:.6g}) is above the warm start's")
        return to_decision(experts, hint, method=self.name, status="heuristic-fallback", lower_bound=bound,
                           solve_seconds=time.perf_counter() - t0, heuristic_makespan=h_cost,
                           warm_start=sol.warm_start, message=f"{note}; {why} within {self.time_limit:g} s")


def _exact(o: PolicyOptions) -> ExpertsExactPolicy:
    return ExpertsExactPolicy("exact", o.time_limit, o.seed, o.workers, o.clock_start, o.backend)


register_method("experts", "exact", _exact,
                "CP-SAT expert packing (minimise the most loaded device) warm-started by Lina; never worse than it")
register_method("experts", "lina", lambda o: ExpertsHeuristicPolicy("lina", lina_plan),
                "Lina: Eq. 4.1 device counts and first-fit decreasing (heuristic)")
register_method("experts", "uniform", lambda o: ExpertsHeuristicPolicy("uniform", uniform_plan),
                "experts round-robin on devices, equal shares (baseline)")

__all__ = ["ExpertsExactPolicy", "ExpertsHeuristicPolicy"]

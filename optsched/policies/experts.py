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
from optsched.formulations.solution import Solution
from optsched.heuristics.lina import lina_plan, uniform_plan
from optsched.policies.checks import round_of
from optsched.policies.exact import ExactKind, Outcome, WarmStart, exact_method, hint_of, register_exact
from optsched.policies.options import PolicyOptions
from optsched.policies.registry import register_method
from optsched.rounds.experts.decision import to_decision
from optsched.rounds.experts.plan import ReplicaPlan, makespan, violations
from optsched.rounds.experts.problem import ExpertsRound


#: seconds to build, hint and load the exact model per (expert, device) pair: 1,000 experts on 1,000 devices took
#: 19.2 s to build, 8.7 s to hint and 7.9 s in CP-SAT at a 1 s limit (36 us a pair, profiled; 25 us unprofiled)
MODEL_S_PER_CELL = 2.5e-5


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
class ExpertsExact(ExactKind[ExpertsRound, ExpertsRound, ReplicaPlan]):
    """The exact expert packing for the driver (module docstring): Lina's plan (the ``uniform`` plan
    should Lina's break a rule of the round) warm-starts the model; objectives are ``-makespan``."""

    problem_type: ClassVar[type[RoundProblem]] = ExpertsRound
    formulation: ClassVar[str] = "optsched.formulations.expert_packing"
    answer_key: ClassVar[str] = "plan"


    def warm_start(self, ctx: ExpertsRound, deadline: Deadline) -> WarmStart[ReplicaPlan]:
        plan, rule = lina_plan(ctx), "Lina"
        broken = violations(ctx, plan)
        if broken:
            plan, rule = uniform_plan(ctx), f"uniform (Lina's plan breaks the round: {broken[0]})"
        return WarmStart(plan, -makespan(ctx, plan), message=f"warm start {rule}")

    def solve(self, ctx: ExpertsRound, warm: WarmStart[ReplicaPlan] | None, *, time_limit: float, seed: int,
              workers: int, backend: str, cold: bool = False,
              trace: list[tuple[float, float, float]] | None = None) -> Solution:
        from optsched.formulations import expert_packing  # OR-Tools on use (issue 26, item 4)

        return expert_packing.solve(ctx, time_limit=time_limit, seed=seed, workers=workers,
                                    hint=hint_of(warm, cold), trace=trace, backend=backend)

    def describe(self, sol: Solution) -> str:
        return f"{super().describe(sol)} backend={sol.payload.get('backend', 'cpsat')}"

    def assemble(self, ctx: ExpertsRound, warm: WarmStart[ReplicaPlan] | None, answer: ReplicaPlan,
                 outcome: Outcome, method: str) -> Decision:
        return to_decision(ctx, answer, method=method, status=outcome.status, lower_bound=outcome.cost_bound,
                           solve_seconds=outcome.solve_seconds,
                           heuristic_makespan=outcome.heuristic_cost, warm_start=outcome.warm_start,
                           message=outcome.message)

    def model_seconds(self, ctx: ExpertsRound) -> float:
        """The model has a Boolean and an integer per (expert, device) (:func:`expert_packing.build`):
        :data:`MODEL_S_PER_CELL` each, measured."""
        return MODEL_S_PER_CELL * ctx.num_experts * ctx.num_devices

    def size(self, problem: ExpertsRound) -> tuple[str, int]:
        return "experts x devices", problem.num_experts * problem.num_devices


def _contract(o: PolicyOptions) -> ExpertsExact:
    return ExpertsExact()


register_exact("experts", _contract)
register_method("experts", "exact", exact_method("exact", _contract),
                "CP-SAT expert packing (minimise the most loaded device) warm-started by Lina; never worse than it",
                backends=("cbc", "highs"))
register_method("experts", "lina", lambda o: ExpertsHeuristicPolicy("lina", lina_plan),
                "Lina: Eq. 4.1 device counts and first-fit decreasing (heuristic)")
register_method("experts", "heuristic", lambda o: ExpertsHeuristicPolicy("heuristic", lina_plan),
                "Lina: Eq. 4.1 device counts and first-fit decreasing (heuristic; alias of lina)")
register_method("experts", "uniform", lambda o: ExpertsHeuristicPolicy("uniform", uniform_plan),
                "experts round-robin on devices, equal shares (baseline)")

__all__ = ["ExpertsExact", "ExpertsHeuristicPolicy"]

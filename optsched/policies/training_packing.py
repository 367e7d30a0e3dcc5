"""The policies of the ``training-packing`` round kind (:mod:`optsched.rounds.training_packing`): Lina's
expert packing for training (thesis Sec. 4.4.2).

Methods (registered under kind ``training-packing``):

* ``lina`` (alias ``heuristic``): the text's rule (:func:`~optsched.heuristics.lina_packing.packing_rule`:
  from one expert per device, double while the FFN micro-op does not exceed the all-to-all micro-op;
  consecutive experts together; the experts beyond memory offloaded); status ``heuristic``.
* ``exact``: the exact-with-fallback driver (:mod:`optsched.policies.exact`) over
  :func:`~optsched.formulations.training_packing.solve_packing` (every allowed ``p``, a CP-SAT balanced
  partition per ``p`` under unequal loads), warm-started by the rule's plan (hints of its ``p``'s partition
  solve, and the fallback: never worse than ``lina``). The time the driver leaves the solver is shared
  equally by the partition solves (one per allowed ``p`` other than 1 and ``E``, none under balanced load),
  less their models' estimated build time; one whose build would not fit is skipped (consecutive sets,
  status ``feasible``).

Decisions report ``objective = -layer ms`` and ``bound = -(lower bound)``: the bound is the objective when
every partition solve proved its optimum (optimal up to the load quantisation of
:data:`~optsched.formulations.training_packing.RESOLUTION`), none otherwise.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import ClassVar

from optsched.core.deadline import Deadline
from optsched.core.decision import Decision
from optsched.core.round import RoundProblem
from optsched.formulations.solution import ModelSize, Solution
from optsched.heuristics.lina_packing import packing_rule
from optsched.perf.training_packing import PackingPlan, PackingSetup, check_plan, layer_ms
from optsched.policies.checks import round_of
from optsched.policies.exact import ExactKind, Outcome, WarmStart, exact_method, hint_of, register_exact
from optsched.policies.options import PolicyOptions
from optsched.policies.registry import register_method
from optsched.rounds.training_packing.decision import to_decision
from optsched.rounds.training_packing.problem import TrainingPackingRound


@dataclass(frozen=True)
class PackingRulePolicy:
    """Lina's packing rule as a policy (module docstring); status ``heuristic``."""

    kind: ClassVar[str] = "training-packing"

    name: str

    def decide(self, problem: RoundProblem) -> Decision:
        t0 = time.perf_counter()
        packing = round_of(problem, TrainingPackingRound, self.name)
        setup = packing.setup
        plan = packing_rule(setup)
        return to_decision(packing, plan, method=self.name, status="heuristic", solve_seconds=time.perf_counter() - t0,
                           heuristic_ms=layer_ms(setup, plan))


def partition_solves(setup: PackingSetup) -> list[int]:
    """The ``p`` whose sets a CP-SAT partition solve chooses
    (:func:`~optsched.formulations.training_packing.best_sets`): allowed, unequal loads, not 1 or ``E``."""
    if setup.loads is None:
        return []
    return [c.experts_per_device for c in setup.candidates
            if setup.allowed(c.experts_per_device) and c.experts_per_device not in (1, setup.experts)]


def model_size(setup: PackingSetup) -> ModelSize:
    """The partition models' size summed over :func:`partition_solves`: a Boolean per (expert ``e``, set
    ``s <= e``) and the largest load; one constraint per expert and two per set."""
    from optsched.formulations.training_packing import partition_vars

    E = setup.experts
    variables = constraints = 0
    for p in partition_solves(setup):
        variables += partition_vars(E, p) + 1
        constraints += E + 2 * E // p
    return ModelSize(variables, constraints, "partition per experts_per_device")


@dataclass(frozen=True)
class PackingExact(ExactKind[TrainingPackingRound, TrainingPackingRound, PackingPlan]):
    """The exact packing for the driver (module docstring): the rule's plan warm-starts and falls back;
    objectives are ``-layer ms``."""

    problem_type: ClassVar[type[RoundProblem]] = TrainingPackingRound
    formulation: ClassVar[str] = "optsched.formulations.training_packing"
    answer_key: ClassVar[str] = "plan"


    def warm_start(self, ctx: TrainingPackingRound, deadline: Deadline) -> WarmStart[PackingPlan]:
        plan = packing_rule(ctx.setup)
        return WarmStart(plan, -layer_ms(ctx.setup, plan),
                         message=f"warm start Lina's rule (experts_per_device {plan.experts_per_device})")

    def solve(self, ctx: TrainingPackingRound, warm: WarmStart[PackingPlan] | None, *, time_limit: float, seed: int,
              workers: int, backend: str, cold: bool = False,
              trace: list[tuple[float, float, float]] | None = None) -> Solution:
        from optsched.formulations.training_packing import solve_packing  # OR-Tools on use (issue 26, item 4)

        setup = ctx.setup
        hint = hint_of(warm, cold)
        r = solve_packing(setup, time_limit=time_limit, seed=seed, workers=workers, hint=hint,
                          deadline=time.perf_counter() + time_limit)
        objective = -r.layer_ms
        if trace is not None and r.status == "optimal":  # one solution, proven (no bound otherwise)
            trace.append((r.solve_seconds, objective, objective))
        return Solution(r.status, objective, objective if r.status == "optimal" else None, r.solve_seconds,
                        hint is not None, model_size(setup), {"plan": r.plan, "by_p": r.by_p})

    def violations(self, ctx: TrainingPackingRound, warm: WarmStart[PackingPlan]) -> list[str]:
        return check_plan(ctx.setup, warm.answer)

    def assemble(self, ctx: TrainingPackingRound, warm: WarmStart[PackingPlan] | None, answer: PackingPlan,
                 outcome: Outcome, method: str) -> Decision:
        return to_decision(ctx, answer, method=method, status=outcome.status,
                           lower_bound=outcome.cost_bound, solve_seconds=outcome.solve_seconds,
                           heuristic_ms=outcome.heuristic_cost,
                           warm_start=outcome.warm_start, message=outcome.message)

    def size(self, problem: TrainingPackingRound) -> tuple[str, int]:
        return "experts", problem.experts


def _contract(o: PolicyOptions) -> PackingExact:
    return PackingExact()


register_exact("training-packing", _contract)
register_method("training-packing", "exact", exact_method("exact", _contract),
                "every allowed experts per device, CP-SAT balanced partition of the experts under unequal loads, "
                "warm-started by Lina's rule; never worse than it")
register_method("training-packing", "lina", lambda o: PackingRulePolicy("lina"),
                "Lina's rule: double the experts per device until the FFN micro-op exceeds the all-to-all's "
                "(Sec. 4.4.2; heuristic)")
register_method("training-packing", "heuristic", lambda o: PackingRulePolicy("heuristic"),
                "Lina's rule: double the experts per device until the FFN micro-op exceeds the all-to-all's "
                "(Sec. 4.4.2; heuristic; alias of lina)")

__all__ = ["PackingExact", "PackingRulePolicy", "model_size", "partition_solves"]

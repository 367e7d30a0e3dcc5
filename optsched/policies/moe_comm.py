"""The policies of the ``moe-comm`` round kind (:mod:`optsched.rounds.moe_comm`): schedule the
communication of one MoE backward pass.

Methods (registered under kind ``moe-comm``):

* ``fair``, ``priority``, ``defer``, ``microop``, ``lina``: the launch rules of
  :mod:`optsched.heuristics.moe_comm` (baseline fair sharing, naive priority, deferral, micro-op
  priority, micro-op priority with pipelined FFN), executed by
  :func:`~optsched.rounds.moe_comm.timeline.simulate`; status ``heuristic``.
* ``exact``: every rule above runs first (milliseconds); the CP-SAT schedule
  (:mod:`optsched.formulations.moe_comm_schedule`) is warm-started by the better of ``lina`` and
  ``priority`` (the rules whose schedules are in its space), and the schedule with the smallest step
  time among the solver's and all the rules' is returned: ``exact`` is never slower than any policy
  (status ``heuristic-fallback``, naming the rule, when a rule's schedule wins). A rule that fails on
  the round (``InfeasibleError``: it would leave an operation waiting forever) is skipped and named in
  the decision's message; the others serve as warm start and fallback. The time limit covers the
  rules, the build, the solver and the replay: the whole-operation rules (``fair``, ``priority``,
  ``defer``: one task per operation, as cheap as reading the round) always run, the micro-op rules
  (``microop``, ``lina``) run only while time is left and one the limit cuts short is skipped (named in
  the message); the micro-op count is bounded when the round is read
  (:data:`~optsched.rounds.moe_comm.problem.MAX_MICRO_OPS`).

Decisions report ``objective = -step ms`` and ``bound = -(lower bound)``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import ClassVar

from optsched.core.deadline import Deadline
from optsched.core.decision import Decision
from optsched.core.errors import InfeasibleError, ValidationError
from optsched.core.round import RoundProblem
from optsched.formulations.solution import Solution
from optsched.heuristics.moe_comm import POLICIES, CommPolicy
from optsched.policies.checks import round_of
from optsched.policies.exact import ExactKind, Outcome, WarmStart, exact_method, hint_of, register_exact
from optsched.policies.options import PolicyOptions
from optsched.policies.registry import register_method
from optsched.rounds.moe_comm.decision import to_decision
from optsched.rounds.moe_comm.problem import MoECommRound
from optsched.rounds.moe_comm.timeline import Timeline

#: the rules whose schedules the exact model can represent (warm starts)
HINT_RULES = ("lina", "priority")


@dataclass(frozen=True)
class CommRulePolicy:
    """One launch rule as a policy."""

    kind: ClassVar[str] = "moe-comm"

    name: str
    rule: CommPolicy

    def decide(self, problem: RoundProblem) -> Decision:
        t0 = time.perf_counter()
        comm = round_of(problem, MoECommRound, self.name)
        timeline = self.rule.schedule(comm)
        return to_decision(comm, timeline, method=self.name, status="heuristic", solve_seconds=time.perf_counter() - t0,
                           heuristic_step=timeline.step_ms)


@dataclass(frozen=True)
class CommExact(ExactKind[MoECommRound, MoECommRound, Timeline]):
    """The exact schedule for the driver (module docstring): the fallback is the fastest rule's
    timeline, the hint the faster of :data:`HINT_RULES`; objectives are ``-step ms``."""

    problem_type: ClassVar[type[RoundProblem]] = MoECommRound
    formulation: ClassVar[str] = "optsched.formulations.moe_comm_schedule"
    answer_key: ClassVar[str] = "timeline"


    def warm_start(self, ctx: MoECommRound, deadline: Deadline) -> WarmStart[Timeline]:
        timelines, skipped = _rule_timelines(ctx, deadline)
        best = min(timelines, key=lambda n: (timelines[n].step_ms, list(POLICIES).index(n)), default=None)
        if best is None:
            raise InfeasibleError(f"no rule scheduled the round{skipped}")
        hint = min((n for n in HINT_RULES if n in timelines), key=lambda n: timelines[n].step_ms, default=None)
        start = "no warm start" if hint is None else f"warm start {hint!r}"
        return WarmStart(timelines[best], -timelines[best].step_ms, hint=None if hint is None else timelines[hint],
                         message=f"the best rule was {best!r}; {start}{skipped}", info=hint is not None)

    def solve(self, ctx: MoECommRound, warm: WarmStart[Timeline] | None, *, time_limit: float, seed: int,
              workers: int, backend: str, cold: bool = False,
              trace: list[tuple[float, float, float]] | None = None) -> Solution:
        hint = hint_of(warm, cold) if warm is not None and warm.info else None  # info: a hint rule ran
        from optsched.formulations import moe_comm_schedule  # OR-Tools on use (issue 26, item 4)

        return moe_comm_schedule.solve(ctx, time_limit=time_limit, seed=seed, workers=workers, hint=hint, trace=trace)

    def assemble(self, ctx: MoECommRound, warm: WarmStart[Timeline] | None, answer: Timeline, outcome: Outcome,
                 method: str) -> Decision:
        return to_decision(ctx, answer, method=method, status=outcome.status,
                           lower_bound=outcome.cost_bound, solve_seconds=outcome.solve_seconds,
                           heuristic_step=outcome.heuristic_cost,
                           warm_start=outcome.warm_start, message=outcome.message)

    def size(self, problem: MoECommRound) -> tuple[str, int]:
        return "operations", len(problem.stream) + len(problem.allreduces)


def _rule_timelines(comm: MoECommRound, deadline: Deadline) -> tuple[dict[str, Timeline], str]:
    """The rules' timelines of ``comm`` and a note naming the rules skipped (module docstring: a rule
    that raises ``InfeasibleError`` on the round, or a micro-op rule the ``deadline`` cut short; empty
    when none was)."""
    timelines: dict[str, Timeline] = {}
    failed: list[str] = []
    for name, rule in POLICIES.items():
        try:
            got = rule.schedule_until(comm, deadline if rule.split else None)
        except InfeasibleError as err:
            failed.append(f"{name} ({err})")
            continue
        if got is None:
            failed.append(f"{name} (cut short by the time limit)")
        else:
            timelines[name] = got
    return timelines, "" if not failed else f"; rules skipped: {', '.join(failed)}"


def _rule(name: str):  # noqa: ANN202 - a factory of factories
    def build(o: PolicyOptions) -> CommRulePolicy:
        return CommRulePolicy(name, POLICIES[name])
    return build


def _contract(o: PolicyOptions) -> CommExact:
    if o.backend != "cpsat":
        raise ValidationError(f"the moe-comm exact schedule uses CP-SAT interval variables; backend {o.backend!r} "
                              "cannot solve it (use cpsat)")
    return CommExact()


register_exact("moe-comm", _contract)
register_method("moe-comm", "exact", exact_method("exact", _contract),
                "CP-SAT interval schedule (whole ops or micro-ops per operation) warm-started by the rules; never "
                "slower than any of them")
for _name, _summary in (("fair", "baseline: two streams fair-sharing the link (Fig. 4.7a)"),
                        ("priority", "naive all-to-all priority, one operation at a time (Fig. 4.7b)"),
                        ("defer", "allreduce deferred until an even number of all-to-alls finished (Fig. 4.7c)"),
                        ("microop", "micro-ops with all-to-all priority (Fig. 4.8a)"),
                        ("lina", "Lina: micro-ops, all-to-all priority, pipelined expert FFN (Fig. 4.8b)")):
    register_method("moe-comm", _name, _rule(_name), _summary)
register_method("moe-comm", "heuristic", lambda o: CommRulePolicy("heuristic", POLICIES["lina"]),
                "Lina: micro-ops, all-to-all priority, pipelined expert FFN (Fig. 4.8b; alias of lina)")

__all__ = ["CommExact", "CommRulePolicy", "HINT_RULES"]

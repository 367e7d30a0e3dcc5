"""``optsched.solve``: one entry point for every round policy, and the ``Policy`` objects the
simulator calls (DESIGN.md: ``Policy.decide(problem) -> Decision``).

Methods of a ``rubick`` round:

* ``heuristic`` (alias ``rubick``): Rubick Algorithm 1 (:mod:`optsched.heuristics.rubick`).
* ``exact`` (alias ``rubick-exact``): the CP-SAT model of :mod:`optsched.formulations.rubick_round`,
  warm-started by Algorithm 1's decision. The better of the two (by the round objective) is returned,
  so the exact method is never worse than the heuristic; when the solver finds nothing better in its
  time limit the heuristic's decision is returned with status ``heuristic-fallback``.
* ``rubick-e``, ``rubick-r``, ``rubick-n``: Algorithm 1 on the ablation tables of Table 4 (plans
  only / resources only / neither, see :mod:`optsched.scheduling.rubick_table`).
* ``fifo``, ``fifo-backfill``, ``synergy``, ``sia``, ``antman``: the baselines of Rubick Sec. 7.3
  (:mod:`optsched.scheduling.baseline_policies`).

The time limit covers the whole call (table, heuristic and solver).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Callable, Mapping, Protocol

from optsched.core.errors import InfeasibleError, UnknownNameError, ValidationError
from optsched.core.round import Decision, RoundProblem
from optsched.formulations import rubick_round
from optsched.heuristics import rubick as rubick_heuristic
from optsched.perf.coefficients import CoefficientTable
from optsched.perf.performance_model import PerformanceModel
from optsched.scheduling.baseline_policies import BASELINE_POLICIES
from optsched.scheduling.rubick_eval import Admission, Choice, admit, heuristic_decision, objective, to_decision
from optsched.scheduling.rubick_table import PerfLookup, RoundTableCache, build_round_table, perf_lookup_from

log = logging.getLogger(__name__)

DEFAULT_TIME_LIMIT = 10.0


class Policy(Protocol):
    """What the simulator calls once per round."""

    name: str

    def decide(self, problem: RoundProblem) -> Decision: ...


def _infeasible_report(problem: RoundProblem, table: CoefficientTable, admission: Admission) -> InfeasibleError:
    gpus_free: dict[str, int] = {}
    for n in problem.cluster.nodes:
        gpus_free[n.gpu_type] = gpus_free.get(n.gpu_type, 0) + problem.free(n.name).gpus
    reasons = [f"guaranteed job {name!r} (tenant {problem.job(name).tenant!r}) needs at least {need} GPUs to reach "
               f"the throughput of its request" for name, need in sorted(admission.protected.items())]
    reasons.append("free GPUs for the round: " + ", ".join(f"{v} {k}" for k, v in sorted(gpus_free.items())))
    return InfeasibleError("round infeasible: the performance guarantees of the admitted guaranteed jobs cannot "
                           "all be met on the free resources (GPUs, CPUs, memory or node shapes)", tuple(reasons))


@dataclass(frozen=True)
class RubickHeuristicPolicy:
    """Algorithm 1 on the full table, or on an ablation table (``fixed_plan`` / ``fixed_resources``)."""

    name: str = "rubick"
    fixed_plan: bool = False
    fixed_resources: bool = False
    perf: PerfLookup | None = field(default=None, compare=False)
    cache: RoundTableCache = field(default_factory=RoundTableCache, compare=False, repr=False)

    def table(self, problem: RoundProblem) -> CoefficientTable:
        return build_round_table(problem, self.perf, fixed_plan=self.fixed_plan,
                                 fixed_resources=self.fixed_resources, cache=self.cache)

    def decide(self, problem: RoundProblem) -> Decision:
        t0 = time.perf_counter()
        table = self.table(problem)
        admission = admit(problem, table)
        choices = rubick_heuristic.schedule(problem, table, admission)
        return heuristic_decision(problem, table, choices, method=self.name, started=t0, admission=admission)


@dataclass(frozen=True)
class RubickExactPolicy:
    """The CP-SAT round warm-started by Algorithm 1 (module docstring)."""

    name: str = "rubick-exact"
    time_limit: float = DEFAULT_TIME_LIMIT
    seed: int = 0
    workers: int = 1
    perf: PerfLookup | None = field(default=None, compare=False)
    cache: RoundTableCache = field(default_factory=RoundTableCache, compare=False, repr=False)

    def decide(self, problem: RoundProblem) -> Decision:
        t0 = time.perf_counter()
        table = build_round_table(problem, self.perf, cache=self.cache)
        admission = admit(problem, table)
        hint: dict[str, Choice] | None = None
        heuristic_error: InfeasibleError | None = None
        try:
            hint = rubick_heuristic.schedule(problem, table, admission)
        except InfeasibleError as e:
            heuristic_error = e
        h_obj = None if hint is None else objective(problem, table, hint)
        remaining = max(0.1, self.time_limit - (time.perf_counter() - t0))
        sol = rubick_round.solve(problem, table, time_limit=remaining, seed=self.seed, workers=self.workers,
                                 hint=hint, admission=admission)
        wall = time.perf_counter() - t0
        size = sol.size
        note = f"model encoding={size.encoding} variables={size.variables} constraints={size.constraints}"
        if sol.status == "infeasible":
            raise _infeasible_report(problem, table, admission)
        exact_choices = sol.payload.get("choices") if sol.objective is not None else None
        if exact_choices is not None and (h_obj is None or sol.objective >= h_obj - 1e-9):
            return to_decision(problem, table, exact_choices, method=self.name, status=sol.status, bound=sol.bound,
                               solve_seconds=wall, heuristic_objective=h_obj, warm_start=sol.warm_start,
                               message=note, admission=admission)
        if hint is None:
            assert heuristic_error is not None
            raise InfeasibleError(f"no feasible decision found within {self.time_limit:g} s; the heuristic "
                                  f"reported: {heuristic_error}", heuristic_error.reasons)
        why = ("the solver found no solution" if exact_choices is None
               else f"the solver's best ({sol.objective:.6g}) is below the heuristic's")
        return to_decision(problem, table, hint, method=self.name, status="heuristic-fallback", bound=sol.bound,
                           solve_seconds=wall, heuristic_objective=h_obj, warm_start=sol.warm_start,
                           message=f"{note}; {why} within {self.time_limit:g} s", admission=admission)


#: every method name ``solve`` accepts -> factory(time_limit, seed, perf)
POLICIES: dict[str, Callable[[float, int, PerfLookup | None], Policy]] = {
    "exact": lambda tl, seed, perf: RubickExactPolicy("exact", tl, seed, perf=perf),
    "rubick-exact": lambda tl, seed, perf: RubickExactPolicy("rubick-exact", tl, seed, perf=perf),
    "heuristic": lambda tl, seed, perf: RubickHeuristicPolicy("heuristic", perf=perf),
    "rubick": lambda tl, seed, perf: RubickHeuristicPolicy("rubick", perf=perf),
    "rubick-e": lambda tl, seed, perf: RubickHeuristicPolicy("rubick-e", fixed_resources=True, perf=perf),
    "rubick-r": lambda tl, seed, perf: RubickHeuristicPolicy("rubick-r", fixed_plan=True, perf=perf),
    "rubick-n": lambda tl, seed, perf: RubickHeuristicPolicy("rubick-n", fixed_plan=True, fixed_resources=True,
                                                             perf=perf),
    **BASELINE_POLICIES,
}


def make_policy(method: str, *, time_limit: float = DEFAULT_TIME_LIMIT, seed: int = 0,
                perf_models: Mapping | None = None, problem: RoundProblem | None = None) -> Policy:
    """The policy registered as ``method`` (``UnknownNameError`` listing the known ones)."""
    if method not in POLICIES:
        raise UnknownNameError("method", method, list(POLICIES))
    if isinstance(time_limit, bool) or not isinstance(time_limit, (int, float)) or not time_limit > 0:
        raise ValidationError(f"time_limit must be a positive number of seconds, got {time_limit!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValidationError(f"seed must be an integer, got {seed!r}")
    perf = None
    if perf_models:
        if problem is None:
            raise ValidationError("perf_models needs the problem (for the built-in fallbacks)")
        perf = perf_lookup_from(perf_models, problem)
    return POLICIES[method](float(time_limit), seed, perf)


def solve(problem: RoundProblem, method: str = "exact", time_limit: float = DEFAULT_TIME_LIMIT, seed: int = 0, *,
          perf_models: Mapping[str, PerformanceModel] | Mapping[tuple[str, str], PerformanceModel] | None = None
          ) -> Decision:
    """Solve one round with ``method`` (module docstring) within ``time_limit`` seconds.

    ``perf_models`` overrides the built-in performance models, keyed by model name or by (model name,
    GPU type). Raises ``ValidationError``/``UnknownNameError`` for bad input and ``InfeasibleError``
    naming the guaranteed jobs when their guarantees cannot all be met."""
    if not isinstance(problem, RoundProblem):
        raise ValidationError(f"solve: problem must be a RoundProblem, got {type(problem).__name__}")
    return make_policy(method, time_limit=time_limit, seed=seed, perf_models=perf_models, problem=problem).decide(problem)


__all__ = ["DEFAULT_TIME_LIMIT", "POLICIES", "Policy", "RubickExactPolicy", "RubickHeuristicPolicy", "make_policy",
           "solve"]

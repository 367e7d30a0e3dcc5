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

**Unreachable guarantees.** By default a round in which an admitted guaranteed job cannot reach its
performance guarantee (admission counts GPUs, not node shapes) raises ``InfeasibleError`` naming the
jobs. With ``defer_unreachable_guarantees=True`` (a field of both Rubick policies, a keyword of
:func:`make_policy` and :func:`solve`) the round instead defers those jobs
(:func:`optsched.heuristics.rubick.schedule_with_deferral`: they wait this round as if for quota, a
running one is preempted) and schedules everything else; the decision passes
:func:`~optsched.scheduling.rubick_eval.violations` for the reduced admission, its deferred jobs have
``protected=False`` and action ``wait`` (``preempt`` if they were running), and its ``message`` names
each deferred job and why. The exact method gives the CP-SAT model the same reduced admission (the
heuristic decides who is deferred). The baselines take the keyword and ignore it: they never fail on
a guarantee.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Callable, Mapping, Protocol

from optsched.core.errors import InfeasibleError, UnknownNameError, ValidationError
from optsched.core.hardware import Cluster
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


def deferral_message(problem: RoundProblem, deferred: Mapping[str, str]) -> str:
    """The part of a decision's message naming every deferred guaranteed job and why ("" if none)."""
    if not deferred:
        return ""
    parts = [f"{name!r} ({'running, preempted' if problem.current(name) is not None else 'queued'}): {why}"
             for name, why in deferred.items()]
    return (f"deferred {len(deferred)} guaranteed job(s) whose performance guarantee cannot be reached this round "
            f"(they wait as if for quota): " + "; ".join(parts))


def _schedule(problem: RoundProblem, table: CoefficientTable, admission: Admission, defer: bool
              ) -> tuple[Admission, dict[str, Choice], str]:
    """The admission the choices satisfy, Algorithm 1's choices and the deferral message: with
    ``defer`` the admission is the reduced one (module docstring); without, it is ``admission`` and
    ``InfeasibleError`` propagates."""
    if not defer:
        return admission, rubick_heuristic.schedule(problem, table, admission), ""
    result = rubick_heuristic.schedule_with_deferral(problem, table, admission)
    return result.admission, dict(result.choices), deferral_message(problem, result.deferred)


def _join(*notes: str) -> str:
    return "; ".join(n for n in notes if n)


@dataclass(frozen=True)
class RubickHeuristicPolicy:
    """Algorithm 1 on the full table, or on an ablation table (``fixed_plan`` / ``fixed_resources``);
    ``defer_unreachable_guarantees``: module docstring."""

    name: str = "rubick"
    fixed_plan: bool = False
    fixed_resources: bool = False
    perf: PerfLookup | None = field(default=None, compare=False)
    cache: RoundTableCache = field(default_factory=RoundTableCache, compare=False, repr=False)
    defer_unreachable_guarantees: bool = False

    def table(self, problem: RoundProblem) -> CoefficientTable:
        return build_round_table(problem, self.perf, fixed_plan=self.fixed_plan,
                                 fixed_resources=self.fixed_resources, cache=self.cache)

    def decide(self, problem: RoundProblem) -> Decision:
        t0 = time.perf_counter()
        table = self.table(problem)
        admission, choices, message = _schedule(problem, table, admit(problem, table),
                                                self.defer_unreachable_guarantees)
        return heuristic_decision(problem, table, choices, method=self.name, started=t0, admission=admission,
                                  message=message)


@dataclass(frozen=True)
class RubickExactPolicy:
    """The CP-SAT round warm-started by Algorithm 1 (module docstring, also for
    ``defer_unreachable_guarantees``)."""

    name: str = "rubick-exact"
    time_limit: float = DEFAULT_TIME_LIMIT
    seed: int = 0
    workers: int = 1
    perf: PerfLookup | None = field(default=None, compare=False)
    cache: RoundTableCache = field(default_factory=RoundTableCache, compare=False, repr=False)
    defer_unreachable_guarantees: bool = False

    def decide(self, problem: RoundProblem) -> Decision:
        t0 = time.perf_counter()
        table = build_round_table(problem, self.perf, cache=self.cache)
        admission = admit(problem, table)
        hint: dict[str, Choice] | None = None
        heuristic_error: InfeasibleError | None = None
        deferral = ""
        try:
            admission, hint, deferral = _schedule(problem, table, admission, self.defer_unreachable_guarantees)
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
                               message=_join(note, deferral), admission=admission)
        if hint is None:
            assert heuristic_error is not None
            raise InfeasibleError(f"no feasible decision found within {self.time_limit:g} s; the heuristic "
                                  f"reported: {heuristic_error}", heuristic_error.reasons)
        why = ("the solver found no solution" if exact_choices is None
               else f"the solver's best ({sol.objective:.6g}) is below the heuristic's")
        return to_decision(problem, table, hint, method=self.name, status="heuristic-fallback", bound=sol.bound,
                           solve_seconds=wall, heuristic_objective=h_obj, warm_start=sol.warm_start,
                           message=_join(f"{note}; {why} within {self.time_limit:g} s", deferral),
                           admission=admission)


#: every method name ``solve`` accepts -> factory(time_limit, seed, perf, defer_unreachable_guarantees=False)
POLICIES: dict[str, Callable[[float, int, PerfLookup | None, bool], Policy]] = {
    "exact": lambda tl, seed, perf, defer=False: RubickExactPolicy("exact", tl, seed, perf=perf,
                                                                   defer_unreachable_guarantees=defer),
    "rubick-exact": lambda tl, seed, perf, defer=False: RubickExactPolicy("rubick-exact", tl, seed, perf=perf,
                                                                          defer_unreachable_guarantees=defer),
    "heuristic": lambda tl, seed, perf, defer=False: RubickHeuristicPolicy("heuristic", perf=perf,
                                                                           defer_unreachable_guarantees=defer),
    "rubick": lambda tl, seed, perf, defer=False: RubickHeuristicPolicy("rubick", perf=perf,
                                                                        defer_unreachable_guarantees=defer),
    "rubick-e": lambda tl, seed, perf, defer=False: RubickHeuristicPolicy(
        "rubick-e", fixed_resources=True, perf=perf, defer_unreachable_guarantees=defer),
    "rubick-r": lambda tl, seed, perf, defer=False: RubickHeuristicPolicy(
        "rubick-r", fixed_plan=True, perf=perf, defer_unreachable_guarantees=defer),
    "rubick-n": lambda tl, seed, perf, defer=False: RubickHeuristicPolicy(
        "rubick-n", fixed_plan=True, fixed_resources=True, perf=perf, defer_unreachable_guarantees=defer),
    **BASELINE_POLICIES,
}


def make_policy(method: str, *, time_limit: float = DEFAULT_TIME_LIMIT, seed: int = 0,
                perf_models: Mapping | None = None, problem: RoundProblem | None = None,
                cluster: Cluster | None = None, defer_unreachable_guarantees: bool = False) -> Policy:
    """The policy registered as ``method`` (``UnknownNameError`` listing the known ones).
    ``perf_models`` (keyed by model name or (model name, GPU type)) replace the built-in performance
    models; the built-in ones of the cluster of ``problem`` (or ``cluster``) serve the rest.
    ``defer_unreachable_guarantees`` (module docstring) is passed to every factory; methods without
    performance guarantees ignore it."""
    if method not in POLICIES:
        raise UnknownNameError("method", method, list(POLICIES))
    if isinstance(time_limit, bool) or not isinstance(time_limit, (int, float)) or not time_limit > 0:
        raise ValidationError(f"time_limit must be a positive number of seconds, got {time_limit!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValidationError(f"seed must be an integer, got {seed!r}")
    if not isinstance(defer_unreachable_guarantees, bool):
        raise ValidationError(f"defer_unreachable_guarantees must be True or False, "
                              f"got {defer_unreachable_guarantees!r}")
    perf = None
    if perf_models:
        where = problem if problem is not None else cluster
        if where is None:
            raise ValidationError("perf_models needs the problem or the cluster (for the built-in fallbacks)")
        perf = perf_lookup_from(perf_models, where)
    return POLICIES[method](float(time_limit), seed, perf, defer_unreachable_guarantees)


def solve(problem: RoundProblem, method: str = "exact", time_limit: float = DEFAULT_TIME_LIMIT, seed: int = 0, *,
          perf_models: Mapping[str, PerformanceModel] | Mapping[tuple[str, str], PerformanceModel] | None = None,
          defer_unreachable_guarantees: bool = False) -> Decision:
    """Solve one round with ``method`` (module docstring) within ``time_limit`` seconds.

    ``perf_models`` overrides the built-in performance models, keyed by model name or by (model name,
    GPU type). Raises ``ValidationError``/``UnknownNameError`` for bad input and ``InfeasibleError``
    naming the guaranteed jobs when their guarantees cannot all be met, unless
    ``defer_unreachable_guarantees`` (module docstring) defers them."""
    if not isinstance(problem, RoundProblem):
        raise ValidationError(f"solve: problem must be a RoundProblem, got {type(problem).__name__}")
    return make_policy(method, time_limit=time_limit, seed=seed, perf_models=perf_models, problem=problem,
                       defer_unreachable_guarantees=defer_unreachable_guarantees).decide(problem)


__all__ = ["DEFAULT_TIME_LIMIT", "POLICIES", "Policy", "RubickExactPolicy", "RubickHeuristicPolicy",
           "deferral_message", "make_policy", "solve"]

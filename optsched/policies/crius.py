"""The policies of the ``crius`` round kind: each builds the round's Cell table (:mod:`optsched.rounds.crius`,
estimates from :mod:`optsched.perf.crius`), runs a heuristic (:mod:`optsched.heuristics`) and, for the
exact method, the CP-SAT model (:mod:`optsched.formulations.crius_round`) warm-started by it.

Methods (registered under kind ``crius``):

* ``exact`` (alias ``crius-exact``): the CP-SAT round warm-started by Algorithm 1; the better of the two
  (by the round objective) is returned, so it is never worse than the heuristic; when the solver finds
  nothing better within the time limit the heuristic's decision is returned (``heuristic-fallback``),
  unless it breaks a rule of :func:`~optsched.rounds.crius.feasibility.violations` (it then never wins).
* ``crius`` (alias ``heuristic``): Crius Algorithm 1 with search depth and opportunistic execution
  (:mod:`optsched.heuristics.crius`).
* ``fcfs``, ``gandiva``, ``gavel``, ``elasticflow``: the baselines of Crius Sec. 8.1
  (:mod:`optsched.heuristics.baselines`).

The time limit covers the whole call (table, heuristic, solver, decision), counted from
``clock_start`` or the call, less :data:`FINISH_S_PER_JOB` per job kept for assembling the decision.
Each policy keeps its table cache across rounds. Kind extra ``estimator_params``: an
:class:`~optsched.perf.crius.cell_estimator.EstimatorParams` the policy estimates Cells with (default:
the built-in estimator, shared by the process).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, ClassVar

from optsched.core.deadline import Deadline
from optsched.core.decision import Decision
from optsched.core.errors import InfeasibleError, ValidationError
from optsched.core.round import RoundProblem
from optsched.formulations import crius_round
from optsched.formulations.solution import MIN_SOLVER_SECONDS
from optsched.heuristics.baselines import schedule_elasticflow, schedule_fcfs, schedule_gandiva, schedule_gavel
from optsched.heuristics.crius import algorithm1
from optsched.perf.crius.cell_estimator import EstimatorParams
from optsched.policies.checks import round_of
from optsched.policies.options import DEFAULT_TIME_LIMIT, PolicyOptions
from optsched.policies.registry import register_method
from optsched.rounds.crius.admission import admit
from optsched.rounds.crius.decision import Schedule, heuristic_decision, to_decision
from optsched.rounds.crius.feasibility import violations
from optsched.rounds.crius.objective import objective
from optsched.rounds.crius.problem import CriusRound
from optsched.rounds.crius.table import CriusTable, CriusTableCache, build_crius_table

#: the kind extra naming the estimator's parameters (module docstring)
ESTIMATOR_PARAMS = "estimator_params"
#: seconds per job kept from the time limit for assembling the decision (Cell details, JSON)
FINISH_S_PER_JOB = 2e-4


def _deadline(time_limit: float, clock_start: float | None, problem: RoundProblem) -> Deadline:
    whole = Deadline.since(time_limit, clock_start)
    return whole.earlier(FINISH_S_PER_JOB * len(problem.jobs))


def _join(*notes: str) -> str:
    return "; ".join(n for n in notes if n)


def _cut(schedule: Schedule, left_out: list[str]) -> Schedule:
    """``schedule`` marked incomplete when the table left jobs out."""
    if not left_out:
        return schedule
    names = ", ".join(map(repr, left_out[:10])) + (" ..." if len(left_out) > 10 else "")
    note = (f"partial: the time limit ran out while the round's table was built; {len(left_out)} job(s) were not "
            f"considered (running ones keep their Cell, queued ones wait): {names}")
    return Schedule(schedule.choices, schedule.admission, _join(note, schedule.message), complete=False,
                    left_out=tuple(left_out))


Scheduler = Callable[..., Schedule]


@dataclass(frozen=True)
class CriusHeuristicPolicy:
    """A heuristic of the kind (Algorithm 1 or a baseline, ``scheduler(problem, table, deadline=...)``) on
    the round's table; status ``heuristic`` (``partial`` when the time limit cut it short)."""

    kind: ClassVar[str] = "crius"

    name: str
    scheduler: Scheduler = field(default=algorithm1, compare=False)
    time_limit: float = DEFAULT_TIME_LIMIT
    clock_start: float | None = None
    cache: CriusTableCache = field(default_factory=CriusTableCache, compare=False, repr=False)

    def plan(self, problem: CriusRound, deadline: Deadline) -> tuple[CriusTable, Schedule]:
        left_out: list[str] = []
        table = build_crius_table(problem, self.cache, deadline=deadline, left_out=left_out)
        return table, _cut(self.scheduler(problem, table, deadline=deadline), left_out)

    def decide(self, problem: RoundProblem) -> Decision:
        t0 = time.perf_counter()
        crius = round_of(problem, CriusRound, self.name)
        table, schedule = self.plan(crius, _deadline(self.time_limit, self.clock_start, crius))
        return heuristic_decision(crius, table, schedule, method=self.name, started=t0)


@dataclass(frozen=True)
class CriusExactPolicy:
    """The CP-SAT round warm-started by Algorithm 1 (module docstring); ``backend`` solves the model
    (``PolicyOptions.backend``)."""

    kind: ClassVar[str] = "crius"

    name: str = "exact"
    time_limit: float = DEFAULT_TIME_LIMIT
    seed: int = 0
    workers: int = 1
    clock_start: float | None = None
    backend: str = "cpsat"
    cache: CriusTableCache = field(default_factory=CriusTableCache, compare=False, repr=False)

    def decide(self, problem: RoundProblem) -> Decision:
        t0 = time.perf_counter()
        crius = round_of(problem, CriusRound, self.name)
        deadline = _deadline(self.time_limit, self.clock_start, crius)
        left_out: list[str] = []
        table = build_crius_table(crius, self.cache, deadline=deadline, left_out=left_out)
        admission = admit(crius, table)
        hint = _cut(algorithm1(crius, table, admission, deadline=deadline), left_out)
        h_obj = objective(crius, table, hint.choices)
        if not hint.complete or deadline.expired(reserve=MIN_SOLVER_SECONDS):
            note = "" if not hint.complete else f"no time left for the solver within {self.time_limit:g} s"
            return to_decision(crius, table, hint.choices, method=self.name,
                               status="heuristic-fallback" if hint.complete else "partial",
                               solve_seconds=time.perf_counter() - t0, heuristic_objective=h_obj,
                               message=_join(note, hint.message), admission=admission,
                               left_out=hint.left_out)
        sol = crius_round.solve(crius, table, time_limit=max(deadline.remaining(), MIN_SOLVER_SECONDS), seed=self.seed,
                                workers=self.workers, hint=hint.choices, admission=admission, backend=self.backend)
        size = sol.size
        note = f"model variables={size.variables} constraints={size.constraints}"
        if sol.status == "infeasible":  # pragma: no cover - admission only protects what fits
            raise InfeasibleError("round infeasible: the protected and guaranteed jobs cannot all run",
                                  tuple(sorted(admission.guaranteed | {admission.protected or ""} - {""})))
        choices = sol.payload.get("choices")
        wall = time.perf_counter() - t0
        # the heuristic's answer is a fallback only when it keeps the round's rules (feasibility)
        broken = violations(crius, table, hint.choices, admission)
        if choices is not None and sol.objective is not None and (sol.objective >= h_obj - 1e-9 or broken):
            return to_decision(crius, table, choices, method=self.name, status=sol.status, bound=sol.bound,
                               solve_seconds=wall, heuristic_objective=h_obj, warm_start=sol.warm_start,
                               message=note, admission=admission, left_out=hint.left_out)
        why = ("the solver found no solution" if choices is None
               else f"the solver's best ({sol.objective:.6g}) is below the heuristic's")
        if broken:  # never a decision that breaks the round's rules
            raise InfeasibleError(f"{self.name}: {why} within {self.time_limit:g} s, and Algorithm 1's decision "
                                  f"breaks the round's rules: {'; '.join(broken[:5])}")
        return to_decision(crius, table, hint.choices, method=self.name, status="heuristic-fallback", bound=sol.bound,
                           solve_seconds=wall, heuristic_objective=h_obj, warm_start=sol.warm_start,
                           message=_join(f"{note}; {why} within {self.time_limit:g} s", hint.message),
                           admission=admission, left_out=hint.left_out)


# -- registration ---------------------------------------------------------------------------------------
def _cache(o: PolicyOptions) -> CriusTableCache:
    params = o.extra(ESTIMATOR_PARAMS)
    if params is not None and not isinstance(params, EstimatorParams):
        raise ValidationError(f"{ESTIMATOR_PARAMS} must be an EstimatorParams, got {type(params).__name__}")
    return CriusTableCache(params)


def _exact(name: str):  # noqa: ANN202 - a factory of factories
    def build(o: PolicyOptions) -> CriusExactPolicy:
        return CriusExactPolicy(name, o.time_limit, o.seed, o.workers, o.clock_start, o.backend, _cache(o))
    return build


def _heuristic(name: str, scheduler: Scheduler):  # noqa: ANN202
    def build(o: PolicyOptions) -> CriusHeuristicPolicy:
        return CriusHeuristicPolicy(name, scheduler, o.time_limit, o.clock_start, _cache(o))
    return build


_EXACT = "CP-SAT Cell selection warm-started by Crius Algorithm 1; never worse than it"
_HEUR = "Crius Algorithm 1: Cell-based scheduling, search depth, opportunistic execution (heuristic)"
for _name, _build, _summary in (
        ("exact", _exact("exact"), _EXACT),
        ("crius-exact", _exact("crius-exact"), _EXACT + " (alias of exact)"),
        ("crius", _heuristic("crius", algorithm1), _HEUR),
        ("heuristic", _heuristic("heuristic", algorithm1), _HEUR + " (alias of crius)"),
        ("fcfs", _heuristic("fcfs", schedule_fcfs), "FCFS on the requested GPUs (baseline)"),
        ("gandiva", _heuristic("gandiva", schedule_gandiva), "Gandiva-like packing and grow-shrink (baseline)"),
        ("gavel", _heuristic("gavel", schedule_gavel), "Gavel-like heterogeneity-aware throughput LP (baseline)"),
        ("elasticflow", _heuristic("elasticflow", schedule_elasticflow),
         "ElasticFlow-like elastic scaling from data-parallel profiles (baseline)")):
    register_method("crius", _name, _build, _summary, (ESTIMATOR_PARAMS,))


__all__ = ["CriusExactPolicy", "CriusHeuristicPolicy", "ESTIMATOR_PARAMS", "FINISH_S_PER_JOB"]

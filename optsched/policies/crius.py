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
* ``fcfs``, ``fcfs-backfill``, ``gandiva``, ``gavel``, ``elasticflow`` (ElasticFlow-LS), ``elasticflow-ddl``:
  the baselines of Crius Sec. 8.1 (:mod:`optsched.heuristics.baselines`). Gandiva, Gavel and
  ElasticFlow-DDL remember the rounds of a run (time-slicing, time sharing, admission): each policy built
  gets a fresh scheduler of its own.
* ``crius-na``, ``crius-nh``: the ablations of Crius Sec. 8.6 (:mod:`optsched.heuristics.crius_ablations`).

The time limit covers the whole call (table, heuristic, solver, decision), counted from
``clock_start`` or the call, less :data:`FINISH_S_PER_JOB` per job kept for assembling the decision.
Each policy keeps its table cache across rounds. Kind extra ``estimator_params``: an
:class:`~optsched.perf.crius.cell_estimator.EstimatorParams` the policy estimates Cells with (default:
the built-in estimator, shared by the process).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, ClassVar, Mapping

from optsched.core.deadline import Deadline
from optsched.core.decision import Decision
from optsched.core.errors import InfeasibleError, ValidationError
from optsched.core.round import RoundProblem
from optsched.formulations.solution import Solution
from optsched.heuristics.baselines import (ElasticFlowDDL, Gandiva, Gavel, schedule_elasticflow, schedule_fcfs,
                                           schedule_fcfs_backfill)
from optsched.heuristics.crius import algorithm1
from optsched.heuristics.crius_ablations import CriusNA, CriusNH
from optsched.perf.crius.cell_estimator import EstimatorParams
from optsched.policies.checks import round_of
from optsched.policies.exact import ExactKind, Outcome, WarmStart, exact_method, hint_of, register_exact
from optsched.policies.notes import finishing_deadline, join_notes, table_cut_note
from optsched.policies.options import BACKENDS, DEFAULT_TIME_LIMIT, PolicyOptions
from optsched.policies.registry import register_method
from optsched.rounds.crius.admission import CriusAdmission, admit
from optsched.rounds.crius.choice import Choice
from optsched.rounds.crius.decision import Schedule, heuristic_decision, to_decision
from optsched.rounds.crius.feasibility import violations
from optsched.rounds.crius.objective import objective
from optsched.rounds.crius.problem import CriusRound
from optsched.rounds.crius.table import CriusTable, CriusTableCache, build_crius_table

#: the kind extra naming the estimator's parameters (module docstring)
ESTIMATOR_PARAMS = "estimator_params"
#: seconds per job kept from the time limit for assembling the decision (Cell details, JSON): 0.19 s to assemble
#: and 0.12 s to write the decision of a 20,000-job round, measured (2e-4 before kept 4 s of a 1 s limit, so
#: that no job was considered)
FINISH_S_PER_JOB = 3e-5


def _deadline(time_limit: float, clock_start: float | None, problem: RoundProblem) -> Deadline:
    return finishing_deadline(time_limit, clock_start, len(problem.jobs), FINISH_S_PER_JOB)


def _cut(schedule: Schedule, left_out: list[str]) -> Schedule:
    """``schedule`` marked incomplete when the table left jobs out."""
    if not left_out:
        return schedule
    note = table_cut_note(left_out, "Cell")
    return Schedule(schedule.choices, schedule.admission, join_notes(note, schedule.message), complete=False,
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
class CriusContext:
    """What the driver keeps of one Crius round: the round, its Cell table, the admission and the jobs
    the table left out."""

    problem: CriusRound
    table: CriusTable
    admission: CriusAdmission
    left_out: tuple[str, ...]


@dataclass(frozen=True)
class CriusExact(ExactKind[CriusRound, CriusContext, Mapping[str, Choice]]):
    """The exact Crius round for the driver (module docstring): Algorithm 1 warm-starts the CP-SAT Cell
    selection (or the MILP of ``backend``); Algorithm 1's decision never wins when it breaks a rule of
    :func:`~optsched.rounds.crius.feasibility.violations`."""

    problem_type: ClassVar[type[RoundProblem]] = CriusRound
    formulation: ClassVar[str] = "optsched.formulations.crius_round"

    cache: CriusTableCache = field(default_factory=CriusTableCache, compare=False, repr=False)

    def deadline(self, time_limit: float, clock_start: float | None, problem: CriusRound) -> Deadline:
        return _deadline(time_limit, clock_start, problem)

    def prepare(self, problem: CriusRound, deadline: Deadline) -> CriusContext:
        left_out: list[str] = []
        table = build_crius_table(problem, self.cache, deadline=deadline, left_out=left_out)
        return CriusContext(problem, table, admit(problem, table), tuple(left_out))

    def warm_start(self, ctx: CriusContext, deadline: Deadline) -> WarmStart[Mapping[str, Choice]]:
        hint = _cut(algorithm1(ctx.problem, ctx.table, ctx.admission, deadline=deadline), list(ctx.left_out))
        return WarmStart(hint.choices, objective(ctx.problem, ctx.table, hint.choices), complete=hint.complete,
                         message=hint.message)

    def solve(self, ctx: CriusContext, warm: WarmStart[Mapping[str, Choice]] | None, *, time_limit: float,
              seed: int, workers: int, backend: str, cold: bool = False,
              trace: list[tuple[float, float, float]] | None = None) -> Solution:
        from optsched.formulations import crius_round  # OR-Tools on use (issue 26, item 4)

        return crius_round.solve(ctx.problem, ctx.table, time_limit=time_limit, seed=seed, workers=workers,
                                 hint=hint_of(warm, cold), admission=ctx.admission,
                                 backend=backend, trace=trace)

    def violations(self, ctx: CriusContext, warm: WarmStart[Mapping[str, Choice]]) -> list[str]:
        return violations(ctx.problem, ctx.table, warm.answer, ctx.admission)

    def infeasible(self, ctx: CriusContext, warm: WarmStart[Mapping[str, Choice]] | None) -> InfeasibleError:
        a = ctx.admission  # pragma: no cover - admission only protects what fits
        return InfeasibleError("round infeasible: the protected and guaranteed jobs cannot all run",
                               tuple(sorted(a.guaranteed | {a.protected or ""} - {""})))

    def assemble(self, ctx: CriusContext, warm: WarmStart[Mapping[str, Choice]] | None,
                 answer: Mapping[str, Choice], outcome: Outcome, method: str) -> Decision:
        return to_decision(ctx.problem, ctx.table, answer, method=method, status=outcome.status, bound=outcome.bound,
                           solve_seconds=outcome.solve_seconds, heuristic_objective=outcome.heuristic_objective,
                           warm_start=outcome.warm_start, message=outcome.message, admission=ctx.admission,
                           left_out=ctx.left_out)

    def lp_bound(self, ctx: CriusContext, warm: WarmStart[Mapping[str, Choice]] | None,
                 time_limit: float) -> float | None:
        from optsched.formulations import crius_round  # OR-Tools on use (issue 26, item 4)

        return crius_round.lp_relaxation_bound(ctx.problem, ctx.table, ctx.admission, time_limit=time_limit)

    def size(self, problem: CriusRound) -> tuple[str, int]:
        return "jobs", len(problem.jobs)


# -- registration ---------------------------------------------------------------------------------------
def _cache(o: PolicyOptions) -> CriusTableCache:
    params = o.extra(ESTIMATOR_PARAMS)
    if params is not None and not isinstance(params, EstimatorParams):
        raise ValidationError(f"{ESTIMATOR_PARAMS} must be an EstimatorParams, got {type(params).__name__}")
    return CriusTableCache(params)


def _contract(o: PolicyOptions) -> CriusExact:
    return CriusExact(_cache(o))


register_exact("crius", _contract)


def _heuristic(name: str, scheduler: Scheduler, stateful: bool = False):  # noqa: ANN202
    """The builder of policy ``name``; ``stateful``: ``scheduler`` is a class, one fresh instance per policy."""
    def build(o: PolicyOptions) -> CriusHeuristicPolicy:
        return CriusHeuristicPolicy(name, scheduler() if stateful else scheduler, o.time_limit, o.clock_start,
                                    _cache(o))
    return build


_EXACT = "CP-SAT Cell selection warm-started by Crius Algorithm 1; never worse than it"
_HEUR = "Crius Algorithm 1: Cell-based scheduling, search depth, opportunistic execution (heuristic)"
for _name, _build, _summary in (
        ("exact", exact_method("exact", _contract), _EXACT),
        ("crius-exact", exact_method("crius-exact", _contract), _EXACT + " (alias of exact)"),
        ("crius", _heuristic("crius", algorithm1), _HEUR),
        ("heuristic", _heuristic("heuristic", algorithm1), _HEUR + " (alias of crius)"),
        ("fcfs", _heuristic("fcfs", schedule_fcfs), "FCFS on the requested GPUs, no backfilling (baseline)"),
        ("fcfs-backfill", _heuristic("fcfs-backfill", schedule_fcfs_backfill),
         "FCFS on the requested GPUs with backfilling (baseline)"),
        ("gandiva", _heuristic("gandiva", Gandiva, True),
         "Gandiva: packing, migration, time-slicing, grow-shrink (baseline)"),
        ("gavel", _heuristic("gavel", Gavel, True),
         "Gavel: heterogeneity-aware throughput LP with round-based time sharing (baseline)"),
        ("elasticflow", _heuristic("elasticflow", schedule_elasticflow),
         "ElasticFlow-LS: elastic scaling from data-parallel profiles, loosened deadlines (baseline)"),
        ("elasticflow-ddl", _heuristic("elasticflow-ddl", ElasticFlowDDL, True),
         "ElasticFlow deadline-aware: admission by minimum satisfactory share, drops, elastic scaling (baseline)"),
        ("crius-na", _heuristic("crius-na", CriusNA, True),
         "Crius-NA: Algorithm 1 without adaptivity scaling, requested GPU counts only (ablation, Sec. 8.6)"),
        ("crius-nh", _heuristic("crius-nh", CriusNH, True),
         "Crius-NH: Algorithm 1 without heterogeneity scaling, one GPU type per job (ablation, Sec. 8.6)")):
    register_method("crius", _name, _build, _summary, (ESTIMATOR_PARAMS,),
                    backends=BACKENDS if _name in ("exact", "crius-exact") else ())


__all__ = ["CriusContext", "CriusExact", "CriusHeuristicPolicy", "ESTIMATOR_PARAMS", "FINISH_S_PER_JOB"]

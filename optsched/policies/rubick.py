"""The policies of the ``rubick`` round kind: each builds its table from the performance models
(:mod:`optsched.rounds.rubick`), runs a heuristic (:mod:`optsched.heuristics`) and, for the exact
method, the CP-SAT model (:mod:`optsched.formulations.rubick_round`) warm-started by it.

Methods (registered in :mod:`optsched.policies.registry` under kind ``rubick``):

* ``exact`` (alias ``rubick-exact``): the CP-SAT round warm-started by Algorithm 1's decision. The
  better of the two (by the round objective) is returned, so the exact method is never worse than the
  heuristic; when the solver finds nothing better in its time limit the heuristic's decision is
  returned with status ``heuristic-fallback``.
* ``heuristic`` (alias ``rubick``): Rubick Algorithm 1 (:mod:`optsched.heuristics.rubick`).
* ``rubick-e``, ``rubick-r``, ``rubick-n``: Algorithm 1 on the ablation tables of Table 4 (plans
  only / resources only / neither, see :mod:`optsched.rounds.rubick.table`).
* ``fifo``, ``fifo-backfill``, ``synergy``, ``sia``, ``antman``: the baselines of Rubick Sec. 7.3
  (:mod:`optsched.heuristics.baselines`, tables from :mod:`optsched.rounds.rubick.baseline_tables`).
  They ignore the seed (they are deterministic); their tables stop at the time limit like the others'.

**Invalid jobs.** In a round that skips invalid jobs (``on_invalid_job: "skip"``) every method, the
partitioned solve too, first takes out the jobs whose rows cannot be built
(:func:`~optsched.rounds.rubick.table.valid_round`), so all methods report the same ``skipped`` list.

The time limit covers the whole call: the table, the heuristic and the solver get the limit less
:data:`FINISH_S_PER_JOB` per job, kept for assembling the decision. Each policy keeps a table cache
across rounds (a simulator calls the same policy object every round).

**Holds.** Every method solves the round less its jobs held by ``min_hold_s`` (their allocations added
to ``occupied``, :mod:`optsched.rounds.rubick.holds`), and the decision adds them back as ``keep``.

**Unreachable guarantees** (extra ``defer_unreachable_guarantees``). By default a round in which an
admitted guaranteed job cannot reach its performance guarantee (admission counts GPUs, not node
shapes) raises ``InfeasibleError`` naming the jobs. With ``defer_unreachable_guarantees=True`` the
round instead defers those jobs (:func:`optsched.heuristics.rubick.schedule_with_deferral`: they wait
this round as if for quota, a running one is preempted) and schedules everything else; the decision
passes :func:`~optsched.rounds.rubick.feasibility.violations` for the reduced admission, its deferred
jobs have ``protected=False`` and action ``wait`` (``preempt`` if they were running), and its
``message`` names each deferred job and why. The exact method gives the CP-SAT model the same reduced
admission (the heuristic decides who is deferred). The baselines ignore the option: they never fail
on a guarantee.

**Deadlines** (:mod:`optsched.rounds.rubick.deadlines`). Every method admits the round's deadline jobs on
its own table (Algorithm 1 and the exact method beside the quota admission; FIFO, Synergy and Sia beside
nobody's guarantee, as they protect none; AntMan beside the quota admission of its table) and binds the
admitted ones; deadlines never fail a round (an admitted job no node shape fits is demoted to at risk).
The exact method takes the heuristic's demotions, as it takes its deferrals.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import ClassVar, Mapping

from optsched.core.deadline import Deadline
from optsched.core.decision import Decision
from optsched.core.errors import InfeasibleError, ValidationError
from optsched.core.round import RoundProblem
from optsched.formulations.solution import CPSAT_BACKENDS, Solution
from optsched.heuristics.baselines import antman_round, schedule_fifo, schedule_sia, schedule_synergy
from optsched.heuristics.baselines.synergy import SYNERGY_TUNE_FRACTION
from optsched.heuristics.rubick import algorithm1
from optsched.perf.coefficients import CoefficientTable
from optsched.perf.lookup import PerfLookup, PerfSource, notes_needed, prediction_notes
from optsched.policies.checks import round_of
from optsched.policies.exact import ExactKind, Outcome, WarmStart, exact_method, hint_of, register_exact
from optsched.policies.notes import finishing_deadline, join_notes, table_cut_note
from optsched.policies.options import BACKENDS, DEFAULT_TIME_LIMIT, PolicyOptions
from optsched.policies.registry import register_method
from optsched.rounds.rubick.admission import DEFER_OPTION, NO_GUARANTEES, Admission, admit
from optsched.rounds.rubick.baseline_tables import BaselineCache, request_table, sia_table, synergy_table
from optsched.rounds.rubick.choice import Choice
from optsched.rounds.rubick.deadlines import admit_round, settle, with_deadlines
from optsched.rounds.rubick.decision import Schedule, heuristic_decision, keep_unchanged, to_decision
from optsched.rounds.rubick.feasibility import violations
from optsched.rounds.rubick.holds import HeldSplit, hold_split, with_held
from optsched.rounds.rubick.priorities import enforce_priorities, prioritised
from optsched.rounds.rubick.objective import objective
from optsched.rounds.rubick.problem import RubickRound
from optsched.rounds.rubick.table import DEFAULT_GROWTH, RoundTableCache, build_round_table, valid_round

#: the extra option of the kind (module docstring)
DEFER = DEFER_OPTION


def _infeasible_report(problem: RubickRound, admission: Admission) -> InfeasibleError:
    on = {name: f" {t}" for name, t in admission.gpu_type.items()}  # the GPU type it is admitted on, if bound
    reasons = [f"guaranteed job {name!r} (tenant {problem.job(name).tenant!r}) needs at least {need}{on.get(name, '')} "
               f"GPUs to reach the throughput of its request" for name, need in sorted(admission.protected.items())]
    reasons.append("free GPUs for the round: " + ", ".join(f"{v} {k}" for k, v in
                                                            sorted(problem.free_gpus_by_type().items())))
    return InfeasibleError("round infeasible: the performance guarantees of the admitted guaranteed jobs cannot "
                           "all be met on the free resources (GPUs, CPUs, memory or node shapes)", tuple(reasons))


#: what an infeasibility error of a method that can defer unreachable guarantees adds (issue 16, item 4)
DEFER_HINT = ("to schedule the rest and defer such jobs this round instead: optsched solve --defer-unreachable, "
              "defer_unreachable=true for optsched serve, defer_unreachable_guarantees=True in Python")


def _hinted(error: InfeasibleError) -> InfeasibleError:
    """``error`` naming the option that would defer the unreachable guarantees (:data:`DEFER_HINT`)."""
    return InfeasibleError(f"{error.message} ({DEFER_HINT})", error.reasons)


def _lookup(perf: PerfSource, problem: RubickRound) -> PerfLookup:
    """The performance models of ``problem``: the policy's over the round's own models and fitted
    parameters (:meth:`~optsched.perf.lookup.PerfSource.lookup_for`)."""
    return perf.lookup_for(problem.cluster, problem.own_models, problem.perf_params)


def _with_prediction_notes(decision: Decision, problem: RubickRound, perf: PerfSource) -> Decision:
    """``decision`` with notes on what predicted the jobs the performance model answered for, where that
    was not parameters fitted on their GPU type (:func:`~optsched.perf.lookup.prediction_notes`: a model
    without parameters, the built-in A800 parameters scaled to another GPU type of the catalogue or
    outside it). Every method of the kind ends here. Rounds on A800 alone without own models or
    parameters have none and cost nothing here (:func:`~optsched.perf.lookup.notes_needed`)."""
    types = {n.gpu_type for n in problem.cluster.nodes if n.num_gpus > 0}
    if not notes_needed(types, problem.own_models, problem.perf_params):
        return decision
    pairs = {(job.model, t) for job in problem.jobs if problem.own_rows(job.name) is None
             for t in ([job.gpu_type] if job.gpu_type is not None else types)}
    notes = prediction_notes(pairs, problem.cluster, perf.fitted or None, problem.own_models, problem.perf_params)
    if not notes:
        return decision
    return replace(decision, message=join_notes(decision.message, *notes))


#: seconds per job of the round kept from the time limit for what follows the deadline of the table,
#: the heuristic and the solver: short table blocks for the jobs not reached, assembling the decision
#: and writing it (measured on 1 node with 100,000 jobs: 24-27 us a job, all methods)
FINISH_S_PER_JOB = 3e-5


#: seconds per job of a round with several priorities kept besides for the priority enforcement that
#: follows every method (:mod:`optsched.rounds.rubick.priorities`; measured on the generated 1,280 x 8 GPU /
#: 2,000-job round with a quarter of its jobs at priority 1 or 2: 0.9-1.3 s, up to 0.63 ms a job, on 2 busy
#: cores; kept with a margin)
PRIORITY_S_PER_JOB = 1e-3
#: seconds per job of the round kept for Algorithm 1 when it runs after the solver
#: (:meth:`RubickExact.warm_start_first`; measured on Sia-shaped rounds of 80-1,012 jobs and generated Rubick
#: rounds of 40-800 jobs: 0.13-1.2 ms a job)
WARM_START_S_PER_JOB = 1.5e-3
#: seconds the exact model takes to build and prove optimal, per squared table row, for
#: :meth:`RubickExact.uses_prices` (measured on Sia-shaped rounds, issue 29, pooled, CP-SAT: 11,303 rows in 3.0 s,
#: 22,685 in 20.2 s, 31,846 in 14.9 s, 44,956 with no solution after 50 s: about 4e-8 x rows^2)
MODEL_S_PER_ROW2 = 4e-8


def _deadline(time_limit: float, clock_start: float | None, problem: RoundProblem) -> Deadline:
    per_job = FINISH_S_PER_JOB + (PRIORITY_S_PER_JOB if isinstance(problem, RubickRound) and prioritised(problem)
                                  else 0.0)
    return finishing_deadline(time_limit, clock_start, len(problem.jobs), per_job)


def _stopped(schedule: Schedule, deadline: Deadline, method: str) -> Schedule:
    """A baseline's ``schedule`` marked incomplete when its ``deadline`` has passed (it stops taking
    jobs then: :func:`~optsched.heuristics.baselines.common.out_of_time`)."""
    if not deadline.expired():
        return schedule
    note = (f"partial: the time limit ran out during {method}; the jobs it had not reached keep their "
            f"allocation or wait")
    return Schedule(schedule.choices, schedule.admission, join_notes(note, schedule.message), complete=False)


def _cut(schedule: Schedule, left_out: list[str]) -> Schedule:
    """``schedule`` marked incomplete when the table left jobs out."""
    if not left_out:
        return schedule
    return Schedule(schedule.choices, schedule.admission, join_notes(table_cut_note(left_out), schedule.message),
                    complete=False)


def _prioritised(problem: RubickRound, table: CoefficientTable, schedule: Schedule) -> Schedule:
    """``schedule`` with the priority rule made to hold (:mod:`optsched.rounds.rubick.priorities`)."""
    if not prioritised(problem):
        return schedule
    done = enforce_priorities(problem, table, schedule.choices, schedule.admission)
    if not done.changed:
        return schedule
    return Schedule(done.choices, schedule.admission, join_notes(schedule.message, done.note()), schedule.complete,
                    {**schedule.reasons, **done.reasons(problem)})


def _holds(problem: RubickRound, perf: PerfSource, cache: RoundTableCache | None) -> HeldSplit | None:
    """``problem`` split by its holds (``min_hold_s``; :mod:`optsched.rounds.rubick.holds`), the held jobs'
    table built with ``cache``; None when nothing is held."""
    return hold_split(problem, lambda r: build_round_table(r, _lookup(perf, r), cache=cache))


@dataclass(frozen=True)
class _HeuristicPolicy:
    """What every heuristic policy of the kind does: build its table, run its scheduler (:meth:`plan`,
    per subclass) and return the schedule as a decision with status ``heuristic`` (``partial`` when the
    time limit cut the table or the scheduler short). The time limit counts from ``clock_start`` (a
    ``time.perf_counter()`` reading) or, when None, from the call of :meth:`decide`."""

    kind: ClassVar[str] = "rubick"

    name: str
    perf: PerfSource = field(default_factory=PerfSource, compare=False)
    time_limit: float = DEFAULT_TIME_LIMIT
    clock_start: float | None = None

    def plan(self, problem: RubickRound, deadline: Deadline) -> tuple[CoefficientTable, Schedule]:
        raise NotImplementedError

    def round_cache(self) -> RoundTableCache | None:
        """The policy's cache of round-table blocks (what the check of invalid jobs shares with it)."""
        return None

    def decide(self, problem: RoundProblem) -> Decision:
        t0 = time.perf_counter()
        rubick = round_of(problem, RubickRound, self.name)
        rubick = valid_round(rubick, _lookup(self.perf, rubick), cache=self.round_cache())
        held = _holds(rubick, self.perf, self.round_cache())
        rest = rubick if held is None else held.rest
        try:
            table, schedule = self.plan(rest, _deadline(self.time_limit, self.clock_start, rubick))
        except InfeasibleError as e:
            raise e if getattr(self, DEFER, True) else _hinted(e) from None
        decision = heuristic_decision(rest, table, _prioritised(rest, table, schedule), method=self.name, started=t0)
        if held is not None:
            decision = with_held(decision, rubick, held)
        return _with_prediction_notes(decision, rubick, self.perf)


@dataclass(frozen=True)
class RubickHeuristicPolicy(_HeuristicPolicy):
    """Algorithm 1 on the full table, or on an ablation table (``fixed_plan`` / ``fixed_resources``);
    ``defer_unreachable_guarantees``: module docstring."""

    name: str = "rubick"
    fixed_plan: bool = False
    fixed_resources: bool = False
    defer_unreachable_guarantees: bool = False
    cache: RoundTableCache = field(default_factory=RoundTableCache, compare=False, repr=False)

    def round_cache(self) -> RoundTableCache:
        return self.cache

    def table(self, problem: RubickRound, deadline: Deadline | None = None,
              left_out: list[str] | None = None) -> CoefficientTable:
        return build_round_table(problem, _lookup(self.perf, problem), fixed_plan=self.fixed_plan,
                                 fixed_resources=self.fixed_resources, cache=self.cache, deadline=deadline,
                                 left_out=left_out)

    def plan(self, problem: RubickRound, deadline: Deadline) -> tuple[CoefficientTable, Schedule]:
        left_out: list[str] = []
        table = self.table(problem, deadline, left_out)
        schedule = algorithm1(problem, table, admit_round(problem, table), defer=self.defer_unreachable_guarantees,
                              deadline=deadline)
        return table, _cut(schedule, left_out)


@dataclass(frozen=True)
class RubickContext:
    """What the driver keeps of one Rubick round: the round, its table and the admission of the table
    (:mod:`optsched.policies.exact`)."""

    problem: RubickRound
    table: CoefficientTable
    admission: Admission
    left_out: list[str]
    #: the round as asked, and its jobs held by ``min_hold_s``, when some are (``problem`` is then the rest)
    whole: RubickRound | None = None
    held: HeldSplit | None = None
    #: jobs evicted for a higher priority, in the warm start or the solver's answer (job -> reason)
    evicted: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class RubickExact(ExactKind[RubickRound, RubickContext, Mapping[str, Choice]]):
    """The exact Rubick round for the driver (module docstring): Algorithm 1 (with
    ``defer_unreachable_guarantees``) warm-starts the CP-SAT round (or the MILP of ``backend``); the
    warm start's admission (who is deferred) binds the model."""

    problem_type: ClassVar[type[RoundProblem]] = RubickRound
    formulation: ClassVar[str] = "optsched.formulations.rubick_round"

    perf: PerfSource = field(default_factory=PerfSource, compare=False)
    cache: RoundTableCache = field(default_factory=RoundTableCache, compare=False, repr=False)
    defer_unreachable_guarantees: bool = False
    #: run Algorithm 1 before the solver on every round (False: only after a solve not proven optimal,
    #: :meth:`warm_start_first`)
    eager_warm_start: bool = False
    #: the back end the policy asked for: the price path (:meth:`uses_prices`) serves only the default, CP-SAT; a
    #: MILP back end asked for by name solves the model
    backend: str = "cpsat"

    def warm_start_first(self, ctx: RubickContext) -> bool:
        """Algorithm 1 runs first only when it sets a rule of the model (deferring unreachable guarantees) or
        ``eager_warm_start``: measured (issue 29; Sia-shaped rounds of 256-2,048 GPUs and generated Rubick
        rounds of 40-800 jobs, every one proven optimal either way) the hint never made CP-SAT prove
        optimality sooner, while Algorithm 1 took 0.005-1.2 s, up to half the cold solve."""
        return self.eager_warm_start or self.defer_unreachable_guarantees

    def warm_start_seconds(self, ctx: RubickContext, time_left: float) -> float:
        """``WARM_START_S_PER_JOB`` a job; none when the price path answers (Algorithm 1 does not run after it)."""
        return 0.0 if self.uses_prices(ctx, time_left) else WARM_START_S_PER_JOB * len(ctx.table.jobs)

    def warm_start_after(self, ctx: RubickContext, sol: Solution) -> bool:
        """Not after the price path: it answers rounds too large for the model, where Algorithm 1 does not finish
        either (measured: 5,120 jobs on 16,384 GPUs, cut short after 16.5 s, below the price-guided greedy)."""
        return sol.size.encoding != "prices"

    def uses_prices(self, ctx: RubickContext, time_limit: float) -> bool:
        """Whether the round is answered by the price bound and greedy (:mod:`optsched.formulations.rubick_prices`)
        instead of the exact model: a round it applies to whose rows would take the model more than half the time
        left (``MODEL_S_PER_ROW2``: the model's time grows with the square of its rows), when the back end is the
        default (a MILP back end named by the caller solves the model)."""
        from optsched.formulations import rubick_prices

        return (self.backend in CPSAT_BACKENDS and MODEL_S_PER_ROW2 * len(ctx.table.throughput) ** 2 > 0.5 * time_limit
                and rubick_prices.applies(ctx.problem))

    def round_of(self, problem: RoundProblem, method: str) -> RubickRound:
        rubick = super().round_of(problem, method)
        return valid_round(rubick, _lookup(self.perf, rubick), cache=self.cache)

    def deadline(self, time_limit: float, clock_start: float | None, problem: RubickRound) -> Deadline:
        return _deadline(time_limit, clock_start, problem)

    def prepare(self, problem: RubickRound, deadline: Deadline) -> RubickContext:
        left_out: list[str] = []
        held = _holds(problem, self.perf, self.cache)
        rest = problem if held is None else held.rest
        table = build_round_table(rest, _lookup(self.perf, rest), cache=self.cache, deadline=deadline,
                                  left_out=left_out)
        return RubickContext(rest, table, admit_round(rest, table), left_out, problem, held)

    def warm_start(self, ctx: RubickContext, deadline: Deadline) -> WarmStart[Mapping[str, Choice]]:
        hint = _prioritised(ctx.problem, ctx.table, _cut(algorithm1(
            ctx.problem, ctx.table, ctx.admission, defer=self.defer_unreachable_guarantees, deadline=deadline),
            ctx.left_out))
        ctx.evicted.update(hint.reasons)
        # no reconfiguration without a change that matters (rounds/rubick/decision.py)
        choices = keep_unchanged(ctx.problem, ctx.table, hint.choices)
        return WarmStart(choices, objective(ctx.problem, ctx.table, choices), complete=hint.complete,
                         message=hint.message, info=hint.admission)

    def _admission(self, ctx: RubickContext, warm: WarmStart[Mapping[str, Choice]] | None) -> Admission:
        return ctx.admission if warm is None else warm.info

    def solve(self, ctx: RubickContext, warm: WarmStart[Mapping[str, Choice]] | None, *, time_limit: float,
              seed: int, workers: int, backend: str, cold: bool = False,
              trace: list[tuple[float, float, float]] | None = None) -> Solution:
        from optsched.formulations import rubick_prices, rubick_round  # OR-Tools on use, not for a heuristic

        admission = self._admission(ctx, warm)
        if self.uses_prices(ctx, time_limit):
            sol = rubick_prices.price_solve(ctx.problem, ctx.table, admission,
                                            rubick_round.allowed_rows(ctx.table, admission), time_limit=time_limit)
        else:
            sol = rubick_round.solve(ctx.problem, ctx.table, time_limit=time_limit, seed=seed, workers=workers,
                                     hint=hint_of(warm, cold), admission=admission, backend=backend, trace=trace)
        choices = sol.payload.get("choices")
        if not choices or not prioritised(ctx.problem):
            return sol
        done = enforce_priorities(ctx.problem, ctx.table, choices, self._admission(ctx, warm))
        if not done.changed:
            return sol
        ctx.evicted.update(done.reasons(ctx.problem))
        # the model does not state the priority rule: its answer made to keep it is feasible, and its bound
        # (of the round without the rule) still bounds the round (rounds/rubick/priorities.py)
        return replace(sol, status="feasible", objective=objective(ctx.problem, ctx.table, done.choices),
                       payload={**sol.payload, "choices": done.choices, "priorities": done.note()})

    def describe(self, sol: Solution) -> str:
        size = sol.size
        note = f"model encoding={size.encoding} variables={size.variables} constraints={size.constraints}"
        return join_notes(note, sol.payload.get("reason", ""), sol.payload.get("priorities", ""))

    def violations(self, ctx: RubickContext, warm: WarmStart[Mapping[str, Choice]]) -> list[str]:
        return violations(ctx.problem, ctx.table, warm.answer, warm.info)

    def infeasible(self, ctx: RubickContext, warm: WarmStart[Mapping[str, Choice]] | None) -> InfeasibleError:
        return _infeasible_report(ctx.problem, self._admission(ctx, warm))

    def assemble(self, ctx: RubickContext, warm: WarmStart[Mapping[str, Choice]] | None,
                 answer: Mapping[str, Choice], outcome: Outcome, method: str) -> Decision:
        decision = to_decision(ctx.problem, ctx.table, answer, method=method, status=outcome.status,
                               bound=outcome.bound, solve_seconds=outcome.solve_seconds,
                               heuristic_objective=outcome.heuristic_objective, warm_start=outcome.warm_start,
                               message=outcome.message, admission=self._admission(ctx, warm),
                               reasons={n: why for n, why in ctx.evicted.items() if n not in answer})
        if ctx.held is None:
            return decision
        assert ctx.whole is not None
        return with_held(decision, ctx.whole, ctx.held)

    def finish(self, problem: RubickRound, decision: Decision) -> Decision:
        return _with_prediction_notes(decision, problem, self.perf)

    def explain(self, error: InfeasibleError) -> InfeasibleError:
        return error if self.defer_unreachable_guarantees else _hinted(error)

    def lp_bound(self, ctx: RubickContext, warm: WarmStart[Mapping[str, Choice]] | None,
                 time_limit: float) -> float | None:
        from optsched.formulations import rubick_round

        bound = rubick_round.lp_relaxation_bound(ctx.problem, ctx.table, self._admission(ctx, warm),
                                                 time_limit=time_limit)
        return bound if bound is None or ctx.held is None else bound + ctx.held.value

    def deferred(self, ctx: RubickContext, warm: WarmStart[Mapping[str, Choice]]) -> tuple[str, ...]:
        kept = warm.info.protected
        return tuple(name for name in ctx.admission.protected if name not in kept)

    def for_study(self) -> RubickExact:
        return replace(self, defer_unreachable_guarantees=True)


# -- the baselines ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _BaselinePolicy(_HeuristicPolicy):
    """A baseline of the kind: its tables come from :mod:`optsched.rounds.rubick.baseline_tables`,
    cached in ``cache`` across rounds."""

    cache: BaselineCache = field(default_factory=BaselineCache, compare=False, repr=False)

    def round_cache(self) -> RoundTableCache:
        return self.cache.round


@dataclass(frozen=True)
class FifoPolicy(_BaselinePolicy):
    """:func:`~optsched.heuristics.baselines.fifo.schedule_fifo` on the request-only table (strict
    FIFO, or with ``backfill``)."""

    name: str = "fifo"
    backfill: bool = False

    def plan(self, problem: RubickRound, deadline: Deadline) -> tuple[CoefficientTable, Schedule]:
        left_out: list[str] = []
        table = request_table(problem, _lookup(self.perf, problem), cache=self.cache, deadline=deadline,
                              left_out=left_out)
        admission = with_deadlines(problem, table, NO_GUARANTEES)
        choices = schedule_fifo(problem, table, backfill=self.backfill, deadline=deadline, admission=admission)
        schedule = Schedule(choices, settle(table, admission, choices, self.name))
        return table, _cut(_stopped(schedule, deadline, self.name), left_out)


@dataclass(frozen=True)
class AntManPolicy(_BaselinePolicy):
    """:func:`~optsched.heuristics.baselines.antman.antman_round` on the request-only table; the
    decision protects the guaranteed jobs AntMan runs at their request's throughput."""

    name: str = "antman"

    def plan(self, problem: RubickRound, deadline: Deadline) -> tuple[CoefficientTable, Schedule]:
        left_out: list[str] = []
        table = request_table(problem, _lookup(self.perf, problem), cache=self.cache, deadline=deadline,
                              left_out=left_out)
        deadlines = with_deadlines(problem, table, admit(problem, table)).deadlines
        result = antman_round(problem, table, deadline=deadline, admission=replace(NO_GUARANTEES, deadlines=deadlines))
        message = (f"preempted for guaranteed or deadline jobs: {', '.join(result.preempted)}" if result.preempted
                   else "")
        admission = settle(table, replace(result.admission, deadlines=deadlines), result.choices, self.name)
        return table, _cut(_stopped(Schedule(result.choices, admission, message), deadline, self.name), left_out)


@dataclass(frozen=True)
class SynergyPolicy(_BaselinePolicy):
    """:func:`~optsched.heuristics.baselines.synergy.schedule_synergy` on
    :func:`~optsched.rounds.rubick.baseline_tables.synergy_table`."""

    name: str = "synergy"
    tune_fraction: float = SYNERGY_TUNE_FRACTION
    backfill: bool = True

    def plan(self, problem: RubickRound, deadline: Deadline) -> tuple[CoefficientTable, Schedule]:
        left_out: list[str] = []
        bt = synergy_table(problem, _lookup(self.perf, problem), cache=self.cache, deadline=deadline,
                           left_out=left_out)
        admission = with_deadlines(problem, bt.table, NO_GUARANTEES, bt.options)
        choices = schedule_synergy(problem, bt.table, options=bt.options, tune_fraction=self.tune_fraction,
                                   backfill=self.backfill, deadline=deadline, admission=admission)
        schedule = Schedule(choices, settle(bt.table, admission, choices, self.name))
        return bt.table, _cut(_stopped(schedule, deadline, self.name), left_out)


@dataclass(frozen=True)
class SiaPolicy(_BaselinePolicy):
    """:func:`~optsched.heuristics.baselines.sia.schedule_sia` on
    :func:`~optsched.rounds.rubick.baseline_tables.sia_table`."""

    name: str = "sia"
    growth: int = DEFAULT_GROWTH

    def plan(self, problem: RubickRound, deadline: Deadline) -> tuple[CoefficientTable, Schedule]:
        left_out: list[str] = []
        bt = sia_table(problem, _lookup(self.perf, problem), growth=self.growth, cache=self.cache,
                       deadline=deadline, left_out=left_out)
        admission = with_deadlines(problem, bt.table, NO_GUARANTEES, bt.options)
        choices = schedule_sia(problem, bt.table, ladders=bt.options, deadline=deadline, admission=admission)
        schedule = Schedule(choices, settle(bt.table, admission, choices, self.name))
        return bt.table, _cut(_stopped(schedule, deadline, self.name), left_out)


# -- registration ---------------------------------------------------------------------------------------
def _defer(options: PolicyOptions) -> bool:
    value = options.extra(DEFER, False)
    if not isinstance(value, bool):
        raise ValidationError(f"{DEFER} must be True or False, got {value!r}")
    return value


def _contract(o: PolicyOptions) -> RubickExact:
    return RubickExact(o.perf_source(), defer_unreachable_guarantees=_defer(o), backend=o.backend)


register_exact("rubick", _contract)


def _algorithm1(name: str, fixed_plan: bool = False, fixed_resources: bool = False):  # noqa: ANN202
    def build(o: PolicyOptions) -> RubickHeuristicPolicy:
        return RubickHeuristicPolicy(name, o.perf_source(), o.time_limit, o.clock_start, fixed_plan=fixed_plan,
                                     fixed_resources=fixed_resources, defer_unreachable_guarantees=_defer(o))
    return build


def _baseline(cls: type[_BaselinePolicy], name: str, **fields: object):  # noqa: ANN202
    def build(o: PolicyOptions) -> _BaselinePolicy:
        return cls(name, o.perf_source(), o.time_limit, o.clock_start, **fields)  # type: ignore[call-arg]
    return build


_EXACT = "CP-SAT round, Algorithm 1 its warm start or run after it; never worse than Algorithm 1"
_HEUR = "Rubick Algorithm 1 (heuristic)"
for _name, _build, _summary, _extras in (
        ("exact", exact_method("exact", _contract), _EXACT, (DEFER,)),
        ("rubick-exact", exact_method("rubick-exact", _contract), _EXACT + " (alias of exact)", (DEFER,)),
        ("heuristic", _algorithm1("heuristic"), _HEUR, (DEFER,)),
        ("rubick", _algorithm1("rubick"), _HEUR + " (alias of heuristic)", (DEFER,)),
        ("rubick-e", _algorithm1("rubick-e", fixed_resources=True), "Algorithm 1, plans only (Table 4 ablation)",
         (DEFER,)),
        ("rubick-r", _algorithm1("rubick-r", fixed_plan=True), "Algorithm 1, resources only (Table 4 ablation)",
         (DEFER,)),
        ("rubick-n", _algorithm1("rubick-n", fixed_plan=True, fixed_resources=True),
         "Algorithm 1 on the requests only (Table 4 ablation)", (DEFER,)),
        ("fifo", _baseline(FifoPolicy, "fifo"), "FIFO with requested resources (baseline)", ()),
        ("fifo-backfill", _baseline(FifoPolicy, "fifo-backfill", backfill=True), "FIFO with backfilling (baseline)",
         ()),
        ("synergy", _baseline(SynergyPolicy, "synergy"), "Synergy-like CPU tuning (baseline)", ()),
        ("sia", _baseline(SiaPolicy, "sia"), "Sia-like GPU scaling through DP (baseline)", ()),
        ("antman", _baseline(AntManPolicy, "antman"), "AntMan-like multi-tenant (baseline)", ())):
    register_method("rubick", _name, _build, _summary, _extras,
                    backends=BACKENDS if _name in ("exact", "rubick-exact") else ())


__all__ = ["AntManPolicy", "DEFER", "FifoPolicy", "RubickContext", "RubickExact", "RubickHeuristicPolicy", "SiaPolicy",
           "SynergyPolicy"]

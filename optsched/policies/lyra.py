"""The policies of the Lyra kinds (thesis chapter 3).

``lyra-reclaim`` (Sec. 3.4): ``lyra`` (alias ``heuristic``), the reclaiming heuristic; ``random`` and
``scf``, the baselines of Sec. 3.7.1; ``exact``, the exact selection
(:mod:`optsched.formulations.lyra_reclaim`) warm-started by the heuristic.

``lyra-allocate`` (Sec. 3.5.2, :mod:`optsched.heuristics.lyra_allocate`): ``lyra`` (alias
``heuristic``), SJF for the base demand and the knapsack dynamic program for the flexible demand;
``exact``, the same phase one and the knapsack in CP-SAT (:mod:`optsched.formulations.lyra_mckp`)
warm-started by the dynamic program (both are exact for phase two: the gap between them is rounding);
``afs`` and ``gandiva``, the scaling baselines of Sec. 3.7.1 after the same phase one; ``sjf``, phase
one only (no scaling: Lyra's "loaning only" allocation); ``fifo``, the Baseline (jobs in arrival order
with their requested GPUs, skipping those that do not fit, no scaling); ``fifo-strict``, the same but the
queue stops at the first job that does not fit (head-of-line blocking). The objective is the JCT reduction (seconds)
the flexible workers bring.

``placement`` (Sec. 3.5.3, :mod:`optsched.heuristics.lyra_placement`): ``lyra`` (alias ``heuristic``),
best-fit decreasing with Lyra's pool preferences and base/flexible server groups; ``bfd``, naive
best-fit decreasing (Table 3.6); ``exact``, the CP-SAT bin packing
(:mod:`optsched.formulations.lyra_placement`) under the round's rules
(:func:`~optsched.rounds.placement.evaluate.violations`), warm-started by ``lyra``. Lyra's server
groups are the heuristic's choice, not a rule of the round (``bfd`` places without them), so the
model does not impose them: its bound then bounds every placement the round allows, ``bfd``'s too
(issue 26: with the groups the model's "optimum" 0 was below ``bfd``'s 1).

``lyra`` (the round the simulator drives; :class:`LyraSimPolicy`: allocation, then placement, as
per-job allocations; it returns lent servers when the inference side asks, preempting or scaling in):
``lyra`` (loaning and scaling: SJF + knapsack DP, Lyra placement, Lyra reclaiming), ``lyra-exact``
(knapsack in CP-SAT, exact reclaiming), ``lyra-loan`` (loaning only: no scaling), ``random`` and
``scf`` (loaning only with the reclaiming baselines), ``afs`` and ``gandiva`` (the scaling baselines),
``bfd`` (Lyra with naive placement, Table 3.6), ``opportunistic`` (loaning-only scheduling on the idle
GPUs of inference servers, for rounds with ``opportunistic`` set: the Opportunistic Scheduling baseline
of Sec. 3.7.1), ``fifo`` and ``fifo-strict`` (the Baseline: FIFO,
requested GPUs, no scaling, naive placement; as for ``lyra-allocate``). Whether servers are lent at all is the simulation's choice (pool targets),
so "scaling only" is ``lyra`` without loaning.

Running times: the methods of ``lyra`` read the option ``runtime_predictor`` (``PolicyOptions.extras``, a
:class:`~optsched.rounds.lyra.prediction.RuntimePredictor`): SJF's order, the knapsack's values and the
decision's objective are then on predicted running times (Sec. 3.5.2: "which can be predicted with
profiling and ML methods"; Table 3.9), while the simulator runs jobs at the truth; without it, on the
round's own running times (the oracle). FIFO orders by arrival and uses no running time.

The ``exact`` methods of ``lyra-reclaim`` and ``placement`` are the one driver of
:mod:`optsched.policies.exact` over :class:`ReclaimExact` and :class:`PlacementExact`: the time limit
covers the whole call (index structures, heuristic, solver; counted from ``clock_start`` when given);
the solver's answer is returned when it is at least as good as the heuristic's by the round objective
(:func:`~optsched.policies.exact.not_worse`), else the heuristic's with status ``heuristic-fallback``
(also when no time is left for the solver), so an exact method is never worse than its warm start.
The knapsack of ``lyra-allocate`` and ``lyra`` applies the same comparison per pool
(:class:`Allocator`).
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from dataclasses import dataclass
from typing import Callable, ClassVar, Mapping, Sequence

import numpy as np

from optsched.core.collector import collector_paused
from optsched.core.deadline import Deadline
from optsched.core.decision import Decision, JobAllocations, JobDecision, relative_gap
from optsched.core.events import ServerReturn
from optsched.core.errors import ValidationError
from optsched.core.round import RoundProblem
from optsched.formulations.solution import MIN_SOLVER_SECONDS, Solution
from optsched.heuristics.lyra_placement import best_fit_decreasing, placement_within
from optsched.heuristics.lyra_allocate import PhaseOne, gandiva_scale, mckp_dp, mckp_greedy, phase_one, running_base
from optsched.heuristics.lyra_pollux import GENERATIONS, NOISE_RATIO, pollux_allocate
from optsched.heuristics.lyra_reclaim import lyra_reclaim, lyra_reclaim_within, random_reclaim, scf_reclaim
from optsched.policies.checks import round_of
from optsched.policies.notes import join_notes
from optsched.policies.exact import (ExactKind, ExactPolicy, Outcome, WarmStart, exact_method, hint_of, not_worse,
                                     register_exact)
from optsched.policies.options import DEFAULT_TIME_LIMIT, PolicyOptions
from optsched.policies.registry import register_method
from optsched.rounds.lyra.cluster import worker_allocation
from optsched.rounds.lyra.jobs import base_workers, work_rate
from optsched.rounds.lyra.prediction import PREDICTOR_OPTION, RuntimePredictor
from optsched.rounds.lyra.problem import INFERENCE, TRAINING, LyraRound
from optsched.rounds.lyra_sim import LyraSimRound
from optsched.rounds.lyra_allocate import LyraAllocateRound
from optsched.rounds.lyra_allocate.decision import allocation_decision, counts
from optsched.rounds.lyra_allocate.items import Items, flexible_items, placed_value
from optsched.rounds.lyra_allocate.payload import WorkerCount
from optsched.rounds.lyra_reclaim import LyraReclaimRound, ReclaimView, reclaim_decision
from optsched.rounds.placement import PlacementRound
from optsched.rounds.placement.evaluate import objective as placement_objective
from optsched.rounds.placement.evaluate import placement_decision
from optsched.rounds.placement.payload import WorkerPlacement
from optsched.rounds.placement.start import pools_of, start_state

# -- lyra-reclaim ---------------------------------------------------------------------------------------
ReclaimChooser = Callable[[ReclaimView, int, np.random.Generator], list[int]]
#: a reclaiming heuristic within a deadline: view, count, rng, deadline -> (server indices, cut short)
ReclaimWithin = Callable[[ReclaimView, int, np.random.Generator, Deadline], tuple[list[int], bool]]

#: the partial note of Lyra's reclaiming heuristic cut short by its time limit
_RECLAIM_CUT = ("partial: the time limit ran out during Lyra's reclaiming heuristic; the servers it had not picked "
                "are the cheapest left by their cost then (no collateral-damage tie-break)")


@dataclass(frozen=True)
class ReclaimHeuristicPolicy:
    """A reclaiming heuristic or baseline (``choose``: view, count, rng, deadline -> server indices and whether the
    deadline cut it short: status ``partial`` then) within ``time_limit`` from ``clock_start`` (or the call), less
    :data:`RECLAIM_FINISH_S_PER_JOB` a job kept for the decision."""

    kind: ClassVar[str] = "lyra-reclaim"

    name: str
    choose: ReclaimWithin
    seed: int = 0
    time_limit: float = DEFAULT_TIME_LIMIT
    clock_start: float | None = None

    @collector_paused
    def decide(self, problem: RoundProblem) -> Decision:
        t0 = time.perf_counter()
        p = round_of(problem, LyraReclaimRound, self.name)
        deadline = Deadline.since(self.time_limit, self.clock_start).earlier(RECLAIM_FINISH_S_PER_JOB * len(p.jobs))
        view = ReclaimView(p)
        picks, cut = self.choose(view, p.reclaim, np.random.default_rng(self.seed), deadline)
        return reclaim_decision(view, picks, method=self.name, status="partial" if cut else "heuristic",
                                solve_seconds=time.perf_counter() - t0, message=_RECLAIM_CUT if cut else "")


def _model_note(sol: Solution) -> str:
    """What a Lyra kind's decision says of its model (encoding and size)."""
    return f"{sol.size.encoding}: variables={sol.size.variables} constraints={sol.size.constraints}"


@dataclass(frozen=True)
class ReclaimContext:
    """A reclaim round as the driver keeps it: the index structures and the number of servers to return."""

    view: ReclaimView
    count: int


@dataclass(frozen=True)
class ReclaimExact(ExactKind[LyraReclaimRound, ReclaimContext, Sequence[int]]):
    """The exact selection warm-started by Lyra's heuristic, for the driver (module docstring)."""

    problem_type: ClassVar[type[RoundProblem]] = LyraReclaimRound
    formulation: ClassVar[str] = "optsched.formulations.lyra_reclaim"
    answer_key: ClassVar[str] = "servers"

    def deadline(self, time_limit: float, clock_start: float | None, problem: LyraReclaimRound) -> Deadline:
        return Deadline.since(time_limit, clock_start).earlier(RECLAIM_FINISH_S_PER_JOB * len(problem.jobs))

    def prepare(self, problem: LyraReclaimRound, deadline: Deadline) -> ReclaimContext:
        return ReclaimContext(ReclaimView(problem), problem.reclaim)

    def warm_start(self, ctx: ReclaimContext, deadline: Deadline) -> WarmStart[Sequence[int]]:
        hint, cut = lyra_reclaim_within(ctx.view, ctx.count, deadline)
        return WarmStart(hint, float(ctx.view.kept(ctx.view.outcome(hint))), complete=not cut,
                         message=_RECLAIM_CUT if cut else "")

    def solve(self, ctx: ReclaimContext, warm: WarmStart[Sequence[int]] | None, *, time_limit: float, seed: int,
              workers: int, backend: str, cold: bool = False,
              trace: list[tuple[float, float, float]] | None = None) -> Solution:
        from optsched.formulations import lyra_reclaim as reclaim_model  # OR-Tools on use (issue 26, item 4)

        return reclaim_model.solve(ctx.view, ctx.count, time_limit=time_limit, seed=seed, workers=workers,
                                   hint=hint_of(warm, cold))

    def describe(self, sol: Solution) -> str:
        return _model_note(sol)

    def assemble(self, ctx: ReclaimContext, warm: WarmStart[Sequence[int]] | None, answer: Sequence[int],
                 outcome: Outcome, method: str) -> Decision:
        return reclaim_decision(ctx.view, answer, method=method, status=outcome.status,
                                solve_seconds=outcome.solve_seconds, bound=outcome.bound,
                                heuristic_objective=outcome.heuristic_objective, warm_start=outcome.warm_start,
                                message=outcome.message)


def _reclaim_heuristic(name: str, choose: ReclaimWithin) -> Callable[[PolicyOptions], ReclaimHeuristicPolicy]:
    return lambda o: ReclaimHeuristicPolicy(name, choose, o.seed, o.time_limit, o.clock_start)


def _whole(choose: ReclaimChooser) -> ReclaimWithin:
    """A reclaiming baseline that always finishes (random, SCF: one draw or one sort) as a :data:`ReclaimWithin`."""
    return lambda v, k, rng, _deadline: (choose(v, k, rng), False)


register_exact("lyra-reclaim", lambda o: ReclaimExact())
_LYRA_RECLAIM = "Lyra's reclaiming heuristic: cheapest server by server fractions, flexible group first (Sec. 3.4)"
for _name, _build, _summary in (
        ("lyra", _reclaim_heuristic("lyra", lambda v, k, _rng, d: lyra_reclaim_within(v, k, d)), _LYRA_RECLAIM),
        ("heuristic", _reclaim_heuristic("heuristic", lambda v, k, _rng, d: lyra_reclaim_within(v, k, d)),
         _LYRA_RECLAIM + " (alias of lyra)"),
        ("random", _reclaim_heuristic("random", _whole(random_reclaim)),
         "random on-loan servers (baseline, Sec. 3.7.1)"),
        ("scf", _reclaim_heuristic("scf", _whole(lambda v, k, _rng: scf_reclaim(v, k))),
         "smallest job count first (baseline, Sec. 3.7.1)"),
        ("exact", exact_method("exact", lambda o: ReclaimExact()),
         "CP-SAT: the servers preempting the fewest jobs, warm-started by lyra; never worse than it")):
    register_method("lyra-reclaim", _name, _build, _summary)


# -- lyra-allocate --------------------------------------------------------------------------------------
def _weaker(a: str, b: str) -> str:
    """The weaker of two statuses of an exact method (optimal, feasible, heuristic-fallback): the
    status of a plan made of both answers."""
    order = ("optimal", "feasible", "heuristic-fallback")
    return max(a, b, key=order.index)


#: seconds per knapsack item the CP-SAT model of a pool takes to build (kept back from the solver's time)
MCKP_BUILD_S_PER_ITEM = 2e-5
#: seconds per job the exact reclaim keeps for its decision (the outcome, the payload) after the solver
RECLAIM_FINISH_S_PER_JOB = 1e-5

#: how phase two is solved: none, Lyra's dynamic program, CP-SAT warm-started by it, AFS-like, Gandiva-like
SCALERS = ("none", "dp", "exact", "afs", "gandiva")


@dataclass(frozen=True)
class AllocationPlan:
    """Base workers, pools and flexible workers of every job that runs, with the phase-two objective
    (seconds of JCT reduction), the solver status and bound, and the heuristic's objective: the dynamic
    program's when a solver was warm-started by it, else the plan's own (the rule of
    :mod:`optsched.core.decision`)."""

    first: PhaseOne
    extra: dict[str, int]
    objective: float
    status: str
    bound: float | None = None
    heuristic_objective: float | None = None
    message: str = ""
    #: the flexible workers the heuristic (the dynamic program) gave, when a solver was warm-started by it
    heuristic_extra: dict[str, int] | None = None


@dataclass(frozen=True)
class Allocator:
    """Phase one in ``order`` (``blocking``, ``whole_request``: the Baseline) and phase two by ``scaler``
    (:data:`SCALERS`), within ``time_limit`` (module docstring); on the running times ``predictor``
    believes when given (thesis Sec. 3.5.2, Table 3.9: :mod:`optsched.rounds.lyra.prediction`), else on
    the round's own (the oracle's)."""

    order: str = "sjf"
    scaler: str = "dp"
    blocking: bool = False
    whole_request: bool = False
    time_limit: float = DEFAULT_TIME_LIMIT
    seed: int = 0
    workers: int = 1
    predictor: RuntimePredictor | None = None

    def plan(self, problem: LyraRound, deadline: Deadline | None = None) -> AllocationPlan:
        if self.scaler not in SCALERS:
            raise ValidationError(f"unknown scaler {self.scaler!r}; known: {', '.join(SCALERS)}")
        deadline = deadline or Deadline(self.time_limit)
        first = phase_one(problem, self.order, self.blocking, self.whole_request, self.predictor)
        extra: dict[str, int] = {}
        dp_extra: dict[str, int] = {}
        total = dp_total = 0.0
        bound: float | None = 0.0 if self.scaler == "exact" else None
        status = "optimal" if self.scaler == "exact" else "heuristic"   # no items: nothing to scale
        notes: list[str] = []
        cut: list[str] = []
        pools: list[tuple[str, Items | None]] = []
        for pool in (TRAINING, INFERENCE) if self.scaler != "none" else ():
            if first.left[pool] <= 0:   # no GPU to hand out: every scaler adds nothing (no item weighs 0)
                if self.scaler == "exact":
                    pools.append((pool, None))
                continue
            items = flexible_items(problem, {j: first.base[j] for j in first.elastic_in(problem, pool)}, self.predictor)
            if items.size:
                pools.append((pool, items))
        solved = [pool for pool, items in pools if items is not None]
        for pool, items in pools:
            if items is None:
                notes.append(f"{pool}: no GPUs left to scale with")
                continue
            n = solved.index(pool)
            cap = first.left[pool]
            if self.scaler == "afs":
                got, value = mckp_greedy(items, cap)
            elif self.scaler == "gandiva":
                got, value = gandiva_scale(problem, first, items, cap)
            else:
                answer = mckp_dp(items, cap, deadline)   # exact too: the solver gets what it leaves
                if answer is None:   # the time limit cut the program short: the greedy's answer, said so
                    answer = mckp_greedy(items, cap)
                    cut.append(f"{pool} ({items.size} items, {cap} GPUs)")
                got, value = answer
            dp_total += value
            dp_extra.update(got)
            build = MCKP_BUILD_S_PER_ITEM * items.size   # the model is built before the solver's clock runs
            if self.scaler == "exact" and deadline.expired(reserve=MIN_SOLVER_SECONDS + build):
                notes.append(f"{pool}: no time left for the solver within {self.time_limit:g} s")
                status, bound = _weaker(status, "heuristic-fallback"), None
            elif self.scaler == "exact":
                from optsched.formulations import lyra_mckp  # OR-Tools on use, before the time left is measured

                share = (deadline.remaining() - build) / (len(solved) - n)   # the pools left share the time left
                sol = lyra_mckp.solve(items, cap, time_limit=max(share, MIN_SOLVER_SECONDS),
                                      seed=self.seed, workers=self.workers, hint=got)
                notes.append(f"{pool}: {sol.size.variables} items")
                if sol.objective is not None and not_worse(sol.objective, value):
                    got, value = sol.payload["extra"], sol.objective
                    status = _weaker(status, "optimal" if sol.status == "optimal" else "feasible")
                else:
                    status = _weaker(status, "heuristic-fallback")
                bound = None if sol.bound is None or bound is None else bound + max(sol.bound, value)
            extra.update(got)
            total += value
        exact = self.scaler == "exact"
        if cut:   # a knapsack the dynamic program did not finish: the method was cut short (module docstring)
            notes.insert(0, f"partial: the knapsack's dynamic program of {', '.join(cut)} did not finish within "
                            f"the time limit of {self.time_limit:g} s; that pool's flexible workers are the "
                            "AFS-like greedy's")
            if status in ("heuristic", "heuristic-fallback"):
                status = "partial"
        return AllocationPlan(first, extra, total, status, bound, dp_total if exact else total, "; ".join(notes),
                              dp_extra if exact else None)


@dataclass(frozen=True)
class PolluxAllocator:
    """The Pollux-like allocation (thesis Sec. 3.7.1, 3.7.4; :mod:`optsched.heuristics.lyra_pollux`): the genetic
    algorithm's workers and pools as an :class:`AllocationPlan` (base workers: a queued job's base demand, a
    running job's start, :func:`~optsched.heuristics.lyra_allocate.running_base`; the rest flexible), for
    :class:`LyraSimPolicy` to place. ``generations`` (250, the thesis'), ``noise_ratio`` (ours), seeded by
    ``seed``, within ``time_limit``: generations stop when the deadline expires (status ``partial``, said in
    the note). The plan's objective is the kind's, the JCT reduction of the flexible workers
    (:func:`~optsched.rounds.lyra_allocate.items.placed_value`, on ``predictor``'s running times when given);
    the GA's fitness is in the note. Pollux reads no running time, so ``predictor`` changes only that value."""

    time_limit: float = DEFAULT_TIME_LIMIT
    seed: int = 0
    workers: int = 1
    predictor: RuntimePredictor | None = None
    generations: int = GENERATIONS
    noise_ratio: float = NOISE_RATIO
    #: what :class:`LyraSimPolicy` asks of an allocator (no solver: never ``exact``)
    scaler: ClassVar[str] = "pollux"

    def plan(self, problem: LyraRound, deadline: Deadline | None = None) -> AllocationPlan:
        deadline = deadline or Deadline(self.time_limit)
        res = pollux_allocate(problem, seed=self.seed, generations=self.generations, noise_ratio=self.noise_ratio,
                              deadline=deadline)
        first = PhaseOne()
        extra: dict[str, int] = {}
        for j in problem.jobs:
            w = res.workers.get(j.name, 0)
            if w <= 0:
                first.waiting.append(j.name)
                continue
            start = running_base(problem, j) if problem.current(j.name) is not None else base_workers(j)
            first.base[j.name], first.pool[j.name] = min(start, w), res.pool[j.name]
            extra[j.name] = w - first.base[j.name]
        value = placed_value(problem, {j: first.base[j] for j, k in extra.items() if k > 0},
                             {j: first.base[j] + k for j, k in extra.items()}, self.predictor)
        note = (f"pollux GA: {res.generations} of {self.generations} generations, fitness {res.fitness:.6g} "
                f"(initial population's best {res.initial_fitness:.6g})")
        if res.cut:
            note = (f"partial: the time limit of {self.time_limit:g} s stopped the genetic algorithm after "
                    f"{res.generations} of {self.generations} generations; " + note)
        return AllocationPlan(first, extra, value, "partial" if res.cut else "heuristic", message=note)


#: seconds per job an allocation keeps for what follows its knapsacks (worker counts, the decision):
#: 2.5 us measured on 64,000 jobs (a 100,000-job generated round) on a loaded machine, doubled
ALLOCATE_FINISH_S_PER_JOB = 5e-6


@dataclass(frozen=True)
class AllocatePolicy:
    """A ``lyra-allocate`` method (module docstring)."""

    kind: ClassVar[str] = "lyra-allocate"

    name: str
    allocator: Allocator
    clock_start: float | None = None

    @collector_paused
    def decide(self, problem: RoundProblem) -> Decision:
        deadline = Deadline.since(self.allocator.time_limit, self.clock_start)
        p = round_of(problem, LyraAllocateRound, self.name)
        plan = self.allocator.plan(p, deadline.earlier(ALLOCATE_FINISH_S_PER_JOB * len(p.jobs)))
        return allocation_decision(p, counts(p, plan.first.base, plan.first.pool, plan.extra), plan.objective,
                                   method=self.name, status=plan.status, solve_seconds=deadline.elapsed(),
                                   bound=plan.bound, heuristic_objective=plan.heuristic_objective,
                                   warm_start=self.allocator.scaler == "exact", message=plan.message)


def _allocate(name: str, **fields: object) -> Callable[[PolicyOptions], AllocatePolicy]:
    return lambda o: AllocatePolicy(name, Allocator(time_limit=o.time_limit, seed=o.seed, workers=o.workers,
                                                    **fields), o.clock_start)  # type: ignore[arg-type]


_LYRA_ALLOCATE = "Lyra's two-phase allocation: SJF base demand, knapsack DP for flexible demand (Sec. 3.5.2)"
for _name, _build, _summary in (
        ("lyra", _allocate("lyra"), _LYRA_ALLOCATE),
        ("heuristic", _allocate("heuristic"), _LYRA_ALLOCATE + " (alias of lyra)"),
        ("exact", _allocate("exact", scaler="exact"), "SJF base demand, knapsack in CP-SAT warm-started by the DP"),
        ("afs", _allocate("afs", scaler="afs"), "SJF base demand, AFS-like greedy scaling (baseline, Sec. 3.7.1)"),
        ("gandiva", _allocate("gandiva", scaler="gandiva"),
         "SJF base demand, Gandiva-like scaling when no job waits (baseline, Sec. 3.7.1)"),
        ("sjf", _allocate("sjf", scaler="none"), "SJF base demand, no scaling (Lyra's loaning-only allocation)"),
        ("fifo", _allocate("fifo", order="fifo", whole_request=True, scaler="none"),
         "FIFO with requested GPUs, no scaling, skipping jobs that do not fit (the Baseline, Sec. 3.7.1)"),
        ("fifo-strict", _allocate("fifo-strict", order="fifo", blocking=True, whole_request=True, scaler="none"),
         "FIFO with requested GPUs, no scaling, the queue stops at the first job that does not fit")):
    register_method("lyra-allocate", _name, _build, _summary)


# -- placement ------------------------------------------------------------------------------------------
#: seconds per job a placement keeps for its decision (the rules' check, the objective): 5-7 us measured
#: on 32,655 jobs, with a margin
PLACE_FINISH_S_PER_JOB = 1.6e-5
#: seconds to build, hint and load the exact placement model per (job to place, server of a pool it may use):
#: 37-55 us measured on 16,000 and 66,720 pairs (generated rounds of 200 and 400 jobs); at 2,000 jobs (1.77
#: million pairs) the model took 130 s to build and load at a 1 s limit (issue 26)
PLACE_MODEL_S_PER_PAIR = 5e-5


def _cut_note(skipped: Sequence[str]) -> str:
    """The ``partial:`` note of a placement the time limit cut short (empty when it finished)."""
    if not skipped:
        return ""
    return (f"partial: the time limit cut the placement short; {len(skipped)} job(s) with workers to place were not "
            f"considered (running ones keep what they hold, queued ones wait; their workers are listed as unplaced), "
            f"first: {', '.join(skipped[:5])}")


@dataclass(frozen=True)
class PlacementPolicy:
    """Best-fit decreasing (``lyra``: with Lyra's preferences and groups) as a policy; status
    ``heuristic``, or ``partial`` when the time limit (from ``clock_start``, less
    :data:`PLACE_FINISH_S_PER_JOB` per job for the decision) cut it short (:func:`_cut_note`)."""

    kind: ClassVar[str] = "placement"

    name: str
    lyra: bool = True
    time_limit: float = DEFAULT_TIME_LIMIT
    clock_start: float | None = None

    @collector_paused
    def decide(self, problem: RoundProblem) -> Decision:
        deadline = Deadline.since(self.time_limit, self.clock_start)
        p = round_of(problem, PlacementRound, self.name)
        heur, skipped = placement_within(p, self.lyra, deadline.earlier(PLACE_FINISH_S_PER_JOB * len(p.jobs)))
        return placement_decision(p, heur, method=self.name, status="partial" if skipped else "heuristic",
                                  solve_seconds=deadline.elapsed(), message=_cut_note(skipped))


@dataclass(frozen=True)
class PlacementExact(ExactKind[PlacementRound, PlacementRound, WorkerPlacement]):
    """The CP-SAT packing under the round's rules (``groups``: also Lyra's base/flexible server groups, a
    restriction whose bound is not a bound of the round) warm-started by Lyra's best-fit decreasing, for
    the driver (module docstring)."""

    problem_type: ClassVar[type[RoundProblem]] = PlacementRound
    formulation: ClassVar[str] = "optsched.formulations.lyra_placement"
    answer_key: ClassVar[str] = "placement"

    groups: bool = False


    def deadline(self, time_limit: float, clock_start: float | None, problem: PlacementRound) -> Deadline:
        return Deadline.since(time_limit, clock_start).earlier(PLACE_FINISH_S_PER_JOB * len(problem.jobs))

    def warm_start(self, ctx: PlacementRound, deadline: Deadline) -> WarmStart[WorkerPlacement]:
        heur, skipped = placement_within(ctx, True, deadline)
        return WarmStart(heur, placement_objective(ctx, heur), complete=not skipped, message=_cut_note(skipped))

    def solve(self, ctx: PlacementRound, warm: WarmStart[WorkerPlacement] | None, *, time_limit: float, seed: int,
              workers: int, backend: str, cold: bool = False,
              trace: list[tuple[float, float, float]] | None = None) -> Solution:
        from optsched.formulations import lyra_placement  # OR-Tools on use (issue 26, item 4)

        return lyra_placement.solve(ctx, lyra=self.groups, time_limit=time_limit, seed=seed, workers=workers,
                                    hint=hint_of(warm, cold))

    def describe(self, sol: Solution) -> str:
        return _model_note(sol)

    def model_seconds(self, ctx: PlacementRound) -> float:
        """The model has two integers, a constraint and a hint per (job to place, server of a pool it may use)
        (:mod:`optsched.formulations.lyra_placement`): :data:`PLACE_MODEL_S_PER_PAIR` each."""
        servers = Counter(ctx.pool(n) for n in ctx.usable_nodes)
        pairs = sum(servers[pool] for name, _, _ in start_state(ctx).todo for pool in pools_of(ctx, name, self.groups))
        return PLACE_MODEL_S_PER_PAIR * pairs

    def assemble(self, ctx: PlacementRound, warm: WarmStart[WorkerPlacement] | None, answer: WorkerPlacement,
                 outcome: Outcome, method: str) -> Decision:
        return placement_decision(ctx, answer, method=method, status=outcome.status,
                                  solve_seconds=outcome.solve_seconds, bound=outcome.bound,
                                  heuristic_objective=outcome.heuristic_objective, warm_start=outcome.warm_start,
                                  message=outcome.message)


register_exact("placement", lambda o: PlacementExact())
_LYRA_PLACE = "best-fit decreasing, elastic jobs on inference servers, base/flexible groups (Sec. 3.5.3)"
for _name, _build, _summary in (
        ("lyra", lambda o: PlacementPolicy("lyra", True, o.time_limit, o.clock_start), _LYRA_PLACE),
        ("heuristic", lambda o: PlacementPolicy("heuristic", True, o.time_limit, o.clock_start),
         _LYRA_PLACE + " (alias of lyra)"),
        ("bfd", lambda o: PlacementPolicy("bfd", False, o.time_limit, o.clock_start),
         "naive best-fit decreasing (Table 3.6 ablation)"),
        ("exact", exact_method("exact", lambda o: PlacementExact()),
         "CP-SAT bin packing under the round's rules (fewest servers), warm-started by lyra; never worse than "
         "it or bfd")):
    register_method("placement", _name, _build, _summary)


# -- lyra (the simulator's round) -----------------------------------------------------------------------
_RECLAIMERS: dict[str, ReclaimChooser] = {
    "lyra": lambda v, k, _rng: lyra_reclaim(v, k), "random": random_reclaim,
    "scf": lambda v, k, _rng: scf_reclaim(v, k)}


#: seconds per job the ``lyra`` kind keeps for its decision after placing workers (the placement's
#: payload, the objective, per-job allocations: about 20 us per job measured on 15,466 jobs) and for the
#: placement after the allocation (about 30 us per job there), with a margin
SIM_FINISH_S_PER_JOB = 3e-5
SIM_PLACE_S_PER_JOB = 3e-5
_SKIPPED_REASON = "not considered: the time limit cut the placement short before this job (it waits)"
_HELD_REASON = "not considered: the time limit left no time to allocate and place workers this round (it waits)"


class LyraSimPolicy:
    """Allocation (``allocator``) and placement (Lyra's or naive best-fit decreasing) as per-job
    allocations, and the return of lent servers by ``reclaimer`` (``lyra``, ``random``, ``scf`` or
    ``exact``). It remembers which workers of each elastic job it placed as flexible (the simulator
    knows allocations only) and gives rounds that memory where it still matches the allocations."""

    kind: ClassVar[str] = "lyra"

    def __init__(self, name: str, allocator: Allocator, *, lyra_placement: bool = True, reclaimer: str = "lyra",
                 seed: int = 0, clock_start: float | None = None) -> None:
        if reclaimer not in (*_RECLAIMERS, "exact"):
            raise ValidationError(f"unknown reclaimer {reclaimer!r}; known: {', '.join((*_RECLAIMERS, 'exact'))}")
        self.name = name
        self.allocator = allocator
        self.lyra_placement = lyra_placement
        self.reclaimer = reclaimer
        self.rng = np.random.default_rng(seed)
        self.clock_start = clock_start
        self.flexible: dict[str, dict[str, int]] = {}

    def _remembered(self, p: LyraRound) -> LyraRound:
        """``p`` with the flexible workers this policy placed, for the running jobs the round itself
        names none for (a round from the simulator names none; one from a file may)."""
        entries = list(p.flexible)
        given = {job for job, _ in entries}
        for job, flex in sorted(self.flexible.items()):
            cur = p.current(job)
            if cur is None or job in given:
                continue
            j = p.job(job)
            held = {n: sh.gpus for n, sh in cur.placement.shares}
            if any(g > held.get(n, 0) or g % p.worker_gpus(j, n) for n, g in flex.items()):
                continue
            if sum(g // p.worker_gpus(j, n) for n, g in flex.items()) != p.workers_of(job) - base_workers(j):
                continue
            entries.append((job, tuple(sorted(flex.items()))))
        if len(entries) == len(p.flexible):   # nothing to add: the round as it is (checking it again is slow)
            return p
        return dataclasses.replace(p, flexible=tuple(sorted(entries)))

    @collector_paused
    def decide(self, problem: RoundProblem) -> Decision:
        deadline = Deadline.since(self.allocator.time_limit, self.clock_start)
        p = self._remembered(round_of(problem, LyraSimRound, self.name))
        place_by = deadline.earlier(SIM_FINISH_S_PER_JOB * len(p.jobs))   # the decision's per-job work after it
        plan_by = place_by.earlier(SIM_PLACE_S_PER_JOB * len(p.jobs))
        if plan_by.expired():
            return self._held(p, deadline)
        plan = self.allocator.plan(p, plan_by)
        wc = counts(p, plan.first.base, plan.first.pool, plan.extra)
        pr = PlacementRound.of_round(p, wc.counts)
        placed, skipped = placement_within(pr, self.lyra_placement, place_by)
        objective, status, bound, worth = self._placed(p, plan, placed)
        heuristic_objective = None
        if plan.heuristic_extra is not None:  # the warm start's decision, placed the same way, scored the same way
            same = {j: k for j, k in plan.heuristic_extra.items() if k} == {j: k for j, k in plan.extra.items() if k}
            hwc = counts(p, plan.first.base, plan.first.pool, plan.heuristic_extra)
            hp, hskipped = (placed, skipped) if same else placement_within(PlacementRound.of_round(p, hwc.counts),
                                                                           self.lyra_placement, place_by)
            heuristic_objective = self._placed(p, dataclasses.replace(plan, extra=plan.heuristic_extra), hp)[0]
            if not not_worse(objective, heuristic_objective):  # never below the warm start's placed value
                worth = join_notes(worth, f"the solver's allocation places {objective:.6g}, below the heuristic's "
                                          f"{heuristic_objective:.6g}: the heuristic's decision is returned")
                placed, wc, objective, status, skipped = hp, hwc, heuristic_objective, "heuristic-fallback", hskipped
        self.flexible = {pl.job: dict(pl.flexible) for pl in placed.placements if pl.flexible}
        out = []
        workers = wc.as_dict()
        unplaced_of = dict(placed.unplaced)
        for job in skipped:   # not considered: not "no room"
            unplaced_of.pop(job, None)
        cut = set(skipped)
        for j in p.jobs:
            pl = placed.of(j.name)
            cur = p.current(j.name)
            if pl is None:
                reason = (_SKIPPED_REASON if j.name in cut else _idle_reason(j.name, workers, unplaced_of, self.name))
                out.append(JobDecision(j.name, None, 0.0, 0.0, "wait" if cur is None else "preempt", reason=reason))
                continue
            gpus = pl.gpus_per_node()
            alloc = worker_allocation(j.name, gpus)
            rate = work_rate(j, sum(g // p.worker_gpus(j, n) for n, g in gpus.items()), p.scaling)
            requested = work_rate(j, max(base_workers(j), j.requested_gpus // j.gpus_per_worker), p.scaling)
            action = "start" if cur is None else ("keep" if cur == alloc else "reconfigure")
            out.append(JobDecision(j.name, cur if action == "keep" else alloc, rate, rate / requested, action))
        unplaced = f"{len(unplaced_of)} job(s) with workers left unplaced" if unplaced_of else ""
        exact = self.allocator.scaler == "exact"
        notes = [m for m in (plan.message, unplaced, worth) if m]
        if skipped:   # the limit cut the placement short: the decision is partial, whatever the knapsack was
            status = "partial"
            notes.insert(0, _cut_note(skipped))
        elif status == "partial":   # the allocation's note comes first
            notes.sort(key=lambda m: not m.startswith("partial:"))
        return Decision(self.kind, self.name, status, objective, JobAllocations(tuple(out)),
                        bound=bound, gap=relative_gap(bound, objective),
                        solve_seconds=deadline.elapsed(),
                        heuristic_objective=heuristic_objective if exact else objective,
                        warm_start=exact, message="; ".join(notes))

    def _held(self, p: LyraRound, deadline: Deadline) -> Decision:
        """The decision of a round whose time limit leaves no time to allocate and place (what the allocation and
        the placement keep for their per-job work, :data:`SIM_PLACE_S_PER_JOB` and :data:`SIM_FINISH_S_PER_JOB`,
        is more than the limit has left when the call starts: a 100,000-job round at ``--time-limit 1``, issue 26):
        every running job keeps what it holds (Lyra never preempts for scheduling; its flexible workers stay), every
        queued job waits, not considered, status ``partial``. The objective is what the flexible workers held are
        worth (:func:`~optsched.rounds.lyra_allocate.items.placed_value`, phase one's start for running jobs:
        :func:`~optsched.heuristics.lyra_allocate.running_base`); no bound; O(jobs) at about 5 us a job."""
        out = []
        base: dict[str, int] = {}
        held: dict[str, int] = {}
        for j in p.jobs:
            cur = p.current(j.name)
            if cur is None:
                out.append(JobDecision.assembled(j.name, None, 0.0, 0.0, "wait", reason=_HELD_REASON))
                continue
            workers = held[j.name] = p.workers_of(j.name)
            start = running_base(p, j)
            if start < workers:
                base[j.name] = start
            rate = work_rate(j, workers, p.scaling)
            requested = work_rate(j, max(base_workers(j), j.requested_gpus // j.gpus_per_worker), p.scaling)
            out.append(JobDecision.assembled(j.name, cur, rate, rate / requested, "keep"))
        self.flexible = {job: dict(flex) for job, flex in p.flexible if p.current(job) is not None}
        objective = placed_value(p, base, held, self.allocator.predictor)
        queued = len(p.jobs) - len(held)
        note = (f"partial: the time limit of {self.allocator.time_limit:g} s left no time to allocate and place the "
                f"workers of {len(p.jobs)} jobs; the {len(held)} running job(s) keep what they hold and the {queued} "
                f"queued job(s) wait")
        exact = self.allocator.scaler == "exact"
        return Decision(self.kind, self.name, "partial", objective, JobAllocations(tuple(out)),
                        solve_seconds=deadline.elapsed(), heuristic_objective=None if exact else objective,
                        message=note)

    def _placed(self, p: LyraRound, plan: AllocationPlan,
                placed: WorkerPlacement) -> tuple[float, str, float | None, str]:
        """The decision's objective, status, bound and note (module docstring of the kind in docs/rounds.md):
        the value of the flexible workers placed (:func:`~optsched.rounds.lyra_allocate.items.placed_value`);
        the knapsack's bound still bounds it (what is placed is part of what was allocated); ``optimal``
        only when it is the knapsack's optimum within the tolerance (:func:`not_worse`), else ``feasible``."""
        held = {pl.job: sum(g // p.worker_gpus(p.job(pl.job), n) for n, g in pl.gpus_per_node().items())
                for pl in placed.placements}
        value = placed_value(p, {j: plan.first.base[j] for j, k in plan.extra.items() if k > 0}, held,
                             self.allocator.predictor)
        bound = None if plan.bound is None else max(plan.bound, value)
        if not_worse(value, plan.objective):
            return value, plan.status, bound, ""
        status = "feasible" if plan.status == "optimal" else plan.status
        return value, status, bound, (f"objective: the flexible workers placed are worth {value:.6g} of the "
                                      f"allocation's knapsack value {plan.objective:.6g}")

    def return_servers(self, problem: RoundProblem, candidates: tuple[str, ...], count: int) -> ServerReturn:
        p = self._remembered(round_of(problem, LyraSimRound, self.name))
        rr = LyraReclaimRound(cluster=p.cluster, jobs=p.jobs, running=p.running, occupied=p.occupied, time=p.time,
                              inference_nodes=p.inference_nodes, inference_factor=p.inference_factor,
                              scaling=p.scaling, flexible=p.flexible, opportunistic=p.opportunistic, reclaim=count)
        if set(rr.on_loan) != set(candidates):
            raise ValidationError(f"policy {self.name!r}: the lent servers {sorted(candidates)[:5]} are not the round's "
                                  f"on-loan servers {list(rr.on_loan)[:5]}")
        if self.reclaimer == "exact":
            d = ExactPolicy(ReclaimExact(), "exact", self.allocator.time_limit, workers=self.allocator.workers).decide(rr)
            view = ReclaimView(rr)
            outcome = view.outcome([view.server_index[s] for s in d.payload.servers])
        else:
            view = ReclaimView(rr)
            outcome = view.outcome(_RECLAIMERS[self.reclaimer](view, count, self.rng))
        returned = set(outcome.servers)
        shrink = []
        for job, _ in outcome.scaled_in:
            cur = rr.current(job)
            assert cur is not None
            flex = self.flexible.get(job, {})
            left = {n: sh.gpus - (flex.get(n, 0) if n in returned else 0) for n, sh in cur.placement.shares}
            shrink.append(worker_allocation(job, left))
            self.flexible[job] = {n: g for n, g in flex.items() if n not in returned}
        for job in outcome.preempted:
            self.flexible.pop(job, None)
        return ServerReturn(outcome.servers, outcome.preempted, tuple(shrink))


def _idle_reason(job: str, workers: Mapping[str, WorkerCount], unplaced: Mapping[str, int], method: str) -> str:
    """Why ``job`` gets nothing in a Lyra decision: the allocator gave it no workers, or the placement found
    no room for the workers it was given."""
    if job in unplaced:
        return (f"no room: its {unplaced[job]} worker(s) fit no free node this round (the placement of {method} "
                "left them unplaced)")
    count = workers.get(job)
    if count is None or count.workers == 0:
        return f"no room: {method} allocated it no workers this round (the free GPUs went to other jobs)"
    return f"no room: {method} placed none of its {count.workers} worker(s) this round"


def _predictor(o: PolicyOptions) -> RuntimePredictor | None:
    """The running-time predictor of the options (extra ``runtime_predictor``; None: the round's own running
    times, the oracle's)."""
    pred = o.extra(PREDICTOR_OPTION)
    if pred is not None and not isinstance(pred, RuntimePredictor):
        raise ValidationError(f"policy option {PREDICTOR_OPTION!r} must be a RuntimePredictor, got {type(pred).__name__}")
    return pred


def _sim(name: str, reclaimer: str = "lyra", lyra_placement: bool = True,
         **fields: object) -> Callable[[PolicyOptions], LyraSimPolicy]:
    return lambda o: LyraSimPolicy(name, Allocator(time_limit=o.time_limit, seed=o.seed, workers=o.workers,
                                                   predictor=_predictor(o), **fields),  # type: ignore[arg-type]
                                   lyra_placement=lyra_placement, reclaimer=reclaimer, seed=o.seed,
                                   clock_start=o.clock_start)


for _name, _build, _summary in (
        ("lyra", _sim("lyra"), "Lyra: loaning and scaling (SJF + knapsack DP, Lyra placement and reclaiming)"),
        ("heuristic", _sim("heuristic"), "Lyra: loaning and scaling (alias of lyra)"),
        ("lyra-exact", _sim("lyra-exact", reclaimer="exact", scaler="exact"),
         "Lyra with the knapsack in CP-SAT and exact reclaiming"),
        ("exact", _sim("exact", reclaimer="exact", scaler="exact"),
         "Lyra with the knapsack in CP-SAT and exact reclaiming (alias of lyra-exact; the default of optsched solve)"),
        ("lyra-loan", _sim("lyra-loan", scaler="none"), "Lyra, loaning only (no scaling)"),
        ("random", _sim("random", reclaimer="random", scaler="none"), "loaning only, random reclaiming (baseline)"),
        ("scf", _sim("scf", reclaimer="scf", scaler="none"), "loaning only, SCF reclaiming (baseline)"),
        ("afs", _sim("afs", scaler="afs"), "SJF base demand, AFS-like scaling (baseline)"),
        ("gandiva", _sim("gandiva", scaler="gandiva"), "SJF base demand, Gandiva-like scaling (baseline)"),
        ("bfd", _sim("bfd", lyra_placement=False), "Lyra with naive best-fit decreasing placement (Table 3.6)"),
        ("opportunistic", _sim("opportunistic", scaler="none"),
         "no loaning: fungible jobs on idle inference GPUs at lower priority (baseline; run with opportunistic=True)"),
        ("pollux", lambda o: LyraSimPolicy("pollux", PolluxAllocator(  # type: ignore[arg-type]
            time_limit=o.time_limit, seed=o.seed, workers=o.workers, predictor=_predictor(o)),
            lyra_placement=False, seed=o.seed, clock_start=o.clock_start),
         "Pollux-like: goodput-driven genetic algorithm (250 generations) over workers per job, naive placement "
         "(baseline, Sec. 3.7.1)"),
        ("fifo", _sim("fifo", lyra_placement=False, order="fifo", whole_request=True, scaler="none"),
         "the Baseline: FIFO (skipping jobs that do not fit), requested GPUs, no scaling"),
        ("fifo-strict", _sim("fifo-strict", lyra_placement=False, order="fifo", blocking=True, whole_request=True,
                             scaler="none"), "FIFO whose queue stops at the first job that does not fit")):
    register_method("lyra", _name, _build, _summary, (PREDICTOR_OPTION,))


__all__ = ["AllocatePolicy", "LyraSimPolicy", "AllocationPlan", "Allocator", "PlacementExact", "PolluxAllocator",
           "ReclaimContext", "ReclaimExact", "ReclaimHeuristicPolicy", "PlacementPolicy", "SCALERS"]

"""The one exact-with-fallback driver (DESIGN.md, "One driver"): every kind's ``exact`` method is this
driver over a contract the kind registers (:class:`ExactKind`).

What the driver does, for every kind, within one time limit counted from ``clock_start`` (or the call):

1. ``prepare``: the kind's round context (coefficient table, admission, index structures);
2. ``warm_start``: the kind's heuristic (:class:`WarmStart`: its answer, objective, the solver's hint,
   whether it finished, the notes it carries). A heuristic that raises ``InfeasibleError`` leaves the
   solver without a warm start (and the driver without a fallback). A kind whose warm start does not pay
   on a round (:meth:`ExactKind.warm_start_first` False: it sets no rule of the model, and the model
   proves such rounds optimal as fast without its hint) has its heuristic run *after* the solver, and
   only when the solver's answer is not proven optimal: the solver gets the limit less
   :meth:`ExactKind.warm_start_seconds` (kept for the heuristic), and an optimal answer is returned
   without running the heuristic (an optimum is never worse than a warm start the model covers); when
   too little time is left for both, the solver gets it all and the heuristic runs after it only when
   the solver found no answer (also when :meth:`ExactKind.warm_start_after` says it would not help);
3. when the warm start was cut short (``complete=False``) its answer is returned with status
   ``partial``; when less than :data:`~optsched.formulations.solution.MIN_SOLVER_SECONDS` is left, with
   status ``heuristic-fallback`` and the note ``no time left for the solver within T s``;
4. ``solve``: the kind's exact model, warm-started by the hint, with what is left of the limit;
5. the solver's answer is returned when it is at least as good as the warm start's by the round
   objective (:func:`not_worse`, the one tolerance), or when the warm start breaks a rule of the round
   (``violations``); otherwise the warm start's answer, status ``heuristic-fallback``, with the solver's
   bound. A warm start that breaks a rule is never returned after a solve: the driver raises
   ``InfeasibleError`` naming the rules instead. With neither an answer nor a warm start the driver
   raises ``InfeasibleError`` with what the heuristic reported.

Decisions maximise (a kind that minimises a cost reports ``objective = -cost``), so one comparison
serves every kind. Status and bound: the solver's status and bound describe the decision only when
its answer is returned; a fallback carries the solver's bound (still a bound of the round) and status
``heuristic-fallback``. A bound is never below the returned decision's objective
(:func:`bounded`, the same tolerance): one below it within :data:`TOLERANCE` is float noise and reported
as the objective (gap 0); one below it by more does not bound the decision (the decision lies outside
the model's space), so the decision has no bound and gap, ``optimal`` becomes ``feasible``, and the
message says why. A kind whose model restricts the round's rules states the restriction itself (its
bound is a bound of the round only when the model covers every decision the round's rules allow).

A kind registers a factory ``PolicyOptions -> ExactKind`` with :func:`register_exact`; its ``exact``
methods are :class:`ExactPolicy` over it, and the gap studies (:mod:`optsched.experiments.gap`) probe the
same contract.
"""

from __future__ import annotations

import importlib
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field, replace
from typing import Any, Callable, ClassVar, Generic, TypeVar, cast

from optsched.core.deadline import Deadline
from optsched.core.decision import Decision
from optsched.core.errors import InfeasibleError, ValidationError
from optsched.core.kinds import round_kind
from optsched.core.phases import phase
from optsched.core.round import RoundProblem
from optsched.formulations.solution import MIN_SOLVER_SECONDS, Solution
from optsched.policies.checks import round_of
from optsched.policies.notes import join_notes
from optsched.policies.options import AUTO_BACKEND, DEFAULT_TIME_LIMIT, PolicyOptions

#: relative tolerance of every comparison of two objectives (absolute below 1): float sums of the same
#: decision computed in two orders differ by far less, a real improvement by far more
TOLERANCE = 1e-9

P = TypeVar("P", bound=RoundProblem)  # the kind's problem class
C = TypeVar("C")                       # the kind's prepared context (table, admission, ...)
A = TypeVar("A")                       # what a decision of the kind is assembled from (choices, a plan, ...)


def not_worse(candidate: float, reference: float) -> bool:
    """Whether ``candidate`` is at least ``reference`` (maximised objectives) within :data:`TOLERANCE`,
    relative to ``|reference|`` when that is above 1, absolute below."""
    return candidate >= reference - TOLERANCE * max(1.0, abs(reference))


def bounded(decision: Decision) -> Decision:
    """``decision`` with a bound that bounds its objective (module docstring, "Status and bound")."""
    b, obj = decision.bound, decision.objective
    if b is None or obj is None or b >= obj:
        return decision
    if not_worse(b, obj):
        return replace(decision, bound=obj, gap=0.0)
    note = (f"the solver's bound ({b:.6g}) is below this decision's objective ({obj:.6g}): the decision is outside "
            f"the model's space, so no bound is reported")
    status = "feasible" if decision.status == "optimal" else decision.status
    return replace(decision, bound=None, gap=None, status=status, message=join_notes(decision.message, note))


@dataclass(frozen=True)
class WarmStart(Generic[A]):
    """A kind's heuristic answer as the driver uses it: ``answer`` (the fallback, assembled by the
    kind), its round ``objective`` (maximised), the ``hint`` the model is warm-started with (None: the
    answer itself), whether the heuristic finished (``complete``), a ``message`` every decision made
    from it or from the model it warm-started carries, and ``info`` the kind keeps with it (e.g. the
    admission it satisfies)."""

    answer: A
    objective: float
    hint: Any = None
    complete: bool = True
    message: str = ""
    info: Any = None

    @property
    def solver_hint(self) -> Any:
        return self.answer if self.hint is None else self.hint


def hint_of(warm: WarmStart[Any] | None, cold: bool = False) -> Any:
    """The solver's warm start from ``warm`` (None when there is none or the solve is ``cold``)."""
    return None if warm is None or cold else warm.solver_hint


@dataclass(frozen=True)
class Outcome:
    """The top-level fields of a decision the driver decides: ``status``, ``bound``, ``solve_seconds``,
    the warm start's objective (``heuristic_objective``), whether the solver had a warm start, and the
    ``message``. A kind's :meth:`ExactKind.assemble` puts them into its decision."""

    status: str
    solve_seconds: float
    heuristic_objective: float | None
    message: str = ""
    bound: float | None = None
    warm_start: bool = False

    @property
    def cost_bound(self) -> float | None:
        """``bound`` as a lower bound on the cost of a kind that minimises one (objective = -cost); None stays None."""
        return None if self.bound is None else -self.bound

    @property
    def heuristic_cost(self) -> float | None:
        """``heuristic_objective`` as that kind's cost; None stays None."""
        return None if self.heuristic_objective is None else -self.heuristic_objective


class ExactKind(ABC, Generic[P, C, A]):
    """What a kind registers for the driver (module docstring). One instance serves one policy (it may
    hold the policy's caches and options). ``problem_type`` is the kind's problem class, ``answer_key``
    the payload key of the model's answer."""

    problem_type: ClassVar[type[RoundProblem]]
    #: where the model's :class:`~optsched.formulations.solution.Solution` keeps its answer
    answer_key: ClassVar[str] = "choices"
    #: the module of the kind's model, imported by the driver when a solver runs, before the solver's share of
    #: the limit is measured (OR-Tools, and pulp and SciPy for the MILP back ends: 0.3-0.6 s on first use)
    formulation: ClassVar[str] = "optsched.formulations.cpsat"

    @property
    def kind(self) -> str:
        return self.problem_type.KIND

    def deadline(self, time_limit: float, clock_start: float | None, problem: P) -> Deadline:
        """The deadline of preparation, heuristic and solver (default: the whole limit; a kind may keep
        time back for assembling a large decision)."""
        return Deadline.since(time_limit, clock_start)

    def prepare(self, problem: P, deadline: Deadline) -> C:
        """The round's context: coefficient table, admission, index structures. By default the round itself (the
        kinds whose methods need nothing built first: ``experts``, ``moe-comm``, ``training-packing``, Lyra's)."""
        return problem  # type: ignore[return-value]

    @abstractmethod
    def warm_start(self, ctx: C, deadline: Deadline) -> WarmStart[A]:
        """The heuristic's answer (may raise ``InfeasibleError``: then no warm start)."""

    @abstractmethod
    def solve(self, ctx: C, warm: WarmStart[A] | None, *, time_limit: float, seed: int, workers: int,
              backend: str, cold: bool = False, trace: list[tuple[float, float, float]] | None = None) -> Solution:
        """The exact model under the rules ``warm`` set (e.g. who is admitted), warm-started by its hint
        (:func:`hint_of`: none when ``warm`` is None or ``cold``), within ``time_limit`` seconds, in the
        decision's maximising frame; ``trace`` (where the model supports it) collects (seconds,
        objective, bound) at each solution found."""

    def answer(self, sol: Solution) -> A | None:
        """The solver's answer in the form :meth:`assemble` takes (None when it found none): by default
        ``sol.payload[answer_key]``."""
        return sol.payload.get(self.answer_key)

    @abstractmethod
    def assemble(self, ctx: C, warm: WarmStart[A] | None, answer: A, outcome: Outcome, method: str) -> Decision:
        """The decision of ``answer`` with the driver's ``outcome`` (top-level fields)."""

    def describe(self, sol: Solution) -> str:
        """What the decision's message says of the model (default: its size)."""
        return f"model variables={sol.size.variables} constraints={sol.size.constraints}"

    def violations(self, ctx: C, warm: WarmStart[A]) -> list[str]:
        """Rules of the round the warm start breaks (default none): it then never wins."""
        return []

    def infeasible(self, ctx: C, warm: WarmStart[A] | None) -> InfeasibleError | None:
        """What to raise when the model proves the round infeasible (default None: the driver goes on as
        if the solver had found nothing)."""
        return None

    def finish(self, problem: P, decision: Decision) -> Decision:
        """The decision as returned to the caller (default: unchanged; e.g. notes on predictions)."""
        return decision

    def explain(self, error: InfeasibleError) -> InfeasibleError:
        """An ``InfeasibleError`` as the caller sees it (default: unchanged; e.g. with the option that
        would avoid it)."""
        return error

    def lp_bound(self, ctx: C, warm: WarmStart[A] | None, time_limit: float) -> float | None:
        """An independent bound of the round, under the rules ``warm`` set, from the model's LP
        relaxation (gap studies; default None)."""
        return None

    def for_study(self) -> "ExactKind[P, C, A]":
        """This contract as gap studies use it: one whose heuristic never fails a round that has a
        feasible decision (default: itself; Rubick defers unreachable guarantees)."""
        return self

    def deferred(self, ctx: C, warm: WarmStart[A]) -> tuple[str, ...]:
        """The jobs whose rules ``warm`` dropped that the round states (default none; Rubick: the guaranteed
        jobs whose unreachable guarantee the :meth:`for_study` form deferred). A gap study reports them,
        since ``solve`` without deferral calls such a round infeasible."""
        return ()

    def warm_start_first(self, ctx: C) -> bool:
        """Whether the heuristic runs before the solver (its answer the hint and the fallback), or only after a
        solve that is not proven optimal (module docstring, step 2). Default True; a kind returns False only
        where its warm start sets no rule of the model and the model's space holds every heuristic answer."""
        return True

    def warm_start_after(self, ctx: C, sol: Solution) -> bool:
        """Whether the heuristic runs after the solver's answer ``sol`` (not proven optimal) when time was kept for
        it (default True; a kind may say its heuristic cannot improve on such an answer)."""
        return True

    def warm_start_seconds(self, ctx: C, time_left: float) -> float:
        """About how long the heuristic takes on ``ctx``, kept from the solver's share (of ``time_left`` seconds)
        when the heuristic runs after it (default 0)."""
        return 0.0

    def model_seconds(self, ctx: C) -> float:
        """About how long building the model of ``ctx``, hinting it and handing it to the solver take, in
        seconds (default 0: cheap next to the table and the heuristic). The driver starts no model it cannot
        build in the time left: a kind whose model grows faster than its round says so here."""
        return 0.0

    def size(self, problem: P) -> tuple[str, int]:
        """(name of the measure, size) of a round in gap studies (default: GPUs)."""
        return "GPUs", sum(n.num_gpus for n in problem.cluster.nodes)

    def round_of(self, problem: RoundProblem, method: str) -> P:
        """``problem`` as this kind's round (``ValidationError`` naming ``method`` otherwise)."""
        return cast(P, round_of(problem, self.problem_type, method))


@dataclass(frozen=True)
class ExactPolicy:
    """A kind's exact method: the driver (module docstring) over ``contract`` with the policy's limits.
    The time limit covers the whole :meth:`decide` call, counted from ``clock_start`` (a
    ``time.perf_counter()`` reading) or from the call."""

    contract: ExactKind[Any, Any, Any] = field(compare=False)
    name: str = "exact"
    time_limit: float = DEFAULT_TIME_LIMIT
    seed: int = 0
    workers: int = 1
    clock_start: float | None = None
    backend: str = "cpsat"

    @property
    def kind(self) -> str:
        return self.contract.kind

    def decide(self, problem: RoundProblem) -> Decision:
        c = self.contract
        p = c.round_of(problem, self.name)
        try:
            return bounded(c.finish(p, self._decide(p)))
        except InfeasibleError as e:
            raise c.explain(e) from None

    def _decide(self, problem: RoundProblem) -> Decision:
        c, t0, limit = self.contract, time.perf_counter(), self.time_limit
        deadline = c.deadline(limit, self.clock_start, problem)
        with phase("prepare"):
            ctx = c.prepare(problem, deadline)
        warm: WarmStart[Any] | None = None
        heuristic_error: InfeasibleError | None = None
        # the heuristic after the solver (module docstring, step 2), with its share of the limit kept when both fit
        # (no time for a solver at all, e.g. a cancelled call: the heuristic first, as for any kind)
        later = not c.warm_start_first(ctx) and not deadline.expired(reserve=MIN_SOLVER_SECONDS + c.model_seconds(ctx))
        reserve = c.warm_start_seconds(ctx, deadline.remaining()) if later else 0.0
        if deadline.expired(reserve=2 * MIN_SOLVER_SECONDS + reserve + c.model_seconds(ctx)):
            reserve = 0.0

        def run_warm_start() -> None:
            nonlocal warm, heuristic_error
            try:
                with phase("warm_start"):
                    warm = c.warm_start(ctx, deadline)
            except InfeasibleError as e:
                heuristic_error = e

        if not later:
            run_warm_start()

        def decision(answer: Any, status: str, message: str, **fields: Any) -> Decision:
            outcome = Outcome(status, time.perf_counter() - t0, None if warm is None else warm.objective, message,
                              **fields)
            with phase("assemble"):
                return c.assemble(ctx, warm, answer, outcome, self.name)

        build_s = c.model_seconds(ctx) if warm is not None and warm.complete else 0.0
        if warm is not None and (not warm.complete or deadline.expired(reserve=MIN_SOLVER_SECONDS + build_s)):
            note = "" if not warm.complete else (
                f"no time left for the solver within {limit:g} s" if not build_s else
                f"no time left within {limit:g} s to build the model (about {build_s:.2g} s) and solve it")
            return decision(warm.answer, "heuristic-fallback" if warm.complete else "partial",
                            join_notes(note, warm.message))
        # the model's module (OR-Tools, pandas with it, pulp) is imported when a solver runs, before its share of
        # the limit is measured (issue 26: a first exact solve in a process ran 1.2-1.3x its limit)
        with phase("import"):
            importlib.import_module(c.formulation)
        with phase("model"):
            sol = c.solve(ctx, warm, time_limit=max(deadline.remaining() - reserve, MIN_SOLVER_SECONDS), seed=self.seed,
                          workers=self.workers, backend=self.backend)
        note = join_notes(c.describe(sol), f"back ends {sol.payload['backends']}" if "backends" in sol.payload else "")
        if later:
            if sol.status == "optimal" and sol.objective is not None and c.answer(sol) is not None:
                return decision(c.answer(sol), "optimal", join_notes(note, "no warm start: the solver proved its "
                                                                         "answer optimal without one"),
                                bound=sol.bound, warm_start=False)
            if sol.objective is None or c.answer(sol) is None or (reserve > 0.0 and c.warm_start_after(ctx, sol)):
                run_warm_start()  # else no time was kept for it, or it would not help: the solver's answer stands
        broken = [] if warm is None else c.violations(ctx, warm)
        if sol.status == "infeasible":
            error = c.infeasible(ctx, warm)
            # a model's proof of infeasibility never outweighs a warm start that keeps every rule: that is
            # a gap in the model (a choice it cannot state), and the warm start is returned
            if error is not None and (warm is None or broken):
                raise error
            note = join_notes(note, "the model was proven infeasible although the warm start keeps every rule of "
                                    "the round (a choice the model does not state)")
        answer = c.answer(sol) if sol.objective is not None else None
        carried = "" if warm is None else warm.message
        if answer is not None and (warm is None or broken or not_worse(sol.objective, warm.objective)):
            return decision(answer, sol.status, join_notes(note, carried), bound=sol.bound, warm_start=sol.warm_start)
        if warm is None:
            assert heuristic_error is not None
            raise InfeasibleError(f"no feasible decision found within {limit:g} s; the heuristic reported: "
                                  f"{heuristic_error}", heuristic_error.reasons)
        why = ("the solver found no solution" if answer is None
               else f"the solver's best ({sol.objective:.6g}) is below the heuristic's")
        if broken:  # never a decision that breaks the round's rules
            raise InfeasibleError(f"{self.name}: {why} within {limit:g} s, and the heuristic's decision breaks the "
                                  f"round's rules: {'; '.join(broken[:5])}")
        return decision(warm.answer, "heuristic-fallback" if warm.complete else "partial",
                        join_notes(f"{note}; {why} within {limit:g} s", carried), bound=sol.bound,
                        warm_start=sol.warm_start)


ContractFactory = Callable[[PolicyOptions], ExactKind[Any, Any, Any]]

_CONTRACTS: dict[str, ContractFactory] = {}


def register_exact(kind: str, factory: ContractFactory) -> None:
    """Register the exact contract of ``kind`` (a registered kind; a second, different factory under
    the same kind is a ``ValidationError``)."""
    round_kind(kind)
    old = _CONTRACTS.get(kind)
    if old is not None and old is not factory:
        raise ValidationError(f"round kind {kind!r} already has an exact contract")
    _CONTRACTS[kind] = factory


def exact_kinds() -> tuple[str, ...]:
    """The kinds with an exact contract, sorted."""
    return tuple(sorted(_CONTRACTS))


def exact_contract(kind: str, options: PolicyOptions | None = None) -> ExactKind[Any, Any, Any]:
    """A fresh contract of ``kind`` built from ``options`` (``ValidationError`` when the kind has none); a
    ``backend`` of ``auto`` is the kind's ``exact`` method's default, as :func:`~optsched.policies.registry.
    make_policy` makes it."""
    from optsched.policies.registry import method

    factory = _CONTRACTS.get(kind)
    if factory is None:
        raise ValidationError(f"round kind {kind!r} has no exact contract (kinds with one: "
                              f"{', '.join(exact_kinds()) or 'none'})")
    options = options or PolicyOptions()
    if options.backend == AUTO_BACKEND:
        options = replace(options, backend=method(kind, "exact").default_backend)
    return factory(options)


def exact_method(name: str, factory: ContractFactory) -> Callable[[PolicyOptions], ExactPolicy]:
    """The registry factory of an exact method ``name`` over the contract ``factory``."""
    def build(o: PolicyOptions) -> ExactPolicy:
        return ExactPolicy(factory(o), name, o.time_limit, o.seed, o.workers, o.clock_start, o.backend)
    return build


__all__ = ["ContractFactory", "ExactKind", "ExactPolicy", "Outcome", "TOLERANCE", "WarmStart", "bounded",
           "exact_contract", "exact_kinds", "exact_method", "hint_of", "not_worse", "register_exact"]

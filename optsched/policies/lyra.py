"""The policies of the Lyra kinds (thesis chapter 3).

``lyra-reclaim`` (Sec. 3.4): ``lyra`` (alias ``heuristic``), the reclaiming heuristic; ``random`` and
``scf``, the baselines of Sec. 3.7.1; ``exact``, the CP-SAT selection
(:mod:`optsched.formulations.lyra_reclaim`) warm-started by the heuristic.

Every ``exact`` method follows one rule: the time limit covers the whole call (index structures,
heuristic, solver; counted from ``clock_start`` when given); the solver's answer is returned when it
is at least as good as the heuristic's by the round objective, else the heuristic's with status
``heuristic-fallback`` (also when no time is left for the solver), so an exact method is never worse
than its warm start.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, ClassVar, TypeVar

import numpy as np

from optsched.core.deadline import Deadline
from optsched.core.decision import Decision
from optsched.core.errors import ValidationError
from optsched.core.round import RoundProblem
from optsched.formulations import lyra_reclaim as reclaim_model
from optsched.formulations.solution import MIN_SOLVER_SECONDS
from optsched.heuristics.lyra_reclaim import lyra_reclaim, random_reclaim, scf_reclaim
from optsched.policies.options import DEFAULT_TIME_LIMIT, PolicyOptions
from optsched.policies.registry import register_method
from optsched.rounds.lyra_reclaim import LyraReclaimRound, ReclaimView, reclaim_decision

R = TypeVar("R", bound=RoundProblem)


def _round_of(problem: RoundProblem, cls: type[R], policy: str) -> R:
    if not isinstance(problem, cls):
        raise ValidationError(f"policy {policy!r} solves {cls.KIND} rounds, got a round of kind {problem.kind!r}")
    return problem


def _deadline(time_limit: float, clock_start: float | None) -> Deadline:
    return Deadline(time_limit) if clock_start is None else Deadline(time_limit, clock_start)


# -- lyra-reclaim ---------------------------------------------------------------------------------------
ReclaimChooser = Callable[[ReclaimView, int, np.random.Generator], list[int]]


@dataclass(frozen=True)
class ReclaimHeuristicPolicy:
    """A reclaiming heuristic or baseline (``choose``: view, count, rng -> server indices)."""

    kind: ClassVar[str] = "lyra-reclaim"

    name: str
    choose: ReclaimChooser
    seed: int = 0

    def decide(self, problem: RoundProblem) -> Decision:
        t0 = time.perf_counter()
        p = _round_of(problem, LyraReclaimRound, self.name)
        view = ReclaimView(p)
        picks = self.choose(view, p.reclaim, np.random.default_rng(self.seed))
        return reclaim_decision(view, picks, method=self.name, status="heuristic",
                                solve_seconds=time.perf_counter() - t0)


@dataclass(frozen=True)
class ReclaimExactPolicy:
    """The CP-SAT selection warm-started by Lyra's heuristic (module docstring)."""

    kind: ClassVar[str] = "lyra-reclaim"

    name: str = "exact"
    time_limit: float = DEFAULT_TIME_LIMIT
    seed: int = 0
    workers: int = 1
    clock_start: float | None = None

    def decide(self, problem: RoundProblem) -> Decision:
        deadline = _deadline(self.time_limit, self.clock_start)
        p = _round_of(problem, LyraReclaimRound, self.name)
        view = ReclaimView(p)
        hint = lyra_reclaim(view, p.reclaim)
        h_obj = float(view.kept(view.outcome(hint)))
        if deadline.expired(reserve=MIN_SOLVER_SECONDS):
            return reclaim_decision(view, hint, method=self.name, status="heuristic-fallback",
                                    solve_seconds=deadline.elapsed(), heuristic_objective=h_obj,
                                    message=f"no time left for the solver within {self.time_limit:g} s")
        sol = reclaim_model.solve(view, p.reclaim, time_limit=max(deadline.remaining(), MIN_SOLVER_SECONDS),
                                  seed=self.seed, workers=self.workers, hint=hint)
        note = f"{sol.size.encoding}; CP-SAT variables={sol.size.variables}"
        if sol.objective is not None and sol.objective >= h_obj:
            return reclaim_decision(view, sol.payload["servers"], method=self.name, status=sol.status,
                                    solve_seconds=deadline.elapsed(), bound=sol.bound, heuristic_objective=h_obj,
                                    warm_start=True, message=note)
        return reclaim_decision(view, hint, method=self.name, status="heuristic-fallback",
                                solve_seconds=deadline.elapsed(), bound=sol.bound, heuristic_objective=h_obj,
                                warm_start=True, message=f"{note}; the solver found nothing better within "
                                                         f"{self.time_limit:g} s")


def _reclaim_heuristic(name: str, choose: ReclaimChooser) -> Callable[[PolicyOptions], ReclaimHeuristicPolicy]:
    return lambda o: ReclaimHeuristicPolicy(name, choose, o.seed)


_LYRA_RECLAIM = "Lyra's reclaiming heuristic: cheapest server by server fractions, flexible group first (Sec. 3.4)"
for _name, _build, _summary in (
        ("lyra", _reclaim_heuristic("lyra", lambda v, k, _rng: lyra_reclaim(v, k)), _LYRA_RECLAIM),
        ("heuristic", _reclaim_heuristic("heuristic", lambda v, k, _rng: lyra_reclaim(v, k)),
         _LYRA_RECLAIM + " (alias of lyra)"),
        ("random", _reclaim_heuristic("random", random_reclaim), "random on-loan servers (baseline, Sec. 3.7.1)"),
        ("scf", _reclaim_heuristic("scf", lambda v, k, _rng: scf_reclaim(v, k)),
         "smallest job count first (baseline, Sec. 3.7.1)"),
        ("exact", lambda o: ReclaimExactPolicy("exact", o.time_limit, o.seed, o.workers, o.clock_start),
         "CP-SAT: the servers preempting the fewest jobs, warm-started by lyra; never worse than it")):
    register_method("lyra-reclaim", _name, _build, _summary)


__all__ = ["ReclaimExactPolicy", "ReclaimHeuristicPolicy"]

"""``optsched.solve``: one round, any kind, any registered method, optionally partitioned."""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any

from optsched.core.collector import collector_paused
from optsched.core.deadline import cancel_scope
from optsched.core.decision import Decision
from optsched.core.errors import ValidationError
from optsched.core.phases import phase
from optsched.core.round import RoundProblem
from optsched.perf.lookup import FittedModels
from optsched.policies.options import DEFAULT_TIME_LIMIT, PolicyOptions
from optsched.policies.partitioned import PartitionedPolicy
from optsched.policies.registry import make_policy


@collector_paused
def solve(problem: RoundProblem, method: str = "exact", time_limit: float = DEFAULT_TIME_LIMIT, seed: int = 0, *,
          workers: int = 1, perf_models: FittedModels | None = None, clock_start: float | None = None,
          partitions: int | None = None, backend: str = "auto", cancel: threading.Event | None = None,
          **extras: Any) -> Decision:
    """Solve one round with ``method`` of its kind (``optsched.solve``), within ``time_limit`` seconds.

    ``perf_models`` override the built-in performance models, keyed by model name or by (model name,
    GPU type); ``extras`` are the kind's options (Rubick: ``defer_unreachable_guarantees``, see
    :mod:`optsched.policies.rubick`). Raises ``ValidationError``/``UnknownNameError`` for bad input
    (an unknown method lists the methods of the round's kind) and ``InfeasibleError`` naming the jobs
    and rules when the round has no feasible decision. The time limit covers the whole call, counted
    from ``clock_start`` (a ``time.perf_counter()`` reading, e.g. before the round was parsed) or from
    the call; a method its limit cuts short returns a feasible decision of status ``partial``. With
    ``partitions=K`` (>= 2; ``None``, the default, for none; 1 is an error) the method runs on K parts of the round
    in parallel processes and the parts' decisions are joined (:mod:`optsched.policies.partitioned`). ``backend``
    chooses what solves exact formulations (``PolicyOptions.backend``: ``auto``, the default, is ``switch`` for the
    exact methods of ``rubick`` and ``crius`` and ``cpsat`` for the others; a back end a method does not use is an
    error, :func:`~optsched.policies.registry.make_policy`). The round's warnings
    (:meth:`RoundProblem.warnings <optsched.core.round.RoundProblem.warnings>`: numbers implausible for their unit,
    a kind's own, such as Rubick's reconfiguration penalty above its preemption penalty) are named in the decision's
    message, each as ``warning: ...``. ``cancel``: an event the caller sets when it no longer wants the answer (the
    service, when its client hangs up); from then on the call has no time left and returns soon, with what a limit
    cut short returns (:mod:`optsched.core.deadline`, "Cancellation": the parts of a partitioned solve, HiGHS run
    in-process through ``highspy`` and the ``switch`` back end's HiGHS (after a stall; the call returns at once)
    still stop only at their limits; a CBC or ``highs`` solver process is killed).
    Python's cyclic garbage collector is paused for the call (:mod:`optsched.core.collector`)."""
    if not isinstance(problem, RoundProblem):
        raise ValidationError(f"solve: problem must be a RoundProblem, got {type(problem).__name__}")
    options = PolicyOptions(time_limit=time_limit, seed=seed, workers=workers, perf_models=perf_models, extras=extras,
                            clock_start=clock_start, backend=backend)
    policy = make_policy(method, options, kind=problem.kind)  # validates the method and the options
    if partitions is not None:  # 1 is refused (PartitionedPolicy): None is the unpartitioned solve
        policy = PartitionedPolicy(problem.kind, method, partitions, options)
    warnings = problem.warnings()  # inside the time limit (clock_start runs)
    with cancel_scope(cancel), phase("solve"):
        decision = policy.decide(problem)
    if not warnings:
        return decision
    notes = "; ".join(f"warning: {w}" for w in warnings)
    return replace(decision, message=f"{notes}; {decision.message}" if decision.message else notes)


__all__ = ["solve"]

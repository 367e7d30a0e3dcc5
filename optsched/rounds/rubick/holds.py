"""Stable decisions: running jobs held by the round's ``min_hold_s`` (issue "A round a real cluster
scheduler can state", item 6).

A running job is *held* when the round sets ``min_hold_s``, its allocation says ``since`` when it got
its configuration, and ``time - since < min_hold_s``: it keeps its exact allocation this round (action
``keep``), unless

* it runs on a ``draining`` node (it must leave: :func:`~optsched.rounds.rubick.constraints.must_leave`), or
* it is guaranteed and its current configuration does not reach its reference throughput (its own
  guarantee forces a change), or
* a job of higher priority is queued or must leave a draining node (a higher priority may need its
  resources: the job is then not held, and the priority rule, :mod:`optsched.rounds.rubick.priorities`,
  decides whether it makes room).

An allocation without ``since`` is never held (the round does not know when it changed). What the
caller does: set ``since`` to the round's ``time`` whenever a decision starts or reconfigures a job (a
trim, changed in place without a restart, and a keep leave it as it was).

**How every method binds it** (one place, :func:`hold_split`): the held jobs are taken out of the round
before any method sees it and their allocations added to ``occupied`` (no method can move, shrink or
preempt them, nor give their resources away); a guaranteed held job's GPUs are taken off its tenant's
quota first, off the entries of the GPU type it runs on and ``"*"`` (held jobs are admitted before all
others, counted with the GPUs they hold: :func:`~optsched.rounds.rubick.quotas.quotas_less`). The method
solves the rest; :func:`with_held` then adds each held job to the decision as ``keep`` with its current
throughput (from a table of the held jobs alone), its term added to the objective, the bound and the
heuristic's objective, and a note in the message. The decision is that of the whole round: every held job
kept, every other rule of the round kept by the method on the rest.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

from optsched.core.allocation import NodeShare
from optsched.core.decision import Decision, JobAllocations, relative_gap
from optsched.core.errors import ValidationError
from optsched.perf.coefficients import CoefficientTable
from optsched.rounds.rubick.admission import reaches_guarantee
from optsched.rounds.rubick.choice import Choice
from optsched.rounds.rubick.constraints import must_leave
from optsched.rounds.rubick.decision import to_decision
from optsched.rounds.rubick.objective import objective
from optsched.rounds.rubick.problem import RubickRound
from optsched.rounds.rubick.quotas import quotas_less


def hold_candidates(problem: RubickRound) -> list[str]:
    """The running jobs ``min_hold_s`` holds before the guarantee check (module docstring)."""
    hold = problem.min_hold_s
    if not hold:
        return []
    needing = [j.priority for j in problem.jobs if problem.current(j.name) is None or must_leave(problem, j)]
    top = max(needing, default=None)
    return [a.job for a in problem.running if a.since is not None and problem.time - a.since < hold
            and not must_leave(problem, problem.job(a.job)) and (top is None or problem.job(a.job).priority >= top)]


@dataclass(frozen=True)
class HeldSplit:
    """A round split by its holds: ``rest`` (what the methods solve), and the held jobs as a round of
    their own (``held``, the whole cluster and ``occupied``) with its ``table`` and their ``choices``
    (each its current row, kept)."""

    rest: RubickRound
    held: RubickRound
    table: CoefficientTable
    choices: dict[str, Choice]

    @property
    def value(self) -> float:
        """The held jobs' terms of the objective (each kept: its weighted normalised throughput)."""
        return objective(self.held, self.table, self.choices)


def hold_split(problem: RubickRound, table_of: Callable[[RubickRound], CoefficientTable]) -> HeldSplit | None:
    """``problem`` split by its holds (module docstring); None when nothing is held. ``table_of`` builds
    the table of a round (the policy's own, with its caches)."""
    names = hold_candidates(problem)
    if not names:
        return None
    held = _round_of(problem, names)
    table = table_of(held)
    keep = []
    for name in names:
        j = table.index_of(name)
        cur = int(table.current_row[j])
        if cur < 0 or (problem.job(name).guaranteed and not reaches_guarantee(table, cur)[0]):
            continue  # its own guarantee forces a change (or its configuration is not in the table)
        keep.append(name)
    if not keep:
        return None
    if len(keep) < len(names):
        held = _round_of(problem, keep)
        table = table_of(held)
    choices = {}
    for name in keep:
        alloc = problem.current(name)
        assert alloc is not None
        choices[name] = Choice(int(table.current_row[table.index_of(name)]), alloc.placement.gpu_parts)
    return HeldSplit(_rest_of(problem, keep), held, table, choices)


def _round_of(problem: RubickRound, names: list[str]) -> RubickRound:
    """The round of the running jobs ``names`` alone (no quotas: they are held whatever the quotas say)."""
    chosen = set(names)
    others = frozenset(j.name for j in problem.jobs if j.name not in chosen)
    return replace(problem, jobs=tuple(j for j in problem.jobs if j.name in chosen),
                   running=tuple(a for a in problem.running if a.job in chosen), quotas=(), skipped=(),
                   **type(problem)._fields_without(problem._kind_fields(), others))


def _rest_of(problem: RubickRound, names: list[str]) -> RubickRound:
    """``problem`` without the held jobs ``names``: their allocations added to ``occupied``, a guaranteed
    one's GPUs taken off its tenant's quota (module docstring)."""
    chosen = set(names)
    occupied = dict(problem.occupied)
    used: list[tuple[str, str, int]] = []
    for a in problem.running:
        if a.job not in chosen:
            continue
        for node, s in a.placement.shares:
            old = occupied.get(node, NodeShare(0))
            occupied[node] = NodeShare(old.gpus + s.gpus, old.cpus + s.cpus, old.mem_gib + s.mem_gib)
        job = problem.job(a.job)
        if job.guaranteed:
            gpu_type = problem.cluster.node(a.placement.gpu_parts[0][0]).gpu_type
            used.append((job.tenant, gpu_type, a.placement.total_gpus))
    quotas = quotas_less(problem.quotas, used)
    return replace(problem, jobs=tuple(j for j in problem.jobs if j.name not in chosen),
                   running=tuple(a for a in problem.running if a.job not in chosen),
                   occupied=tuple(occupied.items()), quotas=quotas,
                   **type(problem)._fields_without(problem._kind_fields(), frozenset(chosen)))


def with_held(decision: Decision, problem: RubickRound, split: HeldSplit) -> Decision:
    """``decision`` (of ``split.rest``) for the whole ``problem``: the held jobs added as ``keep`` in round
    order, their terms added to the objective, bound and heuristic objective (module docstring)."""
    held = to_decision(split.held, split.table, split.choices, method=decision.method, status=decision.status)
    payload = decision.payload
    if not isinstance(payload, JobAllocations):  # pragma: no cover - every rubick decision places jobs
        raise ValidationError("with_held: a rubick decision places jobs")
    by_job = {x.job: x for x in (*payload.jobs, *held.jobs)}
    jobs = tuple(by_job[j.name] for j in problem.jobs if j.name in by_job)
    value = held.objective

    def plus(x: float | None) -> float | None:
        return None if x is None else x + value
    note = (f"{len(split.choices)} running job(s) held by min_hold_s {problem.min_hold_s:g} s (changed less than "
            f"that ago; kept as they run): {', '.join(sorted(split.choices)[:10])}"
            f"{' ...' if len(split.choices) > 10 else ''}")
    objective = decision.objective + value
    return replace(decision, payload=JobAllocations(jobs), objective=objective, bound=plus(decision.bound),
                   heuristic_objective=plus(decision.heuristic_objective),
                   message=f"{decision.message}; {note}" if decision.message else note,
                   gap=relative_gap(plus(decision.bound), objective))


__all__ = ["HeldSplit", "hold_candidates", "hold_split", "with_held"]

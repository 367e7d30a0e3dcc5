"""Communication scheduling policies of MoE training (thesis Sec. 4.4) as launch rules over a
moe-comm round's task graph (:mod:`optsched.rounds.moe_comm`), each with the granularity it runs at.

* ``fair`` (the baseline, Fig. 4.7a: DeepSpeed's two CUDA streams): all-to-alls and allreduces run on
  two streams, each one operation at a time in ready order, launched as soon as ready; when both run
  they fair-share the link.
* ``priority`` (naive prioritisation, Fig. 4.7b): one operation on the link at a time; when the link
  frees, a waiting all-to-all goes first, else the earliest allreduce. A running allreduce cannot be
  preempted, so an all-to-all arriving during a large allreduce waits for all of it: it can finish
  later than under fair sharing (Sec. 4.4.1).
* ``defer`` (Fig. 4.7c): the baseline's streams, but an allreduce is launched only between MoE layers:
  when a positive, even number of all-to-alls has finished, none runs and none waits ("blindly defer
  allreduce until an even number of all-to-all finish"; an allreduce ready before the first all-to-all
  waits for the second, as gradient i does in Fig. 4.7c), or once every all-to-all of the pass has
  finished: no all-to-all is left that could pair with the last one (a pass with an odd number of
  all-to-alls, where the text's rule would wait forever, releases its allreduces after the last one; a
  pass without all-to-alls defers nothing).
* ``microop`` (Sec. 4.4.2, Fig. 4.8a): tensors partitioned into micro-ops of ``partition_mb``; one
  micro-op on the link at a time, all-to-all micro-ops first; allreduce micro-ops run when no
  all-to-all waits and not while the combine computation runs ("the scheduler stops launching
  allreduce micro-ops if the combining computation in backward pass, since this implies all-to-all is
  imminent", Sec. 4.6.1).
* ``lina``: ``microop`` with the expert FFN pipelined with the all-to-all micro-ops (Fig. 4.8b).

Each :class:`CommPolicy` builds its graph and runs :func:`~optsched.rounds.moe_comm.timeline.simulate`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from optsched.core.deadline import Deadline
from optsched.rounds.moe_comm.problem import ALL_TO_ALL, MoECommRound
from optsched.rounds.moe_comm.tasks import build_tasks
from optsched.rounds.moe_comm.timeline import LaunchRule, LaunchState, Timeline, simulate


def _streams(state: LaunchState, allreduce_ok: bool) -> list[int]:
    """Two streams, one operation each at a time (``allreduce_ok``: the allreduce stream may launch)."""
    out: list[int] = []
    busy = {state.graph.tasks[k].kind == ALL_TO_ALL for k in state.active}
    for is_a2a in (True, False):
        if is_a2a in busy or (not is_a2a and not allreduce_ok):
            continue
        first = state.first(is_a2a)
        if first is not None:
            out.append(first)
    return out


def fair_rule(state: LaunchState) -> Sequence[int]:
    """The baseline (module docstring)."""
    return _streams(state, True)


def defer_rule(state: LaunchState) -> Sequence[int]:
    """Allreduce deferred to between MoE layers (module docstring)."""
    paired = state.a2a_done > 0 and state.a2a_done % 2 == 0
    quiet = ((paired or state.a2a_done == state.a2a_ops) and state.a2a_started == state.a2a_done
             and state.first(True) is None)
    return _streams(state, quiet)


def priority_rule(state: LaunchState) -> Sequence[int]:
    """Non-preemptive strict priority, one operation at a time (module docstring)."""
    if state.active:
        return []
    a2a = state.first(True)
    return [a2a if a2a is not None else state.first()]


def microop_rule(state: LaunchState) -> Sequence[int]:
    """Lina's micro-op priority (module docstring)."""
    if state.active:
        return []
    a2a = state.first(True)
    if a2a is not None:
        return [a2a]
    return [] if state.computing == "combine" else [state.first(False)]


@dataclass(frozen=True)
class CommPolicy:
    """A policy: its launch ``rule`` and granularity (``split`` into micro-ops, ``pipeline`` the FFN)."""

    name: str
    rule: LaunchRule
    split: bool = False
    pipeline: bool = False

    def schedule(self, problem: MoECommRound) -> Timeline:
        timeline = self.schedule_until(problem, None)
        assert timeline is not None  # no deadline: simulate always finishes
        return timeline

    def schedule_until(self, problem: MoECommRound, deadline: Deadline | None) -> Timeline | None:
        """:meth:`schedule`, or None when ``deadline`` passes first."""
        graph = build_tasks(problem, split=self.split, pipeline=self.pipeline)
        return simulate(problem, graph, self.rule, name=self.name, deadline=deadline)


POLICIES: dict[str, CommPolicy] = {p.name: p for p in (
    CommPolicy("fair", fair_rule),
    CommPolicy("priority", priority_rule),
    CommPolicy("defer", defer_rule),
    CommPolicy("microop", microop_rule, split=True),
    CommPolicy("lina", microop_rule, split=True, pipeline=True),
)}

__all__ = ["CommPolicy", "POLICIES", "defer_rule", "fair_rule", "microop_rule", "priority_rule"]

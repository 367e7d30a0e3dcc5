"""Every Rubick method names a running job's change by what changes (issue 16, item 5): ``keep`` is its exact
current allocation, ``trim`` its plan and per-node GPUs with other CPUs or memory (the trim penalty),
``reconfigure`` anything else (the reconfiguration penalty); the objective charges exactly the
penalties listed; every decision fits the nodes. On rounds where queued jobs need CPUs that running
jobs hold (``helpers.cpu_hungry_round``)."""

from __future__ import annotations

import pytest

import optsched
from optsched.core.capacity import NodeUsage
from optsched.policies.registry import methods_of

from helpers import cpu_hungry_round

ROUNDS = [cpu_hungry_round(4, 24, seed) for seed in (0, 1)]


def _gpus_on(alloc) -> dict[str, int]:  # noqa: ANN001
    return {n: s.gpus for n, s in alloc.placement.shares if s.gpus > 0}


@pytest.mark.parametrize("method", methods_of("rubick"))
def test_actions_say_what_changes_and_the_objective_charges_them(method: str) -> None:
    actions: dict[str, int] = {}
    for problem in ROUNDS:
        d = optsched.solve(problem, method, 20.0)
        usage = NodeUsage()
        for x in d.jobs:
            actions[x.action] = actions.get(x.action, 0) + 1
            cur = problem.current(x.job)
            if x.allocation is not None:
                usage.add_all(x.allocation.placement.shares)
            if cur is None or x.allocation is None:
                assert x.action in ("start", "wait", "preempt")
                continue
            new = x.allocation
            if new == cur:
                expected, penalty = "keep", 0.0
            elif new.plan == cur.plan and _gpus_on(new) == _gpus_on(cur):
                expected, penalty = "trim", problem.trim_penalty
            else:
                expected, penalty = "reconfigure", problem.reconfig_penalty
            assert (x.action, x.penalty) == (expected, penalty), (method, x)
        assert not usage.overflows(problem.free, 1e-6), method
        assert d.objective == pytest.approx(sum(x.normalised for x in d.jobs) - sum(x.penalty for x in d.jobs))
    if method in ("exact", "heuristic", "rubick-r"):
        assert actions.get("trim", 0) > 0, actions

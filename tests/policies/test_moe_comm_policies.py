"""The moe-comm methods (optsched/policies/moe_comm.py): on the Fig. 4.7-shaped pass the policies order
as Lina's text reports, and the exact schedule is never slower than any policy."""

from __future__ import annotations

import dataclasses
import json
import time

import numpy as np
import pytest

import optsched
from optsched.core.decision import Decision
from optsched.core.errors import ValidationError
from optsched.formulations import moe_comm_schedule
from optsched.heuristics.moe_comm import POLICIES, CommPolicy
from optsched.policies.registry import describe_methods
from optsched.rounds.experts.generate import lina_cluster
from optsched.rounds.moe_comm import AllReduce, MoECommRound, StreamOp, fig47_round, generate
from optsched.rounds.moe_comm.problem import ALL_TO_ALL, COMPUTE, ROLES
from optsched.rounds.moe_comm.tasks import build_tasks
from optsched.rounds.moe_comm.timeline import violations

RULES = ("fair", "priority", "defer", "microop", "lina")


def test_methods_are_registered() -> None:
    assert set(describe_methods()["moe-comm"]) == {"exact", "heuristic", *RULES}


def test_fig_4_7_order() -> None:
    r = fig47_round()
    step = {m: -optsched.solve(r, method=m, time_limit=10).objective for m in (*RULES, "exact")}
    end = {m: POLICIES[m].schedule(r).compute_end_ms for m in RULES}
    assert step["priority"] > step["fair"] and end["priority"] > end["fair"]  # naive priority is slower (4.7b)
    assert step["defer"] < step["fair"] and end["defer"] < end["fair"]  # deferral is faster (4.7c)
    assert step["microop"] < step["fair"] and step["lina"] < step["fair"]  # micro-ops are faster (4.8)
    assert step["lina"] < step["microop"]  # pipelining the FFN helps
    assert step["exact"] <= min(step[m] for m in RULES) + 1e-9  # the exact schedule is no slower than any


@pytest.mark.parametrize("seed", range(3))
def test_exact_is_never_slower_than_any_rule(seed: int) -> None:
    r = generate(seed=seed, moe_layers=2)
    exact = optsched.solve(r, method="exact", time_limit=1.0)
    rules = {m: optsched.solve(r, method=m) for m in RULES}
    assert exact.objective >= max(d.objective for d in rules.values()) - 1e-9
    assert exact.heuristic_objective == pytest.approx(max(d.objective for d in rules.values()))
    assert exact.bound is not None and exact.bound >= exact.objective - 1e-9
    back = Decision.from_dict(json.loads(json.dumps(exact.to_dict())))
    assert back == exact and back.payload.step_ms == -exact.objective


def test_exact_model_finds_the_optimum_of_a_small_pass() -> None:
    r = fig47_round()
    sol = moe_comm_schedule.solve(r, time_limit=10, hint=POLICIES["lina"].schedule(r))
    assert sol.status == "optimal" and violations(r, sol.payload["timeline"]) == []
    assert -sol.bound <= -sol.objective <= POLICIES["lina"].schedule(r).step_ms + 1e-9
    whole = moe_comm_schedule.solve(r, time_limit=10, hint=POLICIES["priority"].schedule(r))
    assert whole.objective == pytest.approx(sol.objective, abs=1e-3)  # the hint does not change the optimum
    assert len(build_tasks(r, split=True, pipeline=True).tasks) > len(build_tasks(r, split=False).tasks)


def test_no_time_left_returns_the_fastest_whole_operation_rule() -> None:
    r = fig47_round()
    d = optsched.solve(r, method="exact", time_limit=0.5, clock_start=time.perf_counter() - 1.0)
    assert d.status == "heuristic-fallback" and "the best rule was 'defer'" in d.message
    assert "rules skipped: microop (cut short by the time limit), lina (cut short" in d.message
    assert d.objective == optsched.solve(r, method="defer").objective


def test_the_time_limit_covers_a_pass_of_many_micro_ops() -> None:
    r = dataclasses.replace(generate(seed=0, moe_layers=2), partition_mb=0.5)  # 959 micro-ops, near the limit
    t0 = time.perf_counter()
    d = optsched.solve(r, method="exact", time_limit=1.0)
    assert time.perf_counter() - t0 < 4.0 and d.solve_seconds < 4.0  # generous: CP-SAT may overrun a little
    assert d.objective >= max(optsched.solve(r, method=m).objective for m in RULES) - 1e-9


def test_milp_back_ends_are_refused() -> None:
    with pytest.raises(ValidationError, match="method 'exact' of round kind 'moe-comm' does not use backend 'cbc'"):
        optsched.solve(fig47_round(), method="exact", backend="cbc")


def test_exact_skips_a_rule_that_fails_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    r = fig47_round()
    monkeypatch.setitem(POLICIES, "defer", CommPolicy("defer", lambda state: []))  # never launches anything
    d = optsched.solve(r, method="exact", time_limit=2)
    assert "rules skipped: defer (defer: ready communication operations wait" in d.message
    assert d.objective >= max(optsched.solve(r, method=m).objective for m in RULES if m != "defer") - 1e-9


def _random_pass(seed: int) -> MoECommRound:
    """A small random pass (the reviewer's fuzz, smaller): a compute operation of 0-5 ms, then 2-5
    elements (30% all-to-alls of 1-80 MB, else compute of 0-5 ms in a random role), 0-3 allreduces of
    1-150 MB after random compute operations, sharing efficiency 0.7-1."""
    rng = np.random.default_rng(seed)
    stream = [StreamOp("c", COMPUTE, ms=float(rng.uniform(0, 5)))]
    stream += [StreamOp(f"a{i}", ALL_TO_ALL, mb=float(rng.uniform(1, 80))) if rng.random() < 0.3 else
               StreamOp(f"c{i}", COMPUTE, ms=float(rng.uniform(0, 5)), role=str(rng.choice(ROLES)))
               for i in range(int(rng.integers(2, 6)))]
    computes = [op.name for op in stream if op.op == COMPUTE]
    allreduces = tuple(AllReduce(f"g{j}", float(rng.uniform(1, 150)), str(rng.choice(computes)))
                       for j in range(int(rng.integers(0, 4))))
    return MoECommRound(cluster=lina_cluster(4), stream=tuple(stream), allreduces=allreduces,
                        sharing_efficiency=float(rng.uniform(0.7, 1.0)))


@pytest.mark.parametrize("seed", range(100))
def test_exact_is_feasible_and_never_slower_than_any_rule_on_random_passes(seed: int) -> None:
    r = _random_pass(seed)
    rules = {m: optsched.solve(r, method=m) for m in RULES}  # every rule schedules every pass
    exact = optsched.solve(r, method="exact", time_limit=5)  # to_decision refuses an infeasible schedule
    assert exact.objective >= max(d.objective for d in rules.values()) - 1e-9

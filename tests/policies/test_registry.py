"""Policies keyed by (kind, method) with one PolicyOptions value (optsched/policies/registry.py and
options.py): methods per kind, errors for unknown pairs and options, and ``solve`` dispatching on the
round's kind."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import pytest

import optsched
from optsched.core import UnknownNameError, ValidationError, a800_cluster
from optsched.core import kinds as kinds_module
from optsched.core.decision import Decision, JobAllocations, JobDecision
from optsched.core.kinds import RoundKind
from optsched.core.policy import Policy
from optsched.core.round import RoundProblem
from optsched.policies import registry
from optsched.policies.options import DEFAULT_TIME_LIMIT, PolicyOptions
from optsched.policies.registry import kind_extras, make_policy, method, methods_of, register_method
from optsched.policies.solve import solve
from optsched.policies.exact import ExactPolicy
from optsched.policies.rubick import RubickExact, RubickHeuristicPolicy, SiaPolicy
from optsched.rounds.rubick.generate import generate_rubick_round

RUBICK_METHODS = ("exact", "rubick-exact", "heuristic", "rubick", "rubick-e", "rubick-r", "rubick-n", "fifo",
                  "fifo-backfill", "synergy", "sia", "antman")


def test_methods_of_rubick() -> None:
    assert methods_of("rubick") == RUBICK_METHODS
    assert kind_extras("rubick") == ("defer_unreachable_guarantees",)
    assert set(registry.describe_methods()["rubick"]) == set(RUBICK_METHODS)
    with pytest.raises(UnknownNameError, match="unknown round kind"):
        methods_of("nope")


@pytest.mark.parametrize("kind", kinds_module.round_kinds())
def test_every_kind_has_the_default_method_and_solves_its_generated_round(kind: str) -> None:
    """``optsched.solve`` and ``optsched solve`` default to ``exact``: every built-in kind has it, and it
    answers a round of the kind's own generator with a decision of that kind."""
    assert "exact" in methods_of(kind)
    problem = kinds_module.round_kind(kind).generate(seed=0)
    decision = solve(problem, time_limit=5.0)
    assert decision.kind == kind and decision.method == "exact"
    assert decision.status in ("optimal", "feasible", "heuristic-fallback", "partial")


def test_unknown_method_lists_the_methods_of_the_kind() -> None:
    with pytest.raises(UnknownNameError) as err:
        make_policy("simplex")
    msg = str(err.value)
    assert "unknown method 'simplex' for round kind 'rubick'; known methods:" in msg
    assert all(m in msg for m in RUBICK_METHODS)
    problem = generate_rubick_round(1, 8, 3, 0)
    with pytest.raises(UnknownNameError, match="unknown method 'simplex' for round kind 'rubick'"):
        solve(problem, "simplex")


def test_make_policy_builds_fresh_policies_from_options() -> None:
    opts = PolicyOptions(time_limit=3, seed=7, workers=2, extras={"defer_unreachable_guarantees": True})
    exact = make_policy("exact", opts)
    assert isinstance(exact, ExactPolicy) and isinstance(exact, Policy) and isinstance(exact.contract, RubickExact)
    assert (exact.name, exact.kind, exact.time_limit, exact.seed, exact.workers) == ("exact", "rubick", 3.0, 7, 2)
    assert exact.contract.defer_unreachable_guarantees is True
    r = make_policy("rubick-r", opts)
    assert isinstance(r, RubickHeuristicPolicy) and r.fixed_plan and not r.fixed_resources
    assert make_policy("rubick") is not make_policy("rubick")  # each call a new policy (own caches)
    assert isinstance(make_policy("sia"), SiaPolicy)
    assert method("rubick", "sia").extras == ()  # baselines do not read the deferral option


@pytest.mark.parametrize("kwargs, match", [
    ({"time_limit": 0}, "time_limit must be a positive number"),
    ({"time_limit": -1.0}, "time_limit must be a positive number"),
    ({"time_limit": math.nan}, "time_limit must be a positive number"),
    ({"time_limit": True}, "time_limit must be a positive number"),
    ({"seed": 1.5}, "seed must be an integer"),
    ({"workers": 0}, "workers must be a positive integer"),
    ({"extras": {1: True}}, "extras must be a mapping"),
])
def test_policy_options_are_validated(kwargs: dict, match: str) -> None:
    with pytest.raises(ValidationError, match=match):
        PolicyOptions(**kwargs)


def test_options_defaults_and_extras() -> None:
    o = PolicyOptions()
    assert (o.time_limit, o.seed, o.workers, dict(o.extras)) == (DEFAULT_TIME_LIMIT, 0, 1, {})
    with pytest.raises(ValidationError, match=r"unknown option\(s\) defer for round kind 'rubick'; it takes "
                                              "defer_unreachable_guarantees"):
        make_policy("rubick", PolicyOptions(extras={"defer": True}))
    with pytest.raises(ValidationError, match="defer_unreachable_guarantees must be True or False"):
        make_policy("exact", PolicyOptions(extras={"defer_unreachable_guarantees": "yes"}))
    with pytest.raises(ValidationError, match="options must be a PolicyOptions"):
        make_policy("rubick", {"time_limit": 1})  # type: ignore[arg-type]


def test_solve_checks_its_problem() -> None:
    with pytest.raises(ValidationError, match="problem must be a RoundProblem"):
        solve({"kind": "rubick"}, "rubick")  # type: ignore[arg-type]
    assert optsched.solve is solve


# -- dispatch on the round's kind ------------------------------------------------------------------
@dataclass(frozen=True)
class EchoRound(RoundProblem):
    KIND: ClassVar[str] = "toy-echo"


@dataclass(frozen=True)
class EchoPolicy:
    """Starts nothing; says how it was made."""

    kind: ClassVar[str] = "toy-echo"
    name: str
    options: PolicyOptions

    def decide(self, problem: RoundProblem) -> Decision:
        jobs = tuple(JobDecision(j.name, None, 0.0, 0.0, "wait") for j in problem.jobs)
        return Decision(problem.kind, self.name, "heuristic", 0.0, JobAllocations(jobs),
                        message=f"time_limit={self.options.time_limit:g} extras={dict(self.options.extras)}")


@pytest.fixture
def echo_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    kind = RoundKind("toy-echo", EchoRound, JobAllocations, lambda *, seed=0: EchoRound(a800_cluster(1, 8)), "toy")
    monkeypatch.setitem(kinds_module._KINDS, kind.name, kind)
    monkeypatch.setattr(registry, "_METHODS", dict(registry._METHODS))
    register_method("toy-echo", "echo", lambda o: EchoPolicy("echo", o), "echo the options", ("loud",))


def test_solve_dispatches_on_the_kind_of_the_round(echo_kind: None) -> None:
    problem = EchoRound(a800_cluster(1, 8))
    d = solve(problem, "echo", 2.5, loud=True)
    assert (d.kind, d.method, d.message) == ("toy-echo", "echo", "time_limit=2.5 extras={'loud': True}")
    with pytest.raises(UnknownNameError, match="unknown method 'exact' for round kind 'toy-echo'; known methods: echo"):
        solve(problem, "exact")
    with pytest.raises(ValidationError, match="unknown option.*defer_unreachable_guarantees for round kind 'toy-echo'"):
        solve(problem, "echo", defer_unreachable_guarantees=True)
    assert methods_of("toy-echo") == ("echo",)
    with pytest.raises(ValidationError, match="solves rubick rounds, got a round of kind 'toy-echo'"):
        make_policy("rubick").decide(problem)
    with pytest.raises(ValidationError, match="already registered"):
        register_method("toy-echo", "echo", lambda o: EchoPolicy("other", o), "another")


def test_backend_option() -> None:
    with pytest.raises(ValidationError, match="unknown backend 'gurobi'; known: auto, cpsat, switch, cbc, highs"):
        PolicyOptions(backend="gurobi")
    problem = generate_rubick_round(2, 8, 8, 4)
    cpsat = solve(problem, "exact", 20.0)
    cbc = solve(problem, "exact", 20.0, backend="cbc")
    assert cpsat.status == cbc.status == "optimal"
    assert cbc.objective == pytest.approx(cpsat.objective, abs=1e-6)

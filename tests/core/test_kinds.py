"""The round-kind registry (optsched/core/kinds.py): kinds are open — a new kind registers its problem
class, decision payload and generator, and round and decision files of it read and write through the
common entry points — and the base round and decision refuse what does not fit their kind."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Mapping

import pytest

from optsched.core import UnknownNameError, ValidationError, a800_cluster
from optsched.core import kinds as kinds_module
from optsched.core.decision import Decision, JobAllocations, JobDecision, relative_gap
from optsched.core.kinds import RoundKind, register_kind, round_kind, round_kinds
from optsched.core.round import RoundProblem
from optsched.rounds.rubick import RubickRound


@dataclass(frozen=True)
class ReclaimRound(RoundProblem):
    """A toy kind: return ``servers`` of the cluster."""

    KIND: ClassVar[str] = "toy-reclaim"
    FIELD_KEYS: ClassVar[tuple[str, ...]] = ("servers",)

    servers: int = 1

    def _check_fields(self) -> None:
        if not isinstance(self.servers, int) or not 1 <= self.servers <= len(self.cluster.nodes):
            raise ValidationError(f"round: servers must be 1..{len(self.cluster.nodes)}, got {self.servers!r}")

    def _fields_to_dict(self) -> dict[str, Any]:
        return {"servers": self.servers}

    @classmethod
    def _fields_from_dict(cls, data: Mapping[str, Any]) -> dict[str, Any]:
        return {"servers": data.get("servers", 1)}


@dataclass(frozen=True)
class ReturnedServers:
    """A payload of another shape than per-job allocations."""

    KEYS: ClassVar[tuple[tuple[str, ...], tuple[str, ...]]] = (("returned",), ())

    returned: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"returned": list(self.returned)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ReturnedServers":
        return cls(tuple(data["returned"]))


def _generate(*, seed: int = 0, nodes: int = 2) -> ReclaimRound:
    return ReclaimRound(cluster=a800_cluster(nodes, 8), servers=1 + seed % nodes)


TOY = RoundKind("toy-reclaim", ReclaimRound, ReturnedServers, _generate, "a toy kind for the registry tests")


@pytest.fixture
def toy_kind(monkeypatch: pytest.MonkeyPatch) -> RoundKind:
    monkeypatch.setitem(kinds_module._KINDS, TOY.name, TOY)
    return TOY


def test_builtin_kinds_are_registered() -> None:
    assert "rubick" in round_kinds()
    kind = round_kind("rubick")
    assert kind.problem is RubickRound and kind.payload is JobAllocations
    assert kind.generator_options == ("seed", "nodes", "gpus_per_node", "jobs", "constrained")
    assert isinstance(kind.generate(seed=3, nodes=2, jobs=4), RubickRound)


def test_unknown_kind_lists_the_registered_ones() -> None:
    with pytest.raises(UnknownNameError, match=r"unknown round kind 'nope'; known round kinds: .*rubick"):
        round_kind("nope")
    with pytest.raises(UnknownNameError, match="unknown round kind 'nope'"):
        RoundProblem.from_dict({"kind": "nope", "cluster": "a800-8x8", "jobs": []})


def test_a_new_kind_reads_and_writes_through_the_common_entry_points(toy_kind: RoundKind) -> None:
    assert "toy-reclaim" in round_kinds()
    problem = toy_kind.generate(seed=1, nodes=3)
    data = problem.to_dict()
    assert data["kind"] == "toy-reclaim" and data["servers"] == 2
    back = RoundProblem.from_dict(data)
    assert isinstance(back, ReclaimRound) and back == problem and back.kind == "toy-reclaim"
    decision = Decision("toy-reclaim", "any", "optimal", 1.0, ReturnedServers(("n001",)), bound=1.0, gap=0.0)
    d = decision.to_dict()
    assert d["returned"] == ["n001"] and "jobs" not in d
    assert Decision.from_dict(d) == decision
    with pytest.raises(ValidationError, match="carry ReturnedServers, not per-job allocations"):
        decision.jobs  # noqa: B018
    with pytest.raises(ValidationError, match="unknown field.*jobs"):
        Decision.from_dict({**d, "jobs": []})


def test_kind_fields_are_validated_and_kinds_do_not_mix(toy_kind: RoundKind) -> None:
    with pytest.raises(ValidationError, match="servers must be 1..2"):
        ReclaimRound(cluster=a800_cluster(2, 8), servers=5)
    data = toy_kind.generate().to_dict()
    with pytest.raises(ValidationError, match="kind 'toy-reclaim' is not 'rubick'"):
        RubickRound.from_dict(data)
    with pytest.raises(ValidationError, match="unknown field.*quotas"):
        RoundProblem.from_dict({**data, "quotas": {}})
    with pytest.raises(ValidationError, match="payload must be a ReturnedServers, got JobAllocations"):
        Decision("toy-reclaim", "any", "optimal", 0.0, JobAllocations(()))


def test_registering_is_checked(toy_kind: RoundKind) -> None:
    assert register_kind(toy_kind) is toy_kind  # the same entry again: a no-op
    with pytest.raises(ValidationError, match="already registered"):
        register_kind(RoundKind("toy-reclaim", ReclaimRound, JobAllocations, _generate, "another"))
    with pytest.raises(ValidationError, match="has KIND 'toy-reclaim'"):
        register_kind(RoundKind("other", ReclaimRound, ReturnedServers, _generate, "wrong class"))


def test_the_base_round_is_not_a_kind() -> None:
    with pytest.raises(ValidationError, match="RoundProblem is the base of the round kinds"):
        RoundProblem(cluster=a800_cluster(1, 8))


def test_job_allocations_payload() -> None:
    a = JobDecision("a", None, 0.0, 0.0, "wait")
    with pytest.raises(ValidationError, match="'a' appear twice"):
        JobAllocations((a, a))
    d = Decision("rubick", "heuristic", "heuristic", 0.0, JobAllocations((a,)))
    assert d.jobs == (a,) and d.job("a") is a and d.allocations == {}
    with pytest.raises(UnknownNameError):
        d.job("b")


def test_relative_gap_is_the_one_gap_formula() -> None:
    assert relative_gap(None, 1.0) is None and relative_gap(1.0, None) is None
    assert relative_gap(10.0, 9.0) == pytest.approx(0.1)
    assert relative_gap(10.0, 11.0) == 0.0  # never negative
    assert relative_gap(0.0, -1.0) == pytest.approx(1.0 / 1e-9)

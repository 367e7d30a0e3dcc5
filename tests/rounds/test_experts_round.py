"""The experts round (optsched/rounds/experts): fields, devices, JSON, the rules it refuses with one
clear error, the plan's score and check, the decision's minimising frame, and the generator."""

from __future__ import annotations

import json

import numpy as np
import pytest
from experts_helpers import experts_round

from optsched.core import NodeShare
from optsched.core.decision import Decision, JobAllocations, relative_gap
from optsched.core.errors import InfeasibleError, ValidationError
from optsched.core.round import RoundProblem
from optsched.rounds.experts import ExpertPlacement, ExpertSpec, ExpertsRound, generate
from optsched.rounds.experts.decision import plan_of, to_decision
from optsched.rounds.experts.generate import lina_cluster
from optsched.rounds.experts.plan import (ReplicaPlan, device_times, imbalance, lower_bound, makespan, replica_caps,
                                          violations)


def test_devices_are_the_free_gpus_with_relative_speed() -> None:
    r = ExpertsRound(cluster=lina_cluster(6), experts=(ExpertSpec(1.0),) * 3,
                     occupied=(("n000", NodeShare(1)),))
    assert r.devices == ("n000:0", "n000:1", "n000:2", "n001:0", "n001:1")
    assert np.allclose(r.speeds, 1.0) and r.num_experts == 3 and list(r.max_replicas) == [5, 5, 5]


def test_json_round_trip_and_jobs_may_be_left_out() -> None:
    r = generate(seed=2, experts=12, devices=8)
    data = json.loads(json.dumps(r.to_dict()))
    assert data["kind"] == "experts" and len(data["experts"]) == 12 and data["jobs"] == []
    del data["jobs"]
    back = RoundProblem.from_dict(data)
    assert isinstance(back, ExpertsRound) and back == r and back.layer == r.layer


@pytest.mark.parametrize(("change", "message"), [
    ({"slots": 1, "experts": [{"load": 1}] * 5}, r"need at least 5 replicas, more than the 4 devices x 1 slots"),
    ({"experts": [{"load": 1, "min_replicas": 5}]}, r"expert 0: min_replicas 5 is more replicas than the 4 devices"),
    ({"experts": [{"load": 1, "min_replicas": 1, "max_replicas": 9}]}, r"expert 0: max_replicas 9 is more replicas"),
    ({"experts": [{"load": 1, "min_replicas": 3, "max_replicas": 2}]}, r"expert 0: max_replicas 2 is below min_replicas 3"),
    ({"experts": [{"load": 1}, {"load": -2}]}, r"expert 1: load must be >= 0"),
    ({"experts": [{"load": 1, "weight": 2}]}, r"experts\[0\]: unknown field\(s\) weight"),
    ({"experts": []}, r"needs at least one expert"),
    ({"slots": 0}, r"slots must be >= 1"),
    ({"replica_cost": -1}, r"replica_cost must be >= 0"),
    ({"occupied": {"n000": {"gpus": 4}}}, r"no free GPU"),
    ({"jobs": [{"name": "j", "model": "bert", "requested_gpus": 1, "total_iterations": 1}]}, r"takes no jobs"),
])
def test_bad_rounds_get_one_clear_error(change: dict, message: str) -> None:
    data = {**experts_round([3.0, 1.0], 4).to_dict(), **change}
    with pytest.raises(ValidationError, match=message):
        RoundProblem.from_dict(data)


def test_missing_experts_field() -> None:
    data = experts_round([1.0], 2).to_dict()
    del data["experts"]
    with pytest.raises(ValidationError, match="missing field.*experts"):
        RoundProblem.from_dict(data)


def test_plan_score_and_check() -> None:
    r = experts_round([6.0, 2.0, 4.0], 2, slots=2, replica_cost=1.0)
    plan = ReplicaPlan.from_devices(r, [[(0, 0.5), (1, 0.5)], [(0, 1.0)], [(1, 1.0)]])
    assert violations(r, plan) == []
    assert np.allclose(device_times(r, plan), [3 + 2 + 2, 3 + 4 + 2])
    assert makespan(r, plan) == 9.0 and imbalance(r, plan) == pytest.approx(9 / 8)
    assert makespan(r, plan, loads=np.array([0.0, 0.0, 0.0])) == 2.0
    # all work: (12 tokens + 3 replicas x 1) / 2 devices; per expert: (6 + 1) / 2 devices at most
    assert list(replica_caps(r)) == [2, 2, 2] and lower_bound(r) == pytest.approx(7.5)
    bad = ReplicaPlan.from_devices(r, [[(0, 0.5)], [(0, 1.0), (1, 0.5)], [(0, 1.0)]])
    problems = violations(r, bad)
    assert "expert 0: shares sum to 0.5, not 1" in problems
    assert "expert 1: shares sum to 1.5, not 1" in problems
    assert "device 'n000:0': 3 replicas, 2 slots" in problems
    with pytest.raises(InfeasibleError, match="infeasible expert placement"):
        to_decision(r, bad, method="x", status="heuristic")


def test_decision_reports_minus_makespan_and_the_gap_of_a_minimisation() -> None:
    r = experts_round([6.0, 2.0, 4.0], 2, slots=2)
    plan = ReplicaPlan.from_devices(r, [[(0, 1.0)], [(1, 1.0)], [(1, 1.0)]])
    d = to_decision(r, plan, method="lina", status="feasible", lower_bound=6.0, heuristic_makespan=7.0)
    assert d.objective == -6.0 and d.bound == -6.0 and d.gap == 0.0 and d.heuristic_objective == -7.0
    d2 = to_decision(r, ReplicaPlan.from_devices(r, [[(0, 1.0)], [(0, 1.0)], [(1, 1.0)]]), method="lina",
                     status="feasible", lower_bound=6.0)
    assert d2.objective == -8.0 and d2.gap == pytest.approx((8 - 6) / 6)  # (makespan - bound) / bound
    assert relative_gap(d2.bound, d2.objective) == d2.gap
    back = Decision.from_dict(json.loads(json.dumps(d2.to_dict())))
    assert back == d2 and isinstance(back.payload, ExpertPlacement)
    assert back.payload.replicas_of(1) == (("n000:0", 1.0),)
    assert np.array_equal(plan_of(r, back).hosted, ReplicaPlan.from_devices(r, [[(0, 1.0)], [(0, 1.0)],
                                                                                  [(1, 1.0)]]).hosted)
    with pytest.raises(ValidationError, match="payload must be a ExpertPlacement, got JobAllocations"):
        Decision("experts", "x", "heuristic", 0.0, JobAllocations(()))


def test_generator_is_reproducible_and_follows_its_arguments() -> None:
    a, b = generate(seed=4, experts=12, devices=8, slots=2), generate(seed=4, experts=12, devices=8, slots=2)
    assert a == b and a.num_experts == 12 and a.num_devices == 8 and a.slots == 2
    assert generate(seed=5, experts=12) != a
    default = generate(seed=1)
    assert default.num_experts == 16 and default.num_devices == 16 and 3 <= default.layer <= 11
    total = default.loads.sum()
    assert 0 < total <= 4096 and np.all(default.loads >= 0)
    with pytest.raises(ValidationError, match="70 experts do not fit 4 devices x 4 slots"):
        generate(experts=70, devices=4)

"""The ``training-packing`` round kind (thesis Sec. 4.4.2; optsched/rounds/training_packing/): its JSON
round file read back equal, the generator's rounds, and bad input refused naming the field."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from optsched.core.errors import ValidationError
from optsched.core.kinds import round_kind
from optsched.core.round import RoundProblem
from optsched.perf.training_packing import PackingCandidate
from optsched.rounds.experts.generate import lina_cluster
from optsched.rounds.training_packing import TrainingPackingRound, generate_packing_round

#: the hand case of tests/formulations/test_training_packing.py
HAND = (PackingCandidate(1, 6.0, 0.8, 3), PackingCandidate(2, 4.0, 1.6, 2), PackingCandidate(4, 1.2, 3.2, 1),
        PackingCandidate(8, 0.0, 6.4, 1))


def hand_round(**kw: Any) -> TrainingPackingRound:
    args: dict[str, Any] = dict(cluster=lina_cluster(8), experts=8, candidates=HAND, memory_gb=40.0, base_gb=20.0,
                                expert_gb=8.0, swap_ms=0.5)
    args.update(kw)
    return TrainingPackingRound(**args)


def _through_json(problem: RoundProblem) -> RoundProblem:
    return RoundProblem.from_dict(json.loads(json.dumps(problem.to_dict())))


@pytest.mark.parametrize("problem", [hand_round(), hand_round(loads=(4.0, 3.0, 2.0, 1.0, 1.0, 1.0, 1.0, 2.0),
                                                              offload=False, max_experts_per_device=4),
                                     generate_packing_round(16, 3), generate_packing_round(4, 1, balanced=True)])
def test_round_json_round_trip(problem: TrainingPackingRound) -> None:
    back = _through_json(problem)
    assert isinstance(back, TrainingPackingRound) and back == problem
    assert back.to_dict() == problem.to_dict()
    assert back.setup == problem.setup


def test_jobs_may_be_left_out_and_defaults_apply() -> None:
    data = hand_round().to_dict()
    del data["jobs"]
    for key in ("memory_gb", "offload", "loads", "max_experts_per_device"):
        del data[key]
    for c in data["candidates"]:
        c.pop("micro_ops")
    back = RoundProblem.from_dict(data)
    assert isinstance(back, TrainingPackingRound)
    assert back.memory_gb == 40.0 and back.offload is True and back.loads is None
    assert [c.micro_ops for c in back.candidates] == [1, 1, 1, 1]


def test_integral_json_numbers_are_integers() -> None:
    data = hand_round(max_experts_per_device=4).to_dict()
    data["experts"], data["max_experts_per_device"] = 8.0, 4.0
    data["candidates"][1]["experts_per_device"], data["candidates"][1]["micro_ops"] = 2.0, 2.0
    assert RoundProblem.from_dict(data) == hand_round(max_experts_per_device=4)


def test_generator() -> None:
    r = round_kind("training-packing").generate(seed=0)
    assert isinstance(r, TrainingPackingRound) and r.experts == 16
    assert [c.experts_per_device for c in r.candidates] == [1, 2, 4, 8, 16]
    assert r.candidates[-1].a2a_ms == 0.0  # p = E: one group, no all-to-all
    assert generate_packing_round(16, 0) == r and generate_packing_round(16, 1) != r
    assert generate_packing_round(8, 0, balanced=True).loads is None
    assert not generate_packing_round(8, 0, offload=False).offload
    with pytest.raises(ValidationError, match="experts"):
        generate_packing_round(0, 0)


def _set(data: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(data)
    at = out
    for key in path[:-1]:
        at = at[key]
    at[path[-1]] = value
    return out


@pytest.mark.parametrize("path, value, field", [
    (("experts",), 0, "experts"),
    (("experts",), 2.5, "experts"),
    (("candidates",), {}, "candidates"),
    (("candidates", 1, "experts_per_device"), 3, "experts_per_device"),
    (("candidates", 0, "experts_per_device"), 16, "experts_per_device"),
    (("candidates", 0, "a2a_ms"), -1.0, "a2a_ms"),
    (("candidates", 0, "ffn_ms"), "1", "ffn_ms"),
    (("candidates", 0, "micro_ops"), 0, "micro_ops"),
    (("candidates", 0, "colour"), "red", "colour"),
    (("memory_gb",), 0.0, "memory_gb"),
    (("base_gb",), -1.0, "base_gb"),
    (("expert_gb",), float("inf"), "expert_gb"),
    (("swap_ms",), None, "swap_ms"),
    (("offload",), "yes", "offload"),
    (("loads",), [1.0, 2.0], "loads"),
    (("loads",), {"a": 1}, "loads"),
    (("max_experts_per_device",), 0, "max_experts_per_device"),
])
def test_bad_input_is_refused_naming_the_field(path: tuple[Any, ...], value: Any, field: str) -> None:
    with pytest.raises(ValidationError, match=field):
        RoundProblem.from_dict(_set(hand_round().to_dict(), path, value))


def test_missing_fields_jobs_and_small_clusters_are_refused() -> None:
    data = hand_round().to_dict()
    del data["candidates"]
    with pytest.raises(ValidationError, match="candidates"):
        RoundProblem.from_dict(data)
    with pytest.raises(ValidationError, match="experts 8 need as many devices"):
        hand_round(cluster=lina_cluster(4))
    with pytest.raises(ValidationError, match="offload is false"):
        hand_round(offload=False, base_gb=35.0)
    with pytest.raises(ValidationError, match="no jobs"):
        RoundProblem.from_dict({**hand_round().to_dict(), "jobs": [{"name": "j", "model": "gpt2",
                                                                    "requested_gpus": 1, "total_iterations": 1}]})

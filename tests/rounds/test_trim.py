"""The ``trim`` action of Rubick rounds (issue 16, item 5): a running job that keeps its plan and its GPUs
on the same nodes but gets other CPUs or memory is trimmed in place, for the round's ``trim_penalty``
instead of the reconfiguration penalty (optsched/rounds/rubick/problem.py, choice.py, objective.py,
decision.py). A hand-made round with its own coefficient rows (no performance model, so the numbers
are exact): a running job holds CPUs a queued job needs."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

import optsched
from optsched.core.decision import ACTIONS, Decision
from optsched.core.errors import ValidationError
from optsched.core.round import RoundProblem
from optsched.policies.registry import methods_of
from optsched.rounds.rubick.problem import DEFAULT_RECONFIG_PENALTY, TRIM_PENALTY_RATIO, RubickRound
from optsched.schemas import load_schema

from schema_check import structural_errors

#: the methods whose rules take CPUs from a running job (Algorithm 1 on any table, the exact round)
TRIMMING = ("exact", "rubick-exact", "heuristic", "rubick", "rubick-e", "rubick-r", "rubick-n")


def _row(cpus: int, thr: float) -> dict[str, Any]:
    return {"plan": {"dp": 4}, "gpu_type": "A800", "gpus_per_node": [4], "cpus": cpus, "mem_gib": 64.0,
            "throughput": thr}


def trim_round(nodes: int = 1, **fields: Any) -> dict[str, Any]:
    """Per node ``gpu-i`` (8 GPUs, 32 CPUs): job ``a-i`` runs 4 GPUs with 24 CPUs (104 samples/s; its
    request, 8 CPUs, gives 100) and queued job ``b-i`` asks for the other 4 GPUs with 16 CPUs (50
    samples/s, its only row). Only 8 CPUs are free: ``b-i`` starts only if ``a-i`` is trimmed to 8 CPUs.
    Trimmed: 100/100 + 50/50 - trim_penalty per node; kept: 104/100."""
    node_names = [f"gpu-{i}" for i in range(nodes)]
    jobs, running, coefficients = [], [], {}
    for i, node in enumerate(node_names):
        jobs += [{"name": f"a-{i}", "model": "bert", "requested_gpus": 4, "requested_cpus": 8,
                  "requested_plan": {"dp": 4}, "total_iterations": 1000},
                 {"name": f"b-{i}", "model": "bert", "requested_gpus": 4, "requested_cpus": 16,
                  "requested_plan": {"dp": 4}, "total_iterations": 1000, "submit_time": 10}]
        running.append({"job": f"a-{i}", "plan": {"dp": 4},
                        "placement": {node: {"gpus": 4, "cpus": 24, "mem_gb": 64}}})
        coefficients[f"a-{i}"] = [_row(8, 100.0), _row(24, 104.0)]
        coefficients[f"b-{i}"] = [_row(16, 50.0)]
    return {"kind": "rubick",
            "cluster": {"name": f"lab-{nodes}x8", "intra_node_gbps": 150.0, "inter_node_gbps": 80.0, "pcie_gbps": 20.0,
                        "gpu_types": [{"name": "A800", "memory_gib": 80.0, "peak_tflops": 312.0}],
                        "nodes": [{"name": n, "gpu_type": "A800", "num_gpus": 8, "num_cpus": 32, "memory_gib": 512.0}
                                  for n in node_names]},
            "jobs": jobs, "running": running, "coefficients": coefficients, **fields}


def _check_trimmed(d: Decision, problem: RubickRound, nodes: int = 1) -> None:
    for i in range(nodes):
        a, b = d.job(f"a-{i}"), d.job(f"b-{i}")
        assert a.action == "trim" and a.penalty == problem.trim_penalty, (d.method, a)
        assert a.allocation is not None and a.allocation.plan == problem.current(f"a-{i}").plan
        assert a.allocation.placement.to_dict() == {f"gpu-{i}": {"gpus": 4, "cpus": 8, "mem_gb": 64.0}}
        assert b.action == "start" and b.allocation.placement.total_cpus == 16
    assert d.objective == pytest.approx(nodes * (1.0 + 1.0 - problem.trim_penalty), abs=1e-9)


@pytest.mark.parametrize("method", methods_of("rubick"))
def test_every_method_trims_a_running_job_another_job_needs(method: str) -> None:
    """Algorithm 1 (every table) and the exact round trim ``a`` in place (action ``trim``, the trim
    penalty in its ``penalty`` and in the objective, 1 + 1 - 0.005) and start ``b``; the baselines never
    take CPUs from a running job by their rules (FIFO, AntMan and Sia keep running jobs, Synergy only
    adds CPUs), so ``a`` is kept and ``b`` waits. No method calls a CPU-only change a reconfiguration.
    Every decision validates against the decision schema."""
    problem = RoundProblem.from_dict(trim_round())
    assert isinstance(problem, RubickRound) and problem.trim_penalty == 0.005
    d = optsched.solve(problem, method, 20.0)
    assert structural_errors("decision", json.loads(json.dumps(d.to_dict()))) == []
    assert all(x.action != "reconfigure" for x in d.jobs)
    if method in TRIMMING:
        _check_trimmed(d, problem)
        assert d.status in ("optimal", "heuristic")
    else:
        assert d.job("a-0").action == "keep" and d.job("b-0").action == "wait"
        assert d.objective == pytest.approx(1.04)


@pytest.mark.parametrize("backend", ["cbc"])
def test_the_milp_back_end_trims_too(backend: str) -> None:
    problem = RoundProblem.from_dict(trim_round(trim_penalty=0.02))
    d = optsched.solve(problem, "exact", 20.0, backend=backend)
    _check_trimmed(d, problem)
    assert d.objective == pytest.approx(1.98)


def test_partitioned_solving_keeps_the_trims() -> None:
    """Two nodes in two parts: each part trims its running job; the merged objective charges the trim
    penalty of each (2 x (2 - 0.005))."""
    problem = RoundProblem.from_dict(trim_round(nodes=2))
    d = optsched.solve(problem, "heuristic", 30.0, partitions=2)
    _check_trimmed(d, problem, nodes=2)


def test_a_trim_nobody_needs_is_undone() -> None:
    """Without ``b`` nobody needs ``a``'s CPUs: every method keeps ``a`` exactly (no trim penalty), although
    its request row has fewer CPUs."""
    data = trim_round()
    data["jobs"] = [j for j in data["jobs"] if j["name"] != "b-0"]
    del data["coefficients"]["b-0"]
    problem = RoundProblem.from_dict(data)
    for method in ("exact", "heuristic", "rubick-n"):
        d = optsched.solve(problem, method, 20.0)
        assert d.job("a-0").action == "keep" and d.job("a-0").penalty == 0.0
        assert d.objective == pytest.approx(1.04)


def test_trim_is_dearer_than_keeping_when_its_penalty_exceeds_the_gain() -> None:
    """With a trim penalty of 1.0 (and a reconfiguration penalty of 2.0) starting ``b`` is worth 1.0 - 0.04
    - 1.0 < 0: every trimming method keeps ``a`` and ``b`` waits."""
    problem = RoundProblem.from_dict(trim_round(reconfig_penalty=2.0, trim_penalty=1.0))
    for method in ("exact", "heuristic"):
        d = optsched.solve(problem, method, 20.0)
        assert d.job("a-0").action == "keep" and d.job("b-0").action == "wait"
        assert d.objective == pytest.approx(1.04)


def test_trim_penalty_default_json_and_validation() -> None:
    data = trim_round()
    p = RoundProblem.from_dict(data)
    assert p.trim_penalty == DEFAULT_RECONFIG_PENALTY / TRIM_PENALTY_RATIO == 0.005
    assert p.to_dict()["trim_penalty"] == 0.005
    assert RoundProblem.from_dict(json.loads(json.dumps(p.to_dict()))) == p
    assert RoundProblem.from_dict(trim_round(reconfig_penalty=0.2)).trim_penalty == pytest.approx(0.02)
    assert RoundProblem.from_dict(trim_round(trim_penalty=0.0)).trim_penalty == 0.0
    assert RoundProblem.from_dict(trim_round(reconfig_penalty=0.1, trim_penalty=0.1)).trim_penalty == 0.1
    for bad, match in (({"trim_penalty": -0.01}, "trim_penalty must be >= 0"),
                       ({"trim_penalty": 0.06}, r"trim_penalty \(0.06\) must be <= reconfig_penalty \(0.05\)"),
                       ({"trim_penalty": "small"}, "trim_penalty must be a finite number")):
        with pytest.raises(ValidationError, match=match):
            RoundProblem.from_dict(trim_round(**bad))
    good = trim_round(trim_penalty=0.01)
    assert structural_errors("round", good) == []
    bad_json = copy.deepcopy(good)
    bad_json["trim_penalty"] = -1
    assert structural_errors("round", bad_json)


def test_the_schemas_know_the_trim_action_and_penalty() -> None:
    enum = load_schema("decision")["$defs"]["jobDecision"]["properties"]["action"]["enum"]
    assert "trim" in enum and enum == list(ACTIONS)
    rubick = next(b["then"] for b in load_schema("round")["allOf"]
                  if b["if"]["properties"]["kind"].get("const") == "rubick")
    assert rubick["properties"]["trim_penalty"]["minimum"] == 0
    d = optsched.solve(RoundProblem.from_dict(trim_round()), "heuristic", 10.0)
    back = Decision.from_dict(json.loads(json.dumps(d.to_dict())))
    assert back.job("a-0").action == "trim" and back.job("a-0").penalty == 0.005

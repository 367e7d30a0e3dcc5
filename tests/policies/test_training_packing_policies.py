"""The methods of the ``training-packing`` kind (optsched/policies/training_packing.py) through
``optsched.solve``: the hand case of tests/formulations/test_training_packing.py gives the rule's ``p`` with
``heuristic``/``lina`` and the exact's with ``exact``; ``exact`` is never worse than the rule on generated
rounds and every decision passes a check written here (not the kind's ``check_plan``); decisions read back
equal from JSON.

The hand case with ``swap_ms`` 2 (8 experts, 2 resident): the rule packs 4 (FFN micro-op 3.2 > all-to-all
micro-op 1.2 there), layer ``5.6 + 2 x 2 = 9.6`` ms; the exact packs 2, ``8.8`` ms (``p = 1``: 12.27;
``p = 8``: ``6.4 + 6 x 2 = 18.4``)."""

from __future__ import annotations

import json
import time

import pytest

import optsched
from optsched.core.decision import Decision
from optsched.core.errors import ValidationError
from optsched.perf.training_packing import PackingCandidate
from optsched.rounds.experts.generate import lina_cluster
from optsched.rounds.training_packing import TrainingPackingRound, generate_packing_round

HAND = (PackingCandidate(1, 6.0, 0.8, 3), PackingCandidate(2, 4.0, 1.6, 2), PackingCandidate(4, 1.2, 3.2, 1),
        PackingCandidate(8, 0.0, 6.4, 1))


def hand_round(**kw: object) -> TrainingPackingRound:
    """The hand case of tests/formulations/test_training_packing.py as a round."""
    args: dict[str, object] = dict(cluster=lina_cluster(8), experts=8, candidates=HAND, memory_gb=40.0,
                                   base_gb=20.0, expert_gb=8.0, swap_ms=0.5)
    args.update(kw)
    return TrainingPackingRound(**args)  # type: ignore[arg-type]


def _check(problem: TrainingPackingRound, d: Decision) -> None:
    """Feasibility and layer time recomputed from the round's fields (module docstring)."""
    pay = d.payload
    p, E = pay.experts_per_device, problem.experts
    cands = {c.experts_per_device: c for c in problem.candidates}
    assert p in cands and E % p == 0 and pay.group_devices == E // p
    assert problem.max_experts_per_device is None or p <= problem.max_experts_per_device
    assert sorted(e for s in pay.sets for e in s) == list(range(E)) and all(len(s) == p for s in pay.sets)
    resident = E if problem.expert_gb == 0 else int((problem.memory_gb - problem.base_gb) // problem.expert_gb)
    assert pay.offloaded == max(0, p - resident)
    assert problem.offload or pay.offloaded == 0
    loads = problem.loads or (1.0,) * E
    lam = max(sum(loads[e] for e in s) for s in pay.sets) / sum(loads) * E / p
    c = cands[p]
    m = c.micro_ops
    a, f = c.a2a_ms / m, c.ffn_ms / m
    pipe = c.ffn_ms if c.a2a_ms == 0 else a + f + (m - 1) * max(a, f) + c.a2a_ms
    assert pay.layer_ms == pytest.approx(lam * pipe + problem.swap_ms * pay.offloaded)
    assert pay.imbalance == pytest.approx(lam)
    assert d.objective == pytest.approx(-pay.layer_ms)
    assert d.bound is None or d.bound >= d.objective - 1e-9


@pytest.mark.parametrize("method", ["heuristic", "lina"])
def test_hand_case_heuristic_gives_the_rules_p(method: str) -> None:
    problem = hand_round(swap_ms=2.0)
    d = optsched.solve(problem, method, 5.0)
    _check(problem, d)
    assert d.status == "heuristic" and d.payload.experts_per_device == 4
    assert d.payload.sets == ((0, 1, 2, 3), (4, 5, 6, 7)) and d.payload.offloaded == 2
    assert d.objective == pytest.approx(-9.6) and d.heuristic_objective == pytest.approx(-9.6)


def test_hand_case_exact_gives_the_exacts_p() -> None:
    problem = hand_round(swap_ms=2.0)
    d = optsched.solve(problem, "exact", 5.0)
    _check(problem, d)
    assert d.status == "optimal" and d.payload.experts_per_device == 2 and d.payload.offloaded == 0
    assert d.objective == pytest.approx(-8.8) and d.bound == pytest.approx(-8.8) and d.gap == 0.0
    assert d.heuristic_objective == pytest.approx(-9.6) and d.warm_start
    # the default swap (0.5 ms): both pack 4, 5.6 + 2 x 0.5
    assert optsched.solve(hand_round(), "exact", 5.0).objective == pytest.approx(-6.6)


def test_exact_balances_unequal_loads_through_solve() -> None:
    # loads 4:3:2:1 (x2): consecutive pairs put 7 of 20 on a device (lambda 1.4); the best pairs 5 of 20 each
    problem = hand_round(swap_ms=2.0, loads=(4.0, 3.0, 2.0, 1.0, 4.0, 3.0, 2.0, 1.0), max_experts_per_device=2)
    h, x = optsched.solve(problem, "heuristic", 5.0), optsched.solve(problem, "exact", 5.0)
    _check(problem, h)
    _check(problem, x)
    assert h.payload.experts_per_device == x.payload.experts_per_device == 2
    assert h.payload.imbalance == pytest.approx(1.4) and x.payload.imbalance == pytest.approx(1.0)
    assert x.objective == pytest.approx(-8.8) and h.objective == pytest.approx(-8.8 * 1.4)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("experts", [4, 8, 16])
def test_exact_is_never_worse_than_the_heuristic(seed: int, experts: int) -> None:
    problem = generate_packing_round(experts, seed, offload=seed % 3 != 0)
    h, x = optsched.solve(problem, "heuristic", 5.0), optsched.solve(problem, "exact", 5.0, 0)
    _check(problem, h)
    _check(problem, x)
    assert x.objective >= h.objective - 1e-9
    assert x.heuristic_objective == pytest.approx(h.objective)
    assert x.status in ("optimal", "heuristic-fallback", "feasible")


@pytest.mark.parametrize("method", ["heuristic", "exact"])
def test_decision_json_round_trip(method: str) -> None:
    d = optsched.solve(generate_packing_round(8, 2), method, 5.0)
    data = json.loads(json.dumps(d.to_dict()))
    back = Decision.from_dict(data)
    assert back == d and back.to_dict() == d.to_dict()
    data["sets"][0][0] = "x"
    with pytest.raises(ValidationError, match="expert"):
        Decision.from_dict(data)


def test_the_time_limit_holds_on_a_large_round() -> None:
    problem = generate_packing_round(256, 0)
    t0 = time.perf_counter()
    d = optsched.solve(problem, "exact", 0.5)
    assert time.perf_counter() - t0 <= 0.5 + 1.5
    _check(problem, d)
    assert d.objective >= d.heuristic_objective - 1e-9

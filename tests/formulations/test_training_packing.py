"""Expert packing for training (thesis Sec. 4.4.2): the rule (optsched/heuristics/lina_packing.py) on a
hand-computed case, the exact counterpart (optsched/formulations/training_packing.py) against brute force
on tiny setups and never worse than the rule, and bad input rejected naming the field.

The hand case (8 experts on 8 devices; per candidate ``p``: one all-to-all alone ``A``, the device's FFN
``F``, micro-ops ``m``; micro-op times ``A / m`` and ``F / m``):

====  =====  =====  ===  ===========  ===========  ===========================================
p     A ms   F ms   m    a2a micro    FFN micro    balanced layer ms: a + f + (m-1) max(a,f) + A
====  =====  =====  ===  ===========  ===========  ===========================================
1     6.0    0.8    3    2.0          0.2667       2 + 0.2667 + 2 x 2 + 6 = 12.2667
2     4.0    1.6    2    2.0          0.8          2 + 0.8 + 1 x 2 + 4 = 8.8
4     1.2    3.2    1    1.2          3.2          1.2 + 3.2 + 0 + 1.2 = 5.6
8     0.0    6.4    1    0.0          6.4          no all-to-all: F = 6.4
====  =====  =====  ===  ===========  ===========  ===========================================

The rule: at p = 1 the FFN micro-op (0.2667) does not exceed the all-to-all micro-op (2.0): p = 2; there
0.8 <= 2.0: p = 4; there 3.2 > 1.2: the FFN exceeds, stop at **p = 4**. Memory 40 GB, 20 GB base, 8 GB
an expert: floor((40 - 20) / 8) = 2 experts resident, so p = 4 offloads 2 and p = 8 offloads 6.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from optsched.core.errors import ValidationError
from optsched.formulations.training_packing import best_sets, solve_packing
from optsched.heuristics.lina_packing import packing_rule, packing_rule_steps
from optsched.perf.training_packing import (PackingCandidate, PackingPlan, PackingSetup, check_plan,
                                            consecutive_sets, layer_ms)

HAND = (PackingCandidate(1, 6.0, 0.8, 3), PackingCandidate(2, 4.0, 1.6, 2), PackingCandidate(4, 1.2, 3.2, 1),
        PackingCandidate(8, 0.0, 6.4, 1))


def hand(**kw) -> PackingSetup:
    args = dict(experts=8, candidates=HAND, memory_gb=40.0, base_gb=20.0, expert_gb=8.0, swap_ms=0.5)
    args.update(kw)
    return PackingSetup(**args)


def test_rule_on_the_hand_case_picks_four() -> None:
    steps = packing_rule_steps(hand())
    assert [s.experts_per_device for s in steps] == [1, 2, 4]
    assert [s.ffn_exceeds for s in steps] == [False, False, True]
    assert steps[0].ffn_micro_ms == pytest.approx(0.8 / 3) and steps[0].a2a_micro_ms == pytest.approx(2.0)
    plan = packing_rule(hand())
    assert plan == PackingPlan(4, ((0, 1, 2, 3), (4, 5, 6, 7)), offloaded=2)
    assert layer_ms(hand(), plan) == pytest.approx(5.6 + 2 * 0.5)


def test_hand_layer_times() -> None:
    s = hand(swap_ms=0.0, expert_gb=0.0)
    got = {p: layer_ms(s, PackingPlan(p, consecutive_sets(8, p))) for p in (1, 2, 4, 8)}
    assert got == pytest.approx({1: 2 + 0.8 / 3 + 4 + 6, 2: 8.8, 4: 5.6, 8: 6.4})


def test_rule_without_offloading_stops_at_memory() -> None:
    # 2 experts fit; p = 4 would need offloading, which offload=False (ours) forbids: the rule stops at 2
    assert packing_rule(hand(offload=False)).experts_per_device == 2


def test_rule_respects_max_and_missing_candidates() -> None:
    assert packing_rule(hand(max_experts_per_device=2)).experts_per_device == 2
    assert packing_rule(hand(candidates=HAND[:1])).experts_per_device == 1


def test_rule_stops_when_there_is_no_all_to_all() -> None:
    # FFN never exceeds the all-to-all until p = 8 (no all-to-all): the rule goes to 8
    cands = (PackingCandidate(1, 6.0, 0.8, 3), PackingCandidate(2, 4.0, 0.8, 2), PackingCandidate(4, 2.0, 0.8, 1),
             PackingCandidate(8, 0.0, 0.8, 1))
    assert packing_rule(hand(candidates=cands)).experts_per_device == 8


def test_exact_on_the_hand_case() -> None:
    r = solve_packing(hand(), fallback=packing_rule(hand()))
    assert r.status == "optimal" and r.plan.experts_per_device == 4 and r.layer_ms == pytest.approx(6.6)
    assert dict(r.by_p) == pytest.approx({1: 2 + 0.8 / 3 + 10, 2: 8.8, 4: 6.6, 8: 6.4 + 3.0})
    # a dear swap: the rule still packs 4 (it does not see the cost), the exact packs 2 (8.8 < 5.6 + 2 x 2)
    r = solve_packing(hand(swap_ms=2.0), fallback=packing_rule(hand(swap_ms=2.0)))
    assert packing_rule(hand(swap_ms=2.0)).experts_per_device == 4
    assert r.plan.experts_per_device == 2 and r.layer_ms == pytest.approx(8.8)
    assert r.heuristic_ms == pytest.approx(9.6)


def test_exact_balances_unequal_loads() -> None:
    # 4 experts, loads 4:3:2:1 packed 2 per device; consecutive {0,1},{2,3}: 0.7 of the tokens on one device,
    # lambda = 0.7 x 4 / 2 = 1.4; the best {0,3},{1,2}: 0.5 each, lambda = 1
    cands = (PackingCandidate(1, 3.0, 0.5, 1), PackingCandidate(2, 1.0, 2.0, 1))
    s = PackingSetup(4, cands, loads=(4.0, 3.0, 2.0, 1.0))
    assert layer_ms(s, packing_rule(s)) == pytest.approx(1.4 * (1 + 2 + 1))
    r = solve_packing(s, fallback=packing_rule(s))
    assert r.plan.experts_per_device == 2 and sorted(map(sorted, r.plan.sets)) == [[0, 3], [1, 2]]
    assert r.layer_ms == pytest.approx(4.0)


def partitions(items: list[int], size: int):
    """Every partition of ``items`` into sets of ``size`` (brute force)."""
    if not items:
        yield ()
        return
    first, rest = items[0], items[1:]
    for mates in itertools.combinations(rest, size - 1):
        left = [e for e in rest if e not in mates]
        for tail in partitions(left, size):
            yield ((first, *mates), *tail)


def random_setup(rng: np.random.Generator, experts: int) -> PackingSetup:
    cands = []
    p = 1
    while p <= experts:
        a2a = 0.0 if p == experts else float(rng.uniform(0.5, 6.0))
        cands.append(PackingCandidate(p, a2a, float(rng.uniform(0.2, 2.0) * p ** rng.uniform(0, 1)),
                                      int(rng.integers(1, 4))))
        p *= 2
    loads = tuple(float(x) for x in rng.integers(1, 10, experts)) if rng.random() < 0.8 else None
    return PackingSetup(experts, tuple(cands), memory_gb=40.0, base_gb=float(rng.uniform(0, 20)),
                        expert_gb=float(rng.uniform(0, 12)), swap_ms=float(rng.uniform(0, 2)),
                        offload=bool(rng.random() < 0.7), loads=loads)


def brute_force(setup: PackingSetup) -> float:
    best = np.inf
    for c in setup.candidates:
        p = c.experts_per_device
        if not setup.allowed(p):
            continue
        for sets in partitions(list(range(setup.experts)), p):
            plan = PackingPlan(p, sets, setup.offloaded(p))
            assert check_plan(setup, plan) == []
            best = min(best, layer_ms(setup, plan))
    return best


@pytest.mark.parametrize("seed", range(12))
def test_exact_equals_brute_force_and_beats_the_rule(seed: int) -> None:
    rng = np.random.default_rng(seed)
    setup = random_setup(rng, int(rng.choice([2, 4, 8])))
    r = solve_packing(setup, fallback=packing_rule(setup))
    assert check_plan(setup, r.plan) == []
    assert r.layer_ms == pytest.approx(layer_ms(setup, r.plan))
    # quantised loads: optimal up to p / RESOLUTION of the total share (module docstring)
    assert r.layer_ms == pytest.approx(brute_force(setup), rel=1e-5)
    rule_ms = layer_ms(setup, packing_rule(setup))
    assert r.heuristic_ms == pytest.approx(rule_ms)
    assert r.layer_ms <= rule_ms + 1e-9


@pytest.mark.parametrize("seed", range(6))
def test_partition_equals_brute_force(seed: int) -> None:
    # the middle packings (2 and 4 of 8 experts), where which experts share a device matters
    rng = np.random.default_rng(100 + seed)
    setup = PackingSetup(8, HAND, loads=tuple(float(x) for x in rng.integers(1, 20, 8)))
    for p in (2, 4):
        sets, optimal = best_sets(setup, p)
        w = setup.shares
        best = min(max(w[list(s)].sum() for s in part) for part in partitions(list(range(8)), p))
        assert optimal and max(w[list(s)].sum() for s in sets) == pytest.approx(best, abs=p / 1e6)
        assert sorted(e for s in sets for e in s) == list(range(8))


@pytest.mark.parametrize("kw, field", [
    (dict(candidates=(PackingCandidate(1, 1.0, 1.0), PackingCandidate(3, 1.0, 1.0))), "experts_per_device"),
    (dict(candidates=(PackingCandidate(2, 1.0, 1.0),)), "experts_per_device 1"),
    (dict(candidates=(PackingCandidate(1, -1.0, 1.0),)), "a2a_ms"),
    (dict(candidates=(PackingCandidate(1, 1.0, float("nan")),)), "ffn_ms"),
    (dict(candidates=(PackingCandidate(1, 1.0, 1.0, 0),)), "micro_ops"),
    (dict(candidates=(PackingCandidate(1, 1.0, 1.0), PackingCandidate(1, 2.0, 1.0))), "given twice"),
    (dict(loads=(1.0, 2.0)), "loads"),
    (dict(loads=(1.0,) * 7 + (-1.0,)), "load"),
    (dict(loads=(0.0,) * 8), "loads"),
    (dict(memory_gb=0.0), "memory_gb"),
    (dict(expert_gb=-1.0), "expert_gb"),
    (dict(swap_ms=float("inf")), "swap_ms"),
    (dict(max_experts_per_device=0), "max_experts_per_device"),
    (dict(offload=False, base_gb=35.0, expert_gb=8.0), "offload is false"),
    (dict(experts=0), "experts"),
])
def test_bad_input_is_rejected_naming_the_field(kw: dict, field: str) -> None:
    with pytest.raises(ValidationError, match=field):
        hand(**kw)


def test_infeasible_plan_is_rejected() -> None:
    with pytest.raises(ValidationError, match="every expert"):
        layer_ms(hand(), PackingPlan(2, ((0, 1), (0, 2), (4, 5), (6, 7))))
    with pytest.raises(ValidationError, match="offloaded"):
        layer_ms(hand(), PackingPlan(4, consecutive_sets(8, 4), offloaded=0))


def test_a_better_fallback_is_returned(monkeypatch: pytest.MonkeyPatch) -> None:
    # a partition solve that stopped on the consecutive sets (as at a time limit): the balanced fallback wins
    import optsched.formulations.training_packing as tp

    cands = (PackingCandidate(1, 3.0, 0.5, 1), PackingCandidate(2, 1.0, 2.0, 1))
    s = PackingSetup(4, cands, loads=(4.0, 3.0, 2.0, 1.0), max_experts_per_device=2)
    monkeypatch.setattr(tp, "best_sets", lambda setup, p, **kw: (consecutive_sets(setup.experts, p), False))
    good = PackingPlan(2, ((0, 3), (1, 2)))
    r = tp.solve_packing(s, fallback=good)
    assert r.status == "heuristic-fallback" and r.plan == good and r.layer_ms == pytest.approx(4.0)
    assert tp.solve_packing(s).status == "feasible"

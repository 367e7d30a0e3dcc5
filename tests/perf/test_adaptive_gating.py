"""Adaptive gating (optsched/perf/adaptive_gating.py, thesis Sec. 5.3): the top-1/top-2 rule, its
threshold check, expert loads, the layer-time model calibrated on Table 5.1, complexity vectors, the
cosine-similarity order and the per-batch straggler cost."""

from __future__ import annotations

import math

import numpy as np
import pytest

from optsched.core.errors import ValidationError
from optsched.perf.adaptive_gating import (LayerCost, adaptive_route, adaptive_routes, batch_time, complexity_vectors,
                                           curriculum_order, expert_loads, layer_factors, synthetic_gate_probs)


@pytest.mark.parametrize(("row", "threshold", "two"), [
    ([0.5, 0.25, 0.25], 0.25, True),    # difference exactly T: within the threshold
    ([0.5, 0.25, 0.25], 0.2499, False),
    ([0.4, 0.4, 0.2], 0.0, True),       # a tie is within any threshold
    ([0.9, 0.05, 0.05], 1.0, True),     # T = 1: top-2 gating
    ([0.9, 0.05, 0.05], 0.0, False),    # T = 0: top-1 gating
])
def test_two_experts_exactly_when_the_difference_is_within_t(row: list[float], threshold: float, two: bool) -> None:
    d = adaptive_route(np.array([row]), threshold)
    assert bool(d.two[0]) is two and d.top1[0] == 0 and d.top2[0] == 1


def test_rule_on_random_tokens_matches_its_definition() -> None:
    p = synthetic_gate_probs(4, 32, 3, 8, seed=1)
    for t in (0.0, 0.1, 0.3):
        d = adaptive_route(p, t)
        s = np.sort(p, axis=-1)
        assert np.array_equal(d.two, s[..., -1] - s[..., -2] <= t)
        assert np.array_equal(d.top1, np.argmax(p, axis=-1))
    assert adaptive_route(p, 0.1).two_share < adaptive_route(p, 0.3).two_share


@pytest.mark.parametrize("threshold", [-0.1, 1.5, math.nan, "0.2", None])
def test_threshold_outside_0_1_is_an_error(threshold: object) -> None:
    with pytest.raises(ValidationError, match="threshold T"):
        adaptive_route(np.array([[0.6, 0.4]]), threshold)  # type: ignore[arg-type]


def test_bad_probabilities() -> None:
    with pytest.raises(ValidationError, match="token 1 .* sum to 1, got sum 0.9"):
        adaptive_route(np.array([[0.6, 0.4], [0.5, 0.4]]), 0.1)
    with pytest.raises(ValidationError, match="top-k 2 is larger than the number of experts"):
        adaptive_route(np.array([[1.0]]), 0.1)


def test_expert_loads_count_both_choices() -> None:
    p = np.array([[0.5, 0.45, 0.05], [0.1, 0.8, 0.1], [0.25, 0.25, 0.5]])
    d = adaptive_route(p, 0.25)  # token 0: experts 0 and 1; token 1: expert 1; token 2: 2 and 0
    assert list(expert_loads(d)) == [2, 2, 1] and d.computation == pytest.approx((1 + 2 / 3) / 2)


def test_layer_cost_is_calibrated_on_table_5_1() -> None:
    cost = LayerCost()
    assert cost.time(0.0) / cost.top2_ms == pytest.approx(0.67)
    assert LayerCost.calibrated(2.0, 0.8).time(0.0) / LayerCost.calibrated(2.0, 0.8).top2_ms == pytest.approx(0.8)
    with pytest.raises(ValidationError, match="top1_ratio must be below 1"):
        LayerCost.calibrated(1.0, 1.0)


def test_complexity_vectors_and_lengths() -> None:
    two = np.zeros((2, 4, 2), dtype=bool)
    two[0, :2, 0] = True   # sample 0: half its tokens at layer 0
    two[1, 0, 1] = True    # sample 1 (3 tokens): one at layer 1
    two[1, 3, :] = True    # padding, not counted
    c = complexity_vectors(two, np.array([4, 3]))
    assert np.allclose(c, [[0.5, 0.0], [0.0, 1 / 3]])
    with pytest.raises(ValidationError, match="lengths must be 1..4"):
        complexity_vectors(two, np.array([5, 3]))


def test_cosine_order_starts_with_the_simplest_sample() -> None:
    c = np.array([[0.4, 0.4], [0.1, 0.0], [0.0, 0.5], [0.3, 0.1], [0.6, 0.0]])
    # anchor: sample 1 (fewest two-expert tokens); cosine to (1, 0): 4 -> 1, 3 -> 0.949, 0 -> 0.707, 2 -> 0
    assert list(curriculum_order(c)) == [1, 4, 3, 0, 2]
    zeros = np.array([[0.2, 0.0], [0.0, 0.0], [0.1, 0.1], [0.0, 0.0]])
    assert list(curriculum_order(zeros)) == [1, 3, 0, 2]  # zero vectors first, then by two-expert tokens


def test_batch_time_and_straggler_cost() -> None:
    cost = LayerCost(per_expert_ms=1.0, fixed_ms=0.0)
    c = np.array([[0.0], [1.0], [0.0], [1.0]])
    mixed, mixed_strag = batch_time(c, np.array([0, 1, 2, 3]), 2, cost)
    grouped, grouped_strag = batch_time(c, np.array([0, 2, 1, 3]), 2, cost)
    assert (mixed, mixed_strag) == (4.0, 1.0) and (grouped, grouped_strag) == (3.0, 0.0)


def test_routes_at_many_thresholds_and_shared_layer_factors() -> None:
    p = synthetic_gate_probs(3, 8, 2, 4, seed=2)
    many = adaptive_routes(p, (0.0, 0.2, 1.0))
    for t, d in zip((0.0, 0.2, 1.0), many):
        assert np.array_equal(d.two, adaptive_route(p, t).two)
    assert many[2].two.all()
    factor = layer_factors(2, seed=5)
    a = synthetic_gate_probs(3, 8, 2, 4, seed=2, layer_factor=factor)
    b = synthetic_gate_probs(3, 8, 2, 4, seed=2, layer_factor=factor * 1.0)
    assert np.array_equal(a, b) and not np.array_equal(a, p)
    with pytest.raises(ValidationError, match="layer_factor must be 2 positive numbers"):
        synthetic_gate_probs(3, 8, 2, 4, seed=2, layer_factor=np.array([1.0, -1.0]))


def test_balance_loss_of_eq_5_4_by_hand() -> None:
    """Eq. 5.4, L = E sum_e f_e^1 p_e, on 4 tokens and 3 experts at T = 0.2 (by hand):
    gaps 0.5, 0.1, 0.3, 0.4, so only token 1 goes to two experts; the single-expert tokens 0, 2, 3 go to experts
    0, 1, 2: f^1 = (1/3, 1/3, 1/3). Mean probabilities p = (1.5, 1.4, 1.1) / 4 = (0.375, 0.35, 0.275), so
    L = 3 x (1/3) x 1.0 = 1.0. Counting every token's top-1 choice instead (top-1 of token 1 is expert 0):
    f = (0.5, 0.25, 0.25), L = 3 x (0.1875 + 0.0875 + 0.06875) = 1.03125."""
    from optsched.core.errors import UnknownNameError
    from optsched.perf.adaptive_gating import balance_loss

    probs = np.array([[0.7, 0.2, 0.1], [0.5, 0.4, 0.1], [0.1, 0.6, 0.3], [0.2, 0.2, 0.6]])
    d = adaptive_route(probs, 0.2)
    assert d.two.tolist() == [False, True, False, False]
    assert balance_loss(probs, d) == pytest.approx(1.0)
    assert balance_loss(probs, d, among="all") == pytest.approx(1.03125)
    # every token to two experts: no token is counted
    assert balance_loss(probs, adaptive_route(probs, 1.0)) == 0.0
    # all tokens on one expert with all the probability: E x 1 x 1
    skewed = np.tile([1.0, 0.0, 0.0], (5, 1))
    assert balance_loss(skewed, adaptive_route(skewed, 0.0)) == pytest.approx(3.0)
    with pytest.raises(UnknownNameError, match="among"):
        balance_loss(probs, d, among="top2")
    with pytest.raises(ValidationError, match="do not match"):
        balance_loss(probs[:3], d)

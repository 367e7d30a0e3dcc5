"""Lina's popularity estimation (optsched/perf/expert_popularity.py, Sec. 4.5.2): Eq. 4.1 on a
hand-computed batch, back-off for unseen paths, the phase-two check, and estimation on synthetic
routing that is better than guessing."""

from __future__ import annotations

import numpy as np
import pytest

from optsched.core.errors import ValidationError
from optsched.perf.expert_popularity import (device_counts, estimate_accurate, estimate_popularity,
                                             needs_fine_tuning, path_distributions, profile_paths, top_list)
from optsched.perf.moe_routing import RoutingTrace, SyntheticRouter


def _profile_trace() -> RoutingTrace:
    # layer 0 -> layer 1: three tokens 0 -> 1, one token 0 -> 2, two tokens 1 -> 3 (layer 2 is filler)
    pairs = [(0, 1), (0, 1), (0, 1), (0, 2), (1, 3), (1, 3)]
    choices = np.array([[a, b, 0] for a, b in pairs])
    return RoutingTrace(choices, np.zeros(len(pairs), dtype=int), 4)


def test_eq_4_1_on_a_hand_computed_batch() -> None:
    profile = profile_paths(_profile_trace(), path_length=1)
    assert np.allclose(profile.tables[0][0].dist, [[0, 0.75, 0.25, 0], [0, 0, 0, 1]])
    batch = np.array([[0], [0], [1], [2]])  # the last path was never profiled: the layer-1 marginal answers
    assert np.allclose(path_distributions(profile, batch, 0)[3], [0, 3 / 6, 1 / 6, 2 / 6])
    # k = 1: tokens 1-2 give expert 1 0.75 each, token 3 expert 3 1.0, token 4 expert 1 0.5 -> / 4
    pop = estimate_popularity(profile, batch, 0, k=1)
    assert np.allclose(pop, [0, 0.5, 0, 0.25])
    assert np.allclose(device_counts(pop, 8), [0, 4, 0, 2])
    # k = 2 adds expert 2 (0.25 twice) and expert 3 from the marginal (1/3)
    pop2 = estimate_popularity(profile, batch, 0, k=2)
    assert np.allclose(pop2, [0, 0.5, 0.125, (1 + 1 / 3) / 4])
    assert np.allclose(device_counts(pop2, 8), [0, 4, 1, 8 * (1 + 1 / 3) / 4])


def test_longest_profiled_suffix_answers() -> None:
    router = SyntheticRouter.create(6, 5, seed=0)
    trace = router.sample(4, 500, seed=0)
    profile = profile_paths(trace, path_length=3)
    assert profile.first_estimated_layer == 3 and len(profile.tables[3]) == 3 and len(profile.tables[0]) == 1
    # a path seen in profiling gets its own distribution
    tok = trace.top1[:1]
    table = profile.tables[3][2]
    code = (tok[0, 1] * 6 + tok[0, 2]) * 6 + tok[0, 3]
    pos, found = table.lookup(np.array([code]))
    assert found[0] and np.allclose(path_distributions(profile, tok, 3)[0], table.dist[pos[0]])


def test_paths_predict_the_next_expert_better_than_the_layer_average() -> None:
    router = SyntheticRouter.create(16, 8, seed=4)
    profile = profile_paths(router.sample(16, 2048, seed=4), path_length=3)
    test = router.sample(4, 1024, seed=5)
    dist = path_distributions(profile, test.top1, 4)
    hit_path = np.mean(np.argmax(dist, axis=1) == test.top1[:, 5])
    hit_avg = np.mean(np.argmax(profile.marginals[5]) == test.top1[:, 5])
    assert hit_path > 0.38 and hit_path > 2 * hit_avg  # about the 42% of Fig. 4.9


def test_phase_two_compares_the_top_2k_lists() -> None:
    est = np.array([0.4, 0.3, 0.2, 0.1])
    assert top_list(est, 2) == (0, 1)
    assert not needs_fine_tuning(est, np.array([0.5, 0.2, 0.1, 0.2]), k=1)
    assert needs_fine_tuning(est, np.array([0.2, 0.5, 0.2, 0.1]), k=1, rule="ordered")  # same set, other order
    assert not needs_fine_tuning(est, np.array([0.2, 0.5, 0.2, 0.1]), k=1)  # the default reads it as a set
    assert needs_fine_tuning(est, np.array([0.4, 0.1, 0.2, 0.3]), k=1)
    assert not needs_fine_tuning(est, est[::-1][::-1], k=2)


def test_bad_estimation_input() -> None:
    profile = profile_paths(_profile_trace(), path_length=1)
    with pytest.raises(ValidationError, match="top-k 5 is larger than the number of experts"):
        estimate_popularity(profile, np.array([[0]]), 0, k=5)
    with pytest.raises(ValidationError, match="expert 7 does not exist"):
        estimate_popularity(profile, np.array([[7]]), 0)
    with pytest.raises(ValidationError, match="layer 2 has no next layer"):
        estimate_popularity(profile, np.array([[0, 1, 2]]), 2)
    with pytest.raises(ValidationError, match="path length 3 leaves no layer"):
        profile_paths(_profile_trace(), path_length=3)
    with pytest.raises(ValidationError, match="Eq. 4.1: popularity must be"):
        device_counts(np.array([0.5, -0.1]), 4)
    with pytest.raises(ValidationError, match="top-k 3 is larger"):
        needs_fine_tuning(np.ones(2), np.ones(2), k=3)


def test_a_large_batch_is_estimated_in_chunks_of_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 26: the estimate held a tokens x experts distribution three times over (1,000,000 tokens of 1,024
    experts: more than 24 GB, killed); a batch above ``ESTIMATE_CELLS`` is estimated a chunk of tokens at a time,
    to the same popularity up to the order of the sum."""
    import optsched.perf.expert_popularity as pop
    from optsched.perf.moe_routing import SyntheticRouter

    router = SyntheticRouter.create(16, 6, 0)
    profile = pop.profile_paths(router.sample(4, 512, 1), 2)
    batch = router.sample(1, 3000, 2)
    for k in (1, 2):
        whole = pop.estimate_popularity(profile, batch.top1, 3, k=k)
        monkeypatch.setattr(pop, "ESTIMATE_CELLS", 16 * 250)  # chunks of 250 tokens
        chunked = pop.estimate_popularity(profile, batch.top1, 3, k=k)
        monkeypatch.undo()
        assert np.allclose(chunked, whole, rtol=1e-12, atol=0)


@pytest.mark.parametrize("actual,k,same_set,same_order", [
    ([0.4, 0.3, 0.2, 0.1], 1, True, True),     # identical ranking
    ([0.3, 0.4, 0.2, 0.1], 1, True, False),    # the top two swapped: the same experts, another order
    ([0.4, 0.2, 0.3, 0.1], 1, False, False),   # expert 2 displaces expert 1
    ([0.4, 0.2, 0.2, 0.2], 1, True, True),     # a three-way tie for second: the lower expert number (1) wins
    ([0.1, 0.2, 0.3, 0.4], 2, True, False),    # k = 2: all four experts, reversed
    ([0.1, 0.2, 0.3, 0.4], 1, False, False),   # k = 1: top-2 (3, 2) against (0, 1)
])
def test_top_2k_rule_as_a_set_and_as_an_ordered_list_on_hand_cases(actual: list[float], k: int, same_set: bool,
                                                                  same_order: bool) -> None:
    """Sec. 4.5.2 "comparing the overall top-2k experts. If the two lists are identical": both readings
    (expert_popularity module docstring), hand-ranked; accuracy (Sec. 4.7.3.2) is the negation."""
    est = np.array([0.4, 0.3, 0.2, 0.1])
    act = np.array(actual)
    assert estimate_accurate(est, act, k=k, rule="set") is same_set
    assert estimate_accurate(est, act, k=k, rule="ordered") is same_order
    assert needs_fine_tuning(est, act, k=k, rule="set") is (not same_set)
    assert needs_fine_tuning(est, act, k=k) is (not same_set)  # the default rule is "set"
    with pytest.raises(ValidationError, match="rule must be one of set, ordered, got 'list'"):
        needs_fine_tuning(est, act, k=k, rule="list")

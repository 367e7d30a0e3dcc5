"""Lyra's two-phase allocation on the thesis' examples (Tables 3.2-3.4, Fig. 3.6), the knapsack dynamic
program against CP-SAT and brute force, and the baselines."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from lyra_cases import two_jobs

from optsched.formulations import lyra_mckp
from optsched.heuristics.lyra_allocate import mckp_dp, mckp_greedy, phase_one
from optsched.policies import make_policy
from optsched.rounds.lyra_allocate.items import Items, flexible_items
from optsched.rounds.lyra_allocate.jct import average_jct


def test_table_3_3_three_allocations() -> None:
    p = two_jobs(6, 300)
    for workers, avg in (({"A": 6, "B": 2}, 51.67), ({"A": 2, "B": 6}, 41.67), ({"A": 4, "B": 4}, 45.0)):
        assert average_jct(p.jobs, workers, 8) == pytest.approx(avg, abs=0.005)


def test_table_3_4_counter_example_and_lyra_favours_a() -> None:
    p = two_jobs(3, 300)
    assert average_jct(p.jobs, {"A": 3, "B": 5}, 8) == pytest.approx(62.0)
    assert average_jct(p.jobs, {"A": 2, "B": 6}, 8) == pytest.approx(63.33, abs=0.005)
    d = make_policy("lyra", kind="lyra-allocate").decide(p)
    workers = {c.job: c.workers for c in d.payload.counts}
    assert workers == {"A": 3, "B": 5}
    assert average_jct(p.jobs, workers, 8) == pytest.approx(62.0)
    assert d.objective == pytest.approx(50 + 36)  # A: 150 -> 100 s; B: 60 -> 24 s


def test_figure_3_6_items() -> None:
    p = two_jobs(3, 100 * 3, gpw_a=2)
    items = flexible_items(p, {"A": 2, "B": 2})
    a = items.group == items.jobs.index("A")
    b = items.group == items.jobs.index("B")
    assert items.weight[a].tolist() == [2] and items.value[a] == pytest.approx([50.0])
    assert items.weight[b].tolist() == [1, 2, 3, 4] and items.value[b] == pytest.approx([20, 30, 36, 40])


def test_phase_one_is_sjf_and_skips_what_does_not_fit() -> None:
    p = two_jobs(6, 300, capacity=4)
    first = phase_one(p)
    assert first.base == {"B": 2, "A": 2} and first.left["training"] == 0
    p3 = two_jobs(6, 300, capacity=3)
    first = phase_one(p3)
    assert first.base == {"B": 2} and first.waiting == ["A"]


def _random_items(rng: np.random.Generator, groups: int) -> Items:
    g, e, w, v = [], [], [], []
    for j in range(groups):
        n = int(rng.integers(1, 5))
        gpw = int(rng.choice([1, 2, 4]))
        g += [j] * n
        e += list(range(1, n + 1))
        w += [k * gpw for k in range(1, n + 1)]
        v += list(np.cumsum(rng.uniform(0, 100, n)))
    return Items(tuple(f"j{j}" for j in range(groups)), np.array(g), np.array(e), np.array(w), np.array(v))


@pytest.mark.parametrize("seed", range(6))
def test_dp_equals_cpsat_and_brute_force(seed: int) -> None:
    rng = np.random.default_rng(seed)
    items = _random_items(rng, 5)
    cap = int(rng.integers(3, 20))
    extra, value = mckp_dp(items, cap)
    assert items.value_of(extra) == pytest.approx(value)
    assert sum(int(items.weight[(items.group == items.jobs.index(j)) & (items.extra == k)][0])
               for j, k in extra.items()) <= cap
    sol = lyra_mckp.solve(items, cap)
    assert sol.status == "optimal" and sol.objective == pytest.approx(value, abs=1e-3 * len(items.jobs))
    options = [[(0, 0.0)] + [(int(items.weight[i]), float(items.value[i])) for i in np.flatnonzero(items.group == g)]
               for g in range(len(items.jobs))]
    brute = max(sum(v for _, v in combo) for combo in itertools.product(*options) if sum(w for w, _ in combo) <= cap)
    assert value == pytest.approx(brute)
    assert mckp_greedy(items, cap)[1] <= value + 1e-9


def test_dp_equals_cpsat_at_benchmark_size() -> None:
    items = _random_items(np.random.default_rng(7), 120)
    extra, value = mckp_dp(items, 245)
    sol = lyra_mckp.solve(items, 245, hint=extra)
    assert sol.objective == pytest.approx(value, abs=1e-3 * len(items.jobs))


def test_sublinear_scaling_lowers_item_values() -> None:
    import dataclasses
    p = two_jobs(6, 300)
    lin = flexible_items(p, {"A": 2, "B": 2})
    sub = flexible_items(dataclasses.replace(p, scaling="sublinear"), {"A": 2, "B": 2})
    # A's first added worker: 150 s on 2 workers -> 300 / 2.8 s
    assert sub.value[0] == pytest.approx(150 - 300 / 2.8)
    assert all(sub.value < lin.value)

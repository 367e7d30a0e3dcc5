"""Lyra's knapsack dynamic program (:func:`optsched.heuristics.lyra_allocate.mckp_dp`) skips the capacities
past the heaviest items so far and stops at its deadline (issue 26, item 2: 31 s on the training pool of a
100,000-job round): the same answers, float for float, as the plain program it replaced
(:func:`plain_dp`, the old code), and None once the deadline is reached."""

from __future__ import annotations

import time

import numpy as np
import pytest

from optsched.core.deadline import Deadline
from optsched.heuristics.lyra_allocate import mckp_dp
from optsched.rounds.lyra_allocate.items import Items


def plain_dp(items: Items, capacity: int) -> tuple[dict[str, int], float]:
    """The dynamic program before issue 26: every capacity of every group, choices as int64 item indices."""
    capacity = max(0, int(capacity))
    best = np.zeros(capacity + 1)
    choice = np.zeros((len(items.jobs), capacity + 1), dtype=np.int64)
    for g in range(len(items.jobs)):
        idx = np.flatnonzero(items.group == g)
        new = best.copy()
        pick = np.zeros(capacity + 1, dtype=np.int64)
        for i in idx:
            w = int(items.weight[i])
            if w > capacity:
                continue
            cand = best[:capacity + 1 - w] + items.value[i]
            better = cand > new[w:] + 1e-12
            new[w:] = np.where(better, cand, new[w:])
            pick[w:] = np.where(better, i + 1, pick[w:])
        best = new
        choice[g] = pick
    extra: dict[str, int] = {}
    c = capacity
    for g in range(len(items.jobs) - 1, -1, -1):
        i = int(choice[g, c]) - 1
        if i >= 0:
            extra[items.jobs[g]] = int(items.extra[i])
            c -= int(items.weight[i])
    return extra, float(best[capacity])


def random_items(rng: np.random.Generator, groups: int, ties: bool = False) -> Items:
    """Groups of 1-8 items: item k of a job of ``gpw`` GPUs per worker weighs ``k x gpw`` with a concave
    value (as Lyra's), or, with ``ties``, small integer values that tie often."""
    g_, e_, w_, v_ = [], [], [], []
    for g in range(groups):
        gpw = int(rng.choice([1, 2, 4]))
        ks = np.arange(1, int(rng.integers(1, 9)) + 1)
        if ties:
            vals = np.cumsum(rng.integers(0, 3, ks.size)).astype(float)
        else:
            t0 = float(rng.uniform(100, 10_000))
            base = int(rng.integers(1, 5))
            vals = t0 - t0 * base / (base + ks)
        g_.append(np.full(ks.size, g))
        e_.append(ks)
        w_.append(ks * gpw)
        v_.append(vals)
    if not groups:
        empty = np.zeros(0, dtype=np.int64)
        return Items((), empty, empty, empty, np.zeros(0))
    return Items(tuple(f"j{g}" for g in range(groups)), np.concatenate(g_), np.concatenate(e_), np.concatenate(w_),
                 np.concatenate(v_))


@pytest.mark.parametrize("seed", range(40))
def test_the_dynamic_program_answers_as_the_plain_one(seed: int) -> None:
    rng = np.random.default_rng(seed)
    items = random_items(rng, int(rng.integers(0, 25)), ties=seed % 3 == 0)
    heaviest = int(sum(items.weight[items.group == g].max() for g in range(len(items.jobs))))
    for capacity in {0, 1, 3, heaviest // 3, heaviest // 2, max(heaviest - 1, 0), heaviest, heaviest + 7,
                     3 * heaviest}:
        got = mckp_dp(items, capacity)
        assert got is not None
        assert got == plain_dp(items, capacity), capacity


def test_groups_listed_out_of_order_answer_as_the_plain_one() -> None:
    items = random_items(np.random.default_rng(7), 12)
    perm = np.random.default_rng(8).permutation(items.size)
    shuffled = Items(items.jobs, items.group[perm], items.extra[perm], items.weight[perm], items.value[perm])
    for capacity in (5, 20, 60, 500):
        assert mckp_dp(shuffled, capacity) == plain_dp(shuffled, capacity)


def test_the_dynamic_program_stops_at_its_deadline() -> None:
    items = random_items(np.random.default_rng(1), 6000)
    deadline = Deadline(0.05)
    t = time.perf_counter()
    assert mckp_dp(items, 40_000, deadline) is None   # about 2 s without the deadline
    assert time.perf_counter() - t < 0.5
    assert mckp_dp(items, 50, Deadline(60.0)) == plain_dp(items, 50)
    assert mckp_dp(items, 50, Deadline(60.0), reserve=61.0) is None   # the reserve counts


def test_a_capacity_past_every_item_costs_little() -> None:
    """The plain program's work grows with the capacity; this one's stops at the heaviest items' sum."""
    items = random_items(np.random.default_rng(2), 2000)
    t = time.perf_counter()
    extra, value = mckp_dp(items, 10_000_000) or ({}, 0.0)
    assert time.perf_counter() - t < 3.0
    assert len(extra) == 2000 and value == pytest.approx(float(sum(
        items.value[items.group == g].max() for g in range(2000))))

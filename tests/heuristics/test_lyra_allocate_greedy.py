"""The AFS-like greedy of Lyra's phase two (optsched/heuristics/lyra_allocate.mckp_greedy): the heap version
gives what the plain rule gives (issue 26, item 2: the plain loop scanned every item for every worker and
took 302 s on a 20,000-job round at --time-limit 1)."""

from __future__ import annotations

import numpy as np
import pytest

from optsched.heuristics.lyra_allocate import mckp_greedy
from optsched.rounds.lyra_allocate.items import Items


def _plain(items: Items, capacity: int) -> tuple[dict[str, int], float]:
    """The rule as the docstring states it, one worker at a time, every job looked at each time."""
    extra = {job: 0 for job in items.jobs}
    left, value = int(capacity), 0.0
    while True:
        best, ratio = None, 0.0
        for g, job in enumerate(items.jobs):
            k = extra[job] + 1
            sel = np.flatnonzero((items.group == g) & (items.extra == k))
            if sel.size == 0:
                continue
            i = int(sel[0])
            prev = items.value[(items.group == g) & (items.extra == k - 1)]
            gain = float(items.value[i] - (prev[0] if prev.size else 0.0))
            step = int(items.weight[i]) // k
            if step <= left and gain / step > ratio:
                best, ratio = (job, step, gain), gain / step
        if best is None:
            return {j: k for j, k in extra.items() if k}, value
        job, step, gain = best
        extra[job] += 1
        left -= step
        value += gain


@pytest.mark.parametrize("seed", range(20))
def test_the_heap_greedy_gives_the_plain_rules_answer(seed: int) -> None:
    rng = np.random.default_rng(seed)
    jobs = tuple(f"j{g}" for g in range(int(rng.integers(1, 12))))
    group, extra, weight, value = [], [], [], []
    for g in range(len(jobs)):
        per_worker = int(rng.choice([1, 2, 4]))
        total = 0.0
        for k in range(1, int(rng.integers(1, 6)) + 1):
            total += float(rng.choice([rng.uniform(0.1, 10.0), -1.0], p=[0.9, 0.1]))  # gains may stop
            group.append(g), extra.append(k), weight.append(k * per_worker), value.append(round(total, 6))
    items = Items(jobs, np.array(group), np.array(extra), np.array(weight), np.array(value))
    capacity = int(rng.integers(0, 40))
    got, val = mckp_greedy(items, capacity)
    want, want_val = _plain(items, capacity)
    assert got == want and val == pytest.approx(want_val)

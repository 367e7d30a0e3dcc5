"""The knapsack items of a Lyra round (:func:`optsched.rounds.lyra_allocate.items.flexible_items`) are
computed for all jobs at once (issue 26, item 2): the same arrays, float for float, as the per-job loop
they replaced (:func:`per_job_items`, the old code), under both scalings."""

from __future__ import annotations

import dataclasses
from typing import Mapping

import numpy as np
import pytest

from optsched.core.kinds import round_kind
from optsched.heuristics.lyra_allocate import phase_one
from optsched.rounds.lyra.jobs import base_workers, is_elastic, max_workers, running_time
from optsched.rounds.lyra.problem import INFERENCE, TRAINING, LyraRound
from optsched.rounds.lyra_allocate.items import Items, flexible_items


def per_job_items(problem: LyraRound, base: Mapping[str, int]) -> Items:
    groups, extras, weights, values, names = [], [], [], [], []
    for name, start in base.items():
        job = problem.job(name)
        if not is_elastic(job) or start >= max_workers(job):
            continue
        base_w, top = max(start, base_workers(job)), max_workers(job)
        ks = np.arange(1, top - base_w + 1)
        t0 = running_time(job, base_w, problem.scaling)
        t = np.array([running_time(job, base_w + k, problem.scaling) for k in ks])
        groups.append(np.full(ks.size, len(names)))
        extras.append(ks)
        weights.append(ks * job.gpus_per_worker)
        values.append(t0 - t)
        names.append(name)
    if not names:
        empty = np.zeros(0, dtype=np.int64)
        return Items((), empty, empty, empty, np.zeros(0))
    return Items(tuple(names), np.concatenate(groups), np.concatenate(extras), np.concatenate(weights),
                 np.concatenate(values))


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("scaling", ("linear", "sublinear"))
def test_items_are_those_of_the_per_job_loop(seed: int, scaling: str) -> None:
    p = dataclasses.replace(round_kind("lyra-allocate").generate(seed=seed, jobs=60, servers=12, training=20),
                            scaling=scaling)
    first = phase_one(p)
    bases = [{j: first.base[j] for j in first.elastic_in(p, pool)} for pool in (TRAINING, INFERENCE)]
    bases.append({j.name: base_workers(j) for j in p.jobs})       # every job at its base demand
    bases.append({j.name: max_workers(j) - 1 for j in p.jobs})    # one worker short of the top
    bases.append({})
    for base in bases:
        new, old = flexible_items(p, base), per_job_items(p, base)
        assert new.jobs == old.jobs
        for field in ("group", "extra", "weight", "value"):
            a, b = getattr(new, field), getattr(old, field)
            assert a.dtype == b.dtype and np.array_equal(a, b), field


@pytest.mark.parametrize("scaling", ("linear", "sublinear"))
def test_sjf_sort_key_is_the_running_time_at_base_demand(scaling: str) -> None:
    from optsched.heuristics.lyra_allocate import _base_time
    for seed in range(4):
        p = round_kind("lyra-allocate").generate(seed=seed, jobs=200, servers=20, training=40)
        for j in p.jobs:
            assert _base_time(j) == running_time(j, base_workers(j), scaling)
        done = p.jobs[0].with_progress(p.jobs[0].total_iterations)
        assert _base_time(done) == running_time(done, base_workers(done), scaling) == 0.0

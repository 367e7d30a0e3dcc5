"""The incremental structures that make Rubick's Algorithm 1 fast give the answers of the direct
computations they replace (optsched.heuristics.rubick, rubick_walk, round_state): GetBestPlan in plain
Python on a few nodes against its numpy form, the round ledger against the shared node ledger, the node
walk's counts, deficits and cached lowest shrinks against GetBestPlan and a fresh search (``CHECK``),
give-back's one-step restore against releasing first, and the answer for a job running its best row
against the full ScheduleJob."""

from __future__ import annotations

import random

import numpy as np
import pytest

from optsched.core import Allocation
from optsched.heuristics import round_state, rubick_walk
from optsched.heuristics.placement import NodeLedger
from optsched.heuristics.round_state import Config, RoundLedger
from optsched.heuristics.rubick import Algorithm1, _slope_cpu, algorithm1
from optsched.rounds.rubick.admission import admit
from optsched.rounds.rubick.choice import Choice, is_kept, placement_of
from optsched.rounds.rubick.generate import generate_rubick_round
from optsched.rounds.rubick.problem import RubickRound
from optsched.rounds.rubick.table import build_round_table


def _engine(nodes: int, jobs: int, seed: int) -> Algorithm1:
    problem = generate_rubick_round(nodes, 8, jobs, seed)
    table = build_round_table(problem)
    eng = Algorithm1(problem, table, admit(problem, table))
    eng.hold_running(skip_waiting=True)
    return eng


def _random_amounts(eng: Algorithm1, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Free amounts as a walk or a shrink sees them: what is free, plus some of what jobs hold."""
    g = eng.free_gpus + rng.integers(0, 5, eng.free_gpus.size)
    c = eng.free_cpus + rng.integers(0, 40, eng.free_cpus.size)
    m = eng.free_mem + rng.uniform(0.0, 120.0, eng.free_mem.size) * (rng.random(eng.free_mem.size) < 0.7)
    return g.astype(np.int64), c.astype(np.int64), m


@pytest.mark.parametrize("seed", [0, 1])
def test_get_best_plan_on_few_nodes_agrees_with_numpy(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """:meth:`RoundState.best` on at most ``SMALL_CANDIDATES`` nodes (plain Python, :meth:`best_on`)
    returns the configuration of the numpy form, for random jobs, node sets (1 to 24 nodes, so numpy's
    pairwise float sums from 8 on are covered), amounts, bases and flags, running jobs included."""
    eng = _engine(24, 100, seed)
    rng = np.random.default_rng(seed)
    n_nodes = len(eng.node_names)
    running = [j for j in range(len(eng.names)) if eng.current[j] is not None]
    jobs = running[:40] + list(rng.choice(len(eng.names), 60, replace=False))
    checked = found = 0
    for j in jobs:
        j = int(j)
        for _ in range(6):
            size = int(rng.integers(1, round_state.SMALL_CANDIDATES + 1))
            cand = np.sort(rng.choice(n_nodes, size, replace=False)).astype(np.int64)
            if eng.current[j] is not None and rng.random() < 0.5:  # its own nodes, to reach the kept mapping
                cand = np.unique(np.concatenate([cand, [s[0] for s in eng.current[j].shares]])).astype(np.int64)
            amounts = _random_amounts(eng, rng)
            base = eng.free_gpus.copy() if rng.random() < 0.5 else None
            flags = {"guarantee": bool(rng.random() < 0.3), "keep": bool(rng.random() < 0.7), "base": base}
            fast = eng.best(j, cand, amounts, **flags)
            monkeypatch.setattr(round_state, "SMALL_CANDIDATES", 0)
            slow = eng.best(j, cand, amounts, **flags)
            monkeypatch.setattr(round_state, "SMALL_CANDIDATES", 24)
            assert fast == slow, (j, cand, flags)
            checked += 1
            found += fast is not None
    assert checked == len(jobs) * 6 and found > checked // 4


def test_algorithm1_decisions_do_not_depend_on_the_small_path(monkeypatch: pytest.MonkeyPatch) -> None:
    problem = generate_rubick_round(24, 8, 100, 0)
    table = build_round_table(problem)
    admission = admit(problem, table)
    fast = algorithm1(problem, table, admission, defer=True)
    monkeypatch.setattr(round_state, "SMALL_CANDIDATES", 0)
    slow = algorithm1(problem, table, admission, defer=True)
    assert fast.choices == slow.choices and fast.message == slow.message


def test_round_ledger_matches_the_node_ledger() -> None:
    """:class:`RoundLedger` (memoryviews) leaves bit-identical arrays, holders, touched nodes and group
    GPUs to :class:`NodeLedger` over random assignments, transactions and rollbacks."""
    rng = random.Random(3)
    n_nodes, holders = 12, 30
    names = [f"n{i:02d}" for i in range(n_nodes)]
    types = np.zeros(n_nodes, dtype=np.int64)
    groups = np.array([rng.randint(0, 1) for _ in range(holders)], dtype=np.int64)

    def arrays() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return (np.full(n_nodes, 8, dtype=np.int64), np.full(n_nodes, 96, dtype=np.int64),
                np.full(n_nodes, 1000.0) - 0.1)

    plain = NodeLedger(names, types, *arrays(), holders, groups=groups)
    fast = RoundLedger(names, types, *arrays(), holders, groups=groups)
    for step in range(3000):
        if step % 97 == 0:
            plain.begin(), fast.begin()
        elif step % 97 == 50 and plain.log is not None:
            plain.rollback(), fast.rollback()
        h = rng.randrange(holders)
        new = None
        if rng.random() < 0.7:
            nodes = sorted(rng.sample(range(n_nodes), rng.randint(1, 3)))
            new = Config(rng.randrange(100), tuple((n, rng.randint(0, 3), rng.randint(0, 9), rng.uniform(0, 40) / 3)
                                                   for n in nodes), False)
        plain.assign(h, new)
        fast.assign(h, new)
        assert plain.free_mem.tobytes() == fast.free_mem.tobytes()
    for a, b in ((plain.free_gpus, fast.free_gpus), (plain.free_cpus, fast.free_cpus),
                 (plain.group_gpus, fast.group_gpus)):
        assert np.array_equal(a, b)
    assert plain.holders_on == fast.holders_on and plain.touched == fast.touched and plain.holding == fast.holding


@pytest.mark.parametrize("size", [(40, 160, 1), (32, 300, 2)])
@pytest.mark.parametrize("force_exact", [False, True])
def test_walk_checks_hold_on_crowded_rounds(monkeypatch: pytest.MonkeyPatch, size: tuple[int, int, int],
                                            force_exact: bool) -> None:
    """With ``CHECK`` every refresh from the counts (also those skipped because no count changed, and
    those of running jobs whose configuration does not fit) equals GetBestPlan's, and every cached
    lowest shrink equals a fresh search; the decisions equal those of exact refreshes only. The rounds
    are crowded enough that each shortcut is taken. A row that could keep a running job whose
    configuration does not fit sends the refresh to GetBestPlan; that never happens on these rounds,
    so ``force_exact`` declares every row keepable to run that path."""
    problem = generate_rubick_round(size[0], 8, size[1], size[2])
    table = build_round_table(problem)
    admission = admit(problem, table)
    taken = {"skipped": 0, "not_fit": 0, "exact": 0, "cached": 0}
    refresh, best_row = rubick_walk.NodeWalk.refresh, rubick_walk.NodeWalk._best_row
    lowest, keepable = Algorithm1.lowest, Algorithm1.keepable

    def counting_refresh(walk: rubick_walk.NodeWalk) -> None:
        taken["skipped"] += walk.parts is not None and walk.exact_left <= 0 and not walk.dirty
        refresh(walk)

    def counting_best_row(walk: rubick_walk.NodeWalk, *, guarantee: bool) -> object:
        out = best_row(walk, guarantee=guarantee)
        taken["not_fit"] += not walk.cur_fits and out is not rubick_walk._EXACT
        taken["exact"] += out is rubick_walk._EXACT
        return out

    def counting_lowest(eng: Algorithm1, n: int, res: int, exclude: int) -> object:
        taken["cached"] += eng.low_ok[res][n] and not eng.ledger.touched
        return lowest(eng, n, res, exclude)

    monkeypatch.setattr(rubick_walk.NodeWalk, "refresh", counting_refresh)
    monkeypatch.setattr(rubick_walk.NodeWalk, "_best_row", counting_best_row)
    monkeypatch.setattr(Algorithm1, "lowest", counting_lowest)
    if force_exact:
        monkeypatch.setattr(Algorithm1, "keepable", lambda eng, j: [True] * len(keepable(eng, j)))
    monkeypatch.setattr(rubick_walk, "CHECK", True)
    checked = algorithm1(problem, table, admission, defer=True).choices
    assert taken["skipped"] > 0 and taken["cached"] > 0, taken
    assert (taken["exact"] > 0) if force_exact else (taken["not_fit"] > 0), taken
    monkeypatch.setattr(rubick_walk, "CHECK", False)
    monkeypatch.setattr(rubick_walk, "EXACT_REFRESHES", 10**9)
    assert algorithm1(problem, table, admission, defer=True).choices == checked


def test_keepable_rows_are_those_is_kept_accepts_on_the_current_placement() -> None:
    """:meth:`Algorithm1.keepable`: a row is keepable iff its shape is the current placement's and
    ``is_kept`` accepts it there; every running job's current row is keepable, queued jobs have none."""
    eng = _engine(40, 160, 1)
    running = 0
    for j in range(len(eng.names)):
        keep = eng.keepable(j)
        py = eng.rows[j].py
        parts = eng.current_parts[j]
        if parts is None:
            assert not any(keep)
            continue
        running += 1
        assert keep[py.rows.index(eng.current[j].row)]
        for i, row in enumerate(py.rows):
            same_shape = sorted(s for s, _, _ in py.parts[i]) == sorted(g for _, g in parts)
            assert keep[i] == (same_shape and is_kept(eng.problem, eng.table, j, Choice(row, parts)))
    assert running > 10


def test_one_step_restore_fits_as_release_then_fit() -> None:
    """Give-back's check (:meth:`Algorithm1._fits_instead`) answers as releasing the job's holding and
    then asking whether the other configuration fits, on random pairs of configurations of real jobs."""
    eng = _engine(24, 100, 2)
    rng = random.Random(5)
    holders = [j for j in range(len(eng.names)) if eng.config(j) is not None]
    answers = set()
    for _ in range(400):
        v = rng.choice(holders)
        old = eng.config(v)
        assert old is not None
        nodes = [s[0] for s in old.shares] + rng.sample(range(len(eng.node_names)), 1)
        new = Config(old.row, tuple(sorted({n: (n, rng.randint(0, 8), rng.randint(0, 60), rng.uniform(0, 300))
                                            for n in nodes}.values())), False)
        quick = eng._fits_instead(new, old)
        eng.ledger.begin()
        eng.set(v, None)
        direct = eng.fits(new)
        eng.ledger.rollback()
        assert quick == direct
        answers.add(quick)
    assert answers == {True, False}


def _next_round(nodes: int, jobs: int, seed: int) -> RubickRound:
    """The round after a generated one, as a simulator makes it: every job Algorithm 1 placed runs what
    it chose (so many run their best row), the others wait."""
    first = generate_rubick_round(nodes, 8, jobs, seed)
    table = build_round_table(first)
    choices = algorithm1(first, table, admit(first, table), defer=True).choices
    running = tuple(Allocation(name, table.plans[c.row], placement_of(first, table, table.index_of(name), c))
                    for name, c in choices.items())
    return RubickRound(first.cluster, first.jobs, running=running, occupied=first.occupied, quotas=first.quotas)


@pytest.mark.parametrize("size", [(24, 40, 0), (48, 40, 1)])
def test_running_best_row_shortcut_leaves_what_schedule_job_leaves(size: tuple[int, int, int]) -> None:
    """For every job :meth:`Algorithm1._runs_best` answers, the full ScheduleJob (walk, GetBestPlan,
    rollback) returns False too and leaves bit-identical free amounts and the same holdings (on a round
    after a round, where jobs run their best rows)."""
    problem = _next_round(*size)
    table = build_round_table(problem)
    admission = admit(problem, table)
    quick, full = Algorithm1(problem, table, admission), Algorithm1(problem, table, admission)
    for eng in (quick, full):
        eng.hold_running(skip_waiting=True)
    full._runs_best = lambda j: False  # type: ignore[method-assign]
    taken = 0
    for j in range(len(quick.names)):
        if not quick._runs_best(j):
            continue
        taken += 1
        assert full.schedule_job(j, forced=False) is False
        for a, b in zip((quick.free_gpus, quick.free_cpus, quick.free_mem), (full.free_gpus, full.free_cpus,
                                                                            full.free_mem)):
            assert a.tobytes() == b.tobytes()
        assert quick.ledger.holding == full.ledger.holding
    assert taken >= 5, taken


def test_decisions_with_and_without_the_running_best_row_shortcut(monkeypatch: pytest.MonkeyPatch) -> None:
    problem = _next_round(40, 60, 2)
    table = build_round_table(problem)
    admission = admit(problem, table)
    fast = algorithm1(problem, table, admission, defer=True)
    monkeypatch.setattr(Algorithm1, "_runs_best", lambda eng, j: False)
    slow = algorithm1(problem, table, admission, defer=True)
    assert fast.choices == slow.choices and fast.message == slow.message


@pytest.mark.parametrize("nodes, jobs, seed, after", [(24, 100, 0, False), (40, 160, 1, True), (24, 40, 0, True)])
def test_sort_keys_at_once_equal_one_at_a_time(nodes: int, jobs: int, seed: int, after: bool) -> None:
    """SortBySlope keys computed over all jobs' rows at once (:meth:`Algorithm1.sort_keys`) are the
    floats :meth:`Algorithm1.sort_key` computes job by job, for queued and running jobs, also once
    jobs hold other configurations (after scheduling a few)."""
    problem = _next_round(nodes, jobs, seed) if after else generate_rubick_round(nodes, 8, jobs, seed)
    table = build_round_table(problem)
    eng = Algorithm1(problem, table, admit(problem, table))
    eng.hold_running(skip_waiting=True)
    with_rows = [j for j in range(len(eng.names)) if table.configs_of(eng.names[j]).size]
    for j in with_rows[: len(with_rows) // 3]:
        if not eng.waiting[j]:
            eng.schedule_job(j, forced=False)
    keys = eng.sort_keys(with_rows)
    assert keys == [eng.sort_key(j) for j in with_rows]
    assert any(k[0] != 0.0 for k in keys) and any(k[1] != 0.0 for k in keys)


def test_memoised_cpu_slopes_and_fits_equal_direct_ones() -> None:
    """The memos keyed by the needs an amount meets (CPU slopes by the GPU counts a cap reaches, part
    demand fits by the GPU, CPU and memory needs met) answer as the direct computations."""
    eng = _engine(24, 100, 0)
    rng = random.Random(11)
    jobs = [j for j in range(len(eng.names)) if eng.rows[j].py.rows]
    for _ in range(3000):
        j = rng.choice(jobs)
        py = eng.rows[j].py
        v = rng.choice([0.0, *py.value])
        c = rng.choice([0, *py.cpus])
        g_cap = rng.randint(0, py.max_gpus + 3)
        assert eng.slope_cpu(j, v, c, g_cap) == _slope_cpu(eng.rows[j], v, c, g_cap)
    for j in rng.sample(jobs, 30):
        parts = eng.walk_parts(j)
        for _ in range(200):
            t, g, c = rng.choice([0, 1]), rng.randint(0, 9), rng.randint(0, 100)
            m = rng.choice([rng.uniform(0, 300), *(cm + d for *_, cm in parts.classes for d in (-1e-9, 0.0, 1e-9))])
            direct = tuple(ct == t and cg <= g and cc <= c and cm <= m for ct, cg, cc, cm in parts.classes)
            assert parts.fits(t, g, c, m) == direct


@pytest.mark.parametrize("force_trimmable", [False, True])
def test_walk_checks_hold_where_trims_are_cheap(monkeypatch: pytest.MonkeyPatch, force_trimmable: bool) -> None:
    """Trims (issue 16, item 5): on rounds where queued jobs need CPUs running jobs hold, with a trim
    penalty of 0 and a reconfiguration penalty of 0.5, every refresh from the counts equals GetBestPlan's
    (``CHECK``) and the decisions equal those of exact refreshes. A row that could trim a running job and
    beats its configuration only after the trim penalty sends the refresh to GetBestPlan; real rows do so
    rarely, so ``force_trimmable`` declares every row trimmable to run that path."""
    from dataclasses import replace

    from helpers import cpu_hungry_round
    problem = replace(cpu_hungry_round(32, 300, 2), reconfig_penalty=0.5, trim_penalty=0.0)
    table = build_round_table(problem)
    admission = admit(problem, table)
    exact = {"trim": 0}
    best_row, keepable = rubick_walk.NodeWalk._best_row, Algorithm1.keepable

    def counting_best_row(walk: rubick_walk.NodeWalk, *, guarantee: bool) -> object:
        out = best_row(walk, guarantee=guarantee)
        exact["trim"] += out is rubick_walk._EXACT and walk.cur_fits
        return out

    monkeypatch.setattr(rubick_walk.NodeWalk, "_best_row", counting_best_row)
    if force_trimmable:
        monkeypatch.setattr(Algorithm1, "trimmable", lambda eng, j: [True] * len(keepable(eng, j)))
    monkeypatch.setattr(rubick_walk, "CHECK", True)
    checked = algorithm1(problem, table, admission, defer=True)
    assert exact["trim"] > 0 or not force_trimmable, exact
    monkeypatch.setattr(rubick_walk, "CHECK", False)
    monkeypatch.setattr(rubick_walk, "EXACT_REFRESHES", 10**9)
    assert algorithm1(problem, table, admission, defer=True).choices == checked.choices

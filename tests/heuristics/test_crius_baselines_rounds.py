"""The baselines of Crius Sec. 8.1 on tiny hand-traced workloads: FCFS with and without backfilling,
Gandiva's migration and time-slicing over rounds, Gavel's time sharing over rounds, ElasticFlow's
deadline-aware admission (minimum satisfactory share, drops)."""

from __future__ import annotations

from crius_helpers import alloc_on, toy_cluster, toy_graph
from optsched.core import Job
from optsched.heuristics.baselines import Gandiva, Gavel, ElasticFlowDDL, schedule_fcfs, schedule_fcfs_backfill
from optsched.heuristics.baselines import gavel as gavel_module
from optsched.heuristics.baselines.elasticflow import satisfactory_share
from optsched.heuristics.baselines.cells import cells_by_spec
from optsched.rounds.crius import CriusRound
from optsched.rounds.crius.choice import is_kept
from optsched.rounds.crius.feasibility import violations
from optsched.rounds.crius.table import build_crius_table

MODELS = (("tiny", toy_graph("tiny")),)


def _round(cluster, jobs, time, running=()):  # noqa: ANN001, ANN202
    return CriusRound(cluster=cluster, jobs=tuple(jobs), models=MODELS, time=time, running=tuple(running))


def _allocs(cluster, table, choices):  # noqa: ANN001, ANN202
    """The running allocations a decision leaves for the next round."""
    return [alloc_on(cluster, name, table.gpu_type[c.row], dict(c.parts), int(table.stages[c.row]))
            for name, c in choices.items()]


def test_backfill_starts_a_small_job_behind_a_blocked_big_one() -> None:
    # one node of 4 GPUs, 2 held by "run"; "head" asks 4 (blocked), "small" asks 1 behind it
    c = toy_cluster(fast_nodes=1, fast_gpus=4, slow_nodes=0)
    jobs = (Job("run", "tiny", 2, 100, submit_time=0.0), Job("head", "tiny", 4, 100, submit_time=1.0),
            Job("small", "tiny", 1, 100, submit_time=2.0))
    r = _round(c, jobs, 10.0, [alloc_on(c, "run", "fast", {"f0": 2}, 1)])
    t = build_crius_table(r)
    assert set(schedule_fcfs(r, t).choices) == {"run"}
    s = schedule_fcfs_backfill(r, t)
    assert set(s.choices) == {"run", "small"} and is_kept(r, t, t.index_of("run"), s.choices["run"])


def test_gandiva_migrates_to_defragment() -> None:
    # two nodes of 4 GPUs, "a" on 2 of f0 and "b" on 2 of f1: 4 GPUs free but no node of 4 for "c"
    c = toy_cluster(fast_nodes=2, fast_gpus=4, slow_nodes=0)
    jobs = (Job("a", "tiny", 2, 100, submit_time=0.0), Job("b", "tiny", 2, 100, submit_time=1.0),
            Job("c", "tiny", 4, 100, submit_time=2.0))
    r = _round(c, jobs, 10.0, [alloc_on(c, "a", "fast", {"f0": 2}, 1), alloc_on(c, "b", "fast", {"f1": 2}, 1)])
    t = build_crius_table(r)
    s = Gandiva()(r, t)
    assert set(s.choices) == {"a", "b", "c"}
    # "a" stays on f0, "b" migrates next to it, "c" takes f1 whole
    assert dict(s.choices["a"].parts) == {"f0": 2} and dict(s.choices["b"].parts) == {"f0": 2}
    assert dict(s.choices["c"].parts) == {"f1": 4}
    assert violations(r, t, s.choices, s.admission, search_depth=False, suspensions=False) == []
    assert set(schedule_fcfs_backfill(r, t).choices) == {"a", "b"}  # without migration "c" waits


def _alternation(scheduler, times):  # noqa: ANN001, ANN202
    """Who runs at each round time: one node of 4 GPUs, two jobs of 4 GPUs, decisions carried over."""
    c = toy_cluster(fast_nodes=1, fast_gpus=4, slow_nodes=0)
    jobs = [Job("x", "tiny", 4, 10**6, submit_time=0.0), Job("y", "tiny", 4, 10**6, submit_time=0.0)]
    running: list = []
    out = []
    for now in times:
        r = _round(c, jobs, now, running)
        t = build_crius_table(r)
        s = scheduler(r, t)
        assert violations(r, t, s.choices, s.admission, search_depth=False, suspensions=False) == []
        out.append(tuple(sorted(s.choices)))
        running = _allocs(c, t, s.choices)
    return out


def test_gandiva_time_slices_a_gpu_between_two_jobs_over_rounds() -> None:
    # x starts (FCFS); each later round the job that held the GPUs a slice (300 s) yields to the other
    assert _alternation(Gandiva(), [0.0, 300.0, 600.0, 900.0]) == [("x",), ("y",), ("x",), ("y",)]
    # a round before the slice is up swaps nobody
    assert _alternation(Gandiva(), [0.0, 100.0]) == [("x",), ("x",)]


def test_gavel_shares_time_over_rounds(monkeypatch) -> None:  # noqa: ANN001
    # the LP's split is degenerate here (both jobs are worth the same); given as half and half, Gavel's priority
    # share / (fraction of time received) alternates: t=0 both infinite (tie: x by name); t=300 x has 300 of 300 s
    # (0.5 / 1), y none (infinite): y; t=600 both 300 of 600 s (1 each, tie): x; t=900 x 600 of 900 (0.75),
    # y 300 of 900 (1.5): y; t=1200 x 600, y 600 of 1200 (tie): x
    import numpy as np
    monkeypatch.setattr(gavel_module, "gavel_shares", lambda p, t, jobs, types, d=None: np.full((len(jobs), 1), 0.5))
    assert _alternation(Gavel(), [0.0, 300.0]) == [("x",), ("y",)]
    got = _alternation(Gavel(), [0.0, 300.0, 600.0, 900.0, 1200.0])
    assert got == [("x",), ("y",), ("x",), ("y",), ("x",)]


def test_gavel_priority_is_share_over_received_fraction() -> None:
    from optsched.heuristics.baselines.history import RoundHistory
    import numpy as np
    c = toy_cluster(fast_nodes=1, fast_gpus=4, slow_nodes=0)
    jobs = [Job("x", "tiny", 4, 100, submit_time=0.0), Job("y", "tiny", 4, 100, submit_time=200.0)]
    r = _round(c, jobs, 1000.0)
    t = build_crius_table(r)
    h = RoundHistory()
    h.service["x"]["fast"] = 800.0   # x: 800 of 1000 s -> f = 0.8, priority 0.6 / 0.8 = 0.75
    h.service["y"]["fast"] = 200.0   # y: 200 of 800 s -> f = 0.25, priority 0.4 / 0.25 = 1.6
    pri = gavel_module.priorities(r, t, [0, 1], ["fast"], np.array([[0.6], [0.4]]), h)
    assert [(round(-k[0], 6), k[3]) for k in pri] == [(1.6, "y"), (0.75, "x")]


def _dp_iter(t, j, g):  # noqa: ANN001, ANN202
    row = cells_by_spec(t, j)[("fast", g)]
    return float(t.iteration_time[row] * t.throughput[row] / t.dp_throughput[row])


def test_elasticflow_ddl_admits_at_the_minimum_satisfactory_share_and_drops_for_good() -> None:
    c = toy_cluster(fast_nodes=1, fast_gpus=4, slow_nodes=0)
    base = [Job("ok", "tiny", 2, 1000, submit_time=0.0), Job("hopeless", "tiny", 2, 1000, submit_time=1.0)]
    r0 = _round(c, base, 0.0)
    t0 = build_crius_table(r0)
    i1, i2, i4 = (_dp_iter(t0, 0, g) for g in (1, 2, 4))
    assert i1 > i2 > i4
    # "ok": 2 GPUs are too slow for its deadline, 4 meet it; "hopeless": not even 4 GPUs meet it
    jobs = [Job("ok", "tiny", 2, 1000, submit_time=0.0, deadline=1000 * (i2 + i4) / 2),
            Job("hopeless", "tiny", 2, 1000, submit_time=1.0, deadline=1000 * i4 / 2)]
    r = _round(c, jobs, 0.0)
    t = build_crius_table(r)
    assert satisfactory_share(r, t, 0, "fast", cells_by_spec(t, 0)) == 4
    assert satisfactory_share(r, t, 1, "fast", cells_by_spec(t, 1)) is None
    ef = ElasticFlowDDL()
    s = ef(r, t)
    assert set(s.choices) == {"ok"} and int(t.gpus[s.choices["ok"].row]) == 4
    assert ef.history.dropped == {"hopeless"} and "dropped: 1" in s.message
    # the next round, "ok" gone and the GPUs free: the dropped job still never runs
    r2 = _round(c, jobs[1:], 10.0)
    assert ef(r2, build_crius_table(r2)).choices == {}


# -- Crius-NA / Crius-NH (Sec. 8.6) ------------------------------------------------------------------------
def test_crius_na_keeps_the_requested_gpu_count() -> None:
    from optsched.heuristics.crius import algorithm1
    from optsched.heuristics.crius_ablations import CriusNA
    c = toy_cluster(fast_nodes=1, fast_gpus=4, slow_nodes=0)
    r = _round(c, [Job("a", "tiny", 2, 100, submit_time=0.0)], 10.0)
    t = build_crius_table(r)
    assert int(t.gpus[algorithm1(r, t).choices["a"].row]) == 4   # Algorithm 1 scales it up to 2 N_G
    s = CriusNA()(r, t)
    assert int(t.gpus[s.choices["a"].row]) == 2                  # without adaptivity scaling: N_G
    assert violations(r, t, s.choices, s.admission) == []


def test_crius_nh_keeps_one_gpu_type() -> None:
    import dataclasses
    from optsched.heuristics.crius import algorithm1
    from optsched.heuristics.crius_ablations import CriusNH
    # the fast node is full ("run"); "new" asks 2 GPUs: Algorithm 1 starts it on the slow node, Crius-NH's one
    # type for it is fast (the first type in cluster order with a Cell of 2 GPUs), so it waits
    c = toy_cluster(fast_nodes=1, fast_gpus=4, slow_nodes=1, slow_gpus=4)
    jobs = [Job("run", "tiny", 4, 10**6, submit_time=0.0), Job("new", "tiny", 2, 100, submit_time=1.0)]
    r = dataclasses.replace(_round(c, jobs, 10.0, [alloc_on(c, "run", "fast", {"f0": 4}, 1)]), search_depth=0)
    t = build_crius_table(r)
    assert t.gpu_type[algorithm1(r, t).choices["new"].row] == "slow"
    nh = CriusNH()
    s = nh(r, t)
    assert "new" not in s.choices and nh.home == {"run": "fast", "new": "fast"}
    # the next round, "run" gone: "new" starts on fast, its type, at any count (here 4: scaled up)
    r2 = dataclasses.replace(_round(c, jobs[1:], 20.0), search_depth=0)
    t2 = build_crius_table(r2)
    s2 = nh(r2, t2)
    assert t2.gpu_type[s2.choices["new"].row] == "fast" and int(t2.gpus[s2.choices["new"].row]) == 4


def test_ablations_are_feasible_and_keep_their_restriction() -> None:
    from optsched.heuristics.baselines.cells import request_gpus
    from optsched.heuristics.crius_ablations import CriusNA, CriusNH
    from optsched.rounds.crius import generate_crius_round
    r = generate_crius_round(60, seed=2)
    t = build_crius_table(r)
    for scheduler in (CriusNA(), CriusNH()):
        s = scheduler(r, t)
        assert violations(r, t, s.choices, s.admission) == []
        for name, ch in s.choices.items():
            j = t.index_of(name)
            if is_kept(r, t, j, ch):
                continue
            if isinstance(scheduler, CriusNA):
                assert int(t.gpus[ch.row]) == request_gpus(r, t, j)
            else:
                assert t.gpu_type[ch.row] == scheduler.home[name]


def test_elasticflow_ddl_out_of_time_keeps_what_runs_and_starts_no_job_without_a_deadline() -> None:
    from optsched.core.deadline import Deadline

    c = toy_cluster(fast_nodes=2, fast_gpus=4, slow_nodes=0)
    jobs = (Job("run", "tiny", 2, 100, submit_time=0.0), Job("q1", "tiny", 1, 100, submit_time=1.0),
            Job("q2", "tiny", 1, 100, submit_time=2.0))
    r = _round(c, jobs, 10.0, [alloc_on(c, "run", "fast", {"f0": 2}, 1)])
    t = build_crius_table(r)
    assert {"q1", "q2"} <= set(ElasticFlowDDL()(r, t).choices)  # with time, the queued jobs start
    s = ElasticFlowDDL()(r, t, deadline=Deadline(1e-9, start=0.0))  # no time left: the round answers partial
    assert set(s.choices) == {"run"} and not s.complete and is_kept(r, t, t.index_of("run"), s.choices["run"])

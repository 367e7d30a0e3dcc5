"""Baseline round policies (optsched.heuristics.baselines, optsched.rounds.rubick.baseline_tables,
optsched.policies.rubick): hand-checked rounds for FIFO, AntMan, Synergy and Sia, feasibility and the
"running jobs untouched" rules on generated rounds, and determinism."""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pytest

from optsched.core import Allocation, Job, NodeShare, ValidationError, a800_cluster
from optsched.core.decision import Decision
from optsched.core.plan import ExecutionPlan, ZeroMode
from optsched.core.pool import gpu_pool, packed_placement
from optsched.heuristics.baselines import antman_round, schedule_antman, schedule_fifo, schedule_sia, schedule_synergy
from optsched.perf.defaults import default_performance_model
from optsched.perf.lookup import default_perf_lookup
from optsched.policies.options import PolicyOptions
from optsched.policies.registry import make_policy, methods_of
from optsched.policies.rubick import AntManPolicy, FifoPolicy, SiaPolicy, SynergyPolicy
from optsched.rounds.rubick.admission import NO_GUARANTEES, Admission
from optsched.rounds.rubick.baseline_tables import request_table, sia_plan, sia_table, synergy_table
from optsched.rounds.rubick.feasibility import violations
from optsched.rounds.rubick.generate import generate_rubick_round
from optsched.rounds.rubick.problem import RubickRound
from optsched.rounds.rubick.table import build_round_table

from helpers import alloc, fixed_perf, without_solve_time

def fixed_lookup(cluster):
    """Performance models with fixed, CPU-sensitive parameters (helpers.FIXED_PARAMS): the CPU tuning
    these tests exercise does not move when the built-in defaults are refitted (the public rows all
    run 8 CPUs per GPU, so the fitted defaults need not be CPU-sensitive)."""
    cache: dict = {}

    def lookup(model: str, gpu_type: str):
        if (model, gpu_type) not in cache:
            cache[(model, gpu_type)] = fixed_perf(model, cluster, gpu_type)
        return cache[(model, gpu_type)]
    return lookup


DP2 = ExecutionPlan(dp=2)
OFFLOAD2 = ExecutionPlan(dp=2, zero=ZeroMode.OFFLOAD)
#: the registered methods of the rubick kind whose policies are the baselines
BASELINE_METHODS = tuple(sorted(m for m in methods_of("rubick") if isinstance(
    make_policy(m), (FifoPolicy, AntManPolicy, SynergyPolicy, SiaPolicy))))


def _run(name: str, plan: ExecutionPlan, node: str, cpus: int, mem: float | None = None) -> Allocation:
    """A running allocation of ``plan`` on one node (memory: the table's rule for non-offload plans)."""
    g = plan.num_gpus
    return alloc(name, plan, {node: (g, cpus, 8.0 * g if mem is None else mem)})


# -- FIFO ------------------------------------------------------------------------------------------
def _fifo_round(running: bool = False) -> RubickRound:
    """One 8-GPU node. Submit order z (4 GPUs), b (8 GPUs), a (2 GPUs): names deliberately not in
    submit order."""
    jobs = [Job("z", "vit", 4, 1000, requested_cpus=16, submit_time=0.0),
            Job("b", "roberta", 8 if not running else 4, 1000, submit_time=1.0),
            Job("a", "bert", 2, 1000, submit_time=2.0)]
    run: tuple[Allocation, ...] = ()
    if running:
        jobs.append(Job("r", "bert", 2, 1000, requested_plan=DP2, requested_cpus=20, submit_time=5.0))
        run = (_run("r", DP2, "n000", 20),)
    return RubickRound(a800_cluster(1, 8), tuple(jobs), running=run)


def test_fifo_blocks_behind_the_first_job_that_does_not_fit() -> None:
    p = _fifo_round()
    t = request_table(p)
    strict = schedule_fifo(p, t)
    assert set(strict) == {"z"}  # b (8 GPUs) does not fit next to z, and blocks a
    back = schedule_fifo(p, t, backfill=True)
    assert set(back) == {"z", "a"}
    for ch in (strict, back):
        assert violations(p, t, ch, NO_GUARANTEES) == []
    # exactly the request: 4 GPUs on one node, the requested 16 CPUs
    row = strict["z"].row
    assert (int(t.gpus[row]), int(t.cpus[row]), strict["z"].parts) == (4, 16, (("n000", 4),))
    assert back["a"].parts == (("n000", 2),) and int(t.cpus[back["a"].row]) == p.job("a").cpus_or_default(12)


def test_fifo_keeps_running_jobs_and_blocks_with_them() -> None:
    """r holds 2 GPUs: z (4) starts, b (4) does not fit in the 2 left and blocks a (2)."""
    p = _fifo_round(running=True)
    t = request_table(p)
    d = FifoPolicy().decide(p)
    assert {j.job: j.action for j in d.jobs} == {"z": "start", "b": "wait", "a": "wait", "r": "keep"}
    assert d.job("r").allocation == p.current("r")
    d2 = FifoPolicy("fifo-backfill", backfill=True).decide(p)
    assert {j.job: j.action for j in d2.jobs} == {"z": "start", "b": "wait", "a": "start", "r": "keep"}
    assert d.status == "heuristic" and d.method == "fifo" and d2.method == "fifo-backfill"
    assert violations(p, t, schedule_fifo(p, t, backfill=True), NO_GUARANTEES) == []


def test_fifo_rejects_a_table_that_is_not_the_request() -> None:
    p = _fifo_round()
    with pytest.raises(ValidationError, match="queued job 'z'.*not its request"):
        schedule_fifo(p, build_round_table(p))


# -- AntMan ----------------------------------------------------------------------------------------
def _antman_round(quota: int, guaranteed_gpus: int = 4) -> RubickRound:
    """One 8-GPU node full of best-effort work: e1 (2 GPUs, oldest), e2 (4 GPUs), e3 (2 GPUs, newest);
    a guaranteed job g of tenant A arrives."""
    plan4 = ExecutionPlan(dp=4)
    jobs = (Job("e1", "vit", 2, 1000, requested_plan=DP2, requested_cpus=16, tenant="B", submit_time=10.0),
            Job("e2", "vit", 4, 1000, requested_plan=plan4, requested_cpus=32, tenant="B", submit_time=20.0),
            Job("e3", "bert", 2, 1000, requested_plan=DP2, requested_cpus=16, tenant="B", submit_time=30.0),
            Job("g", "roberta", guaranteed_gpus, 1000, requested_cpus=8 * guaranteed_gpus, tenant="A",
                guaranteed=True, submit_time=40.0),
            Job("q", "vit", 1, 1000, requested_cpus=4, tenant="B", submit_time=50.0))
    running = (_run("e1", DP2, "n000", 16), _run("e2", plan4, "n000", 32), _run("e3", DP2, "n000", 16))
    return RubickRound(a800_cluster(1, 8), jobs, running=running, quotas={"A": quota, "B": 0})


def test_antman_preempts_the_fewest_latest_started_best_effort_jobs() -> None:
    """g needs 4 GPUs: preempting e3 (newest, 2 GPUs) is not enough, e2 (4 GPUs) is; e3 then fits
    again and is restored, so only e2 is preempted. e1 is never touched; q (best effort) finds no room."""
    p = _antman_round(quota=8)
    t = request_table(p)
    res = antman_round(p, t)
    assert res.preempted == ("e2",)
    assert set(res.choices) == {"e1", "e3", "g"}
    assert dict(res.admission.protected) == {"g": 4} and not res.admission.waiting
    assert violations(p, t, res.choices, res.admission) == []
    row = res.choices["g"].row
    assert int(t.gpus[row]) == 4 and int(t.cpus[row]) == 32 and res.choices["g"].parts == (("n000", 4),)
    d = AntManPolicy().decide(p)
    assert {j.job: j.action for j in d.jobs} == {"e1": "keep", "e2": "preempt", "e3": "keep", "g": "start",
                                                 "q": "wait"}
    assert d.job("g").protected and not d.job("e1").protected
    assert "e2" in d.message


def test_antman_keeps_the_earlier_started_victim_when_only_one_fits_back() -> None:
    """e_new (2 GPUs), e_mid (2) and e_old (4) fill the node, newest first in preemption order; g needs
    6: all three go, g takes 6, and the 2 GPUs left fit e_mid or e_new back but not both. The
    earlier-started e_mid is restored, so the latest-started e_new is the one that stays preempted."""
    plan4 = ExecutionPlan(dp=4)
    jobs = (Job("e_old", "vit", 4, 1000, requested_plan=plan4, requested_cpus=32, submit_time=10.0),
            Job("e_mid", "vit", 2, 1000, requested_plan=DP2, requested_cpus=16, submit_time=20.0),
            Job("e_new", "vit", 2, 1000, requested_plan=DP2, requested_cpus=16, submit_time=30.0),
            Job("g", "vit", 6, 1000, requested_cpus=48, tenant="A", guaranteed=True, submit_time=40.0))
    running = (_run("e_old", plan4, "n000", 32), _run("e_mid", DP2, "n000", 16), _run("e_new", DP2, "n000", 16))
    p = RubickRound(a800_cluster(1, 8), jobs, running=running, quotas={"A": 8})
    t = request_table(p)
    res = antman_round(p, t)
    assert res.preempted == ("e_new", "e_old")
    assert set(res.choices) == {"e_mid", "g"}
    assert violations(p, t, res.choices, res.admission) == []


def test_antman_over_quota_waits_and_preempts_nobody() -> None:
    p = _antman_round(quota=2)
    t = request_table(p)
    res = antman_round(p, t)
    assert res.preempted == () and set(res.choices) == {"e1", "e2", "e3"}
    assert "quota 2 GPUs" in res.admission.waiting["g"]
    assert violations(p, t, res.choices, res.admission) == []


def test_antman_never_preempts_guaranteed_and_gives_up_when_best_effort_is_not_enough() -> None:
    """A running guaranteed job holds 4 GPUs; g asks for 8 (within quota): even without every
    best-effort job it does not fit, so nothing is preempted and the best-effort jobs keep running."""
    plan4 = ExecutionPlan(dp=4)
    jobs = (Job("G", "vit", 4, 1000, requested_plan=plan4, requested_cpus=32, tenant="A", guaranteed=True,
                submit_time=0.0),
            Job("e", "vit", 4, 1000, requested_plan=plan4, requested_cpus=32, tenant="B", submit_time=1.0),
            Job("g", "vit", 8, 1000, requested_cpus=64, tenant="A", guaranteed=True, submit_time=2.0))
    p = RubickRound(a800_cluster(1, 8), jobs, running=(_run("G", plan4, "n000", 32), _run("e", plan4, "n000", 32)),
                    quotas={"A": 16})
    t = request_table(p)
    res = antman_round(p, t)
    assert res.preempted == () and set(res.choices) == {"G", "e"}
    assert dict(res.admission.protected) == {"G": 4}
    assert violations(p, t, res.choices, res.admission) == []
    assert schedule_antman(p, t) == dict(res.choices)


def test_antman_backfills_best_effort_jobs_in_submit_order() -> None:
    """An empty node: best-effort x (4 GPUs), w (2), then y (4 GPUs, does not fit), then z (2 GPUs, fits)."""
    jobs = (Job("x", "vit", 4, 1000, submit_time=0.0),
            Job("w", "vit", 2, 1000, submit_time=0.5),
            Job("y", "vit", 4, 1000, submit_time=1.0),
            Job("z", "vit", 2, 1000, submit_time=2.0))
    p = RubickRound(a800_cluster(1, 8), jobs)
    t = request_table(p)
    assert set(schedule_antman(p, t)) == {"x", "w", "z"}


# -- Synergy ---------------------------------------------------------------------------------------
def test_synergy_gives_spare_cpus_to_the_offload_job() -> None:
    """One node (8 GPUs, 96 CPUs), two 2-GPU RoBERTa jobs, one with ZeRO-Offload (its optimizer runs on
    the CPUs) and one with plain DP (CPU-insensitive). Both start on the proportional share of 12 CPUs
    per GPU (24); the 48 spare CPUs go to the offload job up to the largest ladder step that fits:
    32 per GPU = 64 CPUs (48 per GPU = 96 would not). The DP job keeps 24."""
    jobs = (Job("off", "roberta", 2, 1000, requested_plan=OFFLOAD2, requested_cpus=16, submit_time=0.0),
            Job("dp", "roberta", 2, 1000, requested_plan=DP2, requested_cpus=16, submit_time=1.0))
    p = RubickRound(a800_cluster(1, 8), jobs)
    bt = synergy_table(p)
    t = bt.table
    ch = schedule_synergy(p, t, options=bt.options)
    assert violations(p, t, ch, NO_GUARANTEES) == []
    assert gpu_pool(p.cluster, "A800").proportional_cpus_per_gpu == 12
    assert int(t.cpus[ch["off"].row]) == 64 and int(t.cpus[ch["dp"].row]) == 24
    assert t.plans[ch["off"].row] == OFFLOAD2 and t.plans[ch["dp"].row] == DP2
    # the offload ladder really gains along CPUs, the DP one is flat
    for name, gains in (("off", True), ("dp", False)):
        rows = sorted(bt.options[name], key=lambda r: int(t.cpus[r]))
        thr = t.throughput[rows]
        assert (np.all(np.diff(thr) > 0) if gains else np.allclose(thr, thr[0]))


def test_synergy_tune_shrinks_an_insensitive_job_to_fit() -> None:
    """Outside work holds 80 of the node's 96 CPUs: the DP job's proportional 24 CPUs do not fit, so it
    starts on the fewest CPUs within 90% of that throughput (1 per GPU: its throughput is flat); the
    offload job behind it needs more than the 14 left at its 90% point and waits."""
    jobs = (Job("dp", "roberta", 2, 1000, requested_plan=DP2, submit_time=0.0),
            Job("off", "roberta", 2, 1000, requested_plan=OFFLOAD2, submit_time=1.0))
    p = RubickRound(a800_cluster(1, 8), jobs, occupied={"n000": NodeShare(0, 80, 0.0)})
    bt = synergy_table(p, fixed_lookup(p.cluster))
    t = bt.table
    ch = schedule_synergy(p, t, options=bt.options)
    assert violations(p, t, ch, NO_GUARANTEES) == []
    assert int(t.cpus[ch["dp"].row]) == 2
    off = sorted(bt.options["off"], key=lambda r: int(t.cpus[r]))
    prop = next(r for r in off if t.cpus[r] == 24)
    tuned = min(int(t.cpus[r]) for r in off if t.throughput[r] >= 0.9 * t.throughput[prop])
    assert tuned > 14 and "off" not in ch
    with pytest.raises(ValidationError, match="tune_fraction"):
        schedule_synergy(p, t, options=bt.options, tune_fraction=0.0)


@pytest.mark.parametrize("penalty,changed", [(0.0, True), (5.0, False)])
def test_synergy_changes_a_running_job_only_when_it_pays(penalty: float, changed: bool) -> None:
    """More CPUs on the same GPUs is a trim (issue 16, item 5): Synergy weighs the trim penalty, not the
    reconfiguration penalty (5.0 here, which no CPU step would pay for)."""
    jobs = (Job("off", "roberta", 2, 1000, requested_plan=OFFLOAD2, requested_cpus=24, submit_time=0.0),)
    run = (_run("off", OFFLOAD2, "n000", 24, mem=2 * (8.0 + 355_412_057 * 14 / 2 / 2 ** 30)),)
    p = RubickRound(a800_cluster(1, 8), jobs, running=run, reconfig_penalty=5.0, trim_penalty=penalty)
    d = SynergyPolicy().decide(p)
    jd = d.job("off")
    assert jd.action == ("trim" if changed else "keep")
    assert jd.penalty == (penalty if changed else 0.0)
    assert jd.allocation.plan == OFFLOAD2 and jd.allocation.placement.gpus_per_node == (2,)
    assert (jd.allocation.placement.total_cpus > 24) == changed


def test_synergy_rejects_a_table_with_other_plans() -> None:
    p = RubickRound(a800_cluster(1, 8), (Job("a", "roberta", 2, 1000),))
    with pytest.raises(ValidationError, match="synergy: queued job 'a'"):
        schedule_synergy(p, build_round_table(p))


# -- Sia -------------------------------------------------------------------------------------------
LLAMA30_3D = ExecutionPlan(dp=1, tp=4, pp=2, micro_batches=4)


def test_sia_scales_a_dp_job_and_keeps_a_3d_job_that_cannot_run_dp() -> None:
    """Two 8-GPU nodes. LLaMA-30B asks for a 3D plan on 8 GPUs: its global batch (4) cannot be split
    over 8 DP ranks, so no DP-family plan runs and Sia keeps the 3D plan at exactly 8 GPUs. RoBERTa
    asks for DP on 2 GPUs: it starts on one DP replica and grows to the idle node's 8 GPUs."""
    jobs = (Job("llama", "llama30", 8, 1000, requested_plan=LLAMA30_3D, submit_time=0.0),
            Job("rob", "roberta", 2, 1000, requested_plan=DP2, submit_time=1.0))
    p = RubickRound(a800_cluster(2, 8), jobs)
    bt = sia_table(p)
    t = bt.table
    assert [t.plans[r] for r in bt.options["llama"]] == [LLAMA30_3D]
    rob = sorted(bt.options["rob"], key=lambda r: int(t.gpus[r]))
    assert [int(t.gpus[r]) for r in rob] == [1, 2, 4, 8]
    assert all(t.plans[r] == ExecutionPlan(dp=int(t.gpus[r])) for r in rob)
    assert all(int(t.cpus[r]) == 12 * int(t.gpus[r]) for r in rob)  # GPU-proportional CPUs
    assert np.all(np.diff(t.throughput[rob]) > 0)
    ch = schedule_sia(p, t, ladders=bt.options)
    assert violations(p, t, ch, NO_GUARANTEES) == []
    assert t.plans[ch["llama"].row] == LLAMA30_3D and ch["llama"].parts == (("n000", 8),)
    assert int(t.gpus[ch["rob"].row]) == 8 and ch["rob"].parts == (("n001", 8),)


def test_sia_falls_back_from_3d_to_the_fastest_dp_family_plan() -> None:
    """GPT-2 asking for PP=2 x DP=2 can run DP on its 4 GPUs: Sia uses the fastest of dp/ga/gc/zero-dp/
    zero-offload there and scales it; LLaMA-30B on 8 GPUs cannot, and is not scaled."""
    p = RubickRound(a800_cluster(2, 8), (Job("g", "gpt2", 4, 1000, requested_plan=ExecutionPlan(dp=2, pp=2)),
                                         Job("l", "llama30", 8, 1000, requested_plan=LLAMA30_3D)))
    perf = default_perf_lookup(p.cluster)
    pool = gpu_pool(p.cluster, "A800")
    plan, scalable = sia_plan(p.job("g"), perf("gpt2", "A800"), pool)
    assert scalable and not plan.is_3d and plan.num_gpus == 4
    pm = perf("gpt2", "A800")
    others = [ExecutionPlan(dp=4), ExecutionPlan(dp=4, ga_steps=2), ExecutionPlan(dp=4, gc=True),
              ExecutionPlan(dp=4, zero=ZeroMode.DP), ExecutionPlan(dp=4, zero=ZeroMode.OFFLOAD, gc=True)]
    best = max(others, key=lambda q: pm.throughput(q, (4,), 12.0))
    assert plan == best
    assert sia_plan(p.job("l"), perf("llama30", "A800"), pool) == (LLAMA30_3D, False)


@pytest.mark.parametrize("penalty,grows", [(0.05, True), (100.0, False)])
def test_sia_grows_a_running_job_only_when_it_pays(penalty: float, grows: bool) -> None:
    jobs = (Job("rob", "roberta", 2, 1000, requested_plan=DP2, requested_cpus=24),)
    p = RubickRound(a800_cluster(1, 8), jobs, running=(_run("rob", DP2, "n000", 24),), reconfig_penalty=penalty)
    d = SiaPolicy().decide(p)
    jd = d.job("rob")
    assert jd.action == ("reconfigure" if grows else "keep")
    assert jd.allocation.plan.num_gpus == (8 if grows else 2)
    if not grows:
        assert jd.allocation == p.current("rob")


def test_sia_queued_jobs_get_their_minimum_before_anyone_grows() -> None:
    """Four DP jobs on one 8-GPU node each start on one replica before the spare GPUs are shared."""
    jobs = tuple(Job(f"j{i}", "roberta", 4, 1000, requested_plan=ExecutionPlan(dp=4), submit_time=float(i))
                 for i in range(4))
    p = RubickRound(a800_cluster(1, 8), jobs)
    bt = sia_table(p)
    ch = schedule_sia(p, bt.table, ladders=bt.options)
    assert set(ch) == {"j0", "j1", "j2", "j3"}
    assert sum(int(bt.table.gpus[c.row]) for c in ch.values()) == 8
    assert violations(p, bt.table, ch, NO_GUARANTEES) == []


# -- generated rounds ------------------------------------------------------------------------------
#: (nodes, GPUs per node, jobs, seed, running fraction): busy 64-GPU rounds, full 32-GPU rounds, light rounds
GEN_ARGS = ([(8, 8, 40, s, 0.5) for s in range(4)] + [(4, 8, 20, s, 0.9) for s in range(4, 7)]
            + [(8, 8, 10, s, 0.3) for s in range(2)])


@lru_cache(maxsize=None)
def _generated(args: tuple) -> RubickRound:
    n, g, jobs, seed, running = args
    return generate_rubick_round(n, g, jobs, seed, running_fraction=running)


def _tables(p: RubickRound) -> dict:
    perf = fixed_lookup(p.cluster)
    return {"request": request_table(p, perf), "synergy": synergy_table(p, perf), "sia": sia_table(p, perf)}


@pytest.mark.parametrize("args", GEN_ARGS)
def test_generated_rounds_are_feasible_and_respect_running_jobs(args: tuple) -> None:
    p = _generated(args)
    tabs = _tables(p)
    req = tabs["request"]
    queued = sorted((j for j in p.jobs if p.current(j.name) is None), key=lambda j: (j.submit_time, j.name))

    # FIFO: running jobs kept exactly; strict FIFO starts a prefix of the queue
    strict = schedule_fifo(p, req)
    back = schedule_fifo(p, req, backfill=True)
    for ch in (strict, back):
        assert violations(p, req, ch, NO_GUARANTEES) == []
        assert all(name in ch and ch[name].row == req.current_row[req.jobs.index(name)] for name in
                   (a.job for a in p.running))
    started = [j.name in strict for j in queued]
    assert started == sorted(started, reverse=True)
    assert set(strict) <= set(back)
    for j in queued:
        if j.name in back:
            row = back[j.name].row
            assert int(req.gpus[row]) == j.requested_gpus
            assert req.gpus_per_node[row] == packed_placement(j.requested_gpus, 8)

    # AntMan: guaranteed running jobs kept, only best-effort running jobs preempted, quotas on new starts
    res = antman_round(p, req)
    assert violations(p, req, res.choices, res.admission) == []
    for a in p.running:
        if a.job not in res.choices:
            assert a.job in res.preempted and not p.job(a.job).guaranteed
        else:
            assert res.choices[a.job].row == req.current_row[req.jobs.index(a.job)]
    for tenant, quota in p.quotas:
        held = sum(p.job(n).requested_gpus for n in res.choices if p.job(n).guaranteed and p.job(n).tenant == tenant)
        before = sum(p.job(a.job).requested_gpus for a in p.running
                     if p.job(a.job).guaranteed and p.job(a.job).tenant == tenant)
        assert held <= max(quota, before)

    # Synergy: running jobs keep plan, nodes and GPUs; CPUs only grow (a trim), and only when it pays
    syn = tabs["synergy"]
    ch = schedule_synergy(p, syn.table, options=syn.options)
    assert violations(p, syn.table, ch, NO_GUARANTEES) == []
    for a in p.running:
        j = syn.table.jobs.index(a.job)
        row, parts = ch[a.job].row, ch[a.job].parts
        cur = int(syn.table.current_row[j])
        assert syn.table.plans[row] == a.plan
        assert sorted(parts) == sorted((n, s.gpus) for n, s in a.placement.shares if s.gpus > 0)
        assert syn.table.cpus[row] >= syn.table.cpus[cur]
        if row != cur:
            norm = syn.table.throughput / syn.table.reference_throughput[syn.table.job_index]
            assert norm[row] - p.trim_penalty > norm[cur]
    for j in queued:
        if j.name in ch:
            row = ch[j.name].row
            assert int(syn.table.gpus[row]) == j.requested_gpus
            assert syn.table.plans[row] == req.plans[req.configs_of(j.name)[0]]

    # Sia: running jobs never shrink nor stop; queued jobs start on their ladder
    sia = tabs["sia"]
    ch = schedule_sia(p, sia.table, ladders=sia.options)
    assert violations(p, sia.table, ch, NO_GUARANTEES) == []
    for a in p.running:
        assert int(sia.table.gpus[ch[a.job].row]) >= a.plan.num_gpus
    for name, choice in ch.items():
        if p.current(name) is None:
            assert choice.row in sia.options[name]


def test_some_generated_round_exercises_preemption_and_cpu_tuning() -> None:
    """Guards the property test above from passing vacuously."""
    preempted = tuned = grown = 0
    for args in GEN_ARGS:
        p = _generated(args)
        tabs = _tables(p)
        preempted += len(antman_round(p, tabs["request"]).preempted)
        syn = tabs["synergy"]
        for name, choice in schedule_synergy(p, syn.table, options=syn.options).items():
            tuned += p.current(name) is not None and choice.row != syn.table.current_row[syn.table.jobs.index(name)]
        sia = tabs["sia"]
        for name, choice in schedule_sia(p, sia.table, ladders=sia.options).items():
            grown += p.current(name) is None and int(sia.table.gpus[choice.row]) > min(
                int(sia.table.gpus[r]) for r in sia.options[name])
    assert preempted > 0 and tuned > 0 and grown > 0


def test_the_baseline_methods_are_registered() -> None:
    assert BASELINE_METHODS == ("antman", "fifo", "fifo-backfill", "sia", "synergy")


@pytest.mark.parametrize("method", BASELINE_METHODS)
def test_policies_are_deterministic_and_registered(method: str) -> None:
    """The same decision (up to wall time) with the performance models given explicitly (the built-in
    ones) or left to the defaults, with any seed, and when asked twice."""
    p = _generated(GEN_ARGS[0])
    built_in = {j.model: default_performance_model(j.model, p.cluster, "A800") for j in p.jobs}
    a = make_policy(method, PolicyOptions(time_limit=10.0, seed=0, perf_models=built_in))
    b = make_policy(method, PolicyOptions(time_limit=10.0, seed=7))
    assert a.name == method
    da, db = a.decide(p), b.decide(p)
    assert without_solve_time(da) == without_solve_time(db) == without_solve_time(a.decide(p))
    assert da.status == "heuristic" and da.method == method
    assert Decision.from_dict(da.to_dict()).jobs == da.jobs


def test_admission_of_baselines_without_guarantees_is_empty() -> None:
    p = _generated(GEN_ARGS[0])
    d = SiaPolicy().decide(p)
    assert not any(j.protected for j in d.jobs)
    assert NO_GUARANTEES == Admission({}, {})


@pytest.mark.parametrize("method", BASELINE_METHODS)
def test_a_second_round_on_the_decisions_state_moves_nobody(method: str) -> None:
    """Applying a decision and asking again (the simulator's periodic tick with nothing new) keeps every
    running job and starts nobody: no baseline moves running jobs for nothing."""
    for args in (GEN_ARGS[0], GEN_ARGS[2], GEN_ARGS[4], GEN_ARGS[-1]):
        p = _generated(args)
        policy = make_policy(method, PolicyOptions(time_limit=10.0, seed=0))
        d = policy.decide(p)
        again = RubickRound(p.cluster, p.jobs, running=tuple(d.allocations.values()), occupied=p.occupied,
                            quotas=p.quotas, reconfig_penalty=p.reconfig_penalty,
                            preempt_penalty=p.preempt_penalty, time=p.time + 60.0)
        d2 = policy.decide(again)
        assert {j.job: j.action for j in d2.jobs} == {j.job: ("keep" if j.allocation else "wait") for j in d.jobs}
        assert d2.allocations == d.allocations


def test_gavel_lp_is_built_at_once_and_keeps_its_deadline() -> None:
    """Issue 26: Gavel-like's LP was filled entry by entry (160,000 sparse assignments, 0.56 s on 20,000 jobs)
    and solved without a limit (2.7 s at a 1 s limit). The LP built at once gives the same shares as the
    entry-by-entry one; a deadline that has passed gives no shares, at once."""
    import time

    from scipy.optimize import linprog
    from scipy.sparse import lil_matrix

    from optsched.core.deadline import Deadline
    from optsched.heuristics.baselines.cells import cells_by_spec, dp_value, fcfs, request_gpus, type_order
    from optsched.heuristics.baselines.gavel import NO_PROFILE_VALUE, gavel_shares
    from optsched.rounds.crius.generate import generate_crius_round
    from optsched.rounds.crius.table import build_crius_table

    problem = generate_crius_round(300, seed=1)
    table = build_crius_table(problem)
    jobs, types = [*fcfs(problem, table, queued=False), *fcfs(problem, table)], type_order(problem)
    n, m = len(jobs), len(types)
    value, gpus, ub = np.zeros((n, m)), np.zeros(n), np.zeros((n, m))
    for a, j in enumerate(jobs):  # the module docstring's LP, entry by entry
        g, cells = request_gpus(problem, table, j), cells_by_spec(table, j)
        gpus[a] = g or 0
        for b, t in enumerate(types):
            if g is not None and (t, g) in cells:
                ub[a, b], value[a, b] = 1.0, dp_value(table, j, t, g)
        best = value[a].max()
        value[a] = np.where(ub[a] > 0, np.maximum(value[a] / best if best > 0 else 0.0, NO_PROFILE_VALUE), 0.0)
    rows = lil_matrix((n + m, n * m))
    for a in range(n):
        for b in range(m):
            rows[a, a * m + b], rows[n + b, a * m + b] = 1.0, gpus[a]
    cap = [sum(nd.num_gpus for nd in problem.cluster.nodes_of_type(t)) for t in types]
    want = linprog(-value.ravel(), A_ub=rows.tocsr(), b_ub=np.concatenate([np.ones(n), cap]),
                   bounds=[(0.0, u) for u in ub.ravel()], method="highs").x.reshape(n, m)
    assert np.array_equal(gavel_shares(problem, table, jobs, types), want)
    t0 = time.perf_counter()
    gone = gavel_shares(problem, table, jobs, types, Deadline(1e-9, t0 - 1.0))
    assert not gone.any() and time.perf_counter() - t0 < 0.05

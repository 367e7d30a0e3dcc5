"""Deferring admitted guaranteed jobs whose performance guarantee is unreachable this round
(optsched.heuristics.rubick.schedule_with_deferral, the ``defer_unreachable_guarantees`` option of the
Rubick policies and its use by the simulator): hand-made fragmented rounds with known answers, the
default contract (InfeasibleError naming the job), the exact policy, identical decisions when nothing
is unreachable, and properties on random small rounds."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from optsched.core import Allocation, InfeasibleError, Job, NodeShare, ValidationError, a800_cluster
from optsched.core.decision import Decision
from optsched.core.events import CapacityChange
from optsched.experiments.compare import run_policies
from optsched.heuristics.rubick import UnreachableGuaranteeError, schedule, schedule_with_deferral
from optsched.perf.coefficients import CoefficientTable
from optsched.policies.options import PolicyOptions
from optsched.policies.registry import make_policy, methods_of
from optsched.policies.solve import solve
from optsched.rounds.rubick.admission import admit, reaches_guarantee
from optsched.rounds.rubick.decision import choices_of
from optsched.rounds.rubick.feasibility import violations
from optsched.rounds.rubick.objective import objective
from optsched.rounds.rubick.problem import RubickRound
from optsched.rounds.rubick.table import build_round_table
from optsched.sim.config import SimConfig
from optsched.sim.engine import simulate

from helpers import InverseGPUs, best_row, row_alloc, without_solve_time

CLUSTER = a800_cluster(2, 4)  # two nodes of 4 A800 GPUs: a 4-GPU request needs a whole node
#: the option of the Rubick policies this file is about
DEFER = {"defer_unreachable_guarantees": True}


def _alloc_at_gpus(job: Job, gpus: int, node: str) -> Allocation:
    """``job`` running on ``node`` with its table's row of ``gpus`` GPUs (one node, packed)."""
    table = build_round_table(RubickRound(CLUSTER, (job,)))
    return row_alloc(table, job.name, best_row(table, job.name, gpus), [node])


A = Job("a", "vit", 2, 1000, tenant="t", guaranteed=True, submit_time=0.0)
B = Job("b", "roberta", 2, 1000, tenant="t", guaranteed=True, submit_time=1.0)
BIG = Job("big", "bert", 4, 1000, tenant="t", guaranteed=True, submit_time=5.0)
BE = Job("be", "t5", 1, 1000, tenant="u", max_gpus=2)


def _round(*, occupied: dict[str, NodeShare], jobs: tuple[Job, ...], running: tuple[Allocation, ...],
           quotas: dict[str, int] | None = None) -> RubickRound:
    return RubickRound(CLUSTER, jobs, running, occupied=tuple(occupied.items()), quotas=tuple((quotas or {}).items()),
                       reconfig_penalty=0.05, preempt_penalty=0.25)


def fragmented() -> RubickRound:
    """Outside work holds one GPU of each node (3 + 3 free). Tenant t's quota of 6 GPUs admits the
    running 2-GPU job ``a`` (on n000) and the queued 4-GPU job ``big``: 6 GPUs are free, but no node has
    4, so ``big``'s guarantee is unreachable. ``be`` is a best-effort 1-GPU job (up to 2 GPUs)."""
    return _round(occupied={"n000": NodeShare(1, 0, 0.0), "n001": NodeShare(1, 0, 0.0)}, jobs=(A, BIG, BE),
                  running=(_alloc_at_gpus(A, 2, "n000"),), quotas={"t": 6})


def _best_row(table: CoefficientTable, name: str, max_gpus: int) -> int:
    rows = [int(k) for k in table.configs_of(name) if table.gpus[k] <= max_gpus]
    return max(rows, key=lambda k: table.throughput[k])


def _same(d1: Decision, d2: Decision) -> bool:
    return without_solve_time(d1) == without_solve_time(d2)


# -- the hand-made round ----------------------------------------------------------------------------
def test_fragmented_round_admits_big_but_no_node_fits_it() -> None:
    problem = fragmented()
    table = build_round_table(problem)
    adm = admit(problem, table)
    assert dict(adm.protected) == {"a": 2, "big": 4} and not adm.waiting
    # every row of big reaching its guarantee needs 4 GPUs on one node; the most free on a node is 3
    ok = [int(k) for k in table.configs_of("big") if reaches_guarantee(table, int(k))[0]]
    assert ok and all(max(table.gpus_per_node[k]) >= 4 for k in ok)
    with pytest.raises(UnreachableGuaranteeError) as exc:
        schedule(problem, table, adm)
    assert exc.value.jobs == ("big",) and set(exc.value.job_reasons) == {"big"}
    assert isinstance(exc.value, InfeasibleError) and "'big' needs 4 A800 GPUs" in str(exc.value)


@pytest.mark.parametrize("method", ["rubick", "exact"])
def test_default_policy_raises_naming_the_job(method: str) -> None:
    with pytest.raises(InfeasibleError, match="'big'"):
        solve(fragmented(), method, time_limit=5)


def test_deferral_runs_the_others_and_defers_big() -> None:
    problem = fragmented()
    table = build_round_table(problem)
    d = solve(problem, "rubick", defer_unreachable_guarantees=True)
    # by hand: a keeps its 2 GPUs on n000 (no other node shape is better, a move costs a penalty; it
    # cannot grow to 4 GPUs on a 3-GPU node); be takes its best row of at most 2 GPUs; big waits
    assert d.job("a").action == "keep" and d.job("a").allocation == problem.current("a")
    assert d.job("a").protected
    be_row = _best_row(table, "be", 2)
    assert d.job("be").action == "start" and d.job("be").throughput == pytest.approx(table.throughput[be_row])
    assert d.job("be").allocation.placement.total_gpus == table.gpus[be_row] == 2  # only fits n001
    assert [n for n, _ in d.job("be").allocation.placement.shares] == ["n001"]
    big = d.job("big")
    assert big.allocation is None and big.action == "wait" and not big.protected
    assert "'big' (queued)" in d.message and "needs 4 A800 GPUs" in d.message
    choices = choices_of(d, table, problem)
    reduced = admit(problem, table).defer({"big": "no node has 4 free GPUs"})
    assert violations(problem, table, choices, reduced) == []
    assert violations(problem, table, choices)  # the full admission is not met: big does not run
    assert d.objective == pytest.approx(1.0 + table.throughput[be_row] / table.reference_throughput[2])


def test_exact_policy_defers_the_same_job_and_is_never_worse() -> None:
    problem = fragmented()
    table = build_round_table(problem)
    h = solve(problem, "rubick", defer_unreachable_guarantees=True)
    x = solve(problem, "exact", time_limit=10, defer_unreachable_guarantees=True)
    assert x.status == "optimal" and x.objective >= h.objective - 1e-9
    assert x.job("big").allocation is None and not x.job("big").protected and "'big' (queued)" in x.message
    reduced = admit(problem, table).defer({"big": "unreachable"})
    assert violations(problem, table, choices_of(x, table, problem), reduced) == []
    # this round is small enough to know the answer: a keeps, be runs its best row
    assert x.objective == pytest.approx(h.objective)


def test_running_guarantees_are_kept_and_the_queued_job_is_deferred() -> None:
    """n000 holds the running guaranteed jobs a and b (2 + 2 GPUs); n001 has 3 free. Algorithm 1 cannot
    place big; the repack fallback would put big on n000 and then fail on the running b. The failing
    job of Algorithm 1 (big) is deferred, not b: running guarantees stay ahead of queued ones."""
    problem = _round(occupied={"n001": NodeShare(1, 0, 0.0)}, jobs=(A, B, BIG, BE),
                     running=(_alloc_at_gpus(A, 2, "n000"), _alloc_at_gpus(B, 2, "n000")))
    table = build_round_table(problem)
    with pytest.raises(UnreachableGuaranteeError) as exc:
        schedule(problem, table)
    assert exc.value.jobs == ("big",)
    assert any("repacking" in r and "'b'" in r for r in exc.value.reasons)
    result = schedule_with_deferral(problem, table)
    assert list(result.deferred) == ["big"] and "big" in result.admission.waiting
    assert set(result.admission.protected) == {"a", "b"}
    assert violations(problem, table, result.choices, result.admission) == []
    d = solve(problem, "rubick", defer_unreachable_guarantees=True)
    assert d.job("a").action == d.job("b").action == "keep" and d.job("big").action == "wait"
    be_row = _best_row(table, "be", 2)
    assert d.job("be").throughput == pytest.approx(table.throughput[be_row])
    assert dict(d.job("be").allocation.placement.shares)["n001"].gpus == table.gpus[be_row]


def test_running_job_below_its_guarantee_is_deferred_and_preempted() -> None:
    """big runs on 2 GPUs of n001 (below the throughput of its 4-GPU request), so Algorithm 1 must move
    it, and no node has 4 free GPUs: it is deferred and therefore preempted this round."""
    problem = _round(occupied={"n000": NodeShare(1, 0, 0.0), "n001": NodeShare(1, 0, 0.0)}, jobs=(A, BIG, BE),
                     running=(_alloc_at_gpus(A, 2, "n000"), _alloc_at_gpus(BIG, 2, "n001")))
    table = build_round_table(problem)
    assert not reaches_guarantee(table, int(table.current_row[1]))[0]
    with pytest.raises(InfeasibleError, match="'big'"):
        solve(problem, "rubick")
    d = solve(problem, "rubick", defer_unreachable_guarantees=True)
    assert d.job("big").action == "preempt" and d.job("big").allocation is None
    assert "'big' (running, preempted)" in d.message
    assert d.job("a").action == "keep"
    assert violations(problem, table, choices_of(d, table, problem),
                      admit(problem, table).defer({"big": "unreachable"})) == []
    x = solve(problem, "exact", time_limit=10, defer_unreachable_guarantees=True)
    assert x.job("big").action == "preempt" and x.objective >= d.objective - 1e-9


@pytest.mark.parametrize("method", ["rubick", "exact", "rubick-n", "fifo", "antman"])
def test_nothing_unreachable_same_decision_with_and_without_the_option(method: str) -> None:
    """Without outside work big fits on n001: the option changes nothing (up to wall time)."""
    problem = _round(occupied={}, jobs=(A, BIG, BE), running=(_alloc_at_gpus(A, 2, "n000"),), quotas={"t": 6})
    plain = solve(problem, method, time_limit=10)
    deferring = solve(problem, method, time_limit=10, defer_unreachable_guarantees=True)
    if method == "exact":  # deferring starts from Algorithm 1 (its admission binds the model), the plain solve need not
        assert deferring.warm_start and plain.status == "optimal"
        plain, deferring = (replace(d, heuristic_objective=None, warm_start=False, message="")
                            for d in (plain, deferring))
    assert _same(plain, deferring)
    if method in ("rubick", "exact"):
        assert plain.job("big").protected and plain.job("big").allocation is not None
        assert "deferred" not in plain.message


def test_decision_with_deferral_round_trips_through_json() -> None:
    d = solve(fragmented(), "rubick", defer_unreachable_guarantees=True)
    assert Decision.from_dict(d.to_dict()) == d


# -- API ------------------------------------------------------------------------------------------------
def test_every_factory_takes_the_flag_and_the_rubick_ones_use_it() -> None:
    def deferring(policy: object) -> bool | None:
        holder = getattr(policy, "contract", policy)  # an exact method keeps the option in its contract
        return getattr(holder, "defer_unreachable_guarantees", None)
    for name in methods_of("rubick"):
        on = make_policy(name, PolicyOptions(time_limit=5.0, seed=0, extras=DEFER))
        off = make_policy(name, PolicyOptions(time_limit=5.0, seed=0))
        if deferring(off) is not None:
            assert deferring(on) and not deferring(off)
    assert make_policy("rubick", PolicyOptions(extras=DEFER)).defer_unreachable_guarantees
    assert deferring(make_policy("exact", PolicyOptions(extras=DEFER))) is True
    assert not make_policy("rubick").defer_unreachable_guarantees
    with pytest.raises(ValidationError, match="defer_unreachable_guarantees"):
        make_policy("rubick", PolicyOptions(extras={"defer_unreachable_guarantees": "yes"}))


def test_only_protected_jobs_can_be_deferred() -> None:
    problem = fragmented()
    adm = admit(problem, build_round_table(problem))
    with pytest.raises(ValidationError, match="'be'"):
        adm.defer({"be": "best-effort"})
    reduced = adm.defer({"big": "no node fits"})
    assert dict(reduced.protected) == {"a": 2} and "no node fits" in reduced.waiting["big"]
    assert dict(adm.protected) == {"a": 2, "big": 4}  # the original is unchanged


# -- properties on random small rounds -----------------------------------------------------------------
def random_round(seed: int) -> RubickRound:
    """3 nodes of 4 GPUs, some with one or two GPUs of outside work; 6 jobs of 1, 2 or 4 GPUs, most of them
    guaranteed (no quotas: all admitted), about half running on a random one-node row of theirs."""
    rng = np.random.default_rng(seed)
    cluster = a800_cluster(3, 4)
    names = [n.name for n in cluster.nodes]
    occupied = {n: NodeShare(int(rng.integers(1, 3)), 0, 0.0) for n in names if rng.random() < 0.4}
    jobs = tuple(Job(f"j{i}", str(rng.choice(["vit", "roberta", "bert", "t5", "gpt2"])), int(rng.choice([1, 2, 4])),
                     100, guaranteed=bool(rng.random() < 0.6), submit_time=float(i), max_gpus=4) for i in range(6))
    queued = RubickRound(cluster, jobs, occupied=tuple(occupied.items()))
    table = build_round_table(queued)
    free = {n: queued.free(n).gpus for n in names}
    running = []
    for job in jobs:
        if rng.random() < 0.5:
            rows = [int(k) for k in table.configs_of(job.name) if len(table.gpus_per_node[k]) == 1]
            k = int(rng.choice(rows))
            g = int(table.gpus[k])
            fit = [n for n in names if free[n] >= g]
            if fit:
                node = str(rng.choice(fit))
                free[node] -= g
                running.append(row_alloc(table, job.name, k, [node]))
    return RubickRound(cluster, jobs, tuple(running), occupied=tuple(occupied.items()))


def test_random_rounds_deferral_properties() -> None:
    deferring_rounds = 0
    for seed in range(40):
        problem = random_round(seed)
        table = build_round_table(problem)
        adm = admit(problem, table)
        result = schedule_with_deferral(problem, table, adm)
        try:
            plain = schedule(problem, table, adm)
        except UnreachableGuaranteeError as e:
            deferring_rounds += 1
            assert result.deferred and set(e.jobs) <= set(result.deferred) <= set(adm.protected)
            assert violations(problem, table, result.choices, result.admission) == []
            assert set(result.admission.protected) == set(adm.protected) - set(result.deferred)
            assert not set(result.deferred) & set(result.choices)
            d = solve(problem, "rubick", defer_unreachable_guarantees=True)
            assert all(f"{name!r} (" in d.message for name in result.deferred)
            assert d.objective == pytest.approx(objective(problem, table, result.choices))
            if deferring_rounds <= 4:  # a few exact solves: feasible for the reduced admission, never worse
                x = solve(problem, "exact", time_limit=10, defer_unreachable_guarantees=True)
                assert x.objective >= d.objective - 1e-9
                assert violations(problem, table, choices_of(x, table, problem), result.admission) == []
        else:
            assert not result.deferred and result.admission == adm and dict(result.choices) == plain
    assert deferring_rounds >= 5  # the generator does produce unreachable guarantees


# -- the simulator ------------------------------------------------------------------------------------------
def test_simulator_defers_instead_of_failing_rounds() -> None:
    """Outside work holds a GPU of each node until t = 2000 s, so the guaranteed 4-GPU job cannot reach
    its guarantee before; the best-effort job must not wait for it. Without deferral every round before
    2000 s fails and the best-effort job starts only after; ``run_policies`` defers, so no round fails
    and the best-effort job starts at once."""
    jobs = (Job("big", "bert", 4, 100, guaranteed=True, tenant="t"), Job("be", "t5", 1, 100, tenant="u", max_gpus=2))
    changes = (CapacityChange(0.0, "n000", NodeShare(1, 0, 0.0)), CapacityChange(0.0, "n001", NodeShare(1, 0, 0.0)),
               CapacityChange(2000.0, "n000", NodeShare(0)), CapacityChange(2000.0, "n001", NodeShare(0)))
    config = SimConfig(round_interval_s=300.0)
    plain = simulate(CLUSTER, jobs, make_policy("rubick"), InverseGPUs(), config, capacity_changes=changes)
    deferring = run_policies(CLUSTER, jobs, InverseGPUs(), ["rubick"], config, capacity_changes=changes)["rubick"]
    assert plain.summary()["failed_rounds"] > 0
    s = deferring.summary()
    assert s["failed_rounds"] == 0 and s["unfinished"] == 0
    rec = {r.name: r for r in deferring.jobs}
    assert rec["be"].start_s == pytest.approx(0.0)
    assert rec["big"].start_s >= 2000.0
    assert {r.name: r for r in plain.jobs}["be"].start_s >= 2000.0


def test_cli_solve_defer_unreachable(tmp_path, capsys) -> None:
    """``optsched solve``: the fragmented round is reported infeasible (exit 2, naming ``big``); with
    ``--defer-unreachable`` it is solved, ``big`` waits and the message names it."""
    import json

    from optsched.cli import main
    path = tmp_path / "round.json"
    path.write_text(json.dumps(fragmented().to_dict()))
    assert main(["solve", str(path), "--method", "heuristic"]) == 2
    assert "'big'" in capsys.readouterr().err
    out = tmp_path / "decision.json"
    assert main(["solve", str(path), "--method", "heuristic", "--defer-unreachable", "--out", str(out)]) == 0
    decision = Decision.from_dict(json.loads(out.read_text()))
    assert decision.job("big").allocation is None and "'big'" in decision.message
    assert decision.job("a").allocation is not None

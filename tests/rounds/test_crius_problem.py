"""The crius round kind: fields, JSON, validation, the Cell table, capacity and admission."""

from __future__ import annotations

import json

import numpy as np
import pytest

import optsched
from crius_helpers import alloc_on, toy_cluster, toy_graph
from optsched.core import Decision, Job, NodeShare, UnknownNameError, ValidationError
from optsched.core.kinds import round_kind
from optsched.core.round import RoundProblem
from optsched.rounds.crius import CriusAllocations, CriusRound, generate_crius_round
from optsched.rounds.crius.admission import admit
from optsched.rounds.crius.capacity import NodeState, place, slot_rates
from optsched.rounds.crius.payload import CellInfo
from optsched.rounds.crius.table import build_crius_table, cell_gpu_counts, stage_counts


@pytest.fixture(scope="module")
def generated() -> CriusRound:
    return generate_crius_round(30, seed=4, deadline_fraction=0.3)


def test_generated_round_round_trips(generated: CriusRound) -> None:
    data = json.loads(json.dumps(generated.to_dict()))
    back = RoundProblem.from_dict(data)
    assert isinstance(back, CriusRound) and back.to_dict() == data
    assert generated.cluster.total_gpus == 1280 and generated.running
    assert round_kind("crius").generate(seed=1, jobs=5).kind == "crius"


def _round(**kw) -> CriusRound:
    cluster = toy_cluster()
    jobs = kw.pop("jobs", (Job("a", "tiny", 2, 100), Job("b", "tiny", 1, 100)))
    return CriusRound(cluster=cluster, jobs=tuple(jobs), models=(("tiny", toy_graph("tiny")),), **kw)


def test_round_models_and_json() -> None:
    r = _round(time=5.0)
    data = json.loads(json.dumps(r.to_dict()))
    assert set(data["models"]) == {"tiny"} and data["search_depth"] == 3 and data["objective"] == "throughput"
    assert RoundProblem.from_dict(data).to_dict() == data


@pytest.mark.parametrize("change, error, match", [
    (lambda d: d["jobs"][0].update(gpu_type="H100"), ValidationError, "pinned to unknown GPU type 'H100'"),
    (lambda d: d["jobs"][0].update(gpu_type="fast", requested_gpus=16), ValidationError,
     "job 'a': its smallest Cell needs 8 GPUs of one type, more than any type it may use has \\(fast: 4\\)"),
    (lambda d: d["jobs"][0].update(deadline=1.0), ValidationError, "job 'a': deadline 1 s is before the round's time 10 s"),
    (lambda d: d["models"]["tiny"]["edges"].append({"src": "op3", "dst": "op0", "bytes": 1.0}), ValidationError,
     "model 'tiny'.*cycle"),
    (lambda d: d["models"]["tiny"]["operators"][0].update(flops=-5), ValidationError, "model 'tiny'.*op0.*flops"),
    (lambda d: d["jobs"][1].update(model="gpt-3"), ValidationError, "job 'b': unknown Crius model 'gpt-3'"),
    (lambda d: d["jobs"][1].update(requested_gpus=3), ValidationError, "job 'b': requests 3 GPUs, not a power of two"),
    (lambda d: d.update(objective="fairness"), UnknownNameError, "unknown objective 'fairness'"),
    (lambda d: d.update(search_depth=-1), ValidationError, "search_depth must be >= 0"),
    (lambda d: d["models"].update({"bert-1.3b": d["models"]["tiny"]}), ValidationError, "shadows a catalogue model"),
])
def test_bad_round_files_are_named(change, error, match) -> None:
    data = json.loads(json.dumps(_round(time=10.0).to_dict()))
    change(data)
    with pytest.raises(error, match=match):
        RoundProblem.from_dict(data)


def test_running_cell_checks() -> None:
    c = toy_cluster()
    bad = alloc_on(c, "a", "slow", {"s0": 3}, 1)
    with pytest.raises(ValidationError, match="runs 3 GPUs in 1 stages"):
        _round(running=(bad,))
    over = alloc_on(c, "a", "fast", {"f0": 2}, 1)
    twice = alloc_on(c, "b", "fast", {"f0": 1}, 1)
    with pytest.raises(ValidationError, match="node 'f0' is over capacity"):
        _round(running=(over, twice))


def test_cells_of_a_job() -> None:
    assert cell_gpu_counts(1) == (1, 2) and cell_gpu_counts(8) == (4, 8, 16)
    g = toy_graph("tiny")
    assert stage_counts(8, g) == (1, 2, 4) and stage_counts(1, g) == (1,)
    r = _round(running=(alloc_on(toy_cluster(), "a", "fast", {"f0": 2}, 2),))
    t = build_crius_table(r)
    rows = t.rows_of(0)
    specs = {(t.gpu_type[k], int(t.gpus[k]), int(t.stages[k])) for k in rows}
    # a: N_G = 2 -> 1, 2, 4 GPUs on both types (4 GPUs of fast: two whole nodes), stages up to the GPUs
    assert {(ty, g) for ty, g, _ in specs} == {(ty, g) for ty in ("fast", "slow") for g in (1, 2, 4)}
    cur = int(t.current_row[0])
    assert cur in rows and not t.candidate[cur] and t.coefficients.plans[cur].pp == 2
    assert t.current_row[1] == -1
    for k in rows[t.candidate[rows]]:  # a candidate has the best stage count of its (type, GPUs)
        same = [q for q in rows if (t.gpu_type[q], t.gpus[q]) == (t.gpu_type[k], t.gpus[k]) and q != cur]
        assert t.throughput[k] == max(t.throughput[q] for q in same)
    ref = max(t.throughput[k] for k in rows if t.gpus[k] == 2 and k != cur)
    assert t.coefficients.reference_throughput[0] == pytest.approx(ref)
    assert np.allclose(t.weight, t.throughput / t.coefficients.reference_throughput[t.job_index])
    four = [k for k in rows if t.gpus[k] == 4 and t.gpu_type[k] == "fast"]
    assert all(t.unit[k] == 2 and t.parts[k] == 2 for k in four)


def test_deadline_flags() -> None:
    jobs = (Job("a", "tiny", 2, 1000, deadline=10.0 + 1e-3), Job("b", "tiny", 1, 100, deadline=1e9))
    r = _round(jobs=jobs, time=10.0, objective="deadline")
    t = build_crius_table(r)
    assert not t.deadline_ok[t.rows_of(0)].any() and t.deadline_ok[t.rows_of(1)].all()
    adm = admit(r, t)
    assert adm.dropped == {"a"} and adm.protected == "b"


def test_packing_rule_matches_placement() -> None:
    """Power-of-two parts fit nodes with the given free slots iff the size-class condition holds
    (capacity module docstring): checked on every small case."""
    rng = np.random.default_rng(0)
    types = np.array(["x"] * 4)
    for _ in range(400):
        slots = rng.integers(0, 5, size=4)
        parts = [int(2 ** rng.integers(0, 3)) for _ in range(rng.integers(1, 6))]
        demands = [(f"d{i}", "x", s, 1) for i, s in enumerate(parts)]
        placed = place(slots, types, demands) is not None
        cond = all(sum(p for p in parts if p >= s) <= s * int((slots // s).sum()) for s in (1, 2, 4))
        assert placed == cond, (slots, parts)


def test_slots_follow_cpus_and_memory() -> None:
    c = toy_cluster()
    r = _round(occupied=(("f0", NodeShare(0, 12, 0.0)),))
    rates = slot_rates(c)
    assert rates["fast"] == (8, 64.0)
    assert NodeState.of(r).slots(rates).tolist()[:2] == [0, 2]  # f0: 4 CPUs left, a slot needs 8


def test_admission_protects_the_pending_job() -> None:
    c = toy_cluster(fast_nodes=1, slow_nodes=0)
    jobs = (Job("old", "tiny", 2, 100, submit_time=0.0, gpu_type="fast"),
            Job("new", "tiny", 2, 100, submit_time=5.0, gpu_type="fast"))
    r = CriusRound(cluster=c, jobs=jobs, models=(("tiny", toy_graph("tiny")),), time=10.0,
                   running=(alloc_on(c, "new", "fast", {"f0": 2}, 1),))
    adm = admit(r, build_crius_table(r))
    assert adm.protected == "old" and adm.opportunistic == {"new"}


def test_payload_round_trip() -> None:
    r = generate_crius_round(8, seed=2)
    d = optsched.solve(r, "crius", time_limit=30)
    assert isinstance(d.payload, CriusAllocations)
    back = Decision.from_dict(json.loads(json.dumps(d.to_dict())))
    assert back.to_dict() == d.to_dict()
    for cell in d.payload.cells:
        assert sum(cell.stage_gpus) == cell.gpus and len(cell.plan) == cell.stages
    with pytest.raises(ValidationError, match="stage_gpus"):
        CellInfo("j", "A40", 4, 2, (2, 1), ((2, 1), (1, 1)), (False, False), 1.0, 1.0)


def test_the_table_cache_keeps_clusters_apart() -> None:
    """One cache, rounds alternating between two clusters with the same jobs: each table has its own
    cluster's GPU types (the blocks were keyed without the cluster: KeyError 'A100-40G')."""
    from optsched.core.catalog import get_cluster
    from optsched.rounds.crius.table import CriusTableCache
    jobs = (Job("j0", "bert-1.3b@128", 4, 1000), Job("j1", "wresnet-1b@512", 2, 1000))
    a, b = (CriusRound(cluster=get_cluster(n), jobs=jobs, time=10.0) for n in ("crius-testbed-64", "crius-sim-1280"))
    cache = CriusTableCache()
    first = build_crius_table(a, cache)
    other = build_crius_table(b, cache)
    again = build_crius_table(a, cache)
    types_a = {n.gpu_type for n in a.cluster.nodes}
    assert set(first.gpu_type) <= types_a and set(other.gpu_type) - types_a
    assert again.gpu_type == first.gpu_type and np.array_equal(again.throughput, first.throughput)


def test_a_cache_fed_a_new_cluster_object_every_round_stays_bounded() -> None:
    """A caller that parses every round anew brings a new (equal) cluster object each time: the cache
    keeps at most MAX_CLUSTERS of them and their blocks, and its tables stay the same."""
    from dataclasses import replace

    from optsched.core.catalog import get_cluster
    from optsched.rounds.crius.table import MAX_CLUSTERS, CriusTableCache
    jobs = (Job("j0", "bert-1.3b@128", 4, 1000), Job("j1", "wresnet-1b@512", 2, 1000))
    base = get_cluster("crius-testbed-64")
    cache = CriusTableCache()
    first = build_crius_table(CriusRound(cluster=base, jobs=jobs, time=10.0), cache)
    for _ in range(3 * MAX_CLUSTERS):
        table = build_crius_table(CriusRound(cluster=replace(base), jobs=jobs, time=10.0), cache)
        assert len(cache._estimators) <= MAX_CLUSTERS
        assert len({id(cl) for _, cl, _ in cache._blocks.values()}) <= MAX_CLUSTERS
    assert np.array_equal(table.throughput, first.throughput)


class _CountingTuple(tuple):
    """A tuple that counts the membership tests made on it."""

    tests = 0

    def __contains__(self, item: object) -> bool:
        type(self).tests += 1
        return super().__contains__(item)


def test_the_decision_tests_left_out_jobs_by_hash_not_by_scanning() -> None:
    """Issue 26: a Crius round of 20,000 jobs at --time-limit 1 took 7.5 s because every idle job's reason
    scanned the tuple of the jobs the table left out (quadratic); the decision now tests a set."""
    from optsched.rounds.crius.decision import to_decision
    from optsched.rounds.crius.table import build_crius_table

    problem = generate_crius_round(60, seed=0)
    table = build_crius_table(problem)
    names = _CountingTuple(j.name for j in problem.jobs)
    d = to_decision(problem, table, {}, method="x", status="partial", left_out=names)
    assert all(x.reason.startswith("not considered") for x in d.jobs)
    assert _CountingTuple.tests == 0


def test_the_round_check_finds_the_gpu_types_once_not_per_job(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 26: the check of a 20,000-job Crius round scanned every node per job for its usable GPU types
    (0.7 s); the types with GPUs are found once."""
    from optsched.rounds.crius import problem as crius_problem

    calls: list[int] = []
    real = crius_problem.gpu_types_with_gpus

    def counted(cluster: object) -> list[str]:
        calls.append(1)
        return real(cluster)  # type: ignore[arg-type]
    monkeypatch.setattr(crius_problem, "gpu_types_with_gpus", counted)
    problem = generate_crius_round(60, seed=0)
    calls.clear()
    RoundProblem.from_dict(json.loads(json.dumps(problem.to_dict())))
    assert len(calls) == 1

"""``benchmarks/peer_instances.py`` (issue 29, item 1): the Sia-shaped instances, the aggregated reference MILP
against brute force, optsched's round of the same instance (the same optimum, scored by the one evaluator, and
the decision's own objective equal to it), the phases recorded, and one small run that writes the table."""

from __future__ import annotations

import csv
import itertools
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import optsched  # noqa: E402
import peer_instances as pi  # noqa: E402
import report  # noqa: E402
from optsched.core.round import RoundProblem  # noqa: E402


def brute_force(inst: pi.Instance) -> float:
    """The best sum of utilities over every choice of at most one configuration per job within each type's GPUs."""
    jobs = sorted(inst.utilities)
    options = [[None, *inst.utilities[j]] if j not in inst.pinned else [inst.current[j]] for j in jobs]
    cap = {t: inst.nodes[t] * inst.per_node[t] for t in inst.nodes}
    best = 0.0
    for pick in itertools.product(*options):
        used: dict[str, int] = {}
        for c in pick:
            if c is not None:
                used[c.gpu_type] = used.get(c.gpu_type, 0) + c.gpus
        if all(used.get(t, 0) <= cap[t] for t in cap):
            best = max(best, sum(inst.utilities[j][c] for j, c in zip(jobs, pick) if c is not None))
    return best


def tiny(seed: int) -> pi.Instance:
    """A 16-GPU instance cut to 5 jobs of at most 4 configurations (brute force stays small)."""
    inst = pi.sia_instance(16, "easy", seed)
    keep = sorted(inst.utilities)[:5]
    utilities = {}
    for j in keep:
        us = inst.utilities[j]
        cur = inst.current.get(j)
        chosen = ([cur] if cur is not None else []) + [c for c in us if c != cur][:3]
        utilities[j] = {c: us[c] for c in chosen}
    return pi.Instance(inst.name, inst.nodes, inst.per_node, utilities,
                       {j: c for j, c in inst.current.items() if j in keep},
                       frozenset(j for j in inst.pinned if j in keep),
                       {j: w for j, w in inst.where.items() if j in keep})


def test_the_instances_follow_sias_round() -> None:
    inst = pi.sia_instance(256, "easy", 0)
    assert len(inst.utilities) == 80  # 256 / 3.2
    assert pi.configs_of(8, 3, 64) == [(1, 1), (1, 2), (1, 4), (1, 8), (2, 16), (3, 24)]
    assert pi.configs_of(4, 20, 16) == [(1, 1), (1, 2), (1, 4), (2, 8), (3, 12), (4, 16)]
    for j, us in inst.utilities.items():
        for c, u in us.items():
            assert u == round(u, 2) and u <= pi.LAMBDA_NO_ALLOC - 0.0  # 1.1 - A^p, A^p rounded to 2 decimals
            assert u > 0 or inst.current.get(j) == c
    queued = [j for j in inst.utilities if j not in inst.current]
    # a queued job's least configuration is normalised to 1: utility 1.1 - 1^p = 0.1
    assert all(min(inst.utilities[j].values()) == pytest.approx(0.1) for j in queued)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_reference_and_optsched_reach_the_brute_force_optimum(seed: int) -> None:
    inst = tiny(seed)
    best = brute_force(inst)
    chosen, phases, status = pi.reference_solve(inst, 30.0)
    assert status == "optimal" and pi.evaluate(inst, chosen) == pytest.approx(best)
    assert all(chosen[j] == inst.current[j] for j in inst.pinned)
    data = pi.optsched_round(inst)
    mine, ph, st = pi.optsched_solve(inst, data, "cpsat", 30.0)
    assert st == "optimal" and pi.evaluate(inst, mine) == pytest.approx(best)
    decision = optsched.solve(RoundProblem.from_dict(data), "exact", 30.0)
    assert decision.objective == pytest.approx(best)  # weight = reference throughput: the objective is the utility sum
    assert set(ph) == {*pi.PHASES, "bound", "encoding"} and ph["total"] >= ph["read"] + ph["solver"]
    assert ph["bound"] == pytest.approx(best) and ph["encoding"] == "pooled"


def test_a_small_run_writes_the_table(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setattr(report, "OUT", tmp_path)
    assert pi.main(["--gpus", "32", "--shapes", "easy", "--backends", "cpsat", "--repeat", "1", "--limit", "20"]) == 0
    with open(tmp_path / "peer_instances.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["solved_by"] for r in rows] == ["reference/cbc", "optsched/cpsat"]
    assert rows[0]["ratio"] == "1.00" and rows[1]["objective"] == rows[1]["reference_objective"]


def test_an_answer_that_counts_gpus_but_cannot_be_packed_is_not_placeable() -> None:
    one_type = pi.Instance("t", {"T4": 2}, {"T4": 4}, {
        "a": {pi.Config("T4", 1, 2): 0.5}, "b": {pi.Config("T4", 1, 2): 0.5}, "c": {pi.Config("T4", 1, 4): 0.5}},
        {"a": pi.Config("T4", 1, 2), "b": pi.Config("T4", 1, 2)}, frozenset({"a"}), {"a": (0,), "b": (0,)})
    # a is pinned on node 0 (2 of 4 GPUs), b ran beside it and may move: {a, b, c} fits (b moves to node 0's rest)
    assert pi.placeable(one_type, {"a": pi.Config("T4", 1, 2), "b": pi.Config("T4", 1, 2), "c": pi.Config("T4", 1, 4)})
    four = pi.Config("A100", 1, 4)
    spread = pi.Instance("t", {"A100": 3}, {"A100": 8}, {
        "a": {four: 0.5}, "b": {four: 0.5}, "c": {four: 0.5}, "d": {pi.Config("A100", 2, 16): 0.9}},
        {"a": four, "b": four, "c": four}, frozenset({"a", "c"}), {"a": (0,), "b": (0,), "c": (1,)})
    # a and b ran on node 0, c on node 1; a and c are pinned: 4 + 4 + 16 = 24 GPUs pass the count per type, but
    # only node 2 is whole, and d needs two whole nodes
    assert not pi.placeable(spread, {"a": four, "c": four, "d": pi.Config("A100", 2, 16)})
    assert pi.placeable(spread, {"a": four, "b": four, "c": four})


def test_hard_instances_tie_their_queued_jobs_utilities() -> None:
    """``hard``: jobs of 6 models, so queued jobs of one model and GPU cap have the same utilities (at most 6 models x
    7 caps distinct rows of utilities), where ``easy`` jobs each draw their own (a tie after rounding is rare)."""
    for shape, most in (("hard", 6 * 7), ("easy", None)):
        inst = pi.sia_instance(256, shape, 0)
        queued = [j for j in inst.utilities if j not in inst.current]
        distinct = {frozenset(inst.utilities[j].items()) for j in queued}
        if most is None:
            assert len(distinct) >= 0.9 * len(queued)
        else:
            assert len(queued) >= 2 * most and len(distinct) <= most

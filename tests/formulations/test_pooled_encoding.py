"""The pooled encoding of the Rubick round (formulations/rubick_round.py, "Encodings"; issue 29): its
per-size GPU limits by hand (with a part held in place), and, on small rounds of configurations of 1, 2, 4
GPUs on one node and whole nodes (Sia's), the pooled model plus placement reaching the brute-force per-node
optimum, also where outside work leaves nodes partly free or running jobs are held in place; the default
encoding of such a round above the per-node size is pooled."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from ortools.sat.python import cp_model

from optsched.core.deadline import Deadline
from optsched.core.round import RoundProblem
from optsched.formulations import rubick_round
from optsched.policies.rubick import RubickExact
from optsched.rounds.rubick.choice import Choice
from optsched.rounds.rubick.feasibility import violations

from helpers import best_assignment


def _limits(terms_caps: list) -> list:
    return [(sorted((v.name, k) for v, k in terms), cap) for terms, cap in terms_caps]


def test_pool_limits_by_hand() -> None:
    m = cp_model.CpModel()
    a, b, c, h = (m.new_bool_var(n) for n in "abch")
    blocks: dict = {}
    # nodes 0, 1, 2 with 8, 8, 4 free GPUs; node 1 holds a part of 2 GPUs in place (h); sizes 1, 4, 8 divide one
    # another: the GPUs of parts >= s within s times the blocks of s GPUs
    limits = rubick_round._pool_limits(m, [(a, 1, 2), (b, 4, 1), (c, 8, 1)], [0, 1, 2], np.array([8, 8, 4]),
                                       {1: [(h, 2)]}, blocks)
    assert sorted(blocks) == [(1, 4), (1, 8)]  # 2 held GPUs are no whole block of 4 or 8: node 1's blocks vary
    assert _limits(limits) == [
        ([("a", 2), ("b", 4), ("c", 8), ("h", 2)], 20),   # blocks of 1: all 20 GPUs, the held ones too
        ([("b", 4), ("b1_4", -4), ("c", 8)], 12),         # blocks of 4: 2 + 1 on the empty nodes, b1_4 on node 1
        ([("b1_8", -8), ("c", 8)], 8)]                    # blocks of 8: 1 on node 0, b1_8 on node 1
    solver = cp_model.CpSolver()
    m.add(h == 1)
    m.maximize(blocks[(1, 4)] + blocks[(1, 8)])
    assert solver.solve(m) == cp_model.OPTIMAL
    assert (solver.value(blocks[(1, 4)]), solver.value(blocks[(1, 8)])) == (1, 0)  # 6 GPUs left: one block of 4
    # sizes 2 and 3 do not: counts of parts >= s within sum floor(free / s), and all GPUs within sum free
    limits = rubick_round._pool_limits(m, [(a, 2, 1), (b, 3, 2)], [0, 1, 2], np.array([8, 7, 4]), {}, {})
    assert _limits(limits) == [
        ([("a", 1), ("b", 2)], 9),              # 4 + 3 + 2 parts of at least 2 GPUs
        ([("b", 2)], 5),                        # 2 + 2 + 1 parts of at least 3 GPUs
        ([("a", 2), ("b", 6)], 19)]


def _round(seed: int, jobs: int = 5, occupied: bool = True, running: bool = False) -> dict:
    """Two 8-GPU nodes of A and two 4-GPU nodes of B (outside work on some), jobs with up to four rows of
    1, 2, 4 GPUs on one node or whole nodes, utilities drawn (2 decimals); with ``running``, j0 runs 2 GPUs on
    A0 and j1 1 GPU on B1, and moving or stopping them costs (so the pooled model holds parts in place)."""
    rng = np.random.default_rng(seed)
    nodes = [{"name": f"{t}{i}", "gpu_type": t, "num_gpus": g, "num_cpus": 64, "memory_gib": 512.0}
             for t, g in (("A", 8), ("B", 4)) for i in range(2)]
    shapes = {"A": [[1], [2], [4], [8], [8, 8]], "B": [[1], [2], [4], [4, 4]]}
    rows, specs = {}, []
    for j in range(jobs):
        name = f"j{j}"
        cands = [(t, s) for t in shapes for s in shapes[t]]
        pick = rng.choice(len(cands), size=4, replace=False)
        rows[name] = [{"plan": {"dp": sum(s)}, "gpu_type": t, "gpus_per_node": s,
                       "throughput": round(float(rng.uniform(0.1, 1.0)) * sum(s) ** 0.7, 2)}
                      for t, s in (cands[int(i)] for i in pick)]
        specs.append({"name": name, "model": "own", "requested_gpus": rows[name][0]["plan"]["dp"],
                      "total_iterations": 100, "weight": 1.0})
    data = {"kind": "rubick", "time": 0.0,
            "cluster": {"name": "pools", "intra_node_gbps": 150.0, "inter_node_gbps": 12.5, "pcie_gbps": 16.0,
                        "gpu_types": [{"name": "A", "memory_gib": 80.0, "peak_tflops": 312.0},
                                      {"name": "B", "memory_gib": 16.0, "peak_tflops": 65.0}],
                        "nodes": nodes},
            "jobs": specs, "coefficients": rows, "reconfig_penalty": 0.0, "preempt_penalty": 0.0}
    if running:
        for name, t, g, node in (("j0", "A", 2, "A0"), ("j1", "B", 1, "B1")):
            rows[name] = [{"plan": {"dp": g}, "gpu_type": t, "gpus_per_node": [g], "throughput": 0.5 * g},
                          *(r for r in rows[name][1:] if (r["gpu_type"], r["gpus_per_node"]) != (t, [g]))]
            specs[int(name[1:])]["requested_gpus"] = g
            data["running"] = [*data.get("running", []), {"job": name, "plan": {"dp": g},
                                                          "placement": {node: {"gpus": g}}}]
        data.update(reconfig_penalty=0.05, preempt_penalty=0.1)
    if occupied:  # outside work leaves A1 with 7 or 5 free GPUs and B0 with 3
        data["occupied"] = {"A1": {"gpus": int(rng.choice([1, 3]))},
                            "B0": {"gpus": 1}}
    return data


def _prepared(data: dict):  # noqa: ANN202 - the exact policy's context of the round
    kind = RubickExact()
    return kind.prepare(kind.round_of(RoundProblem.from_dict(data), "exact"), Deadline(30.0))


def _brute_force(ctx) -> float:  # noqa: ANN001
    """The best objective over every choice of nothing or one row per job, its parts on distinct nodes of its
    GPU type."""
    problem, table = ctx.problem, ctx.table
    options = []
    for j in range(len(table.jobs)):
        opts: list = [None]
        for k in rubick_round.allowed_rows(table, ctx.admission)[j]:
            shape = table.gpus_per_node[int(k)]
            names = [n.name for n in problem.cluster.nodes if n.gpu_type == table.gpu_type[int(k)]]
            opts += [Choice(int(k), tuple(sorted(zip(p, shape)))) for p in itertools.permutations(names, len(shape))]
        options.append(sorted(set(opts), key=repr))
    return best_assignment(problem, table, options, ctx.admission)


@pytest.mark.parametrize("seed, running", [(0, False), (1, False), (2, False), (3, False), (0, True), (1, True),
                                           (2, True)])
def test_pooled_model_and_placement_reach_the_brute_force_optimum(seed: int, running: bool) -> None:
    ctx = _prepared(_round(seed, running=running))
    best = _brute_force(ctx)
    for encoding in ("pooled", "per-node"):
        sol = rubick_round.solve(ctx.problem, ctx.table, time_limit=20, encoding=encoding, admission=ctx.admission)
        assert sol.status == "optimal", encoding
        assert sol.objective == pytest.approx(best, abs=1e-6), encoding
        assert violations(ctx.problem, ctx.table, sol.payload["choices"], ctx.admission) == []


def test_the_default_encoding_above_the_per_node_size_is_pooled_and_optimal() -> None:
    ctx = _prepared(_round(3, jobs=5, occupied=False))
    sol = rubick_round.solve(ctx.problem, ctx.table, time_limit=20, max_node_vars=1, admission=ctx.admission)
    assert sol.size.encoding == "pooled" and sol.status == "optimal"
    assert sol.objective == pytest.approx(_brute_force(ctx), abs=1e-6)

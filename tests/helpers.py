"""Plain helpers shared by test modules of several folders (``from helpers import ...``; ``tests`` is on
the import path through ``pythonpath`` in pyproject.toml). Fixtures live in ``conftest.py``.

* where the repository and the read-only public data (``../shared/data``) are;
* value-object builders: :func:`alloc` (an allocation from per-node shares), :func:`row_alloc` (a row
  of a round's coefficient table placed on named nodes), :func:`best_row`;
* :func:`roundtrip` (JSON round trip of a value object), :func:`without_solve_time` (a decision without
  its wall time, for comparing decisions);
* :class:`InverseGPUs`, a ground truth whose iteration time is known exactly;
* :data:`FIXED_PARAMS` and :func:`fixed_perf`: a performance model with fixed (not the built-in fitted)
  parameters, so hand-checked expectations do not move when the defaults are refitted.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterable, Mapping

from optsched.core import Allocation, Cluster, ExecutionPlan, NodeShare, Placement, get_model
from optsched.core.decision import Decision
from optsched.perf.coefficients import CoefficientTable
from optsched.perf.iteration_time import Bandwidths, PerfParams
from optsched.perf.performance_model import PerformanceModel
from optsched.rounds.rubick.choice import part_share

#: the repository root (``docs/`` lives there)
REPO_ROOT = Path(__file__).resolve().parents[1]
#: the public data next to the repository (``/work/shared/data``); read only, may be absent
SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def shared_data_dir() -> Path:
    """:data:`SHARED_DATA` (for module-level ``skipif`` marks; tests take the ``shared_data`` fixture)."""
    return SHARED_DATA


# -- value objects ---------------------------------------------------------------------------------
def roundtrip(obj: Any) -> Any:
    """``obj`` through ``to_dict``, JSON text and ``from_dict`` of its own type."""
    return type(obj).from_dict(json.loads(json.dumps(obj.to_dict())))


def alloc(job: str, plan: ExecutionPlan, shares: Mapping[str, tuple[int, int, float] | tuple[int, ...]]
          ) -> Allocation:
    """``job`` running ``plan`` with ``{node: (gpus, cpus, mem_gib)}`` (trailing items may be left out,
    as for :class:`NodeShare`)."""
    return Allocation(job, plan, Placement.of({node: NodeShare(*share) for node, share in shares.items()}))


def row_alloc(table: CoefficientTable, job: str, row: int, nodes: Iterable[str]) -> Allocation:
    """``job`` running ``row`` of a Rubick round table with the row's parts on ``nodes`` (in the order of
    the row's GPUs per node), each part with its share of the row's CPUs and memory (``part_share``)."""
    shares = {}
    for node, gpus in zip(nodes, table.gpus_per_node[row]):
        cpus, mem = part_share(table, row, gpus)
        shares[node] = NodeShare(gpus, cpus, mem)
    return Allocation(job, table.plans[row], Placement.of(shares))


def best_row(table: CoefficientTable, job: str, gpus: int) -> int:
    """The fastest row of ``job`` with exactly ``gpus`` GPUs (the first one on ties)."""
    rows = [int(k) for k in table.configs_of(job) if table.gpus[k] == gpus]
    return max(rows, key=lambda k: table.throughput[k])


def without_solve_time(d: Decision) -> Decision:
    """``d`` with ``solve_seconds`` 0: two decisions equal up to wall time compare equal."""
    return replace(d, solve_seconds=0.0)


# -- ground truth and performance models ---------------------------------------------------------------
class InverseGPUs:
    """Ground truth: iteration time = ``work / GPUs`` seconds, whatever the model and plan."""

    def __init__(self, work: float = 8.0) -> None:
        self.work = work

    def iteration_time(self, model, gpu_type, plan, gpus_per_node, cpus_per_gpu) -> float:  # noqa: ANN001
        return self.work / sum(gpus_per_node)


#: fixed performance-model parameters of the hand-checked perf tests (not the fitted defaults)
FIXED_PARAMS = PerfParams(k_bwd=0.8, k_sync=1.0, k_opt=0.0, k_opt_off=12.0, k_off=1.0, k_swap=18.8, k_const=0.125,
                          fwd_s=0.0081)


def fixed_perf(model: str, cluster: Cluster, gpu_type: str = "A800") -> PerformanceModel:
    """``model`` on ``gpu_type`` of ``cluster`` with :data:`FIXED_PARAMS`."""
    return PerformanceModel(get_model(model), gpu_type, Bandwidths.of(cluster, gpu_type), FIXED_PARAMS)


__all__ = ["FIXED_PARAMS", "InverseGPUs", "REPO_ROOT", "SHARED_DATA", "alloc", "best_row", "fixed_perf", "roundtrip",
           "row_alloc", "shared_data_dir", "without_solve_time"]


def own_coefficients_round() -> dict[str, Any]:
    """A self-contained round as JSON (issue 16): custom model objects (no catalogue model), the jobs'
    own coefficient rows (no params file), a running guaranteed job, two tenants with quotas."""
    def row(plan: dict[str, Any], shape: list[int], cpus: int, mem: float, thr: float) -> dict[str, Any]:
        return {"plan": plan, "gpu_type": "A800", "gpus_per_node": shape, "cpus": cpus, "mem_gib": mem,
                "throughput": thr}
    node = {"gpu_type": "A800", "num_gpus": 8, "num_cpus": 96, "memory_gib": 1024.0}
    return {
        "kind": "rubick",
        "cluster": {"name": "lab-2x8", "intra_node_gbps": 150.0, "inter_node_gbps": 80.0, "pcie_gbps": 20.0,
                    "gpu_types": [{"name": "A800", "memory_gib": 80.0, "peak_tflops": 312.0}],
                    "nodes": [{"name": "gpu-0", **node}, {"name": "gpu-1", **node}]},
        "jobs": [
            {"name": "pretrain-13b", "tenant": "research", "guaranteed": True,
             "model": {"name": "my-13b", "num_params": 13_000_000_000, "hidden": 5120, "layers": 40,
                       "seq_len": 2048, "global_batch": 64, "num_heads": 40},
             "requested_gpus": 8, "requested_cpus": 64, "requested_mem_gib": 256, "requested_plan": {"dp": 2, "tp": 4},
             "total_iterations": 100000, "completed_iterations": 20000},
            {"name": "finetune-13b", "tenant": "research", "model": "my-13b", "requested_gpus": 4,
             "total_iterations": 5000, "submit_time": 600},
            {"name": "embed-1b", "tenant": "product", "guaranteed": True,
             "model": {"name": "my-1b", "num_params": 1_300_000_000, "hidden": 2048, "layers": 24, "seq_len": 1024,
                       "global_batch": 128, "num_heads": 16},
             "requested_gpus": 2, "requested_cpus": 16, "total_iterations": 20000, "submit_time": 900}],
        "running": [{"job": "pretrain-13b", "plan": {"dp": 2, "tp": 4},
                     "placement": {"gpu-0": {"gpus": 8, "cpus": 64, "mem_gb": 256}}}],
        "quotas": {"research": 12, "product": 4},
        "coefficients": {
            "pretrain-13b": [row({"dp": 2, "tp": 4}, [8], 64, 256, 5.0), row({"dp": 2, "tp": 4}, [8], 32, 256, 4.6),
                             row({"dp": 4, "tp": 4}, [8, 8], 128, 512, 9.4)],
            "finetune-13b": [row({"dp": 1, "tp": 4}, [4], 32, 128, 2.4), row({"dp": 1, "tp": 4}, [2, 2], 32, 128, 1.9),
                             row({"dp": 2, "tp": 4}, [8], 64, 256, 4.5)],
            "embed-1b": [row({"dp": 2}, [2], 16, 64, 40.0), row({"dp": 2, "zero": "zero-dp"}, [2], 16, 48, 36.0),
                         row({"dp": 4}, [4], 32, 128, 76.0), row({"dp": 8}, [8], 64, 256, 140.0)]}}


def chosen_row_is_given(round_json: dict[str, Any], decision: dict[str, Any]) -> None:
    """Assert that every running job of ``decision`` (JSON) runs one of its given coefficient rows of
    ``round_json``: same plan (with defaults filled in), GPU type, GPUs per node and throughput; a kept
    job may hold its current CPUs."""
    from optsched.core.coefficient_rows import CoefficientRow
    for d in decision["jobs"]:
        if d["plan"] is None:
            continue
        given = [CoefficientRow.from_dict(r) for r in round_json["coefficients"][d["job"]]]
        plan = ExecutionPlan.from_dict(d["plan"])
        shape = tuple(sorted((s["gpus"] for s in d["placement"].values() if s["gpus"] > 0), reverse=True))
        cpus = sum(s["cpus"] for s in d["placement"].values())
        match = [r for r in given if r.plan == plan and r.gpus_per_node == shape and r.throughput == d["throughput"]
                 and (r.cpus == cpus or d["action"] == "keep")]
        assert match, (d, given)


def cpu_hungry_round(nodes: int, jobs: int, seed: int) -> Any:
    """A Rubick round where queued jobs need CPUs that running jobs hold (issue 16, item 5): Algorithm 1's
    choices on ``generate_rubick_round(nodes, 8, jobs, seed)`` run (every other job by name; the rest
    and the jobs it left out are queued, so GPUs are free), and each running job also holds the spare
    CPUs of its nodes, split by GPUs, so a queued job can start next to it only if it is trimmed."""
    from collections import Counter

    from optsched.heuristics.rubick import algorithm1
    from optsched.rounds.rubick.admission import admit
    from optsched.rounds.rubick.choice import placement_of
    from optsched.rounds.rubick.generate import generate_rubick_round
    from optsched.rounds.rubick.problem import RubickRound
    from optsched.rounds.rubick.table import build_round_table
    first = generate_rubick_round(nodes, 8, jobs, seed)
    table = build_round_table(first)
    choices = algorithm1(first, table, admit(first, table), defer=True).choices
    kept = {n: c for i, (n, c) in enumerate(sorted(choices.items())) if i % 2 == 0}
    placed = {n: placement_of(first, table, table.index_of(n), c) for n, c in kept.items()}
    held: Counter[str] = Counter()
    gpus: Counter[str] = Counter()
    for pl in placed.values():
        for node, s in pl.shares:
            held[node] += s.cpus
            gpus[node] += s.gpus
    running = tuple(Allocation(n, table.plans[c.row], Placement.of(
        {node: NodeShare(s.gpus, s.cpus + (first.free(node).cpus - held[node]) * s.gpus // gpus[node], s.mem_gib)
         for node, s in placed[n].shares})) for n, c in kept.items())
    return RubickRound(first.cluster, first.jobs, running=running, occupied=first.occupied, quotas=first.quotas)


def best_assignment(problem: Any, table: CoefficientTable, options: list[list[Any]], admission: Any) -> float:
    """Brute force over a Rubick round: the best objective over every combination of one option per
    job (a ``Choice`` or None) that :func:`~optsched.rounds.rubick.feasibility.violations` accepts."""
    import itertools

    from optsched.rounds.rubick.feasibility import violations
    from optsched.rounds.rubick.objective import objective
    best = float("-inf")
    for combo in itertools.product(*options):
        choices = {table.jobs[j]: c for j, c in enumerate(combo) if c is not None}
        if not violations(problem, table, choices, admission):
            best = max(best, objective(problem, table, choices))
    return best


def solve_tiny(problem: Any) -> tuple[CoefficientTable, Any]:
    """The table (CPU shares 4 and 12 per GPU) and the per-node exact solution of a tiny Rubick round, as
    the brute-force tests compare them."""
    from optsched.formulations import rubick_round
    from optsched.rounds.rubick.table import build_round_table
    table = build_round_table(problem, cpus_per_gpu_options=(4, 12))
    return table, rubick_round.solve(problem, table, time_limit=20, encoding="per-node")


def assert_exact_matches_brute_force(problem: Any, brute_force: Any) -> None:
    """The per-node exact solution of a tiny Rubick round (:func:`solve_tiny`) is proven optimal and its
    objective is ``brute_force(problem, table)``, the best a test's own enumeration finds."""
    import pytest
    table, sol = solve_tiny(problem)
    assert sol.status == "optimal"
    assert sol.objective == pytest.approx(brute_force(problem, table), abs=1e-5)


#: the methods of kind ``rubick`` that take ``defer_unreachable_guarantees`` (the baselines never fail on a guarantee)
DEFERRING = ("exact", "rubick-exact", "heuristic", "rubick", "rubick-e", "rubick-r", "rubick-n")


def decide(problem: Any, method: str) -> Any:
    """``optsched.solve`` of a Rubick round by ``method`` (limit 10 s, seed 0), deferring unreachable
    guarantees where the method takes the option: what the per-method tests of rounds/ compare."""
    import optsched
    extras = {"defer_unreachable_guarantees": True} if method in DEFERRING else {}
    return optsched.solve(problem, method, time_limit=10, seed=0, **extras)

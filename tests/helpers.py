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

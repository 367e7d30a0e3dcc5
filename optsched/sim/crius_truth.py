"""The ground truth of Crius jobs in the simulator: how fast a Crius Cell really runs (DESIGN.md,
"Ground truth vs. what the scheduler believes").

Crius's policies estimate Cells with the estimator's default parameters
(:class:`~optsched.perf.crius.cell_estimator.EstimatorParams`). The truth is the same cost model with
its *own* parameters (:func:`truth_params`): other achieved efficiencies per GPU type and per (GPU
type, model family), a lower tensor-parallel efficiency, a larger kernel-launch cost and a
communication profile with other bandwidths and latencies. So predicted speeds err the way a profiled
estimator does (the benchmark reports by how much), and no policy sees the truth. Memory is the one
thing the two agree on: Crius's profiler records each stage's memory as the compiled stage uses it
(Sec. 5.1), so the memory filter is exact and a Cell the estimator lets run also runs in truth.

A job runs the Cell its allocation describes (:func:`~optsched.perf.crius.cell_estimator.cell_plan`:
its GPU type, its GPUs laid out as the placement's ``gpus_per_node``, ``pp`` stages) with the best
plan of that Cell (:func:`~optsched.perf.crius.tuning.full_exploration`): Sec. 3, "When a Cell is
selected as a scheduling choice, its represented job runs with the optimal parallelism plan
explored", and Sec. 8.1, the baselines' jobs also run with Alpa's adaptive parallelism.
:meth:`CriusGroundTruth.iteration_time` raises ``PlanInfeasibleError`` when nothing in the Cell fits
the memory, ``UnknownNameError`` for an unknown model or GPU type and ``ValidationError`` for a Cell
that is not one (GPUs not a power of two, stages not dividing them); answers are memoised.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

from optsched.core.errors import PlanInfeasibleError, ValidationError
from optsched.core.hardware import Cluster
from optsched.core.plan import ExecutionPlan
from optsched.perf.crius.cell_estimator import CellEstimator, EstimatorParams
from optsched.perf.crius.comm_profile import default_comm_profile
from optsched.perf.crius.models import resolve_model
from optsched.perf.crius.op_graph import OperatorGraph
from optsched.perf.crius.tuning import full_exploration

#: the truth's factors on the GPU types' efficiencies (achieved fractions differ from the defaults)
TRUTH_EFFICIENCY_FACTOR = {"A100-40G": 0.92, "A40": 1.06, "A10": 0.9, "V100-32G": 1.04, "A800": 0.95, "T4": 0.9}
#: further factors per (GPU type, model family): convolutions run relatively better on the older
#: and smaller GPUs, MoE routing worse on the PCIe cards
TRUTH_FAMILY_FACTOR = {("V100-32G", "wresnet"): 1.08, ("A10", "wresnet"): 1.05, ("A10", "moe"): 0.9,
                       ("A40", "moe"): 0.93, ("A100-40G", "bert"): 1.04}


def truth_params(cluster: Cluster) -> EstimatorParams:
    """The truth's parameters on ``cluster`` (module docstring)."""
    eff = {}
    for t in cluster.gpu_types:
        base = t.efficiency if t.efficiency is not None else 0.4
        eff[t.name] = min(1.0, base * TRUTH_EFFICIENCY_FACTOR.get(t.name, 0.95))
    profile = default_comm_profile(cluster, bandwidth_scale={"intra": 0.9, "inter": 0.8},
                                   latency_scale={"intra": 1.3, "inter": 1.5})
    return EstimatorParams(efficiency=eff, family_factor=TRUTH_FAMILY_FACTOR, tp_efficiency=0.9,
                           kernel_launch_s=12e-6, comm_profile=profile)


class CriusGroundTruth:
    """Iteration times of Crius Cells on ``cluster`` (module docstring); ``params`` default to
    :func:`truth_params`, ``models`` add operator graphs to the catalogue's."""

    def __init__(self, cluster: Cluster, params: EstimatorParams | None = None,
                 models: Mapping[str, OperatorGraph] | None = None) -> None:
        self.cluster = cluster
        self.estimator = CellEstimator(cluster, params or truth_params(cluster))
        self.models = dict(models or {})
        self._cache: dict[tuple, float] = {}

    def iteration_time(self, model: str, gpu_type: str, plan: ExecutionPlan, gpus_per_node: Sequence[int],
                       cpus_per_gpu: float) -> float:
        key = (model, gpu_type, plan.num_gpus, plan.pp, tuple(sorted(gpus_per_node, reverse=True)))
        t = self._cache.get(key)
        if t is None:
            t = self._cache[key] = self._compute(model, gpu_type, plan, key[4])
        if not math.isfinite(t):
            raise PlanInfeasibleError(f"Crius model {model!r}: no plan of the Cell of {plan.num_gpus} {gpu_type} GPUs "
                                      f"{key[4]} in {plan.pp} stages fits the memory (ground truth)")
        return t

    def _compute(self, model: str, gpu_type: str, plan: ExecutionPlan, shape: tuple[int, ...]) -> float:
        if not isinstance(plan, ExecutionPlan):
            raise ValidationError(f"ground truth: plan must be an ExecutionPlan, got {plan!r}")
        graph = resolve_model(model, self.models)
        self.cluster.gpu_type(gpu_type)
        if plan.num_gpus % plan.pp:
            raise ValidationError(f"ground truth: {plan.pp} stages do not divide {plan.num_gpus} GPUs")
        if plan.pp > len(graph):
            return math.inf
        cell = self.estimator.cell(graph, gpu_type, plan.num_gpus, plan.pp, shape)
        return full_exploration(self.estimator, cell).iteration_time_s

    def describe(self) -> str:
        return "crius cost model with its own parameters (efficiencies, communication profile)"


__all__ = ["CriusGroundTruth", "TRUTH_EFFICIENCY_FACTOR", "TRUTH_FAMILY_FACTOR", "truth_params"]

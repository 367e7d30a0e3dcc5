"""optsched vocabulary: hardware, models, plans, jobs, allocations, the built-in catalogue, the base
round and decision with the round-kind registry, and the one ``Policy`` protocol."""

from __future__ import annotations

import importlib
from typing import Any

#: module -> the names it defines: the package imports a module on first use of one of its names
#: (PEP 562), so that importing one submodule (``optsched.core.errors``, say) does not import them all
_DEFINED_IN: dict[str, tuple[str, ...]] = {
    "allocation": ("Allocation", "NodeShare", "Placement", "parse_placement_code"),
    "catalog": ("CLUSTERS", "GPU_TYPES", "MODELS", "a800_cluster", "get_cluster", "get_gpu_type", "get_model"),
    "decision": ("Decision", "JobAllocations", "JobDecision"),
    "errors": ("InfeasibleError", "OptschedError", "PlanInfeasibleError", "UnknownNameError", "ValidationError"),
    "events": ("CapacityChange",),
    "hardware": ("Cluster", "GPUType", "Node"),
    "job": ("Job",),
    "kinds": ("round_kind", "round_kinds"),
    "model": ("ModelSpec",),
    "plan": ("PLAN_FAMILIES", "ExecutionPlan", "ZeroMode", "check_plan_for_model", "offload_runs_with_gc",
             "parse_plan_code", "plan_code"),
    "policy": ("Policy", "Reclaimer"),
    "pool": ("GpuPool", "gpu_pool", "packed_placement"),
    "round": ("RoundProblem",),
}
_MODULES = {name: f"optsched.core.{module}" for module, names in _DEFINED_IN.items() for name in names}

__all__ = [
    "Allocation", "NodeShare", "Placement", "parse_placement_code", "CLUSTERS", "GPU_TYPES", "MODELS",
    "a800_cluster", "get_cluster", "get_gpu_type", "get_model", "Decision", "JobAllocations", "JobDecision",
    "InfeasibleError", "OptschedError", "PlanInfeasibleError", "UnknownNameError", "ValidationError",
    "CapacityChange", "Cluster", "GPUType", "Node", "Job", "round_kind", "round_kinds", "ModelSpec",
    "PLAN_FAMILIES", "ExecutionPlan", "ZeroMode", "check_plan_for_model", "offload_runs_with_gc", "parse_plan_code",
    "plan_code", "Policy", "Reclaimer", "GpuPool", "gpu_pool", "packed_placement", "RoundProblem",
]


def __getattr__(name: str) -> Any:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module 'optsched.core' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

"""optsched vocabulary: hardware, models, plans, jobs, allocations, and the built-in catalogue."""

from optsched.core.allocation import Allocation, NodeShare, Placement, parse_placement_code
from optsched.core.catalog import (CLUSTERS, GPU_TYPES, MODELS, a800_cluster, get_cluster, get_gpu_type,
                                   get_model)
from optsched.core.errors import (InfeasibleError, OptschedError, PlanInfeasibleError, UnknownNameError,
                                  ValidationError)
from optsched.core.hardware import Cluster, GPUType, Node
from optsched.core.job import Job
from optsched.core.model import ModelSpec
from optsched.core.plan import (PLAN_FAMILIES, ExecutionPlan, ZeroMode, check_plan_for_model,
                                offload_runs_with_gc, parse_plan_code, plan_code)

__all__ = [
    "Allocation", "NodeShare", "Placement", "parse_placement_code", "CLUSTERS", "GPU_TYPES", "MODELS",
    "a800_cluster", "get_cluster", "get_gpu_type", "get_model", "InfeasibleError", "OptschedError",
    "PlanInfeasibleError", "UnknownNameError", "ValidationError", "Cluster", "GPUType", "Node", "Job",
    "ModelSpec", "PLAN_FAMILIES", "ExecutionPlan", "ZeroMode", "check_plan_for_model", "offload_runs_with_gc",
    "parse_plan_code",
    "plan_code",
]

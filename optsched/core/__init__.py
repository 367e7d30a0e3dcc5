"""optsched vocabulary: hardware, models, plans, jobs, allocations, the built-in catalogue, the base
round and decision with the round-kind registry, and the one ``Policy`` protocol."""

from optsched.core.allocation import Allocation, NodeShare, Placement, parse_placement_code
from optsched.core.catalog import (CLUSTERS, GPU_TYPES, MODELS, a800_cluster, get_cluster, get_gpu_type,
                                   get_model)
from optsched.core.decision import Decision, JobAllocations, JobDecision
from optsched.core.errors import (InfeasibleError, OptschedError, PlanInfeasibleError, UnknownNameError,
                                  ValidationError)
from optsched.core.events import CapacityChange
from optsched.core.hardware import Cluster, GPUType, Node
from optsched.core.job import Job
from optsched.core.kinds import round_kind, round_kinds
from optsched.core.model import ModelSpec
from optsched.core.plan import (PLAN_FAMILIES, ExecutionPlan, ZeroMode, check_plan_for_model,
                                offload_runs_with_gc, parse_plan_code, plan_code)
from optsched.core.policy import Policy, Reclaimer
from optsched.core.pool import GpuPool, gpu_pool, packed_placement
from optsched.core.round import RoundProblem

__all__ = [
    "Allocation", "NodeShare", "Placement", "parse_placement_code", "CLUSTERS", "GPU_TYPES", "MODELS",
    "a800_cluster", "get_cluster", "get_gpu_type", "get_model", "Decision", "JobAllocations", "JobDecision",
    "InfeasibleError", "OptschedError", "PlanInfeasibleError", "UnknownNameError", "ValidationError",
    "CapacityChange", "Cluster", "GPUType", "Node", "Job", "round_kind", "round_kinds", "ModelSpec",
    "PLAN_FAMILIES", "ExecutionPlan", "ZeroMode", "check_plan_for_model", "offload_runs_with_gc", "parse_plan_code",
    "plan_code", "Policy", "Reclaimer", "GpuPool", "gpu_pool", "packed_placement", "RoundProblem",
]

"""Execution plans on a placement: topology feasibility and enumeration.

A placement is seen as ``gpus_per_node`` (GPUs the job holds on each node). Ranks follow Megatron's
order: TP fastest, then DP, then PP, filling nodes one after another, so a TP group is ``tp``
consecutive ranks.

Revision forced by the measurements (``shared/data/morphling/placements/llama30.csv``): the strict
rule "every node's GPU count is divisible by tp" (all TP groups inside a node) rejects three plans
that were really run, ``344`` and ``642`` on 8 nodes x 6 GPUs and ``524`` on 8 nodes x 5 GPUs (with
8 x 6 GPUs and tp = 4, 16 of the 48 GPUs cannot form an intra-node group whatever the rank order).
A TP group crossing nodes is therefore slow (its collectives run at the inter-node bandwidth,
Morphling App. A.1), not infeasible. :func:`topology_violation` only rejects ``tp`` above the smallest
node's GPU count (then, in Megatron order, no TP group spans more than two nodes; every measured plan
satisfies it); :func:`tp_within_nodes` tells the performance model whether all groups are
intra-node; :func:`enumerate_plans` keeps the strict rule, so the search only proposes intra-node TP.
"""

from __future__ import annotations

from functools import lru_cache

from optsched.core.errors import ValidationError
from optsched.core.hardware import GPUType
from optsched.core.model import ModelSpec
from optsched.core.plan import ExecutionPlan, ZeroMode, check_plan_for_model
from optsched.perf.memory import HOST_BASE_GIB_PER_GPU, host_room, memory_violation, require_gpus_per_node

DEFAULT_GA_STEPS = (2, 4, 8)


def tp_within_nodes(tp: int, gpus_per_node: tuple[int, ...]) -> bool:
    """True when every TP group lies inside one node. In Megatron rank order a group of ``tp``
    consecutive ranks never crosses a node boundary iff every prefix sum of ``gpus_per_node`` is a
    multiple of ``tp``, i.e. iff ``tp`` divides every node's GPU count."""
    return all(n % tp == 0 for n in gpus_per_node)


def topology_violation(model: ModelSpec, plan: ExecutionPlan, gpus_per_node: tuple[int, ...]) -> str | None:
    """``None`` when ``plan`` can run on ``gpus_per_node``; else the broken rule:

    * the plan uses exactly ``sum(gpus_per_node)`` GPUs;
    * :func:`optsched.core.plan.check_plan_for_model` (batch divisibility, tp | heads, pp <= layers);
    * ``tp`` is at most the smallest node's GPU count (relaxed from "tp divides every node's count",
      see the module docstring). Bad ``gpus_per_node`` raises ``ValidationError``."""
    counts = require_gpus_per_node(gpus_per_node)
    g = sum(counts)
    who = f"model {model.name!r} plan {plan.label}"
    if plan.num_gpus != g:
        return f"{who}: uses {plan.num_gpus} GPUs but the placement {counts} holds {g}"
    try:
        check_plan_for_model(plan, model)
    except ValidationError as exc:
        return str(exc)
    if plan.tp > min(counts):
        return (f"{who}: tp={plan.tp} exceeds the {min(counts)} GPU(s) of the smallest node of {counts}; "
                f"a TP group may hold at most as many GPUs as the smallest node (so that none spans "
                f"more than two nodes)")
    return None


def plan_violation(model: ModelSpec, plan: ExecutionPlan, gpu_type: GPUType, gpus_per_node: tuple[int, ...],
                   node_host_gib: float | None = None) -> str | None:
    """``None`` when ``plan`` runs on ``gpus_per_node`` GPUs of ``gpu_type`` whose nodes have
    ``node_host_gib`` of host memory each (None: host memory not checked); else why not. The one
    spelling of "this plan runs on this shape": host room for the workers
    (:func:`~optsched.perf.memory.host_room`), then :func:`topology_violation` (GPU count, batch
    divisibility, TP and PP limits), then :func:`~optsched.perf.memory.memory_violation` (GPU memory and
    host memory for offloaded states)."""
    room = None
    if node_host_gib is not None:
        room = host_room(node_host_gib, gpus_per_node)
        if min(room) < 0:
            return (f"model {model.name!r} plan {plan.label}: a node of {max(gpus_per_node)} GPUs has "
                    f"{node_host_gib:g} GiB of host memory, less than {HOST_BASE_GIB_PER_GPU:g} GiB per worker")
    return topology_violation(model, plan, gpus_per_node) or memory_violation(model, plan, gpu_type, gpus_per_node,
                                                                              room)


def _data_parallel_plans(b: int, g: int, ga_steps: tuple[int, ...]) -> list[ExecutionPlan]:
    if b % g:
        return []
    plans = []
    for zero in (ZeroMode.NONE, ZeroMode.DP, ZeroMode.OFFLOAD):
        plans.append(ExecutionPlan(dp=g, zero=zero))
        plans.extend(ExecutionPlan(dp=g, zero=zero, ga_steps=a) for a in ga_steps if b % (g * a) == 0)
        plans.append(ExecutionPlan(dp=g, zero=zero, gc=True))
    return plans


def _three_d_plans(model: ModelSpec, counts: tuple[int, ...], g: int) -> list[ExecutionPlan]:
    b = model.global_batch
    plans = []
    for pp in (x for x in range(1, g + 1) if g % x == 0 and x <= model.layers):
        rest = g // pp
        for tp in (x for x in range(1, rest + 1) if rest % x == 0):
            dp = rest // tp
            if (tp == 1 and pp == 1) or model.num_heads % tp or not tp_within_nodes(tp, counts) or b % dp:
                continue
            for m in sorted({1, b // dp}) if pp > 1 else (1,):
                plans.append(ExecutionPlan(dp=dp, tp=tp, pp=pp, micro_batches=m))
    return plans


def enumerate_plans(model: ModelSpec, gpus_per_node: tuple[int, ...], gpu_type: GPUType,
                    host_mem_gib_per_node: tuple[float, ...] | None = None, *,
                    ga_steps: tuple[int, ...] = DEFAULT_GA_STEPS) -> tuple[ExecutionPlan, ...]:
    """Every feasible plan of ``model`` on ``gpus_per_node`` GPUs of ``gpu_type``, global batch b fixed,
    sorted by label (deterministic). With g = sum(gpus_per_node):

    * data-parallel families (dp = g, only when b % g == 0): for each ZeRO mode (none, ZeRO-DP,
      ZeRO-Offload) the plain plan, GA with each ``a`` in ``ga_steps`` where b % (g a) == 0, and GC;
    * 3D plans with tp > 1 or pp > 1: every (pp, tp, dp) with pp tp dp = g, tp dividing every node's
      GPU count (intra-node TP) and the heads, pp <= layers, b % dp == 0. With pp > 1 two micro-batch
      counts: m = b/dp (micro-batch size 1, the usual 1F1B setting) and m = 1 (the default of
      ``parse_plan_code``, what the Rubick measurements are consistent with); m = 1 without PP;
    * kept when :func:`topology_violation` and :func:`~optsched.perf.memory.memory_violation` pass.

    At most ``3 (2 + len(ga_steps)) + 2 tau_3(g) - tau(g) - 1`` plans, tau_3(g) being the number of
    ordered triples with product g and tau(g) the number of divisors (the pp = 1 triples have one
    m): 15 + 56 - 7 - 1 = 63 for g = 64 with the default ``ga_steps`` (the solver's configuration
    count grows with this). Empty when nothing fits (e.g. llama30 on one GPU with its share of host
    memory).
    Bad ``gpus_per_node``, host memory or ``ga_steps`` raise ``ValidationError``."""
    counts = require_gpus_per_node(gpus_per_node, host_mem_gib_per_node)
    steps = tuple(ga_steps)
    if any(isinstance(a, bool) or not isinstance(a, int) or a < 1 for a in steps):
        raise ValidationError(f"ga_steps must be positive integers (accumulation steps), got {ga_steps!r}")
    host = None if host_mem_gib_per_node is None else tuple(float(x) for x in host_mem_gib_per_node)
    return _enumerate_plans(model, counts, gpu_type, host, steps)


@lru_cache(maxsize=1 << 14)
def _enumerate_plans(model: ModelSpec, counts: tuple[int, ...], gpu_type: GPUType, host: tuple[float, ...] | None,
                     steps: tuple[int, ...]) -> tuple[ExecutionPlan, ...]:
    """:func:`enumerate_plans` on checked, hashable arguments; cached (tables ask for the same shapes
    over and over)."""
    g = sum(counts)
    candidates = _data_parallel_plans(model.global_batch, g, steps) + _three_d_plans(model, counts, g)
    feasible = {p for p in candidates
                if topology_violation(model, p, counts) is None
                and memory_violation(model, p, gpu_type, counts, host) is None}
    return tuple(sorted(feasible, key=lambda p: p.label))

"""Random but realistic Rubick rounds, reproducible from a seed (for tests, benchmarks and
``optsched gen-round``).

:func:`generate_rubick_round` builds a :class:`~optsched.rounds.rubick.problem.RubickRound` on the A800 cluster
of the catalogue (:func:`~optsched.core.catalog.a800_cluster`, nodes ``n000``, ``n001``, ...):

* **Jobs** over the seven catalogue models, small models more likely (:data:`MODEL_WEIGHTS`), as in
  the Rubick evaluation (Sec. 7: a model per job of a down-sampled Microsoft/Philly trace). GPU
  requests are powers of two below a node and power-of-two multiples of whole nodes, at most half
  the cluster (:data:`MAX_REQUEST_SHARE`), with weights ``c ** -0.8`` up to a node and a further
  ``k ** -1.5`` for k whole nodes (:func:`request_weight`): on 8-GPU nodes about 90% of the jobs
  ask for 1-8 GPUs and a few for 16 or more, the shape of the Philly trace. LLaMA jobs ask for at
  least :data:`MIN_REQUEST_GPUS` (capped at the cluster's GPUs). Every request is checked against the
  plan enumerator: a count on which no plan of the model fits its packed placement is replaced by a
  feasible one ("In case the original GPU number is infeasible for the model, we use a feasible
  one", Sec. 7). CPUs are 4-12 per GPU, host memory 16-64 GiB per GPU.
* **Requested plans** are ``None`` (any plan) for most jobs; about :data:`REQUESTED_PLAN_FRACTION`
  of them request a random feasible plan on their packed request, without TP/PP for the four small
  models where such a plan exists (the paper's base trace does the same).
* **Guarantees and tenants**: about ``guaranteed_fraction`` of the jobs are guaranteed, jobs are
  spread over ``tenants`` tenants (``tenant0``, ...), and the quotas add up to about
  :data:`QUOTA_SHARE` of the GPUs not held by outside work, split at random between the tenants.
* **Outside work**: about ``occupied_fraction`` of the nodes hold a partial share (some GPUs, up to
  12 CPUs and 16-96 GiB per GPU) that the round may not touch (``occupied``).
* **Running jobs**: about ``running_fraction`` of the jobs are picked to be running; guaranteed ones
  first. A running guaranteed job runs *exactly its request* (the requested plan, or the fastest
  plan when it requested none, on the packed placement of its requested GPUs with its requested
  CPUs), so its current allocation reaches its reference throughput; it is only picked when its
  tenant's quota still covers its requested GPUs. A running best-effort job runs its requested GPU
  count on a packed placement when one is free, else spread over the emptiest nodes, with a random
  feasible plan of that placement. A job that finds no room stays queued. Per node, the CPUs of a
  running job are its CPUs per GPU times its GPUs there, the memory its GPUs there times
  :func:`~optsched.perf.memory.host_gib_per_gpu` of the plan (the table's memory rule).

The generator never exceeds a node's capacity and everything it returns passes
:class:`RoundProblem` validation and :func:`~optsched.rounds.rubick.table.build_round_table`. It
does *not* promise that every admitted guaranteed job can be placed at once (a quota is a promise on
GPU counts, not on node fragmentation). Cost: one plan enumeration per (model, GPU count) and per
distinct spread placement, one vectorised prediction per (model, GPU count, CPUs per GPU): well under a
second for 160 nodes x 8 GPUs and 400 jobs (building that round's table takes far longer).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from optsched.core.allocation import Allocation, NodeShare, Placement
from optsched.core.catalog import MODELS, NO_3D_MODELS, a800_cluster
from optsched.core.checks import require_int, require_number, require_seed
from optsched.core.errors import ValidationError
from optsched.core.hardware import Cluster, GPUType
from optsched.core.job import Job, TopologyRule
from optsched.core.model import ModelSpec
from optsched.core.plan import ExecutionPlan
from optsched.core.pool import gpu_pool, packed_placement
from optsched.perf.defaults import default_performance_model
from optsched.perf.memory import host_gib_per_gpu, host_room
from optsched.perf.performance_model import PerformanceModel
from optsched.perf.plans import enumerate_plans
from optsched.rounds.rubick.problem import RubickRound

log = logging.getLogger(__name__)

#: relative frequency of each catalogue model (small models more frequent)
MODEL_WEIGHTS: dict[str, float] = {"vit": 0.22, "roberta": 0.20, "bert": 0.20, "t5": 0.14, "gpt2": 0.12,
                                   "llama7": 0.08, "llama30": 0.04}
#: smallest GPU request of the large models (capped at the cluster's GPUs)
MIN_REQUEST_GPUS: dict[str, int] = {"llama7": 8, "llama30": 16}
#: the weight of a request of c GPUs up to a node is c ** -GPU_COUNT_EXPONENT ...
GPU_COUNT_EXPONENT = 0.8
#: ... and of k whole nodes G ** -GPU_COUNT_EXPONENT * k ** -MULTI_NODE_EXPONENT
MULTI_NODE_EXPONENT = 1.5
#: no request exceeds this share of the cluster's GPUs (nor less than a node, nor below the
#: minimum request of a large model)
MAX_REQUEST_SHARE = 0.5
#: share of the jobs that request a specific plan
REQUESTED_PLAN_FRACTION = 0.15
#: sum of the tenants' quotas as a share of the GPUs not held by outside work
QUOTA_SHARE = 0.6
#: CPUs per GPU a job requests: uniform integer in this closed range (capped by the nodes' ratio)
CPUS_PER_GPU_RANGE = (4, 12)
#: host memory per GPU a job requests, GiB: uniform in this range, rounded to whole GiB
MEM_PER_GPU_RANGE = (16.0, 64.0)
#: outside work holds up to this many GiB of host memory per GPU it holds
OCCUPIED_MEM_PER_GPU_RANGE = (16.0, 96.0)

_GPU_TYPE = "A800"


def _check_args(num_nodes: Any, gpus_per_node: Any, num_jobs: Any, seed: Any, tenants: Any,
                fractions: dict[str, Any]) -> None:
    """Raise ``ValidationError`` naming the first bad argument of :func:`generate_rubick_round`."""
    owner = "generate_rubick_round"
    for name, value in (("num_nodes", num_nodes), ("gpus_per_node", gpus_per_node), ("num_jobs", num_jobs),
                        ("tenants", tenants)):
        require_int(owner, name, value, 1)
    require_int(owner, "seed", seed, 0)
    for name, value in fractions.items():
        require_number(owner, name, value, 0.0)
        if value > 1.0:
            raise ValidationError(f"{owner}: {name} must be <= 1, got {value}")


def candidate_requests(gpus_per_node: int, total_gpus: int) -> tuple[int, ...]:
    """GPU counts a generated job may request: powers of two below ``gpus_per_node``, then
    ``gpus_per_node`` times a power of two, up to ``total_gpus`` (8-GPU nodes, 64 GPUs:
    1, 2, 4, 8, 16, 32, 64)."""
    counts = {1 << i for i in range(gpus_per_node.bit_length()) if (1 << i) < gpus_per_node}
    k = 1
    while gpus_per_node * k <= total_gpus:
        counts.add(gpus_per_node * k)
        k *= 2
    return tuple(sorted(c for c in counts if c <= total_gpus))


@dataclass
class _NodeState:
    """Free resources of one node while the generator places work."""

    name: str
    gpus: int
    cpus: int
    mem: float


class _Catalogue:
    """Caches of plan enumerations and predictions shared by every job of a round."""

    def __init__(self, cluster: Cluster, gpu_type: GPUType, per_node: int, host_cap: float) -> None:
        self.cluster = cluster
        self.gpu_type = gpu_type
        self.per_node = per_node
        self.host_cap = host_cap
        self._plans: dict[tuple[str, tuple[int, ...]], tuple[ExecutionPlan, ...]] = {}
        self._best: dict[tuple[str, int, int], ExecutionPlan] = {}
        self._perf: dict[str, PerformanceModel] = {}

    def plans(self, model: ModelSpec, shape: tuple[int, ...]) -> tuple[ExecutionPlan, ...]:
        """Feasible plans of ``model`` on ``shape`` with the table's host-memory rule
        (:func:`~optsched.perf.memory.host_room`)."""
        key = (model.name, shape)
        if key not in self._plans:
            host_left = host_room(self.host_cap, shape)
            if min(host_left) < 0:
                self._plans[key] = ()
            else:
                self._plans[key] = enumerate_plans(model, shape, self.gpu_type, host_left)
        return self._plans[key]

    def best_plan(self, model: ModelSpec, gpus: int, cpus: int) -> ExecutionPlan:
        """The fastest plan on the packed placement of ``gpus`` GPUs with ``cpus`` CPUs in total (the
        plan the table uses for a request without a plan)."""
        key = (model.name, gpus, cpus)
        if key not in self._best:
            if model.name not in self._perf:
                self._perf[model.name] = default_performance_model(model.name, self.cluster, self.gpu_type.name)
            shape = packed_placement(gpus, self.per_node)
            plans = self.plans(model, shape)
            thr = self._perf[model.name].throughputs([(p, shape, cpus / gpus) for p in plans])
            self._best[key] = plans[int(np.argmax(thr))]
        return self._best[key]

    def random_plan(self, rng: np.random.Generator, model: ModelSpec, shape: tuple[int, ...]) -> ExecutionPlan | None:
        """A uniformly random feasible plan on ``shape`` (data-parallel only for :data:`NO_3D_MODELS`
        when one exists); None when none fits."""
        plans = self.plans(model, shape)
        if model.name in NO_3D_MODELS:
            plans = tuple(p for p in plans if not p.is_3d) or plans
        if not plans:
            return None
        return plans[int(rng.integers(len(plans)))]


def request_weight(gpus: int, gpus_per_node: int) -> float:
    """Relative frequency of a request of ``gpus`` GPUs: ``gpus ** -GPU_COUNT_EXPONENT`` up to a node,
    then a further ``k ** -MULTI_NODE_EXPONENT`` for ``k`` whole nodes (module docstring)."""
    if gpus <= gpus_per_node:
        return float(gpus ** -GPU_COUNT_EXPONENT)
    return float(gpus_per_node ** -GPU_COUNT_EXPONENT * (gpus / gpus_per_node) ** -MULTI_NODE_EXPONENT)


def _request_table(cat: _Catalogue, total: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per model: the feasible request counts and their probabilities (models without one omitted)."""
    counts = candidate_requests(cat.per_node, total)
    cap = max(cat.per_node, int(MAX_REQUEST_SHARE * total))
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for name in MODEL_WEIGHTS:
        model = MODELS[name]
        low = min(MIN_REQUEST_GPUS.get(name, 1), total)
        ok = [c for c in counts if low <= c <= max(cap, low) and cat.plans(model, packed_placement(c, cat.per_node))]
        if not ok:
            ok = [c for c in counts if cat.plans(model, packed_placement(c, cat.per_node))][-1:]
        if ok:
            w = np.array([request_weight(c, cat.per_node) for c in ok])
            out[name] = (np.array(ok, dtype=np.int64), w / w.sum())
    return out


def _quotas(rng: np.random.Generator, tenants: int, free_gpus: int) -> dict[str, int]:
    """Quotas adding up to about ``QUOTA_SHARE`` of ``free_gpus``, split by Dirichlet weights."""
    total = int(round(QUOTA_SHARE * free_gpus))
    share = rng.dirichlet(np.full(tenants, 2.0))
    q = np.floor(share * total).astype(np.int64)
    for i in np.argsort(-(share * total - q))[: total - int(q.sum())]:
        q[i] += 1
    return {f"tenant{i}": int(q[i]) for i in range(tenants)}


def _packed_nodes(nodes: list[_NodeState], gpus: int, per_node: int, cpg: int,
                  mem_per_gpu: float) -> list[tuple[_NodeState, int]] | None:
    """Nodes for the packed placement of ``gpus`` GPUs (whole free nodes, or the fullest node with
    room for a part below a node), or None."""
    def fits(n: _NodeState, g: int) -> bool:
        """Whether ``n`` has room for ``g`` GPUs with their CPUs and memory."""
        return n.gpus >= g and n.cpus >= cpg * g and n.mem >= mem_per_gpu * g - 1e-9
    if gpus >= per_node:
        full = [n for n in nodes if n.gpus == per_node and fits(n, per_node)]
        k = gpus // per_node
        return [(n, per_node) for n in full[:k]] if len(full) >= k else None
    cand = [n for n in nodes if fits(n, gpus)]
    if not cand:
        return None
    best = min(cand, key=lambda n: n.gpus)
    return [(best, gpus)]


def _spread_nodes(nodes: list[_NodeState], gpus: int, cpg: int) -> list[tuple[_NodeState, int]] | None:
    """``gpus`` GPUs over the nodes with the most free GPUs (CPUs permitting), or None."""
    parts: list[tuple[_NodeState, int]] = []
    need = gpus
    for n in sorted(nodes, key=lambda n: -n.gpus):
        g = min(n.gpus, need, n.cpus // max(cpg, 1))
        if g <= 0:
            break
        parts.append((n, g))
        need -= g
        if need == 0:
            return parts
    return None


def _place(parts: list[tuple[_NodeState, int]], job: str, plan: ExecutionPlan, cpg: int,
           mem_per_gpu: float) -> Allocation | None:
    """Take the resources of ``parts`` for ``job`` and return its allocation; None (nothing taken)
    when a node lacks the CPUs or memory."""
    if any(n.cpus < cpg * g or n.mem < mem_per_gpu * g - 1e-9 for n, g in parts):
        return None
    shares = {}
    for n, g in parts:
        share = NodeShare(g, cpg * g, mem_per_gpu * g)
        n.gpus -= share.gpus
        n.cpus -= share.cpus
        n.mem = max(0.0, n.mem - share.mem_gib)
        shares[n.name] = share
    return Allocation(job, plan, Placement.of(shares))


def generate_rubick_round(num_nodes: int, gpus_per_node: int, num_jobs: int, seed: int, *,
                          tenants: int = 3, guaranteed_fraction: float = 0.4, running_fraction: float = 0.5,
                          occupied_fraction: float = 0.25, constrained: float = 0.0) -> RubickRound:
    """A random Rubick round on ``a800_cluster(num_nodes, gpus_per_node)`` with ``num_jobs`` jobs,
    identical for identical arguments (module docstring for the distributions).

    ``tenants`` tenants share the quotas; about ``guaranteed_fraction`` of the jobs are guaranteed,
    ``running_fraction`` of them are picked to run (fewer when the cluster is full) and
    ``occupied_fraction`` of the nodes hold outside work; with ``constrained`` > 0 the nodes are
    labelled with racks and about that fraction of the queued jobs state a hard constraint
    (:func:`with_constraints`; 0 leaves the round exactly as before). Raises ``ValidationError`` naming the
    argument when an integer argument is not a positive integer (``seed``: not >= 0) or a fraction
    is outside [0, 1]."""
    _check_args(num_nodes, gpus_per_node, num_jobs, seed, tenants,
                {"guaranteed_fraction": guaranteed_fraction, "running_fraction": running_fraction,
                 "occupied_fraction": occupied_fraction, "constrained": constrained})
    require_seed("generate_rubick_round", seed)
    rng = np.random.default_rng(seed)
    cluster = a800_cluster(num_nodes, gpus_per_node)
    total = cluster.total_gpus
    pool = gpu_pool(cluster, _GPU_TYPE)
    cpus_per_gpu_cap = pool.proportional_cpus_per_gpu
    cat = _Catalogue(cluster, pool.gpu_type, pool.per_node, pool.host_gib)
    requests = _request_table(cat, total)
    names = [m for m in MODEL_WEIGHTS if m in requests]
    weights = np.array([MODEL_WEIGHTS[m] for m in names])
    weights /= weights.sum()

    # -- outside work -----------------------------------------------------------------------
    nodes = [_NodeState(n.name, n.num_gpus, n.num_cpus, n.memory_gib) for n in cluster.nodes]
    occupied: dict[str, NodeShare] = {}
    n_occ = int(round(occupied_fraction * num_nodes))
    for i in sorted(rng.choice(num_nodes, size=n_occ, replace=False).tolist()):
        n = nodes[i]
        g = int(rng.integers(1, gpus_per_node)) if gpus_per_node > 1 else 0
        cpus = max(1, g * int(rng.integers(2, cpus_per_gpu_cap + 1))) if cpus_per_gpu_cap >= 2 else g
        mem = float(round(max(g, 1) * rng.uniform(*OCCUPIED_MEM_PER_GPU_RANGE)))
        share = NodeShare(g, min(cpus, n.cpus), min(mem, n.mem))
        occupied[n.name] = share
        n.gpus -= share.gpus
        n.cpus -= share.cpus
        n.mem -= share.mem_gib
    free_gpus = sum(n.gpus for n in nodes)
    quotas = _quotas(rng, tenants, free_gpus)

    # -- jobs -------------------------------------------------------------------------------
    time = float(round(rng.uniform(3600.0, 43200.0)))
    model_idx = rng.choice(len(names), size=num_jobs, p=weights)
    guaranteed = rng.random(num_jobs) < guaranteed_fraction
    tenant_idx = rng.integers(tenants, size=num_jobs)
    to_run = rng.random(num_jobs) < running_fraction
    wants_plan = rng.random(num_jobs) < REQUESTED_PLAN_FRACTION
    width = len(str(num_jobs - 1))
    cpg_low, cpg_high = min(CPUS_PER_GPU_RANGE[0], cpus_per_gpu_cap), min(CPUS_PER_GPU_RANGE[1], cpus_per_gpu_cap)
    specs: list[dict[str, Any]] = []
    for i in range(num_jobs):
        name = names[int(model_idx[i])]
        model = MODELS[name]
        counts, probs = requests[name]
        gpus = int(counts[int(rng.choice(len(counts), p=probs))])
        cpg = int(rng.integers(cpg_low, cpg_high + 1))
        plan = cat.random_plan(rng, model, packed_placement(gpus, gpus_per_node)) if wants_plan[i] else None
        total_iter = int(round(10 ** rng.uniform(3.0, 5.0)))
        running = bool(to_run[i])
        submit = float(round(rng.uniform(0.0, max(0.0, time - 600.0)))) if running else \
            float(round(rng.uniform(max(0.0, time - 7200.0), time)))
        done = float(math.floor(total_iter * rng.uniform(0.05, 0.9))) if running else 0.0
        specs.append(dict(name=f"job{i:0{width}d}", model=name, requested_gpus=gpus, total_iterations=total_iter,
                          requested_cpus=cpg * gpus,
                          requested_mem_gib=float(round(gpus * rng.uniform(*MEM_PER_GPU_RANGE))),
                          requested_plan=plan, tenant=f"tenant{int(tenant_idx[i])}", guaranteed=bool(guaranteed[i]),
                          submit_time=submit, completed_iterations=done, _cpg=cpg, _run=running))

    # -- running jobs: guaranteed ones first, each group in random order ----------------------
    order = rng.permutation(num_jobs).tolist()
    order.sort(key=lambda k: not specs[k]["guaranteed"])
    quota_left = dict(quotas)
    running: list[Allocation] = []
    for k in order:
        s = specs[k]
        if not s["_run"]:
            continue
        model, gpus, cpg = MODELS[s["model"]], s["requested_gpus"], s["_cpg"]
        alloc: Allocation | None = None
        if s["guaranteed"]:
            if quota_left[s["tenant"]] >= gpus:
                plan = s["requested_plan"] or cat.best_plan(model, gpus, cpg * gpus)
                mem = host_gib_per_gpu(model, plan)
                parts = _packed_nodes(nodes, gpus, gpus_per_node, cpg, mem)
                alloc = _place(parts, s["name"], plan, cpg, mem) if parts else None
                if alloc is not None:
                    quota_left[s["tenant"]] -= gpus
        else:
            parts = _packed_nodes(nodes, gpus, gpus_per_node, cpg, 0.0) or _spread_nodes(nodes, gpus, cpg)
            if parts:
                shape = tuple(sorted((g for _, g in parts), reverse=True))
                plan = cat.random_plan(rng, model, shape)
                if plan is not None:
                    mem = host_gib_per_gpu(model, plan)
                    alloc = _place(parts, s["name"], plan, cpg, mem)
        if alloc is None:
            s["_run"] = False
            s["submit_time"] = float(round(rng.uniform(max(0.0, time - 7200.0), time)))
            s["completed_iterations"] = 0.0
        else:
            running.append(alloc)

    jobs = tuple(Job(**{f: v for f, v in s.items() if not f.startswith("_")}) for s in specs)
    running.sort(key=lambda a: a.job)
    log.debug("generated round: %d nodes x %d GPUs, %d jobs (%d running), %d occupied nodes, seed %d",
              num_nodes, gpus_per_node, num_jobs, len(running), len(occupied), seed)
    problem = RubickRound(cluster=cluster, jobs=jobs, running=tuple(running), occupied=tuple(occupied.items()),
                          quotas=tuple(quotas.items()), time=time)
    return with_priorities(with_constraints(problem, constrained, seed), constrained, seed) if constrained > 0 \
        else problem


#: nodes per rack of :func:`with_constraints`
RACK_NODES = 8


def with_constraints(problem: RubickRound, fraction: float, seed: int) -> RubickRound:
    """``problem`` with its nodes labelled ``rack`` (:data:`RACK_NODES` nodes a rack), the same racks as
    their ``topology`` (``{"rack": "rackN"}``), and about ``fraction`` of its queued jobs given one
    constraint each, drawn uniformly (its own random stream of ``seed``): a rack selector,
    ``max_nodes`` = the fewest nodes its request needs, a gang (``min_gpus = max_gpus =
    requested_gpus``), a CPU floor of half its requested CPUs per GPU (at least 1), a required rack
    topology rule (a preferred one when its request exceeds a rack's GPUs), or a preferred one."""
    rng = np.random.default_rng([seed, 7919])
    racks = max(1, -(-len(problem.cluster.nodes) // RACK_NODES))
    nodes = tuple(replace(n, labels={"rack": f"rack{i // RACK_NODES}"}, topology={"rack": f"rack{i // RACK_NODES}"})
                  for i, n in enumerate(problem.cluster.nodes))
    per_node = max(n.num_gpus for n in nodes)
    rack_gpus = min(sum(n.num_gpus for n in nodes[i:i + RACK_NODES]) for i in range(0, len(nodes), RACK_NODES))
    jobs = []
    for job in problem.jobs:
        if problem.current(job.name) is not None or rng.random() >= fraction:
            jobs.append(job)
            continue
        kind = int(rng.integers(6))
        if kind == 0:
            job = replace(job, node_selector={"rack": f"rack{int(rng.integers(racks))}"})
        elif kind == 1:
            job = replace(job, max_nodes=-(-job.requested_gpus // per_node))
        elif kind == 2:
            job = replace(job, min_gpus=job.requested_gpus, max_gpus=job.requested_gpus)
        elif kind == 3:
            cpus = job.cpus_or_default(min(n.num_cpus / max(n.num_gpus, 1) for n in nodes))
            job = replace(job, min_cpus_per_gpu=max(1, cpus // job.requested_gpus // 2))
        else:
            mode = "required" if kind == 4 and job.requested_gpus <= rack_gpus else "preferred"
            job = replace(job, topology=TopologyRule("rack", mode))
        jobs.append(job)
    return replace(problem, cluster=replace(problem.cluster, nodes=nodes), jobs=tuple(jobs))


def with_priorities(problem: RubickRound, fraction: float, seed: int) -> RubickRound:
    """``problem`` with about ``fraction`` of its jobs (running or queued) given priority 1 or 2 (its own
    random stream of ``seed``); the others keep priority 0."""
    rng = np.random.default_rng([seed, 104729])
    draws = rng.random(len(problem.jobs))
    levels = rng.integers(1, 3, len(problem.jobs))
    return replace(problem, jobs=tuple(replace(j, priority=int(p)) if d < fraction else j
                                       for j, d, p in zip(problem.jobs, draws, levels)))


__all__ = ["MODEL_WEIGHTS", "MIN_REQUEST_GPUS", "RACK_NODES", "candidate_requests", "generate_rubick_round",
           "request_weight", "with_constraints", "with_priorities"]

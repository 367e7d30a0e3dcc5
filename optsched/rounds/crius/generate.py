"""Random but realistic Crius rounds, reproducible from a seed (tests, benchmarks, ``optsched gen-round
--kind crius``), on the 1,280-GPU cluster of Crius Table 1 by default.

* **Models**: the 14 models of Table 2 (:mod:`optsched.perf.crius.models`), smaller ones more likely
  (weight ``params^-0.5``; Crius Fig. 15 shows a workload of mostly smaller models), each with one
  of its family's Table 2 batches, uniformly.
* **Requested GPUs** ``N_G``: the least power of two whose GPUs hold the model's training state
  (16 bytes a parameter) in 60% of the largest GPU memory of the cluster, times 1, 2 or 4 (weights
  0.5, 0.3, 0.2), at most 64 and at most twice the GPUs of the largest type; a request on which no
  type has a feasible Cell of ``N_G`` GPUs is doubled until one has (or the cap is reached).
* **Pinned jobs**: about 5% pin a GPU type (uniform among the types).
* **Work**: 10^3 .. 10^5 iterations (log-uniform); submit times uniform over the past 24 hours
  (round time 86,400 s).
* **Running jobs**: about ``running_fraction`` of the jobs, earliest submitted first, run their best
  candidate Cell by weight that the nodes still hold (placed as :func:`~optsched.rounds.crius.capacity.place`
  does, with CPUs and memory in proportion), with 10-90% of their work done; a job that finds no room
  stays queued.
* **Deadlines**: about ``deadline_fraction`` of the jobs get a deadline 1.2-3 times the time their
  remaining work takes on their best Cell of ``N_G`` GPUs, counted from the round's time.

Everything returned passes :class:`~optsched.rounds.crius.problem.CriusRound` validation.
"""

from __future__ import annotations

import math

import numpy as np

from optsched.core.allocation import Allocation, Placement
from optsched.core.catalog import get_cluster
from optsched.core.checks import require_int, require_number, require_seed
from optsched.core.hardware import Cluster
from optsched.core.job import Job
from optsched.perf.crius.cell_estimator import CellEstimator
from optsched.perf.crius.models import FAMILY_BATCHES, MODEL_SHAPES, crius_model
from optsched.perf.crius.op_graph import STATE_BYTES_PER_PARAM, OperatorGraph
from optsched.rounds.crius.capacity import NodeState, part_share, place, slot_rates
from optsched.rounds.crius.problem import DEFAULT_SEARCH_DEPTH, CriusRound
from optsched.rounds.crius.table import CriusTableCache, build_crius_table

DEFAULT_CLUSTER = "crius-sim-1280"
ROUND_TIME_S = 86_400.0
MAX_REQUEST = 64
PINNED_FRACTION = 0.05
GIB = float(1 << 30)


def draw_model(rng: np.random.Generator) -> str:
    """A Table 2 model with one of its family's batches (module docstring): two draws of ``rng``."""
    names = list(MODEL_SHAPES)
    w = np.array([MODEL_SHAPES[n].label_params ** -0.5 for n in names])
    base = names[int(rng.choice(len(names), p=w / w.sum()))]
    return f"{base}@{int(rng.choice(FAMILY_BATCHES[MODEL_SHAPES[base].family]))}"


def draw_request(rng: np.random.Generator, graph: OperatorGraph, cluster: Cluster, est: CellEstimator,
                 usable: list[str]) -> int:
    """A requested GPU count for ``graph`` on the types ``usable`` (module docstring): one draw of ``rng``."""
    totals = {t: sum(n.num_gpus for n in cluster.nodes_of_type(t)) for t in usable}
    cap = min(MAX_REQUEST, 2 * max(totals.values()))
    mem = max(t.memory_gib for t in cluster.gpu_types) * GIB * 0.6
    least = 1 << max(0, math.ceil(math.log2(STATE_BYTES_PER_PARAM * graph.total_params / mem)))
    req = min(least * int(rng.choice([1, 2, 4], p=[0.5, 0.3, 0.2])), cap)
    while True:
        ok = any(est.estimate(est.cell(graph, t, req, s)).feasible
                 for t in usable if req <= totals[t] for s in (1, 2, 4, 8, 16) if s <= min(req, len(graph)))
        if ok or 2 * req > min(cap, max(totals.values())):
            return req
        req *= 2


def generate_crius_round(num_jobs: int = 40, seed: int = 0, *, cluster: Cluster | str = DEFAULT_CLUSTER,
                         running_fraction: float = 0.5, deadline_fraction: float = 0.0,
                         search_depth: int = DEFAULT_SEARCH_DEPTH, objective: str = "throughput",
                         cache: CriusTableCache | None = None) -> CriusRound:
    """A random Crius round of ``num_jobs`` jobs (module docstring)."""
    require_int("generate_crius_round", "num_jobs", num_jobs, 1)
    require_seed("generate_crius_round", seed)
    require_number("generate_crius_round", "running_fraction", running_fraction, 0.0)
    require_number("generate_crius_round", "deadline_fraction", deadline_fraction, 0.0)
    cl = get_cluster(cluster) if isinstance(cluster, str) else cluster
    rng = np.random.default_rng(seed)
    types = sorted({n.gpu_type for n in cl.nodes if n.num_gpus > 0})
    cache = cache or CriusTableCache()
    est = cache.estimator(cl)
    jobs: list[Job] = []
    submits = np.sort(rng.uniform(0.0, ROUND_TIME_S, num_jobs))
    for i in range(num_jobs):
        model = draw_model(rng)
        pin = str(rng.choice(types)) if rng.random() < PINNED_FRACTION else None
        req = draw_request(rng, crius_model(model), cl, est, [pin] if pin else types)
        iters = int(10 ** rng.uniform(3, 5))
        jobs.append(Job(f"job{i:04d}", model, req, iters, submit_time=float(submits[i]), gpu_type=pin))
    base_round = CriusRound(cluster=cl, jobs=tuple(jobs), time=ROUND_TIME_S, search_depth=search_depth,
                            objective=objective)
    table = build_crius_table(base_round, cache)
    rates = slot_rates(cl)
    state = NodeState.of(base_round)
    index = {n: i for i, n in enumerate(state.names)}
    running: list[Allocation] = []
    final: list[Job] = []
    for j, job in enumerate(jobs):
        alloc = None
        if rng.random() < running_fraction:
            slots = state.slots(rates)
            for r in table.candidates_of(j):
                got = place(slots, state.types, [(job.name, table.gpu_type[r], int(table.unit[r]), int(table.parts[r]))])
                if got is None:
                    continue
                shares = {state.names[k]: part_share(rates, table.gpu_type[r], g) for k, g in got[job.name]}
                alloc = Allocation(job.name, table.coefficients.plans[r], Placement.of(shares))
                state.take(alloc.placement, index)
                break
        done = float(int(job.total_iterations * rng.uniform(0.1, 0.9))) if alloc is not None else 0.0
        deadline = None
        if rng.random() < deadline_fraction:
            rows = table.rows_of(j)
            at = rows[table.gpus[rows] == job.requested_gpus]
            t_iter = float(table.iteration_time[at].min()) if at.size else float(table.iteration_time[rows].min()) \
                if rows.size else math.inf
            if math.isfinite(t_iter):
                deadline = ROUND_TIME_S + (job.total_iterations - done) * t_iter * float(rng.uniform(1.2, 3.0))
        final.append(Job(job.name, job.model, job.requested_gpus, job.total_iterations, submit_time=job.submit_time,
                         completed_iterations=done, deadline=deadline, gpu_type=job.gpu_type))
        if alloc is not None:
            running.append(alloc)
    return CriusRound(cluster=cl, jobs=tuple(final), running=tuple(running), time=ROUND_TIME_S,
                      search_depth=search_depth, objective=objective)


__all__ = ["DEFAULT_CLUSTER", "draw_model", "draw_request", "generate_crius_round"]

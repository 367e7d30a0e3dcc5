"""Warnings for numbers that are valid but implausible for their unit, the usual sign of a unit mistake
(memory in MB or MiB where GiB is meant, CPUs in millicores), issue 16 item 3. They do not reject the
round: ``optsched.solve`` adds them to the decision's message, ``optsched solve`` also prints them on
standard error (``optsched: warning: ...``).

Thresholds (a node larger than any server built today; a request larger than the nodes it needs):

* a node with more than :data:`MAX_NODE_MEMORY_GIB` GiB of host memory (64 TiB), more than
  :data:`MAX_NODE_CPUS` CPUs or more than :data:`MAX_NODE_GPUS` GPUs; a GPU type with more than
  :data:`MAX_GPU_MEMORY_GIB` GiB of memory;
* a job whose requested host memory or CPUs exceed what the nodes its request needs can hold: per
  requested GPU more than the largest node of a type it may use offers per GPU.
"""

from __future__ import annotations

from optsched.core.hardware import Cluster
from optsched.core.job import Job

#: host memory per node above which a node is implausible (GiB; 64 TiB)
MAX_NODE_MEMORY_GIB = 64 * 1024
#: CPUs per node above which a node is implausible
MAX_NODE_CPUS = 1024
#: GPUs per node above which a node is implausible
MAX_NODE_GPUS = 64
#: memory of one GPU above which a GPU type is implausible (GiB)
MAX_GPU_MEMORY_GIB = 1024
#: warnings listed per round before the rest are counted
MAX_LISTED = 5


def _listed(items: list[str], what: str) -> list[str]:
    if len(items) <= MAX_LISTED:
        return items
    return items[:MAX_LISTED] + [f"... and {len(items) - MAX_LISTED} more {what}"]


def cluster_warnings(cluster: Cluster) -> list[str]:
    """Nodes and GPU types whose numbers are implausible for their unit (module docstring); computed
    once per cluster object."""
    memo = cluster.memo.get("unit_warnings")
    if memo is not None:
        return list(memo)
    out = []
    for g in cluster.gpu_types:
        if g.memory_gib > MAX_GPU_MEMORY_GIB:
            out.append(f"GPU type {g.name!r} has {g.memory_gib:g} GiB of memory per GPU, more than "
                       f"{MAX_GPU_MEMORY_GIB} GiB: is it in MiB or MB? (memory_gib is in GiB)")
    for n in cluster.nodes:
        if n.memory_gib > MAX_NODE_MEMORY_GIB:
            out.append(f"node {n.name!r} has {n.memory_gib:g} GiB of host memory, more than 64 TiB: is it in MiB "
                       "or MB? (memory_gib is in GiB)")
        if n.num_cpus > MAX_NODE_CPUS:
            out.append(f"node {n.name!r} has {n.num_cpus} CPUs, more than {MAX_NODE_CPUS}: is it in millicores? "
                       "(num_cpus counts cores)")
        if n.num_gpus > MAX_NODE_GPUS:
            out.append(f"node {n.name!r} has {n.num_gpus} GPUs, more than {MAX_NODE_GPUS} in one server")
    out = _listed(out, "implausible nodes")
    cluster.memo["unit_warnings"] = tuple(out)
    return out


def request_warnings(cluster: Cluster, jobs: tuple[Job, ...]) -> list[str]:
    """Jobs whose requested host memory or CPUs exceed, per requested GPU, what the largest node of any
    GPU type they may use offers per GPU (module docstring)."""
    per_type: dict[str, tuple[float, float]] = {}
    for n in cluster.nodes:
        if n.num_gpus > 0:
            mem, cpus = per_type.get(n.gpu_type, (0.0, 0.0))
            per_type[n.gpu_type] = (max(mem, n.memory_gib / n.num_gpus), max(cpus, n.num_cpus / n.num_gpus))
    if not per_type:
        return []
    best_mem = max(m for m, _ in per_type.values())
    best_cpus = max(c for _, c in per_type.values())
    out = []
    for job in jobs:
        mem_cap, cpu_cap = per_type.get(job.gpu_type, (best_mem, best_cpus)) if job.gpu_type else (best_mem,
                                                                                                  best_cpus)
        g = job.requested_gpus
        if job.requested_mem_gib > mem_cap * g + 1e-9:
            out.append(f"job {job.name!r} requests {job.requested_mem_gib:g} GiB of host memory for {g} GPU(s), more "
                       f"than the {mem_cap * g:g} GiB the nodes of those GPUs hold: is it in MiB or MB? "
                       "(requested_mem_gib is in GiB)")
        if job.requested_cpus > cpu_cap * g + 1e-9:
            out.append(f"job {job.name!r} requests {job.requested_cpus} CPUs for {g} GPU(s), more than the "
                       f"{cpu_cap * g:g} the nodes of those GPUs hold: is it in millicores? (requested_cpus counts "
                       "cores)")
    return _listed(out, "implausible requests")


def unit_warnings(cluster: Cluster, jobs: tuple[Job, ...]) -> list[str]:
    """:func:`cluster_warnings` and :func:`request_warnings` of a round."""
    return cluster_warnings(cluster) + request_warnings(cluster, jobs)


__all__ = ["MAX_GPU_MEMORY_GIB", "MAX_NODE_CPUS", "MAX_NODE_GPUS", "MAX_NODE_MEMORY_GIB", "cluster_warnings",
           "request_warnings", "unit_warnings"]

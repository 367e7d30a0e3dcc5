"""The nodes of one GPU type as every system sees them when it sizes a job: how many GPUs a node
holds, how many the type has in all, and the CPUs and host memory the poorest node offers (the one
spelling of "the GPU pool of a type"), plus the packed placement of a GPU count and the GPU types a
job may use.

Rules (the papers are silent; every table builder, trace generator and baseline uses these):

* **Pool of a type**: only nodes with at least one GPU count. ``per_node`` is the largest node's GPU
  count, ``total`` the sum, ``cpus_per_gpu`` the smallest ``num_cpus / num_gpus`` over the nodes,
  ``node_cpus`` the smallest ``num_cpus`` and ``host_gib`` the smallest host memory: a configuration
  sized for the pool fits every node of the type.
* **Default type** (:func:`gpu_pool` without a type): the type with the most GPUs, ties by name.
* **Packed placement** of g GPUs on nodes of G GPUs: whole nodes first, the rest on one more node.
* **Usable types** of a job: its pinned type, else every type of the cluster that has GPUs, sorted.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Sequence

from optsched.core.checks import require_int
from optsched.core.errors import ValidationError
from optsched.core.hardware import Cluster, GPUType
from optsched.core.job import Job


def packed_placement(gpus: int, gpus_per_node: int) -> tuple[int, ...]:
    """The canonical placement of ``gpus`` GPUs on nodes of ``gpus_per_node`` GPUs: whole nodes first,
    the remainder on one more node, largest first (``packed_placement(10, 8) == (8, 2)``)."""
    require_int("packed_placement", "gpus", gpus, 1)
    require_int("packed_placement", "gpus_per_node", gpus_per_node, 1)
    full, rest = divmod(gpus, gpus_per_node)
    return (gpus_per_node,) * full + ((rest,) if rest else ())


@dataclass(frozen=True)
class GpuPool:
    """The nodes of one GPU type (module docstring): the type, GPUs of the largest node, GPUs in all,
    CPUs per GPU and CPUs of the poorest node, host GiB of the smallest node."""

    gpu_type: GPUType
    per_node: int
    total: int
    cpus_per_gpu: float
    node_cpus: int
    host_gib: float

    @property
    def proportional_cpus_per_gpu(self) -> int:
        """GPU-proportional CPU share (Synergy's "proportional" allocation): the CPUs per GPU of the
        poorest node, rounded down, at least 1 (96 / 8 = 12 on the A800 nodes)."""
        return max(1, int(self.cpus_per_gpu))

    def shape(self, gpus: int) -> tuple[int, ...]:
        """Packed placement of ``gpus`` GPUs on this pool's nodes."""
        return packed_placement(gpus, self.per_node)


def gpu_pool(cluster: Cluster, gpu_type: str | None = None) -> GpuPool:
    """The pool of ``gpu_type`` on ``cluster`` (default: the type with the most GPUs, ties by name).
    ``ValidationError`` when the cluster has no GPU of that type; ``UnknownNameError`` when the type
    is not one of the cluster's."""
    if not isinstance(cluster, Cluster):
        raise ValidationError(f"cluster must be a Cluster, got {type(cluster).__name__}")
    key = ("gpu_pool", gpu_type)
    pool = cluster.memo.get(key)
    if pool is None:
        pool = cluster.memo[key] = _gpu_pool(cluster, gpu_type)
    return pool


def _gpu_pool(cluster: Cluster, gpu_type: str | None) -> GpuPool:
    if gpu_type is None:
        counts: Counter[str] = Counter()
        for n in cluster.nodes:
            counts[n.gpu_type] += n.num_gpus
        if not any(counts.values()):
            raise ValidationError(f"cluster {cluster.name!r} has no GPUs")
        gpu_type = min(counts, key=lambda t: (-counts[t], t))
    gtype = cluster.gpu_type(gpu_type)
    nodes = [n for n in cluster.nodes_of_type(gpu_type) if n.num_gpus > 0]
    if not nodes:
        raise ValidationError(f"cluster {cluster.name!r} has no node with {gpu_type} GPUs")
    return GpuPool(gtype, max(n.num_gpus for n in nodes), sum(n.num_gpus for n in nodes),
                   min(n.num_cpus / n.num_gpus for n in nodes), min(n.num_cpus for n in nodes),
                   min(n.memory_gib for n in nodes))


def gpu_types_with_gpus(cluster: Cluster) -> list[str]:
    """The GPU types of ``cluster`` that have GPUs, sorted by name (what an unpinned job may run on); computed once
    per cluster (issue 26: asked per job, it scanned every node: 1.4 s of a 20,000-job round's split)."""
    found = cluster.memo.get("gpu_types_with_gpus")
    if found is None:
        found = tuple(sorted({n.gpu_type for n in cluster.nodes if n.num_gpus > 0}))
        cluster.memo["gpu_types_with_gpus"] = found
    return list(found)


def usable_gpu_types(cluster: Cluster, job: Job, with_gpus: Sequence[str] | None = None) -> list[str]:
    """GPU types ``job`` may run on: its pinned type, else every type with GPUs, sorted by name
    (``with_gpus``: :func:`gpu_types_with_gpus` of ``cluster``, computed once by a caller that asks for
    many jobs)."""
    if job.gpu_type is not None:
        return [job.gpu_type]
    return list(with_gpus) if with_gpus is not None else gpu_types_with_gpus(cluster)


__all__ = ["GpuPool", "gpu_pool", "gpu_types_with_gpus", "packed_placement", "usable_gpu_types"]

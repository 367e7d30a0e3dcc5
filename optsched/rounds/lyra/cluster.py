"""The two-pool cluster of Lyra's testbed and simulations (thesis Sec. 3.7.1) and the allocation of a
job's workers as the round layer's :class:`~optsched.core.allocation.Allocation`."""

from __future__ import annotations

import functools
from typing import Mapping

from optsched.core.allocation import Allocation, NodeShare, Placement
from optsched.core.catalog import get_gpu_type
from optsched.core.hardware import Cluster, Node
from optsched.core.plan import ExecutionPlan

#: GPU types of the two pools (Sec. 3.7.1 testbed: V100 32 GB training, T4 16 GB inference servers)
TRAINING_GPU, INFERENCE_GPU = "V100-32G", "T4"
#: per-server CPUs and host memory of the testbed (92 vCPU; 350 GB training, 210 GB inference)
SERVER_CPUS, TRAINING_MEM_GIB, INFERENCE_MEM_GIB = 92, 350.0, 210.0


def training_name(i: int) -> str:
    return f"train-{i:03d}"


def inference_name(i: int) -> str:
    return f"inf-{i:03d}"


def two_pool_cluster(training: int, inference: int, gpus_per_server: int = 8, name: str | None = None) -> Cluster:
    """``training`` 8xV100 servers (``train-000`` ...) and ``inference`` 8xT4 servers (``inf-000`` ...),
    100 Gb/s InfiniBand between servers, NVLink within a V100 server (T4: PCIe, catalogue)."""
    nodes = [Node(training_name(i), TRAINING_GPU, gpus_per_server, SERVER_CPUS, TRAINING_MEM_GIB)
             for i in range(training)]
    nodes += [Node(inference_name(i), INFERENCE_GPU, gpus_per_server, SERVER_CPUS, INFERENCE_MEM_GIB)
              for i in range(inference)]
    return Cluster(name or f"lyra-{training}t-{inference}i", tuple(nodes),
                   (get_gpu_type(TRAINING_GPU), get_gpu_type(INFERENCE_GPU)),
                   intra_node_gbps=150.0, inter_node_gbps=12.5, pcie_gbps=16.0)


def worker_allocation(job: str, gpus_per_node: Mapping[str, int]) -> Allocation:
    """The allocation of ``job`` holding ``gpus_per_node`` (data parallel over all its GPUs; Lyra
    accounts GPUs only, Sec. 3.5.3: "GPU is most likely the bottleneck resource")."""
    shares = tuple((n, _share(int(g))) for n, g in gpus_per_node.items() if g > 0)
    total = sum(s.gpus for _, s in shares)
    return Allocation(job, _plan(total), Placement(shares))


@functools.lru_cache(maxsize=1024)
def _share(gpus: int) -> NodeShare:
    """``NodeShare(gpus)``, one object per count (it is immutable): an allocation per job of a large round
    made them anew, with their checks."""
    return NodeShare(gpus)


@functools.lru_cache(maxsize=1024)
def _plan(dp: int) -> ExecutionPlan:
    """``ExecutionPlan(dp=dp)``, one object per degree (as :func:`_share`)."""
    return ExecutionPlan(dp=dp)


__all__ = ["INFERENCE_GPU", "TRAINING_GPU", "inference_name", "training_name", "two_pool_cluster",
           "worker_allocation"]

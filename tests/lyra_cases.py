"""Hand-built Lyra rounds from the thesis' worked examples (chapter 3), shared by the Lyra tests."""

from __future__ import annotations

from optsched.core.job import Job
from optsched.rounds.lyra.cluster import two_pool_cluster, worker_allocation
from optsched.rounds.lyra_reclaim import LyraReclaimRound


def figure_3_5(reclaim: int = 2) -> LyraReclaimRound:
    """Fig. 3.5 / Table 3.1: six on-loan 8-GPU servers ``inf-000`` .. ``inf-005`` (the thesis' servers
    1-6); job a on servers 1 and 2 (4 + 4 GPUs), b on server 3 (8), c on servers 4 and 5 (4 + 1), d on
    servers 6 and 5 (4 + 1). One GPU per worker on both pools (``inference_factor`` 1)."""
    cluster = two_pool_cluster(0, 6)
    layout = {"a": {"inf-000": 4, "inf-001": 4}, "b": {"inf-002": 8}, "c": {"inf-003": 4, "inf-004": 1},
              "d": {"inf-005": 4, "inf-004": 1}}
    jobs = tuple(Job(name, "resnet50", sum(s.values()), 1000, fungible=True) for name, s in layout.items())
    running = tuple(worker_allocation(name, s) for name, s in layout.items())
    return LyraReclaimRound(cluster=cluster, jobs=jobs, running=running,
                            inference_nodes=tuple(n.name for n in cluster.nodes), inference_factor=1.0,
                            reclaim=reclaim)


def two_jobs(a_max: int, a_work: int, gpw_a: int = 1, capacity: int = 8):  # noqa: ANN201
    """Tables 3.2 / 3.4: elastic jobs A (``w_min`` 2, ``w_max`` ``a_max``, ``a_work`` worker-seconds) and B
    (2..6 workers, 20 s at 6 workers), queued, on one training server of ``capacity`` GPUs."""
    from optsched.core.hardware import Cluster, Node
    from optsched.rounds.lyra.cluster import two_pool_cluster
    from optsched.rounds.lyra_allocate import LyraAllocateRound
    base = two_pool_cluster(1, 0)
    cluster = Cluster("one", (Node("train-000", "V100-32G", capacity, 92, 350.0),), base.gpu_types,
                      base.intra_node_gbps, base.inter_node_gbps, base.pcie_gbps)
    jobs = (Job("A", "resnet50", 2 * gpw_a, a_work * gpw_a, min_gpus=2 * gpw_a, max_gpus=a_max * gpw_a,
                gpus_per_worker=gpw_a),
            Job("B", "bert", 2, 120, min_gpus=2, max_gpus=6))
    return LyraAllocateRound(cluster=cluster, jobs=jobs)

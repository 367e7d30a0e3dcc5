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


def lent_servers_reclaimed():  # noqa: ANN201
    """The reclaim case of ``test_lyra_loaning``: two training servers, four inference servers lent at 0 s and all
    taken back at 1800 s; f and g (fungible, 8 GPUs, 2 h of work) run on the lent servers and lose them, t (16
    GPUs) holds the training servers: 2 preemptions of 3 jobs. Returns (the simulation's result, its config)."""
    from optsched.core.events import PoolTarget
    from optsched.policies import PolicyOptions, make_policy
    from optsched.rounds.lyra.cluster import inference_name
    from optsched.sim.config import SimConfig
    from optsched.sim.engine import Simulator
    from optsched.sim.lyra_truth import LyraGroundTruth

    inf = tuple(inference_name(i) for i in range(4))
    jobs = [Job("f", "cnn", 8, 8 * 7200, gpus_per_worker=2, fungible=True),
            Job("g", "cnn", 8, 8 * 7200, gpus_per_worker=2, fungible=True, checkpointing=True),
            Job("t", "cnn", 16, 16 * 3600, gpus_per_worker=2)]
    cfg = SimConfig(preempt_restart_s=63.0, checkpoint_on_preempt=False, checkpoint_interval_s=0.0)
    res = Simulator(two_pool_cluster(2, 4), jobs, make_policy("lyra", PolicyOptions(time_limit=5), kind="lyra"),
                    LyraGroundTruth(frozenset({"T4"})), cfg, round_fields={"inference_nodes": inf},
                    pool_targets=[PoolTarget(0.0, inf, 4), PoolTarget(1800.0, inf, 0)]).run()
    return res, cfg

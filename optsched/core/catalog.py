"""Built-in catalogue: GPU types, the seven Rubick models and named clusters.

Sources (public specifications):
* GPU memory and dense fp16 tensor-core peaks from the vendors' data sheets; intra-node bandwidth
  overrides for cards without NVLink between all pairs (A40, A10, T4: PCIe 4.0/3.0 x16).
* Model shapes from the public model cards; parameter counts and global batch sizes as used in the
  Rubick/Morphling evaluation (``../shared/data/README.md``). T5 (1.2B) follows the measured
  configuration: d_model 1024 and seq*hidden*layers = 2^24 with seq 512, i.e. 32 transformer blocks.
* ``a800-8x8``: the Rubick evaluation cluster, 8 nodes x 8 A800-80GB, 96 vCPU and 1,600 GB each. Its
  bandwidths are *effective* collective bandwidths (what ring all-reduce achieves), the "measured
  offline" environment constants of Morphling Appendix A (see ``A800_EFFECTIVE_BANDWIDTH``).
"""

from __future__ import annotations

from optsched.core.errors import UnknownNameError
from optsched.core.hardware import Cluster, GPUType, Node
from optsched.core.model import ModelSpec

GPU_TYPES: dict[str, GPUType] = {g.name: g for g in (
    GPUType("A800", memory_gib=80.0, peak_tflops=312.0),
    GPUType("A100-40G", memory_gib=40.0, peak_tflops=312.0),
    GPUType("A40", memory_gib=48.0, peak_tflops=149.7, intra_node_gbps=20.0),
    GPUType("A10", memory_gib=24.0, peak_tflops=125.0, intra_node_gbps=20.0),
    GPUType("V100-32G", memory_gib=32.0, peak_tflops=125.0),
    GPUType("T4", memory_gib=16.0, peak_tflops=65.0, intra_node_gbps=10.0),
)}

MODELS: dict[str, ModelSpec] = {m.name: m for m in (
    ModelSpec("vit", num_params=85_952_456, hidden=768, layers=12, seq_len=197, global_batch=64, num_heads=12),
    ModelSpec("roberta", num_params=355_412_057, hidden=1024, layers=24, seq_len=512, global_batch=64,
              num_heads=16),
    ModelSpec("bert", num_params=336_297_858, hidden=1024, layers=24, seq_len=512, global_batch=32,
              num_heads=16),
    ModelSpec("t5", num_params=1_240_809_472, hidden=1024, layers=32, seq_len=512, global_batch=16,
              num_heads=16),
    ModelSpec("gpt2", num_params=1_557_686_400, hidden=1600, layers=48, seq_len=1024, global_batch=16,
              num_heads=25),
    ModelSpec("llama7", num_params=6_738_423_808, hidden=4096, layers=32, seq_len=4096, global_batch=8,
              num_heads=32),
    ModelSpec("llama30", num_params=32_528_943_616, hidden=6656, layers=60, seq_len=2048, global_batch=4,
              num_heads=52),
)}

#: models whose initial plans avoid TP/PP where a data-parallel plan exists (Rubick Sec. 7.3, base trace:
#: "we disable TP and PP as they are mostly unnecessary for these relatively small models")
NO_3D_MODELS: frozenset[str] = frozenset({"vit", "roberta", "bert", "t5"})

#: Effective (achieved all-reduce bus) bandwidths of the A800 cluster, GB/s: NVLink within a node,
#: RDMA between nodes, host-device PCIe 4.0 x16.
A800_EFFECTIVE_BANDWIDTH = {"intra_node_gbps": 150.0, "inter_node_gbps": 80.0, "pcie_gbps": 20.0}


def a800_cluster(num_nodes: int = 8, gpus_per_node: int = 8, name: str | None = None) -> Cluster:
    """``num_nodes`` x ``gpus_per_node`` A800-80GB with 96 vCPU and 1,600 GB host memory per node
    (12 CPUs and 200 GB per GPU when ``gpus_per_node`` differs from 8)."""
    nodes = tuple(Node(f"n{i:03d}", "A800", gpus_per_node, 12 * gpus_per_node, 200.0 * gpus_per_node)
                  for i in range(num_nodes))
    return Cluster(name or f"a800-{num_nodes}x{gpus_per_node}", nodes, (GPU_TYPES["A800"],),
                   **A800_EFFECTIVE_BANDWIDTH)


CLUSTERS = {"a800-8x8": lambda: a800_cluster(8, 8), "a800-160x8": lambda: a800_cluster(160, 8)}


def get_model(name: str, models: dict[str, ModelSpec] | None = None) -> ModelSpec:
    table = MODELS if models is None else models
    try:
        return table[name]
    except KeyError:
        raise UnknownNameError("model", name, list(table)) from None


def get_gpu_type(name: str) -> GPUType:
    try:
        return GPU_TYPES[name]
    except KeyError:
        raise UnknownNameError("GPU type", name, list(GPU_TYPES)) from None


def get_cluster(name: str) -> Cluster:
    try:
        return CLUSTERS[name]()
    except KeyError:
        raise UnknownNameError("cluster", name, list(CLUSTERS)) from None

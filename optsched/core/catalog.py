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
* Intra-node link kinds (Crius Table 1 marks the NVLink types; the marks are lost in the text we
  have, so we take the SXM forms of A100 and V100 at 4 and 16 GPUs a node as NVLink and the
  PCIe cards A40, A10 and T4 as PCIe) and the achieved fraction of the dense fp16 peak on large
  training kernels (``efficiency``; our estimates: about half the peak on the data-centre parts, less
  on the smaller PCIe cards). A800 is left as the Rubick measurements describe it.
* ``crius-sim-1280`` (:func:`crius_sim_cluster`): Crius Table 1, 1,280 GPUs of four types: 80 nodes
  x 4 A100-40G, 160 x 2 A40, 160 x 2 A10, 20 x 16 V100-32G; nodes linked by Mellanox ConnectX-5
  (EDR InfiniBand, 100 Gb/s = 12.5 GB/s a node), the A10 nodes by ConnectX-6 (HDR, 200 Gb/s = 25
  GB/s). ``crius-testbed-64`` (:func:`crius_testbed_cluster`): the physical testbed of Sec. 8.1, 16
  nodes of 2 x A40 (ConnectX-5) and 16 nodes of 2 x A10 (ConnectX-6), 48 CPU threads (Xeon Gold
  5318Y) and 256 GB each. CPUs and host memory of the simulated nodes are not given; we use 16 CPU
  threads and 128 GiB a GPU (2-GPU nodes: the testbed's 48 threads and 256 GB). Intra-node
  bandwidths (effective all-reduce bus bandwidth): NVLink 3 on A100 200 GB/s, NVLink 2 through
  NVSwitch on V100 120 GB/s, PCIe 4.0 x16 20 GB/s.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from optsched.core.errors import UnknownNameError, ValidationError
from optsched.core.hardware import Cluster, GPUType, Node
from optsched.core.jsonio import read_json
from optsched.core.model import ModelSpec

GPU_TYPES: dict[str, GPUType] = {g.name: g for g in (
    GPUType("A800", memory_gib=80.0, peak_tflops=312.0),
    GPUType("A100-40G", memory_gib=40.0, peak_tflops=312.0, intra_link="nvlink", efficiency=0.5),
    GPUType("A40", memory_gib=48.0, peak_tflops=149.7, intra_node_gbps=20.0, intra_link="pcie", efficiency=0.45),
    GPUType("A10", memory_gib=24.0, peak_tflops=125.0, intra_node_gbps=20.0, intra_link="pcie", efficiency=0.4),
    GPUType("V100-32G", memory_gib=32.0, peak_tflops=125.0, intra_link="nvlink", efficiency=0.45),
    GPUType("T4", memory_gib=16.0, peak_tflops=65.0, intra_node_gbps=10.0, intra_link="pcie", efficiency=0.35),
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


#: network generations of the Crius clusters -> GB/s a node (Mellanox ConnectX-5 EDR 100 Gb/s, ConnectX-6 HDR
#: 200 Gb/s)
INTER_LINKS_GBPS: dict[str, float] = {"ib-cx5": 12.5, "ib-cx6": 25.0}
#: effective intra-node bandwidths of the Crius GPU types (GB/s; module docstring)
_CRIUS_INTRA_GBPS = {"A100-40G": 200.0, "V100-32G": 120.0, "A40": 20.0, "A10": 20.0}


def _crius_type(name: str, inter_link: str) -> GPUType:
    return replace(GPU_TYPES[name], intra_node_gbps=_CRIUS_INTRA_GBPS[name], inter_link=inter_link,
                   inter_node_gbps=INTER_LINKS_GBPS[inter_link])


def _crius_cluster(name: str, rows: tuple[tuple[str, str, int, int, int, float, str], ...]) -> Cluster:
    """Nodes ``<prefix>-<index>`` from ``(type, prefix, nodes, GPUs a node, CPUs, GiB, inter link)`` rows."""
    nodes = tuple(Node(f"{prefix}-{i:03d}", gtype, gpus, cpus, mem)
                  for gtype, prefix, count, gpus, cpus, mem, _ in rows for i in range(count))
    types = tuple(_crius_type(gtype, link) for gtype, _, _, _, _, _, link in rows)
    return Cluster(name, nodes, types, intra_node_gbps=200.0, inter_node_gbps=INTER_LINKS_GBPS["ib-cx5"],
                   pcie_gbps=20.0)


def crius_sim_cluster() -> Cluster:
    """Crius Table 1: 1,280 GPUs of four types (module docstring)."""
    return _crius_cluster("crius-sim-1280", (
        ("A100-40G", "a100", 80, 4, 64, 512.0, "ib-cx5"), ("A40", "a40", 160, 2, 48, 256.0, "ib-cx5"),
        ("A10", "a10", 160, 2, 48, 256.0, "ib-cx6"), ("V100-32G", "v100", 20, 16, 256, 2048.0, "ib-cx5")))


def crius_testbed_cluster() -> Cluster:
    """Crius Sec. 8.1: 16 nodes of 2 x A40 and 16 nodes of 2 x A10 (module docstring)."""
    return _crius_cluster("crius-testbed-64", (
        ("A40", "a40", 16, 2, 48, 256.0, "ib-cx5"), ("A10", "a10", 16, 2, 48, 256.0, "ib-cx6")))


CLUSTERS = {"a800-8x8": lambda: a800_cluster(8, 8), "a800-160x8": lambda: a800_cluster(160, 8),
            "crius-sim-1280": crius_sim_cluster, "crius-testbed-64": crius_testbed_cluster}


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


def resolve_cluster(name: str) -> Cluster:
    """A catalogue cluster by name, or a cluster JSON file (``Cluster.to_dict`` format) by path."""
    if name in CLUSTERS or not Path(name).suffix:
        return get_cluster(name)
    if not Path(name).is_file():
        raise ValidationError(f"cluster {name!r} is neither a built-in cluster ({', '.join(sorted(CLUSTERS))}) "
                              "nor an existing JSON file")
    data = read_json(name)  # its errors name the file already
    try:
        return Cluster.from_dict(data)
    except ValidationError as exc:
        raise ValidationError(f"{name}: {exc}") from None

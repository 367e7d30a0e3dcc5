"""Random but realistic experts rounds from the synthetic routing generator
(:mod:`optsched.perf.moe_routing`), reproducible from a seed.

:func:`generate_experts_round` draws a synthetic MoE model of ``experts`` experts and
:data:`GENERATED_LAYERS` MoE layers, profiles it on :data:`PROFILE_BATCHES` batches (Lina's profiling
stage, :func:`~optsched.perf.expert_popularity.profile_paths` with ``path_length``), draws one inference
batch of ``tokens`` tokens and a layer ``i + 1`` with ``path_length <= i + 1 < layers``, and sets each
expert's load to Lina's phase-one estimate ``tokens x sum_t P_{j(t)}^{i+1}(e) / N_t`` (top-1 paths,
Sec. 4.5.2; experts in no token's top-1 list get load 0, as in the paper). The round runs on
:func:`lina_cluster` (the Lina testbed's nodes of 4 A100 GPUs, 100 Gb/s InfiniBand) with ``devices``
GPUs (default: as many as experts, the paper's expert-parallel layout), ``slots`` replicas per device.
"""

from __future__ import annotations

import math

import numpy as np

from optsched.core.catalog import GPU_TYPES
from optsched.core.checks import require_int, require_seed
from optsched.core.errors import ValidationError
from optsched.core.hardware import Cluster, Node
from optsched.perf.expert_popularity import DEFAULT_PATH_LENGTH, estimate_popularity, profile_paths
from optsched.perf.moe_routing import SyntheticRouter
from optsched.rounds.experts.problem import DEFAULT_SLOTS, ExpertSpec, ExpertsRound

#: MoE layers of the generated model (the paper's 12-layer inference models, Table 4.2)
GENERATED_LAYERS = 12
#: batches and tokens per batch of the profiling stage
PROFILE_BATCHES = 16
PROFILE_TOKENS = 1024
#: GPUs per node of the Lina testbed (Sec. 4.7.1: 4 nodes of 4 A100-40GB, 100 Gb/s InfiniBand)
TESTBED_GPUS_PER_NODE = 4
TESTBED_INTER_NODE_GBPS = 12.5
#: largest sizes the generator takes, each with why (checked before any work): the synthetic router holds
#: ``GENERATED_LAYERS - 1`` experts x experts transition matrices and the profile counts grow alike (1,024
#: experts: 2.2 GB and 33 s measured; 100,000 would need 74.5 GiB for one matrix), the cluster has a node per 4
#: devices, and the batch and its routing are held token by token (1,000,000 tokens: 0.76 GB and 21 s)
MAX_EXPERTS = 1024
MAX_DEVICES = 4096
MAX_TOKENS = 1_000_000
_MAXIMA: dict[str, tuple[int, str]] = {
    "experts": (MAX_EXPERTS, "the synthetic router's memory grows as experts squared: 1,024 experts take about "
                             "2 GB"),
    "devices": (MAX_DEVICES, "1,024 nodes of 4 GPUs"),
    "tokens": (MAX_TOKENS, "the batch's routing is held token by token: 1,000,000 tokens take about 0.8 GB"),
}


def lina_cluster(devices: int) -> Cluster:
    """``devices`` A100-40GB GPUs on nodes of 4 (the last node may have fewer), 12.5 GB/s between nodes."""
    require_int("lina_cluster", "devices", devices, 1)
    per = TESTBED_GPUS_PER_NODE
    nodes = tuple(Node(f"n{i:03d}", "A100-40G", min(per, devices - per * i), 64, 512.0)
                  for i in range(math.ceil(devices / per)))
    return Cluster(f"lina-{devices}gpu", nodes, (GPU_TYPES["A100-40G"],), intra_node_gbps=150.0,
                   inter_node_gbps=TESTBED_INTER_NODE_GBPS, pcie_gbps=20.0)


def generate_experts_round(experts: int = 16, devices: int | None = None, seed: int = 0, *, slots: int = DEFAULT_SLOTS,
                           tokens: int = 4096, path_length: int = DEFAULT_PATH_LENGTH) -> ExpertsRound:
    """A random experts round (module docstring); ``ValidationError`` names a bad argument."""
    owner = "generate_experts_round"
    require_int(owner, "experts", experts, 2)
    devices = experts if devices is None else devices
    require_int(owner, "devices", devices, 1)
    require_int(owner, "seed", seed, 0)
    require_int(owner, "slots", slots, 1)
    require_int(owner, "tokens", tokens, 1)
    require_int(owner, "path_length", path_length, 1)
    for name, value in (("experts", experts), ("devices", devices), ("tokens", tokens)):
        maximum, why = _MAXIMA[name]
        if value > maximum:
            raise ValidationError(f"{owner}: {name} must be at most {maximum:,} ({why}), got {value:,}")
    if path_length >= GENERATED_LAYERS - 1:
        raise ValidationError(f"{owner}: path_length must be below {GENERATED_LAYERS - 1} (the generated model has "
                              f"{GENERATED_LAYERS} MoE layers)")
    if experts > devices * slots:
        raise ValidationError(f"{owner}: {experts} experts do not fit {devices} devices x {slots} slots")
    require_seed("generate_experts_round", seed)
    rng = np.random.default_rng(seed)
    router = SyntheticRouter.create(experts, GENERATED_LAYERS, seed)
    profile = profile_paths(router.sample(PROFILE_BATCHES, PROFILE_TOKENS, seed), path_length)
    batch = router.sample(1, tokens, seed + 1)
    layer = int(rng.integers(path_length - 1, GENERATED_LAYERS - 1))
    loads = tokens * estimate_popularity(profile, batch.top1, layer, k=1)
    specs = tuple(ExpertSpec(round(float(w), 6)) for w in loads)
    return ExpertsRound(cluster=lina_cluster(devices), experts=specs, slots=slots, layer=layer + 1)


__all__ = ["GENERATED_LAYERS", "MAX_DEVICES", "MAX_EXPERTS", "MAX_TOKENS", "PROFILE_BATCHES", "PROFILE_TOKENS",
           "generate_experts_round", "lina_cluster"]

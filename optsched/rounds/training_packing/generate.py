"""Random training-packing rounds, reproducible from a seed (ours: the text gives the rule, not the
numbers of a round).

``experts`` experts on as many A100-40GB devices (:func:`~optsched.rounds.experts.generate.lina_cluster`,
12.5 GB/s between nodes; Sec. 4.7.2: "The number of GPUs is equal to the number of experts per layer").
Per candidate ``p`` (every power of two dividing ``experts``), balanced load:

* all-to-all alone: ``A_1 (1 - p / E) / (1 - 1 / E)`` ms with ``A_1`` drawn in [4, 12] ms at ``p = 1``: a
  device sends the share ``(g - 1) / g`` of its tokens out of its group of ``g = E / p`` devices, so the
  all-to-all shrinks as ``p`` grows and vanishes at ``p = E`` (pure data parallelism, Sec. 4.7.2.1);
* expert FFN: ``F_1 p^beta`` ms with ``F_1`` drawn in [1, 4] ms and ``beta`` in [0, 1] (ours, between two
  readings: ``beta = 0``, a device computes one device's worth of tokens at every ``p``, as
  :func:`optsched.experiments.lina_training.packing_setup` models it; ``beta = 1``, each packed expert
  brings its own tokens, the FFN micro-op growing with ``p`` as in Fig. 4.8b);
* micro-ops: the all-to-all's megabytes (its time at 12.5 GB/s) over the 30 MB partition of Sec. 4.7.1,
  at least 1;
* memory (Sec. 4.7.1: 40 GB A100s): one expert's parameters and optimiser state ``expert_gb`` drawn in
  [4, 10] GB, the rest of the model ``base_gb`` in [10, 24] GB; ``swap_ms`` one layer's expert weights
  (``8 h^2`` fp32 values, ``h`` drawn from 1024, 2048, 4096) at 25 GB/s over PCIe;
* loads: token counts per expert from a multinomial over Dirichlet(2) shares of ``64 E`` tokens (``balanced``:
  none, every expert ``1 / E``).
"""

from __future__ import annotations

import math

import numpy as np

from optsched.core.checks import require_int, require_seed
from optsched.perf.training_packing import PackingCandidate
from optsched.rounds.experts.generate import TESTBED_INTER_NODE_GBPS, lina_cluster
from optsched.rounds.training_packing.problem import TrainingPackingRound

#: Sec. 4.7.1: "a tensor partition size of 30MB"
PARTITION_MB = 30.0
#: host-to-device bandwidth for DRAM offloading, GB/s (ours: PCIe 4.0 x16, about 32 GB/s peak)
PCIE_GBPS = 25.0


def generate_packing_round(experts: int = 16, seed: int = 0, *, balanced: bool = False,
                           offload: bool = True) -> TrainingPackingRound:
    """A random training-packing round (module docstring); ``ValidationError`` names a bad argument."""
    require_int("generate_packing_round", "experts", experts, 1)
    require_int("generate_packing_round", "seed", seed, 0)
    require_seed("generate_packing_round", seed)
    rng = np.random.default_rng(seed)
    a2a_1 = float(rng.uniform(4.0, 12.0))
    ffn_1 = float(rng.uniform(1.0, 4.0))
    beta = float(rng.uniform(0.0, 1.0))
    cands = []
    p = 1
    while p <= experts:
        if experts % p == 0:
            a2a = 0.0 if experts == 1 else round(a2a_1 * (1 - p / experts) / (1 - 1 / experts), 4)
            micro = max(1, math.ceil(a2a * TESTBED_INTER_NODE_GBPS / PARTITION_MB - 1e-9))
            cands.append(PackingCandidate(p, a2a, round(ffn_1 * p ** beta, 4), micro))
        p *= 2
    expert_gb = round(float(rng.uniform(4.0, 10.0)), 3)
    base_gb = round(float(rng.uniform(10.0, 24.0)), 3)
    hidden = int(rng.choice([1024, 2048, 4096]))
    swap_ms = round(8 * hidden ** 2 * 4 / 1e6 / PCIE_GBPS, 4)
    loads = None
    if not balanced:
        counts = rng.multinomial(64 * experts, rng.dirichlet(np.full(experts, 2.0)))
        loads = tuple(float(c) for c in counts) if counts.sum() > 0 else None
    return TrainingPackingRound(cluster=lina_cluster(experts), experts=experts, candidates=tuple(cands),
                                base_gb=base_gb, expert_gb=expert_gb, swap_ms=swap_ms, offload=offload,
                                loads=loads)


__all__ = ["PARTITION_MB", "PCIE_GBPS", "generate_packing_round"]

"""Moe-comm rounds: the Fig. 4.7-shaped example and random backward passes, reproducible from a seed.

Each Transformer block's backward with an MoE layer is, in stream order: the dense layer above it
(whose gradient, a large allreduce bucket, is ready when it ends), a norm, the combine backward, the
first all-to-all, the expert FFN, the second all-to-all, and the gate and attention backward (whose
gradient is a smaller allreduce); the pass ends with the embedding backward and its allreduce.

:func:`fig47_round` is the backward pass of Fig. 4.7 in the shape the text describes (ms on the Lina
testbed's 12.5 GB/s link): gradient ``g_i`` (150 MB, 12 ms alone) is ready 2 ms before the combine
backward, so under fair sharing it prolongs the first all-to-all (45 MB) and under naive priority the
all-to-all waits for all of it; the expert FFN takes 1.6 ms; the gate and attention backward (7 ms)
leave the deferred allreduce a gap before the next MoE layer; two such layers and the embedding
follow. Its numbers are ours (the figure's are not in the text); what it reproduces is the order the
text reports: naive priority slower than the baseline, deferral and micro-ops faster (step time and
end of the computation alike).

:func:`generate_comm_round` draws ``moe_layers`` such blocks: dense 1-3 ms releasing 40-200 MB, norm
0.5-2 ms, combine 0.5-1.5 ms, all-to-alls of 30-120 MB, FFN 0.8-3 ms, gate and attention 3-8 ms
releasing 10-40 MB; embedding 4-8 ms releasing 5-20 MB; on
:func:`~optsched.rounds.experts.generate.lina_cluster` (12.5 GB/s between nodes).
"""

from __future__ import annotations

import numpy as np

from optsched.core.checks import require_int, require_seed
from optsched.rounds.experts.generate import lina_cluster
from optsched.rounds.moe_comm.problem import ALL_TO_ALL, COMPUTE, AllReduce, MoECommRound, StreamOp

#: devices of the generated rounds' cluster (the Lina testbed: 4 nodes of 4 GPUs)
DEVICES = 16


def _layer(tag: str, dense_ms: float, norm_ms: float, combine_ms: float, a2a_mb: float, ffn_ms: float,
           attn_ms: float) -> list[StreamOp]:
    """One Transformer block's backward with an MoE layer: the dense layer above it, a norm, the
    combine backward, the two all-to-alls around the expert FFN, the gate and attention backward."""
    return [StreamOp(f"dense{tag}", COMPUTE, ms=dense_ms), StreamOp(f"norm{tag}", COMPUTE, ms=norm_ms),
            StreamOp(f"combine{tag}", COMPUTE, ms=combine_ms, role="combine"),
            StreamOp(f"a2a{tag}.1", ALL_TO_ALL, mb=a2a_mb), StreamOp(f"ffn{tag}", COMPUTE, ms=ffn_ms, role="ffn"),
            StreamOp(f"a2a{tag}.2", ALL_TO_ALL, mb=a2a_mb), StreamOp(f"attn{tag}", COMPUTE, ms=attn_ms)]


def fig47_round() -> MoECommRound:
    """The Fig. 4.7-shaped backward pass (module docstring)."""
    stream = (_layer("_i", 2.0, 1.0, 1.0, 45.0, 1.6, 7.0) + _layer("_i-1", 2.0, 1.0, 1.0, 45.0, 1.6, 7.0)
              + [StreamOp("embed", COMPUTE, ms=8.0)])
    allreduces = (AllReduce("g_i", 150.0, "dense_i"), AllReduce("g_i-1", 20.0, "attn_i"),
                  AllReduce("g_i-2", 150.0, "dense_i-1"), AllReduce("g_i-3", 20.0, "attn_i-1"),
                  AllReduce("g_embed", 10.0, "embed"))
    return MoECommRound(cluster=lina_cluster(DEVICES), stream=stream, allreduces=allreduces)


def generate_comm_round(moe_layers: int = 2, seed: int = 0) -> MoECommRound:
    """A random backward pass of ``moe_layers`` MoE layers (module docstring)."""
    require_int("generate_comm_round", "moe_layers", moe_layers, 1)
    require_int("generate_comm_round", "seed", seed, 0)
    require_seed("generate_comm_round", seed)
    rng = np.random.default_rng(seed)
    stream: list[StreamOp] = []
    allreduces: list[AllReduce] = []

    def u(lo: float, hi: float) -> float:
        return round(float(rng.uniform(lo, hi)), 3)

    for i in range(moe_layers):
        tag = f"_{i}"
        stream += _layer(tag, u(1, 3), u(0.5, 2), u(0.5, 1.5), u(30, 120), u(0.8, 3), u(3, 8))
        allreduces += [AllReduce(f"g_dense{tag}", u(40, 200), f"dense{tag}"),
                       AllReduce(f"g_attn{tag}", u(10, 40), f"attn{tag}")]
    stream.append(StreamOp("embed", COMPUTE, ms=u(4, 8)))
    allreduces.append(AllReduce("g_embed", u(5, 20), "embed"))
    return MoECommRound(cluster=lina_cluster(DEVICES), stream=tuple(stream), allreduces=tuple(allreduces))


__all__ = ["DEVICES", "fig47_round", "generate_comm_round"]

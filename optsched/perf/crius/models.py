"""The models of Crius Table 2 as operator graphs generated from their shapes: Wide-ResNet (0.5B-6.8B
parameters, global batch 256/512/1024), BERT (0.76B-6.7B, 128/256/512) and GShard MoE (0.69B-27B,
256/512/1024).

Shapes follow the configurations of Alpa's benchmarks, which Crius uses ("The selected models are the
same with state-of-the-art work [8]"):

* **Wide-ResNet-50** (I=224, bottleneck stages [3, 4, 6, 3], 1,024 classes; block ``i`` has
  ``f = C 2^i`` filters, a 1x1 conv to ``f``, a 3x3 conv to ``f W`` and a 1x1 conv to ``4 f``, plus a
  1x1 projection where the shape changes): (C, W) = (224, 2) 0.5B, (320, 2) 1B, (448, 2) 2B, (640, 2)
  4B, (320, 16) 6.8B. Operators: the stem (7x7 conv, pooling), the 16 blocks, the classifier.
* **BERT** (sequence 512, vocabulary 30,522, MLM head tied to the embedding): (hidden, layers, heads) =
  (1536, 24, 16) 0.76B, (2048, 24, 32) 1.3B, (2560, 32, 32) 2.6B, (4096, 32, 32) 6.7B. Operators: the
  embedding, one per transformer layer, the MLM head.
* **GShard MoE** (sequence 1,024, vocabulary 32,000, top-2 routing, every layer a MoE layer with
  experts of FFN width 4 hidden): (hidden, layers, heads, experts) = (768, 8, 16, 16) 0.69B,
  (768, 16, 16, 16) 1.3B, (1024, 16, 16, 16) 2.4B, (1536, 16, 16, 32) 10B, (2048, 16, 32, 48) 27B.
  Operators: the embedding, one per layer, the LM head. Tensor parallelism of an MoE layer splits its
  attention Megatron-style and its experts across ranks (expert parallelism: two all-to-alls in the
  forward and two in the backward pass).

The generated parameter counts are within 7% of the labels (tested). Per-operator numbers (module
docstring of :mod:`optsched.perf.crius.op_graph`): transformer layers by Megatron-LM's counts (forward
FLOPs ``24 s h^2 + 4 s^2 h`` per sample, stored activations ``s h (34 + 5 a s / h)`` bytes of which
``10 s h`` are not split by tensor parallelism), convolutions by ``2 H_out W_out k^2 c_in c_out``.
Every model is taken as trained in mixed precision (fp16 activations, 16 bytes of state a parameter;
Alpa's Wide-ResNet benchmark uses fp32, a choice that would only scale its numbers).

Names: ``<family>-<size>`` (``wresnet-2b``, ``bert-1.3b``, ``moe-27b``) with the family's smallest
Table 2 batch, or ``<family>-<size>@<batch>`` with one of the family's Table 2 batches
(``bert-2.6b@512``). :func:`crius_model` builds (and caches) the graph of a name.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Mapping

from optsched.core.errors import UnknownNameError, ValidationError
from optsched.perf.crius.op_graph import Operator, OperatorGraph

#: Table 2 global batch sizes per family
FAMILY_BATCHES: dict[str, tuple[int, ...]] = {"wresnet": (256, 512, 1024), "bert": (128, 256, 512),
                                              "moe": (256, 512, 1024)}
BYTES = 2  # fp16 activations

BERT_SEQ, BERT_VOCAB = 512, 30522
MOE_SEQ, MOE_VOCAB, MOE_TOP_K = 1024, 32000, 2
WRES_IMAGE, WRES_CLASSES, WRES_STAGES = 224, 1024, (3, 4, 6, 3)


@dataclass(frozen=True)
class ModelShape:
    """A catalogue entry: its family, the parameter count of its label and its shape parameters."""

    family: str
    label_params: float
    shape: tuple[int, ...]


#: base name -> shape (module docstring)
MODEL_SHAPES: dict[str, ModelShape] = {
    "wresnet-0.5b": ModelShape("wresnet", 0.5e9, (224, 2)),
    "wresnet-1b": ModelShape("wresnet", 1.0e9, (320, 2)),
    "wresnet-2b": ModelShape("wresnet", 2.0e9, (448, 2)),
    "wresnet-4b": ModelShape("wresnet", 4.0e9, (640, 2)),
    "wresnet-6.8b": ModelShape("wresnet", 6.8e9, (320, 16)),
    "bert-0.76b": ModelShape("bert", 0.76e9, (1536, 24, 16)),
    "bert-1.3b": ModelShape("bert", 1.3e9, (2048, 24, 32)),
    "bert-2.6b": ModelShape("bert", 2.6e9, (2560, 32, 32)),
    "bert-6.7b": ModelShape("bert", 6.7e9, (4096, 32, 32)),
    "moe-0.69b": ModelShape("moe", 0.69e9, (768, 8, 16, 16)),
    "moe-1.3b": ModelShape("moe", 1.3e9, (768, 16, 16, 16)),
    "moe-2.4b": ModelShape("moe", 2.4e9, (1024, 16, 16, 16)),
    "moe-10b": ModelShape("moe", 10e9, (1536, 16, 16, 32)),
    "moe-27b": ModelShape("moe", 27e9, (2048, 16, 32, 48)),
}


# -- transformers --------------------------------------------------------------------------------
def _embedding(name: str, seq: int, hidden: int, vocab: int) -> Operator:
    """Token + position embedding; vocabulary-parallel under TP (one all-reduce of the output)."""
    return Operator(name, flops=4.0 * seq * hidden, params=float((vocab + seq) * hidden + 2 * hidden),
                    act_replicated_bytes=float(2 * seq * hidden * BYTES), tp_allreduce_bytes=float(seq * hidden * BYTES),
                    tp_allreduces=1, kernels=12)


def _lm_head(name: str, seq: int, hidden: int, vocab: int) -> Operator:
    """Transform + vocabulary projection tied to the embedding + loss (vocabulary-parallel under TP)."""
    return Operator(name, flops=2.0 * seq * hidden * hidden + 2.0 * seq * hidden * vocab,
                    params=float(hidden * hidden + 3 * hidden + vocab),
                    act_bytes=float(seq * vocab * (BYTES + 4)), act_replicated_bytes=float(2 * seq * hidden * BYTES),
                    tp_allreduce_bytes=float(seq * hidden * BYTES), tp_allreduces=2, kernels=30, shardable=0.99)


def _transformer_layer(name: str, seq: int, hidden: int, heads: int) -> Operator:
    """A Megatron-style layer (module docstring)."""
    s, h, a = seq, hidden, heads
    return Operator(name, flops=24.0 * s * h * h + 4.0 * s * s * h, params=float(12 * h * h + 13 * h),
                    act_bytes=float(24 * s * h + 5 * a * s * s), act_replicated_bytes=float(10 * s * h),
                    tp_allreduce_bytes=float(s * h * BYTES), tp_allreduces=4, kernels=45, max_tp=a, shardable=0.98)


def _moe_layer(name: str, seq: int, hidden: int, heads: int, experts: int) -> Operator:
    """Attention + top-2 routed experts of FFN width 4 hidden; TP = attention TP + expert parallelism."""
    s, h, a, e, k = seq, hidden, heads, experts, MOE_TOP_K
    return Operator(name, flops=8.0 * s * h * h + 4.0 * s * s * h + k * 16.0 * s * h * h + 2.0 * s * h * e,
                    params=float(4 * h * h + e * 8 * h * h + h * e + 9 * h + e * 5 * h),
                    act_bytes=float(8 * s * h + k * 16 * s * h + 5 * a * s * s), act_replicated_bytes=float(10 * s * h),
                    tp_allreduce_bytes=float(s * h * BYTES), tp_allreduces=4,
                    tp_alltoall_bytes=float(k * s * h * BYTES), tp_alltoalls=4, kernels=70, max_tp=min(a, e),
                    shardable=0.97)


def _chain(name: str, batch: int, ops: list[Operator], boundary: list[float]) -> OperatorGraph:
    edges = [(ops[i].name, ops[i + 1].name, boundary[i]) for i in range(len(ops) - 1)]
    return OperatorGraph.of(name, batch, ops, edges)


def bert_graph(name: str, batch: int, hidden: int, layers: int, heads: int, seq: int = BERT_SEQ,
               vocab: int = BERT_VOCAB) -> OperatorGraph:
    """BERT of the given shape (module docstring)."""
    ops = [_embedding("embed", seq, hidden, vocab)]
    ops += [_transformer_layer(f"layer{i:02d}", seq, hidden, heads) for i in range(layers)]
    ops.append(_lm_head("head", seq, hidden, vocab))
    return _chain(name, batch, ops, [float(seq * hidden * BYTES)] * (len(ops) - 1))


def moe_graph(name: str, batch: int, hidden: int, layers: int, heads: int, experts: int, seq: int = MOE_SEQ,
              vocab: int = MOE_VOCAB) -> OperatorGraph:
    """GShard MoE of the given shape (module docstring)."""
    ops = [_embedding("embed", seq, hidden, vocab)]
    ops += [_moe_layer(f"layer{i:02d}", seq, hidden, heads, experts) for i in range(layers)]
    ops.append(_lm_head("head", seq, hidden, vocab))
    return _chain(name, batch, ops, [float(seq * hidden * BYTES)] * (len(ops) - 1))


# -- Wide-ResNet ---------------------------------------------------------------------------------
def wide_resnet_graph(name: str, batch: int, channels: int, width: int, image: int = WRES_IMAGE,
                      classes: int = WRES_CLASSES, stages: tuple[int, ...] = WRES_STAGES) -> OperatorGraph:
    """Wide-ResNet-50 with ``channels`` base filters and width factor ``width`` (module docstring)."""
    c = channels
    h1 = image // 2  # after the stride-2 stem conv
    h = h1 // 2      # after max pooling
    stem = Operator("stem", flops=2.0 * h1 * h1 * 49 * 3 * c, params=float(147 * c + 2 * c),
                    act_bytes=float((3 * h1 * h1 * c + h * h * c) * BYTES),
                    act_replicated_bytes=float(image * image * 3 * BYTES),
                    tp_allreduce_bytes=float(h * h * c * BYTES), tp_allreduces=2, kernels=12)
    ops = [stem]
    boundary = []
    cin = c
    for i, n in enumerate(stages):
        f = c * 2 ** i
        for j in range(n):
            stride = 2 if i > 0 and j == 0 else 1
            h_in, h_out = h, h // stride
            proj = cin != 4 * f
            flops = 2.0 * (h_in * h_in * cin * f + h_out * h_out * 9 * f * f * width + h_out * h_out * f * width * 4 * f
                           + (h_out * h_out * cin * 4 * f if proj else 0))
            params = cin * f + 9 * f * f * width + 4 * f * f * width + (cin * 4 * f if proj else 0) \
                + 2 * (f + f * width + 4 * f + (4 * f if proj else 0))
            act = (3 * h_in * h_in * f + 3 * h_out * h_out * f * width + 5 * h_out * h_out * 4 * f
                   + (2 * h_out * h_out * 4 * f if proj else 0)) * BYTES
            boundary.append(float(h * h * cin * BYTES))
            ops.append(Operator(f"block{len(ops) - 1:02d}", flops=flops, params=float(params), act_bytes=float(act),
                                act_replicated_bytes=float(h_in * h_in * cin * BYTES),
                                tp_allreduce_bytes=float(h_out * h_out * 4 * f * BYTES), tp_allreduces=4,
                                kernels=36 + (6 if proj else 0)))
            cin, h = 4 * f, h_out
    boundary.append(float(h * h * cin * BYTES))
    ops.append(Operator("head", flops=2.0 * cin * classes + float(h * h * cin), params=float(cin * classes + classes),
                        act_bytes=float((cin + classes) * BYTES), tp_allreduce_bytes=float(classes * 4),
                        tp_allreduces=2, kernels=12))
    return _chain(name, batch, ops, boundary)


_BUILDERS = {"wresnet": wide_resnet_graph, "bert": bert_graph, "moe": moe_graph}


def parse_model_name(name: str) -> tuple[str, int]:
    """``"bert-2.6b@512"`` -> ``("bert-2.6b", 512)``; without ``@`` the family's smallest Table 2 batch.
    ``UnknownNameError`` for an unknown base name, ``ValidationError`` for a batch not in Table 2."""
    if not isinstance(name, str):
        raise ValidationError(f"Crius model name must be a string, got {name!r}")
    base, at, batch_text = name.partition("@")
    shape = MODEL_SHAPES.get(base)
    if shape is None:
        raise UnknownNameError("Crius model", base, list(MODEL_SHAPES))
    batches = FAMILY_BATCHES[shape.family]
    if not at:
        return base, batches[0]
    if not batch_text.isdigit() or int(batch_text) not in batches:
        raise ValidationError(f"Crius model {name!r}: global batch {batch_text!r} is not one of the "
                              f"{shape.family} batches of Crius Table 2 ({', '.join(map(str, batches))})")
    return base, int(batch_text)


@functools.lru_cache(maxsize=None)
def crius_model(name: str) -> OperatorGraph:
    """The operator graph of catalogue model ``name`` (module docstring for the names), built once."""
    base, batch = parse_model_name(name)
    shape = MODEL_SHAPES[base]
    return _BUILDERS[shape.family](name, batch, *shape.shape)


def resolve_model(name: str, extra: Mapping[str, OperatorGraph] | None = None) -> OperatorGraph:
    """The graph of ``name``: one of ``extra`` (e.g. a round's own models), else a catalogue name
    (``UnknownNameError`` listing both when it is neither)."""
    if extra and name in extra:
        return extra[name]
    try:
        return crius_model(name)
    except UnknownNameError:
        raise UnknownNameError("Crius model", str(name), [*MODEL_SHAPES, *(extra or {})]) from None


def crius_model_names(with_batches: bool = False) -> tuple[str, ...]:
    """Base names of the catalogue, or (``with_batches``) every ``name@batch`` of Table 2."""
    if not with_batches:
        return tuple(MODEL_SHAPES)
    return tuple(f"{b}@{n}" for b, s in MODEL_SHAPES.items() for n in FAMILY_BATCHES[s.family])


__all__ = ["FAMILY_BATCHES", "MODEL_SHAPES", "ModelShape", "bert_graph", "crius_model", "crius_model_names",
           "moe_graph", "parse_model_name", "resolve_model", "wide_resnet_graph"]

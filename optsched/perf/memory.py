"""Per-GPU and host memory of an execution plan (mixed-precision Adam training).

Notation: P = ``model.num_params``, d/t/p = ``plan.dp/tp/pp``, s = ``seq_len``, h = ``hidden``,
A = ``num_heads``, l = ``layers``, mb = ``plan.micro_batch_size(model.global_batch)`` (samples per
forward pass on one GPU), m = ``plan.micro_batches``. Bytes throughout; reported in GiB = 2**30 bytes.

Model states (ZeRO, Rajbhandari et al., SC'20, Sec. 3: 2P fp16 weights + 2P fp16 gradients + 12P fp32
Adam states = master weights, momentum and variance):

* plain DP / GA / GC / 3D (ZeRO off): everything split by TP and PP only:
  weights 2P/(t p), gradients 2P/(t p), optimizer 12P/(t p).
* ZeRO-DP (ZeRO stage 2, P_os+g; t = p = 1): weights 2P, gradients 2P/d, optimizer 12P/d.
* ZeRO-Offload (Ren et al., USENIX ATC'21; stage 2 with the optimizer on the CPU): the fp16 weights 2P
  stay on the GPU; each worker's partition of the fp16 gradients and of the fp32 states lives in host
  memory, ``host_gib_per_gpu`` = (2P + 12P)/d. The GPU gradient term is 0: gradients are reduced and
  streamed to the host bucket by bucket during the backward pass, so only a small bucket (covered by
  the workspace) is ever resident.

Activations (fp16), per transformer layer and micro-batch (Korthikanti et al., "Reducing Activation
Recomputation in Large Transformer Models", 2022, Eq. 2 with TP and no sequence parallelism):
``per_layer = s mb h (10 + 24/t + 5 A s/(h t))`` bytes; the last term (attention scores, softmax
output, attention-dropout mask and output) is dropped for 3D plans, see revision 1 below.

* A GPU holds L = ceil(l/p) layers. Without PP one micro-batch is live at a time (GA runs its
  micro-batches one after another). With PP (1F1B, Narayanan et al., 2021) the first stage keeps
  k = min(m, p) micro-batches in flight; without PP k = 1.
* Without GC: ``k L per_layer``.
* With GC (full checkpointing of every layer, Chen et al., 2016): the 2 s mb h input of each of the
  k L (layer, micro-batch) pairs is stored, plus one layer's full activations while it is recomputed.
  The recomputed layer's own input is part of its full activations (Korthikanti's count includes the
  LayerNorm input), so it is not counted twice: ``2 s mb h (k L - 1) + per_layer``. This is strictly
  below the no-GC value whenever k L > 1 (per_layer >= 10 s mb h > 2 s mb h) and equal when a GPU
  holds a single layer and micro-batch, where checkpointing has nothing to drop.
* Embedding and output-logit activations are not counted.

Workspace: a fixed ``WORKSPACE_GIB`` = 2 GiB per GPU (CUDA context, NCCL and allocator buffers).

Host memory of a configuration (the one rule every table, generator and trace uses): each GPU worker
needs ``HOST_BASE_GIB_PER_GPU`` besides its offloaded model states (:func:`host_gib_per_gpu`); a plan
on g GPUs needs g times that (:func:`config_host_gib`); a node with H GiB hosting n workers has
``H - n HOST_BASE_GIB_PER_GPU`` left for offloaded states (:func:`host_room`).

Properties: GC never raises activation memory; for ZeRO-DP and ZeRO-Offload the per-GPU memory is
non-increasing in d (states shrink as 1/d, mb = b/d shrinks, weights and workspace are constant).

Revisions forced by the measurements. Every plan in ``shared/data/morphling/placements/*.csv`` was
really run on 80 GiB A800s, so the model must accept all of them (357 distinct plan/placement pairs;
the largest estimate is 62.8 GiB, roberta ZeRO-DP on one GPU). Two of the formulas above reject some:

1. Attention scores are kept only by the data-parallel families (DeepSpeed runs on PyTorch 1.12, whose
   attention materialises the A s^2 scores), not by 3D plans (Megatron-DeepSpeed, with fused/flash
   attention, Dao et al., 2022, or Korthikanti's selective recomputation, their Sec. 4.2). With the
   term, the measured LLaMA-2-7B plan ``144`` (tp=4, dp=4, mb=2, s=4096) would need 83.1 GiB. Without
   it for the DP families too, llama7 ZeRO-DP on 4-8 GPUs would fit (e.g. 42.5 GiB at d=8), whereas
   Rubick Table 2 reports LLaMA-2-7B "ZeRO-DP+GA" as OOM and no llama7 ZeRO-DP/GA/GC run was measured.
   ``store_attention_scores=True/False`` overrides the choice.
2. ``plan.gc`` is honoured for every family. Rubick runs ZeRO-Offload with gradient checkpointing
   for the models of 1B parameters and more (Table 2, column "ZeRO-Offload+GC"), and the measured
   ``zero-offload`` rows do not record it, so :func:`optsched.core.parse_plan_code` turns on GC for
   those rows (``offload_gc``). Without GC, llama7 ``zero-offload`` on 1 GPU (mb = 8, s = 4096) would
   need 790.6 GiB per GPU (776 GiB of activations: 32 layers x 24.25 GiB), on 8 GPUs still 111.6 GiB.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from optsched.core.errors import PlanInfeasibleError, ValidationError
from optsched.core.hardware import GPUType
from optsched.core.model import ModelSpec
from optsched.core.plan import ExecutionPlan, ZeroMode

#: Host memory (GiB) one GPU worker needs besides its offloaded model states: the data-loader
#: processes and their prefetch queues, pinned host staging buffers for host-device copies, the Python
#: process and framework. An assumption (no paper gives it), of the order the public A800 cluster's
#: 200 GiB per GPU leaves ample room for.
HOST_BASE_GIB_PER_GPU: float = 8.0

GIB = 2 ** 30
#: fixed per-GPU framework overhead: CUDA context, NCCL and caching-allocator buffers
WORKSPACE_GIB = 2.0
#: bytes per parameter of mixed-precision Adam (ZeRO Sec. 3): fp16 weights, fp16 gradients, fp32 states
WEIGHT_BYTES, GRAD_BYTES, OPTIMIZER_BYTES = 2, 2, 12


@dataclass(frozen=True)
class MemoryEstimate:
    """Memory of one GPU worker, GiB. ``host_gib_per_gpu`` is the host memory of that worker's
    offloaded states (ZeRO-Offload), else 0."""

    weights_gib: float
    gradients_gib: float
    optimizer_gib: float
    activations_gib: float
    workspace_gib: float
    host_gib_per_gpu: float

    @property
    def gpu_gib(self) -> float:
        """Total per-GPU memory: weights + gradients + optimizer + peak activations + workspace."""
        return (self.weights_gib + self.gradients_gib + self.optimizer_gib + self.activations_gib
                + self.workspace_gib)


def require_gpus_per_node(gpus_per_node: Sequence[int],
                          host_mem_gib_per_node: Sequence[float] | None = None) -> tuple[int, ...]:
    """Check a placement's GPU counts (non-empty, positive integers) and, when given, that host memory
    has one non-negative entry per node; returns the counts as a tuple. Raises ``ValidationError``."""
    if isinstance(gpus_per_node, (str, bytes)) or not isinstance(gpus_per_node, Sequence):
        raise ValidationError(f"gpus_per_node must be a tuple of GPU counts, got {gpus_per_node!r}")
    counts = tuple(gpus_per_node)
    if not counts:
        raise ValidationError("gpus_per_node is empty: a placement needs at least one node with GPUs")
    for i, n in enumerate(counts):
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValidationError(
                f"gpus_per_node[{i}] must be a positive integer (GPUs on that node), got {n!r} in {counts}")
    if host_mem_gib_per_node is not None:
        host = tuple(host_mem_gib_per_node)
        if len(host) != len(counts):
            raise ValidationError(
                f"host_mem_gib_per_node has {len(host)} entries but gpus_per_node has {len(counts)} nodes")
        for i, x in enumerate(host):
            if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x < 0:
                raise ValidationError(
                    f"host_mem_gib_per_node[{i}] must be a finite number >= 0, got {x!r}")
    return counts


def stores_attention_scores(plan: ExecutionPlan) -> bool:
    """Revision 1 (module docstring): data-parallel families keep the attention scores, 3D plans not."""
    return not plan.is_3d


def activation_bytes_per_layer(model: ModelSpec, plan: ExecutionPlan, *,
                               store_attention_scores: bool | None = None) -> float:
    """fp16 activations of one layer and one micro-batch on one GPU (Korthikanti et al. 2022, Eq. 2,
    TP without sequence parallelism): ``s mb h (10 + 24/t + 5 A s/(h t))`` bytes, without the last
    term when the attention scores are not stored (default: :func:`stores_attention_scores`)."""
    s, h, t = model.seq_len, model.hidden, plan.tp
    mb = plan.micro_batch_size(model.global_batch)
    factor = 10.0 + 24.0 / t
    if store_attention_scores is None:
        store_attention_scores = stores_attention_scores(plan)
    if store_attention_scores:
        factor += 5.0 * model.num_heads * s / (h * t)
    return s * mb * h * factor


def estimate_memory(model: ModelSpec, plan: ExecutionPlan, *,
                    store_attention_scores: bool | None = None) -> MemoryEstimate:
    """Per-GPU memory of ``plan`` training ``model`` (formulas and assumptions in the module docstring).

    Does not check the plan against the model (batch divisibility etc.; see
    ``optsched.perf.plans.topology_violation``): a non-integral micro-batch size is used as is."""
    P = float(model.num_params)
    d, t, p = plan.dp, plan.tp, plan.pp
    host = 0.0
    if plan.zero is ZeroMode.NONE:
        shards = t * p
        weights, grads, opt = WEIGHT_BYTES * P / shards, GRAD_BYTES * P / shards, OPTIMIZER_BYTES * P / shards
    elif plan.zero is ZeroMode.DP:
        weights, grads, opt = WEIGHT_BYTES * P, GRAD_BYTES * P / d, OPTIMIZER_BYTES * P / d
    else:  # ZeRO-Offload: gradients streamed to the host, fp32 states and the update on the CPU
        weights, grads, opt = WEIGHT_BYTES * P, 0.0, 0.0
        host = (GRAD_BYTES + OPTIMIZER_BYTES) * P / d

    per_layer = activation_bytes_per_layer(model, plan, store_attention_scores=store_attention_scores)
    stored = math.ceil(model.layers / p) * (min(plan.micro_batches, p) if p > 1 else 1)  # k L
    if plan.gc:
        layer_input = 2.0 * model.seq_len * plan.micro_batch_size(model.global_batch) * model.hidden
        activations = layer_input * (stored - 1) + per_layer
    else:
        activations = stored * per_layer
    return MemoryEstimate(weights_gib=weights / GIB, gradients_gib=grads / GIB, optimizer_gib=opt / GIB,
                          activations_gib=activations / GIB, workspace_gib=WORKSPACE_GIB,
                          host_gib_per_gpu=host / GIB)


def memory_violation(model: ModelSpec, plan: ExecutionPlan, gpu_type: GPUType,
                     gpus_per_node: tuple[int, ...],
                     host_mem_gib_per_node: tuple[float, ...] | None = None) -> str | None:
    """``None`` when ``plan`` fits; else why not, naming the model, the plan, the need and the capacity.

    GPU check: ``estimate.gpu_gib <= gpu_type.memory_gib``. Host check (skipped when
    ``host_mem_gib_per_node`` is None): node i hosts ``gpus_per_node[i]`` workers and needs
    ``gpus_per_node[i] * host_gib_per_gpu <= host_mem_gib_per_node[i]``. That the plan uses
    ``sum(gpus_per_node)`` GPUs is a topology rule, checked by ``topology_violation``."""
    counts = require_gpus_per_node(gpus_per_node, host_mem_gib_per_node)
    est = estimate_memory(model, plan)
    who = f"model {model.name!r} plan {plan.label}"
    if est.gpu_gib > gpu_type.memory_gib:
        return (f"{who}: needs {est.gpu_gib:.1f} GiB per GPU, {gpu_type.name} has "
                f"{gpu_type.memory_gib:g} GiB")
    if host_mem_gib_per_node is not None and est.host_gib_per_gpu > 0:
        for i, (n, cap) in enumerate(zip(counts, host_mem_gib_per_node)):
            need = n * est.host_gib_per_gpu
            if need > cap:
                return (f"{who}: node {i} hosts {n} worker(s) needing {n} x {est.host_gib_per_gpu:.1f} = "
                        f"{need:.1f} GiB of host memory for offloaded states, it has {cap:g} GiB")
    return None


def host_gib_per_gpu(model: ModelSpec, plan: ExecutionPlan) -> float:
    """Host memory (GiB) one worker of ``plan`` needs: ``HOST_BASE_GIB_PER_GPU`` plus its share of the
    offloaded model states (module docstring, "Host memory of a configuration")."""
    return HOST_BASE_GIB_PER_GPU + estimate_memory(model, plan).host_gib_per_gpu


@lru_cache(maxsize=1 << 16)
def config_host_gib(model: ModelSpec, plan: ExecutionPlan) -> float:
    """Host memory (GiB) of ``plan`` on all its GPUs: ``plan.num_gpus * host_gib_per_gpu``."""
    return plan.num_gpus * host_gib_per_gpu(model, plan)


def host_room(node_host_gib: float, gpus_per_node: Sequence[int]) -> tuple[float, ...]:
    """Host memory (GiB) left for offloaded states on each node of a placement whose nodes have
    ``node_host_gib`` each: ``node_host_gib - n * HOST_BASE_GIB_PER_GPU`` for n workers (may be < 0)."""
    return tuple(node_host_gib - n * HOST_BASE_GIB_PER_GPU for n in gpus_per_node)


def check_memory(model: ModelSpec, plan: ExecutionPlan, gpu_type: GPUType, gpus_per_node: tuple[int, ...],
                 host_mem_gib_per_node: tuple[float, ...] | None = None) -> MemoryEstimate:
    """The estimate of a plan that fits; raises ``PlanInfeasibleError`` with the reason otherwise."""
    reason = memory_violation(model, plan, gpu_type, gpus_per_node, host_mem_gib_per_node)
    if reason is not None:
        raise PlanInfeasibleError(reason)
    return estimate_memory(model, plan)

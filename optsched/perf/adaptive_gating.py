"""Adaptive gating in MoE language models (thesis Ch. 5, Sec. 5.3): route a token to its top-1 expert,
or to its top-1 and top-2 experts when their gate probabilities are within a threshold ``T``; the
effect on expert loads and MoE layer time; and the ordering and batching of training samples by their
complexity vectors with the per-batch straggler cost it leaves.

**The rule** (:func:`adaptive_route`, Sec. 5.3.1): with gate probabilities ``R = softmax(x W_G)``
(Eq. 5.2) of a token, top-1 expert ``i`` and top-2 expert ``j`` (ties: the lower expert number
first), the token goes to both when ``R_i - R_j <= T`` ("within the threshold T"), else to ``i`` only.
``T = 0`` gives top-1 gating except for exact ties, ``T = 1`` top-2 gating. ``T`` outside ``[0, 1]``
is an error.

**Layer time** (:class:`LayerCost`, Sec. 5.3.2 and Table 5.1). Experts process tokens, attention whole
sequences: a batch waits for the tokens that take two experts. The time of one MoE layer for a batch is
``fixed + per_expert x (1 + max_d r_d)``, where ``r_d`` is the share of sample ``d``'s tokens routed to
two experts at that layer: the batch runs at its most complex sample's pace. ``fixed / per_expert`` is
calibrated so that top-1 gating takes 0.67 of top-2's time (Table 5.1: "Top-1: norm. computation 0.5,
norm. MoE layer running time 0.67"), i.e. ``fixed = per_expert x (0.67 x 2 - 1) / (1 - 0.67)``. With
tokens picked at random (Table 5.1's set-up) the model gives 0.76, 0.86 and 0.95 for 80%, 50% and 20%
top-1 tokens in batches of 16 samples of 128 tokens (the table: 0.76, 0.92, 0.97).

**Complexity vectors and ordering** (Eq. 5.5, Sec. 5.3.2): ``C_d = [r_0^d, ..., r_L^d]`` (per layer,
the share of sample ``d``'s tokens routed to two experts). :func:`curriculum_order` puts first the
sample with the fewest tokens processed by two experts, then the others by decreasing cosine
similarity of their complexity vector to its vector. Where the text is silent: ties of similarity go
to the sample with fewer two-expert tokens, then the lower index; a zero vector (no two-expert token)
has similarity 1 to another zero vector and 0 to any other (cosine is undefined there), so when the
first sample has no two-expert token at all, the other such samples follow it and the rest keep the
tie order (simplest first). :func:`batch_time` charges each consecutive batch of the order the layer
time of its most complex sample; the *straggler cost* of a batch is what that adds over charging every
sample its own complexity.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from optsched.core.checks import require_int, require_number
from optsched.core.errors import UnknownNameError, ValidationError

#: Table 5.1: MoE layer running time of top-1 gating relative to top-2
TOP1_TIME_RATIO = 0.67
#: tolerance of the probability checks
PROB_TOL = 1e-6


def check_threshold(threshold: float) -> float:
    """``threshold`` as a float; ``ValidationError`` unless it is a number in [0, 1]."""
    require_number("adaptive gating", "threshold T", threshold, 0.0)
    if threshold > 1.0:
        raise ValidationError(f"adaptive gating: threshold T must be in [0, 1], got {threshold}")
    return float(threshold)


@dataclass(frozen=True, eq=False)
class GatingDecision:
    """Routing of tokens: ``top1`` and ``top2`` experts (shape of the leading dimensions of the gate
    probabilities) and ``two`` (whether the token also goes to its top-2 expert)."""

    top1: np.ndarray
    top2: np.ndarray
    two: np.ndarray
    num_experts: int

    @property
    def two_share(self) -> float:
        """Share of tokens routed to two experts."""
        return float(self.two.mean()) if self.two.size else 0.0

    @property
    def computation(self) -> float:
        """Expert computation relative to top-2 gating: mean experts per token over 2 (Table 5.1)."""
        return (1.0 + self.two_share) / 2.0


def adaptive_route(probs: np.ndarray, threshold: float) -> GatingDecision:
    """The adaptive rule (module docstring) on gate probabilities ``probs`` (any leading shape, last
    axis the experts; each row non-negative and summing to 1)."""
    return adaptive_routes(probs, (threshold,))[0]


def adaptive_routes(probs: np.ndarray, thresholds: Sequence[float]) -> list[GatingDecision]:
    """:func:`adaptive_route` at each of ``thresholds`` (the probabilities checked and sorted once)."""
    ts = [check_threshold(t) for t in thresholds]
    p = np.asarray(probs, dtype=float)
    if p.ndim < 1 or p.shape[-1] < 2:
        raise ValidationError(f"adaptive gating: top-2 needs at least 2 experts, got gate probabilities of shape "
                              f"{p.shape} (top-k 2 is larger than the number of experts)")
    flat = p.reshape(-1, p.shape[-1])
    bad = np.flatnonzero(~np.all(np.isfinite(flat), axis=1) | np.any(flat < -PROB_TOL, axis=1)
                         | (np.abs(flat.sum(axis=1) - 1.0) > PROB_TOL))
    if bad.size:
        raise ValidationError(f"adaptive gating: gate probabilities of token {int(bad[0])} (row-major order) must "
                              f"be finite, >= 0 and sum to 1, got sum {flat[bad[0]].sum():.6g}")
    order = np.argsort(-flat, axis=1, kind="stable")[:, :2]
    rows = np.arange(flat.shape[0])
    gap = flat[rows, order[:, 0]] - flat[rows, order[:, 1]]
    shape = p.shape[:-1]
    top1, top2 = order[:, 0].reshape(shape), order[:, 1].reshape(shape)
    return [GatingDecision(top1, top2, (gap <= t).reshape(shape), p.shape[-1]) for t in ts]


def expert_loads(decision: GatingDecision) -> np.ndarray:
    """Tokens each expert receives (top-1 choices plus the top-2 choices of two-expert tokens)."""
    e = decision.num_experts
    return (np.bincount(decision.top1.ravel(), minlength=e)
            + np.bincount(decision.top2[decision.two].ravel(), minlength=e)).astype(np.int64)


#: the tokens whose dispatch Eq. 5.4's ``f_e^1`` counts (:func:`balance_loss`)
BALANCE_AMONG = ("single", "all")


def balance_loss(probs: np.ndarray, decision: GatingDecision, among: str = "single") -> float:
    """Adaptive gating's load-balancing loss of one MoE layer, Eq. 5.4 (thesis Sec. 5.3.1): "we impose the soft
    load balancing constraints on the top-1 gating decisions, while allowing top-2 gating decisions to be trained
    without any soft constraints. That is, the loss of each MoE layer i becomes: L_i = E_i sum_e f_e^1 p_e, where
    f_e^1 is the fraction of tokens dispatched to expert e among those processed by top-1 gating; p_e is the
    average gating probability to expert e over all tokens in the current batch, and E_i is the number of experts
    at layer i just as in classical MoE [37]."

    ``probs``: the layer's gate probabilities (tokens on the leading axes, experts last, as for
    :func:`adaptive_route`); ``decision``: their routing. "Those processed by top-1 gating" is read, by default
    (``among="single"``), as the tokens adaptive gating sends to one expert only; ``among="all"`` reads it as every
    token's top-1 choice (with every token routed to one expert the two agree, and the loss is the classical one of
    [37]). 1.0 when the counted tokens and the probabilities are both uniform over the experts; 0.0 when no token
    is counted. The project trains no model: this scores a gate's routing (a trace's or a synthetic one's)."""
    if among not in BALANCE_AMONG:
        raise UnknownNameError("balance loss tokens (among)", str(among), BALANCE_AMONG)
    p = np.asarray(probs, dtype=float)
    if p.shape[:-1] != decision.top1.shape or p.shape[-1] != decision.num_experts:
        raise ValidationError(f"balance loss: gate probabilities of shape {p.shape} do not match the decision of "
                              f"{decision.top1.shape} tokens and {decision.num_experts} experts")
    e = decision.num_experts
    counted = decision.top1[~decision.two] if among == "single" else decision.top1.ravel()
    if counted.size == 0:
        return 0.0
    f = np.bincount(counted.ravel(), minlength=e) / counted.size
    mean_p = p.reshape(-1, e).mean(axis=0)
    return float(e * np.dot(f, mean_p))


@dataclass(frozen=True)
class LayerCost:
    """The layer-time model of the module docstring: ``fixed_ms + per_expert_ms x (1 + max r)`` per
    batch and layer. :meth:`calibrated` sets ``fixed_ms`` from Table 5.1."""

    per_expert_ms: float = 1.0
    fixed_ms: float = (2 * TOP1_TIME_RATIO - 1) / (1 - TOP1_TIME_RATIO)

    def __post_init__(self) -> None:
        require_number("layer cost", "per_expert_ms", self.per_expert_ms, 0.0, strict=True)
        require_number("layer cost", "fixed_ms", self.fixed_ms, 0.0)

    @classmethod
    def calibrated(cls, per_expert_ms: float = 1.0, top1_ratio: float = TOP1_TIME_RATIO) -> "LayerCost":
        """The model whose top-1 time is ``top1_ratio`` of its top-2 time."""
        require_number("layer cost", "top1_ratio", top1_ratio, 0.5, strict=True)
        if top1_ratio >= 1.0:
            raise ValidationError(f"layer cost: top1_ratio must be below 1, got {top1_ratio}")
        return cls(per_expert_ms, per_expert_ms * (2 * top1_ratio - 1) / (1 - top1_ratio))

    def time(self, r: np.ndarray) -> np.ndarray:
        """Layer time for two-expert shares ``r`` (the batch's largest, per layer)."""
        return self.fixed_ms + self.per_expert_ms * (1.0 + np.asarray(r, dtype=float))

    @property
    def top2_ms(self) -> float:
        return float(self.time(np.array(1.0)))


def complexity_vectors(two: np.ndarray, lengths: np.ndarray | None = None) -> np.ndarray:
    """Eq. 5.5: per sample and layer, the share of the sample's tokens routed to two experts. ``two``:
    (samples, tokens, layers) booleans, padded along tokens; ``lengths``: each sample's tokens (default
    all)."""
    t = np.asarray(two, dtype=bool)
    if t.ndim != 3 or t.shape[1] < 1:
        raise ValidationError(f"complexity vectors: expected (samples, tokens, layers), got shape {t.shape}")
    n = np.full(t.shape[0], t.shape[1]) if lengths is None else np.asarray(lengths)
    if n.shape != (t.shape[0],) or np.any(n < 1) or np.any(n > t.shape[1]):
        raise ValidationError(f"complexity vectors: lengths must be 1..{t.shape[1]} per sample, one per sample")
    mask = np.arange(t.shape[1])[None, :] < n[:, None]
    return (t & mask[:, :, None]).sum(axis=1) / n[:, None]


def _similarity(c: np.ndarray, anchor: np.ndarray) -> np.ndarray:
    """Cosine similarity of each row of ``c`` to ``anchor`` with the zero-vector rule (module docstring)."""
    na, nc = np.linalg.norm(anchor), np.linalg.norm(c, axis=1)
    if na == 0:
        return (nc == 0).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(nc == 0, 0.0, c @ anchor / (nc * na))


def curriculum_order(vectors: np.ndarray, lengths: np.ndarray | None = None) -> np.ndarray:
    """Sample order of Sec. 5.3.2 (module docstring) from complexity vectors (samples x layers) and the
    samples' token counts (default: equal)."""
    c = np.asarray(vectors, dtype=float)
    if c.ndim != 2 or c.shape[0] < 1:
        raise ValidationError(f"curriculum order: expected complexity vectors (samples, layers), got {c.shape}")
    n = np.ones(c.shape[0]) if lengths is None else np.asarray(lengths, dtype=float)
    count = c.sum(axis=1) * n  # two-expert tokens (summed over layers)
    anchor = int(np.lexsort((np.arange(c.shape[0]), count))[0])
    sim = _similarity(c, c[anchor])
    sim[anchor] = np.inf
    return np.lexsort((np.arange(c.shape[0]), count, -sim))


def batch_time(vectors: np.ndarray, order: np.ndarray, batch_size: int, cost: LayerCost) -> tuple[float, float]:
    """(time, straggler cost) of the batches of ``batch_size`` consecutive samples of ``order`` (the
    last may be smaller): each batch and layer takes :meth:`LayerCost.time` of its largest two-expert
    share; the straggler cost is that total less the time of charging every sample its own share
    (weighted by its part of the batch)."""
    require_int("batch time", "batch_size", batch_size, 1)
    c = np.asarray(vectors, dtype=float)[np.asarray(order)]
    total = strag = 0.0
    for s in range(0, c.shape[0], batch_size):
        b = c[s: s + batch_size]
        worst = cost.time(b.max(axis=0)).sum()
        total += worst
        strag += worst - cost.time(b).mean(axis=0).sum()
    return float(total), float(strag)


def layer_factors(layers: int, seed: int) -> np.ndarray:
    """The per-layer factors ``exp(0.2 N(0, 1))`` of :func:`synthetic_gate_probs`, drawn from ``seed``
    on their own (one model's layers, shared by every chunk of samples drawn from it)."""
    require_int("synthetic gate probabilities", "layers", layers, 1)
    require_int("synthetic gate probabilities", "seed", seed, 0)
    return np.exp(0.2 * np.random.default_rng(seed).standard_normal(layers))


def synthetic_gate_probs(samples: int, tokens: int, layers: int, experts: int, seed: int, *,
                         sharpness: float = 2.5, spread: float = 0.6,
                         layer_factor: np.ndarray | None = None) -> np.ndarray:
    """Gate probabilities (samples x tokens x layers x experts) drawn from ``seed``: softmax of normal
    logits scaled by a per-sample sharpness ``sharpness x exp(spread x N(0, 1))`` (samples differ in
    how clearly their tokens prefer one expert, the premise of Sec. 5.3.2), times a per-layer factor
    ``exp(0.2 N(0, 1))`` (or ``layer_factor``, one positive number per layer, e.g. :func:`layer_factors`,
    so that samples drawn in chunks share their model's layers)."""
    for name, value in (("samples", samples), ("tokens", tokens), ("layers", layers), ("seed", seed)):
        require_int("synthetic gate probabilities", name, value, 0 if name == "seed" else 1)
    require_int("synthetic gate probabilities", "experts", experts, 2)
    require_number("synthetic gate probabilities", "sharpness", sharpness, 0.0, strict=True)
    require_number("synthetic gate probabilities", "spread", spread, 0.0)
    rng = np.random.default_rng(seed)
    scale = sharpness * np.exp(spread * rng.standard_normal(samples))[:, None, None, None]
    if layer_factor is None:
        factor = np.exp(0.2 * rng.standard_normal(layers))
    else:
        factor = np.asarray(layer_factor, dtype=float)
        if factor.shape != (layers,) or not np.all(np.isfinite(factor)) or np.any(factor <= 0):
            raise ValidationError(f"synthetic gate probabilities: layer_factor must be {layers} positive numbers "
                                  f"(one per layer), got shape {factor.shape}")
    scale = scale * factor[None, None, :, None]
    logits = scale * rng.standard_normal((samples, tokens, layers, experts))
    logits -= logits.max(axis=-1, keepdims=True)
    p = np.exp(logits)
    return p / p.sum(axis=-1, keepdims=True)


__all__ = ["BALANCE_AMONG", "GatingDecision", "LayerCost", "PROB_TOL", "TOP1_TIME_RATIO", "adaptive_route",
           "adaptive_routes", "balance_loss", "batch_time", "check_threshold", "complexity_vectors", "curriculum_order",
           "expert_loads", "layer_factors", "synthetic_gate_probs"]

"""Expert routing of mixture-of-experts (MoE) models: which expert(s) each token chose at each MoE
layer (thesis Ch. 4, Lina, Sec. 4.2.2 and 4.5.2), as recorded routing read from a CSV file or drawn
from a seeded synthetic generator.

**The value.** :class:`RoutingTrace` holds ``choices[t, i, r]``, the expert token ``t`` chose at MoE
layer ``i`` with rank ``r`` (rank 0 is the top-1 expert; ``k`` ranks for top-k gating), and the batch
of every token. Experts are numbered ``0 .. num_experts - 1``, layers ``0 .. num_layers - 1``.

**The CSV format** (:func:`read_routing_csv`, :func:`write_routing_csv`): a header and one row per
token, layer and rank::

    batch,token,layer,expert,rank
    0,0,0,5,0
    0,0,1,5,0
    ...

``batch`` (integer >= 0) and ``token`` (integer >= 0, unique within its batch) name the token;
``layer`` and ``expert`` are integers in ``[0, num_layers)`` and ``[0, num_experts)`` of the model,
which the reader is told (a file cannot say which experts exist); ``rank`` is optional (default 0,
top-1). Every token has exactly one row per layer and rank ``0 .. k-1`` (``k`` = the largest rank + 1
in the file), and a token's experts at one layer are distinct. Column order is free, extra columns
are ignored, blank lines are skipped. A broken file raises ``ValidationError`` naming the file, the
row (1 = first data row) and line, and the rule; rows may come in any order.

**The synthetic generator** (:class:`SyntheticRouter`) reproduces the two properties Lina's
scheduler works with:

* *skewed popularity* (Sec. 4.2.2, Fig. 4.6: the most popular expert receives 4-5.6x the tokens of the
  least popular one in inference): the first layer's expert distribution of every batch is drawn from a
  Dirichlet distribution around Zipf weights ``rank ** -skew`` (default 0.6: 16 ** 0.6 = 5.3x) on a random
  order of the experts;
* *layer correlation* (Sec. 4.5.2, Fig. 4.9: of the tokens that chose the same expert at layer i,
  41.94% choose that group's most frequent expert at layer i+1, 54.59% one of its two most frequent
  ones): each layer's top-1 expert follows a Markov chain whose row for expert ``e`` puts mass
  ``keep_top1`` on a successor ``s1(e)`` (a random permutation), ``keep_top2 - keep_top1`` on a
  second successor ``s2(e)`` and spreads the rest over a Zipf distribution of the next layer. Each
  row is solved so that its largest entry is ``keep_top1`` and its two largest sum to ``keep_top2``
  (when the next layer's Zipf weights allow it: with <= 4 experts a row's background mass may
  outgrow the second successor), so the paper's statistic, averaged over groups, is met in
  expectation (:func:`group_keep_ratio` measures it).

Lower ranks of top-k gating are drawn from the same row without replacement (Gumbel top-k). A profiling
trace and an inference trace of one "model" come from one router with two seeds. Randomness only
through ``numpy.random.Generator``.

The first-order chain has no memory: a path's next expert depends on its last expert only, so a longer
profiled path cannot estimate better (the thesis's Table 4.5 says it does), and the background mass of
every row is the same Zipf distribution, which Lina's top-1 estimate never sees (issue 27: the
estimated top-2 met the actual one in 3-6% of layers). :class:`SyntheticRouter` stays the source of the
``experts`` rounds (:func:`optsched.rounds.experts.generate.generate_experts_round`, ``gen-round --kind
experts``) and of the packing study of ``benchmarks/moe.py``, whose numbers and fingerprints it fixes.

**The path-dependent generator** (:class:`TypedRouter`, the estimation study's router): every token has
a fixed hidden type, and each layer sends a type to its own preferred expert (a balanced map drawn per
layer), to a second expert, or uniformly at random; the path so far tells the type, so it predicts the
next expert without that being the current one. Its defaults meet Fig. 4.9 and Fig. 4.6 as above.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from optsched.core.checks import require_int, require_number
from optsched.core.csvio import open_csv
from optsched.core.errors import ValidationError

#: Sec. 4.5.2, Fig. 4.9: share of a group's tokens keeping the group's top-1 / top-2 next experts
KEEP_TOP1 = 0.4194
KEEP_TOP2 = 0.5459
#: Zipf exponent of expert popularity (16 experts: the most popular gets 5.3x the least, Fig. 4.6)
DEFAULT_SKEW = 0.6
#: tokens x experts of the Gumbel keys :meth:`SyntheticRouter.sample` draws at once (3 arrays of 32 MiB; drawn
#: whole, 1,000,000 tokens of 1,024 experts took more than 24 GB)
SAMPLE_CELLS = 1 << 22
#: Dirichlet concentration (times the number of experts) of a batch's first-layer distribution
BATCH_CONCENTRATION = 4.0

CSV_COLUMNS = ("batch", "token", "layer", "expert", "rank")


def _require_sample(owner: str, batches: int, tokens_per_batch: int, seed: int, top_k: int, num_experts: int) -> None:
    """The arguments of a router's ``sample``: positive batches and tokens, a seed >= 0, a top-k of the experts."""
    require_int(owner, "batches", batches, 1)
    require_int(owner, "tokens_per_batch", tokens_per_batch, 1)
    require_int(owner, "seed", seed, 0)
    _require_top_k(owner, top_k, num_experts)


def _require_top_k(owner: str, k: int, num_experts: int) -> None:
    require_int(owner, "top-k", k, 1)
    if k > num_experts:
        raise ValidationError(f"{owner}: top-k {k} is larger than the number of experts ({num_experts})")


def _first_duplicate(choices: np.ndarray) -> tuple[int, int, int] | None:
    """(token, layer, expert) of the first token choosing one expert at two ranks of a layer, or None."""
    if choices.shape[2] < 2:
        return None
    s = np.sort(choices, axis=2)
    dup = np.argwhere(s[:, :, 1:] == s[:, :, :-1])
    if not dup.size:
        return None
    t, i, r = map(int, dup[0])
    return t, i, int(s[t, i, r])


@dataclass(frozen=True, eq=False)
class RoutingTrace:
    """Recorded or generated routing (module docstring): ``choices`` (int, shape tokens x layers x k),
    ``batch`` (int, one per token) and ``num_experts``. Checked when built: experts in range, distinct
    experts per token and layer, batches >= 0."""

    choices: np.ndarray
    batch: np.ndarray
    num_experts: int

    def __post_init__(self) -> None:
        require_int("routing", "num_experts", self.num_experts, 1)
        c = np.asarray(self.choices)
        if c.ndim == 2:
            c = c[:, :, None]
        if c.ndim != 3 or c.shape[1] < 1 or c.shape[2] < 1 or not np.issubdtype(c.dtype, np.integer):
            raise ValidationError(f"routing: choices must be an integer array of shape (tokens, layers, k), got "
                                  f"shape {c.shape} of {c.dtype}")
        b = np.asarray(self.batch)
        if b.shape != (c.shape[0],) or (b.size and not np.issubdtype(b.dtype, np.integer)):
            raise ValidationError(f"routing: batch must hold one integer per token ({c.shape[0]}), got shape {b.shape}")
        _require_top_k("routing", c.shape[2], self.num_experts)
        if c.size and (c.min() < 0 or c.max() >= self.num_experts):
            bad = int(c[(c < 0) | (c >= self.num_experts)][0])
            raise ValidationError(f"routing: expert {bad} does not exist (the model has {self.num_experts} experts, "
                                  f"0-{self.num_experts - 1})")
        if b.size and b.min() < 0:
            raise ValidationError("routing: batch numbers must be >= 0")
        dup = _first_duplicate(c)
        if dup is not None:
            t, i, e = dup
            raise ValidationError(f"routing: token {t} chose expert {e} twice at layer {i}")
        object.__setattr__(self, "choices", c.astype(np.int64, copy=False))
        object.__setattr__(self, "batch", b.astype(np.int64, copy=False))

    @property
    def num_tokens(self) -> int:
        return int(self.choices.shape[0])

    @property
    def num_layers(self) -> int:
        return int(self.choices.shape[1])

    @property
    def top_k(self) -> int:
        return int(self.choices.shape[2])

    @property
    def top1(self) -> np.ndarray:
        """The top-1 expert of every token at every layer (tokens x layers)."""
        return self.choices[:, :, 0]

    def batches(self) -> list[np.ndarray]:
        """Token indices of each batch, in batch order (empty batches omitted)."""
        order = np.argsort(self.batch, kind="stable")
        ids, starts = np.unique(self.batch[order], return_index=True)
        return np.split(order, starts[1:]) if ids.size else []

    def loads(self, layer: int, tokens: np.ndarray | None = None, ranks: int | None = None) -> np.ndarray:
        """Tokens each expert receives at ``layer`` (from ``tokens``, default all; counting ranks
        ``0 .. ranks-1``, default all), as an int array of length ``num_experts``."""
        if not 0 <= layer < self.num_layers:
            raise ValidationError(f"routing: layer {layer} does not exist (the model has {self.num_layers} layers)")
        c = self.choices[:, layer, : self.top_k if ranks is None else ranks]
        if tokens is not None:
            c = c[tokens]
        return np.bincount(c.ravel(), minlength=self.num_experts).astype(np.int64)

    def subset(self, tokens: np.ndarray) -> "RoutingTrace":
        """The trace of ``tokens`` only."""
        return RoutingTrace(self.choices[tokens], self.batch[tokens], self.num_experts)


def group_keep_ratio(trace: RoutingTrace, k: int) -> float:
    """The statistic of Sec. 4.5.2 / Fig. 4.9 on top-1 choices: for each group of tokens that chose the
    same expert at layer i, the share of them whose layer-(i+1) expert is among the group's ``k`` most
    frequent layer-(i+1) experts; averaged over groups (unweighted) and layer pairs."""
    _require_top_k("group_keep_ratio", k, trace.num_experts)
    top1, E = trace.top1, trace.num_experts
    ratios: list[float] = []
    for i in range(trace.num_layers - 1):
        counts = np.zeros((E, E), dtype=np.int64)
        np.add.at(counts, (top1[:, i], top1[:, i + 1]), 1)
        sizes = counts.sum(axis=1)
        kept = np.sort(counts, axis=1)[:, ::-1][:, :k].sum(axis=1)
        ratios.extend((kept[sizes > 0] / sizes[sizes > 0]).tolist())
    return float(np.mean(ratios)) if ratios else float("nan")


def zipf_weights(n: int, skew: float, rng: np.random.Generator) -> np.ndarray:
    """Weights ``rank ** -skew`` (normalised) on a random order of ``n`` items."""
    w = np.arange(1, n + 1, dtype=float) ** -skew
    return (w / w.sum())[rng.permutation(n)]


def _transition(rng: np.random.Generator, n: int, skew: float, keep1: float, keep2: float) -> np.ndarray:
    """One layer's Markov rows (module docstring): row e = p1 [s1(e)] + p2 [s2(e)] + r q, with the row's
    top entry ``keep1`` and top two ``keep2`` where the background ``q`` allows."""
    q = zipf_weights(n, skew, rng)
    s1 = rng.permutation(n)
    s2 = (s1 + 1 + rng.integers(0, n - 1, size=n)) % n if n > 1 else s1
    rows = np.empty((n, n))
    for e in range(n):
        a, b = q[s1[e]], (q[s2[e]] if n > 1 else 0.0)
        r = min(1.0, (1.0 - keep2) / max(1.0 - a - b, 1e-12))
        p1 = max(0.0, keep1 - r * a)
        p2 = max(0.0, 1.0 - r - p1)
        row = r * q
        row[s1[e]] += p1
        if n > 1:
            row[s2[e]] += p2
        rows[e] = row / row.sum()
    return rows


@dataclass(frozen=True, eq=False)
class SyntheticRouter:
    """A synthetic MoE "model" (module docstring): ``first`` (the base first-layer distribution over
    experts) and ``transitions`` (layers-1 row-stochastic matrices). :meth:`create` draws one,
    :meth:`sample` draws routing traces from it."""

    first: np.ndarray
    transitions: np.ndarray
    concentration: float = BATCH_CONCENTRATION
    _log: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        with np.errstate(divide="ignore"):
            object.__setattr__(self, "_log", np.log(self.transitions))

    @property
    def num_experts(self) -> int:
        return int(self.first.size)

    @property
    def num_layers(self) -> int:
        return int(self.transitions.shape[0]) + 1

    @classmethod
    def create(cls, num_experts: int = 16, num_layers: int = 12, seed: int = 0, *, skew: float = DEFAULT_SKEW,
               keep_top1: float = KEEP_TOP1, keep_top2: float = KEEP_TOP2,
               concentration: float = BATCH_CONCENTRATION) -> "SyntheticRouter":
        """A router of ``num_experts`` experts and ``num_layers`` MoE layers drawn from ``seed``.
        ``ValidationError`` names a bad argument (keep ratios must satisfy 0 < top1 <= top2 <= 1)."""
        owner = "synthetic routing"
        require_int(owner, "num_experts", num_experts, 1)
        require_int(owner, "num_layers", num_layers, 1)
        require_int(owner, "seed", seed, 0)
        require_number(owner, "skew", skew, 0.0)
        require_number(owner, "concentration", concentration, 0.0, strict=True)
        require_number(owner, "keep_top1", keep_top1, 0.0, strict=True)
        require_number(owner, "keep_top2", keep_top2, 0.0)
        if not keep_top1 <= keep_top2 <= 1.0:
            raise ValidationError(f"{owner}: keep ratios must satisfy keep_top1 <= keep_top2 <= 1, got "
                                  f"{keep_top1} and {keep_top2}")
        rng = np.random.default_rng(seed)
        first = zipf_weights(num_experts, skew, rng)
        trans = np.stack([_transition(rng, num_experts, skew, keep_top1, keep_top2)
                          for _ in range(num_layers - 1)]) if num_layers > 1 else np.zeros((0, num_experts, num_experts))
        return cls(first, trans, concentration)

    def sample(self, batches: int, tokens_per_batch: int, seed: int, *, top_k: int = 1) -> RoutingTrace:
        """``batches`` batches of ``tokens_per_batch`` tokens routed with top-``top_k`` gating, drawn from
        ``seed``: per batch a first-layer distribution ~ Dirichlet(concentration x E x ``first``), then
        the chain (module docstring)."""
        _require_sample("synthetic routing", batches, tokens_per_batch, seed, top_k, self.num_experts)
        rng = np.random.default_rng(seed)
        E, n = self.num_experts, batches * tokens_per_batch
        alpha = self.concentration * E * self.first
        pi0 = rng.dirichlet(alpha, size=batches)
        batch = np.repeat(np.arange(batches, dtype=np.int64), tokens_per_batch)
        choices = np.empty((n, self.num_layers, top_k), dtype=np.int64)
        log_first = np.log(np.maximum(pi0, 1e-300))
        step = max(1, SAMPLE_CELLS // E)  # tokens per chunk: the same draws in the same order, in bounded memory
        for i in range(self.num_layers):
            for lo in range(0, n, step):
                hi = min(n, lo + step)
                logp = log_first[batch[lo:hi]] if i == 0 else self._log[i - 1][choices[lo:hi, i - 1, 0]]
                keys = logp + rng.gumbel(size=(hi - lo, E))
                if top_k == 1:  # the first of the largest keys, as the stable sort's first
                    choices[lo:hi, i, 0] = np.argmax(keys, axis=1)
                else:
                    choices[lo:hi, i, :] = np.argsort(-keys, axis=1, kind="stable")[:, :top_k]
        return RoutingTrace(choices, batch, E)


#: Sec. 4.5.2: the share of one group's tokens the path-dependent router sends to their type's expert
#: (:class:`TypedRouter`); set with :data:`SECOND`, :data:`TYPES_PER_EXPERT` and :data:`TYPE_SKEW` by a grid
#: (types per expert 1-4, fidelity 0.5-0.8, second 0-0.2, skew 0.4-1.0; 16 experts, 12 layers, 2 seeds) on the
#: statistics the thesis describes, never on its estimation results: :func:`group_keep_ratio` 41.94% / 54.59%
#: (Fig. 4.9) and a batch's most popular expert at 4-5.6x the tokens of the least popular (Fig. 4.6)
FIDELITY = 0.63
#: token types per expert of :class:`TypedRouter` (each layer maps that many types to every expert)
TYPES_PER_EXPERT = 1
#: the share of a type's tokens the :class:`TypedRouter` sends to its type's second expert
SECOND = 0.13
#: Zipf exponent of the token types' frequencies of :class:`TypedRouter`
TYPE_SKEW = 0.55


@dataclass(frozen=True, eq=False)
class TypedRouter:
    """A path-dependent synthetic MoE "model" (thesis Sec. 4.5.2): "the gating network ... makes its
    routing decision (largely) based on relatively simple features, such as the parts of speech of a word
    ... These features are fixed for each token."

    Every token has a fixed hidden *type* ``c`` (``num_types`` of them, frequencies ``type_weights``).
    At layer ``i`` the gate sends it, with probability ``fidelity``, to its type's expert
    ``preferred[i, c]``, and otherwise to an expert drawn uniformly (which may be the preferred one
    again); lower ranks of top-k gating are drawn from the same row without replacement (Gumbel top-k,
    as :class:`SyntheticRouter`). Each layer's map ``preferred[i]`` is balanced (every expert is the
    preferred expert of ``num_types / num_experts`` types) and drawn independently of the other layers,
    so:

    * *the path predicts the next expert*: the experts a token chose so far narrow down its type, and
      a longer path narrows it further (why the thesis's estimate improves with the path length,
      Table 4.5): with one type per expert (the default) a layer's expert names the type unless the
      token strayed there (``1 - fidelity`` of the time), which the other layers of a longer path outvote;
    * *the next expert is not the current one*: a type's preferred expert at layer ``i+1`` equals its
      preferred expert at layer ``i`` with probability ``1 / num_experts`` (independent uniform maps),
      so the most likely next expert of a path is the current expert in about ``1/E`` of the paths (the
      expert numbers of two layers name different FFNs; Table 4.2: "each MoE layer ... has completely
      different popular experts");
    * *skewed popularity*: type frequencies follow Zipf weights ``rank ** -type_skew``, and each batch
      draws its own type mix from Dirichlet(``concentration`` x types x ``type_weights``) ("the expert
      popularity distribution varies across sequences", Sec. 4.5.1).

    :meth:`create` draws the maps from a seed; the constructor takes them as given (deterministic
    routing for tests: ``fidelity`` 1 and every path naming one type)."""

    type_weights: np.ndarray
    preferred: np.ndarray
    num_experts: int
    fidelity: float = FIDELITY
    second: float = SECOND
    secondary: np.ndarray | None = None
    concentration: float = BATCH_CONCENTRATION

    def __post_init__(self) -> None:
        owner = "typed routing"
        require_int(owner, "num_experts", self.num_experts, 1)
        require_number(owner, "fidelity", self.fidelity, 0.0)
        require_number(owner, "second", self.second, 0.0)
        if self.fidelity + self.second > 1.0:
            raise ValidationError(f"{owner}: fidelity + second must be at most 1, got {self.fidelity} + {self.second}")
        require_number(owner, "concentration", self.concentration, 0.0, strict=True)
        w = np.asarray(self.type_weights, dtype=float)
        if w.ndim != 1 or w.size < 1 or not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
            raise ValidationError(f"{owner}: type_weights must be a non-empty vector of finite numbers >= 0 with a "
                                  f"positive sum")
        pref = np.asarray(self.preferred)
        if pref.ndim != 2 or pref.shape[0] < 1 or pref.shape[1] != w.size or not np.issubdtype(pref.dtype, np.integer):
            raise ValidationError(f"{owner}: preferred must be an integer array of shape (layers, types={w.size}), "
                                  f"got shape {pref.shape}")
        if pref.min() < 0 or pref.max() >= self.num_experts:
            raise ValidationError(f"{owner}: preferred expert {int(pref[(pref < 0) | (pref >= self.num_experts)][0])} "
                                  f"does not exist (the model has {self.num_experts} experts)")
        sec = pref if self.secondary is None else np.asarray(self.secondary)
        if sec.shape != pref.shape or not np.issubdtype(sec.dtype, np.integer) or sec.min() < 0 \
                or sec.max() >= self.num_experts:
            raise ValidationError(f"{owner}: secondary must be an integer array of experts of shape {pref.shape}")
        if self.second > 0 and self.num_experts > 1 and np.any(sec == pref):
            raise ValidationError(f"{owner}: a type's secondary expert must differ from its preferred one (second > 0)")
        object.__setattr__(self, "type_weights", w / w.sum())
        object.__setattr__(self, "preferred", pref.astype(np.int64))
        object.__setattr__(self, "secondary", sec.astype(np.int64))

    @property
    def num_layers(self) -> int:
        return int(self.preferred.shape[0])

    @property
    def num_types(self) -> int:
        return int(self.type_weights.size)

    @classmethod
    def create(cls, num_experts: int = 16, num_layers: int = 12, seed: int = 0, *,
               types_per_expert: int = TYPES_PER_EXPERT, type_skew: float = TYPE_SKEW, fidelity: float = FIDELITY,
               second: float = SECOND, concentration: float = BATCH_CONCENTRATION) -> "TypedRouter":
        """A router of ``num_experts`` experts, ``num_layers`` MoE layers and ``types_per_expert x
        num_experts`` token types drawn from ``seed`` (class docstring).

        The defaults are set from the routing statistics the thesis describes, not from its estimation
        results (:data:`FIDELITY`): with 12 and 16 experts, 12 layers, seeds 0-2, :func:`group_keep_ratio`
        is 0.41-0.43 / 0.54-0.57 for k = 1 / 2 (Fig. 4.9: 41.94% / 54.59%) and a batch's most popular
        expert receives 4.4-6.5x the tokens of the least popular at the first layer (Fig. 4.6: 4.02x and
        5.56x; tests/perf/test_moe_routing.py checks both)."""
        owner = "typed routing"
        require_int(owner, "num_experts", num_experts, 1)
        require_int(owner, "num_layers", num_layers, 1)
        require_int(owner, "seed", seed, 0)
        require_int(owner, "types_per_expert", types_per_expert, 1)
        require_number(owner, "type_skew", type_skew, 0.0)
        rng = np.random.default_rng(seed)
        C = types_per_expert * num_experts
        weights = zipf_weights(C, type_skew, rng)
        slots = np.repeat(np.arange(num_experts, dtype=np.int64), types_per_expert)
        preferred = np.stack([slots[rng.permutation(C)] for _ in range(num_layers)])
        shift = rng.integers(1, num_experts, size=preferred.shape) if num_experts > 1 else np.zeros_like(preferred)
        secondary = (preferred + shift) % num_experts
        return cls(weights, preferred, num_experts, fidelity, second if num_experts > 1 else 0.0, secondary,
                   concentration)

    def rows(self, layer: int) -> np.ndarray:
        """The gate's distribution of every type at ``layer`` (types x experts, class docstring)."""
        E = self.num_experts
        out = np.full((self.num_types, E), (1.0 - self.fidelity - self.second) / E)
        out[np.arange(self.num_types), self.preferred[layer]] += self.fidelity
        out[np.arange(self.num_types), self.secondary[layer]] += self.second
        return out

    def sample(self, batches: int, tokens_per_batch: int, seed: int, *, top_k: int = 1) -> RoutingTrace:
        """``batches`` batches of ``tokens_per_batch`` tokens routed with top-``top_k`` gating, drawn from
        ``seed`` (class docstring)."""
        _require_sample("typed routing", batches, tokens_per_batch, seed, top_k, self.num_experts)
        rng = np.random.default_rng(seed)
        E, n = self.num_experts, batches * tokens_per_batch
        mix = rng.dirichlet(self.concentration * self.num_types * np.maximum(self.type_weights, 1e-12), size=batches)
        kinds = np.concatenate([rng.choice(self.num_types, size=tokens_per_batch, p=m) for m in mix])
        batch = np.repeat(np.arange(batches, dtype=np.int64), tokens_per_batch)
        choices = np.empty((n, self.num_layers, top_k), dtype=np.int64)
        step = max(1, SAMPLE_CELLS // E)
        with np.errstate(divide="ignore"):
            logs = [np.log(self.rows(i)) for i in range(self.num_layers)]
        for i in range(self.num_layers):
            for lo in range(0, n, step):
                hi = min(n, lo + step)
                keys = logs[i][kinds[lo:hi]] + rng.gumbel(size=(hi - lo, E))
                if top_k == 1:
                    choices[lo:hi, i, 0] = np.argmax(keys, axis=1)
                else:
                    choices[lo:hi, i, :] = np.argsort(-keys, axis=1, kind="stable")[:, :top_k]
        return RoutingTrace(choices, batch, E)


def synthetic_routing(num_experts: int = 16, num_layers: int = 12, *, batches: int = 8, tokens_per_batch: int = 1024,
                      top_k: int = 1, seed: int = 0) -> RoutingTrace:
    """A routing trace of a router and a sample both drawn from ``seed`` (:class:`SyntheticRouter`)."""
    router = SyntheticRouter.create(num_experts, num_layers, seed)
    return router.sample(batches, tokens_per_batch, seed, top_k=top_k)


# -- CSV --------------------------------------------------------------------------------------------
def _int_field(path: Path, number: int, line: int, name: str, text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ValidationError(f"{path}: row {number} (line {line}): {name} must be an integer, got {text!r}") from None
    if value < 0:
        raise ValidationError(f"{path}: row {number} (line {line}): {name} must be >= 0, got {value}")
    return value


def read_routing_csv(path: str | Path, num_experts: int, num_layers: int) -> RoutingTrace:
    """Read recorded routing in the CSV format of the module docstring for a model of ``num_experts``
    experts and ``num_layers`` MoE layers. Raises ``ValidationError`` naming the file, row, line and
    rule (an expert or layer that does not exist, a duplicate or missing row, a token choosing one expert
    twice at a layer, a non-integer field ...)."""
    require_int("read_routing_csv", "num_experts", num_experts, 1)
    require_int("read_routing_csv", "num_layers", num_layers, 1)
    p = Path(path)
    records: list[tuple[int, int, int, int, int]] = []
    where: dict[tuple[int, int, int, int], tuple[int, int]] = {}
    with open_csv(p) as handle:
        reader = csv.reader(handle)
        header: list[str] | None = None
        number = 0
        for fields in reader:
            if not any(f.strip() for f in fields):
                continue
            if header is None:
                header = [f.strip() for f in fields]
                missing = [c for c in CSV_COLUMNS[:4] if c not in header]
                if missing:
                    raise ValidationError(f"{p}: missing column(s) {', '.join(missing)}; header is {header}")
                cols = {c: header.index(c) for c in CSV_COLUMNS if c in header}
                continue
            number += 1
            line = reader.line_num
            if len(fields) != len(header):
                raise ValidationError(f"{p}: row {number} (line {line}): {len(fields)} fields, the header has "
                                      f"{len(header)}")
            v = {c: _int_field(p, number, line, c, fields[i].strip()) for c, i in cols.items()}
            layer, expert, rank = v["layer"], v["expert"], v.get("rank", 0)
            if layer >= num_layers:
                raise ValidationError(f"{p}: row {number} (line {line}): layer {layer} does not exist (the model "
                                      f"has {num_layers} MoE layers, 0-{num_layers - 1})")
            if expert >= num_experts:
                raise ValidationError(f"{p}: row {number} (line {line}): expert {expert} does not exist (the model "
                                      f"has {num_experts} experts, 0-{num_experts - 1})")
            if rank >= num_experts:
                raise ValidationError(f"{p}: row {number} (line {line}): rank {rank} means top-{rank + 1} gating, "
                                      f"more than the {num_experts} experts")
            key = (v["batch"], v["token"], layer, rank)
            if key in where:
                raise ValidationError(f"{p}: row {number} (line {line}): token {v['token']} of batch {v['batch']} "
                                      f"has a second row for layer {layer}, rank {rank} (first: row {where[key][0]})")
            where[key] = (number, line)
            records.append((v["batch"], v["token"], layer, rank, expert))
    if header is None:
        raise ValidationError(f"{p}: empty file (no header, no rows)")
    if not records:
        raise ValidationError(f"{p}: no routing rows")
    arr = np.array(records, dtype=np.int64)
    k = int(arr[:, 3].max()) + 1
    tok_keys, tok_index = np.unique(arr[:, :2], axis=0, return_inverse=True)
    tok_index = tok_index.ravel()
    choices = np.full((tok_keys.shape[0], num_layers, k), -1, dtype=np.int64)
    choices[tok_index, arr[:, 2], arr[:, 3]] = arr[:, 4]
    holes = np.argwhere(choices < 0)
    if holes.size:
        t, layer, rank = map(int, holes[0])
        raise ValidationError(f"{p}: token {int(tok_keys[t, 1])} of batch {int(tok_keys[t, 0])} has no row for layer "
                              f"{layer}, rank {rank} (every token needs one row per layer and rank 0-{k - 1})")
    dup = _first_duplicate(choices)
    if dup is not None:
        t, layer, expert = dup
        rank = int(np.flatnonzero(choices[t, layer] == expert)[1])
        number, line = where[(int(tok_keys[t, 0]), int(tok_keys[t, 1]), layer, rank)]
        raise ValidationError(f"{p}: row {number} (line {line}): token {int(tok_keys[t, 1])} of batch "
                              f"{int(tok_keys[t, 0])} chose expert {expert} at two ranks of layer {layer}")
    return RoutingTrace(choices, tok_keys[:, 0].copy(), num_experts)


def write_routing_csv(trace: RoutingTrace, path: str | Path) -> Path:
    """Write ``trace`` in the CSV format of the module docstring (tokens numbered within their batch)."""
    p = Path(path)
    n, L, k = trace.choices.shape
    token = np.empty(n, dtype=np.int64)
    for idx in trace.batches():
        token[idx] = np.arange(idx.size)
    t, i, r = np.meshgrid(np.arange(n), np.arange(L), np.arange(k), indexing="ij")
    rows = np.column_stack([trace.batch[t.ravel()], token[t.ravel()], i.ravel(), trace.choices.ravel(), r.ravel()])
    try:
        with p.open("w", newline="", encoding="utf-8") as f:
            f.write(",".join(CSV_COLUMNS) + "\n")
            np.savetxt(f, rows, fmt="%d", delimiter=",")
    except OSError as exc:
        raise ValidationError(f"{p}: cannot write file ({exc.strerror or exc})") from None
    return p


__all__ = ["BATCH_CONCENTRATION", "CSV_COLUMNS", "DEFAULT_SKEW", "FIDELITY", "KEEP_TOP1", "KEEP_TOP2", "RoutingTrace",
           "SECOND", "SyntheticRouter", "TYPES_PER_EXPERT", "TYPE_SKEW", "TypedRouter", "group_keep_ratio",
           "read_routing_csv", "synthetic_routing", "write_routing_csv", "zipf_weights"]

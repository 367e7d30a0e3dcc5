"""Expert popularity estimation of Lina's inference scheduler (thesis Sec. 4.5.2): profiled
next-layer popularity per sample path, the estimate for a batch, the device counts of Eq. 4.1 and the
phase-two check.

**Profiling** (:func:`profile_paths`). From recorded routing (a :class:`~optsched.perf.moe_routing.RoutingTrace`,
top-1 choices) tokens are grouped by their *sample path* of length ``l``: the experts they chose at
layers ``i-l+1 .. i``. For every path ``j`` the distribution ``Psi_j^{i+1}`` of the experts its tokens
choose at layer ``i+1`` is kept. *Path length* counts layers: with the paper's ``l = 3`` the first
layer estimated is the fourth ("Lina starts to schedule from the fourth layer", Sec. 4.7.3.1). Paths of
every length ``1 .. l`` are profiled, so that a path never seen in profiling backs off to its longest
profiled suffix and, failing that, to the layer's overall distribution (the paper is silent on unseen
paths; a production scheduler must answer for them).

**Estimation** (:func:`estimate_popularity`). For a batch, each token ``t`` with path ``j(t)`` up to
layer ``i`` contributes the probabilities ``P_{j(t)}^{i+1}(e)`` of the top-``k`` experts of
``Psi_{j(t)}^{i+1}`` (the others count 0: "the remaining experts have low popularity"); the estimate
of expert ``e`` is ``sum_t P_{j(t)}^{i+1}(e) / N_t``. It sums to at most 1; experts in no token's
top-k list get 0 ("do not have their n_e estimation").

**Eq. 4.1** (:func:`device_counts`): ``n_e = N x sum_t P_{j(t)}^{i+1}(e) / N_t`` devices for expert
``e`` out of ``N`` devices, a real number (fractions are packed, :mod:`optsched.heuristics.lina`).

**Phase two** (:func:`needs_fine_tuning`): after the gate, the top-``2k`` experts of the estimate and
of the actual popularity are compared; when they differ the allocation is recomputed from the actual
popularity. The text (Sec. 4.5.2): "It checks if the selection result deviates significantly from the
estimation, by comparing the overall top-2k experts. If the two lists are identical, no fine-tuning is
needed"; and the accuracy of Sec. 4.7.3.2 uses "the same definition used in Lina's phase two
scheduling: if the top-2 (recall k = 1 in inference) estimated experts are identical to the actual
routing decision, we consider the estimation accurate", after which "We also compare the complete
popularity rankings given by the estimation ... An average of 3.67 experts out of the estimation are
incorrectly ordered". The text does not settle whether "identical" includes the order, so the rule is a
named option (:data:`TOPK_RULES`): ``"set"`` (the default: the same ``2k`` experts in any order; the
accuracy sentence names the experts, and the ordering is examined separately, as "complete popularity
rankings") and ``"ordered"`` (the same experts in the same order, the reading of "the two lists are
identical"). Both rank by popularity with ties broken by the lower expert number (a tie at the boundary
of the top-``2k`` is settled the same way for the estimate and the actual popularity).
:func:`estimate_accurate` is the accuracy of Sec. 4.7.3.2, the negation of :func:`needs_fine_tuning`
by the thesis's definition.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from optsched.core.checks import require_int
from optsched.core.errors import ValidationError
from optsched.perf.moe_routing import RoutingTrace

#: Sec. 4.7.1: the path length of Lina's estimation
DEFAULT_PATH_LENGTH = 3


#: tokens x experts of the distributions :func:`estimate_popularity` holds at once (8 bytes each, three arrays:
#: 100 MiB a chunk); a larger batch is estimated a chunk of tokens at a time (1,000,000 tokens of 1,024
#: experts held whole took more than 24 GB, issue 26)
ESTIMATE_CELLS = 1 << 22

def _check_k(owner: str, k: int, num_experts: int) -> None:
    require_int(owner, "top-k", k, 1)
    if k > num_experts:
        raise ValidationError(f"{owner}: top-k {k} is larger than the number of experts ({num_experts})")


def _codes(top1: np.ndarray, layer: int, length: int, num_experts: int) -> np.ndarray:
    """Integer code of each token's path of ``length`` layers ending at ``layer`` (base ``num_experts``)."""
    code = np.zeros(top1.shape[0], dtype=np.int64)
    for i in range(layer - length + 1, layer + 1):
        code = code * num_experts + top1[:, i]
    return code


@dataclass(frozen=True, eq=False)
class PathTable:
    """Profiled paths of one length ending at one layer: sorted path ``codes`` and, row by row, the
    next layer's distribution ``dist`` (paths x experts) and the number of profiled ``tokens``."""

    codes: np.ndarray
    dist: np.ndarray
    tokens: np.ndarray

    def lookup(self, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Row of each code in :attr:`dist` and whether the path was profiled."""
        pos = np.searchsorted(self.codes, codes)
        pos = np.minimum(pos, max(self.codes.size - 1, 0))
        found = self.codes[pos] == codes if self.codes.size else np.zeros(codes.size, dtype=bool)
        return pos, found


@dataclass(frozen=True, eq=False)
class PathProfile:
    """Lina's profile (module docstring): ``tables[i][m-1]`` holds the paths of ``m`` layers ending at
    layer ``i`` (for ``m <= min(path_length, i+1)``) with the distribution at layer ``i+1``;
    ``marginals[i]`` is the overall distribution at layer ``i``."""

    num_experts: int
    num_layers: int
    path_length: int
    tables: tuple[tuple[PathTable, ...], ...]
    marginals: np.ndarray

    @property
    def first_estimated_layer(self) -> int:
        """The first layer (0-based) whose estimate uses full-length paths: ``path_length``."""
        return self.path_length


def profile_paths(trace: RoutingTrace, path_length: int = DEFAULT_PATH_LENGTH) -> PathProfile:
    """Profile ``trace`` (top-1 choices) into next-layer distributions per sample path of up to
    ``path_length`` layers (module docstring). Cost: one ``np.unique`` per layer and length."""
    require_int("profile_paths", "path_length", path_length, 1)
    E, L = trace.num_experts, trace.num_layers
    if path_length >= L:
        raise ValidationError(f"profile_paths: path length {path_length} leaves no layer to estimate in a model of "
                              f"{L} MoE layers (it must be below {L})")
    top1 = trace.top1
    tables: list[tuple[PathTable, ...]] = []
    for i in range(L - 1):
        per_len = []
        for m in range(1, min(path_length, i + 1) + 1):
            codes = _codes(top1, i, m, E)
            uniq, inv = np.unique(codes, return_inverse=True)
            counts = np.zeros((uniq.size, E), dtype=np.int64)
            np.add.at(counts, (inv.ravel(), top1[:, i + 1]), 1)
            n = counts.sum(axis=1)
            per_len.append(PathTable(uniq, counts / n[:, None], n))
        tables.append(tuple(per_len))
    marg = np.stack([np.bincount(top1[:, i], minlength=E) for i in range(L)]).astype(float)
    marg /= marg.sum(axis=1, keepdims=True)
    return PathProfile(E, L, path_length, tuple(tables), marg)


def path_distributions(profile: PathProfile, top1: np.ndarray, layer: int) -> np.ndarray:
    """``Psi_{j(t)}^{layer+1}`` for every token (rows of ``top1``, its top-1 experts at layers
    ``0 .. layer`` at least): the longest profiled suffix of its path (module docstring), else the
    marginal of layer ``layer+1``. Shape tokens x experts."""
    E = profile.num_experts
    if not 0 <= layer < profile.num_layers - 1:
        raise ValidationError(f"estimate: layer {layer} has no next layer to estimate (the model has "
                              f"{profile.num_layers} MoE layers)")
    top1 = np.asarray(top1)
    if top1.ndim != 2 or top1.shape[1] <= layer:
        raise ValidationError(f"estimate: need every token's experts up to layer {layer}, got shape {top1.shape}")
    if top1.size and (top1.min() < 0 or top1.max() >= E):
        raise ValidationError(f"estimate: expert {int(top1[(top1 < 0) | (top1 >= E)][0])} does not exist (the model "
                              f"has {E} experts)")
    out = np.tile(profile.marginals[layer + 1], (top1.shape[0], 1))
    todo = np.ones(top1.shape[0], dtype=bool)
    for m in range(len(profile.tables[layer]), 0, -1):
        if not todo.any():
            break
        table = profile.tables[layer][m - 1]
        idx = np.flatnonzero(todo)
        pos, found = table.lookup(_codes(top1[idx], layer, m, E))
        out[idx[found]] = table.dist[pos[found]]
        todo[idx[found]] = False
    return out


def estimate_popularity(profile: PathProfile, top1: np.ndarray, layer: int, k: int = 1) -> np.ndarray:
    """Lina's estimate of each expert's popularity at layer ``layer+1`` for the batch whose tokens'
    top-1 experts up to ``layer`` are ``top1`` (module docstring): ``sum_t P_{j(t)}(e) / N_t`` over
    each token's top-``k`` experts (ties by the lower expert number)."""
    _check_k("estimate", k, profile.num_experts)
    top1 = np.asarray(top1)
    step = max(1, ESTIMATE_CELLS // max(profile.num_experts, 1))
    if top1.ndim == 2 and top1.shape[0] > step:  # a large batch a chunk of tokens at a time: bounded memory
        total = np.zeros(profile.num_experts)
        for lo in range(0, top1.shape[0], step):
            total += _kept(path_distributions(profile, top1[lo:lo + step], layer), k).sum(axis=0)
        return total / top1.shape[0]
    dist = path_distributions(profile, top1, layer)
    if dist.shape[0] == 0:
        raise ValidationError("estimate: the batch has no tokens")
    return _kept(dist, k).sum(axis=0) / dist.shape[0]


def _kept(dist: np.ndarray, k: int) -> np.ndarray:
    """``dist`` with each row's top-``k`` entries kept (ties by the lower expert number) and the rest 0."""
    top = np.argsort(-dist, axis=1, kind="stable")[:, :k]
    kept = np.zeros_like(dist)
    rows = np.arange(dist.shape[0])[:, None]
    kept[rows, top] = dist[rows, top]
    return kept



def device_counts(popularity: np.ndarray, num_devices: int) -> np.ndarray:
    """Eq. 4.1: ``n_e = N x popularity_e`` (``popularity``: non-negative, e.g. :func:`estimate_popularity`)."""
    require_int("Eq. 4.1", "number of devices", num_devices, 1)
    pop = np.asarray(popularity, dtype=float)
    if pop.ndim != 1 or not np.all(np.isfinite(pop)) or np.any(pop < 0):
        raise ValidationError("Eq. 4.1: popularity must be a vector of finite numbers >= 0")
    return num_devices * pop


def top_list(popularity: np.ndarray, n: int) -> tuple[int, ...]:
    """The ``n`` most popular experts, most popular first (ties by the lower expert number)."""
    return tuple(int(e) for e in np.argsort(-np.asarray(popularity, dtype=float), kind="stable")[:n])


#: the readings of "the two lists are identical" (module docstring, "Phase two"); the first is the default
TOPK_RULES = ("set", "ordered")
DEFAULT_TOPK_RULE = "set"


def same_top(estimated: np.ndarray, actual: np.ndarray, k: int = 1, rule: str = DEFAULT_TOPK_RULE) -> bool:
    """Whether the top-``2k`` experts of ``estimated`` and ``actual`` popularity are identical under
    ``rule`` (module docstring, "Phase two"): ``"set"``, the same experts; ``"ordered"``, the same
    experts in the same order."""
    est, act = np.asarray(estimated, dtype=float), np.asarray(actual, dtype=float)
    if est.shape != act.shape or est.ndim != 1:
        raise ValidationError(f"phase two: estimated and actual popularity must be vectors over the same experts, "
                              f"got shapes {est.shape} and {act.shape}")
    _check_k("phase two", k, est.size)
    if rule not in TOPK_RULES:
        raise ValidationError(f"phase two: rule must be one of {', '.join(TOPK_RULES)}, got {rule!r}")
    n = min(2 * k, est.size)
    a, b = top_list(est, n), top_list(act, n)
    return a == b if rule == "ordered" else set(a) == set(b)


def needs_fine_tuning(estimated: np.ndarray, actual: np.ndarray, k: int = 1, rule: str = DEFAULT_TOPK_RULE) -> bool:
    """Lina's phase-two check: whether the top-``2k`` experts of the estimated and the actual popularity
    differ under ``rule`` (module docstring)."""
    return not same_top(estimated, actual, k, rule)


def estimate_accurate(estimated: np.ndarray, actual: np.ndarray, k: int = 1, rule: str = DEFAULT_TOPK_RULE) -> bool:
    """Sec. 4.7.3.2's accuracy of one estimate: "the same definition used in Lina's phase two
    scheduling" (module docstring), i.e. not :func:`needs_fine_tuning`."""
    return same_top(estimated, actual, k, rule)


__all__ = ["DEFAULT_PATH_LENGTH", "DEFAULT_TOPK_RULE", "PathProfile", "PathTable", "TOPK_RULES", "device_counts",
           "estimate_accurate", "estimate_popularity", "needs_fine_tuning", "path_distributions", "profile_paths",
           "same_top", "top_list"]

"""Nested cross-validation of a fitted predictor: the accuracy of rows that neither the fit nor the choice
of the model variant has seen (issue 25, item 5).

Protocol (:func:`nested_cross_validation`), for ``repeats`` fold assignments with seeds ``seed``,
``seed + 1``, ...:

* **Outer folds.** The row indices are permuted by ``numpy.random.default_rng(seed + r)`` and dealt
  into ``outer_folds`` folds (``perm[f::k]``). Each outer fold is *held out*: its rows are predicted,
  never fitted and never used to choose anything.
* **Inner folds (selection).** The outer-training rows alone are dealt the same way into
  ``inner_folds`` folds (permutation by ``default_rng(seed + r)`` seeded again with the outer fold's
  number: ``default_rng([seed + r, f])``). Every candidate variant is fitted on each inner-training
  set and scored on its inner fold; the candidate with the smallest mean relative error over the
  inner predictions is selected (ties: the first candidate). An inner fit that fails
  (``ValidationError``: too few rows for what they identify) scores that candidate infinite on the
  whole outer fold unless every candidate fails, when the first is taken.
* **Refit and predict.** The selected candidate is fitted on all outer-training rows and predicts the
  outer fold. The reported errors are ``|predicted / measured - 1|`` of those predictions only.

Each candidate is also fitted on the outer-training rows without selection (``fixed`` in the
result): the error of always using that variant, the number to compare with the selected one.

The fitting function receives row *indices* so that a test can check which rows every fit saw.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import numpy as np

from optsched.core.errors import ValidationError

#: fit(candidate, train_indices) -> predict(test_indices) -> predicted values
FitFn = Callable[[str, np.ndarray], Callable[[np.ndarray], np.ndarray]]


@dataclass(frozen=True)
class OuterFold:
    """One outer fold: its held-out rows, the training rows, the candidate chosen on inner folds of the
    training rows with each candidate's inner mean relative error, and the held-out errors of the
    selected candidate and of every candidate fitted without selection (NaN where that fit failed)."""

    repeat: int
    fold: int
    test: tuple[int, ...]
    train: tuple[int, ...]
    selected: str
    inner_error: tuple[tuple[str, float], ...]
    errors: tuple[float, ...]
    fixed: tuple[tuple[str, tuple[float, ...]], ...]


def deal(n: int, k: int, rng: np.random.Generator) -> list[np.ndarray]:
    """``k`` folds of ``range(n)`` (leave-one-out when ``k >= n``): a permutation by ``rng`` dealt round-robin."""
    if n < 2:
        raise ValidationError(f"cross-validation needs at least 2 rows, got {n}")
    if k < 2:
        raise ValidationError(f"cross-validation needs at least 2 folds, got {k}")
    k = min(k, n)
    perm = rng.permutation(n)
    return [np.sort(perm[f::k]) for f in range(k)]


def _errors(fit_fn: FitFn, candidate: str, train: np.ndarray, test: np.ndarray,
            measured: np.ndarray) -> np.ndarray | None:
    try:
        predict = fit_fn(candidate, train)
    except ValidationError:
        return None
    return np.abs(np.asarray(predict(test), float) / measured[test] - 1.0)


def nested_cross_validation(measured: Sequence[float], candidates: Sequence[str], fit_fn: FitFn, *,
                            outer_folds: int = 5, inner_folds: int = 5, repeats: int = 1,
                            seed: int = 0) -> list[OuterFold]:
    """The protocol of the module docstring on rows ``0 .. len(measured) - 1``; ``fit_fn(candidate, train)``
    fits ``candidate`` on the rows ``train`` and returns a predictor of row indices."""
    y = np.asarray(measured, float)
    if not candidates:
        raise ValidationError("nested cross-validation needs at least one candidate")
    if np.any(~np.isfinite(y)) or np.any(y <= 0):
        raise ValidationError("nested cross-validation: measured values must be positive finite numbers")
    out = []
    for r in range(repeats):
        for f, test in enumerate(deal(len(y), outer_folds, np.random.default_rng(seed + r))):
            train = np.setdiff1d(np.arange(len(y)), test)
            inner = deal(len(train), inner_folds, np.random.default_rng([seed + r, f]))
            scores: dict[str, float] = {}
            for c in candidates:
                errs = []
                for inner_test in inner:
                    e = _errors(fit_fn, c, np.setdiff1d(train, train[inner_test]), train[inner_test], y)
                    if e is None:
                        errs = None
                        break
                    errs.append(e)
                scores[c] = math.inf if errs is None else float(np.mean(np.concatenate(errs)))
            selected = min(candidates, key=lambda c: (scores[c], candidates.index(c)))
            fixed = {c: _errors(fit_fn, c, train, test, y) for c in candidates}
            chosen = fixed[selected]
            out.append(OuterFold(r, f, tuple(int(i) for i in test), tuple(int(i) for i in train), selected,
                                 tuple(scores.items()),
                                 tuple(float(e) for e in chosen) if chosen is not None else (math.nan,) * len(test),
                                 tuple((c, tuple(float(x) for x in e) if e is not None else (math.nan,) * len(test))
                                       for c, e in fixed.items())))
    return out


def summary(errors: Sequence[float]) -> Mapping[str, float]:
    """Mean, 95th percentile and maximum of the finite ``errors`` (NaN: a failed fit) and how many failed."""
    e = np.asarray(errors, float)
    ok = e[np.isfinite(e)]
    if not ok.size:
        return {"mean": math.nan, "p95": math.nan, "max": math.nan, "failed": int(e.size)}
    return {"mean": float(ok.mean()), "p95": float(np.percentile(ok, 95)), "max": float(ok.max()),
            "failed": int(e.size - ok.size)}


__all__ = ["FitFn", "OuterFold", "deal", "nested_cross_validation", "summary"]

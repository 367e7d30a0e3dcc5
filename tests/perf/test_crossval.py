"""Nested cross-validation (optsched.perf.crossval): no outer held-out row is ever fitted or used to select
a variant, the folds partition the rows, and selection picks the variant the inner folds favour."""

from __future__ import annotations

import numpy as np
import pytest

from optsched.core import ValidationError
from optsched.perf.crossval import deal, nested_cross_validation, summary

X = np.arange(1.0, 24.0)
Y = 2.0 + 0.5 * X  # a line: "linear" predicts held-out rows exactly, "mean" does not


def recording_fit(calls: list, y: np.ndarray = Y):
    def fit_fn(candidate: str, train: np.ndarray):
        calls.append((candidate, frozenset(int(i) for i in train)))
        if candidate == "mean":
            value = float(np.mean(y[train]))
            return lambda test: np.full(len(test), value)
        slope, icpt = np.polyfit(X[train], y[train], 1)
        return lambda test: icpt + slope * X[test]
    return fit_fn


@pytest.mark.parametrize("outer,inner,repeats", [(5, 4, 1), (3, 3, 2), (30, 5, 1)])
def test_outer_held_out_rows_are_never_fitted(outer: int, inner: int, repeats: int) -> None:
    calls: list = []
    cands = ("mean", "linear")
    res = nested_cross_validation(Y, cands, recording_fit(calls), outer_folds=outer, inner_folds=inner,
                                  repeats=repeats, seed=7)
    k = min(outer, len(Y))
    assert len(res) == k * repeats
    per_fold = len(cands) * (inner + 1)  # inner fits of each candidate, then each candidate on all training rows
    assert len(calls) == per_fold * len(res)
    for n, fold in enumerate(res):
        test, train = set(fold.test), set(fold.train)
        assert not test & train and test | train == set(range(len(Y)))
        mine = calls[n * per_fold:(n + 1) * per_fold]
        for _, rows in mine:
            assert not rows & test, "a fit saw an outer held-out row"
            assert rows <= train
        # the last fits are on every outer-training row; the inner ones each leave an inner fold out
        assert all(rows == train for _, rows in mine[-len(cands):])
        assert all(rows < train for _, rows in mine[:-len(cands)])
    for rep in range(repeats):  # the outer folds of a repeat partition the rows
        tests = [set(f.test) for f in res if f.repeat == rep]
        assert sum(len(t) for t in tests) == len(Y) and set().union(*tests) == set(range(len(Y)))


def test_selection_ignores_the_outer_held_out_values() -> None:
    """Changing the measured values of an outer fold changes neither the selection nor the inner scores of
    that fold (they only ever see other rows); the errors reported are on that fold's rows."""
    base = nested_cross_validation(Y, ("mean", "linear"), recording_fit([]), outer_folds=4, inner_folds=3, seed=1)
    for fold in base:
        y2 = Y.copy()
        y2[list(fold.test)] *= 3.0
        again = nested_cross_validation(y2, ("mean", "linear"), recording_fit([], y2), outer_folds=4, inner_folds=3,
                                        seed=1)[fold.fold]
        assert again.test == fold.test and again.selected == fold.selected
        assert again.inner_error == fold.inner_error
        # the linear fit of the other rows predicts Y exactly; only the held-out measurements changed (x3)
        assert fold.selected == "linear"
        assert np.allclose(again.errors, 2.0 / 3.0) and np.allclose(fold.errors, 0.0)


def test_inner_folds_select_the_better_variant_and_summary() -> None:
    res = nested_cross_validation(Y, ("mean", "linear"), recording_fit([]), outer_folds=5, inner_folds=5, seed=0)
    assert {f.selected for f in res} == {"linear"}
    assert max(e for f in res for e in f.errors) < 1e-9
    assert all(dict(f.inner_error)["mean"] > dict(f.inner_error)["linear"] for f in res)
    s = summary([0.1, 0.2, float("nan"), 0.3])
    assert s["mean"] == pytest.approx(0.2) and s["max"] == pytest.approx(0.3) and s["failed"] == 1


def test_deal_and_bad_input() -> None:
    folds = deal(7, 3, np.random.default_rng(0))
    assert sorted(np.concatenate(folds).tolist()) == list(range(7)) and [len(f) for f in folds] == [3, 2, 2]
    assert len(deal(4, 10, np.random.default_rng(0))) == 4  # leave-one-out
    with pytest.raises(ValidationError, match="at least 2 folds"):
        deal(5, 1, np.random.default_rng(0))
    with pytest.raises(ValidationError, match="positive"):
        nested_cross_validation([1.0, -1.0, 2.0], ("mean",), recording_fit([]))
    with pytest.raises(ValidationError, match="candidate"):
        nested_cross_validation(Y, (), recording_fit([]))

"""The fit's AUC and MCC (flamino_core/predictors/evaluation.py, written out for the bootstrap's speed)
against scikit-learn's ``roc_auc_score`` and ``matthews_corrcoef`` themselves, on the NEIME assay's
own bins and on drawn labels with ties, several classes and resamples missing a class.

Bound 1e-12: both compute the same exact statistic (the Mann-Whitney U with half-counted ties is
the trapezoid area scikit-learn integrates; the MCC from the same confusion-matrix sums), so
they differ only by float rounding of sums of at most a few hundred terms (~1e-15 relative).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import matthews_corrcoef, roc_auc_score

from conftest import SHARED
from flamino_core.predictors.evaluation import auc, classification_metrics, mcc

BOUND = 1e-12


def drawn(seed: int, rows: int, classes: int, tie_levels: int | None) -> tuple[np.ndarray, np.ndarray, tuple]:
    """Labels and probabilities (rows sum to one); scores rounded to ``tie_levels`` values to make ties."""
    rng = np.random.default_rng(seed)
    names = tuple(f"class {i:02d}" for i in range(classes))  # sorted, as a fit's classes are
    truth = np.array(names, dtype=object)[rng.integers(0, classes, rows)].astype(str)
    logits = rng.normal(size=(rows, classes)) + 1.5 * (truth[:, None] == np.array(names))  # some signal
    if tie_levels:
        logits = np.round(logits * tie_levels) / tie_levels
    probabilities = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    return truth, probabilities, names


@pytest.mark.parametrize("seed,rows,classes,tie_levels", [
    (0, 40, 2, None), (1, 300, 2, 2), (2, 17, 2, 1),  # binary; heavy ties (scores on a coarse grid)
    (3, 300, 5, None), (4, 120, 7, 3), (5, 300, 51, None),  # one-vs-rest macro, the 51-class attack's width
])  # fmt: skip
def test_auc_is_scikit_learns(seed, rows, classes, tie_levels):
    truth, probabilities, names = drawn(seed, rows, classes, tie_levels)
    if classes == 2:
        expected = roc_auc_score(truth == names[1], probabilities[:, 1])
    elif len(set(truth)) < classes:
        pytest.skip("a drawn class is missing")  # AUC is then undefined: the next test checks that
    else:
        expected = roc_auc_score(truth, probabilities, multi_class="ovr", average="macro", labels=list(names))
    assert abs(auc(truth, probabilities, names) - expected) < BOUND


def test_auc_is_undefined_where_a_class_is_missing():
    truth, probabilities, names = drawn(6, 30, 3, None)
    assert np.isnan(auc(np.full(30, names[0]), probabilities, names))
    assert np.isnan(auc(np.where(truth == names[2], names[0], truth), probabilities, names))  # one of three gone


@pytest.mark.parametrize("seed,rows,classes", [(0, 40, 2), (1, 300, 5), (2, 300, 51), (3, 9, 3)])
def test_mcc_is_scikit_learns(seed, rows, classes):
    truth, probabilities, names = drawn(seed, rows, classes, None)
    predicted = np.array(names)[probabilities.argmax(1)]
    assert abs(mcc(truth, predicted) - matthews_corrcoef(truth, predicted)) < BOUND
    # A prediction of one class only: scikit-learn's 0 where the correlation is undefined.
    assert mcc(truth, np.full(rows, names[0])) == matthews_corrcoef(truth, np.full(rows, names[0])) == 0.0


def test_bootstrap_intervals_are_those_of_scikit_learns_statistics():
    """The intervals on the real assay's bins, resample by resample as the bootstrap draws them
    (the same seed), with scikit-learn's functions in place of ours."""
    from flamino_core.predictors import evaluation

    path = SHARED / "dms" / "A0A1I9GEU1_NEIME_Kennouche_2019.csv"
    if not path.is_file():
        pytest.skip(f"the shared assay is not at {path}")
    assay = pd.read_csv(path)
    truth = assay["DMS_score_bin"].astype(str).to_numpy()[:200]
    names = ("0", "1")
    rng = np.random.default_rng(7)
    score = assay["DMS_score"].to_numpy()[:200] + rng.normal(scale=2.0, size=200)  # a noisy predictor
    probabilities = np.stack([1 - 1 / (1 + np.exp(-score)), 1 / (1 + np.exp(-score))], axis=1)
    predicted = np.array(names)[probabilities.argmax(1)]
    ours = classification_metrics(truth, predicted, probabilities, names)

    def reference_auc(rows):
        return roc_auc_score(truth[rows] == "1", probabilities[rows, 1]) if len(set(truth[rows])) == 2 else np.nan

    auc_low, auc_high, used = evaluation.interval(reference_auc, len(truth))
    mcc_low, mcc_high, _ = evaluation.interval(lambda rows: matthews_corrcoef(truth[rows], predicted[rows]), len(truth))
    assert ours["n_resamples"] == used == evaluation.BOOTSTRAP
    for key, expected in [("auc_low", auc_low), ("auc_high", auc_high), ("mcc_low", mcc_low), ("mcc_high", mcc_high)]:
        assert abs(ours[key] - expected) < BOUND, key
    assert ours["auc_low"] < ours["auc"] < ours["auc_high"]

"""How good are out-of-fold predictions: Spearman, or AUC and MCC, each with a bootstrap interval.

* regression: ``spearman`` (``scipy.stats.spearmanr`` of the target and the out-of-fold
  prediction over the evaluated rows), the statistic ProteinGym ranks supervised models by;
* classification: ``auc`` (scikit-learn's ``roc_auc_score`` of the predicted probability; with
  more than two classes one-vs-rest, macro-averaged) and ``mcc`` (its ``matthews_corrcoef`` of the
  predicted class), both computed here as scikit-learn defines them, in microseconds a call.

Each comes with a 95% percentile bootstrap interval (``_low``, ``_high``): ``BOOTSTRAP``
resamples of the evaluated rows with replacement, seed 0. Written here rather than with
``scipy.stats.bootstrap`` because that returns no interval at all when one resample's statistic
is undefined (a resample with one class has no AUC); here such resamples are dropped and
counted (``n_resamples``). The interval shows how much the number moves with the rows
sampled; it does not include the variation between fold splits.
"""

from __future__ import annotations

import warnings
from typing import Callable

import numpy as np

from flamino_core.predictors.table import SEED

BOOTSTRAP = 1000
LEVEL = 0.95


def spearman(truth: np.ndarray, predicted: np.ndarray) -> float:
    from scipy.stats import spearmanr

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a constant column: NaN, reported as undefined
        return float(spearmanr(truth, predicted).statistic)


def auc(truth: np.ndarray, probabilities: np.ndarray, classes: tuple[str, ...]) -> float:
    """scikit-learn's ``roc_auc_score`` (binary; or one-vs-rest, macro-averaged), NaN where a class
    is missing: computed by ``_auc_of_codes``, checked against scikit-learn in tests/unit/test_predict_metrics.py."""
    return _auc_of_codes(_codes(truth, classes), probabilities, len(classes))


def _codes(labels: np.ndarray, classes: tuple[str, ...]) -> np.ndarray:
    """Each label's index in ``classes`` (-1: none of them)."""
    order = {name: i for i, name in enumerate(classes)}
    return np.fromiter((order.get(label, -1) for label in np.asarray(labels).astype(str)), np.int64, len(labels))


def _auc_of_codes(codes: np.ndarray, probabilities: np.ndarray, n_classes: int) -> float:
    # The area under the ROC curve is the Mann-Whitney U statistic of the positives' scores over
    # the negatives', ties counting one half: (sum of the positives' average ranks - n1 (n1 + 1) / 2)
    # / (n1 n0), the same number roc_auc_score integrates (to float rounding). Written out because
    # the bootstrap asks it 1,000 times per row, and scikit-learn's input checks made that 10-60 ms
    # a call (a minute a row for 51 classes); this is microseconds.
    from scipy.stats import rankdata

    present = np.unique(codes[codes >= 0])
    if present.size < 2:
        return float("nan")
    if n_classes == 2:
        columns = [1]
    elif present.size < n_classes:
        return float("nan")
    else:
        columns = list(range(n_classes))
    ranks = rankdata(probabilities[:, columns], axis=0)
    areas = []
    for j, column in enumerate(columns):
        positive = codes == column
        n1 = int(positive.sum())
        n0 = len(codes) - n1
        areas.append((ranks[positive, j].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))
    return float(np.mean(areas))


def mcc(truth: np.ndarray, predicted: np.ndarray) -> float:
    """scikit-learn's ``matthews_corrcoef`` (its multiclass form; 0 where undefined), from the
    confusion matrix as scikit-learn computes it: written out for the bootstrap's 1,000 calls
    (see ``_auc_of_codes``), checked against scikit-learn in tests/unit/test_predict_metrics.py."""
    labels, codes = np.unique(np.concatenate([np.asarray(truth).astype(str), np.asarray(predicted).astype(str)]),
                              return_inverse=True)
    return _mcc_of_codes(codes[:len(truth)], codes[len(truth):], len(labels))


def _mcc_of_codes(truth: np.ndarray, predicted: np.ndarray, n_labels: int) -> float:
    confusion = np.bincount(truth * n_labels + predicted, minlength=n_labels * n_labels).reshape(n_labels, n_labels)
    t_sum = confusion.sum(axis=1, dtype=np.float64)
    p_sum = confusion.sum(axis=0, dtype=np.float64)
    n_correct = np.trace(confusion, dtype=np.float64)
    n_samples = p_sum.sum()
    cov_ytyp = n_correct * n_samples - np.dot(t_sum, p_sum)
    cov_ypyp = n_samples**2 - np.dot(p_sum, p_sum)
    cov_ytyt = n_samples**2 - np.dot(t_sum, t_sum)
    if cov_ypyp * cov_ytyt == 0:
        return 0.0
    return float(cov_ytyp / np.sqrt(cov_ypyp * cov_ytyt))


def interval(statistic: Callable[[np.ndarray], float], n: int, seed: int = SEED,
             resamples: int = BOOTSTRAP) -> tuple[float | None, float | None, int]:
    """(low, high, resamples used): the percentile bootstrap interval of ``statistic(rows)``."""
    if n < 3:
        return None, None, 0
    rng = np.random.default_rng(seed)
    values = np.array([statistic(rng.integers(0, n, n)) for _ in range(resamples)], dtype=np.float64)
    values = values[np.isfinite(values)]
    if values.size < resamples // 2:  # mostly undefined: no interval worth showing
        return None, None, int(values.size)
    tail = (1 - LEVEL) / 2 * 100
    low, high = np.percentile(values, [tail, 100 - tail])
    return float(low), float(high), int(values.size)


def regression_metrics(truth: np.ndarray, predicted: np.ndarray, seed: int = SEED) -> dict:
    """``{"spearman", "spearman_low", "spearman_high", "n", "n_resamples"}`` (None where undefined)."""
    truth, predicted = np.asarray(truth, np.float64), np.asarray(predicted, np.float64)
    low, high, used = interval(lambda rows: spearman(truth[rows], predicted[rows]), len(truth), seed)
    return {"spearman": _defined(spearman(truth, predicted)), "spearman_low": low, "spearman_high": high,
            "n": int(len(truth)), "n_resamples": used}


def classification_metrics(truth: np.ndarray, predicted: np.ndarray, probabilities: np.ndarray,
                           classes: tuple[str, ...], seed: int = SEED) -> dict:
    """``{"auc", "auc_low", "auc_high", "mcc", "mcc_low", "mcc_high", "n", "n_resamples"}``."""
    truth = np.asarray(truth, dtype=object).astype(str)
    predicted = np.asarray(predicted, dtype=object).astype(str)
    truth_codes = _codes(truth, classes)
    labels, label_codes = np.unique(np.concatenate([truth, predicted]), return_inverse=True)
    truth_labels, predicted_labels = label_codes[:len(truth)], label_codes[len(truth):]
    auc_low, auc_high, used = interval(lambda rows: _auc_of_codes(truth_codes[rows], probabilities[rows], len(classes)),
                                       len(truth), seed)
    mcc_low, mcc_high, _ = interval(lambda rows: _mcc_of_codes(truth_labels[rows], predicted_labels[rows], len(labels)),
                                    len(truth), seed)
    return {"auc": _defined(auc(truth, probabilities, classes)), "auc_low": auc_low, "auc_high": auc_high,
            "mcc": _defined(mcc(truth, predicted)), "mcc_low": mcc_low, "mcc_high": mcc_high,
            "n": int(len(truth)), "n_resamples": used}


def zero_shot_metrics(truth: np.ndarray, scores: np.ndarray, task: str, classes: tuple[str, ...],
                      seed: int = SEED) -> dict:
    """The model's zero-shot score as a predictor by itself (no labels used): Spearman, or AUC."""
    scores = np.asarray(scores, np.float64)
    if task == "regression":
        return regression_metrics(truth, scores, seed)
    truth = np.asarray(truth, dtype=object).astype(str)
    if len(classes) != 2:
        return {"auc": None, "auc_low": None, "auc_high": None, "mcc": None, "mcc_low": None, "mcc_high": None,
                "n": int(len(truth)), "n_resamples": 0}
    as_probability = np.stack([-scores, scores], axis=1)  # AUC reads only the order of column 1
    codes = _codes(truth, classes)
    low, high, used = interval(lambda rows: _auc_of_codes(codes[rows], as_probability[rows], 2), len(truth), seed)
    return {"auc": _defined(auc(truth, as_probability, classes)), "auc_low": low, "auc_high": high,
            "mcc": None, "mcc_low": None, "mcc_high": None, "n": int(len(truth)), "n_resamples": used}


def _defined(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None


def headline(task: str) -> str:
    """The statistic a fit is judged by: ``spearman`` or ``auc``."""
    return "spearman" if task == "regression" else "auc"

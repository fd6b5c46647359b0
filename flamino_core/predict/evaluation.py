"""How good are out-of-fold predictions: Spearman, or AUC and MCC, each with a bootstrap interval.

* regression: ``spearman`` (``scipy.stats.spearmanr`` of the target and the out-of-fold
  prediction over the evaluated rows), the statistic ProteinGym ranks supervised models by;
* classification: ``auc`` (scikit-learn ``roc_auc_score`` of the predicted probability; with more
  than two classes one-vs-rest, macro-averaged) and ``mcc`` (``matthews_corrcoef`` of the
  predicted class).

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

from flamino_core.predict.table import SEED

BOOTSTRAP = 1000
LEVEL = 0.95


def spearman(truth: np.ndarray, predicted: np.ndarray) -> float:
    from scipy.stats import spearmanr

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a constant column: NaN, reported as undefined
        return float(spearmanr(truth, predicted).statistic)


def auc(truth: np.ndarray, probabilities: np.ndarray, classes: tuple[str, ...]) -> float:
    from sklearn.metrics import roc_auc_score

    present = set(truth)
    if len(present) < 2:
        return float("nan")
    if len(classes) == 2:
        return float(roc_auc_score(truth == classes[1], probabilities[:, 1]))
    if len(present) < len(classes):
        return float("nan")
    return float(roc_auc_score(truth, probabilities, multi_class="ovr", average="macro", labels=list(classes)))


def mcc(truth: np.ndarray, predicted: np.ndarray) -> float:
    from sklearn.metrics import matthews_corrcoef

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(matthews_corrcoef(truth.astype(str), predicted.astype(str)))


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
    auc_low, auc_high, used = interval(lambda rows: auc(truth[rows], probabilities[rows], classes), len(truth), seed)
    mcc_low, mcc_high, _ = interval(lambda rows: mcc(truth[rows], predicted[rows]), len(truth), seed)
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
    low, high, used = interval(lambda rows: auc(truth[rows], as_probability[rows], classes), len(truth), seed)
    return {"auc": _defined(auc(truth, as_probability, classes)), "auc_low": low, "auc_high": high,
            "mcc": None, "mcc_low": None, "mcc_high": None, "n": int(len(truth)), "n_resamples": used}


def _defined(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None


def headline(task: str) -> str:
    """The statistic a fit is judged by: ``spearman`` or ``auc``."""
    return "spearman" if task == "regression" else "auc"

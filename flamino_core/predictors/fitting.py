"""Linear models on the features, honestly evaluated: out-of-fold predictions for every row.

The estimators are scikit-learn's, chosen as the supervised baselines of ProteinGym and Hsu et
al. 2022 are: ridge regression for a numeric target, L2 logistic regression for classes, each
with its regularisation strength picked by an *inner* cross-validation on the training rows
only (``RidgeCV``: efficient leave-one-out over ``ALPHAS``; ``LogisticRegressionCV``: stratified
5-fold over ``CS``, log-loss), so the held-out fold never influences its own prediction.

``cross_validate`` fits one model per fold on the other folds and predicts the held-out rows;
rows that are not evaluated (no target, no fold) get the final model's prediction, the model
fitted on every labelled row, which is the one saved (``saved.Predictor``).
"""

from __future__ import annotations

import dataclasses
import functools
import warnings
from typing import Callable, TypeVar

import numpy as np

from flamino_core.predictors.table import SEED, LabelledTable

ALPHAS = 10.0 ** np.arange(-2, 5.5, 0.5)  # ridge strengths tried: 1e-2 ... 1e5
CS = 10.0 ** np.arange(-4, 4.5, 1.0)  # inverse logistic strengths tried: 1e-4 ... 1e4
INNER_FOLDS = 5
# Of each training fold, for the learning curve; the whole fold is the cross-validation itself
# (``cross_validate``'s models), not refitted. Costs scale with the cube of the rows (ridge's
# leave-one-out solves on the n x n Gram matrix), so these three cost a seventh of one more fit.
TRAIN_FRACTIONS = (0.1, 0.25, 0.5)
T = TypeVar("T")
# Runs one scikit-learn fit, a picklable callable of no argument (a caller counts it, queues it, may
# stop there, may run it in another process: ``worker.FitWorker``).
Step = Callable[[Callable[[], T]], T]


def _now(fit: Callable[[], T]) -> T:
    return fit()


@dataclasses.dataclass
class LinearModel:
    """A fitted linear model in plain arrays (what ``saved`` writes and ``flamino predict`` reads).

    decision = ((X - mean) / scale) @ coef.T + intercept: the prediction itself (regression),
    or the logit of the last class (two classes) / each class's logit (more, softmax).
    """

    task: str
    mean: np.ndarray  # (p,)
    scale: np.ndarray  # (p,)
    coef: np.ndarray  # (k, p)
    intercept: np.ndarray  # (k,)
    classes: tuple[str, ...]
    regularisation: dict  # {"alpha": ...} or {"C": ...}

    def decision(self, X) -> np.ndarray:
        """(n, k) for dense or sparse ``X`` (n, p)."""
        if hasattr(X, "tocsr"):  # sparse: ((X - m) / s) @ C.T expanded, so X stays sparse
            weights = (self.coef / self.scale).T  # (p, k)
            return np.asarray(X @ weights) - (self.mean / self.scale) @ self.coef.T + self.intercept
        return ((np.asarray(X, np.float64) - self.mean) / self.scale) @ self.coef.T + self.intercept

    def probabilities(self, X) -> np.ndarray:
        """(n, classes) class probabilities (classification only)."""
        z = self.decision(X)
        if len(self.classes) == 2:
            p = 1.0 / (1.0 + np.exp(-z[:, 0]))
            return np.stack([1.0 - p, p], axis=1)
        z = z - z.max(axis=1, keepdims=True)
        e = np.exp(z)
        return e / e.sum(axis=1, keepdims=True)

    def predict(self, X) -> np.ndarray:
        """(n,) predicted values (regression) or classes (classification)."""
        if self.task == "regression":
            return self.decision(X)[:, 0]
        return np.array(self.classes, dtype=object)[self.probabilities(X).argmax(axis=1)]


def estimator(task: str, standardise: bool):
    """The scikit-learn estimator for ``task``, a fresh one (a ``Pipeline`` when standardising)."""
    from sklearn.linear_model import LogisticRegressionCV, RidgeCV
    from sklearn.model_selection import StratifiedKFold
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    if task == "regression":
        model = RidgeCV(alphas=ALPHAS)
    else:
        # l1_ratios=(0,): the L2 penalty, said explicitly (scikit-learn 1.8 deprecated the default).
        model = LogisticRegressionCV(Cs=CS, cv=StratifiedKFold(INNER_FOLDS, shuffle=True, random_state=SEED),
                                     scoring="neg_log_loss", max_iter=10_000, l1_ratios=(0.0,))
    return make_pipeline(StandardScaler(), model) if standardise else model


def fit_estimator(task: str, standardise: bool, X, y):
    """A fresh ``estimator`` fitted on ``X``, ``y`` (module-level: a step can run it in another process)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence chatter of the inner search; results are checked
        return estimator(task, standardise).fit(X, y)


def to_linear(fitted, task: str, classes: tuple[str, ...], p: int) -> LinearModel:
    """The arrays of a fitted ``estimator``."""
    steps = getattr(fitted, "steps", None)
    model = steps[-1][1] if steps else fitted
    mean, scale = np.zeros(p), np.ones(p)
    if steps:
        scaler = steps[0][1]
        mean, scale = scaler.mean_.astype(np.float64), scaler.scale_.astype(np.float64)
    coef = np.atleast_2d(np.asarray(model.coef_, np.float64))
    intercept = np.atleast_1d(np.asarray(model.intercept_, np.float64))
    if task == "regression":
        return LinearModel(task, mean, scale, coef, intercept, (), {"alpha": float(model.alpha_)})
    order = [list(map(str, model.classes_)).index(c) for c in classes] if len(classes) > 2 else None
    if order is not None:  # rows in the table's class order (scikit-learn sorts labels as text)
        coef, intercept = coef[order], intercept[order]
    elif [str(c) for c in model.classes_] != list(classes):  # two classes, sorted the other way
        coef, intercept = -coef, -intercept
    c_value = float(np.atleast_1d(model.C_)[0])
    return LinearModel(task, mean, scale, coef, intercept, classes, {"C": c_value})


@dataclasses.dataclass
class CrossValidated:
    """Out-of-fold predictions of one feature set, and the model fitted on every labelled row."""

    predictions: np.ndarray  # (rows,) float (NaN: unusable row) or class (None)
    probabilities: np.ndarray | None  # (rows, classes), classification
    evaluated: np.ndarray  # (rows,) bool: predicted by a model that never saw the row
    final: LinearModel


def cross_validate(X: np.ndarray, table: LabelledTable, folds: np.ndarray, standardise: bool,
                   step: Step = _now) -> CrossValidated:
    """Fit one model per fold on the other labelled rows, predict the fold; the rest by the final model.

    Args:
      X: (rows, p) features of every usable row (unusable rows: anything finite, never read).
      table: the labelled table (target, task, which rows are usable and labelled).
      folds: (rows,) from ``table.fold_ids``; -1: not evaluated (still trained on when labelled).
      standardise: scale features first (embedding features).
      step: runs each of the fits (one per fold, then the final one) when it is its turn.
    """
    labelled, usable = table.labelled, table.usable
    y = _targets(table)
    n_classes = len(table.classes)
    predictions = np.full(len(y), np.nan) if table.task == "regression" else np.full(len(y), None, dtype=object)
    probabilities = None if table.task == "regression" else np.full((len(y), n_classes), np.nan)
    evaluated = np.zeros(len(y), dtype=bool)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence chatter of the inner search; results are checked
        for fold in sorted(set(folds[labelled & (folds >= 0)])):
            test = labelled & (folds == fold)
            train = labelled & ~test
            fitted = step(functools.partial(fit_estimator, table.task, standardise, X[train], y[train]))
            model = to_linear(fitted, table.task, table.classes, X.shape[1])
            _fill(model, X, test, predictions, probabilities)
            evaluated |= test
        fitted = step(functools.partial(fit_estimator, table.task, standardise, X[labelled], y[labelled]))
        final = to_linear(fitted, table.task, table.classes, X.shape[1])
    _fill(final, X, usable & ~evaluated, predictions, probabilities)
    return CrossValidated(predictions, probabilities, evaluated, final)


def _targets(table: LabelledTable) -> np.ndarray:
    if table.task == "regression":
        return table.values.astype(np.float64)
    return np.array(["" if v is None else v for v in table.values], dtype=object)


def _fill(model: LinearModel, X: np.ndarray, rows: np.ndarray, predictions, probabilities) -> None:
    if not rows.any():
        return
    predictions[rows] = model.predict(X[rows])
    if probabilities is not None:
        probabilities[rows] = model.probabilities(X[rows])


def baseline_majority(table: LabelledTable, folds: np.ndarray) -> CrossValidated:
    """The majority-class baseline on the same folds: each fold predicts its training folds'
    majority class. Its probabilities are one constant for every row (the labelled rows' class
    frequencies), so it ranks nothing and its AUC is 0.5: each fold's own training frequencies
    would rank the rows of a fold with more positives lower (fewer positives left to train on),
    an AUC below 0.5 (0.4987 on the fitness bins of the assay in tests/integration/test_predict.py) that is an
    artefact of pooling folds, not a skill. A constant carries no row's label."""
    labelled = table.labelled
    y = _targets(table)
    n = len(y)
    predictions = np.full(n, None, dtype=object)
    probabilities = np.full((n, len(table.classes)), np.nan)
    evaluated = np.zeros(n, dtype=bool)
    scored = labelled & (folds >= 0)
    overall = np.array([(y[scored] == c).sum() for c in table.classes], dtype=np.float64)
    for fold in sorted(set(folds[scored])):
        test = labelled & (folds == fold)
        train = labelled & ~test
        counts = np.array([(y[train] == c).sum() for c in table.classes], dtype=np.float64)
        probabilities[test] = overall / overall.sum()
        predictions[test] = table.classes[int(counts.argmax())]
        evaluated |= test
    final = LinearModel("classification", np.zeros(0), np.ones(0), np.zeros((1, 0)), np.zeros(1), table.classes, {})
    return CrossValidated(predictions, probabilities, evaluated, final)


def learning_curve(X: np.ndarray, table: LabelledTable, folds: np.ndarray, standardise: bool,
                   result: CrossValidated, fractions=TRAIN_FRACTIONS, seed: int = SEED,
                   step: Step = _now) -> list[dict]:
    """Training size against score on the held-out folds, as scikit-learn's ``learning_curve``
    computes it (``shuffle=True``, ``random_state=seed``), one fit at a time through ``step``.

    Each training fold is cut to each fraction (a random subset, ``seed``), the model refitted
    and scored on its held-out fold: Spearman (regression) or AUC (classification), the mean
    over folds; the last point is the whole training folds, scored from ``result`` (the
    cross-validation's own models). Returns ``[{"train_size", "score", "score_sd", "folds"}]``;
    a size where a fit or a score is undefined (one class, constant predictions) has ``score``
    None.
    """
    labelled = table.labelled & (folds >= 0)
    rows = np.flatnonzero(labelled)
    y = _targets(table)[rows]
    fold_of = folds[rows]
    splits = [(np.flatnonzero(fold_of != f), np.flatnonzero(fold_of == f)) for f in sorted(set(fold_of))]
    sizes = _train_sizes(fractions, len(splits[0][0]))
    data = X[rows]
    rng = np.random.RandomState(seed)  # scikit-learn's shuffle: one permutation per split, in split order
    test_scores = np.full((len(sizes), len(splits)), np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for j, (train, test) in enumerate(splits):
            train = rng.permutation(train)
            for i, size in enumerate(sizes):
                test_scores[i, j] = step(functools.partial(
                    _fit_and_score, table.task, len(table.classes), standardise, data[train[:size]],
                    y[train[:size]], data[test], y[test]))
    whole = [float(_score(table, y[test], result.predictions[rows[test]], None if result.probabilities is None
                          else result.probabilities[rows[test]])) for _, test in splits]
    sizes = [*sizes, int(np.mean([len(train) for train, _ in splits]))]
    curve = []
    for size, scores in zip(sizes, [*test_scores, np.array(whole)]):
        finite = scores[np.isfinite(scores)]
        curve.append({"train_size": int(size), "score": float(finite.mean()) if finite.size else None,
                      "score_sd": float(finite.std()) if finite.size > 1 else None, "folds": int(finite.size)})
    return curve


def _train_sizes(fractions, most: int) -> np.ndarray:
    """Training sizes of the fractions of ``most`` rows (scikit-learn's ``_translate_train_sizes``)."""
    return np.unique(np.clip((np.asarray(fractions, dtype=float) * most).astype(int), 1, most))


def _fit_and_score(task: str, n_classes: int, standardise: bool, X_train, y_train, X_test, y_test) -> float:
    """One learning-curve point's held-out score; NaN when the fit or the score is undefined (as
    scikit-learn's ``error_score=np.nan``)."""
    try:
        fitted = fit_estimator(task, standardise, X_train, y_train)
        return float(_scorer(task, n_classes)(fitted, X_test, y_test))
    except Exception:  # noqa: BLE001 - one class in a subset, a constant prediction: no score, said as None
        return float("nan")


def _score(table: LabelledTable, truth, predicted, probabilities) -> float:
    """The learning curve's statistic of one fold, as its scorer computes it."""
    from flamino_core.predictors.evaluation import auc, spearman

    if table.task == "regression":
        return spearman(truth.astype(np.float64), predicted.astype(np.float64))
    return auc(truth.astype(str), probabilities, table.classes)


def _scorer(task: str, n_classes: int):
    from sklearn.metrics import get_scorer, make_scorer

    if task == "regression":
        from scipy.stats import spearmanr

        return make_scorer(lambda truth, predicted: spearmanr(truth, predicted).statistic)
    return get_scorer("roc_auc" if n_classes == 2 else "roc_auc_ovr")

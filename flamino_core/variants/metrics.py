"""Agreement between model scores and a deep mutational scan, as ProteinGym defines it.

Definitions follow ProteinGym's ``proteingym/performance_DMS_benchmarks.py``
(github.com/OATML-Markslab/ProteinGym) as it has been since commit f5e47f1 ("Fixed bug w/ MSAT
fitness and Top-k recall", f5e47f126ddcf6aeb6cbc10250678208bfa21ae2) and still is at bb68524
(bb685245f8f4bb95a5b54b470396c23826cd6284), higher DMS_score and higher model score both
meaning "fitter":

* ``spearman``: Spearman's rank correlation of DMS_score and score (``scipy.stats.spearmanr``).
* ``auc``: ROC AUC of the score for DMS_score_bin (1 fit, 0 not). ProteinGym calls scikit-learn's
  ``roc_auc_score``: trapezoids under the ROC curve (ties count one half). It is computed here the
  way scikit-learn does (stable descending sort, one point per distinct score, collinear points
  dropped, ``trapezoid``), not as the equal Mann-Whitney U / (n_fit x n_unfit), which can differ
  in the last bit: ProteinGym's number comes out to the last bit, without scikit-learn at run time.
* ``mcc``: Matthews correlation of DMS_score_bin with the score cut at its median (score >=
  median counts as fit), ProteinGym's ``matthews_corrcoef`` call written out (0 when a margin
  is empty, as scikit-learn returns).
* ``ndcg``: ProteinGym's ``calc_ndcg``: gains are DMS_score min-max scaled to [0, 1]; DCG over
  the top 10% of rows by model score (k = floor(n / 10)), each gain divided by log2(rank + 1);
  normalised by the DCG of the ideal (true) order.
* ``top10_recall``: ProteinGym's ``calc_toprecall``: of the rows whose DMS_score is at or above
  its 90th percentile, the share whose score is also at or above the score's 90th percentile
  (``>=`` since f5e47f1; a side-branch commit, a6fc27f, still had ``>``, which drops the rows
  tied at the percentile: on assays with repeated values, such as Tsuboyama's, that changes the
  recall).

A statistic that is undefined on the rows at hand is None (JSON null): fewer than 2 rows or a
constant column (spearman), no DMS_score_bin or only one class in it (auc, mcc; ProteinGym would
report NaN and 0 there), fewer than 10 rows or a constant DMS_score (ndcg).
"""

from __future__ import annotations

import math

import numpy as np
import scipy.stats

from flamino_core.variants.dms import DmsScores

_trapezoid = getattr(np, "trapezoid", None) or np.trapz  # numpy >= 2 / 1.x
TOP_PERCENT = 10  # ProteinGym's top=10 (NDCG) and top_true=top_model=10 (recall)
# The metrics JSON, in this order (the names users script against: keep them exactly).
METRICS_KEYS = ("spearman", "auc", "mcc", "ndcg", "top10_recall", "n_scored", "n_skipped", "n_excluded", "model",
                "strategy")


def agreement_metrics(dms_score, model_score, dms_score_bin=None) -> dict[str, float | None]:
    """``spearman``, ``auc``, ``mcc``, ``ndcg``, ``top10_recall`` for paired arrays.

    Args:
      dms_score: (n,) experimental fitness, higher = fitter, no NaN.
      model_score: (n,) model scores, no NaN.
      dms_score_bin: (n,) 1/0 fit labels, NaN where unknown; None when the assay has none.

    Returns:
      The five statistics (None where undefined, see the module docstring).
    """
    true = np.asarray(dms_score, dtype=np.float64)
    pred = np.asarray(model_score, dtype=np.float64)
    metrics = {"spearman": _spearman(true, pred), "auc": None, "mcc": None,
               "ndcg": calc_ndcg(true, pred), "top10_recall": calc_top_recall(true, pred) if len(true) else None}
    if dms_score_bin is not None:
        bins = np.asarray(dms_score_bin, dtype=np.float64)
        known = ~np.isnan(bins)
        labels, scores = bins[known].astype(int), pred[known]
        if 0 < labels.sum() < len(labels):
            metrics["auc"] = _auc(labels, scores)
            metrics["mcc"] = _mcc(labels, (pred >= np.median(pred))[known])
    return metrics


def _spearman(true: np.ndarray, pred: np.ndarray) -> float | None:
    if len(true) < 2 or np.ptp(true) == 0 or np.ptp(pred) == 0:
        return None
    return float(scipy.stats.spearmanr(true, pred).statistic)


def _auc(labels: np.ndarray, scores: np.ndarray) -> float:
    """scikit-learn's ``roc_auc_score`` (``roc_curve`` with ``drop_intermediate``, then ``auc``)."""
    order = np.argsort(scores, kind="mergesort")[::-1]  # descending, ties in a fixed order
    ranked, fit = scores[order], labels[order].astype(np.float64)
    ends = np.r_[np.flatnonzero(np.diff(ranked)), len(ranked) - 1]  # last row of each distinct score
    tps = np.cumsum(fit)[ends]
    fps = 1 + ends - tps
    if len(fps) > 2:  # drop points collinear with their neighbours, as roc_curve does
        keep = np.r_[True, np.logical_or(np.diff(fps, 2), np.diff(tps, 2)), True]
        fps, tps = fps[keep], tps[keep]
    tpr, fpr = np.r_[0.0, tps] / tps[-1], np.r_[0.0, fps] / fps[-1]
    return float(_trapezoid(tpr, fpr))


def _mcc(labels: np.ndarray, predicted_fit: np.ndarray) -> float:
    tp = float(np.sum((labels == 1) & predicted_fit))
    tn = float(np.sum((labels == 0) & ~predicted_fit))
    fp = float(np.sum((labels == 0) & predicted_fit))
    fn = float(np.sum((labels == 1) & ~predicted_fit))
    denominator = math.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    return (tp * tn - fp * fn) / denominator if denominator else 0.0


def calc_ndcg(true: np.ndarray, pred: np.ndarray, top: int = TOP_PERCENT) -> float | None:
    """ProteinGym's quantile NDCG (``calc_ndcg(y_true, y_score)`` with its defaults)."""
    k = int(np.floor(len(true) * top / 100))
    if k == 0 or np.ptp(true) == 0:
        return None
    gains = (true - true.min()) / (true.max() - true.min())
    # The same double argsort (numpy's default sort) as ProteinGym, so tied scores rank alike, and
    # the same sums: zero gains left out, then added in row order, so the result is its float.
    ranks = np.argsort(np.argsort(-pred)) + 1
    ideal_ranks = np.argsort(np.argsort(-gains)) + 1
    dcg, idcg = _discounted_gain(gains, ranks, k), _discounted_gain(gains, ideal_ranks, k)
    return dcg / idcg if idcg else None


def _discounted_gain(gains: np.ndarray, ranks: np.ndarray, k: int) -> float:
    top = (ranks <= k) & (gains != 0)
    return float(np.sum(gains[top] / np.log2(ranks[top] + 1)))


def calc_top_recall(true: np.ndarray, pred: np.ndarray, top: int = TOP_PERCENT) -> float:
    """ProteinGym's ``calc_toprecall``: at or above (``>=``) the 90th percentiles (numpy's default
    linear interpolation), as since ProteinGym commit f5e47f1."""
    top_true = true >= np.percentile(true, 100 - top)
    top_pred = pred >= np.percentile(pred, 100 - top)
    return float((top_true & top_pred).sum() / top_true.sum()) if top_true.sum() > 0 else 0.0


def dms_metrics(scores: DmsScores, *, model: str, singles_only: bool = False) -> dict:
    """The metrics JSON of a scored DMS table.

    Args:
      scores: from ``dms.score_dms``.
      model: the model identifier, recorded as given.
      singles_only: use single substitutions only (the usable multi-mutant rows count as
        ``n_excluded``: left out by choice, not skipped).

    Returns:
      Exactly the keys of ``METRICS_KEYS``: ``spearman``, ``auc``, ``mcc``, ``ndcg``,
      ``top10_recall`` (None where undefined), ``n_scored`` (rows used), ``n_skipped`` (rows
      that could not be used: not scored, no DMS_score, a repeated mutant), ``n_excluded``
      (usable rows left out by ``singles_only``), ``model``, ``strategy``: what ``flamino dms
      --metrics`` writes.
    """
    used = scores.rows_used(singles_only)
    frame = scores.frame
    bins = frame["DMS_score_bin"].to_numpy(dtype=np.float64)[used] if scores.dms.has_bins else None
    metrics = agreement_metrics(frame["DMS_score"].to_numpy(dtype=np.float64)[used],
                                frame["score"].to_numpy(dtype=np.float64)[used], bins)
    usable = scores.rows_used(False)
    return {**metrics, "n_scored": int(used.sum()), "n_skipped": int(len(frame) - usable.sum()),
            "n_excluded": int(usable.sum() - used.sum()), "model": model, "strategy": scores.strategy}

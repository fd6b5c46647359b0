"""Models compared on one DMS table (#35 item 5): up to ``MAX_MODELS`` models (an ensemble counts
as one) score the same rows; each model's agreement with the experiment (ProteinGym's metrics,
``metrics.agreement_metrics``), how the models agree with each other (Spearman between their
scores, and the share of one model's top 10% that is also in the other's), and one column of
scores per model.

The rows compared are the rows every model's statistics use (the same for every model: which
rows can be scored depends on the table and the wild type, not on the model).
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Sequence

import numpy as np
import pandas as pd
import scipy.stats

from flamino_core.variants.dms import DmsScores
from flamino_core.variants.ensemble import member_columns
from flamino_core.variants.metrics import TOP_PERCENT, agreement_metrics

MAX_MODELS = 4  # side by side: more columns than a table or a scatter matrix shows well


@dataclasses.dataclass
class Comparison:
    """Several models' scores of one table and how they agree."""

    models: list[str]  # the identifiers, as given
    columns: list[str]  # score_<name>, one per model, in that order
    frame: pd.DataFrame  # the first model's scored table, plus one column per model
    used: np.ndarray  # (rows,) bool: the rows the statistics use
    metrics: dict[str, dict]  # model -> agreement with the experiment (spearman, auc, mcc, ndcg, top10_recall)
    spearman_between: pd.DataFrame  # models x models
    top_shared: pd.DataFrame  # models x models: share of the row model's top 10% in the column model's

    def as_json(self) -> dict:
        """What ``flamino dms --compare`` writes: per model its metrics, and the two agreement tables."""
        def table(frame: pd.DataFrame) -> dict:
            return {a: {b: _number(frame.loc[a, b]) for b in frame.columns} for a in frame.index}

        return {"models": self.models, "n_scored": int(self.used.sum()), "metrics": self.metrics,
                "spearman_between_models": table(self.spearman_between),
                f"top{TOP_PERCENT}_shared": table(self.top_shared)}


def top_shared(a: np.ndarray, b: np.ndarray, top: int = TOP_PERCENT) -> float | None:
    """The share of ``a``'s top ``top`` percent (at or above its 90th percentile, as ProteinGym's
    top recall draws the line) that is also in ``b``'s."""
    if len(a) == 0:
        return None
    top_a, top_b = a >= np.percentile(a, 100 - top), b >= np.percentile(b, 100 - top)
    return float((top_a & top_b).sum() / top_a.sum())


def compare_models(score: Callable[[str], DmsScores], models: Sequence[str], singles_only: bool = False) -> Comparison:
    """Score the table with each model (``score(identifier)``, one after the other) and compare.

    Raises:
      ValueError: no model, more than ``MAX_MODELS``, or one named twice.
    """
    models = list(models)
    if not 1 <= len(models) <= MAX_MODELS or len(set(models)) != len(models):
        raise ValueError(f"compare 1 to {MAX_MODELS} different models, not {len(models)}: {', '.join(models)}")
    scored = [score(model) for model in models]
    columns = member_columns(models)
    frame = scored[0].frame.copy()
    status = frame.pop("status")
    for column, result in zip(columns, scored):
        frame[column] = result.frame["score"].to_numpy(dtype=float)
    frame["status"] = status
    used = scored[0].rows_used(singles_only)
    for result in scored[1:]:
        used &= result.rows_used(singles_only)
    truth = frame["DMS_score"].to_numpy(dtype=float)[used]
    bins = frame["DMS_score_bin"].to_numpy(dtype=float)[used] if scored[0].dms.has_bins else None
    values = {m: frame[c].to_numpy(dtype=float)[used] for m, c in zip(models, columns)}
    metrics = {m: agreement_metrics(truth, values[m], bins) for m in models}
    between = pd.DataFrame({b: {a: _spearman(values[a], values[b]) for a in models} for b in models})
    shared = pd.DataFrame({b: {a: top_shared(values[a], values[b]) for a in models} for b in models})
    return Comparison(models, columns, frame, used, metrics, between.loc[models, models], shared.loc[models, models])


def _spearman(a: np.ndarray, b: np.ndarray) -> float | None:
    if len(a) < 2 or np.ptp(a) == 0 or np.ptp(b) == 0:  # undefined, as metrics says for the experiment
        return None
    return float(scipy.stats.spearmanr(a, b).statistic)


def _number(value) -> float | None:
    return None if value is None or (isinstance(value, float) and not np.isfinite(value)) else float(value)

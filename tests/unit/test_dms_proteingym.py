"""Issue 23 item 3: flamino's DMS metrics equal ProteinGym's current functions, at full precision.

Imports nothing from ProteinGym. ``proteingym_*`` below are written from
``proteingym/performance_DMS_benchmarks.py`` of github.com/OATML-Markslab/ProteinGym at commit
bb685245f8f4bb95a5b54b470396c23826cd6284 (HEAD when read; ``calc_toprecall`` unchanged since
f5e47f126ddcf6aeb6cbc10250678208bfa21ae2, "Fixed bug w/ MSAT fitness and Top-k recall", which
made it ``>=``): ``minmax``, ``calc_ndcg``, ``calc_toprecall`` line for line, and the per-assay
statistics as its ``main`` computes them (``spearmanr``, ``roc_auc_score``, the median cut and
``matthews_corrcoef``), with the same scipy / scikit-learn calls.

Real assays: every ProteinGym substitution file in ``../shared/dms/`` (today
A0A1I9GEU1_NEIME_Kennouche_2019, 922 rows) and ``tests/data/dms/`` (TCRG1_MOUSE_Rocklin_2023_1E0L,
1,058 rows, tests/data/SOURCES.md), each whole and cut to its first 901 rows: with n - 1 a
multiple of 10 the 90th percentile is a value of the data (PIN1_HUMAN_Tsuboyama_2023_1I6C has
801 rows), which ``>`` leaves out of the top 10% and ``>=`` keeps. Model scores: flamino's own
wt-marginals scores of the assay under an untrained test model (random weights: the numbers
are not biology; the metrics only need a real pipeline's output to compare on).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr
from sklearn.metrics import matthews_corrcoef, roc_auc_score

from flamino_core import Engine, load_weights
from flamino_core.variants.dms import read_dms, score_dms
from flamino_core.variants.metrics import agreement_metrics, calc_top_recall, dms_metrics

DMS_DIR = Path(__file__).resolve().parents[3] / "shared" / "dms"
OWN_DMS_DIR = Path(__file__).resolve().parents[1] / "data" / "dms"  # committed with the tests: always there
ASSAYS = sorted([*DMS_DIR.glob("*.csv"), *OWN_DMS_DIR.glob("*.csv")])


# --- ProteinGym, written again (see the module docstring) ---------------------------------------
def proteingym_minmax(x):
    return (x - np.min(x)) / (np.max(x) - np.min(x))


def proteingym_calc_ndcg(y_true, y_score, top=10):
    k = np.floor(y_true.shape[0] * (top / 100)).astype(int)
    gains = proteingym_minmax(y_true)
    ranks = np.argsort(np.argsort(-y_score)) + 1
    ranks_k, gains_k = ranks[ranks <= k], gains[ranks <= k]
    ranks_fil, gains_fil = ranks_k[gains_k != 0], gains_k[gains_k != 0]
    if len(ranks_fil) == 0:
        return 0
    dcg = np.sum([g / np.log2(r + 1) for r, g in zip(ranks_fil, gains_fil)])
    ideal_ranks = np.argsort(np.argsort(-gains)) + 1
    ideal_ranks_k, ideal_gains_k = ideal_ranks[ideal_ranks <= k], gains[ideal_ranks <= k]
    ideal_ranks_fil, ideal_gains_fil = ideal_ranks_k[ideal_gains_k != 0], ideal_gains_k[ideal_gains_k != 0]
    idcg = np.sum([g / np.log2(r + 1) for r, g in zip(ideal_ranks_fil, ideal_gains_fil)])
    return dcg / idcg


def proteingym_calc_toprecall(true_scores, model_scores, top_true=10, top_model=10):
    top_true = true_scores >= np.percentile(true_scores, 100 - top_true)
    top_model = model_scores >= np.percentile(model_scores, 100 - top_model)
    tp = top_true & top_model
    return tp.sum() / top_true.sum() if top_true.sum() > 0 else 0


def proteingym_metrics(merged: pd.DataFrame, score: str) -> dict:
    """One assay's row of ProteinGym's performance tables (its ``main``, per DMS)."""
    out = {"spearman": spearmanr(merged["DMS_score"], merged[score])[0]}
    out["auc"] = roc_auc_score(y_true=merged["DMS_score_bin"], y_score=merged[score])
    median_cutoff = merged[score].median()
    predicted = merged[score].map(lambda x: 1 if x >= median_cutoff else 0)
    out["mcc"] = matthews_corrcoef(y_true=merged["DMS_score_bin"], y_pred=predicted)
    out["ndcg"] = proteingym_calc_ndcg(merged["DMS_score"].values, merged[score].values)
    out["top10_recall"] = proteingym_calc_toprecall(merged["DMS_score"].values, merged[score].values)
    return out


# --- the comparison ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def scored_assays():
    if not ASSAYS:
        pytest.skip(f"no ProteinGym assay in {DMS_DIR}")
    engine = Engine(load_weights("random:tiny:1"))
    return {path.stem: score_dms(engine, read_dms(path), "wt-marginals") for path in ASSAYS}


@pytest.mark.parametrize("rows", [None, 901])
def test_metrics_equal_proteingym_on_real_assays(scored_assays, rows):
    assert "TCRG1_MOUSE_Rocklin_2023_1E0L" in scored_assays  # the committed one; with ../shared's: two
    for name, scored in scored_assays.items():
        frame = scored.frame[scored.rows_used()].iloc[:rows]
        merged = frame.assign(DMS_score=frame["DMS_score"].astype(float), score=frame["score"].astype(float))
        ours = agreement_metrics(merged["DMS_score"], merged["score"], merged["DMS_score_bin"])
        theirs = proteingym_metrics(merged, "score")
        for key, value in theirs.items():
            assert ours[key] == float(value), (name, rows, key, ours[key], value)  # full precision: the same float
        if rows is None:
            assert dms_metrics(scored, model="random:tiny:1")["top10_recall"] == float(theirs["top10_recall"])


def test_top10_recall_keeps_rows_tied_at_the_percentile(scored_assays):
    """With n - 1 a multiple of 10 the 90th percentile is a row's own value: >= counts it."""
    scored = next(iter(scored_assays.values()))
    frame = scored.frame[scored.rows_used()].iloc[:901]
    true, pred = frame["DMS_score"].to_numpy(float), frame["score"].to_numpy(float)
    at_percentile = (true == np.percentile(true, 90)).sum() + (pred == np.percentile(pred, 90)).sum()
    assert at_percentile >= 1  # the case the old strict ">" got wrong
    strict = ((true > np.percentile(true, 90)) & (pred > np.percentile(pred, 90))).sum() / (true > np.percentile(true, 90)).sum()
    assert calc_top_recall(true, pred) == proteingym_calc_toprecall(true, pred)
    assert calc_top_recall(true, pred) != strict

"""Predict a measured property from your own labels (docs/predict.md).

A labelled table (sequences, or mutants of one wild type, with a numeric or categorical
target) becomes features (the model's mean embeddings, one-hot residues, or one-hot plus the
model's zero-shot score: the "augmented" model of Hsu et al. 2022), a scikit-learn linear model
is fitted with its regularisation chosen by inner cross-validation, and every row gets an
out-of-fold prediction under the chosen folds, so the statistics say how well the predictor
does on rows it never saw.

* ``table``: reading the labelled table (``LabelledTable``), its target and its folds.
* ``features``: the feature sets and their costs (embeddings from the result store).
* ``fitting``: one feature matrix's linear model: the estimators, out-of-fold predictions, the
  final fit, the learning curve.
* ``table_fit``: a labelled table's whole fit, as ``flamino fit`` and the Predict page run it
  (``fit_table``): every feature set on the same folds through ``fitting``, side by side, and the
  predictor kept; its work said before it runs (``planned_work``, ``planned_fits``).
* ``fit_plan``: that fit as a plan (``FitPlan``, ``jobs/plan.py``'s protocol) for a background
  job: a heavy-job slot per fit, a time budget, its estimate (``fit_seconds``).
* ``evaluation``: Spearman / AUC / MCC with bootstrap intervals; the comparison of feature sets.
* ``saved``: the fitted predictor as JSON + NPZ (no pickle), reloaded by ``flamino predict``.
* ``figures``: the out-of-fold scatter, the comparison, the learning curve, the prediction map.
"""

from __future__ import annotations

from flamino_core.doors import lazy_door

# The door (doors.py): each name the app imports from this package -> its module here.
_EXPORTS = {
    **dict.fromkeys(["FitCost", "FitLimits", "problem", "record_fit_times", "seconds_here",
                     "worker_start_seconds"], "cost"),
    "FeatureError": "features",
    **dict.fromkeys(["FitPlan", "fit_seconds"], "fit_plan"),
    **dict.fromkeys(["Predictor", "PredictorError", "from_zip", "zip_bytes"], "saved"),
    **dict.fromkeys(["LabelError", "LabelledTable", "PROTEINGYM_FOLD_COLUMNS", "RANDOM_FOLDS",
                     "parse_labelled_table", "read_table_text"], "table"),
    **dict.fromkeys(["FITS", "FitResult", "RANDOM_WEIGHTS_NOTE", "feature_sets", "fit_table",
                     "plan_line", "planned_fits", "planned_work"], "table_fit"),
    "FitWorker": "worker",
}
__all__, __getattr__, __dir__ = lazy_door(__name__, _EXPORTS)

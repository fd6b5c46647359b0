"""One fit, as ``flamino fit`` and the app's Predict page run it: features, folds, out-of-fold
predictions, the comparison of feature sets on the same folds, learning curves, the predictor.

Every feature set that applies is evaluated on the *same* folds, side by side with the one chosen
(whose predictions and model are the output): the model-free baseline (one-hot, or amino-acid
composition for sequences of different lengths; for classes also the majority class), the
embedding, the augmented model and, for variant tables, the zero-shot score alone (no labels).
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np
import pandas as pd

from ..options import DEFAULT_VARIANT_STRATEGY
from . import evaluation, features, fitting
from .features import COMPOSITION, FeatureSpec, Inputs
from .saved import Predictor
from .table import RANDOM_FOLDS, SEED, LabelledTable, fold_ids

RANDOM_WEIGHTS_NOTE = ("the model has random weights (a test model): its embeddings and scores carry no biology; "
                       "only the one-hot and composition baselines mean anything here")
ZERO_SHOT = "zero-shot"
MAJORITY = "majority"
StageProgress = Callable[[str], Callable[[int, int], None] | None]


@dataclasses.dataclass
class FitResult:
    """What a fit produced: the chosen feature set's out-of-fold predictions and predictor, and
    every feature set's statistics on the same folds."""

    table: LabelledTable
    spec: FeatureSpec
    folds_name: str
    folds: np.ndarray  # (rows,) fold of each evaluated row, -1 elsewhere
    result: fitting.CrossValidated
    predictor: Predictor
    comparison: list[dict]
    curves: dict[str, list[dict]]
    zero_shot: np.ndarray | None  # (rows,) the model's score of each variant (variant tables)
    notes: list[str]

    @property
    def model_is_random(self) -> bool:
        """The model had random weights: its feature sets' numbers are noise."""
        return RANDOM_WEIGHTS_NOTE in self.notes

    @property
    def headline(self) -> dict:
        """The chosen feature set's row of ``comparison``."""
        return next(row for row in self.comparison if row["features"] == self.spec.kind)

    def output_frame(self) -> pd.DataFrame:
        """Every input column, then ``prediction`` and ``fold`` (empty: predicted by the final
        model, never held out), and for classes each one's probability."""
        frame = self.table.frame.copy()
        frame["prediction"] = self.result.predictions
        frame["fold"] = pd.array(np.where(self.result.evaluated, self.folds, -1), dtype="Int64")
        frame.loc[~self.result.evaluated, "fold"] = pd.NA
        if self.result.probabilities is not None:
            for j, label in enumerate(self.table.classes):
                frame[f"probability_{label}"] = self.result.probabilities[:, j]
        return frame

    def metrics(self, model: str | None = None) -> dict:
        """The metrics JSON of ``flamino fit --metrics``."""
        head = self.headline
        statistics = {key: head[key] for key in head if key not in ("features", "label", "uses_model", "uses_labels")}
        return {
            "target": self.table.target, "task": self.table.task, "features": self.spec.kind,
            "feature_set": self.spec.label, "model": model,
            "random_weights": self.predictor.random_weights,
            "folds": self.folds_name, "n_folds": int(len(set(self.folds[self.folds >= 0]))), "seed": SEED,
            "n_rows": int(len(self.table.frame)), "n_usable": int(self.table.usable.sum()),
            "n_labelled": int(self.table.labelled.sum()), "n_evaluated": int(self.result.evaluated.sum()),
            **statistics,
            "regularisation": self.predictor.model.regularisation,
            "comparison": self.comparison, "learning_curve": self.curves,
            "notes": self.notes, "issues": self.table.issues,
        }


def table_inputs(table: LabelledTable) -> tuple[Inputs, np.ndarray]:
    """The usable rows as feature ``Inputs``, and their row numbers."""
    rows = np.flatnonzero(table.usable)
    variants = [table.variants[r] for r in rows] if table.is_variant_table else None
    return Inputs([table.sequences[r] for r in rows], variants, table.wild_type), rows


def feature_sets(table: LabelledTable, with_model: bool) -> list[str]:
    """The feature sets that apply to ``table``, baseline first."""
    inputs, _ = table_inputs(table)
    kinds = ["onehot" if table.equal_lengths else COMPOSITION]
    if with_model:
        kinds += [k for k in ("embedding", "augmented") if features.problem(k, inputs) is None]
    return kinds


def planned_work(table: LabelledTable, kinds: list[str], engine, *, layer: int | None = None,
                 zero_shot: str = DEFAULT_VARIANT_STRATEGY, store=None) -> list[tuple[str, int, int, str]]:
    """What the model must still run for ``kinds`` on ``table``: ``(feature set, passes to run,
    passes asked, unit)`` for each feature set that uses it (said before the work; what the
    result store holds is not run again)."""
    if engine is None:
        return []
    inputs, _ = table_inputs(table)
    length = len(inputs.sequences[0]) if table.equal_lengths else None
    plan = []
    for name in kinds:
        spec = features.spec_for(name, num_layers=engine.config.num_layers, layer=layer, zero_shot=zero_shot,
                                 length=length)
        if spec.uses_model:
            plan.append((spec.label, *features.missing_passes(spec, inputs, engine, store)))
    return plan


def plan_line(label: str, missing: int, asked: int, unit: str) -> str:
    """``embedding (layer 6): 922 of 922 unmasked passes (...) to run, 0 stored``."""
    return f"{label}: {missing:,} of {asked:,} {unit} to run, {asked - missing:,} stored"


def fit_table(
    table: LabelledTable,
    kind: str = features.DEFAULT_FEATURES,
    *,
    engine=None,
    model: str | None = None,
    folds: str = RANDOM_FOLDS,
    layer: int | None = None,
    zero_shot: str = DEFAULT_VARIANT_STRATEGY,
    compare: bool = True,
    curves: bool = True,
    store=None,
    progress: StageProgress | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> FitResult:
    """Fit ``kind`` features on ``table`` under ``folds``, with every other feature set beside it.

    Args:
      table: from ``table.parse_labelled_table``.
      kind: one of ``features.FEATURE_SETS`` (the predictor kept and written).
      engine: the model (embedding and augmented features; None: model-free sets only).
      model: the model identifier as the user gave it (kept in the predictor).
      folds: ``random`` or a fold column (``table.fold_ids``).
      layer: the embedding layer (default: the last).
      zero_shot: the variant strategy of the augmented model's score.
      compare: also evaluate the other feature sets (the comparison table).
      curves: learning curves for each evaluated feature set.
      store: the result store.
      progress: gives a (done, total) callback for a named stage (``"embeddings"``, ...).
      cancelled: polled between groups of model passes.

    Raises:
      features.FeatureError, table.LabelError: the choice does not apply to the table.
    """
    inputs, rows = table_inputs(table)
    why = features.problem(kind, inputs)
    if why:
        raise features.FeatureError(why)
    if kind in ("embedding", "augmented") and engine is None:
        raise features.FeatureError(f"{kind} features need a model")
    fold_of = fold_ids(table, folds)
    num_layers = engine.config.num_layers if engine is not None else None
    length = len(inputs.sequences[0]) if table.equal_lengths else None
    kinds = feature_sets(table, engine is not None) if compare else [kind]
    if kind not in kinds:
        kinds.append(kind)
    stage = progress or (lambda name: None)
    specs, matrices = {}, {}
    for name in kinds:
        spec = features.spec_for(name, num_layers=num_layers, layer=layer, zero_shot=zero_shot, length=length)
        X = features.build(spec, inputs, engine, store=store, progress=stage(spec.label), cancelled=cancelled)
        specs[name], matrices[name] = spec, _full(X, rows, len(table.frame))
    zero = None
    if table.is_variant_table and engine is not None and compare:
        scores = None
        if "augmented" in matrices:
            scores = matrices["augmented"][:, -1] / features.DENSITY_SCALE
        if scores is None:
            scores = features.zero_shot_scores(engine, table.wild_type, inputs.variants, zero_shot)
            scores = _full(scores[:, None], rows, len(table.frame))[:, 0]
        zero = scores
    comparison, learning, chosen = [], {}, None
    for name in kinds:
        spec = specs[name]
        result = fitting.cross_validate(matrices[name], table, fold_of, spec.standardise)
        comparison.append(_row(name, spec.label, spec.uses_model, True, table, result))
        if curves:
            learning[name] = fitting.learning_curve(matrices[name], table, fold_of, spec.standardise, result)
        if name == kind:
            chosen = result
    if zero is not None:
        evaluated = chosen.evaluated
        truth = table.values[evaluated]
        stats = evaluation.zero_shot_metrics(truth, zero[evaluated], table.task, table.classes)
        comparison.append({"features": ZERO_SHOT, "label": f"zero-shot score alone ({zero_shot}, no labels)",
                           "uses_model": True, "uses_labels": False, **stats})
    if table.task == "classification":  # free: always beside the classifier, even without --compare
        majority = fitting.baseline_majority(table, fold_of)
        comparison.append(_row(MAJORITY, "majority class (no features)", False, True, table, majority))
    random_weights = bool(getattr(engine, "is_random", False)) and specs[kind].uses_model
    notes = [RANDOM_WEIGHTS_NOTE] if getattr(engine, "is_random", False) else []
    predictor = Predictor.from_fit(specs[kind], chosen.final, table, engine=engine if specs[kind].uses_model else None,
                                   model_id=model, random_weights=random_weights,
                                   training={"folds": folds, "n_labelled": int(table.labelled.sum()),
                                             **{k: v for k, v in comparison[kinds.index(kind)].items()
                                                if k not in ("features", "label", "uses_model", "uses_labels")}})
    return FitResult(table, specs[kind], folds, fold_of, chosen, predictor, comparison, learning, zero, notes)


def _full(X, rows: np.ndarray, n: int):
    """``X`` of the usable ``rows`` placed in a (n, p) matrix (zeros for unusable rows, never
    read); sparse stays sparse."""
    if hasattr(X, "tocsr"):
        import scipy.sparse

        place = scipy.sparse.csr_matrix((np.ones(len(rows)), (rows, np.arange(len(rows)))), shape=(n, len(rows)))
        return (place @ X).tocsr()
    full = np.zeros((n, X.shape[1]), dtype=np.float64)
    full[rows] = X
    return full


def _row(name: str, label: str, uses_model: bool, uses_labels: bool, table: LabelledTable,
         result: fitting.CrossValidated) -> dict:
    evaluated = result.evaluated
    truth = table.values[evaluated]
    if table.task == "regression":
        stats = evaluation.regression_metrics(truth, result.predictions[evaluated])
    else:
        stats = evaluation.classification_metrics(truth, result.predictions[evaluated],
                                                  result.probabilities[evaluated], table.classes)
    return {"features": name, "label": label, "uses_model": uses_model, "uses_labels": uses_labels, **stats}

"""A labelled table's whole fit, as ``flamino fit`` and the app's Predict page run it: features,
folds, out-of-fold predictions, the comparison of feature sets on the same folds, learning
curves, the predictor. (One feature matrix's linear model is ``fitting.py``'s.)

Every feature set that applies is evaluated on the *same* folds, side by side with the one chosen
(whose predictions and model are the output): the model-free baseline (one-hot, or amino-acid
composition for sequences of different lengths; for classes also the majority class), the
embedding, the augmented model and, for variant tables, the zero-shot score alone (no labels).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from typing import Callable, ContextManager

import numpy as np
import pandas as pd

from flamino_core.progress import ProgressFn, StageProgress
from flamino_core.options import DEFAULT_VARIANT_STRATEGY
from flamino_core.predictors import cost as costs
from flamino_core.predictors import evaluation, features, fitting
from flamino_core.predictors.features import COMPOSITION, FeatureSpec, Inputs
from flamino_core.predictors.saved import Predictor
from flamino_core.predictors.table import RANDOM_FOLDS, SEED, LabelledTable, fold_ids
from flamino_core.predictors.worker import run_on_one_thread

RANDOM_WEIGHTS_NOTE = ("the model has random weights (a test model): its embeddings and scores carry no biology; "
                       "only the one-hot and composition baselines mean anything here")
ZERO_SHOT = "zero-shot"
MAJORITY = "majority"
WeighedProgress = Callable[[int, int, tuple[float, float]], None]  # (fits done, fits, (work done, work))
FITS = "fits"  # the stage of ``fit_table``'s progress that counts scikit-learn fits


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
        statistics = _statistics(head)
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
    """``embedding (layer 6): 922 of 922 unmasked passes (...) to run, 0 stored``; once all are
    stored (after a fit), ``...: nothing left to run, all 922 unmasked passes (...) stored``."""
    if asked and not missing:
        return f"{label}: nothing left to run, all {asked:,} {unit} stored"
    return f"{label}: {missing:,} of {asked:,} {unit} to run, {asked - missing:,} stored"


def planned_fits(table: LabelledTable, kinds: list[str], engine, *, folds: str = RANDOM_FOLDS,
                 layer: int | None = None, curves: bool = True, compare: bool = True) -> costs.FitCost:
    """The scikit-learn work of fitting ``kinds`` on ``table`` under ``folds`` (said before the
    work, beside the model passes; ``cost.problem`` holds it to a server's bounds), with the
    comparison's zero-shot row of a variant table (``compare``, a model).

    Raises:
      table.LabelError: the folds do not apply to the table.
    """
    inputs, _ = table_inputs(table)
    length = len(inputs.sequences[0]) if table.equal_lengths else None
    num_layers = engine.config.num_layers if engine is not None else None
    width = engine.config.embed_dim if engine is not None else None
    labels = [(k, features.spec_for(k, num_layers=num_layers, layer=layer, length=length).label) for k in kinds]
    n_folds = costs.folds_count(fold_ids(table, folds))
    return costs.fit_cost(table.task, int(table.labelled.sum()), n_folds, labels, length, width, curves,
                          classes=len(table.classes),
                          zero_shot=compare and table.is_variant_table and engine is not None)


class FitSteps:
    """Runs each scikit-learn fit of a whole fit inside ``each_fit()`` (a caller's context: a
    heavy-job slot, a time budget; it may raise to stop between two fits), through ``run_fit``
    (None: here; a server's: ``worker.FitWorker``, stoppable mid-fit), and counts it on
    ``report(done, total)``. With ``planned`` (the fit's ``cost.FitCost``) and ``weighed``, each
    fit and each bootstrap also counts its own work (``FitCost.schedule``):
    ``weighed(done, total, (work done, work in all))``, the operations the estimate counted."""

    def __init__(self, total: int, each_fit: Callable[[], ContextManager] | None = None,
                 report: ProgressFn | None = None, run_fit: Callable | None = None,
                 planned: costs.FitCost | None = None, weighed: WeighedProgress | None = None):
        self.done, self.total = 0, total
        self.each_fit = each_fit or contextlib.nullcontext
        self.report, self.weighed = report, weighed
        self.run_fit = run_fit or run_on_one_thread  # here, as in a worker: one thread
        fits, sides = planned.schedule() if planned is not None else ((), ())
        self._fits, self._sides = list(fits), list(sides)
        self.work_done, self.work_total = 0.0, planned.work if planned is not None else 0.0
        self._begun = False

    def _begin(self) -> None:
        """Before the first fit: the fits' stage is said at 0 of its work, so a progress line shows
        it while that fit runs (a 51-class fit's first fit took minutes, its line meanwhile still
        the model passes' "about 5 seconds left", issue #67)."""
        if self._begun:
            return
        self._begun = True
        if self.weighed is not None:
            self.weighed(0, self.total, (0.0, self.work_total))

    def side(self, work):
        """``work`` (a picklable callable: a comparison row's bootstrap intervals) where the fits
        run and in their context, so it waits its turn, counts in their time and stops with them,
        but is not counted as a fit (51 classes' 1,000 resampled AUCs took a minute a row)."""
        self._begin()
        with self.each_fit():
            value = self.run_fit(work)
        if self._sides:
            self._weigh(self._sides.pop(0))
        return value

    def __call__(self, fit):
        self._begin()
        with self.each_fit():
            value = self.run_fit(fit)
        self.done += 1
        self.total = max(self.total, self.done)  # the estimate counted the learning curve's sizes as 3
        if self.report is not None:
            self.report(self.done, self.total)
        self._weigh(self._fits.pop(0) if self._fits else 0.0)
        return value

    def _weigh(self, work: float) -> None:
        self.work_done += work
        self.work_total = max(self.work_total, self.work_done)
        if self.weighed is not None:
            self.weighed(self.done, self.total, (self.work_done, self.work_total))


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
    each_fit: Callable[[], ContextManager] | None = None,
    run_fit: Callable | None = None,
    weighed: WeighedProgress | None = None,
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
      progress: gives a (done, total) callback for a named stage (a feature set's label, then ``FITS``).
      cancelled: polled between groups of model passes.
      each_fit: a context held around each fit and each row's bootstrap (``FitSteps``).
      run_fit: runs each scikit-learn fit, a picklable callable (``FitSteps``; None: here, on one thread).
      weighed: the fits' progress with their work, as ``planned_fits`` counts it (``FitSteps``).

    Raises:
      features.FeatureError, table.LabelError: the choice does not apply to the table.
    """
    inputs, rows = table_inputs(table)
    _check_choice(kind, inputs, engine)
    fold_of = fold_ids(table, folds)
    kinds = feature_sets(table, engine is not None) if compare else [kind]
    if kind not in kinds:
        kinds.append(kind)
    stage = progress or (lambda name: None)
    built = {name: _feature_matrix(name, table, inputs, rows, engine, layer=layer, zero_shot=zero_shot, store=store,
                                   progress=stage, cancelled=cancelled) for name in kinds}
    specs, matrices = {n: b[0] for n, b in built.items()}, {n: b[1] for n, b in built.items()}
    zero = (_zero_shot_column(table, inputs, rows, engine, matrices, zero_shot)
            if table.is_variant_table and engine is not None and compare else None)
    planned = planned_fits(table, kinds, engine, folds=folds, layer=layer, curves=curves, compare=compare)
    steps = FitSteps(planned.fits, each_fit, stage(FITS), run_fit, planned, weighed)
    comparison, learning, results = _cross_validated(specs, matrices, table, fold_of, curves, steps)
    chosen = results[kind]
    comparison += _label_free_rows(table, fold_of, chosen, zero, zero_shot, steps)
    notes = [RANDOM_WEIGHTS_NOTE] if getattr(engine, "is_random", False) else []
    predictor = _predictor(specs[kind], chosen, table, engine, model, folds, comparison[kinds.index(kind)])
    return FitResult(table, specs[kind], folds, fold_of, chosen, predictor, comparison, learning, zero, notes)


def _check_choice(kind: str, inputs: Inputs, engine) -> None:
    """A FeatureError when ``kind`` does not apply to the inputs or needs a model not given."""
    why = features.problem(kind, inputs)
    if why:
        raise features.FeatureError(why)
    if kind in ("embedding", "augmented") and engine is None:
        raise features.FeatureError(f"{kind} features need a model")


def _feature_matrix(name: str, table: LabelledTable, inputs: Inputs, rows: np.ndarray, engine, *, layer,
                    zero_shot: str, store, progress: StageProgress, cancelled):
    """(spec, matrix over every table row) of feature set ``name``."""
    num_layers = engine.config.num_layers if engine is not None else None
    length = len(inputs.sequences[0]) if table.equal_lengths else None
    spec = features.spec_for(name, num_layers=num_layers, layer=layer, zero_shot=zero_shot, length=length)
    X = features.build(spec, inputs, engine, store=store, progress=progress(spec.label), cancelled=cancelled)
    return spec, _full(X, rows, len(table.frame))


def _cross_validated(specs: dict, matrices: dict, table: LabelledTable, fold_of: np.ndarray, curves: bool,
                     steps: FitSteps):
    """(comparison rows, learning curves, cross-validated results) of every feature set, in
    ``specs``' order, all on the same folds; each scikit-learn fit through ``steps``."""
    comparison, learning, results = [], {}, {}
    for name, spec in specs.items():
        result = fitting.cross_validate(matrices[name], table, fold_of, spec.standardise, step=steps)
        comparison.append(_row(name, spec.label, spec.uses_model, True, table, result, steps))
        if curves:
            learning[name] = fitting.learning_curve(matrices[name], table, fold_of, spec.standardise, result,
                                                    step=steps)
        results[name] = result
    return comparison, learning, results


def _zero_shot_column(table: LabelledTable, inputs: Inputs, rows: np.ndarray, engine, matrices: dict,
                      zero_shot: str) -> np.ndarray:
    """(rows,) the model's score of each variant: the augmented features' last column when they
    were built (it is that score, scaled), else computed."""
    if "augmented" in matrices:
        return matrices["augmented"][:, -1] / features.DENSITY_SCALE
    scores = features.zero_shot_scores(engine, table.wild_type, inputs.variants, zero_shot)
    return _full(scores[:, None], rows, len(table.frame))[:, 0]


def _label_free_rows(table: LabelledTable, fold_of: np.ndarray, chosen: fitting.CrossValidated,
                     zero: np.ndarray | None, zero_shot: str, steps: FitSteps) -> list[dict]:
    """The comparison's rows that learn nothing from features: the zero-shot score alone (on the
    chosen set's evaluated rows) and, for classes, the majority class."""
    rows = []
    if zero is not None:
        evaluated = chosen.evaluated
        truth = table.values[evaluated]
        stats = steps.side(functools.partial(evaluation.zero_shot_metrics, truth, zero[evaluated], table.task,
                                             table.classes))
        rows.append({"features": ZERO_SHOT, "label": f"zero-shot score alone ({zero_shot}, no labels)",
                     "uses_model": True, "uses_labels": False, **stats})
    if table.task == "classification":  # free: always beside the classifier, even without --compare
        majority = fitting.baseline_majority(table, fold_of)
        rows.append(_row(MAJORITY, "majority class (no features)", False, True, table, majority, steps))
    return rows


def _predictor(spec: FeatureSpec, chosen: fitting.CrossValidated, table: LabelledTable, engine, model: str | None,
               folds: str, headline: dict) -> Predictor:
    """The chosen feature set's final model, with how it was trained and evaluated."""
    random_weights = bool(getattr(engine, "is_random", False)) and spec.uses_model
    return Predictor.from_fit(spec, chosen.final, table, engine=engine if spec.uses_model else None,
                              model_id=model, random_weights=random_weights,
                              training={"folds": folds, "n_labelled": int(table.labelled.sum()),
                                        **_statistics(headline)})


def _statistics(row: dict) -> dict:
    """A comparison row's numbers, without the keys that name and describe its feature set."""
    return {key: row[key] for key in row if key not in ("features", "label", "uses_model", "uses_labels")}


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
         result: fitting.CrossValidated, steps: FitSteps) -> dict:
    evaluated = result.evaluated
    truth = table.values[evaluated]
    if table.task == "regression":
        work = functools.partial(evaluation.regression_metrics, truth, result.predictions[evaluated])
    else:
        work = functools.partial(evaluation.classification_metrics, truth, result.predictions[evaluated],
                                 result.probabilities[evaluated], table.classes)
    stats = steps.side(work)
    return {"features": name, "label": label, "uses_model": uses_model, "uses_labels": uses_labels, **stats}

"""A fitted predictor applied to new sequences: a table, FASTA records, or every single
substitution of a wild type (the prediction map, laid out like the substitution map)."""

from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np
import pandas as pd

from flamino_core.progress import ProgressFn
from flamino_core.alphabet import STANDARD_AMINO_ACIDS
from flamino_core.inputs.numbering import Numbering
from flamino_core.variants.notation import Substitution, Variant
from flamino_core.predictors import features
from flamino_core.predictors.features import Inputs
from flamino_core.predictors.saved import Predictor, PredictorError
from flamino_core.predictors.table import read_rows, read_table_text, variant_of



@dataclasses.dataclass
class Predictions:
    """Predicted values (regression) or classes, and each class's probability."""

    values: np.ndarray  # (n,)
    probabilities: np.ndarray | None  # (n, classes)


def check_engine(predictor: Predictor, engine) -> None:
    """Refuse a model other than the one the predictor's features came from."""
    if not predictor.spec.uses_model:
        return
    if engine is None:
        raise PredictorError(f"this predictor reads {predictor.spec.kind} features: it needs the model "
                             f"{predictor.model_id!r}")
    if predictor.model_fingerprint and engine.fingerprint != predictor.model_fingerprint:
        raise PredictorError(f"this predictor was fitted on the features of model {predictor.model_id!r} "
                             f"({predictor.model_fingerprint[:12]}); the model given has other weights or another "
                             "precision. Give the same model (-m)")


def predict(predictor: Predictor, inputs: Inputs, engine=None, *, store=None, progress: ProgressFn | None = None,
            cancelled: Callable[[], bool] | None = None) -> Predictions:
    """The predictor's output for ``inputs`` (features built as in the fit)."""
    check_engine(predictor, engine)
    if predictor.spec.kind == "augmented" and inputs.wild_type != predictor.wild_type:
        raise PredictorError("this augmented predictor scores mutants of the wild type it was fitted on; "
                             "these sequences are not")
    X = features.build(predictor.spec, inputs, engine, store=store, progress=progress, cancelled=cancelled)
    probabilities = predictor.model.probabilities(X) if predictor.task == "classification" else None
    return Predictions(predictor.model.predict(X), probabilities)


def inputs_for(predictor: Predictor, sequences: list[str], variants: list | None = None,
               wild_type: str | None = None) -> Inputs:
    """``Inputs`` for sequences, as substitutions of the predictor's wild type where they fit it."""
    wild_type = wild_type or predictor.wild_type
    if variants is None and wild_type is not None and all(len(s) == len(wild_type) for s in sequences):
        variants = [variant_of(wild_type, s, predictor.numbering, n) for n, s in enumerate(sequences)]
    return Inputs(list(sequences), variants, wild_type if variants is not None else None)


def table_inputs(predictor: Predictor, data: bytes | str, wild_type: str | None = None,
                 numbering: Numbering | None = None) -> tuple[pd.DataFrame, Inputs, np.ndarray, list[str]]:
    """A CSV to predict: (its frame, the usable rows' ``Inputs``, their row numbers, issues).

    A ``mutant`` column refers to ``wild_type`` (default: the predictor's), a sequence column
    holds proteins, as in the fit (``table.read_rows``); ``numbering`` numbers that column (default: the
    predictor's).
    """
    frame = read_table_text(data)
    issues: list[str] = []
    numbering = predictor.numbering if numbering is None else numbering
    sequences, variants, wild = read_rows(frame, wild_type or predictor.wild_type, numbering, issues)
    rows = np.flatnonzero([s is not None for s in sequences])
    kept = [variants[r] for r in rows] if wild is not None else None
    inputs = Inputs([sequences[r] for r in rows], kept, wild)
    return frame, inputs, rows, issues


def output_frame(predictor: Predictor, frame: pd.DataFrame, rows: np.ndarray, predictions: Predictions) -> pd.DataFrame:
    """``frame`` with ``prediction`` (and each class's probability) added; unusable rows empty."""
    out = frame.copy()
    values = np.full(len(frame), np.nan) if predictor.task == "regression" else np.full(len(frame), None, dtype=object)
    values[rows] = predictions.values
    out["prediction"] = values
    if predictions.probabilities is not None:
        for j, label in enumerate(predictor.model.classes):
            column = np.full(len(frame), np.nan)
            column[rows] = predictions.probabilities[:, j]
            out[f"probability_{label}"] = column
    return out


def single_substitutions(wild_type: str, numbering: Numbering = Numbering()) -> Inputs:
    """The wild type itself, then every single substitution (position by position, mutants in
    ``STANDARD_AMINO_ACIDS`` order, the wild-type letter skipped): 1 + 19 L rows, named in ``numbering``."""
    variants = [Variant(0, "", "", (), numbering.first)]
    sequences = [wild_type]
    for (index, wt), number in zip(enumerate(wild_type), numbering.numbers(len(wild_type))):
        for mt in STANDARD_AMINO_ACIDS:
            if mt == wt:
                continue
            name = f"{wt}{number}{mt}"
            variants.append(Variant(len(variants), name, name, (Substitution(index, wt, mt),), numbering.first))
            sequences.append(wild_type[:index] + mt + wild_type[index + 1:])
    return Inputs(sequences, variants, wild_type)


def map_cost(predictor: Predictor, wild_type: str, engine=None, store=None) -> tuple[int, int, str]:
    """(passes to run, passes asked, unit) for the prediction map of ``wild_type``."""
    if not predictor.spec.uses_model:
        return 0, 0, "passes"
    return features.missing_passes(predictor.spec, single_substitutions(wild_type, predictor.numbering), engine, store)


def prediction_map(predictor: Predictor, wild_type: str, engine=None, *, numbering: Numbering | None = None, store=None,
                   progress: ProgressFn | None = None,
                   cancelled: Callable[[], bool] | None = None) -> tuple[np.ndarray, float]:
    """(L, 20) the prediction for every single substitution, and the wild type's own prediction
    (its cells hold it). For classes: the probability of the last class. ``numbering``: the wild
    type's (default: the predictor's)."""
    inputs = single_substitutions(wild_type, predictor.numbering if numbering is None else numbering)
    result = predict(predictor, inputs, engine, store=store, progress=progress, cancelled=cancelled)
    values = result.probabilities[:, -1] if result.probabilities is not None else result.values.astype(np.float64)
    grid = np.full((len(wild_type), 20), values[0])
    column = {aa: j for j, aa in enumerate(STANDARD_AMINO_ACIDS)}
    for value, variant in zip(values[1:], inputs.variants[1:]):
        (s,) = variant.substitutions
        grid[s.index, column[s.mt]] = value
    return grid, float(values[0])


def map_rows(record_id: str, wild_type: str, grid: np.ndarray, numbering: Numbering = Numbering()) -> pd.DataFrame:
    """The map as a table: ``record_id, position, wt, mt, prediction`` (as ``flamino score`` lays
    out scores), the wild-type letter's row holding the wild type's own prediction."""
    positions = np.repeat(numbering.number(np.arange(len(wild_type))), 20)
    return pd.DataFrame({
        "record_id": record_id, "position": positions, "wt": np.repeat(list(wild_type), 20),
        "mt": list(STANDARD_AMINO_ACIDS) * len(wild_type), "prediction": grid.reshape(-1),
    })

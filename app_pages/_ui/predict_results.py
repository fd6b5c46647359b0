"""The Predict page's results: the labelled table read, the fit, the prediction map; cached for
every session (``st.cache_data``, keyed by model identifier, the table's bytes and the choices)
and, where the model runs, queued in the process-wide heavy-job queue with a progress bar.

The fitted predictor of this session is also kept in session state (``PREDICTOR``), so the
Variant effects page's suggestions can show its prediction beside each proposal.
"""

from __future__ import annotations

import contextlib

import streamlit as st

from flamino_core import passes
from flamino_core.csv_tables import TableLimits
from flamino_core.predict import apply
from flamino_core.predict.fit import FitResult, fit_table
from flamino_core.predict.features import FeatureError
from flamino_core.predict.saved import PredictorError
from flamino_core.predict.table import LabelError, LabelledTable, parse_labelled_table, read_table_text

from .models import load_engine
from .policy import current_limits, hosted_mode, visitor_model_name
from .results import heavy_slot

HOSTED = hosted_mode()
CHUNK_PASSES = passes.CHUNK  # passes between two turns in the queue (as a masked scan's chunk of positions)
PREDICTOR = "_predict_predictor"  # session state: (Predictor, its feature set's label)


def columns(data: bytes) -> list[str] | str:
    """The table's column names, or why it cannot be read (or is over this server's limits)."""
    return _columns(data, current_limits().table_limits())


@st.cache_data(show_spinner=False, max_entries=8 if HOSTED else 32)
def _columns(data: bytes, limits: TableLimits) -> list[str] | str:
    try:
        return list(read_table_text(data, limits).columns)
    except LabelError as err:
        return str(err)


def labelled_table(data: bytes, target: str, wild_type: str | None, first: int) -> LabelledTable | str:
    """The labelled table, or the message saying why it cannot be used: held to this server's
    limits as a DMS table is (bytes, columns, rows, the wild type's length, before any row is
    applied to it)."""
    return _labelled_table(data, target, wild_type, first, current_limits().table_limits())


@st.cache_data(show_spinner="Reading the table…", max_entries=8 if HOSTED else 32)
def _labelled_table(data: bytes, target: str, wild_type: str | None, first: int,
                    limits: TableLimits) -> LabelledTable | str:
    try:
        return parse_labelled_table(data, target, wild_type, first, limits=limits)
    except LabelError as err:
        return str(err)


def stage_bar(text: str, give_way=None):
    """A progress bar that each stage (``embedding (layer 6)``, ...) takes over in turn; every
    ``CHUNK_PASSES`` passes the job gives way in the heavy-job queue (as the variant scoring does)."""
    bar = st.progress(0.0, text=text)

    def stage(name: str):
        last, turned = [-1.0], [0]

        def update(done: int, total: int) -> None:
            fraction = done / max(total, 1)
            if fraction - last[0] >= 0.05 or done == total:
                bar.progress(min(fraction, 1.0), text=f"{text}: {name} ({done:,}/{total:,})")
                last[0] = fraction
            if give_way is not None and done - turned[0] >= CHUNK_PASSES and done < total:
                turned[0] = done
                give_way()

        return update

    return bar, stage


@st.cache_data(show_spinner=False, max_entries=4 if HOSTED else 16)
def fit(model: str, data: bytes, target: str, wild_type: str | None, first: int, kind: str, folds: str,
        layer: int | None) -> FitResult | str:
    """The fit of ``kind`` features with every other feature set beside it, or why not."""
    table = labelled_table(data, target, wild_type, first)
    engine = load_engine(model)
    with heavy_slot("fitting the predictor") as give_way:
        bar, stage = stage_bar("Fitting", give_way)
        try:
            # The predictor's JSON names the model as the page does (hosted: never a server path).
            return fit_table(table, kind, engine=engine, model=visitor_model_name(model), folds=folds, layer=layer,
                             progress=stage)
        except (FeatureError, LabelError) as err:
            return str(err)
        finally:
            bar.empty()


@st.cache_data(show_spinner=False, max_entries=4 if HOSTED else 16)
def prediction_map(model: str, data: bytes, target: str, wild_type: str | None, first: int, kind: str,
                   folds: str, layer: int | None, record: str, record_first: int):
    """(grid (L, 20), the wild type's own prediction) of the fitted predictor over every single
    substitution of ``record``, or why it cannot describe that sequence."""
    predictor = fit(model, data, target, wild_type, first, kind, folds, layer).predictor
    engine = load_engine(model) if predictor.spec.uses_model else None
    queued = heavy_slot("the prediction map") if predictor.spec.uses_model else contextlib.nullcontext()
    with queued as give_way:
        bar, stage = stage_bar("Predicting every substitution", give_way)
        try:
            return apply.prediction_map(predictor, record, engine, first=record_first, progress=stage("features"))
        except (FeatureError, PredictorError) as err:
            return str(err)
        finally:
            bar.empty()

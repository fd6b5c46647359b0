"""The Predict page's results: the labelled table read (cached for every session), the fit (the
core's ``FitPlan`` run as a background job of the session, as a masked scan is: its model passes a
heavy-job slot per engine call, each scikit-learn fit a slot of its own, progress, an estimate and
Cancel, stopped when its tab closes), the prediction map (cached, queued in the heavy-job queue
with a progress bar).

The fitted predictor of this session is also kept in session state (``PREDICTOR``), so the
Variant effects page's suggestions can show its prediction beside each proposal.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib

import streamlit as st

from flamino_core.jobs import DONE

from flamino_core.store import CHUNK
from flamino_core.inputs import TableLimits
from flamino_core.numbering import Numbering
from flamino_core.predictors import apply
from flamino_core.predictors import (FeatureError, FitCost, FitPlan, LabelError, LabelledTable, PredictorError,
                                  parse_labelled_table, read_table_text)

from app_pages._ui.server import background, jobs_panel
from app_pages._ui.input.model_loading import load_engine
from app_pages._ui.server.policy import current_limits, hosted_mode, visitor_model_name
from app_pages._ui.results.one_record import heavy_slot

CHUNK_PASSES = CHUNK  # passes between two turns in the queue (as a masked scan's chunk of positions)
PREDICTOR = "_predict_predictor"  # session state: (Predictor, its feature set's label)


def columns(data: bytes) -> list[str] | str:
    """The table's column names, or why it cannot be read (or is over this server's limits)."""
    return _columns(data, current_limits().table_limits())


@st.cache_data(show_spinner=False, max_entries=8 if hosted_mode() else 32)
def _columns(data: bytes, limits: TableLimits) -> list[str] | str:
    try:
        return list(read_table_text(data, limits).columns)
    except LabelError as err:
        return str(err)


def labelled_table(data: bytes, target: str, wild_type: str | None, numbering: Numbering) -> LabelledTable | str:
    """The labelled table, or the message saying why it cannot be used: held to this server's
    limits as a DMS table is (bytes, columns, rows, the wild type's length, before any row is
    applied to it)."""
    return _labelled_table(data, target, wild_type, numbering, current_limits().table_limits())


@st.cache_data(show_spinner="Reading the table…", max_entries=8 if hosted_mode() else 32)
def _labelled_table(data: bytes, target: str, wild_type: str | None, numbering: Numbering,
                    limits: TableLimits) -> LabelledTable | str:
    try:
        return parse_labelled_table(data, target, wild_type, numbering, limits=limits)
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


# --- the fit: a background job ------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class FitChoice:
    """What a fit is of: the model, the table's bytes and every choice made on the page."""

    model: str
    data: bytes
    target: str
    wild_type: str | None
    first: int
    kind: str
    folds: str
    layer: int | None

    def key(self, engine) -> tuple:
        digest = hashlib.sha256(repr((self.target, self.wild_type, self.first, self.kind, self.folds, self.layer))
                                .encode() + b"\0" + self.data).hexdigest()[:24]
        return ("fit", engine.fingerprint, digest)


def fit_job(engine, choice: FitChoice, table: LabelledTable, planned: FitCost, seconds: float):
    """The session's job for this fit (started once asked: the page's Fit button approves it), the
    core's plan of it (``FitPlan``: a heavy-job slot per model call and per scikit-learn fit, in a
    worker that stops mid-fit) drawn with its progress, estimate and Cancel; None before it is
    asked for. A running fit stops at twice the seconds this server gives one."""
    key = choice.key(engine)
    done = background.find(key)
    if done is not None and done.state == DONE:
        return done
    budget = current_limits().max_fit_seconds
    plan = FitPlan(table, choice.kind, visitor_model_name(choice.model), choice.folds, choice.layer, planned,
                   seconds, 2 * budget if budget else None)
    return jobs_panel.follow_plan(key, f"Fitting the predictor ({choice.kind}, {int(table.labelled.sum()):,} rows)",
                                  plan, engine, what="the fit", keeps=False)


@st.cache_data(show_spinner=False, max_entries=4 if hosted_mode() else 16)
def prediction_map(model: str, fitted: tuple, _predictor, record: str, record_numbering: Numbering):
    """(grid (L, 20), the wild type's own prediction) of the fitted predictor (the fit job
    ``fitted``'s) over every single substitution of ``record``, or why it cannot describe that
    sequence."""
    predictor = _predictor
    engine = load_engine(model) if predictor.spec.uses_model else None
    queued = heavy_slot("the prediction map") if predictor.spec.uses_model else contextlib.nullcontext()
    with queued as give_way:
        bar, stage = stage_bar("Predicting every substitution", give_way)
        try:
            return apply.prediction_map(predictor, record, engine, numbering=record_numbering,
                                        progress=stage("features"))
        except (FeatureError, PredictorError) as err:
            return str(err)
        finally:
            bar.empty()

"""The Predict page's results: the labelled table read (cached for every session), the fit (a
background job of the session, as a masked scan is: its model passes a heavy-job slot per engine
call, each scikit-learn fit a slot of its own, progress, an estimate and Cancel, stopped when its
tab closes), the prediction map (cached, queued in the heavy-job queue with a progress bar).

The fitted predictor of this session is also kept in session state (``PREDICTOR``), so the
Variant effects page's suggestions can show its prediction beside each proposal.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import time

import streamlit as st

from flamino_core.jobs import DONE, default_rates, masked_seconds, unmasked_seconds

from flamino_core.store import CHUNK
from flamino_core.inputs import TableLimits
from flamino_core.predict import apply
from flamino_core.predict import (FITS, FeatureError, FitCost, FitResult, FitWorker, LabelError,
                                  LabelledTable, PredictorError, fit_table, parse_labelled_table,
                                  read_table_text, record_fit_times, seconds_here, worker_start_seconds)

from app_pages._ui.server import background, jobs_panel
from app_pages._ui.input.model_loading import load_engine
from app_pages._ui.server.policy import current_limits, hosted_mode, visitor_model_name
from app_pages._ui.results.one_record import heavy_slot

HOSTED = hosted_mode()
CHUNK_PASSES = CHUNK  # passes between two turns in the queue (as a masked scan's chunk of positions)
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


class OverBudget(Exception):
    """A running fit passed the time this server gives one (the message says so)."""


def fit_seconds(engine, table: LabelledTable, planned: FitCost, plan: list) -> tuple[float, float | None]:
    """(seconds of the scikit-learn fits at this machine's measured rate, else the default one;
    seconds of the model passes still to run (``table_fit.planned_work``'s ``plan``), None when this
    machine has not measured the model yet)."""
    rates = default_rates()
    fits = seconds_here(planned, rates) + worker_start_seconds(rates)
    length = max(len(s) for s in table.sequences if s is not None)
    passes = 0.0
    for _, missing, _, unit in plan:
        kind = "unmasked" if unit.startswith("unmasked") else "masked"
        seconds = ((unmasked_seconds(engine, [length] * missing, rates) if kind == "unmasked"
                    else masked_seconds(engine, [(len(table.wild_type or ""), missing)], rates))
                   if missing else 0.0)
        if seconds is None:
            return fits, None
        passes += seconds
    return fits, passes


def fit_job(engine, choice: FitChoice, table: LabelledTable, planned: FitCost, seconds: float):
    """The session's job for this fit (started once asked: the page's Fit button approves it),
    drawn with its progress, estimate and Cancel; None before it is asked for."""
    key = choice.key(engine)
    done = background.find(key)
    if done is not None and done.state == DONE:
        return done
    budget = current_limits().max_fit_seconds
    work = functools.partial(_fit_work, engine, choice, table, planned, 2 * budget if budget else None)
    cost = jobs_panel.Cost(planned.fits, "scikit-learn fit", "scikit-learn fits", planned.describe(), seconds)
    return jobs_panel.follow(key, f"Fitting the predictor ({choice.kind}, {int(table.labelled.sum()):,} rows)",
                             "scikit-learn fits", work, cost, what="the fit", keeps=False,
                             model=jobs_panel.engine_name(engine) if engine is not None else None)


def _fit_work(engine, choice: FitChoice, table: LabelledTable, planned: FitCost, budget: float | None, job,
              first_only: bool = False) -> FitResult | str:
    """The job's body: model passes through the store (a heavy-job slot per engine call), then each
    scikit-learn fit in a slot of its own, so other visitors' jobs run between two fits, and in a
    process of its own (``FitWorker``): it stops within a fraction of a second, mid-fit, when
    cancelled, when its tab closes, or past ``budget`` seconds of fitting."""
    spent, started, took = [0.0], [None], []  # took: each fit's seconds (the first starts the worker)

    def over_budget() -> str | None:
        running = time.monotonic() - started[0] if started[0] is not None else 0.0
        if budget is not None and spent[0] + running > budget:
            return (f"the fit stopped after {spent[0] + running:,.0f} s of fitting, past the {budget:,.0f} s this "
                    "server gives one: use fewer rows, or run flamino fit locally")
        return None

    def check() -> None:  # while a fit runs in the worker
        background.stop_if_asked(job)
        reason = over_budget()
        if reason:
            raise OverBudget(reason)

    @contextlib.contextmanager
    def each_fit():
        reason = over_budget()
        if reason:
            raise OverBudget(reason)
        with background.slot(job):
            started[0] = time.monotonic()
            try:
                yield
            finally:
                took.append(time.monotonic() - started[0])
                spent[0] += took[-1]
                started[0] = None

    def stage(name: str):
        unit = "scikit-learn fits" if name == FITS else f"model passes ({name})"

        def report(done: int, total: int) -> None:
            if job.unit != unit:  # a new stage: its own count and rate
                job.stage(unit, total)
            job.progress(done, total)

        return report

    with FitWorker() as worker:
        try:
            result = fit_table(table, choice.kind, engine=background.metered(engine, job),
                               model=visitor_model_name(choice.model), folds=choice.folds, layer=choice.layer,
                               progress=stage, cancelled=lambda: background.should_stop(job), each_fit=each_fit,
                               run_fit=lambda fit: worker.run(fit, check))
        except (FeatureError, LabelError, OverBudget) as err:
            return str(err)
    record_fit_times(default_rates(), planned, took, job.visitor or "")
    return result


@st.cache_data(show_spinner=False, max_entries=4 if HOSTED else 16)
def prediction_map(model: str, fitted: tuple, _predictor, record: str, record_first: int):
    """(grid (L, 20), the wild type's own prediction) of the fitted predictor (the fit job
    ``fitted``'s) over every single substitution of ``record``, or why it cannot describe that
    sequence."""
    predictor = _predictor
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

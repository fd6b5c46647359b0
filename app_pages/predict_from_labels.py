"""Predict from labels: a predictor fitted on your own measurements, honestly evaluated, its
prediction map and its download (docs/predict.md)."""

from pathlib import Path

import streamlit as st

from app_pages._ui.input import reading as inputs

from app_pages._ui.predict_from_labels import design_rounds
from app_pages._ui.predict_from_labels import fit_results as predict_results
from app_pages._ui.rerun.context import PageContext, current, ready, sequence_only_note
from app_pages._ui.frame.downloads import csv_button, file_button, json_button, safe_name, show_figure
from app_pages._ui.server.policy import current_limits, hosted_mode, visitor_model_name
from app_pages._ui.server.jobs_panel import about, approve
from app_pages._ui.predict_from_labels.fit_results import PREDICTOR
from app_pages._ui.frame.widgets import kept_radio, kept_selectbox, plain
from flamino_core.inputs import size_problem
from flamino_core.numbering import Numbering
from flamino_core.predictors import apply, figures
from flamino_core.jobs import DONE
from flamino_core.predictors import (LabelError, PROTEINGYM_FOLD_COLUMNS, RANDOM_FOLDS, RANDOM_WEIGHTS_NOTE,
                                  feature_sets, fit_seconds, plan_line, planned_fits, planned_work, problem as
                                  cost_problem, zip_bytes)

UPLOAD = "_predict_file"  # (file name, bytes), kept across pages
FITTED = "_predict_fitted"  # the choices the Fit button was last pressed for
MAPPED = "_predict_mapped"  # ... and the prediction map's
STATISTICS = {"spearman": "Spearman ρ", "auc": "AUC", "mcc": "MCC"}


def _keep_upload() -> None:
    file = st.session_state.get("_predict_upload")
    if file is None:
        st.session_state.pop(UPLOAD, None)
        return
    limits = current_limits()
    data = file.getvalue() if file.size <= (limits.max_upload_bytes or file.size) else b""
    # The table's columns and rows are counted on its bytes here, before any reader runs (as a DMS table's).
    problem = limits.check_upload(file.size, "the table") or size_problem(data, limits.table_limits())
    if problem:
        st.session_state[UPLOAD] = problem
        return
    st.session_state[UPLOAD] = (file.name, data)


def table_upload() -> tuple[str, bytes] | None:
    st.file_uploader(
        "Labelled table (CSV or TSV): a sequence column, or mutant (A23V) with a wild type, or a ProteinGym DMS "
        "table; and the column you measured",
        key="_predict_upload", on_change=_keep_upload, max_upload_size=inputs.upload_size_mb(),
    )
    stored = st.session_state.get(UPLOAD)
    if isinstance(stored, str):
        st.error(plain(stored))
        return None
    if stored is None:
        st.info("Upload a table of your measurements to fit a predictor. (Tables do not travel in share links: "
                "upload it again after opening one.)")
    return stored


def interval(row: dict, key: str) -> tuple[str, str | None]:
    value, low, high = row.get(key), row.get(f"{key}_low"), row.get(f"{key}_high")
    if value is None:
        return "—", None
    return f"{value:.3f}", (f"95% bootstrap interval {low:.3f} – {high:.3f} ({row['n']:,} rows)"
                            if low is not None else None)


def comparison_frame(result):
    import pandas as pd

    key = "spearman" if result.table.task == "regression" else "auc"
    rows = []
    for row in result.comparison:
        entry = {"features": row["label"], "uses the model": row["uses_model"], STATISTICS[key]: row.get(key),
                 "95% low": row.get(f"{key}_low"), "95% high": row.get(f"{key}_high")}
        if key == "auc":
            entry["MCC"] = row.get("mcc")
        rows.append(entry)
    return pd.DataFrame(rows)


def fit_section(ctx: PageContext, name: str, data: bytes):
    engine, model = ctx.engine, ctx.model
    if engine is None:
        st.info("Choose a model that can be loaded in the sidebar to fit a predictor.")
        return None
    found = predict_results.columns(data)
    if isinstance(found, str):
        st.error(plain(f"{name}: {found}"))
        return None
    target, folds = target_and_folds(found)
    wild = mutants_wild_type(ctx, found)
    if wild is None:
        return None
    wild_type, numbering = wild
    table = labelled_table(name, data, target, wild_type, numbering)
    if table is None:
        return None
    kind = kept_radio("Features of the predictor", "pfeat")
    available = feature_sets(table, True)
    if kind not in available:
        st.warning(f"{kind} features do not apply to this table (they need mutants of one wild type, or "
                   "sequences of one length); choose another.", icon=":material/block:")
        return None
    layer = engine.config.num_layers
    planned = fit_plan(name, engine, table, available, folds, layer)
    if planned is None:
        return None
    fits, seconds = planned
    choice = predict_results.FitChoice(model, data, target, wild_type, numbering.first, kind, folds, layer)
    key = choice.key(engine)
    if st.button("Fit the predictor", type="primary", icon=":material/model_training:"):
        st.session_state[FITTED] = key
        approve(key)  # the estimate was shown beside the button: it runs whatever it costs
    if st.session_state.get(FITTED) != key:
        st.info("Every feature set that applies is evaluated on the same folds beside the one you choose. The fit "
                "runs in the background: it shows its progress, can be cancelled, and stops if you close the tab.")
        return None
    job = predict_results.fit_job(engine, choice, table, fits, seconds)
    if job is None or job.state != DONE:
        return None
    result = job.value
    if isinstance(result, str):
        st.error(plain(result))
        return None
    st.session_state[PREDICTOR] = result.predictor
    return choice, key, result


def target_and_folds(found: list[str]) -> tuple[str, str]:
    """The column to predict and the folds to evaluate on, side by side."""
    left, right = st.columns(2)
    with left:
        numeric_guess = "DMS_score" if "DMS_score" in found else found[-1]
        target = kept_selectbox("Target: the column to predict", "_predict_target", found, default=numeric_guess)
    fold_columns = [c for c in found if c.startswith("fold") or c in PROTEINGYM_FOLD_COLUMNS]
    with right:
        folds = kept_selectbox(
            "Folds", "_predict_folds", [RANDOM_FOLDS, *fold_columns], default=RANDOM_FOLDS,
            format_func=lambda f: "random: 5 folds, seed 0" if f == RANDOM_FOLDS else f"column {f}",
            help="Random folds over-estimate on DMS data (a held-out mutant's position is in the training folds); "
                 "ProteinGym's fold_modulo_5 and fold_contiguous_5 hold out whole positions.")
    return target, folds


def mutants_wild_type(ctx: PageContext, found: list[str]) -> tuple[str | None, Numbering] | None:
    """The wild type a mutant column is read against (None: the table's own) and its
    numbering; None while the chosen record is not ready."""
    if "mutant" in found:
        if kept_radio("Wild type of the mutant column", "pwt", horizontal=True) == "record":
            if not ready(ctx):
                return None
            return ctx.sequence, ctx.numbering
    return None, Numbering()


def labelled_table(name: str, data: bytes, target: str, wild_type: str | None, numbering: Numbering):
    """The table read for ``target``, with what it holds and its notes said; None (and why) when
    it cannot be read."""
    table = predict_results.labelled_table(data, target, wild_type, numbering)
    if isinstance(table, str):
        st.error(plain(f"{name}: {table}"))
        return None
    st.caption(plain(f"{name}: {len(table.frame):,} rows, {int(table.labelled.sum()):,} labelled; "
                     f"{table.task} of {target}" + (f"; wild type of {len(table.wild_type):,} residues"
                                                    if table.wild_type else "")))
    if table.issues:
        with st.expander(f"{len(table.issues):,} note(s) about the table", icon=":material/info:"):
            st.markdown("\n".join(f"- {plain(issue)}" for issue in table.issues))
    return table


def fit_plan(name: str, engine, table, available, folds: str, layer: int):
    """The model passes and fits the button would run and their time, said on the page; returns
    the fits and the seconds, or None (and why) when they cannot run here."""
    plan = planned_work(table, available, engine, layer=layer)
    for planned in plan:
        st.caption(plain(f"Model passes: {plan_line(*planned)}."))
    fits = _planned_fits(table, available, engine, folds, layer)
    if isinstance(fits, str):
        st.error(plain(f"{name}: {fits}"))
        return None
    fits_seconds, pass_seconds = fit_seconds(engine, table, fits, plan)
    seconds = fits_seconds + pass_seconds  # (0.0 when nothing is left to run)
    st.caption(plain(f"Fitting: {fits.describe()}; {about(fits_seconds)} at this machine's rate"
                     + (f", and {about(pass_seconds)} of model passes" if pass_seconds else "") + "."))
    problem = _too_big(plan, fits, fits_seconds)
    if problem:
        st.error(plain(problem), icon=":material/block:")
        return None
    return fits, seconds


def _planned_fits(table, available, engine, folds, layer):
    try:
        return planned_fits(table, available, engine, folds=folds, layer=layer)
    except LabelError as err:
        return str(err)


def _too_big(plan, fits, fits_seconds: float) -> str | None:
    """Why this server refuses the fit: more model passes than one job runs, or scikit-learn work
    over its bounds (rows, rows x features, time), said before any work; None locally."""
    if not hosted_mode():
        return None
    limits = current_limits()
    needed = sum(missing for _, missing, _, _ in plan)
    if limits.max_pll_passes is not None and needed > limits.max_pll_passes:
        return (f"This fit needs {needed:,} model passes; this server runs at most {limits.max_pll_passes:,} per job. "
                "Use fewer rows or one-hot features, or run flamino locally (flamino fit).")
    problem = cost_problem(fits, limits.fit_limits(), fits_seconds)
    return f"Not fitted here: {problem}." if problem else None


def results_section(ctx: PageContext, name: str, fitted) -> None:
    choice, key, result = fitted
    model, kind = choice.model, choice.kind
    if result.model_is_random:
        st.caption(plain(f"Note: {RANDOM_WEIGHTS_NOTE}."))
    headline(result)
    stem = safe_name(Path(name).stem)
    scatter, compare, curve = st.tabs(["Out-of-fold predictions", "Feature sets side by side", "Learning curve"])
    with scatter:
        show_figure(figures.out_of_fold_scatter(result), "predict_scatter", f"{stem}_out_of_fold")
    with compare:
        show_figure(figures.comparison_bars(result), "predict_compare", f"{stem}_comparison")
        st.dataframe(comparison_frame(result), hide_index=True, width="stretch")
    with curve:
        show_figure(figures.learning_curves(result), "predict_curve", f"{stem}_learning_curve")
    row = st.container(horizontal=True)
    with row:
        csv_button("Out-of-fold predictions (CSV)", result.output_frame, f"{stem}_{kind}_out_of_fold.csv",
                   "predict_csv")
        json_button("Metrics (JSON)", lambda: result.metrics(visitor_model_name(model)), f"{stem}_{kind}_metrics.json",
                    "predict_json")
        file_button("Predictor (.zip, for flamino predict)", lambda: zip_bytes(result.predictor),
                    f"{stem}_{kind}_predictor.zip", "predict_zip", "application/zip")
    prediction_map(ctx, name, choice, key, result)


def headline(result) -> None:
    """The three tiles: the out-of-fold statistic (and MCC for classes) with its interval, and the
    regularisation inner CV chose."""
    statistic = "spearman" if result.table.task == "regression" else "auc"
    head = result.headline
    boxes = st.columns(3)
    value, spread = interval(head, statistic)
    boxes[0].metric(f"Out-of-fold {STATISTICS[statistic]}", value, help=spread)
    if spread:  # the headline's uncertainty on the tile itself, not only in its tooltip (issue #37)
        boxes[0].caption(spread)
    if statistic == "auc":
        value, spread = interval(head, "mcc")
        boxes[1].metric("Out-of-fold MCC", value, help=spread)
        if spread:
            boxes[1].caption(spread)
    else:
        boxes[1].metric("Rows evaluated", f"{head['n']:,}")
    regularisation = ", ".join(f"{k} {v:g}" for k, v in result.predictor.model.regularisation.items())
    boxes[2].metric("Chosen by inner CV", regularisation or "—")


def prediction_map(ctx: PageContext, name: str, choice, key, result) -> None:
    """The fitted predictor's map of every single substitution of the table's wild type (or the
    chosen record), computed when asked, with its CSV."""
    st.subheader("Prediction map: every single substitution")
    if result.table.wild_type is not None:
        sequence, numbering, record_id = result.table.wild_type, result.table.numbering, Path(name).stem
    elif ctx.record is not None:
        sequence, numbering, record_id = ctx.sequence, ctx.numbering, ctx.record.id
    else:
        st.info("Choose a record on the Input page to predict its substitution map.")
        return
    missing, asked, unit = apply.map_cost(result.predictor, sequence, ctx.engine)
    st.caption(plain(f"{record_id}: {len(sequence) * 19:,} substitutions"
                     + (f"; {missing:,} of {asked:,} {unit} to run" if asked else "; no model pass needed")))
    asked = (key, sequence, numbering.first)  # the session keeps the number, as before
    if st.button("Predict the substitution map", icon=":material/grid_on:"):
        st.session_state[MAPPED] = asked
    if st.session_state.get(MAPPED) != asked:
        return
    found = predict_results.prediction_map(choice.model, key, result.predictor, sequence,
                                           numbering)
    if isinstance(found, str):
        st.error(plain(found))
        return
    grid, wild_value = found
    fig = figures.prediction_map(grid, sequence, wild_value, target=choice.target, task=result.table.task,
                                 numbering=numbering, random_weights=result.predictor.random_weights,
                                 classes=result.table.classes)
    row = show_figure(fig, "predict_map", f"{safe_name(record_id)}_prediction_map")
    with row:
        csv_button("Prediction map (CSV)", lambda: apply.map_rows(record_id, sequence, grid, numbering),
                   f"{safe_name(record_id)}_prediction_map.csv", "predict_map_csv")


def main(ctx: PageContext) -> None:
    st.header("Predict from your labels")
    st.markdown(
        "You measured a property for some sequences or variants: can the model's features predict it for the "
        "rest? A ridge (numbers) or logistic (classes) model is fitted on the model's mean embeddings, on one-hot "
        "residues plus the model's zero-shot score (Hsu et al. 2022), or on one-hot residues alone (no model: "
        "the baseline), and every row is predicted by a model that never saw it. docs/predict.md explains "
        "every number."
    )
    sequence_only_note(ctx)  # its model features read sequences only (SaProt: every residue '#')
    upload = table_upload()
    if upload is not None:
        fitted = fit_section(ctx, *upload)
        if fitted is not None:
            results_section(ctx, upload[0], fitted)
    design_rounds.section(ctx, upload)  # a campaign offered on the uploaded table's wild type too


if __name__ == "__main__":  # run by app.py (context.serve), with this rerun's context
    main(current())

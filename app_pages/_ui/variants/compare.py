"""The Variant effects page's "Compare models" on a DMS table (#35 item 5).

Up to three more models (an ensemble such as the ESM-1v five counts as one) score the same
table with the same strategy, each model (each ensemble member) as its own background job
through the result store (``scoring.dms_scores``, keyed by its weights), one after the other, so
at most one more engine is loaded per rerun. What is done is kept for the session, so a finished
model never loads again to be shown. Then ``flamino_core.variants.compare`` computes what the
page shows: each model's agreement with the experiment, Spearman between the models, the share
of one model's top 10% in another's, a scatter of one model against another, and the table with
a column per model (as ``flamino dms --compare`` writes it).

Checkpoints on this machine can be added by path (not on a hosted server): one path is a model,
two or more are one ensemble (``ensemble:<path>,<path>,...``, the mean of their scores), e.g. the
five ESM-1v folders a user downloaded, which the picker's published ensemble cannot reach offline.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pandas as pd
import streamlit as st

from app_pages._ui.frame.downloads import csv_button, json_button, show_figure
from app_pages._ui.input.model_loading import LOCAL_CHOICE, other_engine
from app_pages._ui.input.model_picker import model_choices, model_label
from app_pages._ui.frame.widgets import kept_multiselect, kept_text_area, plain, widget_key
from app_pages._ui.server.policy import current_limits, visitor_model_name
from app_pages._ui.variants import scoring as variant_results
from flamino_core.numbering import Numbering
from flamino_core.model import ENSEMBLE_PREFIX, ENSEMBLES, ensemble_members
from flamino_core.variants import MAX_MODELS, compare_models, mean_of_members, model_scatter

CHOICE = "dms_compare"  # the multiselect's key
DONE = "_dms_compare_done"  # session: (model, table key) -> DmsScores of a finished model
LOCAL = "_dms_compare_local"  # session: the local checkpoints (and local ensembles) added to the choices
LOCAL_PATHS = "dms_compare_paths"  # the paths box's key
STATISTICS = (("spearman", "Spearman ρ"), ("auc", "AUC"), ("mcc", "MCC"), ("ndcg", "NDCG"),
              ("top10_recall", "top-10% recall"))


def comparison_choices(current: str) -> list[str]:
    """What can be compared with the page's model: the picker's models (no local path field)
    and the ensembles, where this server may load them."""
    allowed = current_limits().allowed_models
    ensembles = [e for e in ENSEMBLES if allowed is None or all(m in allowed for m in ENSEMBLES[e].members)]
    local = [m for m in st.session_state.get(LOCAL, []) if m != current] if LOCAL_CHOICE in model_choices() else []
    return [m for m in model_choices() if m not in (LOCAL_CHOICE, current)] + ensembles + local


def _short(identifier: str) -> str:
    """A model as titles and columns name it: a path by its last part (a visitor's name of it
    first: hosted, never a path); an ``ensemble:`` list by its members' short names."""
    members = ensemble_members(identifier) if identifier.startswith(ENSEMBLE_PREFIX) else None
    if members:
        return ENSEMBLE_PREFIX + ",".join(_short(m) for m in members)
    name = visitor_model_name(identifier)
    return Path(name.rstrip("/")).name or name if "/" in name else name


def _label(identifier: str) -> str:
    """The picker's label of a model, an ensemble's title; a name ``_show`` gets (a visitor's
    name of a model) is shown as it is."""
    if identifier in ENSEMBLES:
        return ENSEMBLES[identifier].title
    if identifier.startswith(ENSEMBLE_PREFIX):  # the members' short names; of many, the first and last
        members = _short(identifier).removeprefix(ENSEMBLE_PREFIX).split(",")
        named = ", ".join(members) if len(members) < 3 else f"{members[0]} … {members[-1]}"
        return f"Ensemble of {len(members)}: {named}"
    return model_label(identifier)


def _local_paths() -> None:
    """Checkpoints on this machine by path: one a model, two or more one ensemble, added to the
    choices and chosen (not on a hosted server, which offers only its own models)."""
    if LOCAL_CHOICE not in model_choices():
        return
    paths = kept_text_area("Or checkpoints on this machine, one path per line (two or more: one ensemble, the "
                           "mean of their scores)", LOCAL_PATHS, height=100,
                           placeholder="/data/esm1v_t33_650M_UR90S_1\n/data/esm1v_t33_650M_UR90S_2\n...",
                           help="Folders (Hugging Face or flamino), fair-esm .pt or ESM C .pth files, as the "
                           "sidebar's Local checkpoint reads them; e.g. the five ESM-1v folders as the "
                           "ESM-1v ensemble.")
    if any("," in line for line in paths.splitlines()):
        st.error("A path with a comma cannot be part of an ensemble (commas separate its members).")
        return
    st.button("Add to the comparison", disabled=not paths.strip(), on_click=_add_local, key="dms_compare_add")


def _add_local() -> None:
    ss = st.session_state
    paths = [line.strip() for line in ss[widget_key(LOCAL_PATHS)].splitlines() if line.strip()]
    identifier = paths[0] if len(paths) == 1 else ENSEMBLE_PREFIX + ",".join(paths)
    added = ss.setdefault(LOCAL, [])
    if identifier not in added:
        added.append(identifier)
    chosen = list(ss.get(widget_key(CHOICE), []))
    if identifier not in chosen and len(chosen) < MAX_MODELS - 1:
        ss[widget_key(CHOICE)] = chosen + [identifier]


def section(ctx, scored, data: bytes, wild_type, numbering: Numbering, strategy: str, record_id: str,
            singles: bool) -> None:
    """The comparison, under the page's own DMS results (``scored``: the page's model's)."""
    with st.expander("Compare models", icon=":material/compare_arrows:", expanded=bool(st.session_state.get(CHOICE))):
        others = kept_multiselect(f"Compare with (up to {MAX_MODELS - 1} models; an ensemble counts as one)", CHOICE,
                                  comparison_choices(ctx.model), max_selections=MAX_MODELS - 1,
                                  format_func=_label, help="Each model scores the same table with the same strategy, "
                                  "through the result store; then their agreement is shown here.")
        _local_paths()
        if not others:
            st.caption("Choose models to score this table beside the one in the sidebar.")
            return
        table_key = hashlib.sha256(data + repr((wild_type, numbering.first, strategy, record_id)).encode()).hexdigest()
        found = {ctx.model: scored}
        for model in others:
            result = _scored(model, table_key, data, wild_type, numbering, strategy, record_id)
            if result is None:
                return  # a job is running (its panel shows progress) or a model cannot load (said)
            found[model] = result
        # Titles, columns and downloads name models as visitors may see them (hosted: no paths).
        shown = {_short(m): result for m, result in found.items()}
        comparison = compare_models(shown.__getitem__, list(shown), singles_only=singles)
        _show(comparison, record_id, strategy)


def _scored(model: str, table_key: str, data, wild_type, numbering: Numbering, strategy, record_id):
    """The model's (or ensemble's) scores of the table when done, else None (after starting or
    following the next member's job)."""
    done = st.session_state.setdefault(DONE, {})
    if (model, table_key) in done:
        return done[(model, table_key)]
    members = ensemble_members(model) or (model,)
    results = []
    for member in members:
        if (member, table_key) not in done:
            engine = _engine(member)
            if engine is None:
                return None
            scoring = variant_results.dms_scores(engine, data, wild_type, numbering, strategy, record_id)
            if scoring.done is None:
                return None
            done[(member, table_key)] = scoring.done
        results.append(done[(member, table_key)])
    done[(model, table_key)] = mean_of_members(members, results) if len(members) > 1 else results[0]
    return done[(model, table_key)]


def _engine(identifier: str):
    engine, problem = other_engine(identifier)
    if problem:
        st.warning(plain(problem))
    return engine


def _show(comparison, record_id: str, strategy: str) -> None:
    metrics = pd.DataFrame({label: {_label(m): comparison.metrics[m][key] for m in comparison.models}
                            for key, label in STATISTICS})
    st.markdown(f"**Agreement with the experiment** ({comparison.used.sum():,} rows every model scored)")
    st.dataframe(metrics, column_config={c: st.column_config.NumberColumn(format="%.3f") for c in metrics.columns})
    left, right = st.columns(2)
    named = {m: _label(m) for m in comparison.models}
    with left:
        st.markdown("**Spearman between the models**")
        st.dataframe(comparison.spearman_between.rename(index=named, columns=named))
    with right:
        st.markdown("**Share of the row model's top 10% in the column model's**")
        st.dataframe(comparison.top_shared.rename(index=named, columns=named))
    pick = st.columns(2)
    x_model = pick[0].selectbox("x", comparison.models, format_func=_label, key="dms_compare_x")
    y_model = pick[1].selectbox("y", comparison.models, index=1, format_func=_label, key="dms_compare_y")
    stem = f"{record_id}_dms_{strategy}_models"
    show_figure(model_scatter(comparison, x_model, y_model), "dms_compare_scatter", f"{stem}_scatter")
    row = st.container(horizontal=True)
    with row:
        csv_button("Scores by model (CSV)", lambda: comparison.frame, f"{stem}.csv", "dms_compare_csv")
        json_button("Comparison (JSON)", comparison.as_json, f"{stem}.json", "dms_compare_json")


"""The Variant effects page's "Mutations worth trying": the selected record's substitutions the
model finds more likely than the wild type (``flamino_core.predictors.suggest``, as ``flamino suggest``),
with the Predict page's predictor beside them when it describes this record (docs/predict.md)."""

from __future__ import annotations

import hashlib

import streamlit as st

from flamino_core.inputs import Numbering
from flamino_core.predictors import Predictor, PredictorError, from_zip, zip_bytes
from flamino_core.predictors.suggest import (
    DEFAULT_COMBINE, DEFAULT_TOP, Constraints, SuggestError, parse_amino_acids, parse_positions, suggest,
)

from app_pages._ui.rerun.context import PageContext
from app_pages._ui.frame.downloads import csv_button, safe_name
from app_pages._ui.input.model_loading import load_engine
from app_pages._ui.server.policy import hosted_mode, visitor_model_name
from app_pages._ui.predict_from_labels.fit_results import PREDICTOR, stage_bar
from app_pages._ui.results.one_record import heavy_slot
from app_pages._ui.frame.widgets import kept_float_input, kept_number_input, kept_text_input, plain

# The app scores proposals with the strategies that cost a pass per position at most; pll (L
# passes per proposal) is the command line's (flamino suggest --strategies).
STRATEGIES = ("wt-marginals", "masked-marginals", "joint-masked")
PROPOSED = "_suggest_for"  # the choices the Propose button was last pressed for


# The page proposes with one model: its "consensus" is that model's own score (issue #37 found it unexplained).
CONSENSUS = ("consensus: the mean wt-marginal log-ratio (nats) over the models a proposal must pass; here one "
             "model, so it is that model's own score. `flamino suggest --model A --model B` asks several to agree.")


@st.cache_data(show_spinner=False, max_entries=8 if hosted_mode() else 32)
def proposals(model: str, sequence: str, numbering: Numbering, record_id: str, keep: str, avoid: str,
              threshold: float, top: int, predictor_zip: bytes | None):
    """``suggest`` for one model, or the message saying why not (queued: it runs masked passes)."""
    engine = load_engine(model)
    predictor = from_zip(predictor_zip) if predictor_zip else None
    try:
        constraints = Constraints(keep=parse_positions(keep, len(sequence), numbering), avoid=parse_amino_acids(avoid))
        with heavy_slot("proposing mutations") as give_way:  # gives way every CHUNK_PASSES passes
            bar, stage = stage_bar("Scoring the proposals", give_way)
            try:
                # The model as the page names it (hosted: not a server path) in the progress text.
                return suggest([(visitor_model_name(model), engine)], sequence, numbering=numbering,
                               record_id=record_id, constraints=constraints, threshold=threshold, top=top,
                               combine=DEFAULT_COMBINE,
                               strategies=STRATEGIES, predictor=predictor, progress=stage,
                               predictor_engine=engine if predictor is not None and predictor.spec.uses_model else None)
            finally:
                bar.empty()
    except (SuggestError, PredictorError) as err:
        return str(err)


def _usable_predictor(engine, sequence: str) -> Predictor | None:
    """The Predict page's predictor when it can describe this record with this model."""
    predictor = st.session_state.get(PREDICTOR)
    if predictor is None:
        return None
    if predictor.spec.uses_model and predictor.model_fingerprint != engine.fingerprint:
        return None
    if predictor.spec.kind != "embedding" and predictor.wild_type != sequence:
        return None
    return predictor


def section(ctx: PageContext) -> None:
    """The section, under the page's variants (needs the selected record and a loaded model)."""
    record, engine = ctx.record, ctx.engine
    if record is None or engine is None:
        return
    st.subheader("Mutations worth trying")
    st.markdown(
        "Substitutions the model finds more likely than the wild type (wt-marginal log-ratio above the "
        "threshold; Hie et al. 2023), best first, each scored as above, and the best three combined into "
        "multi-mutants scored jointly masked (non-additivity: the model thinks they interact). "
        "The command line's `flamino suggest` also takes several models that must agree."
    )
    numbering = ctx.numbering
    left, middle, right, last = st.columns([2, 1, 1, 1])
    with left:
        last_number = numbering.last(len(record.sequence))
        keep = kept_text_input("Keep these positions", "_suggest_keep", placeholder="1-20, 45",
                               help=f"in the record's numbering ({numbering.first}-{last_number})")
    with middle:
        avoid = kept_text_input("Never introduce", "_suggest_avoid", placeholder="C, P")
    with right:
        threshold = kept_float_input("Threshold", "_suggest_threshold", default=0.0, step=0.5,
                                     help="a proposal's wt-marginal log-ratio must exceed it")
    with last:
        top = kept_number_input("Proposals", "_suggest_top", min_value=1, max_value=200, default=DEFAULT_TOP)
    predictor = _usable_predictor(engine, record.sequence)
    packed = zip_bytes(predictor) if predictor is not None else None
    model = ctx.model
    choice = (model, record.sequence, numbering.first, keep, avoid, float(threshold), int(top),
              hashlib.sha256(packed).hexdigest() if packed else None)
    if st.button("Propose mutations", icon=":material/lightbulb:"):
        st.session_state[PROPOSED] = choice
    if st.session_state.get(PROPOSED) != choice:
        if predictor is not None:
            st.caption("The predictor fitted on the Predict page will be shown beside each proposal.")
        return
    found = proposals(model, record.sequence, numbering, record.id, keep, avoid, float(threshold), int(top), packed)
    if isinstance(found, str):
        st.error(plain(found))
        return
    for note in found.notes:
        st.caption(plain(note))
    st.caption(f"{found.n_passing:,} of {found.n_candidates:,} allowed substitutions score above {threshold:g}; "
               f"the best {min(found.n_passing, int(top)):,} are shown.")
    st.caption(CONSENSUS)
    st.dataframe(found.table.drop(columns=["record_id"]), hide_index=True, width="stretch",
                 column_config={"consensus": st.column_config.NumberColumn(help=CONSENSUS)})
    csv_button("Proposals (CSV)", lambda: found.table, f"{safe_name(record.id)}_suggestions.csv", "suggest_csv")

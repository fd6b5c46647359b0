"""Records: every record of the input in one table (length, header metadata, mean entropy and,
on request, pseudo-perplexity), sortable by any column, searchable, downloadable; a click on a
row picks the record the other pages analyse.

The table is drawn at once with what the result store holds and fills in while the set's jobs
run in the background (``_ui/records/set_results.py``): it never disappears while a column is computed.
"""

import numpy as np
import pandas as pd
import streamlit as st

from app_pages._ui.server import jobs_panel

from app_pages._ui.records import set_results
from app_pages._ui.rerun.context import PageContext, current
from app_pages._ui.frame.downloads import csv_button
from app_pages._ui.input.reading import pick_record
from app_pages._ui.records.search import matching, search_box, search_caption
from flamino_core.records import ENTROPY_COLUMN, FIELDS, PPPL_COLUMN, SHOWN_FIELDS, summary_rows

PPPL_ASKED = "_pppl_asked"  # session state: the (model, set) whose pseudo-perplexities were asked for
TABLE = "records_table"


def ask_pppl(engine, model: str, sequences) -> None:
    """The button that asks for the pseudo-perplexity column, with what it costs (its plan's)."""
    cost = jobs_panel.cost_of(set_results.pppl_plan(engine, model, sequences), engine)

    def asked() -> None:  # the click is the go-ahead, whatever the cost said beside it
        st.session_state[PPPL_ASKED] = (engine.fingerprint, set_results.set_digest(sequences))
        jobs_panel.approve(set_results.pppl_key(engine, sequences))

    left, right = st.columns([1, 3], vertical_alignment="center")
    left.button("Compute pseudo-perplexity", icon=":material/play_arrow:", on_click=asked)
    when = f": {jobs_panel.about(cost.seconds)} {jobs_panel.rate_words(cost.seconds)}" if cost.seconds else ""
    right.caption(
        f"Pseudo-perplexity masks each position in turn: {cost.describe()}{when}. It runs in the background, "
        "in chunks through the server's queue for heavy jobs; values appear as records finish."
    )


def shown_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """The table as shown: no literal "None" (issue 24). A field a record's header lacks is
    blank; pseudo-perplexity appears once computed (NaN, blank, until its record is done)."""
    if frame[PPPL_COLUMN].isna().all():
        frame = frame.drop(columns=PPPL_COLUMN)
    numeric = [c for c in (ENTROPY_COLUMN, PPPL_COLUMN) if c in frame]
    frame[numeric] = frame[numeric].astype("float64")
    for column in [c for c in frame.columns if c not in numeric and frame[c].isna().any()]:  # fields some lack
        frame[column] = [_cell(v) for v in frame[column]]
    for column in [c for c in frame.columns if c not in numeric and frame[c].dtype == object]:
        # Arrow takes one type a column: text, then (2,387 mixed key=value columns logged a
        # traceback each run)
        if len({type(v) for v in frame[column]}) > 1:
            frame[column] = [str(v) for v in frame[column]]
    return frame


def _cell(value):
    """A header field as shown: blank when missing; 2, not 2.0, for a number pandas made a float."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return ""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def main(ctx: PageContext) -> None:
    engine, found = ctx.engine, ctx.records
    sequences = tuple(r.sequence for r in found)
    st.caption("Every record of the input. Click a row to analyse that record on the other pages; click a "
               "column's header to sort by it.")
    entropies = set_results.mean_entropies(engine, ctx.model, sequences)

    asked = st.session_state.get(PPPL_ASKED) == (engine.fingerprint, set_results.set_digest(sequences))
    pppl = set_results.pseudo_perplexities(engine, ctx.model, sequences, asked)
    if not asked and pppl.missing:
        ask_pppl(engine, ctx.model, sequences)

    frame = shown_frame(pd.DataFrame(summary_rows(
        found, {r.id: entropies.values.get(r.sequence) for r in found},
        {r.id: pppl.values.get(r.sequence) for r in found},
    )))
    text = search_box(len(found))
    hits = matching(found, text)
    rows = frame
    if text.strip():  # the table shows the matches only, and says how many
        rows = frame.iloc[sorted(hits)]
        st.caption(search_caption(text, len(hits), len(found)))
    # Cells not computed yet read "…" (Streamlit's own word for a missing value is "None").
    st.dataframe(
        rows,
        placeholder="…",
        hide_index=True,
        width="stretch",
        key=TABLE,
        on_select=lambda: _pick(found, list(rows.index)),
        selection_mode="single-row",
        column_config={
            **{field: FIELDS[field] for field in SHOWN_FIELDS},  # the header's own key shown: OS=, GN= ...
            ENTROPY_COLUMN: st.column_config.NumberColumn(format="%.3f", help="Unmasked pass, bits (0 to 4.32)"),
            PPPL_COLUMN: st.column_config.NumberColumn(format="%.3f", help="exp(−mean log p(residue | it masked))"),
        },
    )
    if entropies.missing or (asked and pppl.missing):  # pseudo-perplexity fills in only once asked for
        st.caption(filling_caption(found, entropies, pppl if asked else None))
    csv_button("Records table (CSV)", lambda: frame, f"records_{ctx.model_stem}.csv", "records_csv",
               model=ctx.model_name)


def filling_caption(found, entropies, pppl) -> str:
    """``"…" cells fill in as the records are computed: mean entropy 45 of 45; pseudo-perplexity 3 of
    45 records``: each column's count from its own values, never another's (the jobs' own state is
    their panel's)."""
    unique = len({r.sequence for r in found})
    parts = [f"mean entropy {unique - entropies.missing:,} of {unique:,}"]
    if pppl is not None:
        parts.append(f"pseudo-perplexity {unique - pppl.missing:,} of {unique:,}")
    return f"“…” cells fill in as the records are computed: {'; '.join(parts)} records."


def _pick(found, rows_shown) -> None:
    """A click on a row (of the rows shown: the search's matches): that record is the one the other
    pages analyse."""
    rows = st.session_state[TABLE]["selection"]["rows"]
    if rows:
        pick_record(found[rows_shown[rows[0]]].id)


if __name__ == "__main__":  # run by app.py (context.serve), with this rerun's context
    main(current())

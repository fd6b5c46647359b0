"""Records: every record of the input in one table (length, header metadata, mean entropy and,
on request, pseudo-perplexity), sortable by any column and downloadable."""

import hashlib

import numpy as np
import pandas as pd
import streamlit as st

from app_pages._ui import results
from app_pages._ui.context import PageContext, current
from app_pages._ui.widgets import counted, plain
from app_pages._ui.downloads import csv_button
from flamino_core import scores
from flamino_core.record_metadata import FIELDS
from flamino_core.record_summary import ENTROPY_COLUMN, PPPL_COLUMN, SHOWN_FIELDS, mean_entropy, summary_rows

PPPL_ASKED = "_pppl_asked"  # session state: the (model, records) whose pseudo-perplexities were asked for


def _set_key(model: str, sequences: tuple[str, ...]) -> str:
    return hashlib.sha256("\n".join((model, *sequences)).encode()).hexdigest()


def entropies(model: str, records) -> dict[str, float]:
    """Mean entropy of each record from one unmasked pass each (cached per sequence)."""
    bar = st.progress(0.0, text="Unmasked passes for the mean entropy")
    out = {}
    for index, record in enumerate(records, 1):
        out[record.id] = mean_entropy(results.logits(model, record.sequence))
        bar.progress(index / len(records), text=f"Unmasked passes for the mean entropy ({index}/{len(records)})")
    bar.empty()
    return out


def pseudo_perplexities(model: str, records) -> dict[str, float]:
    """Each record's masked scan, in the heavy-job queue; stops (keeping what is done) if the
    server is too busy."""
    bar = st.progress(0.0, text="Masked scans")
    out = {}
    for index, record in enumerate(records, 1):
        bar.progress((index - 1) / len(records), text=f"Masked scan {index} of {len(records)}: {plain(record.id)}")
        log_probs = results.heavy(results.masked_scan, model, record.sequence, what=f"the masked scan of {record.id}")
        if log_probs is None:
            break
        out[record.id] = scores.pseudo_perplexity(log_probs, record.sequence)
    bar.empty()
    return out


def shown_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """The table as shown: no literal "None" (issue 24). A field a record's header lacks is
    blank; pseudo-perplexity appears once computed (NaN, blank, where the queue stopped early)."""
    if frame[PPPL_COLUMN].isna().all():
        frame = frame.drop(columns=PPPL_COLUMN)
    numeric = [c for c in (ENTROPY_COLUMN, PPPL_COLUMN) if c in frame]
    frame[numeric] = frame[numeric].astype("float64")
    for column in [c for c in frame.columns if c not in numeric and frame[c].isna().any()]:  # fields some lack
        frame[column] = [_cell(v) for v in frame[column]]
    return frame


def _cell(value):
    """A header field as shown: blank when missing; 2, not 2.0, for a number pandas made a float."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return ""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def main(ctx: PageContext) -> None:
    model, found = ctx.model, ctx.records
    st.caption("Every record of the input. Click a column's header to sort by it.")
    mean_entropies = entropies(model, found)

    key = _set_key(model, tuple(r.sequence for r in found))
    passes = sum(len(r.sequence) for r in found)
    asked = st.session_state.get(PPPL_ASKED) == key
    if not asked:
        left, right = st.columns([1, 3], vertical_alignment="center")
        left.button("Compute pseudo-perplexity", icon=":material/play_arrow:",
                    on_click=lambda: st.session_state.__setitem__(PPPL_ASKED, key))  # fmt: skip
        right.caption(
            f"Pseudo-perplexity masks each position in turn: {counted(len(found), 'masked scan')}, "
            f"{counted(passes, 'forward pass', 'forward passes')} in all, run one after another in the server's queue for heavy jobs."
        )
    pppl = pseudo_perplexities(model, found) if asked else {}

    frame = shown_frame(pd.DataFrame(summary_rows(found, mean_entropies, pppl)))
    st.dataframe(
        frame,
        hide_index=True,
        width="stretch",
        column_config={
            **{field: FIELDS[field] for field in SHOWN_FIELDS},  # the header's own key shown: OS=, GN= ...
            ENTROPY_COLUMN: st.column_config.NumberColumn(format="%.3f", help="Unmasked pass, bits (0 to 4.32)"),
            PPPL_COLUMN: st.column_config.NumberColumn(format="%.3f", help="exp(−mean log p(residue | it masked))"),
        },
    )
    csv_button("Records table (CSV)", lambda: frame, "records.csv", "records_csv")


if __name__ == "__main__":  # run by app.py (context.serve), with this rerun's context
    main(current())

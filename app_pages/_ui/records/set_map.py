"""The Embeddings page's lower half: every record's mean embedding on one map, with its own
controls (projection, colour, labels, a metadata table to join) and its downloads, ProtSpace's
HDF5 and metadata table among them. The core builds the map (``flamino_core.records.embedding_map``), reads
header metadata and joins tables (``record_metadata``) and writes the files (``protspace``)."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

import numpy as np
import pandas as pd
import streamlit as st

from flamino_core.records import (FIELDS, METHODS, colour_values, column_label, grouping_column, h5_bytes,
                                  join_table, metadata_csv, metadata_rows, model_label, project,
                                  record_map_figure)

from app_pages._ui.records import set_results
from app_pages._ui.rerun.context import PageContext
from app_pages._ui.records.search import matching, search_box, search_caption
from app_pages._ui.frame.downloads import csv_button, file_button, npz_button, safe_name, show_figure
from app_pages._ui.input.reading import upload_size_mb
from app_pages._ui.server.policy import current_limits, visitor_model_name, visitor_short_name
from app_pages._ui.frame.widgets import kept_radio, kept_selectbox, plain, widget_key

TABLE = "_record_table"  # session state: (file name, bytes) of the uploaded metadata table
TABLE_PROBLEM = "_record_table_problem"  # why the last upload was refused
NO_COLOUR = "none"
TABLE_PREFIX = "table:"
HEADER_PREFIX = "header:"  # a header's own key (``taxon=``), kept apart from NO_COLOUR and TABLE_PREFIX
LABELS = "slabels"  # session state and link key: the user's choice (None: none made, the default applies)
MAX_LABELLED = 30  # more records than this: no labels by default (158 ids are an illegible mass)


def _take_table() -> None:
    file = st.session_state.get("_record_table_upload")
    st.session_state.pop(TABLE_PROBLEM, None)
    if file is None:
        return
    data = file.getvalue()
    problem = current_limits().check_table(data, file.name)  # before pandas reads it
    if problem:
        st.session_state[TABLE_PROBLEM] = problem
        st.session_state.pop(TABLE, None)
    else:
        st.session_state[TABLE] = (file.name, data)


def _joined(records) -> tuple[dict[str, list], list[str], str | None]:
    """The uploaded table's columns joined on the records, notes, and a problem (or None)."""
    held = st.session_state.get(TABLE)
    if not held:
        return {}, [], None
    try:
        columns, notes = join_table(records, held[1], current_limits().table_limits())
    except ValueError as err:
        return {}, [], f"{held[0]}: {err}"
    return columns, [f"{held[0]}: {note}" for note in notes], None


def labels_toggle(count: int) -> bool:
    """The Labels toggle: on by default up to ``MAX_LABELLED`` records (158 ids are an illegible
    mass); a choice the user (or a link) made is kept. Not a ``kept_toggle``: the kept value
    stays None until a choice is made, so the default can follow the set's size."""
    ss = st.session_state
    chosen = ss.get(LABELS)
    value = chosen if isinstance(chosen, bool) else count <= MAX_LABELLED
    ss[widget_key(LABELS)] = value

    def choose() -> None:
        ss[LABELS] = ss[widget_key(LABELS)]

    return st.toggle("Labels", key=widget_key(LABELS), value=value, on_change=choose,
                     help=f"Write each record's id beside its point (off by default above {MAX_LABELLED} records; "
                          "hover shows it, and the selected and found records are always labelled)")


def colour_choices(rows: list[dict], table: dict[str, list]) -> dict[str, str]:
    """Colour-by value -> label: nothing, header fields some record has (UniProt's, NCBI's ...,
    then the headers' own ``key=value`` columns), the table's columns."""
    choices = {NO_COLOUR: "nothing"}
    present = {column for row in rows for column, value in row.items() if value is not None}
    known = [column for column in FIELDS if column in present]
    own = [column for column in (rows[0] if rows else {})
           if column in present and column not in FIELDS and column != "id"]
    choices.update({column: FIELDS[column] for column in known})
    choices.update({HEADER_PREFIX + column: column_label(column) for column in own})
    choices.update({TABLE_PREFIX + column: f"{column} (table)" for column in table})
    return choices


def default_colour(rows: list[dict], choices: dict[str, str]) -> str:
    """The colour until the user chooses: the first header field that groups the records
    (``grouping_column``: ``taxon=`` on ProteinGym's targets, ``OS=`` on UniProt's), else nothing
    (the map of 186 targets with ``taxon=`` headers was coloured by nothing)."""
    column = grouping_column(rows)
    key = column if column in FIELDS else HEADER_PREFIX + str(column)
    return key if column is not None and key in choices else NO_COLOUR


def _colour(colour_key: str, rows: list[dict], table: dict[str, list]) -> tuple[list | None, str]:
    """The values to colour the map by, and their name for the legend."""
    if colour_key.startswith(TABLE_PREFIX):
        column = colour_key.removeprefix(TABLE_PREFIX)
        return table[column], column
    if colour_key == NO_COLOUR:
        return None, ""
    column = colour_key.removeprefix(HEADER_PREFIX)
    return colour_values(rows, column), column_label(column)


@dataclass(frozen=True)
class _MapChoice:
    """What the map's controls picked."""

    method: str  # the projection
    colour_key: str
    labels: bool
    hits: set[int]  # the found records the search matches, by index


def records_section(ctx: PageContext, layer: int, layer_name: str) -> None:
    """The per-sequence map of all records at ``layer``, its controls and downloads.

    The map is drawn with the records whose mean embedding the result store holds and gains
    points while the set's job runs (``set_results.record_outputs``: the same unmasked pass per
    record as the Records table's mean entropy)."""
    st.subheader("Per-sequence mean embeddings")
    arrived = _arrived_means(ctx, layer)
    if arrived is None:
        return
    found, means = arrived
    rows = metadata_rows(found)
    table, table_notes, table_problem = _joined(found)
    choice = _map_controls(ctx, found, rows, table)
    _table_upload(table_notes, table_problem)

    with st.spinner("Projecting (UMAP's first run compiles numba code: ~20 s)…"):
        projection = _projection(means, choice.method)
    if projection.note:
        st.info(projection.note)
    _record_map(ctx, layer, layer_name, found, means, rows, table, projection, choice)
    protspace_downloads(ctx.model, found, means, table, layer)


def _arrived_means(ctx: PageContext, layer: int) -> tuple[tuple, np.ndarray] | None:
    """The records whose mean embedding at ``layer`` has arrived, and those means (N, D); None
    (and why, where the user can act) while fewer than two are there to map."""
    everything = ctx.records
    if len(everything) < 2:
        st.info("Add two or more records on the Input page to compare sequences here.")
        return None
    arrived = set_results.record_outputs(ctx.engine, ctx.model, tuple(r.sequence for r in everything),
                                         f"mean/{layer}", "the records' map")
    found = tuple(r for r in everything if r.sequence in arrived.values)
    if len(found) < len(everything):
        state = f" ({arrived.job.status().line()})" if arrived.job is not None else ""
        st.caption(f"{len(found):,} of {len(everything):,} records on the map so far; the others "
                   f"appear as they are computed{state}.")
    if len(found) < 2:
        return None
    return found, np.stack([arrived.values[r.sequence] for r in found])


def _map_controls(ctx: PageContext, found: tuple, rows: list[dict],
                  table: dict[str, list]) -> _MapChoice:
    """The row of projection, colour and labels controls, and the search below it."""
    everything = ctx.records
    # The choices and the default from every record, not from those whose means have arrived: the
    # colour is kept once shown, and a first map of two or three records (a model new to the server
    # computes them in chunks) has no column grouping them, so 'nothing' stayed when the rest arrived.
    every_row = metadata_rows(everything) if len(everything) > len(found) else rows
    choices = colour_choices(every_row, table)
    controls = st.columns([1, 2, 1], vertical_alignment="bottom")
    with controls[0]:
        method = kept_radio("Map", "smap", horizontal=True, help="UMAP needs the optional umap-learn package")
    with controls[1]:
        colour_key = kept_selectbox("Colour records by", "scolour", list(choices),
                                    default=default_colour(every_row, choices), format_func=choices.get)
    with controls[2]:
        labels = labels_toggle(len(everything))
    text = search_box(len(everything))
    hits = matching(found, text)
    if text.strip():
        st.caption(search_caption(text, len(hits), len(found), "ringed and labelled on the map"))
    return _MapChoice(method, colour_key, labels, hits)


def _table_upload(table_notes: list[str], table_problem: str | None) -> None:
    """The expander to upload a metadata table, what its join noted, and its removal."""
    with st.expander("Colour by your own table (CSV/TSV joined on the record id)", icon=":material/table:"):
        st.file_uploader("Metadata table", type=["csv", "tsv", "txt"], key="_record_table_upload",
                         on_change=_take_table, label_visibility="collapsed",
                         max_upload_size=upload_size_mb())
        st.caption("Its id column (id, identifier, record_id, accession … or the first) is matched to record ids "
                   "or UniProt accessions; every other column can colour the map.")
        for note in table_notes:
            st.caption(plain(note))
        if table_problem or st.session_state.get(TABLE_PROBLEM):
            st.error(plain(table_problem or st.session_state[TABLE_PROBLEM]))
        if st.session_state.get(TABLE):
            st.button("Remove the table", on_click=lambda: st.session_state.pop(TABLE, None))


def _record_map(ctx: PageContext, layer: int, layer_name: str, found: tuple, means: np.ndarray,
                rows: list[dict], table: dict[str, list], projection, choice: _MapChoice) -> None:
    """The map of the records' projected means, with the means and the map's points to download."""
    ids = [r.id for r in found]
    colour, colour_name = _colour(choice.colour_key, rows, table)
    selected = ctx.record
    fig = record_map_figure(
        projection, ids, colour, colour_name, selected.id if selected else None, choice.labels,
        found=[ids[i] for i in sorted(choice.hits)],
        title=f"Mean embeddings of {len(ids)} records, {layer_name} ({METHODS[projection.method]})",
    )
    extra = table  # the joined table's columns go into the downloads too
    stem = f"records_{ctx.model_stem}_layer{layer}"  # the model in every name (issue 50)
    with show_figure(fig, "sequence_pca", f"{stem}_{projection.method}"):
        npz_button(
            "Mean embeddings (NPZ)",
            lambda: {"ids": np.array(ids), "layer": np.array(layer), "mean_embeddings": means},
            f"{stem}_mean_embeddings.npz",
            "sequence_npz",
        )
        csv_button(
            "Map coordinates and metadata (CSV)",
            lambda: pd.DataFrame([{**row, **{f"{projection.method}_1": x, f"{projection.method}_2": y},
                                   **{k: v[i] for k, v in extra.items()}}
                                  for i, (row, (x, y)) in enumerate(zip(rows, projection.coords))]),
            f"{stem}_{projection.method}.csv",
            "sequence_csv",
            model=ctx.model_name,
        )


@st.cache_data(show_spinner=False, max_entries=16)
def _projection(means: np.ndarray, method: str):
    return project(means, method)


def protspace_downloads(model: str, found, means: np.ndarray, extra: dict[str, list], layer: int) -> None:
    """The records for ProtSpace: per-sequence embeddings (.h5) and their metadata (.csv)."""
    st.caption(
        "For [ProtSpace](https://github.com/tsenoner/protspace): `protspace prepare -i records.h5 "
        "-a records_metadata.csv -m pca2,umap2 -o out`, then open the bundle in its web app."
    )
    # The model in the name (issue 50): the same records under two models gave two records_layer12.h5.
    stem = safe_name(f"records_{visitor_short_name(model)}_layer{layer}")
    row = st.container(horizontal=True)
    with row:
        if importlib.util.find_spec("h5py") is None:
            st.caption("The HDF5 export needs the h5py package (`pip install h5py`).")
        else:
            file_button("Embeddings for ProtSpace (HDF5)",
                        lambda: h5_bytes([r.id for r in found], means, model_label(visitor_model_name(model))),
                        f"{stem}.h5", "protspace_h5", "application/x-hdf5")
        file_button("Metadata for ProtSpace (CSV)", lambda: metadata_csv(found, extra),
                    f"{stem}_metadata.csv", "protspace_csv", "text/csv")

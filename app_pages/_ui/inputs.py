"""The session's input: the FASTA text, its validation with this session's limits, the records,
the record the pages analyse, and the examples.

Pasted text, uploads and links all go through ``parse_input``, which calls the one validator
(``flamino_core.fasta``) with the app's limits, tightened in hosted mode (``policy.py``).
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import streamlit as st

from flamino_core.fasta import InputIssue, ParsedInput, ProteinRecord, parse_fasta_text

from . import numbering
from .policy import current_limits, hosted_mode
from .views import DEFAULT_PAGE, PAGES
from .widgets import kept_selectbox, plain, residues, widget_key

ASSETS = Path(__file__).resolve().parents[2] / "assets"
EXAMPLES = {  # button label -> file in assets/
    "Haemoglobin β (human)": "HBB_HUMAN.fa",
    "Ubiquitin (human)": "UBIQ_HUMAN.fa",
    "Two UniProt entries": "uniprot_two.fa",
}
# Input limits for an interactive session (the CLI has none); hosted mode tightens them.
MAX_RECORDS = 200
MAX_RESIDUES_PER_RECORD = 5_000
MAX_TOTAL_RESIDUES = 100_000

# Session-state keys (``record`` is also the link's query key).
FASTA = "fasta_text"
RECORD = "record"
LINK_RECORD = "_link_record"  # the record a link named, until it is found or given up


def input_limits() -> dict[str, int]:
    """The validator's limits for this session: the app's own, tightened in hosted mode.

    A hosted server's per-record limit is not a reason to refuse a record (up to the app's
    own limit): a longer one is analysed in a window of that many residues (``numbering``).
    """
    hosted = current_limits().fasta_limits()
    hosted["max_residues_per_record"] = None
    own = {
        "max_records": MAX_RECORDS,
        "max_residues_per_record": MAX_RESIDUES_PER_RECORD,
        "max_total_residues": MAX_TOTAL_RESIDUES,
    }
    return {key: value if hosted[key] is None else min(value, hosted[key]) for key, value in own.items()}


def upload_size_mb() -> int | None:
    """The upload cap the browser enforces in hosted mode (whole MB); the server checks too."""
    limit = current_limits().max_upload_bytes
    return None if limit is None else max(1, math.ceil(limit / 1e6))


# Parsed inputs kept in memory: fewer on a shared server (fixed at import, like every cache).
@st.cache_data(show_spinner=False, max_entries=16 if hosted_mode() else 64)
def _parse(text: str, max_records: int, max_residues_per_record: int, max_total_residues: int) -> ParsedInput:
    return parse_fasta_text(
        text,
        max_records=max_records,
        max_residues_per_record=max_residues_per_record,
        max_total_residues=max_total_residues,
    )


def parse_input(text: str) -> ParsedInput:
    """The one validator, with this session's limits; pasted text, uploads and links all come here."""
    problem = current_limits().check_upload(len(text.encode("utf-8", "replace")), "the input")
    if problem:
        return ParsedInput((), (), (InputIssue(None, problem, "error"),))
    result = _parse(text, **input_limits())
    size = numbering.window_size()
    windowed = tuple(
        InputIssue(r.id, f"{len(r.sequence):,} residues, more than this server analyses at once "
                   f"({size:,}): the pages show a window of {size:,} residues, chosen in the sidebar", "warning")
        for r in result.records if size is not None and len(r.sequence) > size
    )  # fmt: skip
    return dataclasses.replace(result, warnings=result.warnings + windowed) if windowed else result


def parsed() -> ParsedInput | None:
    """The validated input of this session, or None when the box is empty."""
    text = st.session_state.get(FASTA, "")
    return parse_input(text) if text.strip() else None


def records(as_read: bool = False) -> tuple[ProteinRecord, ...]:
    """The records as the pages analyse them (hosted: long ones cut to their window), or as read."""
    result = parsed()
    if not result or not result.records:
        return ()
    if as_read:
        return result.records
    chosen = st.session_state.get(RECORD)
    selected = chosen if any(r.id == chosen for r in result.records) else result.records[0].id
    return numbering.analysed_records(result.records, selected)


def selected_record(as_read: bool = False) -> ProteinRecord | None:
    """The record the pages analyse: the one chosen in the sidebar, else the first."""
    found = records(as_read)
    if not found:
        return None
    chosen = st.session_state.get(RECORD)
    return next((r for r in found if r.id == chosen), found[0])


def first_number(record: ProteinRecord) -> int:
    """The number of the first residue of ``record`` (as the pages analyse it): the sidebar's
    "First residue number" for the selected record, else the id's ``/start-end`` suffix (else 1),
    moved on to where a hosted window starts. Position ``i`` (0-based) is ``first_number + i``."""
    return numbering.first_number(record)


def record_picker() -> None:
    """Sidebar choice of the record the pages analyse (only when there are several)."""
    found = records()
    if not found:
        st.caption("No sequence yet: start on the Input page.")
        return
    lengths = {r.id: len(r.sequence) for r in found}
    ids = list(lengths)
    if len(found) == 1:
        st.caption("Record")
        st.text(f"{ids[0]} ({lengths[ids[0]]} aa)")
        st.session_state[RECORD] = ids[0]
        return
    kept_selectbox(
        f"Record ({len(found)} in the input)",
        RECORD,
        ids,
        default=ids[0],
        format_func=lambda i: f"{i} ({lengths[i]} aa)",
        on_change=lambda: st.session_state.pop(LINK_RECORD, None),  # a choice: no longer the link's
    )


def require_record() -> ProteinRecord | None:
    """The selected record, or None after pointing the user to the Input page."""
    record = selected_record()
    if record is None:
        st.info("Start on the **Input** page: paste a sequence, upload FASTA or pick an example.")
        if st.button("Go to Input"):
            st.switch_page(PAGES[DEFAULT_PAGE].file)
    wanted = st.session_state.get(LINK_RECORD)
    if record is not None and wanted is not None:
        if any(r.id == wanted for r in records()):
            st.session_state.pop(LINK_RECORD)
        else:  # never silently another record: the link's numbers would seem to be about it
            st.warning(plain(f"The link names the record {wanted}, which is not in this input.")
                       + " Choose a record in the sidebar.", icon=":material/link_off:")
            st.button(plain(f"Show {record.id}"), on_click=lambda: st.session_state.pop(LINK_RECORD, None))
            return None
    return record


def set_input(text: str) -> None:
    """Replace the input (from a callback: the text box shows it on the next run)."""
    st.session_state[FASTA] = text
    st.session_state[widget_key(FASTA)] = text
    st.session_state.pop(RECORD, None)
    st.session_state.pop(LINK_RECORD, None)


def sync_input() -> None:
    """Take the text box's latest value before anything (the sidebar) reads the input.

    The sidebar is drawn before the page, so without this it would show the records of the
    previous input for one run after an edit.
    """
    if widget_key(FASTA) in st.session_state:
        st.session_state[FASTA] = st.session_state[widget_key(FASTA)]


def example_text(label: str) -> str:
    return (ASSETS / EXAMPLES[label]).read_text()


def show_issues(result: ParsedInput, limit: int = 25) -> None:
    """Errors and warnings from the validator, each naming its record (and position)."""
    sections = (
        (result.errors, st.error, "problem(s): these records or lines were not analysed"),
        (result.warnings, st.warning, "warning(s)"),
    )
    for issues, show, heading in sections:
        if not issues:
            continue
        lines = [f"- {plain(str(issue))}" for issue in issues[:limit]]
        if len(issues) > limit:
            lines.append(f"- … and {len(issues) - limit} more")
        show(f"**{len(issues)} {heading}**\n\n" + "\n".join(lines))


def record_caption(record: ProteinRecord) -> None:
    """The record's id, length and description, as plain text (headers are user input)."""
    parts = [record.id, residues(len(record.sequence)), record.description]
    st.text("  ·  ".join(part for part in parts if part))

"""The session's input: the FASTA text, its validation with this session's limits, the records,
the record the pages analyse, and the examples.

Pasted text, uploads and links all go through ``parse_input``, which calls the one validator
(``flamino_core.fasta``) with the app's limits, tightened in hosted mode (``policy.py``).
"""

from __future__ import annotations

import math
from pathlib import Path

import streamlit as st

from flamino_core.fasta import InputIssue, ParsedInput, ProteinRecord, parse_fasta_text
from flamino_core.numbering import numbering_offset

from .policy import current_limits, hosted_mode
from .views import DEFAULT_PAGE, PAGES
from .widgets import kept_selectbox, plain, widget_key

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


def input_limits() -> dict[str, int]:
    """The validator's limits for this session: the app's own, tightened in hosted mode."""
    hosted = current_limits().fasta_limits()
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
    return _parse(text, **input_limits())


def parsed() -> ParsedInput | None:
    """The validated input of this session, or None when the box is empty."""
    text = st.session_state.get(FASTA, "")
    return parse_input(text) if text.strip() else None


def records() -> tuple[ProteinRecord, ...]:
    result = parsed()
    return result.records if result else ()


def selected_record() -> ProteinRecord | None:
    """The record the pages analyse: the one chosen in the sidebar, else the first."""
    found = records()
    if not found:
        return None
    chosen = st.session_state.get(RECORD)
    return next((r for r in found if r.id == chosen), found[0])


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
    )


def first_number(record: ProteinRecord) -> int:
    """The number of the record's first residue: its id's ``/start-end`` suffix, else 1."""
    return numbering_offset(record.id, len(record.sequence))[0]


def require_record() -> ProteinRecord | None:
    """The selected record, or None after pointing the user to the Input page."""
    record = selected_record()
    if record is None:
        st.info("Start on the **Input** page: paste a sequence, upload FASTA or pick an example.")
        if st.button("Go to Input"):
            st.switch_page(PAGES[DEFAULT_PAGE].file)
    return record


def set_input(text: str) -> None:
    """Replace the input (from a callback: the text box shows it on the next run)."""
    st.session_state[FASTA] = text
    st.session_state[widget_key(FASTA)] = text
    st.session_state.pop(RECORD, None)


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
    parts = [record.id, f"{len(record.sequence)} residues", record.description]
    st.text("  ·  ".join(part for part in parts if part))

"""The session's input: the pasted text and the uploaded files (``uploads.py``), their validation
with this session's limits, the records, the record the pages analyse, and the examples.

Pasted text, uploads and links all go through ``parse_input``, which calls the one validator
(``flamino_core.inputs.fasta``) with the app's limits, tightened in hosted mode (``policy.py``). The
pasted text and each file are separate sources; their records are combined, ids kept unique.
Sequences that look like DNA/RNA are refused unless the user ticked the box that keeps
``ALLOW_DNA`` (also a link option).
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import streamlit as st

from flamino_core.wording import byte_size
from flamino_core.inputs import (InputIssue, InputLimits, Numbering, ParsedInput, ProteinRecord,
                                 parse_sources, to_fasta)
from app_pages._ui.input import numbering, uploads
from app_pages._ui.server.policy import current_limits, hosted_mode
from app_pages._ui.frame.widgets import counted, kept_selectbox, plain, residues, widget_key

ASSETS = Path(__file__).resolve().parents[3] / "assets"
EXAMPLES = {  # button label -> file in assets/
    "Haemoglobin β (human)": "HBB_HUMAN.fa",
    "Ubiquitin (human)": "UBIQ_HUMAN.fa",
    "Two UniProt entries": "uniprot_two.fa",
}
# Input limits for an interactive session (the CLI has none); hosted mode tightens them.
MAX_RECORDS = 200
MAX_RESIDUES_PER_RECORD = 5_000
MAX_TOTAL_RESIDUES = 100_000

# Session-state keys (``record`` and ``dna`` are also link query keys).
FASTA = "fasta_text"  # the pasted text only; uploads are kept by ``uploads.py``
RECORD = "record"
ALLOW_DNA = "dna"  # analyse nucleotide sequences as protein anyway (views.OPTIONS)
LINK_RECORD = "_link_record"  # the record a link named, until it is found or given up


def input_limits() -> InputLimits:
    """The validator's limits for this session: the app's own, tightened in hosted mode.

    A hosted server's per-record limit is not a reason to refuse a record (up to the app's
    own limit): a longer one is analysed in a window of that many residues (``numbering``).
    """
    hosted = current_limits().input_limits()

    def tightest(own: int, server: int | None) -> int:
        return own if server is None else min(own, server)

    return InputLimits(tightest(MAX_RECORDS, hosted.max_records), MAX_RESIDUES_PER_RECORD,
                       tightest(MAX_TOTAL_RESIDUES, hosted.max_total_residues), hosted.max_decompressed_bytes)


def upload_size_mb() -> int | None:
    """The upload cap the browser enforces in hosted mode (whole MB): twice this server's limit.

    The browser's own refusal is only a red icon on the file's chip, so a file a little over the
    limit is let through to the server, whose check (``Limits.check_upload``) refuses it in words;
    the labels say the limit before any upload (``upload_limit_words``).
    """
    limit = current_limits().max_upload_bytes
    return None if limit is None else max(1, math.ceil(2 * limit / 1e6))


def upload_limit_words() -> str:
    """``; up to 1.0 MB per file on this server`` for an uploader's label, or "" without a limit."""
    limit = current_limits().max_upload_bytes
    return "" if limit is None else f"; up to {byte_size(limit)} per file on this server"


# Parsed inputs kept in memory: fewer on a shared server (fixed at import, like every cache).
# Files are keyed by name and digest; their bytes (``_data``) are not hashed on every run.
@st.cache_data(show_spinner=False, max_entries=16 if hosted_mode() else 64)
def _parse(
    text: str, files: tuple[tuple[str, str], ...], _data: tuple[bytes, ...], allow_dna: bool, limits: InputLimits,
) -> tuple[ParsedInput, tuple[int, ...]]:
    sources = ([(None, text)] if text.strip() else []) + [(name, data) for (name, _), data in zip(files, _data)]
    combined, kept = parse_sources(sources, allow_nucleotides=allow_dna, limits=limits)
    return combined, kept if text.strip() else (0, *kept)


def parse_input(text: str, files: tuple[uploads.Upload, ...] = (), allow_dna: bool = False):
    """The one validator, with this session's limits, on pasted text and uploaded files.

    Returns:
      ``(combined ParsedInput, records kept from the text, then from each file)``.
    """
    problem = current_limits().check_upload(len(text.encode("utf-8", "replace")), "the input")
    if problem:  # the pasted text is refused; the files are still read
        refused = ParsedInput((), (), (InputIssue(None, problem, "error"),))
        combined, kept = parse_input("", files, allow_dna)
        return ParsedInput(refused.records, combined.warnings, refused.errors + combined.errors,
                           combined.nucleotide_labels), kept
    readable = tuple(f for f in files if f.problem is None)
    combined, kept = _parse(
        text, tuple((f.name, f.digest) for f in readable), tuple(f.data for f in readable), allow_dna,
        input_limits(),
    )
    counts = iter(kept[1:])
    per_file = tuple(0 if f.problem else next(counts) for f in files)
    problems = tuple(InputIssue(None, f.problem, "error", f.name) for f in files if f.problem)
    size = numbering.window_size()
    windowed = tuple(
        InputIssue(r.id, f"{len(r.sequence):,} residues, more than this server analyses at once "
                   f"({size:,}): the pages show a window of {size:,} residues, chosen in the sidebar", "warning")
        for r in combined.records if size is not None and len(r.sequence) > size
    )
    combined = dataclasses.replace(combined, errors=problems + combined.errors, warnings=combined.warnings + windowed)
    return combined, (kept[0], *per_file)


def read_input() -> tuple[ParsedInput | None, tuple[int, ...]]:
    """The validated input of this session (None when there is none) and records per source.

    ``app.py`` calls this once per rerun (``context.build`` keeps it); nothing else parses."""
    text, files = st.session_state.get(FASTA, ""), uploads.files()
    if not text.strip() and not files:
        return None, (0,)
    return parse_input(text, files, bool(st.session_state.get(ALLOW_DNA)))


def link_text(records_read: tuple[ProteinRecord, ...]) -> str:
    """The input a share link carries: the pasted text, or with uploads, every record as FASTA."""
    if not uploads.files():
        return st.session_state.get(FASTA, "")
    return to_fasta(records_read) if records_read else ""


def chosen(records: tuple[ProteinRecord, ...]) -> ProteinRecord | None:
    """The record the pages analyse: the one chosen in the sidebar, else the first."""
    if not records:
        return None
    wanted = st.session_state.get(RECORD)
    return next((r for r in records if r.id == wanted), records[0])


def record_picker(records_read: tuple[ProteinRecord, ...]) -> ProteinRecord | None:
    """Sidebar choice of the record the pages analyse (only when there are several); returns it
    (as read)."""
    if not records_read:
        st.caption("No sequence yet: start on the Input page.")
        return None
    # The proteins' own lengths, not a hosted window's (issue 24: "2,000 residues (2000 aa)" for a
    # 2,554-residue protein); the page's caption says which window is analysed.
    lengths = {r.id: len(r.sequence) for r in records_read}
    ids = list(lengths)
    if len(records_read) == 1:
        st.caption("Record")
        st.text(f"{ids[0]} ({lengths[ids[0]]:,} aa)")
        st.session_state[RECORD] = ids[0]
    else:
        kept_selectbox(
            f"Record ({len(records_read)} in the input)",
            RECORD,
            ids,
            default=ids[0],
            format_func=lambda i: f"{i} ({lengths[i]:,} aa)",
            on_change=forget_link_record,  # a choice: no longer the link's
        )
    return chosen(records_read)


def missing_link_record(records_read: tuple[ProteinRecord, ...]) -> str | None:
    """The record a link named when this input lacks it (the pages then say so), else None; a
    link's record that is found is the user's choice from now on."""
    wanted = st.session_state.get(LINK_RECORD)
    if wanted is None or not records_read:
        return None
    if any(r.id == wanted for r in records_read):
        st.session_state.pop(LINK_RECORD)
        return None
    return wanted


def forget_link_record() -> None:
    st.session_state.pop(LINK_RECORD, None)


def pick_record(record_id: str) -> None:
    """Make ``record_id`` the record the pages analyse (from a callback: a click on a table row)."""
    st.session_state[RECORD] = st.session_state[widget_key(RECORD)] = record_id
    forget_link_record()


def set_input(text: str) -> None:
    """Replace the input (from a callback: the text box shows it on the next run)."""
    st.session_state[FASTA] = text
    st.session_state[widget_key(FASTA)] = text
    st.session_state.pop(RECORD, None)
    st.session_state.pop(LINK_RECORD, None)


def sync_input() -> None:
    """Take the text box's (and the DNA box's) latest value before anything (the sidebar) reads
    the input.

    The sidebar is drawn before the page, so without this it would show the records of the
    previous input for one run after an edit.
    """
    for key in (FASTA, ALLOW_DNA):
        if widget_key(key) in st.session_state:
            st.session_state[key] = st.session_state[widget_key(key)]


def example_text(label: str) -> str:
    return (ASSETS / EXAMPLES[label]).read_text()


def show_issues(result: ParsedInput, limit: int = 25) -> None:
    """Errors and warnings from the validator, each naming its record (and position)."""
    sections = (
        (result.errors, st.error, ("problem", "problems"), ": these records or lines were not analysed"),
        (result.warnings, st.warning, ("warning", "warnings"), ""),
    )
    for issues, show, (one, many), detail in sections:
        if not issues:
            continue
        lines = [f"- {plain(str(issue))}" for issue in issues[:limit]]
        if len(issues) > limit:
            lines.append(f"- … and {len(issues) - limit} more")
        show(f"**{counted(len(issues), one, many)}{detail}**\n\n" + "\n".join(lines))


def record_caption(record: ProteinRecord, read: ProteinRecord | None = None,
                   numbering: Numbering = Numbering()) -> None:
    """The record's id, length and description, as plain text (headers are user input). A record
    a hosted server analyses in a window (``read``: the record as read, longer; ``numbering``: the
    window's residue numbering) shows the protein's own length and the window apart."""
    length = residues(len(record.sequence))
    if read is not None and read.id == record.id and len(read.sequence) > len(record.sequence):
        last_number = numbering.last(len(record.sequence))
        length = (f"{residues(len(read.sequence))}; analysed here: residues {numbering.first:,}–"
                  f"{last_number:,} (this server's {len(record.sequence):,}-residue window)")
    parts = [record.id, length, record.description]
    st.text("  ·  ".join(part for part in parts if part))

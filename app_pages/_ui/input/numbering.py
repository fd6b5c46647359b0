"""Residue numbering: the number of a record's first residue, and the window a hosted server
analyses of a record longer than its limit.

Users quote positions in their own numbering (``SECY_CHLTR/73-433`` starts at 73), so every page,
axis, table and download shows ``ctx.first + index`` (``context.PageContext``). The number comes from the id
(``flamino_core.inputs.numbering``) unless the sidebar overrides it. A hosted server analyses at most
``max_residues_per_record`` residues of a record at a time: a longer record is cut to the window
the sidebar chooses, and its numbering starts where the window does.

Per-record options (``views.OPTIONS`` with ``per_record``: this number, the window, the residue
range) are forgotten when another record is chosen, so a range picked for one protein is not
applied to the next.
"""

from __future__ import annotations

import dataclasses
import re
import zlib

import streamlit as st

from flamino_core.inputs import Numbering, ProteinRecord, first_number, record_span
from flamino_core.variants import from_record

from app_pages._ui.server.policy import current_limits
from app_pages._ui.frame.views import MAX_INT, OPTIONS
from app_pages._ui.frame.widgets import kept_number_input, plain, widget_key

FIRST = "first"  # session-state and link keys (views.OPTIONS)
WINDOW = "win"
OPTIONS_FOR = "_per_record_options_for"  # which record the per-record options belong to
ADOPT = "adopt"  # set by a link: the first record shown keeps the link's values


# --- per-record options --------------------------------------------------------------------------
def _identity(record: ProteinRecord) -> tuple[str, int, int]:
    # crc32, not hash(): the same in every process, so a test can rely on it.
    return record.id, len(record.sequence), zlib.crc32(record.sequence.encode())


def follow_record(record: ProteinRecord) -> None:
    """Forget the per-record options when ``record`` (as read, before any window) is a new one."""
    ss = st.session_state
    held = ss.get(OPTIONS_FOR)
    identity = _identity(record)
    if held not in (None, ADOPT) and held != identity:
        for option in OPTIONS.values():
            if option.per_record:
                for key in (option.key, f"{option.key}_start", f"{option.key}_end"):
                    ss.pop(key, None)
                    ss.pop(widget_key(key), None)
    ss[OPTIONS_FOR] = identity


# --- hosted windows ----------------------------------------------------------------------------
def window_size() -> int | None:
    """The most residues of one record this server analyses (None: all of them)."""
    return current_limits().max_residues_per_record


def window_start(record: ProteinRecord, selected_id: str | None) -> int:
    """0-based start of the analysed window of ``record`` (as read): the sidebar's choice for the
    selected record, the first residues for the others, 0 when the record fits."""
    size = window_size()
    if size is None or len(record.sequence) <= size:
        return 0
    chosen = st.session_state.get(WINDOW, 1) if record.id == selected_id else 1
    chosen = chosen if isinstance(chosen, int) else 1
    return min(max(chosen, 1), len(record.sequence) - size + 1) - 1


def analysed_records(records: tuple[ProteinRecord, ...], selected_id: str | None) -> tuple[ProteinRecord, ...]:
    """The records as the pages analyse them: each longer than this server's limit cut to its window."""
    size = window_size()
    out = []
    for record in records:
        start = window_start(record, selected_id)
        if size is not None and len(record.sequence) > size:
            record = dataclasses.replace(record, sequence=record.sequence[start:start + size])
        out.append(record)
    return tuple(out)


def window_note(record: ProteinRecord, full_length: int, numbering: Numbering) -> str | None:
    """What a windowed record's analysis covers, for the pages (None when it is analysed whole);
    ``numbering``: its residue numbering as analysed."""
    if full_length <= len(record.sequence):
        return None
    return (
        f"This server analyses at most {window_size():,} residues of a sequence at a time: these pages "
        f"show residues {numbering.first:,}–{numbering.last(len(record.sequence)):,} of the {full_length:,}. "
        "Choose the window in the sidebar."
    )


# --- the first residue's number ------------------------------------------------------------------
def id_first_number(record: ProteinRecord) -> int:
    """The first residue's number from the id alone (``/start-end`` suffix; else 1)."""
    return _id_numbering(record)[0]


def _id_numbering(record: ProteinRecord) -> tuple[int, str]:
    """``first_number`` of the id, kept within the numbers a page and a link can hold: every
    position must be within ``views.MAX_INT`` (a header ``>X/99999999-99999999`` broke the
    sidebar's number input and the share link with it)."""
    first, note = first_number(record.id, len(record.sequence))
    author = from_record(record)
    if note and author is not None and record_span(record.id) == _label_span(author):
        # The app built this id from a structure's labels (1GBT_A/16-245: chymotrypsin numbering,
        # 223 residues): the span is the file's, not a count, so there is nothing to warn about.
        note = (f"{record.id}: numbered as its structure file numbers it ({author.span()}, with gaps or insertion "
                "codes); the Variant effects page reads and shows positions in that numbering")
    if not -MAX_INT <= first <= _highest_first(record):
        return 1, (f"the id's /start-end suffix numbers residues beyond {MAX_INT:,}, more than the pages "
                   "number; numbering starts at 1 (set the first residue's number to change it)")
    return first, note


def _label_span(author) -> tuple[int, int] | None:
    """The numbers of a structure's first and last labels (``16``, ``245`` of ``16..245``)."""
    ends = [re.match(r"-?\d+", label) for label in (author.labels[0], author.labels[-1])]
    return (int(ends[0].group()), int(ends[1].group())) if all(ends) else None


def _highest_first(record: ProteinRecord) -> int:
    return MAX_INT - len(record.sequence) + 1


def numbering_controls(record: ProteinRecord) -> int:
    """Sidebar: the first residue's number of the selected record (as read), and its window.

    Returns that number (of the record as read; ``context.build`` adds where its window starts)."""
    follow_record(record)
    offset, note = _id_numbering(record)
    first = kept_number_input(
        "Numbering: the first residue is number",
        FIRST,
        max_value=_highest_first(record),  # the last residue's number must fit a link too
        default=offset,
        help="Positions on every page, axis and download are numbered from here. Read from a "
        "Pfam/UniProt-style /start-end suffix of the record id (SECY_CHLTR/73-433 starts at 73), "
        "else 1; change it for a fragment cut from a longer protein.",
    )
    if note:
        st.caption(plain(note))
    elif offset != 1 and first == offset:
        st.caption(plain(f"From the id's /{offset}-… suffix."))
    size = window_size()
    if size is None or len(record.sequence) <= size:
        return first
    last_start = len(record.sequence) - size + 1
    start = kept_number_input(
        f"Analysed window: first residue (this server analyses {size:,} at a time)",
        WINDOW,
        min_value=1,
        max_value=last_start,
        shift=Numbering(first).shift,
        help=f"The record has {len(record.sequence):,} residues; this server analyses at most {size:,} of "
        "a sequence at a time. Every page shows the window starting here.",
    )
    window = Numbering(first)  # start is 1-based: residue start - 1 is the window's first
    st.caption(f"Window: residues {window.number(start - 1):,}–{window.number(start + size - 2):,} "
               f"of {len(record.sequence):,}.")
    return first

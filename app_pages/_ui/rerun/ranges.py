"""The residues an analysis page shows: one kept, shareable range (``range`` in ``views.OPTIONS``)
for the Masked predictions, Embeddings and Attention pages, entered in the sequence's numbering.

Figures, tables, scans and downloads cover the range only. Default: the whole sequence up to
``LONG_VIEW`` residues (ESM-2's training length: one window); a longer one opens on its first
``DEFAULT_SPAN`` residues, because a heatmap of 2,500 positions is unreadable (a column per two
pixels) and its 2,500 x 2,500 contact map alone is ~25 MB for the browser. The caption says so.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import streamlit as st

from flamino_core.inputs import Numbering
from flamino_core.model import MAX_RESIDUES

from app_pages._ui.input import numbering
from app_pages._ui.frame.widgets import kept_span, residues, widget_key

RANGE = "range"  # session-state and link key
LONG_VIEW = MAX_RESIDUES  # sequences up to this long are shown whole by default
DEFAULT_SPAN = 500  # residues shown first of a longer one

if TYPE_CHECKING:
    from app_pages._ui.rerun.context import PageContext


@dataclasses.dataclass(frozen=True)
class Shown:
    """The stretch of the analysed sequence a page shows."""

    start: int  # 0-based index of the first residue shown
    stop: int  # 0-based, exclusive
    length: int  # residues in the analysed sequence
    sequence_numbering: Numbering  # the analysed sequence's residue numbering

    @property
    def number(self) -> int:
        """The number of the first residue shown (what figure axes start at)."""
        return self.sequence_numbering.number(self.start)

    @property
    def numbering(self) -> Numbering:
        """The shown part's numbering: its index 0 is residue ``number``."""
        return Numbering(self.number)

    @property
    def last(self) -> int:
        """The number of the last residue shown."""
        return self.sequence_numbering.number(self.stop - 1)

    @property
    def size(self) -> int:
        return self.stop - self.start

    @property
    def whole(self) -> bool:
        return self.start == 0 and self.stop == self.length

    @property
    def span(self) -> slice:
        return slice(self.start, self.stop)

    def label(self) -> str:
        """``residues 73–572`` in the sequence's numbering."""
        return f"residue {self.number:,}" if self.size == 1 else f"residues {self.number:,}–{self.last:,}"

    def stem(self) -> str:
        """A file-name part for downloads of a part of the sequence ("" for the whole)."""
        return "" if self.whole else f"_{self.number}-{self.last}"


def default_range(length: int) -> tuple[int, int]:
    """1-based inclusive default: all of a sequence up to ``LONG_VIEW``, else its first ``DEFAULT_SPAN``."""
    return (1, length) if length <= LONG_VIEW else (1, DEFAULT_SPAN)


def range_picker(length: int, numbering: Numbering, windowed: bool = False) -> Shown:
    """The page's range inputs (first and last residue, in the sequence's numbering) and a caption.

    Args:
      length: residues in the analysed sequence.
      numbering: its residue numbering (``ctx.numbering``).
      windowed: the sequence is a hosted server's window of a longer record (the caption says so).
    """
    if length < 2:
        return Shown(0, length, length, numbering)
    default = default_range(length)
    columns = st.columns([2, 3], vertical_alignment="bottom")
    with columns[0]:
        # "Show residues … to …": "First residue" read like the sidebar's "First residue number" (now
        # "Numbering: the first residue is number"), which does something else (issue 24).
        start, end = kept_span(("Show residues", "to"), RANGE, length, default=default, shift=numbering.shift,
                               help="The stretch of the sequence this page shows, in its numbering.")
    shown = Shown(start - 1, end, length, numbering)
    with columns[1]:
        if shown.whole:
            st.caption(f"Showing the whole analysed window ({residues(length)})." if windowed else
                       f"Showing the whole sequence ({residues(length)}).")
        else:
            why = (
                f" (sequences over {LONG_VIEW:,} residues open on their first {DEFAULT_SPAN}: "
                "a heatmap of more is unreadable)"
                if (start, end) == default
                else ""
            )
            of = f"the {length:,}-residue analysed window" if windowed else residues(length)
            st.caption(f"Showing {shown.label()} of {of}{why}.")
            st.button("Show the whole sequence", on_click=_show_whole, args=(length,), key="range_whole")
    return shown


def _show_whole(length: int) -> None:
    ss = st.session_state
    ss[RANGE] = (1, length)
    for part in ("start", "end"):
        ss.pop(widget_key(f"{RANGE}_{part}"), None)


def page_range(ctx: PageContext) -> Shown:
    """What an analysis page shows of the selected record (as analysed): a note when a hosted
    server cut it to a window, then the range inputs."""
    note = numbering.window_note(ctx.record, len(ctx.record_read.sequence), ctx.numbering)
    if note:
        st.info(note, icon=":material/crop:")
    return range_picker(len(ctx.sequence), ctx.numbering, windowed=len(ctx.record_read.sequence) > len(ctx.sequence))

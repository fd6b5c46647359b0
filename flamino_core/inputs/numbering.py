"""Residue numbering: the number of a sequence's first residue.

Sequences cut from a longer entry (a Pfam domain, a UniProt fragment) are numbered from where
they start in that entry, and users quote positions in that numbering (``SECY_CHLTR/73-433``
starts at 73). That number is called ``first`` everywhere (core, command line, app): every
page, figure axis, download and command that shows positions numbers them from it (the
command line's ``--offset`` sets it), read by default from the record id here. ``Numbering`` turns numbers into indices and back.
"""

from __future__ import annotations

import dataclasses
import re

_RECORD_SPAN = re.compile(r"/(\d+)-(\d+)$")


def record_span(record_id: str) -> tuple[int, int] | None:
    """``(start, end)`` of a Pfam/UniProt-style ``/start-end`` id suffix, or None."""
    match = _RECORD_SPAN.search(record_id or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


def first_number(record_id: str, length: int | None = None) -> tuple[int, str]:
    """The number of the first residue, read from a Pfam/UniProt-style ``/start-end`` suffix.

    ``SECY_CHLTR/73-433`` starts at 73; an id without the suffix starts at 1.

    Args:
      record_id: the FASTA record id.
      length: the sequence length, to check the span against (optional).

    Returns:
      ``(first, note)``: note is empty, or says why the suffix looks inconsistent (it is still
      used: the user can override it).
    """
    span = record_span(record_id)
    if span is None:
        return 1, ""
    start, end = span
    note = ""
    if length is not None and end - start + 1 != length:
        note = (f"{record_id}: the id says residues {start}-{end} ({end - start + 1:,}), but the sequence "
                f"has {length:,}; numbering starts at {start} anyway (give an offset to change it)")
    return start, note


@dataclasses.dataclass(frozen=True)
class Numbering:
    """Residue numbers <-> 0-based indices of one sequence: index ``i`` is residue ``first + i``.

    The one place this arithmetic lives (``SECY_CHLTR/73-433``: ``Numbering(73)``, index 0 is
    residue 73). ``number`` and ``index`` take an int or a NumPy array alike and keep its type.
    """

    first: int = 1

    def number(self, index):
        """The residue number of 0-based ``index`` (an int or an array of them)."""
        return index + self.first

    def index(self, number):
        """The 0-based index of residue ``number`` (an int or an array; may fall outside the sequence)."""
        return number - self.first

    @property
    def shift(self) -> int:
        """What turns a 1-based position into its number (``first - 1``): the app's widgets and
        links keep 1-based positions and show them shifted by it."""
        return self.first - 1

    def last(self, length: int) -> int:
        """The number of the last residue of a ``length``-residue sequence."""
        return self.first + length - 1

    def numbers(self, length: int) -> range:
        """The numbers of a ``length``-residue sequence's residues, in order."""
        return range(self.first, self.first + length)

    def index_within(self, number: int, length: int) -> int | None:
        """The index of residue ``number`` in a ``length``-residue sequence, None outside it."""
        index = number - self.first
        return index if 0 <= index < length else None

    def span(self, length: int) -> str:
        """``"16-245"``: the numbers a ``length``-residue sequence covers, for messages."""
        return f"{self.first:,}-{self.last(length):,}"

    def span_note(self, length: int) -> str:
        """``span`` and, when numbering does not start at 1, where it starts (``"16-245, numbering
        starts at 16"``): what a message about a position outside the sequence quotes."""
        return self.span(length) + (f", numbering starts at {self.first}" if self.first != 1 else "")

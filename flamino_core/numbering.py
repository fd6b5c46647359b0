"""``Numbering``: residue numbers <-> 0-based indices of one sequence, the one place that arithmetic
lives. At the lowest floor (with ``alphabet``), so that every layer numbers positions through it:
inputs read ``first`` from a record's id (``inputs/numbering.py``), analysis and structure tables
and figures number their rows and axes with it.
"""

from __future__ import annotations

import dataclasses


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

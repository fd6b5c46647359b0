"""Residue numbering: the number of a sequence's first residue.

Sequences cut from a longer entry (a Pfam domain, a UniProt fragment) are numbered from where
they start in that entry, and users quote positions in that numbering (``SECY_CHLTR/73-433``
starts at 73). That number is called ``first`` everywhere (core, command line, app): every
page, figure axis, download and command that shows positions numbers them from it (the
command line's ``--offset`` sets it), read by default from the record id here. ``Numbering``
(``flamino_core/numbering.py``) turns numbers into indices and back.
"""

from __future__ import annotations

import re

from flamino_core.numbering import Numbering  # noqa: F401  (the inputs' name for it, kept)

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

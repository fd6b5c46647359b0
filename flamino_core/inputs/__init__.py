"""Text and bytes to records: ``fasta`` (the whole-input API) over ``fasta_reader`` and
``fasta_records``, ``formats``, ``flat_files``, ``three_letter``; ``input_limits``, ``numbering``
(a record's first residue) and ``tables`` (uploaded measurement tables).
"""

from __future__ import annotations

from flamino_core.doors import lazy_door

# The door (doors.py): each name the app imports from this package -> its module here.
_EXPORTS = {
    **dict.fromkeys(["InputIssue", "ParsedInput", "ProteinRecord", "parse_sources", "to_fasta"], "fasta"),
    **dict.fromkeys(["InputLimits", "MAX_GUNZIP_BYTES"], "input_limits"),
    **dict.fromkeys(["Numbering", "first_number", "record_span"], "numbering"),
    **dict.fromkeys(["TableError", "TableLimits", "size_problem", "table_text"], "tables"),
}
__all__, __getattr__, __dir__ = lazy_door(__name__, _EXPORTS)

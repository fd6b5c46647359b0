"""Sets of records: ``summary`` (the Records table's columns), ``metadata`` (a table of
annotations joined to the records), ``embedding_map`` (the records' map), ``protspace`` (its
downloads).
"""

from __future__ import annotations

from flamino_core.doors import lazy_door

# The door (doors.py): each name the app imports from this package -> its module here.
_EXPORTS = {
    **dict.fromkeys(["METHODS", "project", "record_map_figure"], "embedding_map"),
    **dict.fromkeys(["FIELDS", "colour_values", "column_label", "grouping_column", "join_table",
                     "metadata_rows"], "metadata"),
    **dict.fromkeys(["h5_bytes", "metadata_csv", "model_label"], "protspace"),
    **dict.fromkeys(["ENTROPY_COLUMN", "PPPL_COLUMN", "SHOWN_FIELDS", "summary_rows"], "summary"),
}
__all__, __getattr__, __dir__ = lazy_door(__name__, _EXPORTS)

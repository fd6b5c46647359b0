"""Finding records in a set: one search box, kept across the Records and Embeddings pages, whose
matches are highlighted in the table and ringed and labelled on the map."""

from __future__ import annotations


from flamino_core.inputs.fasta import ProteinRecord

from app_pages._ui.frame.widgets import kept_text_input

SEARCH = "_record_search"  # session state: the search text, shared by the pages that show the set


def search_box(count: int) -> str:
    """The search box (shown for sets of more than two records); returns its text."""
    if count <= 2:
        return ""
    return kept_text_input(
        "Find records", SEARCH, placeholder="part of an id or a description: HBB, Homo sapiens, kinase…",
        help="Matching records are highlighted in the Records table and ringed and labelled on the map.",
    )


def matching(records: tuple[ProteinRecord, ...], text: str) -> set[int]:
    """Indices of the records whose id or description holds ``text`` (any case); none for ""."""
    wanted = text.strip().casefold()
    if not wanted:
        return set()
    return {i for i, r in enumerate(records) if wanted in r.id.casefold() or wanted in r.description.casefold()}

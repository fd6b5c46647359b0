"""Finding records in a set: one search box, kept across the Records and Embeddings pages, whose
matches are the rows the Records table shows and are ringed and labelled on the map; both say
how many match, and that none does."""

from __future__ import annotations


from flamino_core.inputs import ProteinRecord

from app_pages._ui.frame.widgets import kept_text_input, plain

SEARCH = "_record_search"  # session state: the search text, shared by the pages that show the set


def search_box(count: int) -> str:
    """The search box (shown for sets of more than two records); returns its text."""
    if count <= 2:
        return ""
    return kept_text_input(
        "Find records", SEARCH, placeholder="part of an id or a description: HBB, Homo sapiens, kinase…",
        help="The Records table shows the matching records only; the map rings and labels them.",
    )


def matching(records: tuple[ProteinRecord, ...], text: str) -> set[int]:
    """Indices of the records whose id or description holds ``text`` (any case); none for ""."""
    wanted = text.strip().casefold()
    if not wanted:
        return set()
    return {i for i, r in enumerate(records) if wanted in r.id.casefold() or wanted in r.description.casefold()}


def search_caption(text: str, hits: int, total: int, where: str = "the table shows those only") -> str:
    """How many records the search finds, or that it finds none (and how to see them all again)."""
    said = plain(text.strip())
    if not hits:
        return f"No record's id or description holds “{said}”. Clear the search to see all {total:,} records."
    return f"{hits:,} of {total:,} records hold “{said}” ({where})."

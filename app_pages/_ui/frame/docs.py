"""Passages of flamino's docs opened on the page where they apply: a page explains what it
computes with the docs' own words (``docs/*.md``, the one place they are written), in an expander
that opens in place, not a file name the visitor has no way to open.

A passage is a section (from its heading to the next heading of its level or above) or a
paragraph (from the line that starts with the given words to the next blank line).
"""

from __future__ import annotations

import functools
from pathlib import Path

import streamlit as st

DOCS = Path(__file__).resolve().parents[3] / "docs"


@functools.lru_cache(maxsize=32)
def passage(doc: str, start: str) -> str | None:
    """The passage of ``docs/<doc>`` that starts with the line beginning ``start`` (a heading
    such as ``## Scores``, or a paragraph's first words such as ``**Sums or per residue.**``);
    None when the file or the passage is not there (a server installed without the docs)."""
    try:
        lines = (DOCS / doc).read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    at = next((i for i, line in enumerate(lines) if line.startswith(start)), None)
    if at is None:
        return None
    if start.startswith("#"):
        level = len(start) - len(start.lstrip("#"))
        end = next((j for j in range(at + 1, len(lines))
                    if lines[j].startswith("#") and len(lines[j]) - len(lines[j].lstrip("#")) <= level), len(lines))
        body = lines[at + 1:end]  # the expander's label names the section
    else:
        end = next((j for j in range(at, len(lines)) if not lines[j].strip()), len(lines))
        body = lines[at:end]
    return "\n".join(body).strip()


def explain(label: str, doc: str, start: str) -> None:
    """An expander ``label`` holding the passage of ``docs/<doc>`` that starts with ``start``."""
    with st.expander(f"{label} (docs/{doc})", icon=":material/menu_book:"):
        text = passage(doc, start)
        st.markdown(text if text is not None else f"docs/{doc} in flamino's source says more ({start.strip('#* ')}).")

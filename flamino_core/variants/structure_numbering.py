"""Mutation lists written in a structure's own numbering (``S195A`` on chymotrypsin-numbered 1GBT).

The one reader the app's Variant effects page and ``flamino variants --structure-numbering`` use:
each entry's positions are turned from the structure's labels into the record's numbering
(``author_numbering.AuthorNumbering.to_sequence``) and the entry is then read as any other, so
``S195A`` on ``1GBT_A/16-245`` is the variant ``S192A`` and scores what ``S192A`` scores. The
entry is kept as written (the table's ``mutant``), its ``variant`` is in the record's numbering,
and ``with_structure_column`` adds the structure's (``structure_numbering``), so results and
downloads show both.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import pandas as pd

from flamino_core.numbering import Numbering
from flamino_core.variants.author_numbering import AuthorNumbering
from flamino_core.variants import notation as n

COLUMN = "structure_numbering"  # the results' column of each variant in the structure's numbering


def parse_mutations(text: str | bytes, sequence: str, numbering: Numbering, author: AuthorNumbering,
                    read: Callable[..., n.Variant | n.VariantIssue] | None = None,
                    **options) -> tuple[list[n.Variant], list[n.VariantIssue]]:
    """``notation.parse_mutations`` (the record's residues numbered in ``numbering``) with every
    entry's positions read in ``author`` (the structure's labels of the record's residues);
    ``read``: as there (``indels.parse_variant``
    reads indels too). A whole-list hint of another offset is left out: positions in the
    structure's numbering are not an offset away from the record's."""
    read = read or n.parse_variant

    def read_in_structure(entry: str, sequence: str, numbering: Numbering, order: int = 0, label: str = "",
                          reference: str = ""):
        if len(entry) > n.MAX_ENTRY_CHARS:  # refused by the reader, before any scan of it here
            return read(entry, sequence, numbering, order, label, reference)
        translated, unknown = author.to_sequence(entry, numbering)
        stripped = entry.strip()
        if unknown:
            return n.VariantIssue(order, stripped, n.OUT_OF_RANGE, f"{stripped!r}: {unknown}", label)
        parsed = read(translated, sequence, numbering, order, label, reference)
        if isinstance(parsed, n.Variant):
            return dataclasses.replace(parsed, text=stripped)
        if translated.strip() == stripped:
            return dataclasses.replace(parsed, text=stripped)
        said = f"{stripped!r} in the structure's numbering is {translated.strip()!r} in the sequence's"
        return dataclasses.replace(parsed, text=stripped, message=f"{said}: {parsed.message}")

    variants, issues = n.parse_mutations(text, sequence, numbering, read=read_in_structure, **options)
    return variants, [i for i in issues if not (i.order < 0 and i.kind == n.WRONG_WILD_TYPE)]


def with_structure_column(table: pd.DataFrame, author: AuthorNumbering, numbering: Numbering) -> pd.DataFrame:
    """``table`` (``scoring.VariantScores.table``: ``variant`` in the record's ``numbering``) with a
    ``structure_numbering`` column after ``variant``: each scored variant in the structure's
    numbering (``author``), "" where a row was not read."""
    names = [author.to_structure(variant, numbering) if variant else "" for variant in table["variant"]]
    shown = table.copy()
    shown.insert(list(shown.columns).index("variant") + 1, COLUMN, names)
    return shown


# --- positions shown in the structure's numbering (#66 D4) --------------------------------------
def structure_number(author: AuthorNumbering, index: int) -> int:
    """The number of the structure's label of the residue at 0-based ``index`` (``184A`` -> 184):
    what a position filter compares (an inserted residue sits with its number)."""
    label = author.label(index)
    sign = 1 if label.startswith("-") else 0
    end = next((k for k, c in enumerate(label[sign:], sign) if not c.isdigit()), len(label))
    return int(label[:end])


def in_structure_numbers(table: pd.DataFrame, author: AuthorNumbering, numbering: Numbering) -> pd.DataFrame:
    """``table`` with ``positions`` (tuples in the record's ``numbering``) as the structure numbers
    them (``structure_number``): S195A on 1GBT_A/16-245 is at 195, not at the record's 192."""
    def renumber(positions):
        return tuple(structure_number(author, numbering.index(p)) for p in positions)

    return table.assign(positions=[renumber(p) for p in table["positions"]])


def relabel_positions(fig, sequence: str, numbering: Numbering, author: AuthorNumbering):
    """A figure whose categorical position axis names residues ``S192`` (letter and the record's
    number, ``analysis.outputs.residue_labels``) renamed to the structure's labels (``S195``,
    ``Y184A``), in every trace's x: the substitution map and the variants on it."""
    rename = {f"{aa}{numbering.number(i)}": f"{aa}{author.label(i)}" for i, aa in enumerate(sequence)}
    for trace in fig.data:
        if getattr(trace, "x", None) is not None and len(trace.x) and isinstance(trace.x[0], str):
            trace.x = [rename.get(x, x) for x in trace.x]
    fig.update_xaxes(title="position (as the structure file numbers it)")
    return fig

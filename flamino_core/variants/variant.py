"""A variant as read from the user's list: ``Variant`` (its substitutions, or its ``Edit``s when
it changes the protein's length: insertions, deletions, delins, duplications, stops and
frameshifts, each one splice of the wild type), its mutated sequence (``apply_edits``), and
``VariantIssue`` for an entry that cannot be scored. The notations that write them are
``notation`` (substitutions) and ``indels``; callers import these classes from ``notation``.
"""

from __future__ import annotations

import dataclasses
from typing import Iterable

from flamino_core.inputs.numbering import Numbering

SUBSTITUTION, DELETION, INSERTION = "substitution", "deletion", "insertion"
DELINS, DUPLICATION = "delins", "duplication"
STOP, FRAMESHIFT = "stop", "frameshift"
TRUNCATIONS = (STOP, FRAMESHIFT)  # the wild type's C-terminal part is lost


@dataclasses.dataclass(frozen=True)
class Edit:
    """Wild-type residues ``start:end`` (0-based, ``end`` exclusive) replaced by ``inserted``.

    A deletion inserts nothing, an insertion replaces nothing (``start == end``: before residue
    ``start``), a duplication replaces a range by two copies of it (``inserted`` is empty: the
    copies are made when the edit is applied, so an edit's memory is the entry's, not the
    range's: 20,000 duplications of 1,900 residues held 76 MB of copies, issue #53), a stop or a
    frameshift replaces everything from its residue to the end (by nothing, or by a frameshift's
    new residues when all of them are written). ``kind`` is one of the names above.
    """

    start: int
    end: int
    inserted: str
    kind: str

    @property
    def indices(self) -> tuple[int, ...]:
        """The wild-type residues that bound it: the replaced range's first and last (one for
        one residue), an insertion's two neighbours, a truncation's first lost residue. Never
        every residue of a range: a duplication of 1,900 residues is two positions, not 1,900
        (20,000 of them kept 38.5 million positions, 5.5 GiB on the server; issue #53)."""
        if self.kind in TRUNCATIONS:
            return (self.start,)
        if self.start == self.end:
            return (self.start - 1, self.start)
        return (self.start,) if self.end - self.start == 1 else (self.start, self.end - 1)

    @property
    def growth(self) -> int:
        """Residues it adds (negative: removes), known without applying it."""
        added = 2 * (self.end - self.start) if self.kind == DUPLICATION else len(self.inserted)
        return added - (self.end - self.start)

    def replacement(self, residues: str) -> str:
        """What replaces ``residues[start:end]`` (a duplication: two copies of them)."""
        return residues[self.start:self.end] * 2 if self.kind == DUPLICATION else self.inserted


def overlapping(edits: Iterable[Edit]) -> tuple[Edit, Edit] | None:
    """The first two edits that touch the same wild-type residues (or insert at the same
    place), or None: the edits of one allele must be independent to be applied in any order."""
    ordered = sorted(edits, key=lambda e: (e.start, e.end))
    for before, after in zip(ordered, ordered[1:]):
        if after.start < before.end or (after.start == before.start and before.start == before.end):
            return before, after
    return None


def apply_edits(sequence: str, edits: Iterable[Edit]) -> str:
    """The sequence with every edit applied; positions are the wild type's (edits applied from
    the C-terminal end, so none moves another), the edits independent (``overlapping``)."""
    residues = sequence
    for edit in sorted(edits, key=lambda e: (e.start, e.end), reverse=True):
        residues = residues[:edit.start] + edit.replacement(residues) + residues[edit.end:]
    return residues


@dataclasses.dataclass(frozen=True)
class Substitution:
    """One amino-acid change: ``index`` is the 0-based residue index into the sequence."""

    index: int
    wt: str
    mt: str


@dataclasses.dataclass(frozen=True)
class Variant:
    """A variant that can be scored: one or more substitutions at distinct positions, or (read
    by ``indels``) independent edits of any length.

    ``order`` is its place in the input (0-based, shared with ``VariantIssue``), ``text`` the
    entry as written, ``mutant`` the ProteinGym spelling in the user's numbering (``A23V:G45D``).
    """

    order: int
    text: str
    mutant: str
    substitutions: tuple[Substitution, ...]
    first: int = 1  # the number of the sequence's first residue
    label: str = ""
    # Indels, stops, frameshifts (``indels``): then every change of the entry is here, a
    # substitution as a one-residue ``Edit``, and ``substitutions`` is empty.
    edits: tuple[Edit, ...] = ()

    @property
    def numbering(self) -> Numbering:
        """The numbering of the sequence the variant was read against (``first``, kept as written)."""
        return Numbering(self.first)

    @property
    def indices(self) -> tuple[int, ...]:
        """0-based residue indices of the mutated positions (an edit's: the ends of its range,
        ``Edit.indices``)."""
        if self.edits:
            return tuple(sorted({i for e in self.edits for i in e.indices}))
        return tuple(s.index for s in self.substitutions)

    @property
    def kind(self) -> str:
        """``substitution``, ``multi-substitution``, an ``edits`` kind (``deletion``,
        ``insertion``, ``delins``, ``duplication``, ``stop``, ``frameshift``) or ``indel`` for
        an allele of several changes with at least one indel."""
        if not self.edits:
            return SUBSTITUTION if len(self.substitutions) == 1 else f"multi-{SUBSTITUTION}"
        return self.edits[0].kind if len(self.edits) == 1 else "indel"

    @property
    def truncation(self) -> Edit | None:
        """The stop or frameshift that ends the protein early, or None."""
        return next((e for e in self.edits if e.kind in TRUNCATIONS), None)

    @property
    def n_changes(self) -> int:
        return len(self.edits) or len(self.substitutions)

    @property
    def growth(self) -> int:
        """Residues the mutated sequence has more than the wild type (negative: fewer)."""
        return sum(e.growth for e in self.edits)

    @property
    def positions(self) -> tuple[int, ...]:
        """Mutated positions in the user's numbering (an indel's: the ends of each range)."""
        return tuple(self.numbering.number(i) for i in self.indices)

    def apply(self, sequence: str) -> str:
        """The mutated sequence."""
        if self.edits:
            return apply_edits(sequence, self.edits)
        residues = list(sequence)
        for s in self.substitutions:
            residues[s.index] = s.mt
        return "".join(residues)


@dataclasses.dataclass(frozen=True)
class VariantIssue:
    """An entry that cannot be scored. ``order`` -1 is about the whole input, not one entry."""

    order: int
    text: str
    kind: str
    message: str
    label: str = ""

    def __str__(self) -> str:
        return self.message

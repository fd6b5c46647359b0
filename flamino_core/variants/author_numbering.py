"""A structure's own residue numbering (author numbers with insertion codes) carried by a record.

A record made of a structure's chain (``structure.files.chain_records``) is numbered by the pages from
its first residue (``1GBT_A/16-245``: index ``i`` is residue ``16 + i``), but the file numbers
its residues its own way: chymotrypsin numbering in 1GBT skips numbers (35, 36, 67, 68 ...) and
inserts residues with codes (``184A`` between 184 and 185), so the catalytic serine the
literature calls S195 is the record's 192nd residue, and no offset can express that.

The record carries that numbering in its header (``numbering=16..34,37..65,65A,66,69..``: a
range ``a..b`` for each run of numbers 1 apart without codes, a label on its own otherwise), so
it travels with the FASTA the app keeps, downloads and re-reads, and every reader (the app, the
command line) finds it the same way (``from_record``). ``AuthorNumbering`` turns a mutation
written in the structure's numbering into the record's own numbering (``to_sequence``: ``S195A``
-> ``S192A``) and back (``to_structure``), which is how results show both.

Insertion codes are read where a mutation writes them after the number: ``Y184AF`` is Y at
``184A`` to F. A letter after the number is read as an insertion code only when the structure
has that label and another amino acid (or an indel word) follows it, and the three letters are
not a three-letter amino-acid code: ``G184A`` is G at 184 to A, ``K188Arg`` is K at 188 to R.
"""

from __future__ import annotations

import dataclasses
import re

from flamino_core.inputs.three_letter import CODES
from flamino_core.numbering import Numbering

KEY = "numbering"  # the header's key=value field
_RUN = re.compile(r"(-?\d+)\.\.(-?\d+)")
_LABEL = re.compile(r"-?\d+[A-Za-z]?")
_FIELD = re.compile(rf"(?:^|\s){KEY}=(\S+)")
# A position in a mutation: digits after an amino-acid code (one or three letters, or ``*``).
_POSITION = re.compile(r"(?<=[A-Za-z*])\d{1,9}")
# After a frameshift or extension, numbers are counts (``fsTer23``, ``ext-5``), not positions.
_COUNTS_FROM = re.compile(r"fs|ext", re.IGNORECASE)
_AFTER_CODE = re.compile(r"[A-Za-z*=?_]")  # what may follow an insertion code: a target or a range


@dataclasses.dataclass(frozen=True)
class AuthorNumbering:
    """The structure's label of each residue of a record, in order (``("16", ..., "184A", ...)``)."""

    labels: tuple[str, ...]

    def __post_init__(self):
        object.__setattr__(self, "_index", {label: i for i, label in enumerate(self.labels)})

    def index(self, label: str) -> int | None:
        """The 0-based index of the residue the structure labels ``label`` (``195``, ``184A``)."""
        return self._index.get(label)

    def label(self, index: int) -> str:
        """The structure's label of the residue at 0-based ``index``."""
        return self.labels[index]

    def span(self) -> str:
        """``16–245``: the first and last labels, for messages."""
        return f"{self.labels[0]}–{self.labels[-1]}"

    def encode(self) -> str:
        """The labels as the header writes them: runs of plain numbers 1 apart as ``a..b``."""
        parts, run = [], []
        for label in self.labels:
            if label.lstrip("-").isdigit() and run and int(label) == int(run[-1]) + 1:
                run.append(label)
                continue
            parts += _written(run)
            run = [label] if label.lstrip("-").isdigit() else []
            if not run:
                parts.append(label)
        return ",".join(parts + _written(run))

    @classmethod
    def decode(cls, text: str, length: int | None = None) -> AuthorNumbering:
        """The labels of ``encode``'s text; ``length``: the residues it must number, counted
        before any run is expanded (a header is a stranger's text: ``1..2000000000`` must not
        become two billion labels).

        Raises:
          ValueError: a part that is neither a label nor a run, or more labels than ``length``.
        """
        parts = text.split(",")
        runs = [_RUN.fullmatch(part) for part in parts]
        count = sum(max(int(r.group(2)) - int(r.group(1)) + 1, 0) if r else 1 for r in runs)
        if length is not None and count != length:
            raise ValueError(f"{KEY}= names {count:,} residues, not the sequence's {length:,}")
        labels = []
        for part, run in zip(parts, runs):
            if run:
                labels += [str(n) for n in range(int(run.group(1)), int(run.group(2)) + 1)]
            elif _LABEL.fullmatch(part):
                labels.append(part)
            else:
                raise ValueError(f"{KEY}={text[:60]}: {part!r} is not a residue number or a range a..b")
        return cls(tuple(labels))

    # --- mutations ---------------------------------------------------------------------------
    def to_sequence(self, entry: str, numbering: Numbering) -> tuple[str, str]:
        """``entry`` with its positions read in the structure's numbering and written in the
        record's (``numbering``): ``("S192A", "")`` for ``S195A`` on 1GBT's chain A,
        or ``(entry, why)`` when a position is not one of the structure's residues."""
        def number(label: str) -> str | None:
            index = self.index(label)
            return None if index is None else str(numbering.number(index))

        return self._rewrite(entry, number, lambda label: f"{label}")

    def to_structure(self, mutant: str, numbering: Numbering) -> str:
        """A mutant written in the record's ``numbering`` in the structure's:
        ``S192A`` -> ``S195A``; a position outside the record is left as written."""
        def label(number: str) -> str | None:
            index = numbering.index_within(int(number), len(self.labels))
            return None if index is None else self.labels[index]

        return self._rewrite(mutant, label, None, codes=False)[0]

    def _rewrite(self, text: str, convert, missing, codes: bool = True) -> tuple[str, str]:
        protein_start = _protein_start(text)
        stop = _COUNTS_FROM.search(text, protein_start)
        out, last, unknown = [], 0, []
        for match in _POSITION.finditer(text, protein_start, stop.start() if stop else len(text)):
            label, end = match.group(), match.end()
            code = text[end:end + 1]
            if codes and self._is_code(label, code, text[end:end + 3], text[end + 1:end + 2]):
                label, end = label + code, end + 1
            converted = convert(label)
            if converted is None:
                unknown.append(label)
                converted = label
            out += [text[last:match.start()], converted]
            last = end
        rewritten = "".join(out) + text[last:]
        if unknown and missing is not None:
            listed = ", ".join(missing(label) for label in unknown)
            return text, (f"{listed} {'is' if len(unknown) == 1 else 'are'} not in the structure's numbering of this "
                          f"chain (residues {self.span()}, as the file numbers them)")
        return rewritten, ""

    def _is_code(self, number: str, letter: str, three: str, following: str) -> bool:
        """Whether ``letter`` after ``number`` is an insertion code (see the module's note)."""
        return (letter.isupper() and f"{number}{letter}" in self._index and bool(_AFTER_CODE.match(following))
                and three.title() not in CODES)


def _written(run: list[str]) -> list[str]:
    if len(run) > 2:
        return [f"{run[0]}..{run[-1]}"]
    return list(run)


def _protein_start(entry: str) -> int:
    """Where the protein change starts in ``entry``: after a reference prefix (``TP53:p.R175H``:
    its 53 is no position), or in ClinVar's ``c.35G>T (p.Gly12Val)`` the protein part."""
    from flamino_core.variants.pasted import protein_part

    protein, refused = protein_part(entry.strip())
    found = entry.rfind(protein) if protein and not refused else -1
    return max(found, 0)


def from_description(description: str, length: int | None = None) -> AuthorNumbering | None:
    """The numbering a record's header carries (``numbering=...``) for ``length`` residues, or None."""
    match = _FIELD.search(" " + (description or ""))
    if match is None:
        return None
    try:
        return AuthorNumbering.decode(match.group(1), length)
    except ValueError:
        return None


def from_record(record) -> AuthorNumbering | None:
    """The structure's numbering of a record made of a structure's chain, when its header carries
    one that covers every residue; None otherwise (a record not from a structure, or one edited
    since: a numbering of another length would misplace every position)."""
    return from_description(getattr(record, "description", ""), len(record.sequence))

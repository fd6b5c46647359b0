"""Mutation lists as people paste them: the list or table split into entries (``list_entries``,
``table_entries``), and variant names from clinical and literature sources before ``notation``
reads the protein change: a reference-sequence or gene prefix (``NP_005334.1:p.Gly12Val``,
``HRAS:p.G12V``), ClinVar's names (``NM_005343.4(HRAS):c.35G>T (p.Gly12Val)``), and the legacy
forms of stops and deletions (``W1282X``, ``ΔF508``, ``delF508``).

``protein_part(entry, reference)`` returns the protein change to read, or why there is none: a
nucleotide-only change (``c.35G>T``), a prefix that names another sequence than the record's, a
legacy deletion. Everything here is linear in the entry's length: ``str`` methods and anchored
patterns without nested or overlapping quantifiers (``notation`` caps an entry at
``MAX_ENTRY_CHARS`` before this runs; tests/integration/test_hosted_attacks.py times the parsers).
"""

from __future__ import annotations

import csv
import io
import re

_SEPARATORS = " \t\r\n\f\v,;"
_SEPARATOR_RUN = re.compile(f"[{re.escape(_SEPARATORS)}]+")
# HGVS reference types after "REF:": c. (coding DNA), g. (genomic), n. (non-coding), m.
# (mitochondrial), r. (RNA), p. (protein).
NUCLEOTIDE_TYPES = ("c.", "g.", "n.", "m.", "r.")
_TYPES = (*NUCLEOTIDE_TYPES, "p.")
# A reference prefix: an accession with an optional version and an optional "(GENE)", or a gene
# symbol (ClinVar: NM_005343.4(HRAS); HGVS: NP_005334.1; HGNC symbols: HRAS, C9orf72, HLA-A).
_PREFIX = re.compile(r"[A-Za-z0-9_.-]{1,40}(?:\([A-Za-z0-9_.-]{1,40}\))?")
# Accessions whose namespace a record id can share: RefSeq (NP_000509.1) and Ensembl (ENSP...).
_REFSEQ = re.compile(r"([A-Z]{2}_)\d+(?:\.\d+)?")
# Legacy deletions: ΔF508, delF508, del508F is not a form in use.
_LEGACY_DELETION = re.compile(r"(?:\u0394|del)([A-Za-z]{1,3})(\d{1,9})", re.IGNORECASE)


def protein_part(entry: str, reference: str = "") -> tuple[str, tuple[str, str] | None]:
    """The protein change an entry names, and why not when it names none.

    Args:
      entry: one entry, stripped.
      reference: the record's id (``NP_005334.1``, ``sp|P01112|RASH_HUMAN``), to check a prefix
        that names a sequence of the same namespace; "" checks nothing.

    Returns:
      ``(protein_text, None)`` to read as before, or ``("", (kind, message))`` where ``kind`` is
      ``"nucleotide"``, ``"wrong-reference"`` or ``"indel"`` and ``{}`` in ``message`` stands for
      the quoted entry.
    """
    prefix, change = _split_prefix(entry)
    if change[:2].lower() in NUCLEOTIDE_TYPES:
        protein = change.find("(p.")
        if protein < 0:
            return "", ("nucleotide", f"{{}}: a nucleotide change ({change[:2]}); ESM-2 scores proteins: give its "
                                      "protein consequence (p.Gly12Val), e.g. from ClinVar or VEP")
        change = change[protein + 1:-1] if change.endswith(")") else change[protein + 1:]
    if prefix and reference:
        other = _other_sequence(prefix, reference)
        if other:
            return "", ("wrong-reference", f"{{}}: names {other[0]}, but the sequence is {other[1]}")
    deletion = _LEGACY_DELETION.fullmatch(change[2:] if change[:2] in ("p.", "P.") else change)
    if deletion:
        return "", ("indel", f"{{}}: a deletion (legacy notation; HGVS p.{deletion.group(1)}{deletion.group(2)}del); "
                             "only substitutions can be scored")
    return change, None


def _split_prefix(entry: str) -> tuple[str, str]:
    """``("NP_005334.1", "p.Gly12Val")`` for ``NP_005334.1:p.Gly12Val``; ``("", entry)`` when the
    entry has no ``PREFIX:`` before an HGVS type (``A23V:G45D`` has none: G4 is not a type)."""
    colon = entry.find(":")
    while colon >= 0:
        if entry[colon + 1:colon + 3].lower() in _TYPES and _PREFIX.fullmatch(entry[:colon]):
            return entry[:colon], entry[colon + 1:].strip()
        colon = entry.find(":", colon + 1)
    return "", entry


def _other_sequence(prefix: str, reference: str) -> tuple[str, str] | None:
    """(the prefix's accession, the record's) when both are RefSeq accessions of the same kind
    (NP_ and NP_) that differ (versions aside); None when they agree or cannot be compared."""
    named = _REFSEQ.fullmatch(prefix.split("(", 1)[0])
    if not named:
        return None
    for word in re.split(r"[|\s]", reference):
        record = _REFSEQ.fullmatch(word)
        if record and record.group(1) == named.group(1):
            if word.split(".")[0] != named.group(0).split(".")[0]:
                return named.group(0), word
            return None
    return None


# --- a list or a table into entries ------------------------------------------------------------
def list_entries(text: str) -> list[tuple[str, str, int]]:
    """Split at separators outside brackets: the ``;`` in ``p.[Ala23Val;Gly45Asp]`` joins, and
    so does a blank before ``(p.`` (ClinVar's ``NM_005343.4(HRAS):c.35G>T (p.Gly12Val)``)."""
    if "[" not in text and "(" not in text:  # nothing joins: the same entries, split in C, not char by char
        return [(entry, "", 0) for entry in _SEPARATOR_RUN.split(text) if entry]
    entries, current, depth, blanks_only = [], [], 0, False
    for char in text:
        if char in "[(":
            depth += 1
        elif char in "])":
            depth = max(0, depth - 1)
        if char in _SEPARATORS and (depth == 0 or char in "\r\n"):
            depth = 0  # a line never continues an unclosed bracket
            if current:
                _add_entry(entries, "".join(current), blanks_only)
                blanks_only = True
            blanks_only = blanks_only and char in " \t"
            current = []
        else:
            current.append(char)
    if current:
        _add_entry(entries, "".join(current), blanks_only)
    return [(entry, label, 0) for entry, label, _ in entries]


def _add_entry(entries: list[tuple[str, str, int]], entry: str, after_blanks: bool) -> None:
    """Append an entry, or join ``(p.…)`` to the entry before it: once (a name has one protein
    part), so a hostile run of ``(p.`` words costs one join each, never a growing string."""
    if after_blanks and entries and entry.startswith("(p.") and entries[-1][2] == 0:
        entries[-1] = (f"{entries[-1][0]} {entry}", "", -1)  # -1: joined, not a table row
    else:
        entries.append((entry, "", 0))


def is_table(text: str) -> bool:
    first = next((line for line in text.splitlines() if line.strip()), "")
    return "mutant" in [cell.strip().strip('"').lower() for cell in re.split(r"[,\t]", first)]


def table_entries(text: str) -> tuple[list[tuple[str, str, int]], str | None]:
    """(mutant, label, line number) per row of a table with a ``mutant`` column, and the problem
    that stopped the reading (None when it read to the end). A row wider than its header, with
    text in the extra fields, is refused before ``csv`` reads a field (``tables.row_problem``, the
    one check of every uploaded table's rows)."""
    from flamino_core.inputs.tables import row_problem, table_text

    problem = row_problem(table_text(text.lstrip()), what="the mutation table")
    if problem:
        return [], problem
    first = next(line for line in text.splitlines() if line.strip())
    reader = csv.reader(io.StringIO(text), delimiter="\t" if "\t" in first else ",")
    entries, column, label_column = [], None, None
    try:
        for row in reader:
            if not any(cell.strip() for cell in row):
                continue
            if column is None:
                header = [cell.strip().lower() for cell in row]
                if "mutant" not in header:  # the first line opened a quoted cell spanning lines
                    return [], "the mutation table's header has no readable 'mutant' column (check its quotes)"
                column = header.index("mutant")
                label_column = header.index("label") if "label" in header else None
                continue
            mutant = row[column].strip() if column < len(row) else ""
            label = row[label_column].strip() if label_column is not None and label_column < len(row) else ""
            entries.append((mutant, label, reader.line_num))
    except csv.Error as exc:
        return entries, (f"line {reader.line_num} of the mutation table could not be read as CSV ({exc}); "
                         "the rows before it were read")
    return entries, None

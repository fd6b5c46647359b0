"""Variant names as people paste them from clinical and literature sources, before ``notation``
reads the protein change: a reference-sequence or gene prefix (``NP_005334.1:p.Gly12Val``,
``HRAS:p.G12V``), ClinVar's names (``NM_005343.4(HRAS):c.35G>T (p.Gly12Val)``), and the legacy
forms of stops and deletions (``W1282X``, ``ΔF508``, ``delF508``).

``protein_part(entry, reference)`` returns the protein change to read, or why there is none: a
nucleotide-only change (``c.35G>T``), a prefix that names another sequence than the record's, a
legacy deletion. Everything here is linear in the entry's length: ``str`` methods and anchored
patterns without nested or overlapping quantifiers (``notation`` caps an entry at
``MAX_ENTRY_CHARS`` before this runs; tests/test_hosted_attacks.py times the parsers).
"""

from __future__ import annotations

import re

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

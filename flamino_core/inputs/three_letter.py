"""Protein sequences written in three-letter codes (``Met-Val-His``, ``MET VAL HIS``, ``MetValHis``).

People paste these from papers, PDB SEQRES records and HGVS notation. Read letter by letter
they are a valid but entirely wrong one-letter sequence (``Met-Val`` would become ``METVAL``
once the dashes are taken for alignment gaps), so the validator asks this module first.

Biopython's ``seq1`` does the conversion; it maps any code it does not know to ``X`` without a
word, so every code is checked against Biopython's table first and unknown ones are reported.
"""

from __future__ import annotations

import dataclasses
import re

from Bio.Data.IUPACData import protein_letters_3to1_extended

# Title-case codes -> one letter, with the stop codon (HGVS writes it ``Ter``).
CODES: dict[str, str] = {**protein_letters_3to1_extended, "Ter": "*"}
_SEPARATED = re.compile(r"[\s\-]+")
_TITLE_RUN = re.compile(r"(?:[A-Z][a-z]{2})+")
# A run of codes is only read as three-letter when it is long enough that a real one-letter
# sequence is vanishingly unlikely to look like it (each triplet has ~26 of 15,625 chances).
MIN_CODES = 2
MIN_UNSEPARATED_CODES = 4
# Separated triplets are three-letter codes when at least this share of them are known codes;
# the rest are then reported as typos rather than read as one-letter residues (one-letter text
# cut into blocks of three almost never forms a known code: ~26 of 15,625 triplets do).
MIN_KNOWN_SHARE = 0.5
_SHOWN = 5


@dataclasses.dataclass(frozen=True)
class ThreeLetterReading:
    """What three-letter text says: a one-letter ``sequence`` (may end in ``*``), or ``error``."""

    sequence: str = ""
    note: str = ""  # the warning shown when it was converted
    error: str = ""


def read_three_letter(text: str) -> ThreeLetterReading | None:
    """The sequence if ``text`` is written in three-letter codes, else None (not three-letter).

    Accepted: codes separated by ``-`` or whitespace in any case (``Met-Val``, ``MET VAL``,
    ``met val``) and Title-case codes run together (``MetValHis``). Upper- or lowercase codes
    run together (``METVALHIS``) cannot be told from one-letter residues with certainty: when
    they read entirely as known codes the result is an ``error`` asking for separators.
    """
    tokens = [t for t in _SEPARATED.split(text.strip()) if t]
    if not tokens:
        return None
    if len(tokens) >= MIN_CODES and all(len(t) == 3 and t.isascii() and t.isalpha() for t in tokens):
        codes = [t.title() for t in tokens]
        unknown = [(i + 1, t) for i, (t, c) in enumerate(zip(tokens, codes)) if c not in CODES]
        if len(unknown) > (1 - MIN_KNOWN_SHARE) * len(codes):
            return None
        return _convert(codes, unknown)
    joined = "".join(tokens)
    if _TITLE_RUN.fullmatch(joined) and len(joined) >= 3 * MIN_CODES:
        codes = [joined[i:i + 3] for i in range(0, len(joined), 3)]
        if all(c in CODES for c in codes):
            return _convert(codes, [])
        return None
    if len(joined) >= 3 * MIN_UNSEPARATED_CODES and len(joined) % 3 == 0 and joined.isalpha():
        codes = [joined[i:i + 3].title() for i in range(0, len(joined), 3)]
        if all(c in CODES for c in codes):
            shown = " ".join(c.upper() for c in codes[:_SHOWN])
            return ThreeLetterReading(
                error=f"this reads as three-letter amino-acid codes run together ({shown} …) as well as "
                "one-letter residues, so it was not analysed; separate the codes with '-' or spaces "
                "(MET-VAL-…) to have them converted, or give the sequence in one-letter codes"
            )
    return None


def _convert(codes: list[str], unknown: list[tuple[int, str]]) -> ThreeLetterReading:
    if unknown:
        shown = ", ".join(f"'{t}' (residue {n})" for n, t in unknown[:_SHOWN])
        more = f" and {len(unknown) - _SHOWN} more" if len(unknown) > _SHOWN else ""
        return ThreeLetterReading(
            error=f"three-letter amino-acid codes, but {shown}{more} is not one; "
            "ESM-2 reads the 20 standard amino acids plus Sec, Pyl, Asx, Glx and Xaa"
        )
    # Imported here: Bio.SeqUtils pulls in Biopython's codon tables (about 0.1 s), and every
    # command that reads FASTA imports this module, while few inputs are three-letter text.
    from Bio.SeqUtils import seq1

    sequence = seq1("".join(codes), custom_map={"Ter": "*"})
    return ThreeLetterReading(
        sequence=sequence,
        note=f"read {len(codes):,} three-letter codes ({'-'.join(codes[:3])}…) as the one-letter "
        f"sequence {sequence[:10]}{'…' if len(sequence) > 10 else ''}",
    )

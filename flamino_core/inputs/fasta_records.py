"""One FASTA record checked: its header turned into an id and a description, its sequence
text into residues ESM-2 has tokens for, with a warning for everything changed on the way
and an error (record and 1-based position) for everything refused.

Positions count the characters of a sequence ignoring whitespace and digits. The reader
that finds records in a text or a file is ``fasta``; this module sees one record at a time.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass, replace
from typing import Literal

from flamino_core.alphabet import AA_TO_IDX
from flamino_core.inputs.three_letter import read_three_letter

ESM2_TRAINING_LENGTH = 1022  # residues; longer sequences are windowed by the engine
MAX_ID_CHARS = 100
MAX_DESCRIPTION_CHARS = 300

_RESIDUES = "".join(AA_TO_IDX)  # the 25 letters ESM-2 has tokens for
_GAPS = "-."
# The nucleotide rule: a sequence of at least NUCLEOTIDE_MIN_LENGTH letters of which at least
# NUCLEOTIDE_FRACTION are A, C, G, T, U or N is DNA/RNA. Those six letters make up ~26% of
# natural proteins (UniProtKB composition), so a protein of 20 residues passes for nucleotides
# with a chance of ~1e-8, and a real DNA sequence (N included for unknown bases) is all of them.
# Two more cases of real files (Biopython's Tests/GFF/multi.fna: 8-nt records):
# * IUPAC ambiguity codes (R, Y, K, M, S, W, B, D, H, V): a sequence written only in the IUPAC
#   nucleotide alphabet with at least AMBIGUOUS_MIN_BASES plain bases. The ambiguity letters
#   are also amino acids (~39% of a protein, the plain bases ~26%), so a 20-residue protein
#   passes with a chance of ~3e-5, a longer one far less;
# * short sequences, SHORT_NUCLEOTIDE_MIN_LENGTH to NUCLEOTIDE_MIN_LENGTH - 1 letters, all A,
#   C, G, T or U: ~22% of a protein, so an 8-residue peptide passes with a chance of ~6e-6.
#   Shorter ones cannot be told from peptides and are read as protein.
NUCLEOTIDES = "ACGTUN"
IUPAC_NUCLEOTIDES = "ACGTUNRYKMSWBDHV"
NUCLEOTIDE_FRACTION = 0.9
AMBIGUOUS_MIN_BASES = 0.5
NUCLEOTIDE_MIN_LENGTH = 20
SHORT_NUCLEOTIDE_MIN_LENGTH = 8
_SHOWN_POSITIONS = 5  # positions listed per bad character
_SHOWN_BAD_CHARACTERS = 5  # distinct bad characters reported per record

_BAD_CHARACTER = re.compile(f"[^{_RESIDUES}{re.escape(_GAPS)}]")
_UPPERCASE_ASCII = str.maketrans(string.ascii_lowercase, string.ascii_uppercase)
_DROP_DIGITS = str.maketrans("", "", string.digits)
# Control characters, and the bidirectional-text controls (U+202A-U+202E, U+2066-U+2069, the
# marks U+200E/U+200F, U+061C): a right-to-left override in an id shows it reversed
# ("cod.exe" as "exe.doc"), in the app and in every file written with it.
_HEADER_CONTROL = re.compile("[\x00-\x08\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
# Accession numbers people paste instead of sequences (Biopython's Tests/SwissProt/multi_ex.list):
# UniProt's (uniprot.org/help/accession_numbers, with an optional isoform "-2"), RefSeq's
# (NP_000509) and INSDC's (one letter + 5 digits, two + 6, three + 5 or 7), each with an
# optional ".version". Letters with digits inside a word are never sequence numbering.
_ACCESSION = re.compile(
    r"(?:[OPQ][0-9][A-Z0-9]{3}[0-9]|[A-NR-Z][0-9](?:[A-Z][A-Z0-9]{2}[0-9]){1,2}"
    r"|[A-Z]{2}_[0-9]{6,9}|[A-Z][0-9]{5}|[A-Z]{2}[0-9]{6}|[A-Z]{3}[0-9]{5}(?:[0-9]{2})?)"
    r"(?:\.[0-9]+)?(?:-[0-9]+)?"
)
_SHOWN_ACCESSIONS = 3


@dataclass(frozen=True)
class InputIssue:
    record: str | None  # record id ("record 3" if it had none); None = whole input
    message: str
    level: Literal["warning", "error"]
    source: str | None = None  # the file it came from, when an input combines several

    def __str__(self) -> str:
        if self.record is None:
            text = self.message[:1].upper() + self.message[1:]
        else:
            text = f"{self.record}: {self.message}"
        return text if self.source is None else f"{self.source}: {text}"


# The complex notation (``flamino fold``, ColabFold's): ':' inside a record's sequence separates the
# chains of one complex, lettered A, B, ... in order (the letters ESMFold2's files use).
CHAIN_SEPARATOR = ":"
CHAIN_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


@dataclass(frozen=True)
class ProteinRecord:
    id: str
    description: str  # header text after the id
    sequence: str  # uppercase, only letters in alphabet.AA_TO_IDX
    # The record written ``A:B`` this is one chain of (``chain_records``): its id, "" for a plain
    # record. The chain's own id is ``<complex_of>:<letter>``.
    complex_of: str = ""


@dataclass
class RawRecord:
    """A record as the reader found it, before any check."""

    number: int  # 1-based position in the input
    title: str | None  # header without '>'; None for a pasted bare sequence
    sequence: str  # whitespace removed, otherwise as typed
    had_whitespace: bool
    text: str = ""  # the sequence lines as typed, whitespace kept (three-letter codes need it)
    notes: tuple[str, ...] = ()  # what the reader did to find it (a flat file read ...), warned first
    complex_of: str = ""  # one chain of this record's complex (``chain_records``): the complex's id
    chain: str = ""  # and its letter


def chain_records(raw: RawRecord, used_ids: set[str]) -> list[RawRecord]:
    """The complex notation read: a record whose sequence holds ':' is a complex, each
    ':'-separated part one chain, lettered A, B, ... in order; returned as one raw record per chain
    (id ``<record id>:<letter>``, the record's id reserved in ``used_ids`` for the complex, each
    chain then checked as any record: ``check_record``). A record without ':' is returned as it is.
    The one reader of the notation: the Input page, ``flamino fold`` and every command read it so.

    Raises:
      ValueError: more chains than there are letters (the complex's id reserved all the same).
    """
    if CHAIN_SEPARATOR not in raw.sequence:
        return [raw]
    record_id, description, _, _ = _header(raw, used_ids)
    parts = raw.sequence.split(CHAIN_SEPARATOR)
    if len(parts) > len(CHAIN_LETTERS):
        raise ValueError(f"{len(parts)} chains (':' separates a complex's chains); flamino letters "
                         f"{len(CHAIN_LETTERS)} at most")
    text_parts = raw.text.split(CHAIN_SEPARATOR) if raw.text.count(CHAIN_SEPARATOR) + 1 == len(parts) else parts
    rest = f" {description}" if description else ""
    return [RawRecord(raw.number, f"{record_id}:{letter}{rest}", part, raw.had_whitespace, text, raw.notes,
                      complex_of=record_id, chain=letter)
            for letter, part, text in zip(CHAIN_LETTERS, parts, text_parts)]


@dataclass(frozen=True)
class CheckedRecord:
    """One record after the checks: kept (``record``) or refused (``errors``).

    A refused record still has the id its header gives it (and takes it from later records
    with the same id), as it would if it had been kept.
    """

    number: int  # 1-based position in the input
    label: str  # how messages name it: its id, or "record <number>" when the header had none
    id: str
    description: str
    record: ProteinRecord | None  # None: refused, or dropped by a limit on total residues
    warnings: tuple[str, ...]  # empty for a refused record: they would only be noise
    errors: tuple[str, ...]
    nucleotides: bool = False  # judged DNA/RNA (``looks_like_nucleotides``): refused, or allowed


def check_record(
    raw: RawRecord, used_ids: set[str], max_residues: int | None = None, allow_nucleotides: bool = False
) -> CheckedRecord:
    """Check one record; ``used_ids`` holds the ids taken so far and gets this one.

    Args:
      raw: the record as read.
      used_ids: ids already given to earlier records of the same input (updated).
      max_residues: refuse sequences longer than this (None: no limit).
      allow_nucleotides: analyse a DNA/RNA-looking sequence as protein (with a warning)
        instead of refusing it. The verdict comes before the length check: a 330 kb DNA
        file hears that it is DNA, not that it is long.

    Returns:
      A ``CheckedRecord``; ``record`` is None when it is refused.
    """
    record_id, description, label, warnings = _header(raw, used_ids)
    warnings = list(raw.notes) + warnings
    sequence, seq_warnings, errors = _check_sequence(raw)
    nucleotides = bool(sequence) and looks_like_nucleotides(sequence)
    if nucleotides:
        share = f"{nucleotide_fraction(sequence):.0%} of its {len(sequence):,} letters are A, C, G, T, U or N"
        if nucleotide_fraction(sequence) < NUCLEOTIDE_FRACTION and len(sequence) >= NUCLEOTIDE_MIN_LENGTH:
            share += ", the rest IUPAC ambiguity codes (R, Y, K, M, S, W, B, D, H, V)"
        if not allow_nucleotides:
            errors.append(f"this is nucleotide sequence, not protein ({share}); ESM-2 reads protein "
                          "sequences: translate it first, or choose to analyse it as protein anyway")
        else:
            seq_warnings.insert(0, f"nucleotide sequence ({share}), analysed as protein as asked; ESM-2 was "
                                   "trained on proteins, so its output on these letters means little")
    if not errors and max_residues is not None and len(sequence) > max_residues:
        errors.append(f"{len(sequence):,} residues, more than the limit of {max_residues:,} per sequence")
    if errors:
        return CheckedRecord(raw.number, label, record_id, description, None, (), tuple(errors), nucleotides)
    record = ProteinRecord(record_id, description, sequence, raw.complex_of)
    return CheckedRecord(
        raw.number, label, record_id, description, record, tuple(warnings + seq_warnings), (), nucleotides
    )


def nucleotide_fraction(sequence: str) -> float:
    """The share of ``sequence`` (uppercase, no gaps) that is A, C, G, T, U or N."""
    return sum(sequence.count(base) for base in NUCLEOTIDES) / max(len(sequence), 1)


def looks_like_nucleotides(sequence: str) -> bool:
    """The nucleotide rule (see ``NUCLEOTIDE_FRACTION`` and the cases after it) on a cleaned sequence."""
    if len(sequence) < SHORT_NUCLEOTIDE_MIN_LENGTH:
        return False
    letters = set(sequence)
    if len(sequence) < NUCLEOTIDE_MIN_LENGTH:
        return letters <= set("ACGTU")
    fraction = nucleotide_fraction(sequence)
    return fraction >= NUCLEOTIDE_FRACTION or (fraction >= AMBIGUOUS_MIN_BASES and letters <= set(IUPAC_NUCLEOTIDES))


def _header(raw: RawRecord, used_ids: set[str]) -> tuple[str, str, str, list[str]]:
    """(id, description, label for messages, warnings) for one record."""
    warnings = []
    if raw.title is None:
        record_id, description = "sequence", ""
    else:
        title = raw.title.replace("\t", " ")
        if _HEADER_CONTROL.search(title):
            title = _HEADER_CONTROL.sub("\ufffd", title)
            warnings.append("the header contained control or text-direction characters; replaced them with '\ufffd'")
        # The id is the first whitespace-separated word, as Biopython and BLAST read headers.
        id_and_rest = title.split(None, 1)
        record_id = id_and_rest[0] if id_and_rest else ""
        description = id_and_rest[1] if len(id_and_rest) > 1 else ""
    unnamed = not record_id
    if unnamed:
        record_id = f"record_{raw.number}"
        warnings.append(f"the header has no id; named it '{record_id}'")
    if len(record_id) > MAX_ID_CHARS:
        record_id = record_id[:MAX_ID_CHARS]
        warnings.append(f"the id was longer than {MAX_ID_CHARS} characters; shortened it")
    if len(description) > MAX_DESCRIPTION_CHARS:
        description = description[:MAX_DESCRIPTION_CHARS]
        warnings.append(f"the description was longer than {MAX_DESCRIPTION_CHARS} characters; shortened it")
    unique = unique_id(record_id, used_ids)
    if unique != record_id:
        warnings.append(f"the id '{record_id}' was already used; renamed this record '{unique}'")
        record_id = unique
    label = f"record {raw.number}" if unnamed else record_id
    if raw.complex_of:  # one chain of an A:B record: named as the complex's chain
        label = f"{raw.complex_of} chain {raw.chain}"
    return record_id, description, label, warnings


def unique_id(record_id: str, used_ids: set[str]) -> str:
    """The id, or id_2, id_3, ... if taken (and marks it taken): records keep distinct ids."""
    candidate, suffix = record_id, 1
    while candidate in used_ids:
        suffix += 1
        candidate = f"{record_id}_{suffix}"
    used_ids.add(candidate)
    return candidate


def _check_sequence(raw: RawRecord) -> tuple[str, list[str], list[str]]:
    """(cleaned residues, warnings, errors) for one record's sequence text."""
    warnings: list[str] = []
    three_letter = read_three_letter(raw.text)
    if three_letter is not None:  # Met-Val-...: read letter by letter it would be METVAL...
        if three_letter.error:
            return "", warnings, [three_letter.error]
        warnings.append(three_letter.note)
        raw = replace(raw, sequence=three_letter.sequence, had_whitespace=False)
    text = raw.sequence.translate(_DROP_DIGITS)
    accessions = _accession_list(raw.text) if len(text) != len(raw.sequence) else None
    if accessions:
        return "", warnings, [accessions]
    if len(text) != len(raw.sequence):
        spaces = " and spaces" if raw.had_whitespace else ""
        warnings.append(f"removed digits (sequence numbering){spaces} from the sequence")
    elif raw.had_whitespace:
        warnings.append("removed spaces from inside the sequence")
    text = text.translate(_UPPERCASE_ASCII)
    if text.endswith("*"):
        text = text.rstrip("*")
        warnings.append("removed the terminal '*' (stop codon)")

    errors = _bad_character_messages(text)
    residues = text.replace("-", "").replace(".", "")
    if len(residues) != len(text):
        warnings.append(
            f"removed {len(text) - len(residues):,} gap character(s) ('-' or '.'); "
            "ESM-2 reads ungapped sequences"
        )
    if not raw.sequence and raw.complex_of:
        errors.append("an empty chain: ':' separates a complex's chains (A:B), with residues on both sides")
    elif not raw.sequence:
        errors.append("no sequence under this header")
    elif not residues and not errors:
        errors.append("no amino-acid letters left after removing gaps, digits and '*'")
    if errors:
        return "", warnings, errors

    if len(residues) > ESM2_TRAINING_LENGTH:
        warnings.append(
            f"longer than {ESM2_TRAINING_LENGTH} residues, ESM-2's training length; "
            "analysed in overlapping windows"
        )
    return residues, warnings, errors


def _accession_list(text: str) -> str | None:
    """The error for a text that is a list of accession numbers, not a sequence, else None."""
    words = text.split()
    if not words or not all(_ACCESSION.fullmatch(word) for word in words):
        return None
    shown = ", ".join(words[:_SHOWN_ACCESSIONS]) + (" …" if len(words) > _SHOWN_ACCESSIONS else "")
    return (f"this is a list of {len(words):,} accession number(s) ({shown}), not a sequence; download "
            "their sequences as FASTA (e.g. UniProt's ID mapping or NCBI's Batch Entrez)")


def _bad_character_messages(text: str) -> list[str]:
    """One message per distinct unusable character, with its first positions."""
    positions: dict[str, list[int]] = {}
    for match in _BAD_CHARACTER.finditer(text):
        positions.setdefault(match.group(), []).append(match.start() + 1)
    messages = []
    for char, where in list(positions.items())[:_SHOWN_BAD_CHARACTERS]:
        messages.append(f"{_positions(where)}: {_describe_bad(char)}")
    if len(positions) > _SHOWN_BAD_CHARACTERS:
        messages.append(f"and {len(positions) - _SHOWN_BAD_CHARACTERS} other unsupported characters")
    return messages


def _positions(where: list[int]) -> str:
    if len(where) == 1:
        return f"position {where[0]}"
    shown = ", ".join(str(p) for p in where[:_SHOWN_POSITIONS])
    more = len(where) - _SHOWN_POSITIONS
    return f"positions {shown}" + (f" and {more:,} more" if more > 0 else "")


def _describe_bad(char: str) -> str:
    if char == "*":
        return "'*' (stop codon) inside the sequence; only a terminal '*' is allowed"
    if char == CHAIN_SEPARATOR:
        return "':' separates a complex's chains (A:B) in a sequence only, not here"
    shown = f"'{char}'" if char.isprintable() else f"U+{ord(char):04X}"
    if char.isalpha():
        return (
            f"{shown} is not an amino-acid letter "
            f"(ESM-2 knows the 20 standard ones plus B, O, U, X and Z)"
        )
    return f"{shown} is not allowed in a protein sequence"

"""The one protein-input validator used by every input path (paste, upload, CLI, shared link).

Bad records are reported (record id + 1-based position) and skipped; good ones are
kept.  Positions count the characters of a sequence ignoring whitespace and digits.
No str/bytes input makes these functions raise.
"""

from __future__ import annotations

import gzip
import io
import re
import string
import zlib
from dataclasses import dataclass, replace
from os import PathLike
from pathlib import Path
from typing import Literal

from Bio import SeqIO

from .alphabet import AA_TO_IDX
from .three_letter import read_three_letter

ESM2_TRAINING_LENGTH = 1022  # residues; longer sequences are windowed by the engine
MAX_ID_CHARS = 100
MAX_DESCRIPTION_CHARS = 300
MAX_GUNZIP_BYTES = 256 * 1024 * 1024  # guards against gzip bombs

_RESIDUES = "".join(AA_TO_IDX)  # the 25 letters ESM-2 has tokens for
_GAPS = "-."
_NUCLEOTIDES = "ACGTUN"
_SHOWN_POSITIONS = 5  # positions listed per bad character
_SHOWN_BAD_CHARACTERS = 5  # distinct bad characters reported per record

_BAD_CHARACTER = re.compile(f"[^{_RESIDUES}{re.escape(_GAPS)}]")
_UPPERCASE_ASCII = str.maketrans(string.ascii_lowercase, string.ascii_uppercase)
_DROP_DIGITS = str.maketrans("", "", string.digits)
_SEQUENCE_LIKE = re.compile(f"[{_RESIDUES}{_RESIDUES.lower()}{re.escape(_GAPS)}*0-9\\s]+")
_HEADER_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f-\x9f]")

# Formats people upload by mistake: (first-line pattern, what it is, what to do).
_FOREIGN_FORMATS = (
    (r"LOCUS\s", "a GenBank flat file", "export the protein as FASTA or copy its /translation"),
    (r"ID {3}\S", "a Swiss-Prot/EMBL flat file", "download the FASTA version of the entry instead"),
    (r"# STOCKHOLM", "a Stockholm alignment", "convert it to FASTA (e.g. esl-reformat fasta)"),
    (r"(CLUSTAL|MUSCLE \(|PROBCONS)", "a Clustal alignment", "save the alignment as FASTA"),
    (
        r"(HEADER|TITLE|COMPND|REMARK|ATOM|HETATM|CRYST1|MODEL|EXPDTA|SEQRES)\s",
        "a PDB structure file",
        "download the sequence as FASTA (RCSB: Download Files → FASTA Sequence)",
    ),
    (r"data_\S", "an mmCIF structure file", "download the sequence as FASTA instead"),
    (r"#NEXUS", "a NEXUS file", "export the sequences as FASTA"),
    (r"\d+\s+\d+$", "a PHYLIP alignment", "export the sequences as FASTA"),
    (r">(P1|F1|DL|DC|RL|RC|N3|N1|XX);", "a PIR/NBRF file", "convert it to FASTA"),
    (
        r"(?i:<\?xml|<!doctype|<html)",
        "an XML/HTML document",
        "save the FASTA text itself, not the web page",
    ),
)
_FOREIGN_PATTERNS = tuple((re.compile(p), name, hint) for p, name, hint in _FOREIGN_FORMATS)

# Binary files recognised by their first bytes, so the user hears what they uploaded.
_BINARY_MAGIC = (
    (b"PK\x03\x04", "a ZIP archive (or a Word/Excel document)", "extract or export the FASTA text"),
    (b"%PDF", "a PDF document", "copy the sequence text into a FASTA file"),
    (b"\x89PNG", "a PNG image", "upload the FASTA text file"),
    (b"\xff\xd8\xff", "a JPEG image", "upload the FASTA text file"),
    (b"\xd0\xcf\x11\xe0", "a Microsoft Office document", "export the sequences as FASTA text"),
    (b"\xfd7zXZ\x00", "an xz-compressed file", "decompress it first"),
    (b"\x28\xb5\x2f\xfd", "a zstd-compressed file", "decompress it first"),
)
_BYTE_ORDER_MARKS = (  # UTF-32 first: its LE mark starts with the UTF-16 LE one
    (b"\xff\xfe\x00\x00", "utf-32-le"),
    (b"\x00\x00\xfe\xff", "utf-32-be"),
    (b"\xef\xbb\xbf", "utf-8"),
    (b"\xff\xfe", "utf-16-le"),
    (b"\xfe\xff", "utf-16-be"),
)


class FastaError(ValueError):
    """Raised by all-or-nothing callers (`ParsedInput.require_all_valid`); carries the issues."""

    def __init__(self, issues: tuple[InputIssue, ...]):
        self.issues = tuple(issues)
        super().__init__("; ".join(str(issue) for issue in self.issues))


@dataclass(frozen=True)
class ProteinRecord:
    id: str
    description: str  # header text after the id
    sequence: str  # uppercase, only letters in alphabet.AA_TO_IDX


@dataclass(frozen=True)
class InputIssue:
    record: str | None  # record id ("record 3" if it had none); None = whole input
    message: str
    level: Literal["warning", "error"]

    def __str__(self) -> str:
        if self.record is None:
            return self.message[:1].upper() + self.message[1:]
        return f"{self.record}: {self.message}"


@dataclass(frozen=True)
class ParsedInput:
    records: tuple[ProteinRecord, ...]
    warnings: tuple[InputIssue, ...] = ()
    errors: tuple[InputIssue, ...] = ()

    @property
    def ok(self) -> bool:
        return bool(self.records)

    def require_all_valid(self) -> tuple[ProteinRecord, ...]:
        """The records, or FastaError if anything was refused or nothing was found."""
        if self.errors or not self.records:
            raise FastaError(self.errors or (InputIssue(None, "no sequence found", "error"),))
        return self.records


class _Unreadable(Exception):
    """Internal: the bytes cannot be turned into text; the message is for the user."""


class _Issues:
    def __init__(self) -> None:
        self.warnings: list[InputIssue] = []
        self.errors: list[InputIssue] = []

    def warn(self, record: str | None, message: str) -> None:
        self.warnings.append(InputIssue(record, message, "warning"))

    def error(self, record: str | None, message: str) -> None:
        self.errors.append(InputIssue(record, message, "error"))

    def result(self, records: list[ProteinRecord]) -> ParsedInput:
        return ParsedInput(tuple(records), tuple(self.warnings), tuple(self.errors))


@dataclass
class _RawRecord:
    number: int  # 1-based position in the input
    title: str | None  # header without '>'; None for a pasted bare sequence
    sequence: str  # whitespace removed, otherwise as typed
    had_whitespace: bool
    text: str = ""  # the sequence lines as typed, whitespace kept (three-letter codes need it)


# ---------------------------------------------------------------- public API


def parse_fasta_text(
    text: str,
    *,
    max_records: int | None = None,
    max_residues_per_record: int | None = None,
    max_total_residues: int | None = None,
) -> ParsedInput:
    """Validate FASTA (or a bare pasted sequence); limits of None mean unlimited."""
    for name, limit in (
        ("max_records", max_records),
        ("max_residues_per_record", max_residues_per_record),
        ("max_total_residues", max_total_residues),
    ):
        if limit is not None and limit < 0:
            raise ValueError(f"{name} must be >= 0, got {limit}")

    issues = _Issues()
    lines = _lines(text)
    first = next((line for line in lines if line), None)
    if first is None:
        issues.error(None, "no sequence found")
        return issues.result([])
    foreign = _foreign_format(first, lines)
    if foreign:
        issues.error(None, foreign)
        return issues.result([])

    raw_records = _raw_records(lines, issues)
    if max_records is not None and len(raw_records) > max_records:
        dropped = len(raw_records) - max_records
        issues.error(
            None,
            f"the input has {len(raw_records):,} records; only the first {max_records:,} "
            f"are analysed ({dropped:,} dropped)",
        )
        raw_records = raw_records[:max_records]

    used_ids: set[str] = set()
    kept = []
    for raw in raw_records:
        record = _check_record(raw, used_ids, issues, max_residues_per_record)
        if record is not None:
            kept.append(record)
    return issues.result(_within_budget(kept, max_total_residues, issues))


def parse_fasta_bytes(
    data: bytes,
    *,
    max_records: int | None = None,
    max_residues_per_record: int | None = None,
    max_total_residues: int | None = None,
    max_decompressed_bytes: int = MAX_GUNZIP_BYTES,
) -> ParsedInput:
    """Validate an uploaded file's bytes: gunzips, honours BOMs, refuses binary files."""
    try:
        text, notes = _decode(bytes(data), max_decompressed_bytes)
    except _Unreadable as exc:
        return ParsedInput((), (), (InputIssue(None, str(exc), "error"),))
    parsed = parse_fasta_text(
        text,
        max_records=max_records,
        max_residues_per_record=max_residues_per_record,
        max_total_residues=max_total_residues,
    )
    notes_issues = tuple(InputIssue(None, note, "warning") for note in notes)
    return replace(parsed, warnings=notes_issues + parsed.warnings)


def read_fasta(
    path: str | PathLike[str],
    *,
    max_records: int | None = None,
    max_residues_per_record: int | None = None,
    max_total_residues: int | None = None,
    max_decompressed_bytes: int = MAX_GUNZIP_BYTES,
) -> ParsedInput:
    """Validate a FASTA file (plain or gzipped); an unreadable file is an error issue."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        problem = f"file not found: {path}"
    except IsADirectoryError:
        problem = f"{path} is a folder, not a FASTA file"
    except PermissionError:
        problem = f"permission denied reading {path}"
    except OSError as exc:
        problem = f"could not read {path}: {exc.strerror or exc}"
    else:
        return parse_fasta_bytes(
            data,
            max_records=max_records,
            max_residues_per_record=max_residues_per_record,
            max_total_residues=max_total_residues,
            max_decompressed_bytes=max_decompressed_bytes,
        )
    return ParsedInput((), (), (InputIssue(None, problem, "error"),))


# ---------------------------------------------------------------- text level


def _lines(text: str) -> list[str]:
    """Stripped lines; leading/trailing whitespace never matters in FASTA."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates would crash Biopython
        text = text.encode("utf-8", "replace").decode("utf-8")
    return [line.strip() for line in text.lstrip("\ufeff").splitlines()]


def _foreign_format(first: str, lines: list[str]) -> str | None:
    """A user-facing error if the text is a known non-FASTA format."""
    for pattern, name, hint in _FOREIGN_PATTERNS:
        if pattern.match(first):
            return f"this looks like {name}, not FASTA; {hint}"
    non_blank = [line for line in lines[:8] if line]
    if first.startswith("@") and len(non_blank) >= 3 and non_blank[2].startswith("+"):
        return (
            "this looks like a FASTQ file of sequencing reads, not FASTA; "
            "ESM-2 needs protein sequences"
        )
    return None


def _raw_records(lines: list[str], issues: _Issues) -> list[_RawRecord]:
    start = next((i for i, line in enumerate(lines) if line.startswith(">")), None)
    if start is None:  # a bare sequence pasted without a header
        squeezed = ["".join(line.split()) for line in lines]
        had_whitespace = any(s != line for s, line in zip(squeezed, lines))
        return [_RawRecord(1, None, "".join(squeezed), had_whitespace, "\n".join(lines))]
    _report_preamble(lines[:start], issues)
    return _split_with_biopython(lines[start:])


def _report_preamble(preamble: list[str], issues: _Issues) -> None:
    """Text before the first '>' is never analysed; say so."""
    text = [line for line in preamble if line]
    if not text:
        return
    if all(_looks_like_sequence(line) for line in text):
        issues.error(
            None,
            "found sequence text before the first '>' header; it was not analysed. "
            "Add a header line such as '>my_protein' above it",
        )
    else:
        issues.warn(None, f"ignored {len(text)} line(s) of text before the first '>' header")


def _looks_like_sequence(line: str) -> bool:
    # Mixed case ("Human hemoglobin") reads as prose, not residues.
    return bool(_SEQUENCE_LIKE.fullmatch(line)) and line in (line.upper(), line.lower())


def _split_with_biopython(lines: list[str]) -> list[_RawRecord]:
    """Group lines (starting with a header) into records using Biopython."""
    # Whitespace inside sequence lines is removed here, before Biopython (which
    # drops spaces silently), so it can be reported per record.
    cleaned, had_whitespace, typed = [], [], []
    for line in lines:
        if line.startswith(">"):
            cleaned.append(line)
            had_whitespace.append(False)
            typed.append([])
        else:
            squeezed = "".join(line.split())
            had_whitespace[-1] |= squeezed != line
            cleaned.append(squeezed)
            typed[-1].append(line)
    parsed = SeqIO.parse(io.StringIO("\n".join(cleaned)), "fasta")
    return [
        # Biopython stores sequences as ASCII bytes; decode ourselves so
        # non-ASCII characters become reportable instead of crashing str(seq).
        _RawRecord(number, rec.description, bytes(rec.seq).decode("utf-8", "replace"), spaced, "\n".join(text))
        for number, (rec, spaced, text) in enumerate(zip(parsed, had_whitespace, typed, strict=True), 1)
    ]


# ---------------------------------------------------------------- record level


def _check_record(
    raw: _RawRecord, used_ids: set[str], issues: _Issues, max_residues: int | None
) -> ProteinRecord | None:
    """Validate one record; report its issues; None if it is refused."""
    record_id, description, label, warnings = _header(raw, used_ids)
    sequence, seq_warnings, errors = _check_sequence(raw)
    if sequence and max_residues is not None and len(sequence) > max_residues:
        errors.append(
            f"{len(sequence):,} residues, more than the limit of {max_residues:,} per sequence"
        )
    if errors:  # warnings about a refused record would only be noise
        for message in errors:
            issues.error(label, message)
        return None
    for message in warnings + seq_warnings:
        issues.warn(label, message)
    return ProteinRecord(record_id, description, sequence)


def _header(raw: _RawRecord, used_ids: set[str]) -> tuple[str, str, str, list[str]]:
    """(id, description, label for messages, warnings) for one record."""
    warnings = []
    if raw.title is None:
        record_id, description = "sequence", ""
    else:
        title = raw.title.replace("\t", " ")
        if _HEADER_CONTROL.search(title):
            title = _HEADER_CONTROL.sub("\ufffd", title)
            warnings.append("the header contained control characters; replaced them with '\ufffd'")
        # Split like Biopython does: the id is the first whitespace-separated word.
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
        warnings.append(
            f"the description was longer than {MAX_DESCRIPTION_CHARS} characters; shortened it"
        )
    unique = unique_id(record_id, used_ids)
    if unique != record_id:
        warnings.append(f"the id '{record_id}' was already used; renamed this record '{unique}'")
        record_id = unique
    label = f"record {raw.number}" if unnamed else record_id
    return record_id, description, label, warnings


def unique_id(record_id: str, used_ids: set[str]) -> str:
    """The id, or id_2, id_3, ... if taken (and marks it taken): records keep distinct ids."""
    candidate, suffix = record_id, 1
    while candidate in used_ids:
        suffix += 1
        candidate = f"{record_id}_{suffix}"
    used_ids.add(candidate)
    return candidate


def _check_sequence(raw: _RawRecord) -> tuple[str, list[str], list[str]]:
    """(cleaned residues, warnings, errors) for one record's sequence text."""
    warnings: list[str] = []
    three_letter = read_three_letter(raw.text)
    if three_letter is not None:  # Met-Val-...: read letter by letter it would be METVAL...
        if three_letter.error:
            return "", warnings, [three_letter.error]
        warnings.append(three_letter.note)
        raw = replace(raw, sequence=three_letter.sequence, had_whitespace=False)
    text = raw.sequence.translate(_DROP_DIGITS)
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
    if not raw.sequence:
        errors.append("no sequence under this header")
    elif not residues and not errors:
        errors.append("no amino-acid letters left after removing gaps, digits and '*'")
    if errors:
        return "", warnings, errors

    nucleotides = sum(residues.count(base) for base in _NUCLEOTIDES)
    if len(residues) >= 20 and nucleotides >= 0.9 * len(residues):
        warnings.append("looks like DNA/RNA; ESM-2 reads protein sequences; translate it first")
    if len(residues) > ESM2_TRAINING_LENGTH:
        warnings.append(
            f"longer than {ESM2_TRAINING_LENGTH} residues, ESM-2's training length; "
            "analysed in overlapping windows"
        )
    return residues, warnings, errors


def _bad_character_messages(text: str) -> list[str]:
    """One message per distinct unusable character, with its first positions."""
    positions: dict[str, list[int]] = {}
    for match in _BAD_CHARACTER.finditer(text):
        positions.setdefault(match.group(), []).append(match.start() + 1)
    messages = []
    for char, where in list(positions.items())[:_SHOWN_BAD_CHARACTERS]:
        messages.append(f"{_positions(where)}: {_describe_bad(char)}")
    if len(positions) > _SHOWN_BAD_CHARACTERS:
        messages.append(
            f"and {len(positions) - _SHOWN_BAD_CHARACTERS} other unsupported characters"
        )
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
    shown = f"'{char}'" if char.isprintable() else f"U+{ord(char):04X}"
    if char.isalpha():
        return (
            f"{shown} is not an amino-acid letter "
            f"(ESM-2 knows the 20 standard ones plus B, O, U, X and Z)"
        )
    return f"{shown} is not allowed in a protein sequence"


def _within_budget(
    records: list[ProteinRecord], budget: int | None, issues: _Issues
) -> list[ProteinRecord]:
    """Keep records in order until the total-residue budget is spent."""
    if budget is None:
        return records
    total = 0
    for i, record in enumerate(records):
        total += len(record.sequence)
        if total > budget:
            dropped = len(records) - i
            issues.error(
                None,
                f"the input has more than {budget:,} residues in total; analysed the first "
                f"{i:,} record(s) and dropped {dropped:,} (from '{record.id}' on)",
            )
            return records[:i]
    return records


# ---------------------------------------------------------------- bytes level

_BINARY_MESSAGE = "this looks like a binary file, not FASTA text; upload a plain-text FASTA file"


def _decode(data: bytes, max_decompressed: int) -> tuple[str, list[str]]:
    """Text of an uploaded file plus notes for the user; _Unreadable if it is not text."""
    notes: list[str] = []
    if data[:2] == b"\x1f\x8b":
        data = _gunzip(data, max_decompressed)
    for magic, name, hint in _BINARY_MAGIC:
        if data.startswith(magic):
            raise _Unreadable(f"this is {name}, not FASTA text; {hint}")
    if data[:3] == b"BZh" and data[3:4].isdigit() and data[4:10] == b"1AY&SY":
        raise _Unreadable("this is a bzip2-compressed file, not FASTA text; decompress it first")

    for bom, codec in _BYTE_ORDER_MARKS:
        if data.startswith(bom):
            return data[len(bom) :].decode(codec, "replace"), notes
    codec = _bomless_utf16(data)
    if codec:
        return data.decode(codec, "replace"), notes
    if b"\x00" in data:
        raise _Unreadable(_BINARY_MESSAGE)
    try:
        return data.decode("utf-8"), notes
    except UnicodeDecodeError:
        pass
    if not _mostly_text(data):
        raise _Unreadable(_BINARY_MESSAGE)
    notes.append("the file is not UTF-8 text; read it as Latin-1")
    return data.decode("latin-1"), notes



def _gunzip(data: bytes, max_decompressed: int) -> bytes:
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as handle:
            out = handle.read(max_decompressed + 1)  # bounded: safe against gzip bombs
    except (OSError, EOFError, zlib.error) as exc:
        raise _Unreadable(
            "this gzip file is damaged or truncated; decompress it yourself to check"
        ) from exc
    if len(out) > max_decompressed:
        raise _Unreadable(
            f"this gzip file decompresses to more than {max_decompressed:,} bytes; "
            "upload fewer sequences"
        )
    if out[:2] == b"\x1f\x8b":
        raise _Unreadable("this is a gzip file inside a gzip file; decompress it first")
    return out


def _bomless_utf16(data: bytes) -> str | None:
    """Spot UTF-16 without a byte-order mark (ASCII text with every other byte NUL)."""
    if len(data) < 4 or len(data) % 2:
        return None
    even, odd = data[0::2], data[1::2]
    if odd.count(0) == len(odd) and even.count(0) == 0:
        return "utf-16-le"
    if even.count(0) == len(even) and odd.count(0) == 0:
        return "utf-16-be"
    return None


def _mostly_text(data: bytes) -> bool:
    """True if control bytes are rare (< 1%): a non-UTF-8 text file, not binary."""
    controls = sum(data.count(bytes([b])) for b in range(32) if b not in b"\t\n\v\f\r")
    return controls + data.count(0x7F) < 0.01 * len(data)


def to_fasta(records: tuple[ProteinRecord, ...] | list[ProteinRecord], width: int = 60) -> str:
    """Records as FASTA text that ``parse_fasta_text`` reads back to the same records.

    Args:
      records: validated records (ids without spaces, sequences of alphabet letters).
      width: residues per sequence line (60, as UniProt writes them).

    Returns:
      The text, one ``>id description`` header per record, ending in a newline.
    """
    lines = []
    for record in records:
        lines.append(f">{record.id} {record.description}".rstrip())
        lines += [record.sequence[i : i + width] for i in range(0, len(record.sequence), width)]
    return "\n".join(lines) + "\n"

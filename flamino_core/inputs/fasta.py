"""The one protein-input reader used by every input path (paste, upload, CLI, batch, shared link).

``iter_records`` (``fasta_reader``) reads FASTA line by line, from text lines or a binary
stream (plain or gzip), and the flat files people paste (GenBank, GenPept, EMBL, Swiss-Prot:
``flat_files``), and yields each record checked (``fasta_records.CheckedRecord``) and each
problem with the input as a whole (``InputIssue`` with ``record=None``). ``parse_fasta_text``,
``parse_fasta_bytes`` and ``read_fasta`` here collect it for a whole input into
``ParsedInput``; ``flamino batch`` streams files through it one record at a time.

Bad records are reported (record id + 1-based position) and skipped; good ones are kept.
No str/bytes input makes these functions raise.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, replace
from os import PathLike
from pathlib import Path
from typing import Iterable, Sequence

from flamino_core.inputs.fasta_reader import iter_records
from flamino_core.inputs.fasta_records import CheckedRecord, InputIssue, ProteinRecord
from flamino_core.inputs.formats import Unreadable, decode_bytes
from flamino_core.inputs.input_limits import MAX_GUNZIP_BYTES, NO_LIMITS, InputLimits

__all__ = [
    "FastaError", "InputIssue", "InputLimits", "MAX_GUNZIP_BYTES", "ParsedInput", "ProteinRecord", "file_problem",
    "iter_records", "parse_fasta_bytes", "parse_fasta_text", "parse_sources", "read_fasta", "to_fasta",
]



class FastaError(ValueError):
    """Raised by all-or-nothing callers (`ParsedInput.require_all_valid`); carries the issues."""

    def __init__(self, issues: tuple[InputIssue, ...]):
        self.issues = tuple(issues)
        super().__init__("; ".join(str(issue) for issue in self.issues))


@dataclass(frozen=True)
class ParsedInput:
    records: tuple[ProteinRecord, ...]
    warnings: tuple[InputIssue, ...] = ()
    errors: tuple[InputIssue, ...] = ()
    nucleotide_labels: tuple[str, ...] = ()  # records judged nucleotide (refused, or allowed)

    @property
    def ok(self) -> bool:
        return bool(self.records)

    def require_all_valid(self) -> tuple[ProteinRecord, ...]:
        """The records, or FastaError if anything was refused or nothing was found."""
        if self.errors or not self.records:
            raise FastaError(self.errors or (InputIssue(None, "no sequence found", "error"),))
        return self.records

    @classmethod
    def collect(cls, items: Iterable[CheckedRecord | InputIssue]) -> "ParsedInput":
        """The kept records and every issue of ``iter_records``' output, in input order."""
        records, warnings, errors, nucleotides = [], [], [], []
        for item in items:
            if isinstance(item, InputIssue):
                (errors if item.level == "error" else warnings).append(item)
                continue
            if item.record is not None:
                records.append(item.record)
            if item.nucleotides:
                nucleotides.append(item.label)
            warnings += [InputIssue(item.label, message, "warning") for message in item.warnings]
            errors += [InputIssue(item.label, message, "error") for message in item.errors]
        return cls(tuple(records), tuple(warnings), tuple(errors), tuple(nucleotides))


# ---------------------------------------------------------------- whole inputs


def parse_fasta_text(text: str, *, limits: InputLimits = NO_LIMITS, allow_nucleotides: bool = False) -> ParsedInput:
    """Validate FASTA (or a bare pasted sequence, or a flat file) within ``limits``.

    ``allow_nucleotides``: analyse sequences that look like DNA/RNA as protein (with a warning)
    instead of refusing them.
    """
    return ParsedInput.collect(
        iter_records(text.splitlines(), limits=limits, allow_nucleotides=allow_nucleotides)
    )


def parse_fasta_bytes(data: bytes, *, limits: InputLimits = NO_LIMITS, allow_nucleotides: bool = False) -> ParsedInput:
    """Validate an uploaded file's bytes: gunzips, honours BOMs, refuses binary files."""
    try:
        text, notes = decode_bytes(bytes(data), limits.max_decompressed_bytes)
    except Unreadable as exc:
        return ParsedInput((), (), (InputIssue(None, str(exc), "error"),))
    parsed = parse_fasta_text(text, limits=limits, allow_nucleotides=allow_nucleotides)
    notes_issues = tuple(InputIssue(None, note, "warning") for note in notes)
    return replace(parsed, warnings=notes_issues + parsed.warnings)


def read_fasta(path: str | PathLike[str], *, limits: InputLimits = NO_LIMITS,
               allow_nucleotides: bool = False) -> ParsedInput:
    """Validate a FASTA file (plain or gzipped); an unreadable file is an error issue."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        return ParsedInput((), (), (InputIssue(None, file_problem(path, exc), "error"),))
    return parse_fasta_bytes(data, limits=limits, allow_nucleotides=allow_nucleotides)


def parse_sources(
    sources: Sequence[tuple[str | None, str | bytes]],
    *,
    limits: InputLimits = NO_LIMITS,
    allow_nucleotides: bool = False,
) -> tuple[ParsedInput, tuple[int, ...]]:
    """Several inputs read as one (the app's pasted text and uploaded files).

    Each source is read by itself (a GenBank upload beside a FASTA paste), with one set of ids
    over all of them (a second ``HBB_HUMAN`` becomes ``HBB_HUMAN_2``) and the limits spent
    across all of them in order.

    Args:
      sources: ``(name, text or bytes)`` in order; the name prefixes that source's messages
        (None: none, for the pasted text). Bytes are decoded as ``parse_fasta_bytes`` does.

    Returns:
      ``(combined, kept)``: every record and issue in source order, and how many records each
      source gave.
    """
    used: set[str] = set()
    parts, kept = [], []
    number, left, residues_full = 1, limits, False
    for name, data in sources:
        notes: list[str] = []
        if isinstance(data, bytes):
            try:
                data, notes = decode_bytes(data, limits.max_decompressed_bytes)
            except Unreadable as exc:
                parts.append(_refused_source(name, str(exc)))
                kept.append(0)
                continue
        if left.max_records == 0 or left.max_total_residues == 0 or residues_full:
            parts.append(_refused_source(name, _limit_reached(limits, residues_full or left.max_total_residues == 0)))
            kept.append(0)
            continue
        items = list(iter_records(io.StringIO(data), used_ids=used, first_number=number, limits=left,
                                  allow_nucleotides=allow_nucleotides))
        # A valid record dropped by the total: the residues, not the records, are what is spent.
        dropped = any(isinstance(i, CheckedRecord) and i.record is None and not i.errors for i in items)
        residues_full = residues_full or dropped
        parsed = _tagged(ParsedInput.collect(items), name, notes)
        read = sum(isinstance(item, CheckedRecord) for item in items)
        number += read
        left = left.after(read, sum(len(r.sequence) for r in parsed.records))
        parts.append(parsed)
        kept.append(len(parsed.records))
    return _joined(parts), tuple(kept)


def _limit_reached(limits: InputLimits, residues: bool) -> str:
    """Why a source is not read: the limit the sources before it reached, named with its number."""
    spent = (f"{limits.max_total_residues:,} residues in total" if residues
             else f"{limits.max_records:,} records")
    return f"not read: the inputs before it already hold the limit of {spent}"


def _refused_source(name: str | None, problem: str) -> ParsedInput:
    """A source that gave nothing: one error, tagged with the source's name."""
    return ParsedInput((), (), (InputIssue(None, problem, "error", name),))


def _tagged(parsed: ParsedInput, name: str | None, notes: list[str]) -> ParsedInput:
    """``parsed`` with every issue tagged with its source's name, the decoding notes first."""
    tagged = [InputIssue(None, note, "warning", name) for note in notes]
    return ParsedInput(
        parsed.records,
        tuple(tagged) + tuple(replace(issue, source=name) for issue in parsed.warnings),
        tuple(replace(issue, source=name) for issue in parsed.errors),
        parsed.nucleotide_labels,
    )


def _joined(parts: list[ParsedInput]) -> ParsedInput:
    """Several sources' inputs as one, in source order."""
    return ParsedInput(
        tuple(r for p in parts for r in p.records), tuple(w for p in parts for w in p.warnings),
        tuple(e for p in parts for e in p.errors), tuple(n for p in parts for n in p.nucleotide_labels),
    )


def file_problem(path: str | PathLike[str], exc: OSError) -> str:
    """What went wrong opening ``path``, for the user."""
    if isinstance(exc, FileNotFoundError):
        return f"file not found: {path}"
    if isinstance(exc, IsADirectoryError):
        return f"{path} is a folder, not a FASTA file"
    if isinstance(exc, PermissionError):
        return f"permission denied reading {path}"
    return f"could not read {path}: {exc.strerror or exc}"


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

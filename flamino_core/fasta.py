"""The one protein-input reader used by every input path (paste, upload, CLI, batch, shared link).

``iter_records`` reads FASTA line by line, from text lines or a binary stream (plain or
gzip), and yields each record checked (``fasta_records.CheckedRecord``) and each problem
with the input as a whole (``InputIssue`` with ``record=None``). ``parse_fasta_text``,
``parse_fasta_bytes`` and ``read_fasta`` collect it for a whole input into ``ParsedInput``;
``flamino batch`` streams files through it one record at a time.

Bad records are reported (record id + 1-based position) and skipped; good ones are kept.
No str/bytes input makes these functions raise.
"""

from __future__ import annotations

import io
import re
import zlib
from dataclasses import dataclass, replace
from itertools import chain
from os import PathLike
from pathlib import Path
from typing import BinaryIO, Iterable, Iterator, Literal

from .alphabet import AA_TO_IDX
from .fasta_records import CheckedRecord, ProteinRecord, RawRecord, check_record
from .input_formats import FOREIGN_HEAD_LINES, Unreadable, decode_bytes, foreign_format, open_text

MAX_GUNZIP_BYTES = 256 * 1024 * 1024  # guards against gzip bombs

_RESIDUES = "".join(AA_TO_IDX)
_SEQUENCE_LIKE = re.compile(f"[{_RESIDUES}{_RESIDUES.lower()}{re.escape('-.')}*0-9\\s]+")


@dataclass(frozen=True)
class InputIssue:
    record: str | None  # record id ("record 3" if it had none); None = whole input
    message: str
    level: Literal["warning", "error"]

    def __str__(self) -> str:
        if self.record is None:
            return self.message[:1].upper() + self.message[1:]
        return f"{self.record}: {self.message}"


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
        records, warnings, errors = [], [], []
        for item in items:
            if isinstance(item, InputIssue):
                (errors if item.level == "error" else warnings).append(item)
                continue
            if item.record is not None:
                records.append(item.record)
            warnings += [InputIssue(item.label, message, "warning") for message in item.warnings]
            errors += [InputIssue(item.label, message, "error") for message in item.errors]
        return cls(tuple(records), tuple(warnings), tuple(errors))


# ---------------------------------------------------------------- whole inputs


def parse_fasta_text(
    text: str,
    *,
    max_records: int | None = None,
    max_residues_per_record: int | None = None,
    max_total_residues: int | None = None,
) -> ParsedInput:
    """Validate FASTA (or a bare pasted sequence); limits of None mean unlimited."""
    return ParsedInput.collect(
        iter_records(
            text.splitlines(),
            max_records=max_records,
            max_residues_per_record=max_residues_per_record,
            max_total_residues=max_total_residues,
        )
    )


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
        text, notes = decode_bytes(bytes(data), max_decompressed_bytes)
    except Unreadable as exc:
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
    except OSError as exc:
        return ParsedInput((), (), (InputIssue(None, file_problem(path, exc), "error"),))
    return parse_fasta_bytes(
        data,
        max_records=max_records,
        max_residues_per_record=max_residues_per_record,
        max_total_residues=max_total_residues,
        max_decompressed_bytes=max_decompressed_bytes,
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


# ---------------------------------------------------------------- the streaming reader


def iter_records(
    source: Iterable[str] | BinaryIO,
    *,
    bare_sequence: bool = True,
    used_ids: set[str] | None = None,
    first_number: int = 1,
    max_records: int | None = None,
    max_residues_per_record: int | None = None,
    max_total_residues: int | None = None,
) -> Iterator[CheckedRecord | InputIssue]:
    """Read FASTA record by record: each record checked, and problems with the whole input.

    Memory is one record (plus, for a headerless input, the input itself), so files of any
    size stream through.

    Args:
      source: lines of text (a list, an open text file), or a binary stream (a file opened
        ``"rb"``, plain or gzip; its encoding is judged by ``input_formats.open_text``).
      bare_sequence: read an input without any '>' header as one pasted sequence (the app
        and ``flamino embed``); False reports it as text before the first header.
      used_ids: ids taken by earlier inputs (updated), so ids stay unique over several files.
      first_number: the number of this input's first record (records are numbered from it,
        and unnamed ones called ``record_<number>``).
      max_records: records past this many are counted, not read (one error says so).
      max_residues_per_record: refuse longer sequences.
      max_total_residues: keep records in order until their residues exceed this; the
        valid records after are dropped (one error says so).

    Yields:
      ``CheckedRecord`` per record read (kept or refused), in input order, and ``InputIssue``
      (``record=None``) for the input as a whole: a format that is not FASTA, text before
      the first header, a limit reached, a file that could not be read to its end.
    """
    for name, limit in (
        ("max_records", max_records),
        ("max_residues_per_record", max_residues_per_record),
        ("max_total_residues", max_total_residues),
    ):
        if limit is not None and limit < 0:
            raise ValueError(f"{name} must be >= 0, got {limit}")
    if hasattr(source, "read") and not isinstance(source, io.TextIOBase):  # a binary stream
        try:
            source, notes = open_text(source)
        except Unreadable as exc:
            yield InputIssue(None, str(exc), "error")
            return
        for note in notes:
            yield InputIssue(None, note, "warning")
    reader = _Reader(
        bare_sequence, set() if used_ids is None else used_ids, first_number,
        max_records, max_residues_per_record, max_total_residues,
    )  # fmt: skip
    lines = _stripped_lines(source)
    try:
        yield from reader.read(lines)
    except (OSError, EOFError, zlib.error) as exc:  # gzip data damaged past the start
        yield InputIssue(
            None, f"unreadable after {reader.read_count:,} record(s) ({exc}); those were read", "error"
        )


def _stripped_lines(source: Iterable[str]) -> Iterator[str]:
    """Lines without surrounding whitespace (it never matters in FASTA), split as ``str.splitlines``."""
    first = True
    for chunk in source:
        for line in chunk.splitlines() or [""]:
            if first:
                line, first = line.lstrip("\ufeff"), False
            if not line.isascii():
                try:
                    line.encode("utf-8")
                except UnicodeEncodeError:  # lone surrogates: unprintable and unencodable
                    line = line.encode("utf-8", "replace").decode("utf-8")
            yield line.strip()


class _Reader:
    """Groups lines into records under their '>' headers and checks each one.

    Not Biopython's ``SimpleFastaParser``: it skips the text before the first header without
    a word (we report it), removes the spaces and line breaks between three-letter codes
    (``MET VAL`` must stay apart to be read as codes) and gives no way to say whether a
    record had spaces removed; grouping lines under headers is the simple part.
    """

    def __init__(self, bare_sequence, used_ids, first_number, max_records, max_residues, max_total):
        self.bare_sequence, self.used_ids, self.first_number = bare_sequence, used_ids, first_number
        self.max_records, self.max_residues, self.max_total = max_records, max_residues, max_total
        self.read_count = 0  # records passed on so far
        self.seen = 0  # records found, including those past max_records
        self.kept = self.residues = self.dropped = 0
        self.first_dropped: str | None = None

    def read(self, lines: Iterator[str]) -> Iterator[CheckedRecord | InputIssue]:
        head: list[str] = []
        first = None
        for line in lines:  # enough lines to tell a foreign format
            head.append(line)
            first = first or line or None
            if first is not None and len(head) >= FOREIGN_HEAD_LINES:
                break
        if first is None:
            yield InputIssue(None, "no sequence found", "error")
            return
        foreign = foreign_format(first, head)
        if foreign:
            yield InputIssue(None, foreign, "error")
            return

        preamble: list[str] = []
        title: str | None = None
        typed: list[str] = []
        for line in chain(head, lines):
            if line.startswith(">"):
                if title is None:
                    yield from _preamble_issues(preamble)
                else:
                    yield from self._record(title, typed)
                title, typed = line[1:], []
            elif title is not None:
                if self.max_records is None or self.seen < self.max_records:
                    typed.append(line)
            else:
                preamble.append(line)
        if title is not None:
            yield from self._record(title, typed)
        elif self.bare_sequence:  # a sequence pasted without a header
            yield from self._record(None, preamble)
        else:
            issues = list(_preamble_issues(preamble))
            yield from issues
            if all(issue.level == "warning" for issue in issues):
                yield InputIssue(None, "no sequence found: no line starts a record with '>'", "error")
        yield from self._closing_issues()

    def _record(self, title: str | None, typed: list[str]) -> Iterator[CheckedRecord]:
        self.seen += 1
        if self.max_records is not None and self.seen > self.max_records:
            return
        squeezed = ["".join(line.split()) for line in typed]
        raw = RawRecord(
            number=self.first_number + self.read_count,
            title=title,
            sequence="".join(squeezed),
            had_whitespace=any(s != line for s, line in zip(squeezed, typed)),
            text="\n".join(typed),
        )
        checked = check_record(raw, self.used_ids, self.max_residues)
        self.read_count += 1
        if checked.record is not None and self.max_total is not None:
            self.residues += len(checked.record.sequence)
            if self.residues > self.max_total:
                self.dropped += 1
                self.first_dropped = self.first_dropped or checked.id
                checked = replace(checked, record=None)  # its warnings are still reported
            else:
                self.kept += 1
        yield checked

    def _closing_issues(self) -> Iterator[InputIssue]:
        if self.max_records is not None and self.seen > self.max_records:
            yield InputIssue(
                None,
                f"the input has {self.seen:,} records; only the first {self.max_records:,} "
                f"are analysed ({self.seen - self.max_records:,} dropped)",
                "error",
            )
        if self.dropped:
            yield InputIssue(
                None,
                f"the input has more than {self.max_total:,} residues in total; analysed the first "
                f"{self.kept:,} record(s) and dropped {self.dropped:,} (from '{self.first_dropped}' on)",
                "error",
            )


def _preamble_issues(preamble: list[str]) -> Iterator[InputIssue]:
    """Text before the first '>' is never analysed; say so."""
    text = [line for line in preamble if line]
    if not text:
        return
    if all(_looks_like_sequence(line) for line in text):
        yield InputIssue(
            None,
            "found sequence text before the first '>' header; it was not analysed. "
            "Add a header line such as '>my_protein' above it",
            "error",
        )
    else:
        yield InputIssue(None, f"ignored {len(text)} line(s) of text before the first '>' header", "warning")


def _looks_like_sequence(line: str) -> bool:
    # Mixed case ("Human hemoglobin") reads as prose, not residues.
    return bool(_SEQUENCE_LIKE.fullmatch(line)) and line in (line.upper(), line.lower())


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

"""The streaming reader behind every input path: ``iter_records`` groups lines into records
under their '>' headers, or reads a flat file (``flat_files``), and checks each record
(``fasta_records.check_record``). Collected for a whole input by ``fasta.parse_fasta_text`` and
its siblings; streamed shard by shard by ``flamino batch``.
"""

from __future__ import annotations

import io
import re
import zlib
from dataclasses import replace
from itertools import chain
from typing import BinaryIO, Iterable, Iterator

from flamino_core.alphabet import AA_TO_IDX
from flamino_core.inputs.fasta_records import CheckedRecord, InputIssue, RawRecord, chain_records, check_record
from flamino_core.inputs.input_limits import NO_LIMITS, InputLimits
from flamino_core.inputs.flat_files import read_flat_records, unframed
from flamino_core.inputs.formats import (
    FOREIGN_HEAD_LINES,
    Unreadable,
    flat_file_format,
    foreign_format,
    framed_sequence,
    numbered_blocks,
    open_text,
)

_RESIDUES = "".join(AA_TO_IDX)
# Lines inside a record that are comments, never sequence: the original FASTA format's ';' lines
# (Pearson & Lipman) and the '#'/'!' lines some BLAST tools write.
COMMENT_STARTS = (";", "#", "!")
_SEQUENCE_LIKE = re.compile(f"[{_RESIDUES}{_RESIDUES.lower()}{re.escape('-.')}*0-9\\s]+")


def iter_records(
    source: Iterable[str] | BinaryIO,
    *,
    bare_sequence: bool = True,
    used_ids: set[str] | None = None,
    first_number: int = 1,
    limits: InputLimits = NO_LIMITS,
    allow_nucleotides: bool = False,
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
      limits: records, residues per record and in all (``InputLimits``: what is past each
        is counted and said in one error, not read).
      allow_nucleotides: analyse a sequence that looks like DNA/RNA as protein, with a
        warning; by default it is refused (``fasta_records.looks_like_nucleotides``).

    Yields:
      ``CheckedRecord`` per record read (kept or refused), in input order, and ``InputIssue``
      (``record=None``) for the input as a whole: a format that is not FASTA, text before
      the first header, a limit reached, a file that could not be read to its end.

    A GenBank, GenPept, EMBL or Swiss-Prot flat file is read with Biopython, a record per
    sequence (``flat_files``); a sequence copied out of one (an ``ORIGIN`` block, a
    ``/translation``) or off UniProt's web page (numbered blocks of 10) is read as a bare
    sequence. Each says what was read in a warning.
    """
    if hasattr(source, "read") and not isinstance(source, io.TextIOBase):  # a binary stream
        source, issues = _decoded(source)
        yield from issues
        if source is None:
            return
    reader = _Reader(
        bare_sequence, set() if used_ids is None else used_ids, first_number,
        limits.max_records, limits.max_residues_per_record, limits.max_total_residues, allow_nucleotides,
    )
    reader.spent = limits.spent_residues
    lines = _lines(source)
    try:
        yield from reader.read(lines)
    except (OSError, EOFError, zlib.error) as exc:  # gzip data damaged past the start
        yield InputIssue(
            None, f"unreadable after {reader.read_count:,} record(s) ({exc}); those were read", "error"
        )


def _decoded(stream: BinaryIO) -> tuple[Iterable[str] | None, list[InputIssue]]:
    """(text lines of a binary stream, warnings on how it was decoded), or (None, [the error])
    when it cannot be read as text at all."""
    try:
        text, notes = open_text(stream)
    except Unreadable as exc:
        return None, [InputIssue(None, str(exc), "error")]
    return text, [InputIssue(None, note, "warning") for note in notes]


def _lines(source: Iterable[str]) -> Iterator[str]:
    """Lines as typed, without line ends, split as ``str.splitlines`` (FASTA reading strips them;
    flat files need their columns)."""
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
            yield line


class _Reader:
    """Groups lines into records under their '>' headers and checks each one.

    Not Biopython's ``SimpleFastaParser``: it skips the text before the first header without
    a word (we report it), removes the spaces and line breaks between three-letter codes
    (``MET VAL`` must stay apart to be read as codes) and gives no way to say whether a
    record had spaces removed; grouping lines under headers is the simple part.
    """

    def __init__(self, bare_sequence, used_ids, first_number, max_records, max_residues, max_total, allow_nucleotides):
        self.bare_sequence, self.used_ids, self.first_number = bare_sequence, used_ids, first_number
        self.max_records, self.max_residues, self.max_total = max_records, max_residues, max_total
        self.allow_nucleotides = allow_nucleotides
        self.read_count = 0  # records passed on so far
        self.seen = 0  # records found, including those past max_records
        self.kept = self.residues = self.dropped = 0
        self.first_dropped: str | None = None
        self.spent = 0  # residues of the inputs read before this one (the limit in force is max_total + spent)

    def read(self, raw_lines: Iterator[str]) -> Iterator[CheckedRecord | InputIssue]:
        raw_head: list[str] = []
        first = None
        for line in raw_lines:  # enough lines to tell a foreign format
            raw_head.append(line)
            first = first or line.strip() or None
            if first is not None and len(raw_head) >= FOREIGN_HEAD_LINES:
                break
        if first is None:
            yield InputIssue(None, "no sequence found", "error")
            return
        head = [line.strip() for line in raw_head]
        flat = flat_file_format(first, head)
        if flat:
            yield from self._flat_file(chain(raw_head, raw_lines), *flat)
            return
        foreign = foreign_format(first, head)
        if foreign:
            yield InputIssue(None, foreign, "error")
            return
        lines = chain(head, (line.strip() for line in raw_lines))
        framed = framed_sequence(first)
        if framed:
            yield from self._framed(lines, *framed)
            return
        notes = ()
        if numbered_blocks(head):
            notes = ("read the numbered blocks of 10 residues (as UniProt's web page shows a sequence); "
                     "dropped the numbers",)
        yield from self._headed(lines, notes)

    def _headed(self, lines: Iterator[str], notes: tuple[str, ...]) -> Iterator[CheckedRecord | InputIssue]:
        """FASTA proper: stripped lines grouped under their '>' headers; ``notes`` go to a
        sequence pasted without a header."""
        preamble: list[str] = []
        title: str | None = None
        typed: list[str] = []
        comments = 0
        for line in lines:
            if line.startswith(">"):
                if title is None:
                    yield from _preamble_issues(preamble)
                else:
                    yield from self._record(title, typed, _comment_note(comments))
                title, typed, comments = line[1:], [], 0
            elif title is not None and line.startswith(COMMENT_STARTS):
                # Pearson's ';' comment lines, BLAST's '#' and '!' (Biopython's fasta-pearson, fasta-blast)
                comments += 1
            elif title is not None:
                if self.max_records is None or self.seen < self.max_records:
                    typed.append(line)
            else:
                preamble.append(line)
        if title is not None:
            yield from self._record(title, typed, _comment_note(comments))
        elif self.bare_sequence:  # a sequence pasted without a header
            yield from self._record(None, preamble, notes)
        else:
            issues = list(_preamble_issues(preamble))
            yield from issues
            if all(issue.level == "warning" for issue in issues):
                yield InputIssue(None, "no sequence found: no line starts a record with '>'", "error")
        yield from self._closing_issues()

    def _flat_file(self, raw_lines: Iterator[str], name: str,
                   seqio_format: str) -> Iterator[CheckedRecord | InputIssue]:
        """Every sequence of a flat file, each checked as a FASTA record is."""
        for item in read_flat_records(raw_lines, name, seqio_format):
            if isinstance(item, str):
                yield InputIssue(None, item, "error")
            else:
                yield from self._record(item.title, [item.sequence], (item.note,))
        yield from self._closing_issues()

    def _framed(self, lines: Iterator[str], start, end, name: str) -> Iterator[CheckedRecord | InputIssue]:
        """A sequence copied out of a flat file: the lines between its first and last line."""
        if self.bare_sequence:
            typed, note = unframed(lines, start, end, name)
            yield from self._record(None, typed, (note,))
        else:
            yield InputIssue(None, f"found {name} without a '>' header; it was not analysed", "error")
        yield from self._closing_issues()

    def _record(self, title: str | None, typed: list[str], notes: tuple[str, ...] = ()) -> Iterator[CheckedRecord]:
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
            notes=notes,
        )
        self.read_count += 1
        for checked in self._chains_checked(raw):
            yield self._counted(checked)

    def _chains_checked(self, raw: RawRecord) -> list[CheckedRecord]:
        """The record checked, or each chain of its complex (``chain_records``: the A:B notation);
        a complex is read whole or not at all (one chain refused, every chain said refused)."""
        try:
            chains = chain_records(raw, self.used_ids)
        except ValueError as err:
            label = raw.title.split()[0] if raw.title and raw.title.split() else f"record {raw.number}"
            return [CheckedRecord(raw.number, label, label, "", None, (), (str(err),))]
        checked = [check_record(chain, self.used_ids, self.max_residues, self.allow_nucleotides) for chain in chains]
        refused = [c.label for c in checked if c.record is None]
        if len(checked) > 1 and refused:
            why = f"the complex is read whole or not at all ({', '.join(refused)} refused)"
            checked = [c if c.record is None else replace(c, record=None, warnings=(), errors=(why,)) for c in checked]
        return checked

    def _counted(self, checked: CheckedRecord) -> CheckedRecord:
        if checked.record is not None and self.max_total is not None:
            self.residues += len(checked.record.sequence)
            if self.residues > self.max_total:
                self.dropped += 1
                self.first_dropped = self.first_dropped or checked.id
                checked = replace(checked, record=None)  # its warnings are still reported
            else:
                self.kept += 1
        return checked

    def _closing_issues(self) -> Iterator[InputIssue]:
        over_count = self.max_records is not None and self.seen > self.max_records
        if over_count and self.dropped:  # both limits: one message with the numbers, not two
            yield InputIssue(
                None,
                f"the input has {self.seen:,} records; at most {self.max_records:,} records and "
                f"{self.max_total + self.spent:,} residues in total are analysed at a time{self._before()}: "
                f"the first {self.kept:,} were "
                f"analysed, {self.seen - self.max_records + self.dropped:,} dropped (from '{self.first_dropped}' on)",
                "error",
            )
            return
        if over_count:
            yield InputIssue(
                None,
                f"the input has {self.seen:,} records; only the first {self.max_records:,} "
                f"are analysed ({self.seen - self.max_records:,} dropped)",
                "error",
            )
        if self.dropped:
            yield InputIssue(
                None,
                f"the input has more than {self.max_total + self.spent:,} residues in total, the "
                f"limit{self._before()}; analysed the first "
                f"{self.kept:,} record(s) and dropped {self.dropped:,} (from '{self.first_dropped}' on)",
                "error",
            )

    def _before(self) -> str:
        return f" (the inputs before this one hold {self.spent:,})" if self.spent else ""


def _comment_note(comments: int) -> tuple[str, ...]:
    return (f"skipped {comments:,} comment line(s) starting with ';', '#' or '!'",) if comments else ()


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

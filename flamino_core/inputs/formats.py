"""What an input is before it is read as FASTA: bytes turned into text, and files that are not FASTA.

Uploads and files arrive as bytes: gzip is opened, byte-order marks and UTF-16 honoured,
binary files (images, archives, office documents) named so the user hears what they gave,
and text that is not UTF-8 read as Latin-1 with a note. Text in a format people upload by
mistake (PDB, Stockholm, FASTQ ...) is recognised by its first lines and refused with what to
do instead. Flat files that hold a sequence (GenBank, GenPept, EMBL, Swiss-Prot) are recognised
here and read by ``flat_files``; so are sequences as people copy them out of such files or web
pages (a GenBank ``ORIGIN`` block, a ``/translation`` qualifier, UniProt's numbered blocks).

To refuse another format, add a line to ``FOREIGN_FORMATS`` (text) or ``BINARY_MAGIC`` (bytes);
to read one, to ``FLAT_FILE_FORMATS`` (a format Biopython's ``SeqIO`` reads) or
``FRAMED_SEQUENCES`` (sequence lines between a first and a last line).

Whole inputs (``decode_bytes``) and streamed files (``open_text``) go through the same
``_identify``; a stream is judged by its first ``SNIFF_BYTES``.
"""

from __future__ import annotations

import codecs
import gzip
import io
import re
import zlib
from typing import BinaryIO, TextIO

GZIP_MAGIC = b"\x1f\x8b"
SNIFF_BYTES = 1 << 16  # a streamed file's encoding is decided from its first 64 KiB

# Flat files read record by record with Biopython: (first-line pattern, name, SeqIO format).
# Swiss-Prot, EMBL and IMGT all start "ID   ", and an EMBL *protein* entry's ID line ends in
# "AA." as a Swiss-Prot one does ("ID   A00022; SV 1; linear; protein; PRT; SYN; 14 AA.", EBI's
# patent proteins; KIPO's "ID   DI500001  STANDARD;  PRT;  111 AA." is laid out exactly like an
# old Swiss-Prot line): ``_id_line_format`` tells them apart by the lines that follow.
# A GenBank release file (GBVRL1.SEQ ...) opens with the release header, then LOCUS records.
FLAT_FILE_FORMATS = (
    (r"LOCUS\s", "GenBank", "genbank"),
    (r"GB[A-Z]{2,4}\d*\.SEQ\s+Genetic Sequence Data Bank", "GenBank", "genbank"),
    (r"ID {3}\S", "EMBL", "embl"),  # or Swiss-Prot or IMGT: see _id_line_format
)
_FLAT_FILE_PATTERNS = tuple((re.compile(p), name, fmt) for p, name, fmt in FLAT_FILE_FORMATS)

# Sequence text as people copy it out of a flat file: (first-line pattern, last-line pattern,
# what it is). The matched text of both lines is dropped; the rest is read as a bare sequence.
FRAMED_SEQUENCES = (
    (r"ORIGIN\b", r"//$", "a GenBank ORIGIN block"),
    (r'/translation="', r'"$', "a GenBank /translation qualifier"),
)
_FRAMED_PATTERNS = tuple((re.compile(start), re.compile(end), name) for start, end, name in FRAMED_SEQUENCES)

# UniProt's web page shows a sequence in blocks of 10 under a line numbering each block's end
# ("        10         20"); copied, the numbering lines come along.
BLOCK = 10

# Formats people upload by mistake: (first-line pattern, what it is, what to do).
FOREIGN_FORMATS = (
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
        r"<uniprot\b",
        "a UniProt XML file",
        "download the entry as FASTA, or as text (the Swiss-Prot format, which flamino reads)",
    ),
    (  # any XML: a declaration, a doctype, or an element without one (UniProt's <uniprot ...>)
        r"(?i:<\?xml|<!doctype|<html)|<[A-Za-z][\w.:-]*[\s>/]|<[A-Za-z][\w.:-]*$",
        "an XML/HTML document",
        "save the FASTA text itself, not the web page",
    ),
)
_FOREIGN_PATTERNS = tuple((re.compile(p), name, hint) for p, name, hint in FOREIGN_FORMATS)
FOREIGN_HEAD_LINES = 8  # lines a format is recognised by (FASTQ: the third non-blank one)

# Binary files recognised by their first bytes, so the user hears what they uploaded.
BINARY_MAGIC = (
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
_BINARY_MESSAGE = "this looks like a binary file, not FASTA text; upload a plain-text FASTA file"
_DAMAGED_GZIP = "this gzip file is damaged or truncated; decompress it yourself to check"
_LATIN1_NOTE = "the file is not UTF-8 text; read it as Latin-1"


class Unreadable(Exception):
    """The bytes cannot be read as text; the message is for the user."""


def flat_file_format(first: str, head: list[str] = ()) -> tuple[str, str] | None:
    """``(name, Biopython SeqIO format)`` if the text starts a readable flat file, else None.

    Args:
      first: the first non-blank line.
      head: the first ``FOREIGN_HEAD_LINES`` lines (stripped); an ``ID`` line is judged with
        the lines after it.
    """
    for pattern, name, seqio_format in _FLAT_FILE_PATTERNS:
        if pattern.match(first):
            return _id_line_format(first, head) if seqio_format == "embl" else (name, seqio_format)
    return None


def _id_line_format(first: str, head: list[str]) -> tuple[str, str]:
    """Swiss-Prot, IMGT or EMBL for a file whose first line is an ``ID`` line.

    Swiss-Prot (UniProt user manual, section 3.1): the ID line ends "N AA." and the AC line comes
    next; EMBL separates its lines with "XX" (ENA's user manual) and never puts AC second without
    one. IMGT/HLA and IMGT/LIGM files are EMBL-like with a five-field ID line (or one naming
    IMGT) and wider feature columns, which only Biopython's ``imgt`` reader takes.
    """
    after = [line for line in head if line and line != first]
    if first.endswith(" AA.") and after[:1] and after[0].startswith("AC ") and "XX" not in head:
        return "Swiss-Prot", "swiss"
    if "IMGT" in first or first[2:].count(";") == 5:
        return "IMGT", "imgt"
    return "EMBL", "embl"


def framed_sequence(first: str) -> tuple[re.Pattern, re.Pattern, str] | None:
    """``(first-line pattern, last-line pattern, name)`` if the text is a sequence copied out of a
    flat file (it starts like ``FRAMED_SEQUENCES`` says), else None."""
    for start, end, name in _FRAMED_PATTERNS:
        if start.match(first):
            return start, end, name
    return None


def numbered_blocks(head: list[str]) -> bool:
    """True if the text starts like UniProt's numbered layout: a line of numbers, each the end of
    a block of ``BLOCK`` residues (10, 20, 30 ...), over a line of those blocks.

    Only the first pair of lines is judged (the rest is read as sequence, digits dropped). A
    PHYLIP header ("5 42") is not numbering: its numbers are not consecutive multiples of 10,
    and the line under a PHYLIP header starts with a name, not a 10-residue block.
    """
    lines = [line.strip() for line in head if line.strip()]
    if len(lines) < 2:
        return False
    numbers, blocks = lines[0].split(), lines[1].split()
    if not all(n.isascii() and n.isdigit() for n in numbers):  # "¹" is a digit to isdigit, not to int
        return False
    ends = [int(n) for n in numbers]
    first_block = ends[0] // BLOCK
    if ends[0] < BLOCK or ends[0] % BLOCK or ends != [BLOCK * (first_block + k) for k in range(len(ends))]:
        return False
    whole = len(blocks) - (len(blocks[-1]) < BLOCK)
    return (
        all(block.isalpha() for block in blocks)
        and all(len(block) == BLOCK for block in blocks[:-1])
        and len(blocks[-1]) <= BLOCK
        and whole == len(ends)
    )


def foreign_format(first: str, head: list[str]) -> str | None:
    """A user-facing error if the text is a known non-FASTA format, else None.

    Args:
      first: the first non-blank line (stripped).
      head: the first ``FOREIGN_HEAD_LINES`` lines of the input (stripped).
    """
    if numbered_blocks(head):  # "10 20" over blocks would read as a PHYLIP header
        return None
    if first.startswith("<?"):  # an XML declaration: the document is named by its first element
        first = next((line for line in head if line.startswith("<") and not line.startswith(("<?", "<!"))), first)
    for pattern, name, hint in _FOREIGN_PATTERNS:
        if pattern.match(first):
            return f"this looks like {name}, not FASTA; {hint}"
    non_blank = [line for line in head[:FOREIGN_HEAD_LINES] if line]
    if first.startswith("@") and len(non_blank) >= 3 and non_blank[2].startswith("+"):
        return (
            "this looks like a FASTQ file of sequencing reads, not FASTA; "
            "ESM-2 needs protein sequences"
        )
    return None


def decode_bytes(data: bytes, max_decompressed: int | None) -> tuple[str, list[str]]:
    """The text of a whole input plus notes for the user; ``Unreadable`` if it is not text.

    Args:
      data: the file's bytes, plain or gzip.
      max_decompressed: refuse gzip data that unpacks to more bytes than this (gzip bombs).
    """
    if data[:2] == GZIP_MAGIC:
        data = _gunzip(data, max_decompressed)
    codec, skip, notes = _identify(data, final=True)
    return data[skip:].decode(codec, "replace"), notes


def open_text(stream: BinaryIO) -> tuple[TextIO, list[str]]:
    """A text handle on a binary stream (plain or gzip) plus notes; ``Unreadable`` if not text.

    The same checks as ``decode_bytes`` on the first ``SNIFF_BYTES`` (decompressed) bytes, with
    no limit on the size: for files read record by record. Bytes the chosen encoding cannot
    read later in the file become U+FFFD, which the validator reports at its position.
    Reading the handle may still raise ``OSError``/``EOFError``/``zlib.error`` for gzip data
    damaged further in. Closing the handle does not close ``stream``.
    """
    try:
        head = stream.read(SNIFF_BYTES)
        if head[:2] == GZIP_MAGIC:
            stream = gzip.GzipFile(fileobj=_Rejoined(head, stream), mode="rb")
            head = stream.read(SNIFF_BYTES)
    except (OSError, EOFError, zlib.error) as exc:
        raise Unreadable(_DAMAGED_GZIP) from exc
    if head[:2] == GZIP_MAGIC:
        raise Unreadable("this is a gzip file inside a gzip file; decompress it first")
    codec, skip, notes = _identify(head, final=len(head) < SNIFF_BYTES)
    text = io.TextIOWrapper(io.BufferedReader(_Rejoined(head[skip:], stream)), encoding=codec, errors="replace")
    return text, notes


class _Rejoined(io.RawIOBase):
    """The bytes already read from a stream (``head``), then the rest of it."""

    def __init__(self, head: bytes, stream: BinaryIO):
        self._head, self._stream = memoryview(head), stream

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if self._head:
            count = min(len(buffer), len(self._head))
            buffer[:count] = self._head[:count]
            self._head = self._head[count:]
            return count
        return self._stream.readinto(buffer)


def _identify(data: bytes, final: bool) -> tuple[str, int, list[str]]:
    """(codec, bytes of byte-order mark to skip, notes) for text starting with ``data``.

    ``final`` says ``data`` is the whole input (else a multi-byte character may be cut at
    its end). Raises ``Unreadable`` for binary files.
    """
    for magic, name, hint in BINARY_MAGIC:
        if data.startswith(magic):
            raise Unreadable(f"this is {name}, not FASTA text; {hint}")
    if data[:3] == b"BZh" and data[3:4].isdigit() and data[4:10] == b"1AY&SY":
        raise Unreadable("this is a bzip2-compressed file, not FASTA text; decompress it first")
    for bom, codec in _BYTE_ORDER_MARKS:
        if data.startswith(bom):
            return codec, len(bom), []
    codec = _bomless_utf16(data)
    if codec:
        return codec, 0, []
    if b"\x00" in data:
        raise Unreadable(_BINARY_MESSAGE)
    try:
        codecs.getincrementaldecoder("utf-8")().decode(data, final=final)
        return "utf-8", 0, []
    except UnicodeDecodeError:
        pass
    if not _mostly_text(data):
        raise Unreadable(_BINARY_MESSAGE)
    return "latin-1", 0, [_LATIN1_NOTE]


INFLATE_CHUNK = 1 << 20  # bytes decompressed at a time: a bomb is refused one chunk past its limit


class TooLarge(Unreadable):
    """Compressed data that inflates to more than the limit (``limit`` bytes)."""

    def __init__(self, message: str, limit: int):
        super().__init__(message)
        self.limit = limit


def gunzip(data: bytes, max_bytes: int | None) -> bytes:
    """Gzip data (one member or several) decompressed a chunk at a time, never more than
    ``max_bytes`` plus one chunk: a bomb is refused as soon as it passes the limit, before the
    rest of it is inflated. The one decompression path for uploads (FASTA and structures).

    Raises:
      TooLarge: more than ``max_bytes`` (None: no limit) come out.
      Unreadable: damaged or truncated gzip data.
    """
    chunks, size = [], 0
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as handle:
            while chunk := handle.read(INFLATE_CHUNK):
                size += len(chunk)
                if max_bytes is not None and size > max_bytes:
                    raise TooLarge(f"this gzip file decompresses to more than {max_bytes:,} bytes", max_bytes)
                chunks.append(chunk)
    except (OSError, EOFError, zlib.error) as exc:
        raise Unreadable(_DAMAGED_GZIP) from exc
    return b"".join(chunks)


def _gunzip(data: bytes, max_decompressed: int | None) -> bytes:
    try:
        out = gunzip(data, max_decompressed)
    except TooLarge as exc:
        raise TooLarge(f"{exc}; upload fewer sequences", exc.limit) from None
    if out[:2] == GZIP_MAGIC:
        raise Unreadable("this is a gzip file inside a gzip file; decompress it first")
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

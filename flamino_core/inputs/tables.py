"""The CSV tables people upload with their measurements (DMS tables, labelled tables): one reader
for both, and the sizes that drive work checked before pandas builds anything.

A table's cost is set by a few numbers: its bytes, its columns (pandas builds one object column
each: a megabyte of commas in the header took five minutes and 760 MiB), its rows, and the length
of the protein the rows are read against (every row of a mutant table becomes that whole
sequence: 4,000 rows of ``A1C`` against a 50,000-residue wild type derived from one row were
200 MB of strings). ``TableLimits`` holds a caller's bounds on them (a hosted server's; none
locally) and ``read_table`` checks the first three before parsing; the wild type is checked by
``check_protein`` as soon as it is known, before any row is applied.

Columns are counted on every row, not the header only: a data row wider than its header made
pandas read the extra fields as an index (one row of 990,000 commas under a 3-column header ran
for 15 minutes to 8.25 GB; 60 kB of commas, 23 s). ``row_problem`` counts each row's separators
outside quotes with ``str`` methods, before any parser allocates a field, and refuses the first
row over the limit or wider than its header (unless its extra fields are empty: Excel's trailing
separators); pandas then reads with ``index_col=False``, so no row ever becomes an index. Line
breaks are made ``\n`` first: an old Mac CSV (CR only) is a table of rows, not one long header.

Bytes become text through ``formats.decode_bytes``, the FASTA reader's decoding: gzip, byte-order
marks, UTF-16 with or without one (what Excel's "Unicode Text" writes), Latin-1 when not UTF-8.
"""

from __future__ import annotations

import dataclasses
import io
import re

import pandas as pd

from flamino_core.inputs.formats import Unreadable, decode_bytes


class TableError(ValueError):
    """A table refused or unreadable (the message says why, for the user)."""


@dataclasses.dataclass(frozen=True)
class TableLimits:
    """Bounds on one uploaded table (None: unbounded, as on the command line)."""

    max_bytes: int | None = None
    max_columns: int | None = None
    max_rows: int | None = None
    max_residues: int | None = None  # the protein the rows are read against (a wild type, a row's sequence)


NO_LIMITS = TableLimits()


def separator(header: str) -> str:
    """The header line decides: tab when it has one (people paste TSV; Excel's "Unicode Text" is
    tab-separated), else semicolon when it has semicolons and no comma (a European Excel's CSV),
    else comma (ProteinGym writes commas)."""
    return "\t" if "\t" in header else ";" if ";" in header and "," not in header else ","


def read_table(data: bytes | str, limits: TableLimits = NO_LIMITS, *, what: str = "the table",
               error: type[ValueError] = TableError, strip_names: bool = True) -> pd.DataFrame:
    """A CSV (comma or tab separated; bytes or text, BOM tolerated) as text columns; its size,
    columns and rows checked against ``limits`` before it is parsed.

    Args:
      data: the file's bytes (or text).
      limits: the bounds in force.
      what: how messages name the table ("the DMS table").
      error: the exception type raised (a caller's own ``TableError`` subclass).
      strip_names: strip spaces around column names (a DMS table keeps them as written: its
        scored table is written back with the user's columns).

    Raises:
      ``error``: over a limit, unreadable, or a header without rows.
    """
    text = table_text(data, limits, what, error)
    problem = _shape_problem(text, limits, what)
    if problem:
        raise error(problem)
    try:
        # ``usecols``: a row's empty extra fields (trailing separators) are dropped unsaid, and
        # pandas converts none of them (60,000 empty ones took 3.5 s without it, 7 ms with).
        frame = pd.read_csv(io.StringIO(text), sep=separator(text.split("\n", 1)[0]), dtype=str,
                            keep_default_na=False, skip_blank_lines=True, index_col=False,
                            usecols=range(_header_width(text)))
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError) as exc:
        raise error(f"{what} could not be read as CSV: {str(exc).strip() or type(exc).__name__}") from None
    if strip_names:
        frame.columns = [str(c).strip() for c in frame.columns]
    if limits.max_rows is not None and len(frame) > limits.max_rows:  # quoted line breaks hid some
        raise error(_too_many_rows(what, len(frame), limits.max_rows))
    return frame


def table_text(data: bytes | str, limits: TableLimits = NO_LIMITS, what: str = "the table",
               error: type[ValueError] = TableError) -> str:
    """The table's text: bytes decoded as the FASTA reader decodes them (gzip inflated no further
    than ``limits.max_bytes``), a byte-order mark dropped, line breaks made ``\n`` (CRLF from
    Windows, CR alone from an old Mac); over ``limits.max_bytes`` refused first."""
    raw_size = len(data) if isinstance(data, bytes) else len(data.encode())
    if limits.max_bytes is not None and raw_size > limits.max_bytes:
        raise error(f"{what} is {raw_size:,} bytes; this server reads tables of up to {limits.max_bytes:,} bytes: "
                    "run flamino locally for larger ones")
    if isinstance(data, str):
        return _line_breaks(data.lstrip("\ufeff"))
    try:
        text, _notes = decode_bytes(data, limits.max_bytes)
    except Unreadable as exc:
        head, _, hint = str(exc).partition("; ")
        hint = hint if "decompress" in hint else "save it as CSV (comma- or tab-separated text)"
        raise error(f"{what}: {head.replace('not FASTA text', 'not a CSV table')}; {hint}") from None
    return _line_breaks(text)


def _line_breaks(text: str) -> str:
    """CRLF and a lone CR as ``\n`` (pandas and ``csv`` end a row at either: the counts below must too)."""
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


def size_problem(data: bytes | str, limits: TableLimits, what: str = "the table") -> str | None:
    """Why the table ``data`` is over ``limits`` or not text, before any parsing; or None."""
    try:
        return _shape_problem(table_text(data, limits, what), limits, what)
    except TableError as exc:
        return str(exc)


def _shape_problem(text: str, limits: TableLimits, what: str) -> str | None:
    """Why the table's text has too many columns (its header's) or lines, or a row too wide
    (``row_problem``), before any parsing; or None."""
    if limits.max_columns is not None:
        columns = _header_width(text)
        if columns > limits.max_columns:
            return f"{what} has {columns:,} columns; this server reads tables of up to {limits.max_columns:,} columns"
    if limits.max_rows is not None:
        lines = text.rstrip("\n").count("\n")  # lines under the header (blank ones too: a bound, not a count)
        if lines > limits.max_rows:
            return _too_many_rows(what, lines, limits.max_rows)
    return row_problem(text, limits.max_columns, what)


# A quoted field as ``csv`` and pandas read one: opened by a quote at the field's start, ``""``
# inside, closed by a lone quote. Linear: possessive repeats (``*+``, Python 3.11) never give back
# what they took, so each quote is scanned from once (1 MB of an unclosed quote: 0.02 s; 0.8 s
# with backtracking repeats).
_QUOTED = {sep: re.compile(rf'(?:^|(?<={re.escape(sep)}))"[^"]*+(?:""[^"]*+)*+"', re.MULTILINE) for sep in ",;\t"}


def row_problem(text: str, max_columns: int | None = None, what: str = "the table") -> str | None:
    """The first row (under the header) with more fields than ``max_columns``, or with more than
    its header and text in the extra ones; None when there is none.

    Fields are counted as separators outside quoted fields, with ``str.count`` on each row of a
    copy whose quoted fields are blanked: no field is allocated, whatever the row holds. A quoted
    field that is never closed is counted as if it were not quoted (more fields, never fewer than
    the parser will read: the bound holds).
    """
    sep = separator(text.split("\n", 1)[0])
    rows = _QUOTED[sep].sub(_blank, text).split("\n")
    width = rows[0].count(sep) + 1
    for number, row in enumerate(rows[1:], 1):
        fields = row.count(sep) + 1
        if fields <= width:
            continue
        if max_columns is not None and fields > max_columns:
            return (f"row {number:,} of {what} has {fields:,} fields; this server reads tables of up to "
                    f"{max_columns:,} columns")
        if _extra_text(row, sep, width):
            columns = f"{width:,} column{'s' if width > 1 else ''}"
            return (f"row {number:,} of {what} has {fields:,} fields but its header has {columns}: a value "
                    f"holding {_SEPARATOR_NAMES[sep]} must be quoted (\"a{sep}b\")")
    return None


_SEPARATOR_NAMES = {",": "a comma", ";": "a semicolon", "\t": "a tab"}


def _header_width(text: str) -> int:
    """The header's fields (its separators outside quotes)."""
    header = text.split("\n", 1)[0]
    sep = separator(header)
    return _QUOTED[sep].sub(_blank, header).count(sep) + 1


def _blank(quoted: re.Match) -> str:
    """A quoted field as one character (``_``), or as nothing when it holds nothing."""
    return "" if quoted.end() - quoted.start() == 2 else "_"


def _extra_text(row: str, sep: str, width: int) -> bool:
    """Whether the fields past the first ``width`` hold anything but blanks."""
    at = -1
    for _ in range(width):
        at = row.find(sep, at + 1)
    return bool(row[at + 1:].replace(sep, "").strip())


def _too_many_rows(what: str, rows: int, most: int) -> str:
    return (f"{what} has {rows:,} rows; this server reads tables of up to {most:,} rows: split it, or run "
            "flamino locally for larger ones")


def check_protein(length: int, which: str, limits: TableLimits, *, does: str = "reads tables of",
                  run: str = "flamino", error: type[ValueError] = TableError) -> None:
    """Refuse a protein over ``limits.max_residues`` before any row is applied to it.

    ``which`` names it ("the wild type (derived from mutated_sequence)"), ``does`` what the server
    does with such tables ("scores DMS tables of"), ``run`` the command to use locally.
    """
    if limits.max_residues is not None and length > limits.max_residues:
        raise error(f"{which} has {length:,} residues; this server {does} proteins up to "
                    f"{limits.max_residues:,} residues: run {run} locally for longer ones")

"""The CSV tables people upload with their measurements (DMS tables, labelled tables): one reader
for both, and the sizes that drive work checked before pandas builds anything.

A table's cost is set by a few numbers: its bytes, its columns (pandas builds one object column
each: a megabyte of commas in the header took five minutes and 760 MiB), its rows, and the length
of the protein the rows are read against (every row of a mutant table becomes that whole
sequence: 4,000 rows of ``A1C`` against a 50,000-residue wild type derived from one row were
200 MB of strings). ``TableLimits`` holds a caller's bounds on them (a hosted server's; none
locally) and ``read_table`` checks the first three before parsing; the wild type is checked by
``check_protein`` as soon as it is known, before any row is applied.

Bytes become text through ``formats.decode_bytes``, the FASTA reader's decoding: gzip, byte-order
marks, UTF-16 with or without one (what Excel's "Unicode Text" writes), Latin-1 when not UTF-8.
"""

from __future__ import annotations

import dataclasses
import io

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
        frame = pd.read_csv(io.StringIO(text), sep=separator(text.split("\n", 1)[0]), dtype=str,
                            keep_default_na=False, skip_blank_lines=True)
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
    than ``limits.max_bytes``), a byte-order mark dropped; over ``limits.max_bytes`` refused first."""
    raw_size = len(data) if isinstance(data, bytes) else len(data.encode())
    if limits.max_bytes is not None and raw_size > limits.max_bytes:
        raise error(f"{what} is {raw_size:,} bytes; this server reads tables of up to {limits.max_bytes:,} bytes: "
                    "run flamino locally for larger ones")
    if isinstance(data, str):
        return data.lstrip("\ufeff")
    try:
        text, _notes = decode_bytes(data, limits.max_bytes)
    except Unreadable as exc:
        head, _, hint = str(exc).partition("; ")
        hint = hint if "decompress" in hint else "save it as CSV (comma- or tab-separated text)"
        raise error(f"{what}: {head.replace('not FASTA text', 'not a CSV table')}; {hint}") from None
    return text


def size_problem(data: bytes | str, limits: TableLimits, what: str = "the table") -> str | None:
    """Why the table ``data`` is over ``limits`` or not text, before any parsing; or None."""
    try:
        return _shape_problem(table_text(data, limits, what), limits, what)
    except TableError as exc:
        return str(exc)


def _shape_problem(text: str, limits: TableLimits, what: str) -> str | None:
    """Why the table's text has too many columns (its header's) or lines, before any parsing; or None."""
    header = text.split("\n", 1)[0]
    if limits.max_columns is not None:
        columns = header.count(separator(header)) + 1
        if columns > limits.max_columns:
            return f"{what} has {columns:,} columns; this server reads tables of up to {limits.max_columns:,} columns"
    if limits.max_rows is not None:
        lines = text.rstrip("\r\n").count("\n")  # lines under the header (blank ones too: a bound, not a count)
        if lines > limits.max_rows:
            return _too_many_rows(what, lines, limits.max_rows)
    return None


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

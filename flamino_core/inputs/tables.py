"""The CSV tables people upload with their measurements (DMS tables, labelled tables): one reader
for both, and the sizes that drive work checked before pandas builds anything.

A table's cost is set by a few numbers: its bytes, its columns (pandas builds one object column
each: a megabyte of commas in the header took five minutes and 760 MiB), its rows, and the length
of the protein the rows are read against (every row of a mutant table becomes that whole
sequence: 4,000 rows of ``A1C`` against a 50,000-residue wild type derived from one row were
200 MB of strings). ``TableLimits`` holds a caller's bounds on them (a hosted server's; none
locally) and ``read_table`` checks the first three from the bytes alone, before parsing; the
wild type is checked by ``check_protein`` as soon as it is known, before any row is applied.
"""

from __future__ import annotations

import dataclasses
import io

import pandas as pd


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
    """Tab when the header line has one, else comma (ProteinGym writes commas; people paste TSV)."""
    return "\t" if "\t" in header else ","


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
    problem = size_problem(data, limits, what)
    if problem:
        raise error(problem)
    text = data.decode("utf-8-sig", errors="replace") if isinstance(data, bytes) else data.lstrip("\ufeff")
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


def size_problem(data: bytes | str, limits: TableLimits, what: str = "the table") -> str | None:
    """Why ``data`` is over ``limits`` (bytes, the header's columns, lines), from the bytes alone; or None."""
    raw = data.encode() if isinstance(data, str) else data
    if limits.max_bytes is not None and len(raw) > limits.max_bytes:
        return (f"{what} is {len(raw):,} bytes; this server reads tables of up to {limits.max_bytes:,} bytes: "
                "run flamino locally for larger ones")
    header = raw.split(b"\n", 1)[0]
    if limits.max_columns is not None:
        columns = header.count(separator(header.decode("utf-8", errors="replace")).encode()) + 1
        if columns > limits.max_columns:
            return f"{what} has {columns:,} columns; this server reads tables of up to {limits.max_columns:,} columns"
    if limits.max_rows is not None:
        lines = raw.rstrip(b"\r\n").count(b"\n")  # lines under the header (blank ones too: a bound, not a count)
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

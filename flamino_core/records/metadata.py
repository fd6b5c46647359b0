"""What a set of records says about itself: metadata read from FASTA headers, or joined from a
table the user uploads, for colouring the per-sequence map, the Records table and the ProtSpace
export (one parser, ``header_fields``, for all three).

Headers carry metadata by convention, and the parser knows the common ones:

- UniProt: ``sp|P68871|HBB_HUMAN Hemoglobin subunit beta OS=Homo sapiens OX=9606 GN=HBB PE=1 SV=2``
  (database, accession, entry name, protein name, organism, taxon, gene, existence; the
  sequence version ``SV=`` is read and left out, as before);
- UniRef: ``UniRef50_P68871 Hemoglobin subunit beta n=12 Tax=Homo sapiens TaxID=9606 RepID=...``;
- NCBI: ``NP_000509.1 hemoglobin subunit beta [Homo sapiens]`` (organism in brackets);
- Pfam/UniProt spans: ``HBB_HUMAN/3-147`` (``numbering.record_span``);
- any other ``key=value`` pair, a column named by its key: ProteinGym's
  ``A0A140D2T1_ZIKV taxon=Virus selection=OrganismalFitness assay=...``, ``key="a b"`` quoted;
  pairs may be separated by spaces, ``;`` or ``|``;
- an id of ``|``-separated fields (``seq1|Virus|2019``): each field after the first a column,
  ``id_part_2``, ``id_part_3`` ..., or a column of its own when it is ``key=value``.

A value without quotes runs to the next ``key=`` (UniProt's ``OS=Homo sapiens OX=...``); the
text before the first pair is the protein name. Values are text, numbers where they are numbers;
a record without a field has None there.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Sequence

from flamino_core.inputs.fasta_records import ProteinRecord
from flamino_core.inputs.numbering import record_span

# Column names (ProtSpace reads gene_name and protein_name as tooltip columns).
FIELDS = {  # column -> what the user sees
    "length": "length",
    "organism": "organism (OS=)",
    "taxon_id": "taxon (OX=)",
    "gene_name": "gene (GN=)",
    "protein_name": "protein name",
    "database": "database (sp/tr)",
    "accession": "accession",
    "entry_name": "entry name",
    "protein_existence": "protein existence (PE=)",
    "start": "start (/start-end)",
    "end": "end (/start-end)",
}
_UNIPROT_KEYS = {"OS": "organism", "OX": "taxon_id", "GN": "gene_name", "PE": "protein_existence"}
_UNIREF_KEYS = {"Tax": "organism", "TaxID": "taxon_id"}
# Read and left out, so the ProtSpace table of a UniProt or UniRef file keeps the columns it always
# had: UniProt's sequence version; UniRef's cluster size and representative (on UniRef ids only).
_DROPPED_KEYS = frozenset({"SV"})
_UNIREF_DROPPED_KEYS = frozenset({"n", "RepID"})
# A key starts the text or follows white space, ';' or '|' ("a=b=c" is one pair, a = "b=c").
_PAIR_KEY = re.compile(r"(?:^|(?<=[\s;|]))([A-Za-z_][\w.-]*)=")
_ID_PAIR = re.compile(r"([A-Za-z_][\w.-]*)=(.+)")
# Columns the rows and ProtSpace's table own: a header key of that name becomes header_<key>.
_RESERVED = frozenset({"id", "identifier", "record_id", "length"})
MAX_HEADER_COLUMNS = 32  # columns beyond FIELDS: those most records have
_DATABASE_ID = re.compile(r"^([a-z]{2,3})\|([^|]+)\|([^|/\s]+)")
_NCBI_ORGANISM = re.compile(r"\[([^\[\]]+)\]\s*$")
# A description that is only a UniProt accession, optionally versioned (Pfam and Stockholm
# exports write ``>HBB_HUMAN/3-147 P68871.1``): an accession, not a protein name.
_ACCESSION_ONLY = re.compile(
    r"([OPQ][0-9][A-Z0-9]{3}[0-9]|[A-NR-Z][0-9](?:[A-Z][A-Z0-9]{2}[0-9]){1,2})(?:\.[0-9]+)?")
# Columns an uploaded table may name its record ids by, in order of preference.
ID_COLUMNS = ("id", "identifier", "record_id", "protein_id", "accession", "entry", "uniprot_id")
# Numbers as people write them, in ASCII digits (no "1_000", no other scripts' digits).
_INTEGER = re.compile(r"[+-]?(0|[1-9][0-9]{0,14})")
_CODE = re.compile(r"[+-]?0[0-9]+")
_DECIMAL = re.compile(r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?")  # linear: no "[0-9]+[0-9]*"
# Numbers that name things (NCBI taxon ids): coloured as categories, never on a scale.
CODE_FIELDS = frozenset({"taxon_id"})


def header_fields(record_id: str, description: str) -> dict[str, object]:
    """The metadata in one FASTA header (id and description): ``FIELDS`` columns, then a column
    per other ``key=value`` pair (named by its key) and per ``|``-separated field of the id.

    Args:
      record_id: the header's first word.
      description: the rest of the header.

    Returns:
      Column -> value (int or float where the text is a number); absent fields are left out.
    """
    fields = _id_fields(record_id)
    name, pairs = _pairs(description.strip())
    uniref = record_id.startswith("UniRef")
    for key, value in pairs:
        column = _column(key, uniref)
        if column and value:
            fields[column] = _number(value)
    if not pairs:
        organism = _NCBI_ORGANISM.search(name)
        if organism:
            fields["organism"] = organism.group(1).strip()
            name = name[: organism.start()].strip()
    accession = _ACCESSION_ONLY.fullmatch(name)
    if accession and "accession" not in fields:
        fields["accession"] = accession.group(1)
    elif name:
        fields["protein_name"] = name
    span = record_span(record_id)
    if span:
        fields["start"], fields["end"] = span
    return fields


def _id_fields(record_id: str) -> dict[str, object]:
    """UniProt's ``db|accession|entry name``; else each ``|`` field after the first: ``id_part_N``
    (N counting from 1 at the first), or its key's column when it is ``key=value``."""
    database = _DATABASE_ID.match(record_id)
    if database:
        return dict(zip(("database", "accession", "entry_name"), database.groups(), strict=True))
    fields: dict[str, object] = {}
    for number, part in enumerate(record_id.split("|")[1:], start=2):
        pair = _ID_PAIR.fullmatch(part.strip())
        column = _column(pair.group(1), False) if pair else f"id_part_{number}"
        value = _number(pair.group(2) if pair else part)
        if column and value is not None:
            fields[column] = value
    return fields


def _pairs(text: str) -> tuple[str, list[tuple[str, str]]]:
    """The text before the first ``key=`` (stripped) and the ``(key, value)`` pairs after it. A
    value in double quotes is what the quotes hold; any other runs to the next key, without the
    ``;`` or ``|`` that separated them."""
    match = _PAIR_KEY.search(text)
    name = (text[: match.start()] if match else text).strip()
    pairs = []
    while match:
        key, start = match.group(1), match.end()
        close = text.find('"', start + 1) if text.startswith('"', start) else -1
        if close > 0:
            pairs.append((key, text[start + 1 : close].strip()))
            match = _PAIR_KEY.search(text, close + 1)
        else:
            following = _PAIR_KEY.search(text, start)
            value = text[start : following.start() if following else len(text)]
            pairs.append((key, value.strip().rstrip(";|").strip()))
            match = following
    return name, pairs


def _column(key: str, uniref: bool) -> str | None:
    """The column a header key fills (None: read and left out)."""
    if key in _DROPPED_KEYS or (uniref and key in _UNIREF_DROPPED_KEYS):
        return None
    known = _UNIPROT_KEYS.get(key) or _UNIREF_KEYS.get(key)
    if known:
        return known
    return f"header_{key}" if key in _RESERVED else key


def column_label(column: str) -> str:
    """What the user sees for a metadata column: ``FIELDS``' words, a header key as written."""
    return FIELDS.get(column, column)


def metadata_rows(records: Sequence[ProteinRecord]) -> list[dict[str, object]]:
    """One row per record: ``id``, ``length`` and every header field any record has (None where
    a record lacks it), columns in ``FIELDS`` order, then the headers' other columns in the order
    they first appear (the ``MAX_HEADER_COLUMNS`` most records have)."""
    parsed = [header_fields(r.id, r.description) for r in records]
    present = [column for column in FIELDS if column == "length" or any(column in p for p in parsed)]
    counts = Counter(column for p in parsed for column in p if column not in FIELDS)
    kept = set(sorted(counts, key=lambda column: -counts[column])[:MAX_HEADER_COLUMNS])  # stable: ties by order
    present += [column for column in counts if column in kept]
    rows = []
    for record, fields in zip(records, parsed, strict=True):
        values = {"length": len(record.sequence), **fields}
        rows.append({"id": record.id, **{column: values.get(column) for column in present}})
    return rows


def colour_values(rows: Sequence[dict[str, object]], column: str) -> list[object]:
    """The values of ``column`` to colour the records by: as they are, but ``CODE_FIELDS`` as text
    (taxon 9606 is a name, not an amount)."""
    values = [row.get(column) for row in rows]
    return [None if v is None else str(v) for v in values] if column in CODE_FIELDS else values


# Columns that number or name each record rather than group records: never a default colour.
_NOT_GROUPS = frozenset({"id", "length", "start", "end", "accession", "entry_name", "protein_name"})


def grouping_column(rows: Sequence[dict[str, object]]) -> str | None:
    """The first header column that groups the records (two values or more, one of them shared
    by two records or more, as ProteinGym's ``taxon=`` or UniProt's ``OS=``), in
    ``metadata_rows``' column order: what the records' map is coloured by until the user
    chooses; None when no column groups them."""
    for column in rows[0] if rows else ():
        if column in _NOT_GROUPS:
            continue
        values = [str(row[column]) for row in rows if row.get(column) is not None]
        if 2 <= len(set(values)) < len(values):
            return column
    return None


def join_table(records: Sequence[ProteinRecord], data: bytes, limits=None) -> tuple[dict[str, list], list[str]]:
    """Columns of an uploaded table (CSV or TSV) joined onto the records, and notes for the user.

    The id column is the first of ``ID_COLUMNS`` the table has (any case), else its first
    column. A row matches a record by the record's id, or by its accession or entry name
    (``sp|P68871|HBB_HUMAN`` matches ``P68871``), so tables keyed by UniProt accession, as
    ProtSpace writes them, join too.

    Returns:
      ``(columns, notes)``: each column's values in record order (None where no row matched).
      Raises ``ValueError`` with a message for the user if the table cannot be read, or is over
      ``limits`` (``inputs.tables.TableLimits``, a server's: bytes, rows, columns of every row).
    """
    from flamino_core.inputs.tables import NO_LIMITS, read_table

    # The one table reader (encodings, separators, bounds); its errors are ValueErrors with the reason.
    table = read_table(data, limits or NO_LIMITS, what="the table", error=ValueError, strip_names=False)
    if table.shape[1] < 2 or table.empty:
        raise ValueError("the table needs an id column and at least one more column, with a header row")
    lowered = {str(c).strip().lower(): c for c in table.columns}
    key = next((lowered[name] for name in ID_COLUMNS if name in lowered), table.columns[0])
    rows = {str(value).strip(): index for index, value in reversed(list(enumerate(table[key])))}
    matched = [_match(record, rows) for record in records]
    columns = {
        str(column): [None if i is None else _number(table[column].iloc[i]) for i in matched]
        for column in table.columns if column != key
    }
    found = sum(i is not None for i in matched)
    notes = [f"joined {found:,} of {len(records):,} record(s) on the table's '{key}' column"]
    missing = [r.id for r, i in zip(records, matched, strict=True) if i is None]
    if missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5:,} more" if len(missing) > 5 else "")
        notes.append(f"no row for {shown}")
    return columns, notes


def _match(record: ProteinRecord, rows: dict[str, int]) -> int | None:
    fields = header_fields(record.id, record.description)
    for key in (record.id, fields.get("accession"), fields.get("entry_name")):
        if key is not None and str(key) in rows:
            return rows[str(key)]
    return None


def _number(text: object) -> object:
    """``"9606"`` -> 9606, ``"0.5"`` -> 0.5; other text as it is (``"007"`` and ``"1_1"`` too, which
    Python's ``int``/``float`` would take); None if empty."""
    if text is None:
        return None
    value = str(text).strip()
    if not value:
        return None
    if _INTEGER.fullmatch(value):
        return int(value)
    if _CODE.fullmatch(value) or not _DECIMAL.fullmatch(value):  # "007" is a code, kept as text
        return value
    number = float(value)
    return number if abs(number) != float("inf") else value

"""What a set of records says about itself: metadata read from FASTA headers, or joined from a
table the user uploads, for colouring the per-sequence map and for the ProtSpace export.

Headers carry metadata by convention, and the parser knows the common ones:

- UniProt: ``sp|P68871|HBB_HUMAN Hemoglobin subunit beta OS=Homo sapiens OX=9606 GN=HBB PE=1 SV=2``
  (database, accession, entry name, protein name, organism, taxon, gene, existence, version);
- UniRef: ``UniRef50_P68871 Hemoglobin subunit beta n=12 Tax=Homo sapiens TaxID=9606 RepID=...``;
- NCBI: ``NP_000509.1 hemoglobin subunit beta [Homo sapiens]`` (organism in brackets);
- Pfam/UniProt spans: ``HBB_HUMAN/3-147`` (``numbering.record_span``).

Values are text, numbers where they are numbers; a record without a field has None there.
"""

from __future__ import annotations

import io
import re
from typing import Sequence

from .fasta_records import ProteinRecord
from .numbering import record_span

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
_KEY_VALUE = re.compile(r"\b(OS|OX|GN|PE|SV|Tax|TaxID|RepID|n)=")
_DATABASE_ID = re.compile(r"^([a-z]{2,3})\|([^|]+)\|([^|/\s]+)")
_NCBI_ORGANISM = re.compile(r"\[([^\[\]]+)\]\s*$")
# A description that is only a UniProt accession, optionally versioned (Pfam and Stockholm
# exports write ``>HBB_HUMAN/3-147 P68871.1``): an accession, not a protein name.
_ACCESSION_ONLY = re.compile(
    r"([OPQ][0-9][A-Z0-9]{3}[0-9]|[A-NR-Z][0-9](?:[A-Z][A-Z0-9]{2}[0-9]){1,2})(?:\.[0-9]+)?")
# Columns an uploaded table may name its record ids by, in order of preference.
ID_COLUMNS = ("id", "identifier", "record_id", "protein_id", "accession", "entry", "uniprot_id")


def header_fields(record_id: str, description: str) -> dict[str, object]:
    """The metadata in one FASTA header (id and description), as ``FIELDS`` columns."""
    fields: dict[str, object] = {}
    database = _DATABASE_ID.match(record_id)
    if database:
        fields["database"], fields["accession"], fields["entry_name"] = database.groups()
    text = description.strip()
    first = _KEY_VALUE.search(text)
    if first:
        name, pairs = text[: first.start()].strip(), text[first.start():]
        # "OS=Homo sapiens OX=9606": each value runs to the next KEY=.
        parts = _KEY_VALUE.split(pairs)[1:]
        for key, value in zip(parts[0::2], parts[1::2]):
            column = _UNIPROT_KEYS.get(key) or _UNIREF_KEYS.get(key)
            if column and value.strip():
                fields[column] = _number(value.strip())
    else:
        name = text
        organism = _NCBI_ORGANISM.search(text)
        if organism:
            fields["organism"] = organism.group(1).strip()
            name = text[: organism.start()].strip()
    accession = _ACCESSION_ONLY.fullmatch(name)
    if accession and "accession" not in fields:
        fields["accession"] = accession.group(1)
    elif name:
        fields["protein_name"] = name
    span = record_span(record_id)
    if span:
        fields["start"], fields["end"] = span
    return fields


def metadata_rows(records: Sequence[ProteinRecord]) -> list[dict[str, object]]:
    """One row per record: ``id``, ``length`` and every header field any record has (None where
    a record lacks it), columns in ``FIELDS`` order."""
    parsed = [header_fields(r.id, r.description) for r in records]
    present = [column for column in FIELDS if column == "length" or any(column in p for p in parsed)]
    rows = []
    for record, fields in zip(records, parsed, strict=True):
        values = {"length": len(record.sequence), **fields}
        rows.append({"id": record.id, **{column: values.get(column) for column in present}})
    return rows


def join_table(records: Sequence[ProteinRecord], data: bytes) -> tuple[dict[str, list], list[str]]:
    """Columns of an uploaded table (CSV or TSV) joined onto the records, and notes for the user.

    The id column is the first of ``ID_COLUMNS`` the table has (any case), else its first
    column. A row matches a record by the record's id, or by its accession or entry name
    (``sp|P68871|HBB_HUMAN`` matches ``P68871``), so tables keyed by UniProt accession, as
    ProtSpace writes them, join too.

    Returns:
      ``(columns, notes)``: each column's values in record order (None where no row matched).
      Raises ``ValueError`` with a message for the user if the table cannot be read.
    """
    import pandas as pd

    header = data.split(b"\n", 1)[0]
    # The header line decides: tabs (TSV), else semicolons without commas (European CSV), else commas.
    sep = "\t" if b"\t" in header else ";" if b";" in header and b"," not in header else ","
    try:
        table = pd.read_csv(io.BytesIO(data), sep=sep, dtype=str, keep_default_na=False)
    except (ValueError, UnicodeDecodeError, pd.errors.ParserError) as exc:
        raise ValueError(f"the table could not be read as CSV or TSV ({exc})") from None
    if table.shape[1] < 2 or table.empty:
        raise ValueError("the table needs an id column and at least one more column, with a header row")
    lowered = {str(c).strip().lower(): c for c in table.columns}
    key = next((lowered[name] for name in ID_COLUMNS if name in lowered), table.columns[0])
    rows = {str(value).strip(): index for index, value in reversed(list(enumerate(table[key])))}
    matched = [_match(record, rows) for record in records]
    columns = {
        str(column): [None if i is None else _number(table[column].iloc[i]) for i in matched]
        for column in table.columns if column != key
    }  # fmt: skip
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
    """``"9606"`` -> 9606, ``"0.5"`` -> 0.5; other text as it is (``"007"`` too); None if empty."""
    if text is None:
        return None
    value = str(text).strip()
    if not value:
        return None
    if re.fullmatch(r"[+-]?(0|[1-9]\d{0,14})", value):  # "007" is a code, kept as text
        return int(value)
    if re.fullmatch(r"[+-]?0\d+", value):
        return value
    try:
        number = float(value)
    except ValueError:
        return value
    return number if number == number and abs(number) != float("inf") else value


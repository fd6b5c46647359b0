"""Records of flat files (GenBank, GenPept, EMBL, IMGT, Swiss-Prot), read with Biopython.

People paste or upload the entry they have open: a Swiss-Prot text entry, a GenPept protein
record, a GenBank nucleotide record with its CDS translations. Each becomes one record with a
FASTA-like header and a note saying what was read, and then goes through the same checks as
any FASTA record (``fasta_records.check_record``: DNA verdict, length, bad characters).

- Swiss-Prot (``Bio.SwissProt``): the ``SQ`` sequence, under UniProt's FASTA header
  (``sp|P68871|HBB_HUMAN Hemoglobin subunit beta OS=Homo sapiens OX=9606 GN=HBB PE=1 SV=2``),
  so its metadata reads as that of a downloaded FASTA would.
- GenBank/EMBL protein records (GenPept): the ``ORIGIN`` sequence, under NCBI's header
  (``NP_000509.1 hemoglobin subunit beta [Homo sapiens]``).
- GenBank/EMBL nucleotide records: each CDS ``/translation`` as a protein record
  (``protein_id product [organism]``); a record without any is read as its nucleotide
  sequence, which the validator then refuses as DNA unless the user insists.

Which text is which format is decided in ``input_formats`` (``FLAT_FILE_FORMATS``); Biopython
is imported only when a flat file arrives.
"""

from __future__ import annotations

import dataclasses
import io
import re
import warnings
from typing import Iterable, Iterator

# "Homo sapiens (Human)": UniProt FASTA drops the common name. No leading ``\s*`` (the blanks
# before it are stripped after): that made the search quadratic on a long run of blanks.
_COMMON_NAME = re.compile(r"\([A-Z][^()]*\)$")
_FULL_NAME = re.compile(r"RecName: Full=([^;{]+)|SubName: Full=([^;{]+)")


@dataclasses.dataclass(frozen=True)
class FlatRecord:
    """One sequence found in a flat file: a FASTA header (without '>'), residues, a note."""

    title: str
    sequence: str
    note: str


def read_flat_records(lines: Iterable[str], name: str, seqio_format: str) -> Iterator[FlatRecord | str]:
    """The records of a flat file, in order; a ``str`` is a problem that ended the reading.

    Args:
      lines: the file's lines as typed (column positions matter in these formats).
      name: what the format is called ("GenBank"), for messages.
      seqio_format: Biopython's name for it: ``genbank``, ``embl``, ``imgt`` or ``swiss``.

    Yields:
      ``FlatRecord`` per sequence; at most one ``str`` (then nothing more): the file could not
      be read past that point. Records read before it are kept.
    """
    from Bio import BiopythonParserWarning, SeqIO, SwissProt

    handle = _LineHandle(lines)
    entries = SwissProt.parse(handle) if seqio_format == "swiss" else SeqIO.parse(handle, seqio_format)
    count = 0
    while True:
        try:
            # Biopython warns about what it tolerated (a length that does not match the LOCUS
            # line); those become notes. catch_warnings is process-wide: another session's
            # warning in these milliseconds could land here too, which costs nothing.
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", BiopythonParserWarning)
                entry = next(entries, None)
        except Exception as exc:  # Biopython's parsers raise ValueError, IndexError ... on damaged text
            after = f" after {count:,} record(s)" if count else ""
            detail = (str(exc).splitlines() or [type(exc).__name__])[0][:200]
            yield (f"this looks like {_a(name)} flat file, but it could not be read{after} ({detail}); "
                   "export the entry as FASTA instead")
            return
        if entry is None:
            break
        count += 1
        messages = (str(w.message) for w in caught if issubclass(w.category, BiopythonParserWarning))
        tolerated = list(dict.fromkeys(messages))
        records = [_swiss_record(entry)] if seqio_format == "swiss" else _sequence_records(entry, name)
        for record in records:
            yield dataclasses.replace(record, note="; ".join([record.note, *tolerated]))
    if not count:
        yield f"this looks like {_a(name)} flat file, but it holds no complete record (one ends with '//')"


def _a(name: str) -> str:
    return f"{'an' if name[0] in 'AEIOU' else 'a'} {name}"


def _swiss_record(entry) -> FlatRecord:
    accession = entry.accessions[0] if entry.accessions else entry.entry_name
    database = "sp" if entry.data_class == "Reviewed" else "tr"
    match = _FULL_NAME.search(entry.description or "")
    fields = [next(filter(None, match.groups())).strip() if match else (entry.description or "").strip()]
    organism = (entry.organism or "").strip().rstrip(".")
    common = _COMMON_NAME.search(organism)
    organism = organism[:common.start()].rstrip() if common else organism
    if organism:
        fields.append(f"OS={organism}")
    if entry.taxonomy_id:
        fields.append(f"OX={entry.taxonomy_id[0]}")
    gene = _gene_name(entry.gene_name)
    if gene:
        fields.append(f"GN={gene}")
    if entry.protein_existence:
        fields.append(f"PE={entry.protein_existence}")
    version = entry.sequence_update[1] if entry.sequence_update else None
    if version:
        fields.append(f"SV={version}")
    record_id = f"{database}|{accession}|{entry.entry_name}"
    note = f"read Swiss-Prot entry {entry.entry_name} ({accession}): its SQ sequence"
    declared = entry.seqinfo[0] if entry.seqinfo else None
    if declared is not None and declared != len(entry.sequence):
        note += f"; its SQ line says {declared:,} residues but {len(entry.sequence):,} were found (cut short?)"
    return FlatRecord(f"{record_id} {' '.join(fields)}".strip(), entry.sequence, note)


def _gene_name(gene_name) -> str:
    """The first ``Name=`` of a GN line (Biopython >= 1.82 gives dicts, older ones the text)."""
    if isinstance(gene_name, list):
        names = [entry.get("Name") for entry in gene_name if isinstance(entry, dict)]
        return next(filter(None, names), "")
    match = re.search(r"Name=([^;{ ]+)", gene_name or "")
    return match.group(1) if match else ""


def _sequence_records(entry, name: str) -> Iterator[FlatRecord]:
    """A GenBank/EMBL record: its protein, its CDS translations, or its nucleotide sequence."""
    from Bio.Seq import UndefinedSequenceError

    from flamino_core.inputs.fasta_records import looks_like_nucleotides

    organism = entry.annotations.get("organism", "")
    try:
        sequence = str(entry.seq)
    except UndefinedSequenceError:  # a CONTIG record, or a header without ORIGIN
        sequence = ""
    cds = [f for f in entry.features if f.type == "CDS" and f.qualifiers.get("translation")]
    # EMBL protein entries from patent offices (KIPO's "PRT; 111 AA.") and PDB-derived ones
    # ("unspecified; UNC; 154 AA.") carry no molecule type Biopython recognises: their letters say it.
    protein = entry.annotations.get("molecule_type") == "protein" or (
        not cds and sequence and not looks_like_nucleotides(sequence.upper()))
    if protein:
        kind = "GenPept" if name == "GenBank" else name
        yield FlatRecord(f"{entry.id} {entry.description}".strip(), sequence,
                         f"read {kind} protein record {entry.id}: its sequence")
        return
    for number, feature in enumerate(cds, 1):
        qualifiers = feature.qualifiers
        protein_id = next(
            (qualifiers[key][0] for key in ("protein_id", "locus_tag", "gene") if qualifiers.get(key)),
            f"{entry.id}_CDS{number}",
        )
        product = qualifiers.get("product", [""])[0]
        description = f"{product} [{organism}]" if organism else product
        yield FlatRecord(f"{protein_id} {description}".strip(), "".join(qualifiers["translation"][0].split()),
                         f"read the /translation of CDS {protein_id} in {name} record {entry.id}")
    if not cds:
        yield FlatRecord(f"{entry.id} {entry.description}".strip(), sequence,
                         f"{name} record {entry.id} holds a nucleotide sequence and no CDS /translation")


class _LineHandle(io.TextIOBase):
    """A read-only text handle over lines (without their line ends), as Biopython's parsers take."""

    def __init__(self, lines: Iterable[str]):
        self._lines = iter(lines)

    def readable(self) -> bool:
        return True

    def readline(self, size: int | None = -1) -> str:
        line = next(self._lines, None)
        return "" if line is None else line + "\n"

    def read(self, size: int | None = -1) -> str:
        # Biopython reads by line; read(0) is its check for a text handle. Anything else: the rest.
        if size == 0:
            return ""
        return "".join(iter(self.readline, ""))


def unframed(lines: Iterable[str], start: re.Pattern, end: re.Pattern, name: str) -> tuple[list[str], str]:
    """The sequence lines of text copied out of a flat file (``input_formats.FRAMED_SEQUENCES``):
    the first line's opening and the last line's closing dropped; and the note saying so."""
    typed = [line for line in lines if line]
    typed[0] = start.sub("", typed[0], count=1)
    closed = bool(end.search(typed[-1]))
    typed[-1] = end.sub("", typed[-1])
    return typed, f"read {name} as one sequence" + ("" if closed else " (it has no closing line; read to the end)")

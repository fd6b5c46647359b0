"""A structure as input: its protein chains as records, numbered from the file.

Every structural biologist starts from a structure, so a PDB or mmCIF file given where sequences
are expected (the Input page's uploader) is read by the structure reader and each protein chain
of its first model becomes one record: the chain's amino acids as modelled, in file order (the
residues ``reading.chain_residues`` reads, so the Structure page aligns the record to its chain
at 100% identity), with an id that carries the file's numbering of the first and last residue
(``1GBT_A/16-245``: the ``/start-end`` suffix every page reads its numbering from, as for a Pfam
domain) and ``key=value`` metadata (``structure=1GBT.cif chain=A``) that the Records table and the
map read (``records/metadata.py``), with the file's label of every residue
(``numbering=16..34,37..65,65A,...``: ``variants.author_numbering``), so mutations can be written in
the structure's own numbering.

Only the modelled residues are read: residues the file declares but has no coordinates for
(SEQRES, ``_entity_poly``) are not in the record, and where the file's numbering has gaps or
insertion codes (chymotrypsin numbering in 1GBT) positions after the first count the sequence,
not the file (the sidebar says so; the Structure page's alignment shows the file's labels), unless
a mutation list is read in the structure's numbering (the header's ``numbering=``).
"""

from __future__ import annotations

import dataclasses
import re
import zlib

from typing import TYPE_CHECKING

from flamino_core.inputs.fasta import ProteinRecord, to_fasta
from flamino_core.inputs.formats import FOREIGN_FORMATS, GZIP_MAGIC

if TYPE_CHECKING:  # the reader (Biopython) is imported when a structure is read: the command
    # line asks every FASTA argument ``looks_like_structure`` and must not pay for it.
    from flamino_core.structure.files.reading import ChainResidues, ParsedStructure

# The first-line patterns the FASTA reader refuses a structure by (one list: ``inputs.formats``).
_STRUCTURE_LINES = tuple(re.compile(pattern) for pattern, name, _ in FOREIGN_FORMATS if "structure file" in name)
SNIFF_BYTES = 64 * 1024  # what is inflated of a gzipped file to tell a structure from FASTA


@dataclasses.dataclass(frozen=True)
class ChainRecord:
    """One protein chain as a record, and where it came from."""

    record: ProteinRecord
    chain_id: str
    first_label: str  # the first and last residue as the file numbers them (``16``, ``184A``)
    last_label: str
    contiguous: bool  # the file numbers the residues 1 apart, without insertion codes

    def describe(self) -> str:
        """``chain A: 223 amino acids, residues 16–245 in the file's numbering (with gaps or
        insertion codes)``."""
        gaps = "" if self.contiguous else " (with gaps or insertion codes)"
        return (f"chain {self.chain_id}: {len(self.record.sequence):,} amino acids, residues "
                f"{self.first_label}–{self.last_label} in the file's numbering{gaps}")


def looks_like_structure(data: bytes) -> bool:
    """Whether bytes (plain or gzipped) start as a PDB or an mmCIF file does: the first non-blank
    line is one the FASTA reader would refuse as a structure. Cheap (at most ``SNIFF_BYTES``
    inflated), so every upload can be asked before it is parsed."""
    head = data[:SNIFF_BYTES]
    if head[:2] == GZIP_MAGIC:
        try:
            head = zlib.decompressobj(wbits=31).decompress(data[: 4 * SNIFF_BYTES], SNIFF_BYTES)
        except zlib.error:
            return False
    text = head.decode("latin-1").lstrip("\ufeff")
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return any(pattern.match(first) for pattern in _STRUCTURE_LINES)


def chain_records(parsed: ParsedStructure, model_index: int = 0) -> tuple[ChainRecord, ...]:
    """Each protein chain of one model as a record, in file order (chains without amino acids,
    such as DNA, ligands and water, give none)."""
    from flamino_core.structure.files.reading import protein_chains

    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", parsed.name.split(".")[0]) or "structure"
    return tuple(_chain_record(stem, parsed.name, chain) for chain in protein_chains(parsed, model_index))


def _chain_record(stem: str, file_name: str, chain: ChainResidues) -> ChainRecord:
    numbers = [number for _, number, _ in chain.residue_ids]
    inserted = any(code.strip() for _, _, code in chain.residue_ids)
    contiguous = not inserted and all(b - a == 1 for a, b in zip(numbers, numbers[1:]))
    first, last = chain.labels[0], chain.labels[-1]
    # The ``/start-end`` suffix reads only non-negative numbers; a chain numbered from 0 or below
    # (a tag) starts at 1 on the pages, and its metadata still says where the file starts.
    span = f"/{numbers[0]}-{numbers[-1]}" if 0 < numbers[0] <= numbers[-1] else ""
    chain_id = re.sub(r"[^A-Za-z0-9]", "_", chain.chain_id)
    # The file's own label of every residue travels with the record (``author_numbering``): a
    # mutation can be written in the structure's numbering (S195A on 1GBT) and results show both.
    # Imported here: every FASTA read asks looks_like_structure, and a FASTA file never needs it.
    from flamino_core.variants.author_numbering import KEY as NUMBERING, AuthorNumbering

    labels = AuthorNumbering(tuple(chain.labels)).encode()
    description = f"structure={file_name} chain={chain.chain_id} first={first} last={last} {NUMBERING}={labels}"
    record = ProteinRecord(f"{stem}_{chain_id}{span}", description, chain.sequence)
    return ChainRecord(record, chain.chain_id, first, last, contiguous)


@dataclasses.dataclass(frozen=True)
class StructureRecords:
    """A structure given where sequences are expected, as records (``structure_records``)."""

    parsed: ParsedStructure
    chains: tuple[ChainRecord, ...]

    @property
    def fasta(self) -> str:
        """The chains' records as FASTA, for the one validator (its limits and checks) to read."""
        return records_fasta(self.chains)

    def describe(self) -> str:
        """``structure, 1 protein chain (chain A: 223 amino acids, residues 16–245 ...)``."""
        n = len(self.chains)
        return (f"structure, {n:,} protein chain{'' if n == 1 else 's'} "
                f"({'; '.join(chain.describe() for chain in self.chains)})")


def structure_records(parsed: ParsedStructure) -> StructureRecords:
    """A parsed PDB or mmCIF file given as input (the app's Input page, the command line's FASTA
    argument) as its first model's protein chains, one record each (``chain_records``).

    Raises:
      ValueError: the file holds no protein chain (its chains are listed).
    """
    chains = chain_records(parsed)
    if not chains:
        listing = "; ".join(summary.describe() for summary in parsed.chains())
        raise ValueError(f"{parsed.name} holds no protein chain in its first model ({listing})")
    return StructureRecords(parsed, chains)


def records_fasta(chains: tuple[ChainRecord, ...]) -> str:
    """The chains' records as FASTA text (what the Input page keeps of an uploaded structure and
    reads through the one validator, with its limits)."""
    return to_fasta([chain.record for chain in chains])

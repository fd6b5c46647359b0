"""Issue 23: flamino's readers over every sequence and structure file of a peer's test corpus
(Biopython 1.88's ``Tests/``, tests/peer_corpus.py), compared with Biopython's own reading.

Every file is read both ways. A file either reads the same (records in order, sequences equal
after flamino's documented cleaning: upper case, no gaps, no terminal '*'; FASTA ids equal) or
its difference is one of ``DIFFERENCES`` below, each listed with its reason in docs/inputs.md
(the last test checks that). A new difference, or a listed one that went away, fails the test.
"""

from __future__ import annotations

import gzip
import io
import warnings
from pathlib import Path

from Bio import BiopythonParserWarning, SeqIO
from Bio.Data.PDBData import protein_letters_3to1_extended
from Bio.PDB import MMCIFParser, PDBParser
from Bio.PDB.Polypeptide import is_aa

from flamino_core.inputs.fasta import parse_fasta_bytes
from flamino_core.structure.files.reading import StructureError, chain_residues, read_structure

DOCS = Path(__file__).resolve().parents[2] / "docs" / "inputs.md"

# Which Biopython format each file of the corpus is (as Biopython's own tests read them).
SEQUENCE_FORMATS = {
    "EMBL/*.embl": "embl", "EMBL/*.imgt": "imgt",
    "GenBank/*.gb": "genbank", "GenBank/*.gbk": "genbank", "GenBank/*.gp": "genbank",
    "GenBank/*.seq": "genbank", "GenBank/*.gbwithparts": "genbank", "GenBank/*.faa": "fasta",
    "GenBank/*.fna": "fasta", "GenBank/*.ffn": "fasta", "GFF/*.gbk": "genbank", "GFF/*.fna": "fasta",
    "SwissProt/*.txt": "swiss", "SwissProt/sp0*": "swiss", "SwissProt/*.xml": "uniprot-xml",
    "SwissProt/multi_ex.fasta": "fasta", "SwissProt/multi_ex.list": "fasta",
    "Fasta/[!a]*.pro": "fasta", "Fasta/aster.pro": "fasta", "Fasta/aster_no_wrap.pro": "fasta", "Fasta/*.nu": "fasta", "Fasta/*.fa": "fasta", "Fasta/f00*": "fasta",
    "Fasta/fa01": "fasta", "Fasta/dups.fasta": "fasta", "Fasta/flowers.pro.gz": "fasta",
    "Fasta/aster_pearson.pro": "fasta-pearson", "Fasta/aster_blast.pro": "fasta-blast",
}  # fmt: skip
STRUCTURE_FILES = ("PDB/*.pdb", "PDB/*.cif", "PDB/*.ent")

# Outcomes other than "same": "nucleotide" (flamino refuses DNA/RNA records, ESM-2 reads protein),
# "unreadable" (Biopython fails on the file too, and flamino says it cannot be read), "refused"
# (a file flamino does not read, with the reason and what to give instead), "differs" (read
# otherwise, on purpose).
DIFFERENCES = {
    # sequences
    "EMBL/101ma_no_coords.embl": "differs",  # protein by its letters; Biopython sets no molecule type
    "EMBL/kipo_prt_sample.embl": "differs",  # the same (KIPO's PRT entries)
    "Fasta/dups.fasta": "differs",  # a repeated id is renamed (alpha_2): ids stay unique
    "EMBL/patents.embl": "unreadable",
    "EMBL/xx_after_co.embl": "unreadable",
    "GenBank/invalid_product.gb": "unreadable",
    "GenBank/no_origin_no_end.gb": "unreadable",
    "SwissProt/keywlist.txt": "unreadable",  # a keyword list, no entry
    "SwissProt/keywlist2.txt": "unreadable",
    "SwissProt/multi_ex.list": "unreadable",  # accession numbers, not sequences
    "SwissProt/UniRef90_P99999.xml": "unreadable",  # UniRef XML, not UniProt XML
    **{f"SwissProt/{name}.xml": "refused" for name in (  # UniProt XML: download FASTA or text instead
        "F2CXE6", "H2CNN8", "P62330", "P84001", "P97881", "Q13639", "R5HY77", "multi_ex", "multiligand")},
    "Fasta/f002": "nucleotide", "Fasta/centaurea.nu": "nucleotide", "Fasta/elderberry.nu": "nucleotide",
    "Fasta/lavender.nu": "nucleotide", "Fasta/lupine.nu": "nucleotide", "Fasta/phlox.nu": "nucleotide",
    "Fasta/sweetpea.nu": "nucleotide", "Fasta/wisteria.nu": "nucleotide", "Fasta/nucleotide_lib.fa": "nucleotide",
    "GenBank/NC_005816.fna": "nucleotide", "GenBank/NC_005816.ffn": "nucleotide",
    "GFF/NC_001802.fna": "nucleotide", "GFF/NC_001802lc.fna": "nucleotide", "GFF/NC_001802x.fna": "nucleotide",
    "GFF/multi.fna": "nucleotide",
    # structures
    "PDB/3JQH.cif": "differs",  # microheterogeneity: the highest occupancy, not the last listed
    "PDB/2n0n_M1.pdb": "differs",  # PH8 (not in Biopython's table, has N, CA, C): read as X
    "PDB/1MOM_min.cif": "refused", "PDB/4Q9R_min.cif": "refused", "PDB/d256ba_.ent": "refused",
    "PDB/header.pdb": "refused",
}  # fmt: skip


def files(root: Path, patterns) -> list[str]:
    return sorted({str(p.relative_to(root)) for pattern in patterns for p in root.glob(pattern) if p.is_file()})


def clean(sequence: str) -> str:
    """flamino's documented cleaning of a sequence (docs/inputs.md)."""
    text = "".join(sequence.split()).upper().replace("-", "").replace(".", "")
    return text.rstrip("*")


def biopython_proteins(data: bytes, seqio_format: str) -> list[tuple[str, str]]:
    """(id, sequence) of what Biopython reads as protein: a FASTA record, a protein record, or
    each CDS translation of a nucleotide record."""
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BiopythonParserWarning)
        handle = io.BytesIO(data) if seqio_format == "uniprot-xml" else io.StringIO(data.decode("latin-1"))
        for record in SeqIO.parse(handle, seqio_format):
            cds = [f.qualifiers["translation"][0] for f in record.features
                   if f.type == "CDS" and f.qualifiers.get("translation")]  # fmt: skip
            if seqio_format.startswith("fasta") or record.annotations.get("molecule_type") == "protein" or (
                    seqio_format in ("swiss", "uniprot-xml")):
                out.append((record.id, str(record.seq)))
            else:
                out.extend((record.id, translation) for translation in cds)
    return out


def sequence_outcome(tests: Path, name: str, seqio_format: str) -> str:
    data = (tests / name).read_bytes()
    ours = parse_fasta_bytes(data)
    try:
        theirs = biopython_proteins(gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data, seqio_format)
    except Exception:  # Biopython raises ValueError, UndefinedSequenceError ... on these files
        assert not ours.records and ours.errors, name  # flamino reads nothing from them either
        return "unreadable"
    same = [clean(s) for _, s in theirs] == [r.sequence for r in ours.records] and (
        not seqio_format.startswith("fasta") or [i for i, _ in theirs] == [r.id for r in ours.records])
    if same:  # a nucleotide record without CDS translations: Biopython reads no protein, flamino keeps none
        return "same"
    if ours.nucleotide_labels:
        return "nucleotide"
    return "refused" if theirs and not ours.records and ours.errors else "differs"


def biopython_chains(path: Path) -> dict[str, str]:
    """Biopython's amino acids per chain of the first model: ``is_aa`` (its table, modified
    residues included) with a CA atom, in its own 3-to-1 table ('X' where that has none)."""
    parser = MMCIFParser(QUIET=True) if path.suffix == ".cif" else PDBParser(QUIET=True)
    model = parser.get_structure(path.stem, str(path))[0]
    chains = {}
    for chain in model:
        letters = [protein_letters_3to1_extended.get(r.get_resname().strip().upper(), "X")
                   for r in chain if r.id[0] != "W" and is_aa(r, standard=False) and "CA" in r]  # fmt: skip
        if letters:
            chains[chain.id] = "".join(letters)
    return chains


def structure_outcome(tests: Path, name: str) -> str:
    try:
        parsed = read_structure(tests / name)
    except StructureError:
        return "refused"
    ours = {s.chain_id: chain_residues(parsed, s.chain_id).sequence for s in parsed.chains() if s.is_protein}
    return "same" if ours == biopython_chains(tests / name) else "differs"


def test_every_peer_file_reads_as_biopython_reads_it_or_the_difference_is_listed(peer_tests):
    outcomes = {}
    for pattern, seqio_format in SEQUENCE_FORMATS.items():
        for name in files(peer_tests, [pattern]):
            outcomes[name] = sequence_outcome(peer_tests, name, seqio_format)
    for name in files(peer_tests, STRUCTURE_FILES):
        outcomes[name] = structure_outcome(peer_tests, name)
    assert len(outcomes) > 120
    assert {n: o for n, o in outcomes.items() if o != "same"} == DIFFERENCES
    same = [n for n, o in outcomes.items() if o == "same"]
    assert sum(n.startswith("PDB/") for n in same) >= 25 and len(same) >= 80


def test_each_difference_is_explained_in_docs_inputs():
    text = DOCS.read_text()
    missing = [name for name in DIFFERENCES if f"`{name}`" not in text]
    assert not missing, f"docs/inputs.md does not list {missing}"

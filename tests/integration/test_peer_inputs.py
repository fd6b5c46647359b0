"""Issue 23, items 1, 2 and 9b: real files from Biopython's own test corpus (tests/peer_corpus.py)
that flamino refused, misread or named wrongly. Each is compared with Biopython's reading."""

from __future__ import annotations

import warnings

import pytest
from Bio import BiopythonParserWarning, SeqIO

from flamino_core.inputs.fasta import parse_fasta_text, read_fasta


def biopython_proteins(path, seqio_format: str) -> list[str]:
    """What Biopython reads as protein: a protein record's sequence, else its CDS translations."""
    proteins = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BiopythonParserWarning)
        for record in SeqIO.parse(path, seqio_format):
            cds = [f.qualifiers["translation"][0] for f in record.features
                   if f.type == "CDS" and f.qualifiers.get("translation")]  # fmt: skip
            proteins.extend(cds if cds else [str(record.seq)])
    return proteins


# --- item 1: EMBL protein entries, a GenBank release file, IMGT/HLA ------------------------------
@pytest.mark.parametrize(
    "name, seqio_format, count, kind",
    [
        ("EMBL/epo_prt_selection.embl", "embl", 9, "EMBL protein record"),  # ENA's patent proteins
        ("EMBL/kipo_prt_sample.embl", "embl", 20, "EMBL protein record"),  # laid out like old Swiss-Prot
        ("EMBL/101ma_no_coords.embl", "embl", 1, "EMBL protein record"),  # no XX lines, no coordinates
        ("GenBank/gbvrl1_start.seq", "genbank", 3, "/translation of CDS"),  # a release file's header first
        ("EMBL/hla_3260_sample.imgt", "imgt", 8, "IMGT record"),  # IMGT/HLA: wider feature columns
    ],
)
def test_flat_files_read_as_biopython_reads_them(peer_tests, name, seqio_format, count, kind):
    path = peer_tests / name
    parsed = read_fasta(path)
    assert not parsed.errors, parsed.errors
    expected = biopython_proteins(path, seqio_format)
    assert len(expected) == count
    assert [r.sequence for r in parsed.records] == ["".join(s.split()).upper() for s in expected]
    assert all(kind in w.message for w in parsed.warnings if w.message.startswith("read"))


def test_swiss_prot_files_are_still_swiss_prot(peer_tests):
    # The old Swiss-Prot layout (PRELIMINARY; PRT;) and IPI's, next to KIPO's look-alike EMBL lines.
    for name in ("SwissProt/sp012", "SwissProt/sp015", "SwissProt/multi_ex.txt"):
        parsed = read_fasta(peer_tests / name)
        assert not parsed.errors and parsed.records
        assert all("Swiss-Prot entry" in w.message for w in parsed.warnings if w.message.startswith("read"))


# --- item 2: accession lists, short DNA ------------------------------------------------------------
def test_a_list_of_accession_numbers_is_not_a_protein(peer_tests):
    parsed = read_fasta(peer_tests / "SwissProt/multi_ex.list")
    assert not parsed.records
    (error,) = parsed.errors
    assert "list of 8 accession number(s) (P00750, P56540, Q51858 …), not a sequence" in error.message


@pytest.mark.parametrize("text", ["NP_000509.1\nXP_011518.2\n", "P68871 P69905-2 A0A1I9GEU1\n", "AB000048.1\n"])
def test_accession_numbers_of_other_databases(text):
    parsed = parse_fasta_text(text)
    assert not parsed.records and "accession number" in parsed.errors[0].message


def test_numbered_sequences_are_not_accessions():
    parsed = parse_fasta_text(">p\n1 MKVLA 6 WQERT\n")
    assert parsed.records[0].sequence == "MKVLAWQERT" and not parsed.errors


def test_short_dna_is_refused_as_dna(peer_tests):
    parsed = read_fasta(peer_tests / "GFF/multi.fna")  # three 8-nt records
    assert not parsed.records and parsed.nucleotide_labels == ("test1", "test2", "test3")
    allowed = read_fasta(peer_tests / "GFF/multi.fna", allow_nucleotides=True)
    assert [r.sequence for r in allowed.records] == [str(r.seq) for r in SeqIO.parse(peer_tests / "GFF/multi.fna", "fasta")]


def test_dna_with_ambiguity_codes_is_refused_as_dna():
    # 25 nt, 12 of them (48%) IUPAC ambiguity codes: was read as a protein without a word.
    parsed = parse_fasta_text(">primer\nACGTRYKMACGTSWBDACGTHVNRY\n")
    assert not parsed.records and parsed.nucleotide_labels == ("primer",)
    assert "IUPAC ambiguity codes" in parsed.errors[0].message


# --- item 9b: UniProt XML without an XML declaration -----------------------------------------------
@pytest.mark.parametrize("name", ["SwissProt/multiligand.xml", "SwissProt/P84001.xml"])
def test_uniprot_xml_is_named_as_such(peer_tests, name):
    parsed = read_fasta(peer_tests / name)
    (error,) = parsed.errors
    assert "UniProt XML file, not FASTA" in error.message and "Swiss-Prot format" in error.message


# --- comment lines inside FASTA records (the corpus' Pearson and BLAST-style files) ---------------
@pytest.mark.parametrize("name, seqio_format", [("Fasta/aster_pearson.pro", "fasta-pearson"),
                                                ("Fasta/aster_blast.pro", "fasta-blast")])
def test_fasta_comment_lines_are_skipped(peer_tests, name, seqio_format):
    parsed = read_fasta(peer_tests / name)
    (expected,) = SeqIO.parse(peer_tests / name, seqio_format)
    assert not parsed.errors and [r.sequence for r in parsed.records] == [str(expected.seq)]
    assert any("comment line(s)" in w.message for w in parsed.warnings)

"""Sequences as people paste them: flat files (GenBank, GenPept, Swiss-Prot), a GenBank ORIGIN
block or /translation, UniProt's numbered blocks, and DNA. Each is read by the one validator
(``fasta.parse_fasta_text``), checked against Biopython reading the same text, and says what
was read. The inputs are real records written in their published formats (tests/data/SOURCES.md)."""

from __future__ import annotations

import gzip
import io
import re
from pathlib import Path

import pytest
from Bio import SeqIO, SwissProt

from flamino_core.inputs.fasta import parse_fasta_bytes, parse_fasta_text
from flamino_core.inputs.fasta_reader import iter_records

DATA = Path(__file__).resolve().parents[1] / "data"
SHARED_HBB = Path(__file__).resolve().parents[3] / "shared" / "fasta" / "HBB_HUMAN.fa"


@pytest.fixture(scope="module")
def p68871() -> str:
    """UniProt P68871: the mature chain of the shared HBB_HUMAN.fa after the initiator Met."""
    if not SHARED_HBB.is_file():
        pytest.skip(f"{SHARED_HBB} is not available")
    return "M" + "".join(SHARED_HBB.read_text().split("\n", 1)[1].split())


def messages(issues) -> str:
    return "\n".join(str(issue) for issue in issues)


def test_the_test_files_are_what_biopython_reads(p68871):
    """The hand-written records are valid in their formats: Biopython reads the real sequence."""
    (swiss,) = SwissProt.parse(io.StringIO((DATA / "HBB_HUMAN.swiss.txt").read_text()))
    assert swiss.sequence == p68871 and swiss.seqinfo[0] == len(p68871)
    (genpept,) = SeqIO.parse(DATA / "NP_000509.gp", "genbank")
    assert str(genpept.seq) == p68871 and genpept.annotations["molecule_type"] == "protein"
    (nucleotide,) = SeqIO.parse(DATA / "HBB_synthetic_cds.gb", "genbank")
    (cds,) = [f for f in nucleotide.features if f.type == "CDS"]
    assert str(cds.extract(nucleotide.seq).translate(to_stop=True)) == p68871 == cds.qualifiers["translation"][0]


def test_a_swiss_prot_entry_is_read_with_uniprots_fasta_header(p68871):
    parsed = parse_fasta_text((DATA / "HBB_HUMAN.swiss.txt").read_text())
    (record,) = parsed.records
    assert record.sequence == p68871 and not parsed.errors
    # The header UniProt's own FASTA download has for this entry.
    assert f"{record.id} {record.description}" == (
        "sp|P68871|HBB_HUMAN Hemoglobin subunit beta OS=Homo sapiens OX=9606 GN=HBB PE=1 SV=2"
    )
    assert "read Swiss-Prot entry HBB_HUMAN (P68871)" in messages(parsed.warnings)


def test_a_genpept_record_gives_its_origin_sequence(p68871):
    parsed = parse_fasta_bytes(gzip.compress((DATA / "NP_000509.gp").read_bytes()))
    (record,) = parsed.records
    assert (record.id, record.description, record.sequence) == (
        "NP_000509.1", "hemoglobin subunit beta [Homo sapiens]", p68871
    )
    assert "read GenPept protein record NP_000509.1" in messages(parsed.warnings)


def test_a_nucleotide_genbank_record_gives_its_cds_translation(p68871):
    parsed = parse_fasta_text((DATA / "HBB_synthetic_cds.gb").read_text())
    (record,) = parsed.records
    assert (record.id, record.sequence) == ("SYN_HBB_P.1", p68871)
    assert "read the /translation of CDS SYN_HBB_P.1 in GenBank record SYN_HBB.1" in messages(parsed.warnings)


def test_a_nucleotide_record_without_translation_is_refused_as_dna():
    text = (DATA / "HBB_synthetic_cds.gb").read_text()
    without_cds = re.sub(r"     CDS .*?(?=ORIGIN)", "", text, flags=re.S)
    parsed = parse_fasta_text(without_cds)
    assert not parsed.records and parsed.nucleotide_labels == ("SYN_HBB.1",)
    assert "SYN_HBB.1: this is nucleotide sequence, not protein" in messages(parsed.errors)
    allowed = parse_fasta_text(without_cds, allow_nucleotides=True)
    assert len(allowed.records[0].sequence) == 444


def test_several_flat_records_keep_distinct_ids_and_a_damaged_one_is_reported(p68871):
    entry = (DATA / "HBB_HUMAN.swiss.txt").read_text()
    parsed = parse_fasta_text(entry + entry + "ID   BROKEN     Reviewed;  5 AA.\nSQ   nonsense\n//\n")
    assert [r.id for r in parsed.records] == ["sp|P68871|HBB_HUMAN", "sp|P68871|HBB_HUMAN_2"]
    (error,) = parsed.errors
    assert error.record is None and "could not be read after 2 record(s)" in error.message


def test_a_truncated_swiss_prot_sequence_is_read_with_a_note():
    entry = (DATA / "HBB_HUMAN.swiss.txt").read_text()
    cut = re.sub(r"(     MVHLTPEEKS.*\n).*\n.*\n(//)", r"\1\2", entry)
    parsed = parse_fasta_text(cut)
    assert len(parsed.records[0].sequence) == 60
    assert "its SQ line says 147 residues but 60 were found" in messages(parsed.warnings)


def test_the_genbank_origin_block_as_pasted(p68871):
    """Copied from 'ORIGIN' to '//': the '//' used to be refused as bad characters."""
    text = (DATA / "NP_000509.gp").read_text()
    parsed = parse_fasta_text(text[text.index("ORIGIN"):])
    assert parsed.records[0].sequence == p68871 and not parsed.errors
    assert "read a GenBank ORIGIN block as one sequence" in messages(parsed.warnings)


def test_a_pasted_translation_qualifier(p68871):
    text = (DATA / "HBB_synthetic_cds.gb").read_text()
    qualifier = text[text.index("/translation="):text.index("ORIGIN")]
    parsed = parse_fasta_text(qualifier)
    assert parsed.records[0].sequence == p68871 and not parsed.errors


@pytest.mark.parametrize("per_line", [6, 2])
@pytest.mark.parametrize("case", [str.upper, str.lower])
def test_uniprots_numbered_blocks_as_copied_from_the_web_page(p68871, per_line, case):
    """UniProt's entry page: a line numbering each block's end over blocks of 10. Two blocks per
    line (a narrow window) used to be refused as "a PHYLIP alignment"."""
    blocks = [p68871[i:i + 10] for i in range(0, len(p68871), 10)]
    lines = []
    for start in range(0, len(blocks), per_line):
        row = blocks[start:start + per_line]
        lines.append("".join(f"{(start + k + 1) * 10:>{10 if k == 0 else 11}}" for k, b in enumerate(row) if len(b) == 10))
        lines.append(case(" ".join(row)))
    text = "\n".join(lines) + "\n"
    if per_line == 6 and case is str.upper:
        assert text == (DATA / "HBB_HUMAN.uniprot_web.txt").read_text()
    parsed = parse_fasta_text(text)
    assert parsed.records[0].sequence == p68871 and not parsed.errors
    assert "numbered blocks of 10 residues" in messages(parsed.warnings)


@pytest.mark.parametrize("header", ["5 42", "10 20"])
def test_a_phylip_alignment_is_still_recognised(header):
    text = f"{header}\nHuman     ACGTACGTAC GTACGTACGT\nChimp     ACGTACGTAC GTACGTACGA\n"
    (error,) = parse_fasta_text(text).errors
    assert "PHYLIP" in error.message


def test_flat_files_stream_through_the_batch_reader(tmp_path, p68871):
    """Batch jobs read files through the same reader (binary stream, no bare sequences)."""
    path = tmp_path / "entry.txt"
    path.write_bytes(gzip.compress((DATA / "HBB_HUMAN.swiss.txt").read_bytes()))
    with open(path, "rb") as handle:
        items = list(iter_records(handle, bare_sequence=False))
    (checked,) = items
    assert checked.record.sequence == p68871

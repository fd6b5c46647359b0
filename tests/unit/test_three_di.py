"""SaProt's structure tokens (flamino_core/structure/three_di.py): Foldseek's 3Di letters from a
real structure, aligned to the record, pLDDT < 70 masked in a predicted structure.

The Foldseek reference and the files' sources: tests/data/structures/SOURCES.md.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from flamino_core.structure import three_di
from flamino_core.structure.files.reading import chain_residues, read_structure

DATA = Path(__file__).parent.parent / "data" / "structures"
# Foldseek's own 3Di string of 1AKI chain A (Biotite's i3d.fasta, entry 1aki_A; SOURCES.md).
FOLDSEEK_1AKI_A = (
    "DADDLQRVLVLCVVLPPACQVHDHSLLVSQQLCQPPVRAQADWDADPQQWIQGGSNRHIQQEDAPQPRGDNGNNPVVYHSVVSSDPRCPSVVSRVSVVCVPPVH"
    "VVVRVSSVVPPPPDPSVVSCPPHDD"
)
AF_MODEL = DATA / "AF-Q96HM7-F1-model_v4.pdb"


def test_letters_equal_foldseeks_for_a_real_structure():
    parsed = read_structure(DATA / "1aki.cif")
    letters, _ = three_di.chain_letters(parsed, "A")
    assert letters == FOLDSEEK_1AKI_A
    sequence = chain_residues(parsed, "A").sequence
    tokens = three_di.structure_tokens(sequence, parsed, "A")
    assert tokens.letters == FOLDSEEK_1AKI_A.lower() and tokens.structure_aware == 129
    assert tokens.describe() == "1aki.cif chain A: 129 of 129 residues structure-aware"


def test_record_residues_the_structure_lacks_get_hash():
    """The chain aligned to a record with residues before and inside it that the chain lacks."""
    parsed = read_structure(DATA / "1aki.cif")
    sequence = chain_residues(parsed, "A").sequence
    record = "MRSLLILVLCFLPLAALG" + sequence[:60] + sequence[61:]  # lysozyme's signal peptide, residue 61 deleted
    tokens = three_di.structure_tokens(record, parsed, "A")
    assert tokens.letters[:18] == "#" * 18
    assert tokens.letters[18:] == (FOLDSEEK_1AKI_A[:60] + FOLDSEEK_1AKI_A[61:]).lower()
    assert tokens.structure_aware == 128


def plddt_by_residue(path: Path) -> list[float]:
    """Each residue's mean B-factor, read from the PDB columns directly (not through Biopython)."""
    values: dict[tuple[str, str], list[float]] = {}
    for line in path.read_text().splitlines():
        if line.startswith("ATOM"):
            values.setdefault((line[21], line[22:27]), []).append(float(line[60:66]))
    return [float(np.mean(v)) for v in values.values()]


def test_predicted_structure_masks_low_plddt():
    text = AF_MODEL.read_text()
    assert three_di.is_predicted(text)
    assert not three_di.is_predicted((Path(__file__).parent.parent / "data" / "structures" / "1aki.cif").read_text())
    parsed = read_structure(AF_MODEL)
    sequence = chain_residues(parsed, "A").sequence
    letters, _ = three_di.chain_letters(parsed, "A")
    plddt = plddt_by_residue(AF_MODEL)
    assert len(plddt) == len(sequence) == 432
    tokens = three_di.structure_tokens(sequence, parsed, "A", predicted=True)
    expected = "".join("#" if p < 70 else s.lower() for p, s in zip(plddt, letters))
    assert tokens.letters == expected
    assert tokens.low_confidence == sum(p < 70 for p in plddt) == 189
    assert tokens.describe() == "AF-Q96HM7-F1-model_v4.pdb chain A: 243 of 432 residues structure-aware; " \
                                "189 masked for pLDDT < 70"
    unmasked = three_di.structure_tokens(sequence, parsed, "A", predicted=False)
    assert unmasked.letters == letters.lower() and unmasked.low_confidence == 0
    # #66 D6: which positions, not only how many, as runs in the record's numbering
    low = [i for i, p in enumerate(plddt) if p < 70]
    assert list(tokens.masked) == low and not tokens.all_masked and unmasked.masked == ()
    runs = tokens.masked_ranges().split(", ")
    named = [int(n) - 1 for run in runs for n in range(int(run.split("-")[0]), int(run.split("-")[-1]) + 1)]
    assert named == low and runs[0] == "1"  # residue 1 alone, then 173 onwards
    from flamino_core.numbering import Numbering

    shifted = [f"{int(a) + 100}-{int(b) + 100}" for a, b in [runs[1].split("-")]]
    assert tokens.masked_ranges(Numbering(101)).split(", ")[:2] == ["101", *shifted]


def test_every_residue_masked_is_said_to_be_sequence_only():
    """A fold unsure everywhere (the untrained test fold: pLDDT 49-57) masks every residue: the
    tokens say so, so the pages can warn that the scores are then the sequence's alone."""
    import io

    from Bio.PDB import PDBIO

    parsed = read_structure(AF_MODEL)
    for atom in parsed.model(0).get_atoms():
        atom.set_bfactor(55.0)
    out = io.StringIO()
    writer = PDBIO()
    writer.set_structure(parsed.model(0))
    writer.save(out)
    from flamino_core.structure import parse_structure_bytes

    unsure = parse_structure_bytes(out.getvalue().encode(), "unsure.pdb")
    sequence = chain_residues(parsed, "A").sequence
    tokens = three_di.structure_tokens(sequence, unsure, "A", predicted=True)
    assert tokens.all_masked and tokens.masked_ranges() == "1-432" and set(tokens.letters) == {"#"}


def test_without_a_structure_every_residue_is_hash():
    tokens = three_di.no_structure("MKV")
    assert tokens.letters == "###" and tokens.structure_aware == 0
    assert tokens.describe() == "no structure: all 3 residues '#' (sequence only)"


def test_a_file_is_read_as_predicted_from_its_text_gzipped_or_not(tmp_path):
    """``read_structure_tokens`` (what ``--structure`` reads): the AlphaFold DB file is told
    predicted by its text and masked; gzipped the same; an experimental file is not masked; the
    header alone (the app's structures) tells the same for this PDB file."""
    import gzip

    sequence = chain_residues(read_structure(AF_MODEL), "A").sequence
    plain = three_di.read_structure_tokens(sequence, AF_MODEL)
    assert plain.predicted and plain.low_confidence == 189 and plain.chain_id == "A"
    packed = tmp_path / "AF-Q96HM7-F1-model_v4.pdb.gz"
    packed.write_bytes(gzip.compress(AF_MODEL.read_bytes()))
    assert three_di.read_structure_tokens(sequence, packed).letters == plain.letters
    assert three_di.is_predicted_structure(read_structure(AF_MODEL))
    lysozyme = chain_residues(read_structure(DATA / "1aki.cif"), "A").sequence
    assert not three_di.read_structure_tokens(lysozyme, DATA / "1aki.cif").predicted


# Foldseek's own 3Di string of 1GBT chain A (../shared/structures/1GBT.cif), made here with Foldseek
# built from source (steineggerlab/foldseek d5b1d3d; commands in tests/data/structures/SOURCES.md).
FOLDSEEK_1GBT_A = (
    "DAQFDFDDFLPQQQKKFKDQPHGFAIWGDAFQWKTKFFLVSDDPRIWIWGRDFFVVDCPDPIDTFGFPDKAHPPVQDVVQRASGMMMTTTPGTDDDDSSHDGFHFDPD"
    "ADDFFFKWKQKFQAAHDLPDGDGDRGMTIDIKTWHDPVLQCVLPPPRDDPQKTFIHALVFRGAQAGGSHGDATATPGHGQWGQDAWPRHRDHSITTMTGGRVVCVVVVV"
    "VVVVVD"
)


def test_letters_equal_foldseeks_for_a_shared_structure(shared_fasta):
    """The issue's line: a structure in ../shared/structures, against Foldseek's own letters."""
    path = shared_fasta.parent / "structures" / "1GBT.cif"
    parsed = read_structure(path)
    letters, _ = three_di.chain_letters(parsed, "A")
    assert letters == FOLDSEEK_1GBT_A
    tokens = three_di.structure_tokens(chain_residues(parsed, "A").sequence, parsed, "A")
    assert tokens.letters == FOLDSEEK_1GBT_A.lower() and tokens.structure_aware == len(FOLDSEEK_1GBT_A)

"""Issue 23, items 5, 6 and 9a: residue naming in real structures from Biopython's own test corpus
(tests/peer_corpus.py). References are read from the files' raw tables (``MMCIF2Dict``, fixed
PDB columns), not through ``flamino_core``."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
from Bio.PDB.MMCIF2Dict import MMCIF2Dict

from flamino_core.alphabet import AA_TO_IDX
from flamino_core.cli import main
from flamino_core.structure.align import align_chain
from flamino_core.structure.files.reading import parse_structure_bytes, read_structure, chain_residues

ONE_LETTER = {"PRO": "P", "SER": "S", "ARG": "R", "GLN": "Q", "GLU": "E"}


def test_microheterogeneity_reads_the_type_with_the_highest_occupancy(peer_tests):
    """3JQH: residue 1 PRO 0.83 / SER 0.17, residue 15 ARG 0.50 / GLN 0.33 / GLU 0.17."""
    path = peer_tests / "PDB/3JQH.cif"
    table = MMCIF2Dict(str(path))
    occupancy = defaultdict(lambda: defaultdict(list))  # residue number -> type -> atom occupancies
    for number, name, occ, chain in zip(table["_atom_site.auth_seq_id"], table["_atom_site.label_comp_id"],
                                        table["_atom_site.occupancy"], table["_atom_site.auth_asym_id"]):  # fmt: skip
        if chain == "A":
            occupancy[number][name].append(float(occ))
    mixed = {number: max(types, key=lambda t: np.mean(types[t])) for number, types in occupancy.items() if len(types) > 1}
    assert mixed == {"1": "PRO", "15": "ARG"}
    chain = chain_residues(read_structure(path), "A")
    for number, name in mixed.items():
        index = chain.labels.index(number)
        assert chain.names[index] == name and chain.sequence[index] == ONE_LETTER[name]
    (note,) = [n for n in chain.notes if "microheterogeneity" in n]
    assert "1 (PRO 0.83 / SER 0.17): PRO" in note and "15 (ARG 0.50 / GLN 0.33 / GLU 0.17): ARG" in note


def test_every_residue_read_has_an_esm2_token(peer_tests):
    """Each letter the reader gives, on every protein chain of the corpus, is one the model takes."""
    read = 0
    for path in sorted((peer_tests / "PDB").glob("*")):
        if path.suffix not in (".pdb", ".cif"):
            continue
        try:
            parsed = read_structure(path)
        except ValueError:
            continue  # files the reader refuses (test_peer_corpus lists them)
        for summary in parsed.chains():
            if summary.is_protein:
                assert set(chain_residues(parsed, summary.chain_id).sequence) <= set(AA_TO_IDX), path.name
                read += 1
    assert read > 20


def xle_variant(peer_tests) -> bytes:
    """1A8O.pdb with its first LEU renamed XLE (leucine or isoleucine, IUPAC J): no file of the corpus
    has that name, so one real file is changed in the three residue-name columns of its lines."""
    lines = (peer_tests / "PDB/1A8O.pdb").read_text().splitlines(keepends=True)
    first = next(line[22:27] for line in lines if line.startswith("ATOM") and line[17:20] == "LEU")
    return "".join(line[:17] + "XLE" + line[20:] if line.startswith("ATOM") and line[22:27] == first else line
                   for line in lines).encode()  # fmt: skip


def test_a_name_read_as_j_becomes_x_with_a_note(peer_tests):
    parsed = parse_structure_bytes(xle_variant(peer_tests), "1A8O_XLE.pdb")
    chain = chain_residues(parsed, "A")
    index = chain.names.index("XLE")
    assert chain.sequence[index] == "X" and "J" not in chain.sequence
    assert any("XLE (J)" in note and "read as X" in note for note in chain.notes)
    plain = chain_residues(read_structure(peer_tests / "PDB/1A8O.pdb"), "A")
    assert plain.sequence[:index] + "X" + plain.sequence[index + 1:] == chain.sequence
    assert align_chain(plain.sequence, chain).n_identical == len(plain) - 1  # the aligner takes X


def test_flamino_contacts_runs_on_a_structure_with_xle(peer_tests, tmp_path, capsys):
    structure = tmp_path / "1A8O_XLE.pdb"
    structure.write_bytes(xle_variant(peer_tests))
    sequence = chain_residues(read_structure(peer_tests / "PDB/1A8O.pdb"), "A").sequence
    fasta = tmp_path / "capsid.fa"
    fasta.write_text(f">1A8O_A\n{sequence}\n")
    code = main(["contacts", str(fasta), "--structure", str(structure), "-m", "random:tiny", "-o", str(tmp_path / "p.csv")])
    assert code == 0, capsys.readouterr().err


def test_an_amino_acid_without_c_alpha_is_not_a_ligand(peer_tests):
    """2XHE chain A ends with an ALA that has no CA atom; 1SSU_mod's chains are one such ASP each."""
    summary = read_structure(peer_tests / "PDB/2XHE.pdb").chains()[0]
    assert "ALA" not in summary.others and summary.no_ca == {"ALA": 1}
    assert summary.describe() == "chain A: 566 amino acids; left out, without a C-alpha atom: ALA; also water x46"
    ssu = read_structure(peer_tests / "PDB/1SSU_mod.pdb").chains()
    assert [s.describe() for s in ssu] == [f"chain {c}: no amino acids; left out, without a C-alpha atom: ASP" for c in "AB"]

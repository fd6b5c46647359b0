"""Complex structure files (``structure/complex_files.py``): the mmCIF and PDB of a predicted complex
read back by Biopython (chains, residues, atoms, coordinates and per-atom pLDDT x 100 in the
B-factors), user text never reaching the mmCIF unescaped, the confidences JSON. The coordinates
and pLDDT here are random numbers standing in for a fold (the folds themselves are in
tests/integration/test_esmfold2_cli.py); what is checked is that the files say what the arrays say."""

from __future__ import annotations

import dataclasses
import io
import json

import numpy as np
import pytest
from Bio.PDB import MMCIFParser, PDBParser
from Bio.PDB.MMCIF2Dict import MMCIF2Dict

from flamino_core.model.esmfold2.features import prepare_features
from flamino_core.model.esmfold2.folded import FoldedComplex
from flamino_core.structure import complex_files as cf


def _folded(sequences=("MKVLAW", "GGHK", "MKVLAW"), names=("rec1", "rec2", "rec1"), name="cx") -> FoldedComplex:
    features = prepare_features(list(sequences))
    atoms = int(features["atom_attention_mask"].sum())
    rng = np.random.default_rng(1)
    tokens = sum(map(len, sequences))
    return FoldedComplex(name, tuple("ABCDEFGH"[:len(sequences)]), names, tuple(sequences),
                         (rng.standard_normal((atoms, 3)) * 20).astype(np.float32), rng.uniform(size=atoms),
                         rng.uniform(size=tokens), rng.uniform(0, 30, (tokens, tokens)), 0.41, 0.27,
                         rng.uniform(size=(len(sequences),) * 2), 0.5)


def _check_structure(structure, folded: FoldedComplex) -> None:
    chains = list(structure[0])
    assert [chain.id for chain in chains] == list(folded.chain_ids)
    for chain, sequence in zip(chains, folded.sequences):
        residues = list(chain)
        assert [r.id[1] for r in residues] == list(range(1, len(sequence) + 1))
    atoms = list(structure.get_atoms())
    assert len(atoms) == len(folded.positions)
    assert [a.get_id() for a in atoms] == [atom for *_, atom in folded.atoms()]
    np.testing.assert_allclose([a.coord for a in atoms], folded.positions, atol=5e-4)  # 3 decimals
    np.testing.assert_allclose([a.bfactor for a in atoms], 100 * folded.plddt_atoms, atol=5e-3)  # 2 decimals
    names = [r.get_resname() for r in structure.get_residues()]
    assert names == [three for _, _, three in folded.residues()]


def test_mmcif_reads_back_with_chains_residues_and_bfactors():
    folded = _folded()
    text = cf.to_mmcif(folded, "ESMFold2 prediction of cx")
    _check_structure(MMCIFParser(QUIET=True).get_structure("cx", io.StringIO(text)), folded)
    cif = MMCIF2Dict(io.StringIO(text))
    assert cif["_struct_asym.entity_id"] == ["1", "2", "1"]  # the homologous copy shares chain A's entity
    assert cif["_entity_poly.pdbx_strand_id"] == ["A,C", "B"]


def test_pdb_reads_back_the_same():
    folded = _folded()
    text = cf.to_pdb(folded, "ESMFold2 prediction of cx")
    _check_structure(PDBParser(QUIET=True).get_structure("cx", io.StringIO(text)), folded)
    assert text.count("\nTER ") == 3


@pytest.mark.parametrize("hostile", ["x\ndata_evil\nloop_", "a 'b' \"c\"", "_atom_site.id", "#", "; ;\n;", ""])
def test_user_text_never_reaches_the_mmcif_unescaped(hostile):
    folded = _folded(names=(hostile, "ok", hostile), name=hostile)
    text = cf.to_mmcif(folded, hostile)
    assert text.startswith(f"data_{cf.block_name(hostile)}\n")
    assert sum(line.startswith(("data_", "loop_", "_atom_site.id")) for line in text.splitlines()) == 6  # data_, 4 loops, 1 id
    cif = MMCIF2Dict(io.StringIO(text))
    assert len(cif["_atom_site.id"]) == len(folded.positions)
    clean = " ".join(hostile.split("\n")) if hostile else "?"
    assert cif["_struct.title"] == [clean]
    _check_structure(MMCIFParser(QUIET=True).get_structure("x", io.StringIO(text)), folded)


def test_block_name_keeps_only_safe_characters():
    assert cf.block_name("sp|P69905|HBA_HUMAN x") == "sp_P69905_HBA_HUMAN_x"
    assert cf.block_name("") == "prediction"


def test_pdb_refused_where_the_complex_does_not_fit():
    folded = _folded()
    big = dataclasses.replace(folded, positions=np.zeros((100_000, 3)), plddt_atoms=np.zeros(100_000))
    assert "PDB numbers 99,999 at most" in cf.pdb_problem(big)
    with pytest.raises(ValueError, match="99,999"):
        cf.to_pdb(big, "t")
    assert cf.pdb_problem(folded) is None


def test_confidences_json():
    folded = _folded()
    data = json.loads(cf.confidences_json(folded, "random:esmfold2-tiny (not biology)"))
    assert data["model"] == "random:esmfold2-tiny (not biology)"
    assert data["chain_ids"] == ["A", "B", "C"] and len(data["pae"]) == folded.length
    assert data["ptm"] == 0.41 and data["iptm"] == 0.27
    np.testing.assert_allclose(data["plddt"], 100 * folded.plddt, atol=5e-3)

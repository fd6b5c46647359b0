"""ESMFold2's featurisation (``model/esmfold2/features.py``) against transformers'
``protein_utils.prepare_protein_features`` (5.25) on real sequences, array by array and exactly
(the features are integers and copied float32 tables: nothing may differ by a single bit).
A complex has no featuriser in the reference: each chain's block is compared with the reference's
features of that chain alone (offset by the atoms and tokens before it), and the chain identities
with the conventions the reference's relative-position encoding reads."""

from __future__ import annotations

import numpy as np
import pytest

from flamino_core.inputs.fasta import read_fasta
from flamino_core.model.esmfold2 import features as ft
from tests.conftest import SHARED_FASTA

protein_utils = pytest.importorskip("transformers.models.esmfold2.protein_utils")


def _record(path: str, index: int = 0) -> str:
    return read_fasta(SHARED_FASTA / path).records[index].sequence


def _reference(sequence: str) -> dict[str, np.ndarray]:
    return {key: value.numpy() for key, value in protein_utils.prepare_protein_features(sequence).items()}


def _assert_same(ours: dict, theirs: dict) -> None:
    assert sorted(ours) == sorted(theirs)
    for key in theirs:
        assert ours[key].dtype == theirs[key].dtype, key
        assert ours[key].shape == theirs[key].shape, key
        np.testing.assert_array_equal(ours[key], theirs[key], err_msg=key)


@pytest.mark.parametrize("sequence", [
    pytest.param("HBB", id="HBB_HUMAN"),
    pytest.param("MKXGWBUZOCHPRY", id="every-special-letter"),  # X, B, U, Z, O: unknown, as the reference
    pytest.param("G", id="one-glycine"),
])
def test_one_chain_is_the_references_features(sequence):
    sequence = _record("HBB_HUMAN.fa") if sequence == "HBB" else sequence
    _assert_same(ft.prepare_features([sequence]), _reference(sequence))


def test_tables_are_the_references():
    from flamino_core.model.esmfold2 import residues

    assert residues.HEAVY_ATOMS == protein_utils.PROTEIN_HEAVY_ATOMS
    assert residues.REF_POS == protein_utils.PROTEIN_REF_POS  # floats compared exactly
    assert residues.ESM_VOCAB == protein_utils.ESM_PROTEIN_VOCAB
    assert residues.RES_TYPE == protein_utils.PROTEIN_RESIDUE_TO_RES_TYPE
    assert residues.CHARGED_ATOMS == protein_utils.PROTEIN_CHARGED_ATOMS


def test_complex_is_each_chain_in_turn():
    # Two real, different chains (UniProt), then a copy of the first: a heterotrimer A2B.
    first, second = _record("uniprot_two.fa", 0), _record("uniprot_two.fa", 1)
    ours = {key: value[0] for key, value in ft.prepare_features([first, second, first]).items()}
    tokens, atoms = 0, 0
    for number, sequence in enumerate([first, second, first]):
        ref = {key: value[0] for key, value in _reference(sequence).items()}
        n, a = len(sequence), int(ref["atom_attention_mask"].sum())
        block, atom_block = slice(tokens, tokens + n), slice(atoms, atoms + a)
        for key in ("res_type", "input_ids", "residue_index", "mol_type", "deletion_mean"):
            np.testing.assert_array_equal(ours[key][block], ref[key], err_msg=key)
        np.testing.assert_array_equal(ours["token_index"][block], ref["token_index"] + tokens)
        np.testing.assert_array_equal(ours["distogram_atom_idx"][block], ref["distogram_atom_idx"] + atoms)
        for key in ("ref_pos", "ref_element", "ref_charge", "ref_atom_name_chars"):
            np.testing.assert_array_equal(ours[key][atom_block], ref[key][:a], err_msg=key)
        for key in ("atom_to_token", "ref_space_uid"):
            np.testing.assert_array_equal(ours[key][atom_block], ref[key][:a] + tokens, err_msg=key)
        np.testing.assert_array_equal(ours["asym_id"][block], number)
        tokens, atoms = tokens + n, atoms + a
    # Chain identities: the copy of chain A shares its entity and is its second symmetry copy.
    lengths = [len(first), len(second), len(first)]
    np.testing.assert_array_equal(ours["entity_id"], np.repeat([1, 2, 1], lengths))
    np.testing.assert_array_equal(ours["sym_id"], np.repeat([0, 0, 1], lengths))
    # Atoms padded together to a multiple of 32; padding masked, its token 0 as the reference's.
    assert ours["ref_pos"].shape[0] == -(-atoms // 32) * 32 and ours["atom_attention_mask"].sum() == atoms
    assert not ours["atom_to_token"][atoms:].any()
    assert ours["token_bonds"].shape == (tokens, tokens, 1) and not ours["token_bonds"].any()
    assert ours["msa"].shape == (1, tokens) and (ours["msa"][0] == ours["res_type"]).all()


def test_atom_names_decode_what_the_reference_writes():
    sequence = "MKWG"
    names = ft.atom_names(ft.prepare_features([sequence]))
    expected = [name for letter in sequence for name in protein_utils.PROTEIN_HEAVY_ATOMS[protein_utils.PROTEIN_1TO3[letter]]]
    assert names == expected


@pytest.mark.parametrize("chains, message", [
    ([], "no chain"),
    (["MKV", ""], "chain B: an empty chain"),
    (["MK-V"], "position 3: '-'"),
    (["MKV*"], "position 4: '*'"),
    ([ft.Chain("ACGU", "rna")], "RNA chains are not supported"),
    ([ft.Chain("ACGT", "dna")], "DNA chains are not supported"),
    (["MKV", ft.Chain("ATP", "ligand")], "chain B: ligands are not supported"),
])
def test_refusals_name_the_chain_and_position(chains, message):
    with pytest.raises(ValueError, match=message.replace("*", r"\*")):
        ft.prepare_features(chains, name="rec1")


def test_lowercase_reads_as_uppercase():
    np.testing.assert_array_equal(ft.prepare_features(["mkv"])["res_type"], ft.prepare_features(["MKV"])["res_type"])

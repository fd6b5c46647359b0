"""ESMFold against transformers' ``EsmForProteinFolding`` on the same random weights, written by
the reference's own ``save_pretrained`` (tests/esmfold_checkpoints.py) and loaded as flamino
loads them (``weights.esmfold.load_esmfold``), on a real protein cut short, in fp32, with the
reference's default recycling (``max_recycles`` = 3 passes here).

Tolerances. Measured on this machine (folded padded to 64 residues, as ``fold_sequence`` does;
unpadded the same to within 1e-5): atom positions agree to 5e-5 Angstrom (coordinates up to
26 Angstrom: float32 rounding through 2 stem layers, 2 trunk blocks x 3 passes and 3
structure-module iterations), pLDDT to 2e-7, PAE to 7e-5 Angstrom (its bins are 0.5 Angstrom
wide), pTM to 1e-7. The bounds (1e-3 Angstrom, 1e-3, pTM 1e-4) are 15-20x these: room for
another summation order, far below what a modelling error gives (a wrong sign, axis or constant
moves atoms by Angstroms).

Recycling feeds each pass the previous structure's pseudo-beta distances binned at fixed edges:
a distance closer to an edge than the float noise could fall into the other bin, and the two
models would then follow different paths (an honest disagreement, not a bug). The test does not
pick a seed or sequence that hides this: it checks that every pass was fed the same bins as the
reference's (its own ``EsmFoldingTrunk.distogram`` of its intermediate structures), and if one
ever flips it fails saying so, with the nearest distance-to-edge margin, rather than as a
position error. For this checkpoint and protein the nearest recycled distance lies 3.3e-4
Angstrom from an edge (1,600 pairs x 14 edges x 2 recycles: some distance comes that close),
about 7x the positional error: no flip.
"""

from __future__ import annotations

import io

import numpy as np
import pytest
from Bio.Data.IUPACData import protein_letters_3to1
import torch
from flax import nnx

from conftest import checkpoint_seed
from esmfold_checkpoints import V1_WIDTHS, hf_fold, make_hf_esmfold, write_hf_esmfold
from flamino_core.model.esmfold.config import FoldConfig
from flamino_core.model.esmfold.pdb import to_pdb
from flamino_core.engine.fold import fold_arrays, fold_sequence
from flamino_core.engine import hardware
from flamino_core.model.esmfold.residue_tables import atom_types
from flamino_core.weights.convert import CheckpointMismatchError
from flamino_core.weights.esmfold import load_esmfold

POSITION_BOUND = 1e-3  # Angstrom
CONFIDENCE_BOUND = 1e-3  # pLDDT in [0, 1]; PAE in Angstrom
PTM_BOUND = 1e-4
LENGTH = 40  # residues: a real protein's first 40 (the trunk is L^2; this keeps the test ~30 s)
EDGES = np.linspace(3.375, 21.375, 14)
# The small fold runs its pair rows in chunks of 24 (of 64 padded: a ragged last chunk), so the
# chunked trunk is what is compared; the v1-widths fold runs them all at once.
CHUNK = 24
# The matmul precision the app folds with (``structure.folding.fold``): None on a CPU (its default
# is float32), 'highest' on a TPU/GPU, whose default is one bf16 pass; tests/parity/test_accelerator_parity.py
# collects these tests again there.
EXACT = hardware.exact_matmul_precision(hardware.detect(), "fp32")


@pytest.fixture(scope="module")
def protein(shared_fasta) -> str:
    from flamino_core.inputs.fasta import read_fasta

    record = next(r for r in read_fasta(shared_fasta / "proteingym_targets.fa").records if r.id.startswith("A0A140D2T1"))
    return record.sequence[:LENGTH]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    hf = make_hf_esmfold(checkpoint_seed("esmfold", "small"))
    return hf, write_hf_esmfold(hf, tmp_path_factory.mktemp("esmfold") / "esmfold-small")


def reference_recycle_bins(hf, sequence: str) -> tuple[np.ndarray, float]:
    """The bins the reference feeds each pass (0 before the first; then its trunk's own
    ``distogram`` of the previous pass's structure: ``num_recycles=r`` runs r + 1 passes), and how
    close (Angstrom) any of those pseudo-beta distances comes to a bin edge."""
    from transformers.models.esm.modeling_esmfold import EsmFoldingTrunk
    from transformers.models.esm.openfold_utils import residue_constants

    aatype = torch.tensor([[residue_constants.restype_order_with_x.get(a, 20) for a in sequence]])
    bins, margin = [np.zeros((len(sequence), len(sequence)), np.int64)], np.inf
    for recycles in range(hf.config.esmfold_config.trunk.max_recycles - 1):
        with torch.no_grad():
            backbone = hf(aatype, attention_mask=torch.ones_like(aatype), num_recycles=recycles)["positions"][-1][:, :, :3]
            bins.append(EsmFoldingTrunk.distogram(backbone, 3.375, 21.375, 15)[0].numpy())
            n, ca, c = (backbone[0, :, i].double() for i in range(3))
            cb = -0.58273431 * torch.cross(ca - n, c - ca, dim=-1) + 0.56802827 * (ca - n) - 0.54067466 * (c - ca) + ca
        distances = torch.cdist(cb, cb).numpy()
        margin = min(margin, float(np.abs(distances[..., None] - EDGES).min()))
    return np.stack(bins), margin


@pytest.fixture(scope="module")
def folded(checkpoint, protein):
    """(the reference's output, as NumPy too, our model and its FoldedProtein) for ``protein``."""
    hf, folder = checkpoint
    model = load_esmfold(folder)
    hf_out, ref = hf_fold(hf, protein)
    return hf_out, ref, model, fold_sequence(model, protein, chunk_size=CHUNK, matmul_precision=EXACT)


def compare_fold(hf, model, ref: dict, ours, protein: str, chunk_size: int | None = None) -> None:
    """Every recycled bin the same as the reference's, then positions, pLDDT, PAE and pTM within bounds."""
    ref_bins, margin = reference_recycle_bins(hf, protein)
    our_bins = fold_arrays(model, protein, chunk_size=chunk_size, matmul_precision=EXACT)["recycle_bins"][:, 0]
    flipped = np.argwhere(our_bins != ref_bins)
    assert flipped.size == 0, (f"recycled distance bins differ at (pass, i, j) {flipped[:5].tolist()}; the nearest "
                               f"reference distance lies {margin:.1e} A from a bin edge: a float-noise flip, not a bug")
    assert len(np.unique(ref_bins[1:])) > 3, "the recycled distances fall in too few bins to test recycling"
    exists = ref["atom37_atom_exists"][0] > 0
    assert np.array_equal(ours.atom37_exists > 0, exists)
    assert np.abs(ref["atom37"][0]).max() > 5, "the structure collapsed to a point: the comparison would be empty"
    position_error = np.abs(ours.atom37 - ref["atom37"][0])[exists].max()
    assert position_error < POSITION_BOUND, f"atom positions differ by {position_error:.2e} A"
    assert np.abs(ours.plddt - ref["plddt"][0]).max() < CONFIDENCE_BOUND
    assert np.abs(ours.pae - ref["predicted_aligned_error"][0]).max() < CONFIDENCE_BOUND
    assert abs(ours.ptm - float(ref["ptm"])) < PTM_BOUND
    assert ours.pae.shape == (len(protein),) * 2 and 0 < ours.ptm < 1


def test_fold_with_recycling_matches_the_reference(checkpoint, protein, folded):
    hf, _ = checkpoint
    _, ref, model, ours = folded
    assert model.config.trunk.max_recycles == 3
    compare_fold(hf, model, ref, ours, protein, CHUNK)


@pytest.mark.slow
def test_esmfold_v1_widths_at_reduced_depth_match_the_reference(protein, tmp_path):
    """esmfold_v1's widths and head counts (tests/esmfold_checkpoints.py V1_WIDTHS), one stem layer
    and one trunk block, 4 passes: ~45 s here (an 80M-parameter stem layer drawn, saved, run by
    both). Measured: positions 3e-4 A (coordinates to ~76 A), PAE 3e-4, pLDDT 3e-7, pTM 2e-7;
    all 15 recycling bins in use."""
    hf = make_hf_esmfold(checkpoint_seed("esmfold", "v1-widths"), V1_WIDTHS)
    model = load_esmfold(write_hf_esmfold(hf, tmp_path / "esmfold-v1-widths"))
    _, ref = hf_fold(hf, protein)
    compare_fold(hf, model, ref, fold_sequence(model, protein, matmul_precision=EXACT), protein)


def test_chunked_triangle_attention_matches_the_reference():
    """The reference's TriangleAttention with its chunk_size (rows in chunks of 3 over 7 rows: a
    ragged last chunk) on a padded pair state, against ours chunked the same way."""
    from transformers.models.esm.modeling_esmfold import EsmFoldTriangleAttention

    from flamino_core.model.esmfold.pair import TriangleAttention
    from reference_checkpoints import randomize_

    for starting in (True, False):
        torch.manual_seed(1)
        ref = EsmFoldTriangleAttention(16, 4, 4, starting=starting).eval()
        randomize_(ref, checkpoint_seed("esmfold", "triangle"))
        ours = TriangleAttention(16, 4, 4, starting, nnx.Rngs(0))
        for name, value in ref.state_dict().items():
            *module, leaf = name.split(".")
            target = ours
            for part in module:
                target = getattr(target, part)
            attribute = {"weight": "kernel" if "linear" in module[-1] else "scale"}.get(leaf, leaf)
            array = value.numpy().T if attribute == "kernel" else value.numpy()
            getattr(target, attribute)[...] = array
        z = np.random.default_rng(0).normal(size=(1, 7, 7, 16)).astype(np.float32)
        mask = np.ones((1, 7, 7), np.float32)
        mask[:, 5:, :] = mask[:, :, 5:] = 0  # two padding residues
        with torch.no_grad():
            expected = ref(torch.from_numpy(z), mask=torch.from_numpy(mask), chunk_size=3).numpy()
        got = np.asarray(ours(z, mask, chunk_size=3))
        assert np.abs(got - expected).max() < 1e-4, f"starting={starting}"


def test_a_checkpoint_with_missing_or_foreign_keys_is_refused_with_all_of_them(checkpoint, tmp_path):
    from safetensors.numpy import load_file, save_file

    _, folder = checkpoint
    tensors = load_file(str(folder / "model.safetensors"))
    del tensors["trunk.blocks.1.tri_att_end.mha.linear_g.bias"], tensors["lddt_head.2.weight"]
    tensors["trunk.extra_head.weight"] = np.zeros((2, 2), np.float32)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text((folder / "config.json").read_text())
    save_file(tensors, str(broken / "model.safetensors"))
    with pytest.raises(CheckpointMismatchError) as refused:
        load_esmfold(broken)
    message = str(refused.value)
    # Named as the file spells them (lddt_head.2 is our lddt_head.linear_2).
    assert "missing keys (2): lddt_head.2.weight, trunk.blocks.1.tri_att_end.mha.linear_g.bias" in message
    assert "unexpected keys (1): trunk.extra_head.weight" in message


def test_a_checkpoint_of_another_shape_is_refused_naming_what_differs(checkpoint):
    _, folder = checkpoint
    with pytest.raises(ValueError) as refused:
        load_esmfold(folder, expect=FoldConfig.esmfold_v1())
    message = str(refused.value)
    assert "trunk.num_blocks: the checkpoint has 2, esmfold_v1 48" in message
    assert "stem.embed_dim: the checkpoint has 32, esmfold_v1 2560" in message


def _atoms(pdb_text: str) -> list[str]:
    return [line for line in pdb_text.splitlines() if line.startswith(("ATOM", "TER", "END"))]


def test_pdb_text_is_the_references_with_plddt_on_the_0_100_scale(folded):
    """Line by line against transformers' output_to_pdb: the same records, atoms, residues and
    numbering; coordinates equal to the 0.001 A they are written with (plus the 5e-5 model
    difference); B-factors ours / 100 = the reference's pLDDT, which it rounds to 0.01."""
    from transformers import EsmForProteinFolding

    hf_out, _, _, ours = folded
    theirs = _atoms(EsmForProteinFolding.output_to_pdb(hf_out)[0])
    mine = _atoms(to_pdb(ours, remark="test"))
    assert len(mine) == len(theirs) > 100
    for a, b in zip(mine, theirs):
        assert a[:30] == b[:30] and a[66:] == b[66:], (a, b)  # record, serial, atom, residue, chain, number; element
        if a.startswith("ATOM"):
            assert all(abs(float(a[c:c + 8]) - float(b[c:c + 8])) <= 0.0015 for c in (30, 38, 46)), (a, b)
            assert a[54:60] == b[54:60]  # occupancy
            assert abs(float(a[60:66]) / 100 - float(b[60:66])) <= 0.0051, (a, b)


def test_biopython_reads_the_pdb_back_with_the_same_coordinates_and_b_factors(folded):
    from Bio.PDB import PDBParser

    ours = folded[3]
    structure = PDBParser(QUIET=True).get_structure("fold", io.StringIO(to_pdb(ours)))
    residues = list(structure[0]["A"])
    assert "".join(protein_letters_3to1[r.get_resname().capitalize()] for r in residues) == ours.sequence
    for i, residue in enumerate(residues):
        for atom in residue:
            slot = atom_types.index(atom.get_id())
            assert np.abs(atom.coord - ours.atom37[i, slot]).max() <= 5e-4 + 1e-6
            assert abs(atom.bfactor - 100 * ours.plddt[i, slot]) <= 5e-3 + 1e-6
        assert len(residue) == int(ours.atom37_exists[i].sum())


def test_residue_tables_are_openfolds():
    """The copied tables and the arrays derived from them against transformers' vendored OpenFold
    (its residue_constants and make_atom14_masks), which flamino never imports at run time."""
    from transformers.models.esm.openfold_utils import data_transforms
    from transformers.models.esm.openfold_utils import residue_constants as theirs

    from flamino_core.model.esmfold import residue_constants as ours
    from flamino_core.model.esmfold import residue_tables

    for name in ("chi_angles_atoms", "chi_angles_mask", "rigid_group_atom_positions", "atom_types",
                 "restype_name_to_atom14_names", "restypes", "restype_1to3"):
        assert getattr(residue_tables, name) == getattr(theirs, name), name
    np.testing.assert_array_equal(ours.DEFAULT_FRAMES, theirs.restype_rigid_group_default_frame)
    np.testing.assert_array_equal(ours.ATOM14_GROUP, theirs.restype_atom14_to_rigid_group)
    np.testing.assert_array_equal(ours.ATOM14_MASK, theirs.restype_atom14_mask)
    np.testing.assert_array_equal(ours.ATOM14_POSITIONS, theirs.restype_atom14_rigid_group_positions)
    masks = data_transforms.make_atom14_masks({"aatype": torch.arange(21)})
    np.testing.assert_array_equal(ours.ATOM37_TO_ATOM14, masks["residx_atom37_to_atom14"].numpy())
    np.testing.assert_array_equal(ours.ATOM37_MASK, masks["atom37_atom_exists"].numpy())
    assert list(ours.aatype("ARXBZ")) == [theirs.restype_order_with_x.get(a, 20) for a in "ARXBZ"]

"""ESMFold2's confidence head against transformers' ``EsmFold2ConfidenceHead`` on the same weights
(a ``save_pretrained`` folder read by ``weights/esmfold2.py``), the same trunk outputs (the
reference's own, so that only the head is compared) and the same sampled coordinates.

Bound: 1e-3 on the reported pLDDT (0-1), PAE/PDE (Angstrom), pTM, ipTM and the chain-pair ipTM
(the issue's bar), and on the logits they come from (of order ten): the two sides differ by
summation order, measured below 1e-5. A complex of three chains (a homodimer and another chain)
with two samples, coordinates laid out as a random walk so that interfaces (< 8 Angstrom) exist.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from flax import nnx

from esmfold2_checkpoints import (
    REAL_WIDTHS, complex_features, make_hf_esmfold2, reference_lm_states, reference_noise, reference_trunk, write_hf_esmfold2,
)
from flamino_core.model.esmfold2.atoms import AtomInputs
from flamino_core.model.esmfold2.confidence import intra_token_index, ptm_iptm
from flamino_core.model.esmfold2.model import TrunkOutput
from flamino_core.weights.esmfold2 import load_esmfold2

BOUND = 1e-3
SAMPLES = 2
COMPLEX = ["MKTAYIAKQ", "GSHMLE", "MKTAYIAKQ"]
REPORTED = ("plddt", "plddt_per_atom", "plddt_ca", "complex_plddt", "complex_iplddt", "pae", "pde", "ptm", "iptm",
            "pair_chains_iptm")
LOGITS = ("plddt_logits", "resolved_logits", "pae_logits", "pde_logits")


def walk_coordinates(features: dict, samples: int, seed: int = 0) -> torch.Tensor:
    """(samples, atoms, 3): each token 3.8 A from the last in a random direction, its atoms
    scattered 1 A around it; padding atoms at the origin."""
    gen = torch.Generator().manual_seed(seed)
    tokens = features["res_type"].shape[1]
    steps = torch.nn.functional.normalize(torch.randn(samples, tokens, 3, generator=gen), dim=-1) * 3.8
    centres = torch.cumsum(steps, dim=1)
    atoms = centres[:, features["atom_to_token"][0]] + torch.randn(samples, features["ref_pos"].shape[1], 3,
                                                                    generator=gen)
    return atoms * features["atom_attention_mask"][0][None, :, None]


@functools.partial(jax.jit, static_argnames=("graphdef", "samples", "chains"))
def _confidence(graphdef, state, trunk, features, coords, samples, chains):
    return nnx.merge(graphdef, state).confidence(trunk, features, coords, samples, chains)


@pytest.fixture(scope="module")
def compared(tmp_path_factory):
    return compare(tmp_path_factory)


def compare(tmp_path_factory, shape=None):
    """(the reference's confidence outputs, ours) as NumPy, for a checkpoint shape."""
    reference = make_hf_esmfold2(0, shape)
    ours = load_esmfold2(write_hf_esmfold2(reference, tmp_path_factory.mktemp("esmfold2")))
    features = complex_features(COMPLEX)
    pair, dropout = reference_noise(reference, features)
    trunk = reference_trunk(reference, features, pair, dropout, reference_lm_states(reference, features))
    coords = walk_coordinates(features, SAMPLES)
    atoms = trunk.atom_inputs
    with torch.no_grad():
        expected = reference.confidence_head(
            single_inputs=trunk.single_inputs, pair_states=trunk.pair_states, predicted_coords=coords,
            distogram_atom_idx=features["distogram_atom_idx"], attention_mask=features["attention_mask"],
            atom_to_token=atoms.atom_to_token, atom_attention_mask=atoms.atom_attention_mask,
            asym_id=features["asym_id"], mol_type=features["mol_type"],
            relative_position_encoding=trunk.relative_position_encoding,
            token_bonds_encoding=trunk.token_bonds_encoding, num_diffusion_samples=SAMPLES)
    j = lambda t: jnp.asarray(t.numpy())  # noqa: E731
    ours_trunk = TrunkOutput(j(trunk.distogram_logits), j(trunk.pair_states), j(trunk.single_inputs),
                             j(trunk.relative_position_encoding), j(trunk.token_bonds_encoding),
                             AtomInputs(*(j(getattr(atoms, f)) for f in AtomInputs._fields)))
    got = _confidence(*nnx.split(ours), ours_trunk, {k: j(v) for k, v in features.items()}, j(coords), SAMPLES,
                      len(COMPLEX))
    return {k: v.numpy() for k, v in expected.items()}, {k: np.asarray(v) for k, v in got.items()}


@pytest.mark.parametrize("name", REPORTED + LOGITS)
def test_confidence_matches_reference(compared, name):
    expected, got = compared
    assert got[name].shape == expected[name].shape
    assert np.abs(got[name] - expected[name]).max() < BOUND, np.abs(got[name] - expected[name]).max()


@pytest.mark.slow
def test_confidence_matches_reference_at_real_widths(tmp_path_factory):
    """ESMFold2's widths (384/256, 50 pLDDT bins, 64 PAE and PDE bins), one layer per stack."""
    expected, got = compare(tmp_path_factory, REAL_WIDTHS)
    for name in REPORTED + LOGITS:
        assert np.abs(got[name] - expected[name]).max() < BOUND, (name, np.abs(got[name] - expected[name]).max())


def test_the_complex_has_interfaces_and_distinct_chain_pairs(compared):
    """Guards the comparison's reach: ipTM and interface pLDDT computed on real interfaces, the
    chain-pair matrix not constant."""
    expected, _ = compared
    assert (expected["iptm"] > 0).all() and (expected["complex_iplddt"] > 0).all()
    assert np.ptp(expected["pair_chains_iptm"]) > 1e-3


def test_intra_token_index_restarts_per_token():
    atom_to_token = jnp.array([[0, 0, 0, 1, 1, 2, 0, 0]])  # the last two: padding, zeroed
    assert intra_token_index(atom_to_token).tolist() == [[0, 1, 2, 0, 1, 0, 0, 1]]


def test_ptm_of_a_certain_prediction():
    """All PAE mass in the first bin (0-0.5 A): every pair's TM term is 1/(1 + (0.25/d0)^2), so
    pTM is that, ipTM too (two chains), and each chain pair's entry as well."""
    bins, length = 64, 30
    logits = jnp.full((1, length, length, bins), -1e4).at[..., 0].set(0.0)
    asym = jnp.array([[0] * 20 + [1] * 10])
    out = ptm_iptm(logits, jnp.ones((1, length), bool), asym, 2, 1e-6)
    d0 = 1.24 * (length - 15) ** (1 / 3) - 1.8
    term = 1 / (1 + (0.25 / d0) ** 2)
    assert abs(float(out["ptm"][0]) - term) < 1e-5 and abs(float(out["iptm"][0]) - term) < 1e-5
    assert np.allclose(out["pair_chains_iptm"][0], term, atol=1e-5)

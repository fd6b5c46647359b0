"""ESMFold2's trunk against transformers' ``EsmFold2Model.forward`` on the same weights (written
by its own ``save_pretrained``, read back by ``weights/esmfold2.py``) and the same randomness (the
initial pair state and every loop's LM dropout, drawn with torch and fed to both sides).

Bound: 1e-4 absolute in fp32, on states of order ten (pair states reach ~15, distogram logits ~35
with ``esmfold2_checkpoints``' weights): the two sides differ by summation order only, measured at
1-4e-5; a modelling error moves them by far more (swapping SingleToPair's difference to j - i,
checked once, moved the pair states by 13 and the distogram logits by 19).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from esmfold2_checkpoints import (
    REAL_WIDTHS, complex_features, make_hf_esmfold2, protein_features, reference_lm_states, reference_noise,
    reference_trunk, write_hf_esmfold2,
)
from flamino_core.engine.fold import stem_pass
from flamino_core.model.esmfold2.model import TrunkNoise, draw_trunk_noise, run_trunk
from flamino_core.weights.esmfold2 import load_esmfold2

BOUND = 1e-4
SEQUENCE = "MKTAYIAKQRQISFVKSHFSRQ"
COMPLEX = ["MKTAYIAKQ", "GSHMLE", "MKTAYIAKQ"]  # a homodimer (sym_id 0, 1) and another chain


def _pair(tmp_path_factory, shape=None, seed=0):
    reference = make_hf_esmfold2(seed, shape)
    folder = write_hf_esmfold2(reference, tmp_path_factory.mktemp("esmfold2"))
    return reference, load_esmfold2(folder)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return _pair(tmp_path_factory)


def numpy_features(features: dict) -> dict:
    return {k: v.numpy() for k, v in features.items()}


def run_both(reference, ours, features, with_lm=True, num_loops=None):
    pair, dropout = reference_noise(reference, features, num_loops=num_loops)
    lm = reference_lm_states(reference, features) if with_lm else None
    expected = reference_trunk(reference, features, pair, dropout if with_lm else None, lm, num_loops=num_loops)
    noise = TrunkNoise(jnp.asarray(pair.numpy()), jnp.asarray(dropout.numpy()) if with_lm else None)
    got = run_trunk(ours, numpy_features(features), noise, None if lm is None else jnp.asarray(lm.numpy()),
                    num_loops=num_loops)
    return expected, got


def assert_trunk_close(expected, got, bound=BOUND):
    for name in ("single_inputs", "relative_position_encoding", "token_bonds_encoding", "pair_states",
                 "distogram_logits"):
        want, have = getattr(expected, name).numpy(), np.asarray(getattr(got, name))
        assert have.shape == want.shape, name
        assert np.abs(have - want).max() < bound, (name, np.abs(have - want).max())
    assert np.array_equal(np.asarray(got.atom_inputs.atom_to_token), expected.atom_inputs.atom_to_token.numpy())


@pytest.mark.parametrize("chains", [[SEQUENCE], COMPLEX], ids=["one-chain", "complex"])
def test_trunk_matches_reference(tiny, chains):
    reference, ours = tiny
    features = protein_features(chains[0]) if len(chains) == 1 else complex_features(chains)
    assert_trunk_close(*run_both(reference, ours, features))


def test_trunk_without_language_model_and_loop_count(tiny):
    """No input_ids: no LM pair states and no dropout drawn (the reference's path); num_loops=0
    still runs the body once."""
    reference, ours = tiny
    features = protein_features(SEQUENCE[:9])
    features.pop("input_ids")
    assert_trunk_close(*run_both(reference, ours, features, with_lm=False, num_loops=0))


@pytest.mark.parametrize("chains", [[SEQUENCE], COMPLEX], ids=["one-chain", "complex"])
def test_language_model_states_match_reference(tiny, chains):
    """flamino's ESM C under the reference's wrapping: residues per (chain, residue), <cls>/<eos>
    around each chain, attention within a chain only when there are several, global positions
    (states of order 30: the bound is 1e-4 relative to them, measured 1e-5)."""
    reference, ours = tiny
    features = protein_features(chains[0]) if len(chains) == 1 else complex_features(chains)
    want = reference_lm_states(reference, features).numpy()
    have = np.asarray(ours.language_model_states(numpy_features(features), stem_pass(ours)))
    assert have.shape == want.shape
    assert np.abs(have - want).max() < 1e-4 * max(1.0, np.abs(want).max())


def test_language_model_states_of_split_residues_and_padding(tiny):
    """A residue split over two structure tokens (same asym_id and residue_index) is one LM token
    whose states both get; a padded token and a non-protein token get zeros."""
    reference, ours = tiny
    features = protein_features("MKTAYIAK")
    features["residue_index"][0, 4] = 3  # token 4 repeats residue 3
    features["attention_mask"][0, 7] = False
    features["mol_type"][0, 6] = 3
    want = reference_lm_states(reference, features).numpy()
    have = np.asarray(ours.language_model_states(numpy_features(features), stem_pass(ours)))
    assert np.abs(have - want).max() < 1e-4 * max(1.0, np.abs(want).max())
    assert np.array_equal(have[0, 3], have[0, 4]) and not have[0, 6:].any()


def test_dropout_is_required_and_a_key_is_deterministic(tiny):
    """The reference drops out the LM pair states on every loop even at inference: LM states
    without dropout noise are refused; a key gives the same trunk twice, another key another."""
    _, ours = tiny
    features = numpy_features(protein_features(SEQUENCE[:7]))
    lm = ours.language_model_states(features, stem_pass(ours))
    noise = draw_trunk_noise(jax.random.key(0), ours.config, 1, 7)
    with pytest.raises(ValueError, match="every trunk loop"):
        run_trunk(ours, features, TrunkNoise(noise.pair_state), lm)
    with pytest.raises(ValueError, match="num_loops"):
        run_trunk(ours, features, TrunkNoise(noise.pair_state, jnp.ones((1, 1, 7, 7, 24))), lm)
    first = run_trunk(ours, features, noise, lm).pair_states
    again = run_trunk(ours, features, noise, lm).pair_states
    other = run_trunk(ours, features, TrunkNoise(noise.pair_state, jax.random.key(1)), lm).pair_states
    assert np.array_equal(np.asarray(first), np.asarray(again))
    assert np.abs(np.asarray(first) - np.asarray(other)).max() > 1e-3


@pytest.mark.parametrize("depth", [1, 3], ids=["query-only", "alignment"])
def test_trunk_with_msa_encoder_matches_reference(tmp_path_factory, depth):
    """biohub/ESMFold2's MSA encoder: the one-row MSA of the query that the featuriser supplies (as
    ``infer_protein``), and a three-row alignment with deletions, a masked stretch and a
    deletion mean (so every input of the encoder matters). With chunk_size 5 on both sides: the
    reference's chunked triangle contraction and transitions, flamino's chunked rows."""
    import torch

    from esmfold2_checkpoints import tiny_shape, with_msa_encoder

    reference, ours = _pair(tmp_path_factory, dict(with_msa_encoder(tiny_shape()), chunk_size=5), seed=2)
    assert ours.config.chunk_size == 5
    features = protein_features(SEQUENCE[:12])
    if depth > 1:
        gen = torch.Generator().manual_seed(5)
        msa = torch.randint(2, 22, (1, depth, 12), generator=gen)
        msa[:, 0] = features["res_type"]
        features["msa"] = msa
        features["msa_attention_mask"] = torch.ones(1, depth, 12, dtype=torch.bool)
        features["msa_attention_mask"][0, 2, 7:] = False
        features["has_deletion"] = torch.rand(1, depth, 12, generator=gen) > 0.7
        features["deletion_value"] = torch.rand(1, depth, 12, generator=gen) * features["has_deletion"]
        features["deletion_mean"] = features["deletion_value"].mean(dim=1)
    assert_trunk_close(*run_both(reference, ours, features))


@pytest.mark.slow
def test_trunk_matches_reference_at_real_widths(tmp_path_factory):
    """ESMFold2's widths (384/256 trunk, 2560-wide ESM C with 40 heads) at one layer per stack."""
    reference, ours = _pair(tmp_path_factory, REAL_WIDTHS)
    assert_trunk_close(*run_both(reference, ours, complex_features(COMPLEX)))


def test_chunked_rows_give_the_same_numbers():
    """What grows with L^2 is built chunk_size rows at a time (SingleToPair, the outer-product mean,
    the pair transition): the same numbers as all at once, to float rounding."""
    import dataclasses

    from flax import nnx

    from esmfold2_checkpoints import tiny_shape, with_msa_encoder
    from flamino_core.model.esmfold2.config import EsmFold2Config
    from flamino_core.model.esmfold2.language_model import SingleToPair
    from flamino_core.model.esmfold2.msa import OuterProductMean
    from flamino_core.model.esmfold2.pair import PairUpdateStack

    config = EsmFold2Config.from_dict(with_msa_encoder(tiny_shape()))
    x = jax.random.normal(jax.random.key(2), (1, 13, config.pairwise_hidden_size))
    z = jax.random.normal(jax.random.key(3), (1, 13, 13, config.pairwise_hidden_size))
    msa = jax.random.normal(jax.random.key(4), (1, 13, 4, config.msa_encoder.hidden_size))
    msa_mask = jax.random.bernoulli(jax.random.key(5), 0.8, (1, 13, 4))
    outputs = []
    for chunk in (None, 5):
        chunked = dataclasses.replace(config, chunk_size=chunk)
        outputs.append([SingleToPair(config.pairwise_hidden_size, nnx.Rngs(0), chunk)(x),
                        OuterProductMean(chunked, nnx.Rngs(1))(msa, msa_mask),
                        PairUpdateStack(chunked, 2, nnx.Rngs(2))(z, jnp.ones((1, 13, 13)))])
    for whole, chunked in zip(*outputs):
        assert np.abs(np.asarray(whole) - np.asarray(chunked)).max() < 1e-5

"""ESMFold2's config, shared layers, atom stack and input embedder against transformers 5.25's
``modeling_esmfold2`` on the same random weights (``esmfold2_checkpoints.make_hf_esmfold2``: the
reference model of ``EsmFold2Config.tiny()``'s shape, every weight drawn well away from its
initialisation), copied through the checkpoint key map (``esmfold2_reference.load_torch_into``,
strict), on the reference featuriser's inputs for one chain and for a three-chain complex with
atom padding.

Tolerance 1e-4 (the port's bar; fp32). Measured: single inputs and the initial pair state within
1e-6 (values up to ~3.5), atom states within 2e-6; the rotary tables, window mask, relative-position
one-hots and token scatter exactly or to 1e-6. A wrong sign, axis, eps or chunk order moves them by
0.01-1.
"""

from __future__ import annotations


import jax.numpy as jnp
import numpy as np
import pytest
import torch
from flax import nnx

from conftest import checkpoint_seed
from esmfold2_checkpoints import complex_features, make_hf_esmfold2, protein_features
from esmfold2_reference import flamino_config, jnp_of, load_torch_into, max_abs, prepared_inputs
from flamino_core.model.esmfold2 import layers
from flamino_core.model.esmfold2.atoms import (
    rotary_embedding, scatter_atom_to_token, sliding_window_mask, windowed_attention,
)
from flamino_core.model.esmfold2.config import AtomEncoderConfig, EsmFold2Config
from flamino_core.model.esmfold2.embedder import InputEmbedder, RelativePositionEncoding

BOUND = 1e-4
SEQUENCE = "MKTAYIAKQRQISFVKSHFSRQ"  # 22 residues, 192 atoms with the featuriser's padding to 32
COMPLEX = ["MKTAY", "GGSW", "MKTAY"]  # two copies of one entity and another chain


@pytest.fixture(scope="module")
def hf():
    return make_hf_esmfold2(checkpoint_seed("esmfold2", "atoms"))


@pytest.fixture(scope="module", params=["one chain", "complex"])
def features(request):
    return protein_features(SEQUENCE) if request.param == "one chain" else complex_features(COMPLEX)


def test_config_reads_the_reference_config_json(hf):
    from transformers.models.esmfold2.configuration_esmfold2 import EsmFold2Config as HfConfig

    assert EsmFold2Config.from_dict(hf.config.to_dict(), name="esmfold2-tiny") == EsmFold2Config.tiny()
    # save_pretrained writes only what differs from the defaults: the rest must be filled in.
    assert EsmFold2Config.from_dict(HfConfig().to_diff_dict(), name="esmfold2") == EsmFold2Config.esmfold2()
    assert EsmFold2Config.esmfold2().diffusion.atom_encoder.output_dim == 768
    assert EsmFold2Config.esmfold2().esmc.num_layers == 80 and EsmFold2Config.esmfold2().esmc.ffn_dim == 6912
    with pytest.raises(ValueError, match="frequency pairs"):
        AtomEncoderConfig(hidden_size=32, num_attention_heads=2)  # 16 pairs asked of a 16-wide head
    with pytest.raises(ValueError, match="single_inputs_size"):
        EsmFold2Config(single_inputs_size=450)
    with pytest.raises(ValueError, match="not ESMFold2"):
        EsmFold2Config.from_dict({"model_type": "esm"})


def test_shared_layers_match_reference():
    import transformers.models.esmfold2.modeling_esmfold2 as ref

    torch.manual_seed(3)
    x = 5.0 + 2.0 * torch.randn(2, 7, 24)  # a large mean: a one-pass variance would lose digits here
    cond = torch.randn(2, 7, 24)
    cases = [
        (ref.EsmFold2LayerNorm(24), layers.LayerNorm(24, nnx.Rngs(0)), (x,)),
        (ref.EsmFold2AdaptiveLayerNorm(24), layers.AdaptiveLayerNorm(24, nnx.Rngs(0)), (x, cond)),
        (ref.EsmFold2SwiGLU(24, 40), layers.SwiGLU(24, 40, nnx.Rngs(0)), (x,)),
        # chunked in 3s over 7 tokens: a ragged last chunk
        (ref.EsmFold2Transition(24, 40, chunk_size=3), layers.Transition(24, 40, 3, nnx.Rngs(0)), (x,)),
        (ref.EsmFold2FourierEmbedding(24), layers.FourierEmbedding(24, nnx.Rngs(0)), (torch.randn(5),)),
    ]
    for theirs, ours, inputs in cases:
        with torch.no_grad():
            for p in theirs.parameters():
                p.copy_(p + 0.3 * torch.randn(p.shape))  # LayerNorm gains away from one
            expected = theirs(*inputs)
        load_torch_into(ours, theirs.state_dict())
        got = ours(*(jnp_of(t) for t in inputs))
        # fp32 rounding, relative to the outputs' size (the SwiGLU's reach ~100 on these inputs)
        assert max_abs(got, expected) < 1e-6 * (1.0 + float(expected.abs().max())), type(theirs).__name__
    assert max_abs(layers.rms_norm(jnp_of(x)), ref.EsmFold2RMSNorm()(x)) < 1e-6


def test_rotary_window_and_scatter_match_reference(hf, features):
    import transformers.models.esmfold2.modeling_esmfold2 as ref

    p = prepared_inputs(hf, features)
    encoder, atoms = hf.input_embedder.atom_encoder, p["torch_atoms"]
    with torch.no_grad():
        embeds, (cos, sin) = encoder.embed_atoms(atoms)
        window = encoder.build_attention_mask(atoms.atom_attention_mask, embeds)
    config = flamino_config(hf)
    our_cos, our_sin = rotary_embedding(config.atom_encoder, p["atoms"].ref_pos, p["atoms"].ref_space_uid)
    assert max_abs(our_cos, cos) < 1e-6 and max_abs(our_sin, sin) < 1e-6
    # The reference's eager mask is additive (0 or the lowest float); ours says where it is 0.
    ours = np.asarray(sliding_window_mask(p["atoms"].atom_attention_mask, config.sliding_window))
    assert np.array_equal(np.broadcast_to(ours, window.shape), (window == 0).numpy())
    assert 0 < ours.sum() < ours.size / 4  # the window really cuts (radius 4 of 128+ atoms)

    features_ = torch.randn(*atoms.atom_to_token.shape, 6)
    tokens = features["res_type"].shape[1] + 2  # two tokens without atoms: zero, as the reference
    expected = ref.scatter_atom_to_token(features_, atoms.atom_to_token, tokens, atoms.atom_attention_mask)
    got = scatter_atom_to_token(jnp_of(features_), p["atoms"].atom_to_token, tokens, p["atoms"].atom_attention_mask)
    assert max_abs(got, expected) < 1e-6 and float(np.abs(np.asarray(got)[:, -2:]).max()) == 0.0


def test_input_embedder_matches_reference(hf, features):
    p = prepared_inputs(hf, features)
    embedder = InputEmbedder(flamino_config(hf), nnx.Rngs(0))
    load_torch_into(embedder, hf.state_dict(), "input_embedder.")
    tokens = dict(p["tokens"])
    torch_tokens = dict(p["torch_tokens"])
    # Some covalent bonds between tokens, so the token-bond projection is exercised.
    bonds = (torch.rand(torch_tokens["token_bonds"].shape, generator=torch.Generator().manual_seed(5)) < 0.2)
    torch_tokens["token_bonds"], tokens["token_bonds"] = bonds.float(), jnp_of(bonds.float())
    num_tokens = features["res_type"].shape[1]
    with torch.no_grad():
        expected = hf.input_embedder(atom_inputs=p["torch_atoms"], num_tokens=num_tokens, **torch_tokens)
        encoder = hf.input_embedder.atom_encoder
        embeds, rotary = encoder.embed_atoms(p["torch_atoms"])
        mask = encoder.build_attention_mask(p["torch_atoms"].atom_attention_mask, embeds)
        atom_states = encoder(embeds, embeds, mask, rotary, p["torch_atoms"].atom_attention_mask,
                              p["torch_atoms"].atom_to_token, num_tokens)[1]
    got = embedder(p["atoms"], **tokens)
    for name, ours, theirs in zip(("single_inputs", "pair", "relative positions", "token bonds"), got, expected):
        assert ours.shape == tuple(theirs.shape), name
        assert max_abs(ours, theirs) < BOUND, name
    ours_encoder = embedder.atom_encoder
    our_embeds, our_rotary = ours_encoder.embed_atoms(p["atoms"])
    our_states = ours_encoder(our_embeds, our_embeds, our_rotary, p["atoms"].atom_attention_mask,
                              p["atoms"].atom_to_token, num_tokens)[1]
    assert max_abs(our_states, atom_states) < BOUND  # every atom, the padding's too


@pytest.mark.parametrize("radius", [4, 64])
def test_windowed_attention_equals_the_dense_mask(radius):
    """Blocks of queries against the keys their window reaches give the reference's dense masked
    attention: real atoms to rounding, padding atoms with no real key in reach (beyond 464
    here) the dense eager result too (every value averaged). 600 atoms: many blocks, a ragged
    last one."""
    rng = np.random.default_rng(0)
    q, k, v = (jnp.asarray(rng.normal(size=(2, 3, 600, 16)), jnp.float32) for _ in range(3))
    atom_mask = np.ones((2, 600), bool)
    atom_mask[0, 400:] = False
    atom_mask[1, rng.choice(600, 50, replace=False)] = False  # scattered holes
    dense = layers.attention(q, k, v, 0.25, mask=sliding_window_mask(jnp.asarray(atom_mask), 2 * radius))
    blocked = windowed_attention(q, k, v, jnp.asarray(atom_mask), radius, 0.25)
    assert blocked.shape == dense.shape
    assert float(jnp.max(jnp.abs(blocked - dense))) < 1e-6


def test_relative_positions_are_row_minus_column():
    """The pair (i, j) encodes ``x_i - x_j``, as the reference and AlphaFold 3 (Algorithm 3): the
    convention an independent port suspected flipped. (The parity test above holds the numbers to
    the reference; this one pins the direction itself.)"""
    config = EsmFold2Config.tiny()
    bins = config.num_relative_residx_bins  # 4
    encoding = RelativePositionEncoding(config, nnx.Rngs(0))
    residue = jnp.asarray([[0, 1, 2, 3, 0, 1]])
    asym = jnp.asarray([[0, 0, 0, 0, 1, 1]])
    sym = jnp.asarray([[0, 0, 0, 0, 1, 1]])
    entity = jnp.asarray([[1, 1, 1, 1, 1, 1]])
    f = np.asarray(encoding.features(residue, asym, sym, entity, jnp.arange(6)[None]))[0]
    width = 2 * bins + 2
    residue_bin, chain_bin = f[..., :width].argmax(-1), f[..., 2 * width + 1:].argmax(-1)
    assert residue_bin[0, 3] == bins - 3 and residue_bin[3, 0] == bins + 3
    assert residue_bin[0, 4] == 2 * bins + 1  # another chain: the out-of-context bin
    assert chain_bin[4, 0] == 2 + 1 and chain_bin[0, 4] == 2 - 1  # sym_id 1 - 0 and 0 - 1, chain bins 2
    assert chain_bin[0, 1] == 2 * 2 + 1  # the same chain: no chain offset

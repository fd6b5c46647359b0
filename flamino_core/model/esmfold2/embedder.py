"""ESMFold2's input embedder: the atom encoder pools each token's reference-conformer atoms, the
result joined with the residue-type features is ``single_inputs``, and the pair state starts from
two projections of it plus the relative-position and token-bond encodings, as transformers'
``EsmFold2InputEmbedder`` and ``EsmFold2RelativePositionEncoding`` write them.

Relative offsets are ``x_i - x_j`` for the pair (i, j) (row minus column), the reference's and
AlphaFold 3's (Algorithm 3) convention; an independent port suspected the reference of flipping
them. It does not flip anything against AF3, and flamino follows it numerically either way:
``tests/parity/test_esmfold2_atoms.py`` pins the convention (the pair (0, 3) of one chain lands in the
bin ``num_bins - 3``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from flamino_core.model.esmfold2.atoms import AtomEncoder, AtomInputs
from flamino_core.model.esmfold2.config import EsmFold2Config
from flamino_core.model.esmfold2.layers import linear


def relative_one_hot(diff: jax.Array, num_bins: int, keep: jax.Array) -> jax.Array:
    """``_relative_position_one_hot``: ``diff`` clipped to [-num_bins, num_bins] as classes
    0..2*num_bins, and the extra class ``2*num_bins + 1`` wherever ``keep`` is False."""
    binned = jnp.clip(diff + num_bins, 0, 2 * num_bins)
    binned = jnp.where(keep, binned, 2 * num_bins + 1)
    return jax.nn.one_hot(binned, 2 * num_bins + 2, dtype=jnp.float32)


class RelativePositionEncoding(nnx.Module):
    """``EsmFold2RelativePositionEncoding``: ``embed`` (no bias) of the concatenated one-hots of
    the residue offset (same chain), the token offset (same chain and residue), same-entity, and
    the chain (``sym_id``) offset (different chains only)."""

    def __init__(self, config: EsmFold2Config, rngs: nnx.Rngs):
        self.residue_bins, self.chain_bins = config.num_relative_residx_bins, config.num_relative_chain_bins
        features = 2 * (2 * self.residue_bins + 2) + 1 + (2 * self.chain_bins + 2)
        self.embed = linear(features, config.pairwise_hidden_size, rngs)

    def features(self, residue_index: jax.Array, asym_id: jax.Array, sym_id: jax.Array, entity_id: jax.Array,
                 token_index: jax.Array) -> jax.Array:
        """The one-hot features (B, T, T, F) that ``embed`` projects; each input (B, T) int."""

        def pairs(x: jax.Array, op):
            return op(x[:, :, None], x[:, None, :])  # (B, T, T): row i, column j

        same_chain = pairs(asym_id, jnp.equal)
        same_residue = pairs(residue_index, jnp.equal)
        same_entity = pairs(entity_id, jnp.equal)
        return jnp.concatenate([
            relative_one_hot(pairs(residue_index, jnp.subtract), self.residue_bins, same_chain),
            relative_one_hot(pairs(token_index, jnp.subtract), self.residue_bins, same_chain & same_residue),
            same_entity[..., None].astype(jnp.float32),
            relative_one_hot(pairs(sym_id, jnp.subtract), self.chain_bins, ~same_chain),  # other chains kept
        ], axis=-1)

    def __call__(self, residue_index: jax.Array, asym_id: jax.Array, sym_id: jax.Array, entity_id: jax.Array,
                 token_index: jax.Array) -> jax.Array:
        return self.embed(self.features(residue_index, asym_id, sym_id, entity_id, token_index))


class InputEmbedder(nnx.Module):
    """``EsmFold2InputEmbedder``: ``atom_encoder`` (the trunk's atom sub-config), ``pair_init_1``,
    ``pair_init_2``, ``rel_pos``, ``token_bonds``."""

    def __init__(self, config: EsmFold2Config, rngs: nnx.Rngs):
        self.atom_encoder = AtomEncoder(config, config.atom_encoder, rngs)
        self.pair_init_1 = linear(config.single_inputs_size, config.pairwise_hidden_size, rngs)
        self.pair_init_2 = linear(config.single_inputs_size, config.pairwise_hidden_size, rngs)
        self.rel_pos = RelativePositionEncoding(config, rngs)
        self.token_bonds = linear(1, config.pairwise_hidden_size, rngs)

    def __call__(self, atom_inputs: AtomInputs, res_type_one_hot: jax.Array, profile: jax.Array,
                 deletion_mean: jax.Array, token_index: jax.Array, residue_index: jax.Array, asym_id: jax.Array,
                 sym_id: jax.Array, entity_id: jax.Array, token_bonds: jax.Array
                 ) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
        """Inputs as ``EsmFold2Model._prepare_features`` leaves them: ``atom_inputs`` one-hot and
        zeroed at padding, ``res_type_one_hot``/``profile`` (B, T, num_res_types), ``deletion_mean``
        (B, T), the indices (B, T) int, ``token_bonds`` (B, T, T, 1).

        Returns ``(single_inputs (B, T, single_inputs_size), initial pair (B, T, T, pairwise),
        relative_position_encoding, token_bonds_encoding)``; the last two are already in the
        initial pair state and returned for the denoiser and the confidence head, as the reference.
        """
        encoder = self.atom_encoder
        embeds, rotary = encoder.embed_atoms(atom_inputs)
        # No coordinates yet: the layer stream and its conditioning are the same embeddings.
        atom_encoding = encoder(embeds, embeds, rotary, atom_inputs.atom_attention_mask.astype(bool),
                                atom_inputs.atom_to_token, res_type_one_hot.shape[1])[0]
        single_inputs = jnp.concatenate([atom_encoding, res_type_one_hot.astype(jnp.float32),
                                         profile.astype(jnp.float32),
                                         deletion_mean[..., None].astype(jnp.float32)], axis=-1)
        pair = self.pair_init_1(single_inputs)[:, :, None] + self.pair_init_2(single_inputs)[:, None, :]
        relative = self.rel_pos(residue_index, asym_id, sym_id, entity_id, token_index)
        bonds = self.token_bonds(token_bonds.astype(jnp.float32))
        return single_inputs, pair + relative + bonds, relative, bonds

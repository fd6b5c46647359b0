"""ESMFold2's MSA encoder (transformers' ``EsmFold2OuterProductMean``,
``EsmFold2MSAPairWeightedAveraging``, ``EsmFold2MSAEncoderLayer``, ``EsmFold2MSAEncoder``), built
when ``msa_encoder.enabled`` (biohub/ESMFold2; ESMFold2-Fast has none). The reference's
``infer_protein`` hands it a one-row MSA (the query itself) when no alignment is given, and so does
flamino's featuriser. Attribute names are the checkpoint keys (``msa_encoder.*``).

Each layer: the outer-product mean of the MSA into the pair state, the pair-weighted averaging of
the MSA rows (AlphaFold 3, Algorithm 10) and the MSA transition, then a pair-update block (the
last layer updates the pair state only: the released checkpoints have no MSA-side weights there).
MSA tensors are (B, L, M, ...), tokens first, as the reference transposes them.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from flamino_core.model.esmfold2.config import EsmFold2Config
from flamino_core.model.esmfold.pair import rows_in_chunks
from flamino_core.model.esmfold2.layers import LayerNorm, Transition, linear
from flamino_core.model.esmfold2.pair import PairUpdateLayer


class OuterProductMean(nnx.Module):
    """``output_proj(mean over valid rows m of left_im (x) right_jm)``: the sum over rows divided
    by the number of rows valid at both tokens (at least one), flattened (c, d) c-major."""

    def __init__(self, config: EsmFold2Config, rngs: nnx.Rngs):
        msa = config.msa_encoder
        # (B, L, L, c * d) before its projection: 1,024 wide in the released model, so it is built
        # chunk_size rows at a time (each row's sums are the same either way).
        self.chunk_size = config.chunk_size
        self.norm = LayerNorm(msa.hidden_size, rngs)
        self.input_proj = linear(msa.hidden_size, 2 * msa.outer_hidden_size, rngs)
        self.output_proj = linear(msa.outer_hidden_size**2, config.pairwise_hidden_size, rngs, bias=True)

    def __call__(self, msa: jax.Array, msa_mask: jax.Array) -> jax.Array:
        mask = msa_mask.astype(jnp.float32)
        left, right = jnp.split(self.input_proj(self.norm(msa)) * mask[..., None], 2, axis=-1)
        valid = jnp.maximum(jnp.einsum("bim,bjm->bij", mask, mask), 1.0)[..., None]

        def rows(left_rows: jax.Array, valid_rows: jax.Array) -> jax.Array:
            outer = jnp.einsum("bimc,bjmd->bijcd", left_rows, right)
            return self.output_proj(outer.reshape(outer.shape[:3] + (-1,))) / valid_rows

        return rows_in_chunks(rows, self.chunk_size, left, valid)


class PairWeightedAveraging(nnx.Module):
    """Each token's MSA entries replaced by a gated average over tokens j of the same row's
    values, weighted per head by softmax_j of the pair state's projection (padding j excluded)."""

    def __init__(self, config: EsmFold2Config, rngs: nnx.Rngs):
        msa = config.msa_encoder
        self.heads, self.head_dim = msa.num_attention_heads, msa.head_dim
        inner = self.heads * self.head_dim
        self.norm_single = LayerNorm(msa.hidden_size, rngs)
        self.bias_norm = LayerNorm(config.pairwise_hidden_size, rngs)
        self.bias_proj = linear(config.pairwise_hidden_size, self.heads, rngs)
        self.v_proj = linear(msa.hidden_size, inner, rngs)
        self.gate_proj = linear(msa.hidden_size, inner, rngs)
        self.o_proj = linear(inner, msa.hidden_size, rngs)

    def __call__(self, msa: jax.Array, pair: jax.Array, pair_mask: jax.Array) -> jax.Array:
        batch, length, depth, _ = msa.shape
        normed = self.norm_single(msa)
        bias = self.bias_proj(self.bias_norm(pair))  # (B, L, L, H)
        # finfo.min, as the reference's masked_fill: a padding row stays finite.
        bias = jnp.where(pair_mask[..., None], bias, jnp.finfo(bias.dtype).min)
        weights = jax.nn.softmax(bias.astype(jnp.float32), axis=-2)  # over the attended token j
        shape = (batch, length, depth, self.heads, self.head_dim)
        values = self.v_proj(normed).reshape(shape)
        gate = jax.nn.sigmoid(self.gate_proj(normed)).reshape(shape)
        out = gate * jnp.einsum("bijh,bjmhd->bimhd", weights, values)
        return self.o_proj(out.reshape(batch, length, depth, -1))


class MsaEncoderLayer(PairUpdateLayer):
    """A pair-update block preceded by the MSA's updates (``updates_msa``: all but the last)."""

    def __init__(self, config: EsmFold2Config, updates_msa: bool, rngs: nnx.Rngs):
        super().__init__(config, rngs)
        self.updates_msa = updates_msa
        self.outer_product_mean = OuterProductMean(config, rngs)
        if updates_msa:
            msa = config.msa_encoder
            self.msa_pair_weighted_averaging = PairWeightedAveraging(config, rngs)
            self.msa_transition = Transition(msa.hidden_size, msa.intermediate_size, config.chunk_size, rngs)

    def __call__(self, msa, pair, msa_mask, pair_mask):
        pair = pair + self.outer_product_mean(msa, msa_mask)
        if self.updates_msa:
            msa = msa + self.msa_pair_weighted_averaging(msa, pair, pair_mask)
            msa = self.msa_transition(msa)
        return msa, super().__call__(pair, pair_mask.astype(jnp.float32))


class MsaEncoder(nnx.Module):
    def __init__(self, config: EsmFold2Config, rngs: nnx.Rngs):
        msa = config.msa_encoder
        self.num_res_types = config.num_res_types
        # The residue one-hot, has_deletion and deletion_value.
        self.embed = linear(config.num_res_types + 2, msa.hidden_size, rngs)
        self.project_inputs = linear(config.single_inputs_size, msa.hidden_size, rngs)
        self.layers = nnx.List([MsaEncoderLayer(config, i != msa.num_hidden_layers - 1, rngs)
                                for i in range(msa.num_hidden_layers)])

    def __call__(self, pair: jax.Array, single_inputs: jax.Array, features: dict) -> jax.Array:
        """The pair state (B, L, L, C) updated by the featuriser's MSA (``msa`` (B, M, L) residue
        types; optional ``msa_attention_mask``, ``has_deletion``, ``deletion_value`` (B, M, L),
        as ``_build_msa_kwargs`` fills them in: the token mask, zeros)."""
        msa_tokens = jnp.swapaxes(jnp.asarray(features["msa"]), 1, 2)  # (B, L, M)
        mask = features.get("msa_attention_mask")
        if mask is None:
            token_mask = jnp.asarray(features["attention_mask"]).astype(jnp.float32)
            mask = jnp.broadcast_to(token_mask[:, :, None], msa_tokens.shape)
        else:
            mask = jnp.swapaxes(jnp.asarray(mask), 1, 2).astype(jnp.float32)
        zeros = jnp.zeros(msa_tokens.shape, jnp.float32)
        deletions = [zeros if features.get(k) is None else jnp.swapaxes(jnp.asarray(features[k]), 1, 2)
                     .astype(jnp.float32) for k in ("has_deletion", "deletion_value")]
        one_hot = jax.nn.one_hot(msa_tokens, self.num_res_types) * mask[..., None]
        msa = self.embed(jnp.concatenate([one_hot] + [d[..., None] for d in deletions], axis=-1))
        msa = msa + self.project_inputs(single_inputs)[:, :, None]
        token_mask = mask[:, :, 0] > 0
        pair_mask = token_mask[:, :, None] & token_mask[:, None, :]
        for layer in self.layers:
            msa, pair = layer(msa, pair, mask, pair_mask)
        return pair

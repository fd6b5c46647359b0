"""ESMFold's folding trunk (Lin et al., Science 2023): blocks that update a sequence state
(L x 1024) and a pair state (L x L x 128) together, with relative positions, and recycling of
both states and of the predicted structure's binned pseudo-beta distances.

Each block, as transformers' ``EsmFoldTriangularSelfAttentionBlock`` (attribute names are its
checkpoint keys): the sequence attends over itself biased by the pair state
(``pair_to_sequence``), then an MLP; the sequence updates the pair state (``sequence_to_pair``:
outer product and difference); then the triangular updates and triangular attention
(``pair.py``) and an MLP on the pair state. The blocks are stacked with ``nnx.vmap`` and run with
``nnx.scan``, as the language models' layers (``model/stack.py``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from flamino_core.model.esmfold.config import TrunkConfig
from flamino_core.model.esmfold.pair import (
    TriangleAttention, TriangleMultiplicativeUpdate, layer_norm, linear, rows_in_chunks,
)
from flamino_core.model.esmfold.structure import StructureModule
from flamino_core.model.precision import einsum

RECYCLE_BINS = 15  # pseudo-beta distance bins fed back at each recycle
RECYCLE_MIN, RECYCLE_MAX = 3.375, 21.375  # Angstrom, AlphaFold's recycling distogram


class SelfAttention(nnx.Module):
    """Gated multi-head attention over the sequence with a per-head pair bias (``EsmFoldSelfAttention``)."""

    def __init__(self, dim: int, heads: int, head_width: int, rngs: nnx.Rngs):
        self.heads, self.head_width = heads, head_width
        self.proj = linear(dim, 3 * dim, rngs, bias=False)
        self.o_proj = linear(dim, dim, rngs)
        self.g_proj = linear(dim, dim, rngs)
        self.bf16_products = False  # the fast mode's (``pair.py``): bf16 operands, fp32 accumulation

    def __call__(self, x: jax.Array, mask: jax.Array, bias: jax.Array) -> jax.Array:
        """x (B, L, D), mask (B, L) valid residues, bias (B, L, L, H)."""
        batch, length, _ = x.shape
        # The projection's columns are per head [q | k | v] (a view to (H, 3c) then a chunk).
        t = self.proj(x).reshape(batch, length, self.heads, 3 * self.head_width).transpose(0, 2, 1, 3)  # (B, H, L, 3c)
        q, k, v = jnp.split(t, 3, axis=-1)
        logits = einsum("bhqc,bhkc->bhqk", self.head_width**-0.5 * q, k, self.bf16_products)
        logits = logits + bias.transpose(0, 3, 1, 2)
        logits = jnp.where(mask[:, None, None, :], logits, -jnp.inf)  # padding is never attended to
        y = einsum("bhqk,bhkc->bqhc", jax.nn.softmax(logits, axis=-1), v, self.bf16_products).reshape(batch, length, -1)
        return self.o_proj(jax.nn.sigmoid(self.g_proj(x)) * y)


class SequenceToPair(nnx.Module):
    def __init__(self, sequence_dim: int, inner_dim: int, pair_dim: int, rngs: nnx.Rngs):
        self.layernorm = layer_norm(sequence_dim, rngs)
        self.proj = linear(sequence_dim, 2 * inner_dim, rngs)
        self.o_proj = linear(2 * inner_dim, pair_dim, rngs)

    def __call__(self, s: jax.Array) -> jax.Array:
        """(B, L, D) -> (B, L, L, pair): [q_j * k_i, q_j - k_i] projected, for pair (i, j)."""
        q, k = jnp.split(self.proj(self.layernorm(s)), 2, axis=-1)
        prod = q[:, None, :, :] * k[:, :, None, :]
        diff = q[:, None, :, :] - k[:, :, None, :]
        return self.o_proj(jnp.concatenate([prod, diff], axis=-1))


class PairToSequence(nnx.Module):
    def __init__(self, pair_dim: int, heads: int, rngs: nnx.Rngs):
        self.layernorm = layer_norm(pair_dim, rngs)
        self.linear = linear(pair_dim, heads, rngs, bias=False)

    def __call__(self, z: jax.Array) -> jax.Array:
        return self.linear(self.layernorm(z))  # (B, L, L, H)


class ResidueMLP(nnx.Module):
    """x + fc2(relu(fc1(LN(x)))) (the checkpoint's ``mlp.0``, ``mlp.1``, ``mlp.3``)."""

    def __init__(self, dim: int, inner: int, rngs: nnx.Rngs):
        self.norm = layer_norm(dim, rngs)
        self.fc1 = linear(dim, inner, rngs)
        self.fc2 = linear(inner, dim, rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        return x + self.fc2(jax.nn.relu(self.fc1(self.norm(x))))


class TriangularSelfAttentionBlock(nnx.Module):
    def __init__(self, config: TrunkConfig, rngs: nnx.Rngs):
        seq, pair = config.sequence_state_dim, config.pairwise_state_dim
        seq_heads, pair_heads = seq // config.sequence_head_width, pair // config.pairwise_head_width
        self.layernorm_1 = layer_norm(seq, rngs)
        self.sequence_to_pair = SequenceToPair(seq, pair // 2, pair, rngs)
        self.pair_to_sequence = PairToSequence(pair, seq_heads, rngs)
        self.seq_attention = SelfAttention(seq, seq_heads, config.sequence_head_width, rngs)
        self.tri_mul_out = TriangleMultiplicativeUpdate(pair, True, rngs)
        self.tri_mul_in = TriangleMultiplicativeUpdate(pair, False, rngs)
        self.tri_att_start = TriangleAttention(pair, config.pairwise_head_width, pair_heads, True, rngs)
        self.tri_att_end = TriangleAttention(pair, config.pairwise_head_width, pair_heads, False, rngs)
        self.mlp_seq = ResidueMLP(seq, 4 * seq, rngs)
        self.mlp_pair = ResidueMLP(pair, 4 * pair, rngs)

    def __call__(self, s: jax.Array, z: jax.Array, mask: jax.Array, chunk_size: int | None):
        """s (B, L, Ds), z (B, L, L, Dz), mask (B, L) bool -> (s, z)."""
        bias = self.pair_to_sequence(z)
        s = s + self.seq_attention(self.layernorm_1(s), mask, bias)
        s = self.mlp_seq(s)
        z = z + self.sequence_to_pair(s)
        pair_mask = (mask[:, :, None] & mask[:, None, :]).astype(z.dtype)
        z = z + self.tri_mul_out(z, pair_mask)
        z = z + self.tri_mul_in(z, pair_mask)
        z = z + self.tri_att_start(z, pair_mask, chunk_size)
        z = z + self.tri_att_end(z, pair_mask, chunk_size)
        # The pair MLP widens the pair state 4x: by rows too (each row on its own; the reference
        # runs it whole, the same numbers).
        return s, rows_in_chunks(self.mlp_pair, chunk_size, z)


class RelativePosition(nnx.Module):
    """Embedding of j - i clipped to +-bins; row 0 is for pairs touching padding."""

    def __init__(self, bins: int, pair_dim: int, rngs: nnx.Rngs):
        self.bins = bins
        self.embedding = nnx.Embed(2 * bins + 2, pair_dim, rngs=rngs)

    def __call__(self, residue_index: jax.Array, mask: jax.Array) -> jax.Array:
        diff = jnp.clip(residue_index[:, None, :] - residue_index[:, :, None], -self.bins, self.bins) + self.bins + 1
        diff = jnp.where(mask[:, None, :] & mask[:, :, None], diff, 0)
        return self.embedding(diff)


def recycle_bins(positions: jax.Array) -> jax.Array:
    """(B, L, L) bin of each pair's pseudo-beta distance from atom14 positions (B, L, 14, 3).

    The C-beta is placed from N, CA and C as AlphaFold's ideal geometry places it (for every
    residue, glycine too, as the reference); 14 boundaries from 3.375 to 21.375 Angstrom compared
    on squared distances. A hard binning: a distance within float noise of a boundary can land
    in either bin (docs/esmfold.md says what the parity test does about it).
    """
    n, ca, c = positions[..., 0, :], positions[..., 1, :], positions[..., 2, :]
    b, c_ = ca - n, c - ca
    a = jnp.cross(b, c_)
    cb = -0.58273431 * a + 0.56802827 * b - 0.54067466 * c_ + ca
    boundaries = jnp.linspace(RECYCLE_MIN, RECYCLE_MAX, RECYCLE_BINS - 1, dtype=jnp.float32) ** 2
    dists = jnp.sum((cb[:, None, :, :] - cb[:, :, None, :]) ** 2, axis=-1, keepdims=True)
    return jnp.sum(dists > boundaries, axis=-1)


class FoldingTrunk(nnx.Module):
    """The blocks and what recycling feeds back; the structure module lives here as in the
    reference's checkpoint (``trunk.structure_module``) and is run by ``ESMFold``."""

    def __init__(self, config: TrunkConfig, rngs: nnx.Rngs):
        seq, pair = config.sequence_state_dim, config.pairwise_state_dim
        self.config = config
        self.pairwise_positional_embedding = RelativePosition(config.position_bins, pair, rngs)

        @nnx.split_rngs(splits=config.num_blocks)
        @nnx.vmap(in_axes=(0,), out_axes=0)
        def make_blocks(rngs: nnx.Rngs) -> TriangularSelfAttentionBlock:
            return TriangularSelfAttentionBlock(config, rngs)

        self.blocks = make_blocks(rngs)  # arrays with a leading block axis
        self.recycle_s_norm = layer_norm(seq, rngs)
        self.recycle_z_norm = layer_norm(pair, rngs)
        self.recycle_disto = nnx.Embed(RECYCLE_BINS, pair, rngs=rngs)
        self.structure_module = StructureModule(config.structure_module, rngs)
        self.trunk2sm_s = linear(seq, config.structure_module.sequence_dim, rngs)
        self.trunk2sm_z = linear(pair, config.structure_module.pairwise_dim, rngs)

    def blocks_pass(self, s: jax.Array, z: jax.Array, residue_index: jax.Array, mask: jax.Array,
                    chunk_size: int | None) -> tuple[jax.Array, jax.Array]:
        """One pass through every block, relative positions added to the pair state first."""
        z = z + self.pairwise_positional_embedding(residue_index, mask)

        @nnx.scan(in_axes=(0, nnx.Carry), out_axes=nnx.Carry)
        def run(block: TriangularSelfAttentionBlock, carry):
            return block(*carry, mask, chunk_size)

        return run(self.blocks, (s, z))

    def recycled(self, s: jax.Array, z: jax.Array, bins: jax.Array) -> tuple[jax.Array, jax.Array]:
        """What the previous pass adds to the next one's input: its states normalised, plus the
        embedding of its structure's distance bins (all zeros before the first pass)."""
        return self.recycle_s_norm(s), self.recycle_z_norm(z) + self.recycle_disto(bins)

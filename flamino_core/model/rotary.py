"""Rotary position embedding (Su et al. 2021) as ESM-2 uses it: fair-esm's ``rot_emb``.

Every attention implementation (``attention``: pure JAX, ``jax.nn.dot_product_attention`` and
the fused C++ kernel) rotates q and k with the same tables: ``RotaryEmbedding.table`` gives cos
and sin for positions 0..P-1, and a token at position p reads row p (``rotate_at``). The kernel
reads the same rows in C++ (csrc/attention_tiles.h ``rotate_into``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx


class Buffer(nnx.Variable):
    """A non-trainable array stored in checkpoints (the rotary ``inv_freq``)."""


class RotaryEmbedding(nnx.Module):
    """The rotation frequencies of one attention layer (checkpoint key ``rot_emb.inv_freq``)."""

    def __init__(self, head_dim: int, base: float):
        exponents = jnp.arange(0, head_dim, 2, dtype=jnp.float32) / head_dim
        # Loading a checkpoint overwrites this with the stored copy: ESM-2's was saved with fp16
        # precision, and recomputing it changes results noticeably (HF's converter copies it too).
        self.inv_freq = Buffer(1.0 / (base**exponents))

    def table(self, length: int) -> tuple[jax.Array, jax.Array]:
        """cos and sin of the rotation angles of positions 0..length-1: (length, head_dim / 2) each."""
        angles = jnp.arange(length, dtype=jnp.float32)[:, None] * self.inv_freq[...]  # (P, hd/2)
        return jnp.cos(angles), jnp.sin(angles)


def rotate(x: jax.Array, cos: jax.Array, sin: jax.Array) -> jax.Array:
    """x * cos + rotate_half(x) * sin, the references' formula, where cos and sin repeat the same
    angles in both halves and rotate_half(x) = [-x2, x1]. Written per half (the same products
    and sums, so the same rounding): XLA:CPU fused the concatenated rotate_half into the head
    transpose about 10% less efficiently (t6, 16 x 304 tokens)."""
    x1, x2 = jnp.split(x, 2, axis=-1)
    return jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


def rotate_at(x: jax.Array, table: tuple[jax.Array, jax.Array], positions: jax.Array) -> jax.Array:
    """Rotate tokens-major ``x`` (B, T, H, hd) by their (B, T) ``positions`` (rows of ``table``)."""
    cos, sin = table
    return rotate(x, cos[positions][:, :, None], sin[positions][:, :, None])  # (B, T, 1, hd/2): heads broadcast

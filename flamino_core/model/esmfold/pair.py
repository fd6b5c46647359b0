"""The pair state's updates in the folding trunk: triangular multiplicative updates (AlphaFold 2,
Algorithms 11 and 12) and triangular self-attention around the starting and the ending node
(Algorithms 13 and 14), as OpenFold writes them and transformers' ``modeling_esmfold.py`` runs them
(attribute names are its checkpoint keys). Everything here is (B, L, L, C) or bigger: the
reference's ``chunk_size`` bounds the attention's (B, rows, H, L, L) logits by running rows in
chunks, and ``rows_in_chunks`` does the same here.

``bf16_products`` (False unless ESMFold's opt-in fast mode set it, ``weights.esmfold.with_fold_precision``):
the triangular einsums and the attention's two products on bf16 operands with fp32 accumulation;
the layer norms, sigmoid gates and softmax always see fp32.
"""

from __future__ import annotations

import math
from typing import Callable

import jax
import jax.numpy as jnp
from flax import nnx

from flamino_core.model.precision import einsum

LN_EPS = 1e-5  # torch.nn.LayerNorm's default, every LayerNorm of the trunk


def layer_norm(dim: int, rngs: nnx.Rngs) -> nnx.LayerNorm:
    return nnx.LayerNorm(dim, epsilon=LN_EPS, rngs=rngs)


def linear(d_in: int, d_out: int, rngs: nnx.Rngs, bias: bool = True) -> nnx.Linear:
    return nnx.Linear(d_in, d_out, use_bias=bias, rngs=rngs)


def rows_in_chunks(fn: Callable[..., jax.Array], chunk_size: int | None, *rows: jax.Array) -> jax.Array:
    """``fn(*rows)`` computed ``chunk_size`` rows (axis 1) at a time, for a function that treats
    each row on its own (so the result is the same; only the peak memory changes). ``None``: at once.
    The rows are padded to a multiple of the chunk and the padding's results dropped."""
    n = rows[0].shape[1]
    if chunk_size is None or chunk_size >= n:
        return fn(*rows)
    chunks = -(-n // chunk_size)
    pad = chunks * chunk_size - n

    def split(x: jax.Array) -> jax.Array:
        x = jnp.pad(x, [(0, 0), (0, pad)] + [(0, 0)] * (x.ndim - 2))
        x = x.reshape((x.shape[0], chunks, chunk_size) + x.shape[2:])
        return jnp.moveaxis(x, 1, 0)  # (chunks, B, chunk, ...)

    out = jax.lax.map(lambda args: fn(*args), tuple(split(r) for r in rows))  # (chunks, B, chunk, ...)
    out = jnp.moveaxis(out, 0, 1)
    return out.reshape((out.shape[0], chunks * chunk_size) + out.shape[3:])[:, :n]


class TriangleMultiplicativeUpdate(nnx.Module):
    """z_ij += g_ij * Linear(LN(sum_k a_ik * b_jk)) (outgoing edges) or sum_k a_ki * b_kj
    (incoming), a and b gated projections of LN(z), masked."""

    def __init__(self, dim: int, outgoing: bool, rngs: nnx.Rngs):
        self.outgoing = outgoing
        for name in ("linear_a_p", "linear_a_g", "linear_b_p", "linear_b_g", "linear_g", "linear_z"):
            setattr(self, name, linear(dim, dim, rngs))
        self.layer_norm_in = layer_norm(dim, rngs)
        self.layer_norm_out = layer_norm(dim, rngs)
        self.bf16_products = False

    def __call__(self, z: jax.Array, pair_mask: jax.Array) -> jax.Array:
        """z (B, L, L, C), pair_mask (B, L, L); returns the update (B, L, L, C)."""
        z = self.layer_norm_in(z)
        mask = pair_mask[..., None]
        a = mask * jax.nn.sigmoid(self.linear_a_g(z)) * self.linear_a_p(z)
        b = mask * jax.nn.sigmoid(self.linear_b_g(z)) * self.linear_b_p(z)
        spec = "bikc,bjkc->bijc" if self.outgoing else "bkic,bkjc->bijc"
        x = einsum(spec, a, b, self.bf16_products)  # fp32 out: the layer norm after it in fp32
        x = self.linear_z(self.layer_norm_out(x))
        return x * jax.nn.sigmoid(self.linear_g(z))


class GatedAttention(nnx.Module):
    """OpenFold's ``Attention``: multi-head attention with additive biases and a sigmoid gate
    from the queries, no bias on q/k/v (``EsmFoldAttention``)."""

    def __init__(self, dim: int, head_width: int, heads: int, rngs: nnx.Rngs):
        self.heads, self.head_width = heads, head_width
        hidden = head_width * heads
        self.linear_q = linear(dim, hidden, rngs, bias=False)
        self.linear_k = linear(dim, hidden, rngs, bias=False)
        self.linear_v = linear(dim, hidden, rngs, bias=False)
        self.linear_o = linear(hidden, dim, rngs)
        self.linear_g = linear(dim, hidden, rngs)
        self.bf16_products = False

    def _heads(self, x: jax.Array) -> jax.Array:
        x = x.reshape(x.shape[:-1] + (self.heads, self.head_width))  # (..., Q, H, c)
        return jnp.swapaxes(x, -2, -3)  # (..., H, Q, c)

    def __call__(self, x: jax.Array, biases: list[jax.Array]) -> jax.Array:
        """x (..., Q, C) attending over itself; biases broadcast to (..., H, Q, Q)."""
        # q divided by sqrt(c) before the product, as the reference (not the logits after).
        q = self._heads(self.linear_q(x)) / math.sqrt(self.head_width)
        k, v = self._heads(self.linear_k(x)), self._heads(self.linear_v(x))
        logits = einsum("...qc,...kc->...qk", q, k, self.bf16_products)  # (..., H, Q, Q), fp32
        for bias in biases:
            logits = logits + bias
        out = jnp.swapaxes(einsum("...qk,...kc->...qc", jax.nn.softmax(logits, axis=-1), v, self.bf16_products),
                           -2, -3)  # (..., Q, H, c)
        gate = jax.nn.sigmoid(self.linear_g(x)).reshape(out.shape)
        return self.linear_o((out * gate).reshape(out.shape[:-2] + (-1,)))


class TriangleAttention(nnx.Module):
    """Each row of the pair state attends along itself, biased by the pair state's projection
    (around the starting node); around the ending node the same on the transposed state."""

    def __init__(self, dim: int, head_width: int, heads: int, starting: bool, rngs: nnx.Rngs, inf: float = 1e9):
        self.starting, self.inf = starting, inf
        self.layer_norm = layer_norm(dim, rngs)
        self.linear = linear(dim, heads, rngs, bias=False)
        self.mha = GatedAttention(dim, head_width, heads, rngs)

    def __call__(self, z: jax.Array, pair_mask: jax.Array, chunk_size: int | None = None) -> jax.Array:
        """z (B, I, J, C), pair_mask (B, I, J); returns the update (B, I, J, C)."""
        if not self.starting:
            z, pair_mask = jnp.swapaxes(z, 1, 2), jnp.swapaxes(pair_mask, 1, 2)
        z = self.layer_norm(z)
        mask_bias = (self.inf * (pair_mask - 1))[:, :, None, None, :]  # (B, I, 1, 1, J)
        triangle_bias = jnp.transpose(self.linear(z), (0, 3, 1, 2))[:, None]  # (B, 1, H, J, J), every row's

        def attend_rows(rows: jax.Array, row_mask_bias: jax.Array) -> jax.Array:
            return self.mha(rows, [row_mask_bias, triangle_bias])

        out = rows_in_chunks(attend_rows, chunk_size, z, mask_bias)
        return out if self.starting else jnp.swapaxes(out, 1, 2)

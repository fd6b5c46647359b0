"""ESMFold2's shared building blocks, as transformers' ``modeling_esmfold2.py`` writes them
(``EsmFold2LayerNorm``, ``EsmFold2RMSNorm``, ``EsmFold2Transition``, ``EsmFold2AdaptiveLayerNorm``,
``EsmFold2FourierEmbedding``, ``EsmFold2SwiGLU``, the eager attention), attribute names its
checkpoint keys: a torch ``Linear``'s ``weight`` (out, in) is our ``kernel`` (in, out), a LayerNorm's
``weight`` our ``scale``; the Fourier buffers ``frequencies``/``phases`` are stored in the checkpoint
and are ``nnx.Param`` here so they load with the weights (nothing trains them).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from flax import nnx

from flamino_core.model.esmfold.pair import rows_in_chunks

LN_EPS = 1e-5  # torch.nn.LayerNorm's default: every EsmFold2LayerNorm and the adaptive norms
RMS_EPS = 1e-6  # EsmFold2RMSNorm's default, the atom layers' only setting


def linear(d_in: int, d_out: int, rngs: nnx.Rngs, bias: bool = False) -> nnx.Linear:
    """A torch ``nn.Linear``; the reference states ``bias`` at every site, so callers do too."""
    return nnx.Linear(d_in, d_out, use_bias=bias, rngs=rngs)


class LayerNorm(nnx.LayerNorm):
    """``EsmFold2LayerNorm``: normalises in fp32 and returns the input's dtype. Two-pass variance
    (``use_fast_variance=False``), as torch computes it: E[x^2]-E[x]^2 loses digits when a feature's
    mean is large next to its spread, which the pair state's can be."""

    def __init__(self, dim: int, rngs: nnx.Rngs, bias: bool = True, eps: float = LN_EPS):
        super().__init__(dim, epsilon=eps, use_bias=bias, use_fast_variance=False, param_dtype=jnp.float32,
                         rngs=rngs)

    def __call__(self, x: jax.Array, *args, **kwargs) -> jax.Array:
        return super().__call__(x.astype(jnp.float32), *args, **kwargs).astype(x.dtype)


def plain_layer_norm(x: jax.Array, eps: float = LN_EPS) -> jax.Array:
    """A weightless LayerNorm in fp32 (``F.layer_norm(x.float(), shape, None, None, eps)``)."""
    x = x.astype(jnp.float32)
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + eps)


def rms_norm(x: jax.Array, eps: float = RMS_EPS) -> jax.Array:
    """``EsmFold2RMSNorm``: weightless, ``x * rsqrt(mean(x^2) + eps)`` in fp32, back to x's dtype."""
    x32 = x.astype(jnp.float32)
    return (x32 * jax.lax.rsqrt(jnp.mean(jnp.square(x32), axis=-1, keepdims=True) + eps)).astype(x.dtype)


class SwiGLU(nnx.Module):
    """``EsmFold2SwiGLU``: ``down_proj(up * silu(gate))`` with ``gate, up`` the two halves (in that
    order) of one fused ``gate_up_proj``; no biases."""

    def __init__(self, hidden_size: int, intermediate_size: int, rngs: nnx.Rngs):
        self.gate_up_proj = linear(hidden_size, 2 * intermediate_size, rngs)
        self.down_proj = linear(intermediate_size, hidden_size, rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        gate, up = jnp.split(self.gate_up_proj(x), 2, axis=-1)
        return self.down_proj(up * jax.nn.silu(gate))


class Transition(nnx.Module):
    """``EsmFold2Transition``: ``x + mlp(norm(x))``, optionally ``chunk_size`` tokens (axis 1) at a
    time. Each token is computed on its own, so chunking changes only the peak memory; the reference
    passes ``None`` in the denoiser's conditioning and callers state it as it does."""

    def __init__(self, hidden_size: int, intermediate_size: int, chunk_size: int | None, rngs: nnx.Rngs):
        self.norm = LayerNorm(hidden_size, rngs)
        self.mlp = SwiGLU(hidden_size, intermediate_size, rngs)
        self.chunk_size = chunk_size

    def __call__(self, x: jax.Array) -> jax.Array:
        return rows_in_chunks(lambda rows: rows + self.mlp(self.norm(rows)), self.chunk_size, x)


class AdaptiveLayerNorm(nnx.Module):
    """``EsmFold2AdaptiveLayerNorm`` (adaLN-Zero): ``sigmoid(gate_proj(c)) * LN(x) + shift_proj(c)``
    with ``c = cond_norm(single)``, a LayerNorm with a weight and no bias; ``LN(x)`` is weightless."""

    def __init__(self, hidden_size: int, rngs: nnx.Rngs, eps: float = LN_EPS):
        self.eps = eps
        self.cond_norm = LayerNorm(hidden_size, rngs, bias=False, eps=eps)
        self.gate_proj = linear(hidden_size, hidden_size, rngs, bias=True)
        self.shift_proj = linear(hidden_size, hidden_size, rngs)

    def __call__(self, x: jax.Array, single: jax.Array) -> jax.Array:
        normed = plain_layer_norm(x, self.eps)
        cond = self.cond_norm(single)
        return (jax.nn.sigmoid(self.gate_proj(cond)) * normed + self.shift_proj(cond)).astype(x.dtype)


class FourierEmbedding(nnx.Module):
    """``EsmFold2FourierEmbedding``: ``cos(2 pi (t * frequencies + phases))``, the random
    frequencies and phases drawn once at training time and read from the checkpoint."""

    def __init__(self, dim: int, rngs: nnx.Rngs):
        self.frequencies = nnx.Param(jax.random.normal(rngs.params(), (dim,), jnp.float32))
        self.phases = nnx.Param(jax.random.normal(rngs.params(), (dim,), jnp.float32))

    def __call__(self, t: jax.Array) -> jax.Array:
        """t (B,) fp32; returns (B, dim)."""
        return jnp.cos(2.0 * math.pi * (t[:, None] * self.frequencies[None, :] + self.phases[None, :]))


def attention(q: jax.Array, k: jax.Array, v: jax.Array, scaling: float, bias: jax.Array | None = None,
              mask: jax.Array | None = None) -> jax.Array:
    """Attention as the reference's interface runs it: ``softmax(q k^T * scaling + bias)`` in fp32,
    then ``@ v``. q/k/v (B, H, N, D); ``bias`` additive, broadcast to (B, H, Q, K); ``mask`` boolean,
    broadcast to (B, H, Q, K), False keys given the dtype's lowest value as the reference's eager
    path adds it (``torch.finfo.min``): a query with no key left then averages every value evenly
    rather than giving NaN (only padding atoms far from any real one meet that, and nothing real
    reads them). Returns (B, Q, H, D), the heads not yet merged."""
    logits = jnp.einsum("bhqd,bhkd->bhqk", q, k) * scaling
    if bias is not None:
        logits = logits + bias
    if mask is not None:
        logits = jnp.where(mask, logits, jnp.finfo(logits.dtype).min)
    weights = jax.nn.softmax(logits.astype(jnp.float32), axis=-1).astype(q.dtype)
    return jnp.einsum("bhqk,bhkd->bqhd", weights, v)

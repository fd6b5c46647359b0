"""Attention on the (B, T, H, hd) layout the projections produce, without head transposes.

The model's own pure-JAX attention (``model.attend``, the path called "xla") works heads-major
and keeps maps for capture; the two paths here are the faster alternatives an engine picks
through ``hardware.choose``: flamino's fused CPU kernel and ``jax.nn.dot_product_attention``
(cuDNN on a GPU with bf16 inputs, XLA's implementation otherwise).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from . import fused_attention


def attend_tokens_major(path: str, q: jax.Array, k: jax.Array, v: jax.Array, cos: jax.Array, sin: jax.Array,
                        q_positions: jax.Array, key_bias: jax.Array, scale: float,
                        dtype: str = "float32") -> jax.Array:
    """softmax(rot(q * scale) rot(k)^T + key_bias) v per row and head.

    Args:
      path: "fused" or "dot-product-attention".
      q: (B, Tq, H, hd) unscaled queries; k, v: (B, T, H, hd), key j at position j.
      cos, sin: (T, hd / 2) rotary tables for positions 0..T-1.
      q_positions: (B, Tq) positions of the queries.
      key_bias: (B, T), 0 for real tokens and -inf for padding (rows are right-padded).
      scale: multiplies q before rotary, as in both references.
      dtype: dot-product-attention's input type ("bfloat16": cuDNN on a GPU).

    Returns:
      (B, Tq, H, hd) float32.
    """
    if path == "fused":
        # Scaling, rotary, scores, bias, online softmax and P V in one C++ call (csrc/).
        return fused_attention.fused_attention(q, k, v, cos, sin, q_positions, key_bias, scale)
    if path != "dot-product-attention":
        raise ValueError(f"unknown attention path {path!r}")
    from .model import RotaryEmbedding  # the references' rotary, written once (model imports us)

    rotate = RotaryEmbedding.rotate
    q = rotate(q * scale, cos[q_positions][:, :, None], sin[q_positions][:, :, None])  # heads broadcast
    k = rotate(k, cos[:, None], sin[:, None])
    dtype = jnp.dtype(dtype)
    real = jnp.isfinite(key_bias)  # (B, T)
    # cuDNN's fused attention takes bf16/fp16 and right padding as key lengths; XLA's takes a mask.
    cudnn = jax.default_backend() == "gpu" and dtype != jnp.float32
    out = jax.nn.dot_product_attention(
        q.astype(dtype), k.astype(dtype), v.astype(dtype), scale=1.0,
        mask=None if cudnn else real[:, None, None, :],
        key_value_seq_lengths=real.sum(-1).astype(jnp.int32) if cudnn else None,
        implementation="cudnn" if cudnn else "xla",
    )
    return out.astype(jnp.float32)

"""Attention without captured maps: the pure-JAX heads-major path and the tokens-major paths.

``attend`` is the model's pure-JAX attention (the path called "xla", heads-major; the model's
capture branch keeps its own probabilities for nnx.sow). ``attend_tokens_major`` works on the
(B, T, H, hd) layout the projections produce, without head transposes: flamino's fused CPU
kernel and ``jax.nn.dot_product_attention`` (cuDNN on a GPU with bf16 inputs, XLA's
implementation otherwise), which an engine picks through ``hardware.choose``. Every path
honours packed rows (``segments.PackedRows``): rotary positions per token and attention only
within each sequence.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from . import fused_attention
from .segments import PackedRows, same_segment

# Rows of up to ALL_HEADS_AT_ONCE_UP_TO tokens: attention for all heads of the batch at once.
# Longer rows: a few heads at a time, as many as keep their scores within ATTENTION_CHUNK_BYTES
# (see ``attend``).
ATTENTION_CHUNK_BYTES = 2 << 20
ALL_HEADS_AT_ONCE_UP_TO = 192  # tokens


def _attend_heads(q: jax.Array, k: jax.Array, v: jax.Array, key_bias: jax.Array,
                  segments: jax.Array | None = None) -> jax.Array:
    scores = q @ k.swapaxes(-1, -2) + key_bias
    if segments is not None:  # packed rows: a query sees only its own sequence's keys
        scores = jnp.where(same_segment(segments), scores, -jnp.inf)
    # softmax(s) @ v computed as (exp(s - max) @ v) / sum(exp(s - max)): normalising the (T, hd)
    # output instead of the (T, T) probabilities; same result to float rounding. On XLA:CPU,
    # jax.nn.softmax followed by a matmul was 3-4x slower (the normalisation is fused into the
    # matmul's operand and recomputed).
    weights = jnp.exp(scores - scores.max(-1, keepdims=True))
    return (weights @ v) / weights.sum(-1, keepdims=True)


def attend(q: jax.Array, k: jax.Array, v: jax.Array, key_bias: jax.Array,
           segments: jax.Array | None = None) -> jax.Array:
    """softmax(q k^T + key_bias) v for q, k, v (B, H, T, hd) and key_bias (B, 1, 1, T).

    ``segments`` (B, T): the segment ids of packed rows (``segments.PackedRows``); a query then
    attends only to keys of its own segment.

    For long rows the (B, H, T, T) scores of a whole batch fall far out of cache, and XLA:CPU
    slows down several-fold (measured: B=16, T=302, t6 heads: 204 ms all at once, 44 ms a few
    heads at a time). Beyond ``ALL_HEADS_AT_ONCE_UP_TO`` tokens, heads of all rows are flattened
    and mapped over in chunks whose scores fit in ``ATTENTION_CHUNK_BYTES``.
    """
    batch, heads, seq_len, head_dim = q.shape
    chunk = max(1, ATTENTION_CHUNK_BYTES // (seq_len * seq_len * 4))
    if seq_len <= ALL_HEADS_AT_ONCE_UP_TO or chunk >= batch * heads:
        return _attend_heads(q, k, v, key_bias, None if segments is None else segments[:, None, :])
    flat = lambda a: a.reshape(batch * heads, *a.shape[2:])  # noqa: E731
    bias = flat(jnp.broadcast_to(key_bias, (batch, heads, 1, seq_len)))
    operands = (flat(q), flat(k), flat(v), bias)
    if segments is not None:  # each flattened head carries its row's segment ids
        operands += (flat(jnp.broadcast_to(segments[:, None, :], (batch, heads, seq_len))),)
    out = jax.lax.map(lambda a: _attend_heads(*a), operands, batch_size=chunk)
    return out.reshape(batch, heads, seq_len, head_dim)


def attend_tokens_major(path: str, q: jax.Array, k: jax.Array, v: jax.Array, cos: jax.Array, sin: jax.Array,
                        q_positions: jax.Array, key_bias: jax.Array, scale: float,
                        dtype: str = "float32", rows: PackedRows | None = None) -> jax.Array:
    """softmax(rot(q * scale) rot(k)^T + key_bias) v per row and head.

    Args:
      path: "fused" or "dot-product-attention".
      q: (B, Tq, H, hd) unscaled queries; k, v: (B, T, H, hd), key j at position j.
      cos, sin: (T, hd / 2) rotary tables for positions 0..T-1.
      q_positions: (B, Tq) positions of the queries.
      key_bias: (B, T), 0 for real tokens and -inf for padding (rows are right-padded).
      scale: multiplies q before rotary, as in both references.
      dtype: dot-product-attention's input type ("bfloat16": cuDNN on a GPU).
      rows: packed rows (queries are then the row's own tokens, Tq == T): positions of keys and
        queries from it, and each query attends only to its own sequence.

    Returns:
      (B, Tq, H, hd) float32.
    """
    if path == "fused":
        # Scaling, rotary, scores, bias, online softmax and P V in one C++ call (csrc/).
        if rows is None:
            return fused_attention.fused_attention(q, k, v, cos, sin, q_positions, key_bias, scale)
        return fused_attention.fused_attention(q, k, v, cos, sin, rows.positions, key_bias, scale,
                                               rows.positions, rows.key_start, rows.key_stop)
    if path != "dot-product-attention":
        raise ValueError(f"unknown attention path {path!r}")
    from .model import RotaryEmbedding  # the references' rotary, written once (model imports us)

    rotate = RotaryEmbedding.rotate
    k_positions = jnp.arange(k.shape[1])[None] if rows is None else rows.positions
    if rows is not None:
        q_positions = rows.positions
    q = rotate(q * scale, cos[q_positions][:, :, None], sin[q_positions][:, :, None])  # heads broadcast
    k = rotate(k, cos[k_positions][:, :, None], sin[k_positions][:, :, None])
    dtype = jnp.dtype(dtype)
    real = jnp.isfinite(key_bias)  # (B, T)
    # cuDNN's fused attention takes bf16/fp16 and right padding as key lengths; XLA's takes a
    # mask (and is what packed rows use: a block-diagonal mask).
    cudnn = jax.default_backend() == "gpu" and dtype != jnp.float32 and rows is None
    mask = real[:, None, None, :]
    if rows is not None:
        mask = mask & same_segment(rows.segments)[:, None]
    out = jax.nn.dot_product_attention(
        q.astype(dtype), k.astype(dtype), v.astype(dtype), scale=1.0,
        mask=None if cudnn else mask,
        key_value_seq_lengths=real.sum(-1).astype(jnp.int32) if cudnn else None,
        implementation="cudnn" if cudnn else "xla",
    )
    return out.astype(jnp.float32)

"""Attention, one contract for every implementation: ``attend(q, k, v, positions, spans, impl)``.

q, k and v are tokens-major, (B, T, H, hd), the layout the projections produce. ``positions``
says where each query and key sits for rotary, ``spans`` which keys each query may see; both
come from the model's boundary (``segments.Layout``: a row of one sequence is one segment, a
packed row several). ``impl`` is a value, chosen once per engine by ``hardware.choose``:

- ``fused``: flamino's C++ kernel on XLA:CPU (``fused_attention``), the CPU default when built;
- ``xla``: pure JAX, the fallback everywhere;
- ``pallas-flash``: flash attention on a TPU, in the bf16 fast mode only (bf16 inputs, fp32
  softmax statistics and accumulation, the scores never leave the chip's vector memory): rows of
  up to ``flash_tpu.MAX_WIDTH`` tokens in flamino's own kernel (``flash_tpu``: tokens-major,
  rotary inside; its output bf16), wider ones in Pallas's (heads-major); rows whose width is not
  a multiple of ``FLASH_BLOCK`` take ``dot-product-attention``;
- ``dot-product-attention``: ``jax.nn.dot_product_attention``, the TPU and GPU default; cuDNN's
  fused attention when ``impl.cudnn`` (bf16 inputs on a GPU) for rows of one sequence, XLA's
  implementation with a mask otherwise. Rows wider than ``LONG_ROW_TOKENS`` (``--long full``
  beyond the training length) take the pure-JAX arithmetic a few heads at a time instead, so a
  10,000-residue pass holds one head's scores, not all of them (same numbers: softmax over
  every key of each query, no online rescaling).

Capturing attention maps is the same call with ``probabilities=True``: it always runs the
pure-JAX arithmetic, which keeps the (B, H, Tq, Tk) probabilities (for ``nnx.sow``).
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
from flax import struct

from flamino_core.model import flash_tpu, fused_attention
from flamino_core.model.rotary import rotate_at

PATHS = ("fused", "xla", "dot-product-attention", "pallas-flash")
# Pallas's TPU flash attention walks the keys in blocks; a row's width must be a multiple of the
# block (packed rows are multiples of 128 tokens, long rows of 256; rows of one sequence are
# padded to 16-token buckets and mostly are not). Wider blocks where the width allows: fewer grid
# steps, each a larger matmul on the chip's 128x128 units. Measured on a TPU v5e (t33, bf16, the
# 64-protein set in packed 1,024-token rows; docs/accelerators.md): the widest block 128: 0.693 s,
# 256: 0.448 s, 512: 0.382 s, 1,024 (a packed row in one block): 0.369-0.370 s.
FLASH_BLOCK = 128
FLASH_BLOCK_MAX = 1024
# Pure JAX, rows of up to ALL_HEADS_AT_ONCE_UP_TO keys: attention for all heads of the batch at
# once. Longer rows: a few heads at a time, as many as keep their scores within
# ATTENTION_CHUNK_BYTES (see ``_pure_jax``).
ATTENTION_CHUNK_BYTES = 2 << 20
ALL_HEADS_AT_ONCE_UP_TO = 192  # tokens
# dot_product_attention computes every head's (Tq, Tk) scores at once: for ESM-2 650M's 20 heads
# and a 10,000-residue row, 8 GB per layer, half a 16 GiB chip. Beyond the widest training row
# (1,024 tokens) and twice that, rows go a few heads at a time within LONG_ROW_CHUNK_BYTES (an
# accelerator's memory, not a CPU cache, is the bound there).
LONG_ROW_TOKENS = 2048
LONG_ROW_CHUNK_BYTES = 1 << 30


@dataclasses.dataclass(frozen=True)
class AttentionImpl:
    """How attention is computed: a hashable value, a static argument of the jitted passes."""

    path: str = "xla"  # one of PATHS
    dtype: str = "float32"  # dot_product_attention's input type ("bfloat16" with cuDNN)
    cudnn: bool = False  # dot_product_attention runs cuDNN's kernel (GPU, bf16) on rows of one sequence

    def __post_init__(self):
        if self.path not in PATHS:
            raise ValueError(f"unknown attention path {self.path!r}: choose one of {', '.join(PATHS)}")

    def describe(self) -> str:
        """What runs, in words (the start of ``hardware.Backend.attention_why``)."""
        if self.path == "fused":
            return f"C++ kernel, {fused_attention.status().variant}"
        if self.path == "xla":
            return "pure JAX"
        if self.path == "pallas-flash":
            return (f"Pallas flash attention on bf16 inputs (rows of a multiple of {FLASH_BLOCK} tokens; "
                    "others jax.nn.dot_product_attention)")
        if self.cudnn:
            return "jax.nn.dot_product_attention, cuDNN on bf16 inputs (XLA's for packed rows)"
        return "jax.nn.dot_product_attention, XLA implementation"


class Positions(NamedTuple):
    """Rotary positions: (B, Tq) of the queries, (B, Tk) of the keys (int32)."""

    queries: jax.Array
    keys: jax.Array


@struct.dataclass
class Spans:
    """The keys each query may see: ``start <= key < stop``, (B, Tq) int32 each (real keys only:
    padding is outside every span)."""

    start: jax.Array
    stop: jax.Array
    # Every query of a row sees the same keys (rows of one sequence): the mask is one (B, Tk)
    # row of key padding, not a (B, Tq, Tk) block. Static: it picks the arithmetic.
    shared: bool = struct.field(pytree_node=False, default=False)

    def bounds(self) -> tuple[jax.Array, jax.Array]:
        """(start, stop), (B, Tq) each, or (B, 1) each when the queries of a row share them."""
        return (self.start[:, :1], self.stop[:, :1]) if self.shared else (self.start, self.stop)

    def allowed(self, k_len: int) -> jax.Array:
        """(B, 1, Tq or 1, Tk) booleans: which key each query (head axis broadcast) may see."""
        return _allowed(*self.bounds(), k_len)[:, None]


def _allowed(start: jax.Array, stop: jax.Array, k_len: int) -> jax.Array:
    """(..., Tq, Tk) booleans from (..., Tq) spans."""
    keys = jnp.arange(k_len)
    return (keys >= start[..., None]) & (keys < stop[..., None])


def attend(q: jax.Array, k: jax.Array, v: jax.Array, positions: Positions, spans: Spans, impl: AttentionImpl, *,
           table: tuple[jax.Array, jax.Array], scale: float, probabilities: bool = False):
    """softmax(rot(q * scale) rot(k)^T, each query over its span of keys) v, per row and head.

    Args:
      q: (B, Tq, H, hd) queries, unscaled (the q projection's output); k, v: (B, Tk, H, hd).
      positions: rotary positions of queries and keys.
      spans: the keys each query sees.
      impl: the implementation (``hardware.choose``).
      table: rotary (cos, sin), (P, hd / 2) each for positions 0..P-1 (``RotaryEmbedding.table``).
      scale: multiplies q before rotary, as in both references.
      probabilities: also return the (B, H, Tq, Tk) attention probabilities (pure JAX).

    Returns:
      (B, Tq, H, hd) float32 (bf16 from ``flash_tpu``: the fast mode's out projection reads bf16);
      with ``probabilities``, (that, probabilities).
    """
    if probabilities:
        return _pure_jax(q, k, v, positions, spans, table, scale, probabilities=True)
    if impl.path == "fused":
        return _fused(q, k, v, positions, spans, table, scale)
    if impl.path == "pallas-flash":
        # Self-attention over every token (queries picked at masked positions have Tq != Tk).
        if q.shape[1] == k.shape[1] and flash_tpu.fits(q.shape[2], q.shape[3], k.shape[1]):
            return _flash_tokens_major(q, k, v, positions, spans, table, scale)
        if q.shape[1] == k.shape[1] and k.shape[1] % FLASH_BLOCK == 0:
            return _flash(q, k, v, positions, spans, table, scale)
        impl = AttentionImpl("dot-product-attention")
    if impl.path == "dot-product-attention":
        if k.shape[1] > LONG_ROW_TOKENS:
            return _pure_jax(q, k, v, positions, spans, table, scale, chunk_bytes=LONG_ROW_CHUNK_BYTES)
        return _dot_product(q, k, v, positions, spans, table, scale, impl)
    return _pure_jax(q, k, v, positions, spans, table, scale)


# --- fused C++ kernel ----------------------------------------------------------------------------
def _fused(q, k, v, positions, spans, table, scale):
    # Scaling, rotary, scores, spans, online softmax and P V in one C++ call (csrc/). Keys
    # beyond every query's span (right padding) are given -inf: the kernel skips them whole.
    cos, sin = table
    k_len = k.shape[1]
    beyond = jnp.arange(k_len)[None] >= spans.stop.max(axis=1, keepdims=True)  # (B, Tk)
    key_bias = jnp.where(beyond, -jnp.inf, 0.0).astype(jnp.float32)
    if spans.shared:
        # One sequence per row: its keys sit at positions 0..Tk-1 and every query sees keys 0 up
        # to the padding, which key_bias already says. The kernel's plain variant then skips
        # the per-query span bookkeeping (a single 300-residue protein: ~5% of its time).
        return fused_attention.fused_attention(q, k, v, cos, sin, positions.queries, key_bias, scale)
    return fused_attention.fused_attention(q, k, v, cos, sin, positions.queries, key_bias, scale,
                                           positions.keys, spans.start, spans.stop)


# --- jax.nn.dot_product_attention ----------------------------------------------------------------
def _dot_product(q, k, v, positions, spans, table, scale, impl):
    q = rotate_at(q * scale, table, positions.queries)
    k = rotate_at(k, table, positions.keys)
    dtype = jnp.dtype(impl.dtype)
    # cuDNN's fused attention takes bf16/fp16 and right padding as key lengths (rows of one
    # sequence); XLA's takes a mask (and is what packed rows use: block-diagonal).
    cudnn = impl.cudnn and spans.shared
    out = jax.nn.dot_product_attention(
        q.astype(dtype), k.astype(dtype), v.astype(dtype), scale=1.0,
        mask=None if cudnn else spans.allowed(k.shape[1]),
        key_value_seq_lengths=spans.stop[:, 0].astype(jnp.int32) if cudnn else None,
        implementation="cudnn" if cudnn else "xla",
    )
    return out.astype(jnp.float32)


# --- Pallas flash attention (TPU, the bf16 fast mode) --------------------------------------------
def _flash(q, k, v, positions, spans, table, scale):
    from jax.experimental.pallas.ops.tpu import flash_attention as pallas  # TPU only: imported when traced

    q = rotate_at(q * scale, table, positions.queries)
    k = rotate_at(k, table, positions.keys)
    width = k.shape[1]
    start, key_ids = _segment_ids(spans, k.shape[0], width)
    block = next(b for b in (FLASH_BLOCK_MAX, 512, 256, FLASH_BLOCK) if b <= FLASH_BLOCK_MAX and width % b == 0)
    out = pallas.flash_attention(
        *(_heads_major(a).astype(jnp.bfloat16) for a in (q, k, v)),
        segment_ids=pallas.SegmentIds(q=start, kv=key_ids), sm_scale=1.0,
        block_sizes=pallas.BlockSizes(block_q=block, block_k_major=block, block_k=block, block_b=1))
    return _heads_major(out).astype(jnp.float32)


def _segment_ids(spans: Spans, batch: int, width: int) -> tuple[jax.Array, jax.Array]:
    """The flash kernels' mask as segment ids (a query sees the keys of its own id). A token's id
    is its sequence's first key (its span's start: the same for every token of a sequence,
    distinct between the sequences of a packed row); a padding key, outside its own token's span,
    gets -1 and is seen by no query. Queries and keys are the same tokens (Tq == Tk)."""
    start = jnp.broadcast_to(spans.start, (batch, width))
    stop = jnp.broadcast_to(spans.stop, (batch, width))
    return start, jnp.where(jnp.arange(width) < stop, start, -1)


def _flash_tokens_major(q, k, v, positions, spans, table, scale, interpret: bool = False):
    """flamino's TPU kernel (``flash_tpu``): q, k and v as the projections gave them, rotary
    inside. Returns (B, T, H, hd) bf16 (the out projection of the fast mode reads bf16)."""
    batch, width, heads, head_dim = q.shape
    cos, sin = (flash_tpu.lane_table(t, positions.queries, head_dim) for t in table)
    q_ids, kv_ids = _segment_ids(spans, batch, width)
    flat = lambda a: a.reshape(batch, width, heads * head_dim)  # noqa: E731  (no copy)
    out = flash_tpu.rotary_flash(flat(q), flat(k), flat(v), cos, sin, q_ids, kv_ids, head_dim=head_dim,
                                 scale=scale, interpret=interpret)
    return out.reshape(batch, width, heads, head_dim)


# --- pure JAX ------------------------------------------------------------------------------------
def _heads_major(x: jax.Array) -> jax.Array:
    return x.transpose(0, 2, 1, 3)  # (B, T, H, hd) -> (B, H, T, hd)


def _pure_jax(q, k, v, positions, spans, table, scale, probabilities=False, chunk_bytes=ATTENTION_CHUNK_BYTES):
    # q is scaled before rotary is applied, as in both references.
    q = _heads_major(rotate_at(q * scale, table, positions.queries))  # (B, H, Tq, hd)
    k = _heads_major(rotate_at(k, table, positions.keys))  # (B, H, Tk, hd)
    v = _heads_major(v)
    batch, heads, q_len, head_dim = q.shape
    k_len = k.shape[2]
    if probabilities:
        # Heads-major batched matmul with an additive mask (on XLA:CPU several times faster
        # than an einsum followed by a where); the probabilities are returned for nnx.sow.
        scores = q @ k.swapaxes(-1, -2) + _bias(spans.allowed(k_len))  # (B, H, Tq, Tk)
        probs = jax.nn.softmax(scores.astype(jnp.float32), axis=-1)
        return (probs.astype(v.dtype) @ v).transpose(0, 2, 1, 3), probs
    # For long rows the (B, H, Tq, Tk) scores of a whole batch fall far out of cache, and
    # XLA:CPU slows down several-fold (measured: B=16, T=302, t6 heads: 204 ms all at once, 44 ms
    # a few heads at a time). Beyond ALL_HEADS_AT_ONCE_UP_TO keys, heads of all rows are
    # flattened and mapped over in chunks whose scores fit in ``chunk_bytes``.
    chunk = max(1, chunk_bytes // (q_len * k_len * 4))
    start, stop = (a[:, None] for a in spans.bounds())  # (B, 1, Tq or 1): heads broadcast
    if k_len <= ALL_HEADS_AT_ONCE_UP_TO or chunk >= batch * heads:
        return _weighted_values(q, k, v, start, stop).transpose(0, 2, 1, 3)

    def flat(a):  # (B, H, ...) -> (B * H, ...); spans (B, 1, ...) broadcast over heads first
        return jnp.broadcast_to(a, (batch, heads, *a.shape[2:])).reshape(batch * heads, *a.shape[2:])

    operands = tuple(flat(a) for a in (q, k, v, start, stop))
    out = jax.lax.map(lambda a: _weighted_values(*a), operands, batch_size=chunk)
    return out.reshape(batch, heads, q_len, head_dim).transpose(0, 2, 1, 3)


def _bias(allowed: jax.Array) -> jax.Array:
    return jnp.where(allowed, 0.0, -jnp.inf)


def _weighted_values(q, k, v, start, stop):
    """softmax(q k^T over each query's span) v for heads-major q (..., Tq, hd), k and v
    (..., Tk, hd) and spans (..., Tq or 1)."""
    scores = q @ k.swapaxes(-1, -2) + _bias(_allowed(start, stop, k.shape[-2]))
    # softmax(s) @ v computed as (exp(s - max) @ v) / sum(exp(s - max)): normalising the (Tq, hd)
    # output instead of the (Tq, Tk) probabilities; same result to float rounding. On XLA:CPU,
    # jax.nn.softmax followed by a matmul was 3-4x slower (the normalisation is fused into the
    # matmul's operand and recomputed).
    weights = jnp.exp(scores - scores.max(-1, keepdims=True))
    return (weights @ v) / weights.sum(-1, keepdims=True)

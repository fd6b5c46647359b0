"""The fast mode's attention on a TPU in flamino's own Pallas kernel: rotary and the heads'
layout inside it.

Pallas's flash kernel (``attention._flash``) takes heads-major (B, H, T, hd) bf16 inputs: q and k
rotated and q, k and v transposed before it, its output transposed back. On a TPU v5e (t33, the
64-protein set, docs/accelerators.md) that moving and rotating took about a quarter of the fast
mode's time, more than the kernel itself. This kernel reads the projections' own tokens-major
(B, T, H * hd) arrays in 128-lane tiles, each ``128 // hd`` heads wide (two of ESM-2 650M's
64-wide heads), rotates q and k in its vector memory, and writes its output tokens-major, as the
out projection reads it.

The arithmetic is the fast mode's: q scaled then rotated in fp32 (the references' order), q and
k then rounded to bf16; scores from bf16 operands accumulated in fp32; softmax in fp32 over each
query's own sequence (segment ids, as Pallas's kernel takes them); probabilities rounded to bf16
for the product with v, accumulated in fp32 and divided by the fp32 sum. A row is one block (at
most ``MAX_WIDTH`` tokens, a packed row), so the softmax is exact, not rescaled online.

How a tile holds several heads: head h's scores are q with the other heads' lanes zeroed
against all of k's lanes (the zeros add nothing), and its output lanes are taken from P_h v. The
chip's matrix unit is 128 wide, so a 64-wide contraction costs as much as a 128-wide one: the
zeroed lanes cost no more than a 64-wide kernel does. rotate_half is a product with a fixed
signed permutation of the tile's lanes (entries 0 and +-1: exact in any precision), which needs
no lane shuffles.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

LANES = 128  # a TPU vector register's lanes, and the matrix unit's width
MAX_WIDTH = 1024  # widest row in one block: a packed row (the (T, T) scores of one head: 4 MB fp32)
QUERY_BLOCK = 512  # queries per grid step: the scores held at once are (QUERY_BLOCK, T)
# Masked scores: a large finite negative (as Pallas's kernel), so a query that sees no key gives
# numbers, not NaN (padding queries always see their own segment; this is a guard).
MASK_VALUE = -0.7 * float(np.finfo(np.float32).max)
VMEM_LIMIT_BYTES = 64 << 20  # the scores, their exponentials and the tiles; a v5e core has 128 MiB


def fits(heads: int, head_dim: int, width: int) -> bool:
    """Whether rows of ``width`` tokens with these heads run in this kernel: whole heads in each
    128-lane tile, and a row within one block (wider rows take Pallas's kernel)."""
    return (LANES % head_dim == 0 and heads % (LANES // head_dim) == 0
            and width % LANES == 0 and width <= MAX_WIDTH)


def half_turn(head_dim: int) -> np.ndarray:
    """The (128, 128) matrix R with x @ R = rotate_half(x) in every head of a tile:
    rotate_half(x) = [-x2, x1] per head, x1 and x2 its two halves."""
    half, turn = head_dim // 2, np.zeros((LANES, LANES), np.float32)
    for lane in range(LANES):
        start = lane - lane % head_dim
        if lane - start < half:
            turn[lane + half, lane] = -1.0  # first half of the head: -x2
        else:
            turn[lane - half, lane] = 1.0  # second half: x1
    return turn


def lane_table(table: jax.Array, positions: jax.Array, head_dim: int) -> jax.Array:
    """The rotary table's rows at each token's position, as the tile's lanes read them:
    (B, T, 128) from a (P, hd / 2) table and (B, T) positions; both halves of every head hold
    the same angles (the references' cos and sin repeat them)."""
    rows = table[positions]  # (B, T, hd / 2)
    return jnp.tile(rows, (1, 1, 2 * (LANES // head_dim)))


def rotary_flash(q: jax.Array, k: jax.Array, v: jax.Array, cos: jax.Array, sin: jax.Array,
                 q_ids: jax.Array, kv_ids: jax.Array, *, head_dim: int, scale: float,
                 query_block: int | None = None, interpret: bool = False) -> jax.Array:
    """softmax(rot(q * scale) rot(k)^T over keys of the query's segment) v, per head.

    Args:
      q, k, v: (B, T, H * hd) tokens-major, the projections' outputs (bf16 or fp32).
      cos, sin: (B, T, 128) fp32, ``lane_table`` of the rotary table at the tokens' positions
        (cos 1 and sin 0 for a family without rotary).
      q_ids, kv_ids: (B, T) int32 segment ids: a query sees the keys of its own id.
      head_dim: hd; ``fits`` must hold.
      scale: multiplies q before rotary.
      query_block: queries per grid step (``QUERY_BLOCK`` or the row, whichever is narrower).
      interpret: run the kernel in Pallas's interpreter (a CPU's tests).

    Returns:
      (B, T, H * hd) bf16, tokens-major.
    """
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    batch, width, dim = q.shape
    block = min(query_block or QUERY_BLOCK, width)
    if width % block:
        block = width
    grid = (batch, width // block, dim // LANES)
    # A query's ids fill a row of lanes and a key's a row of sublanes, as Pallas's kernel takes them.
    q_ids = jnp.broadcast_to(q_ids.astype(jnp.int32)[:, :, None], (batch, width, LANES))
    kv_ids = jnp.broadcast_to(kv_ids.astype(jnp.int32)[:, None, :], (batch, 8, width))
    turn = jnp.asarray(half_turn(head_dim))

    queries = pl.BlockSpec((None, block, LANES), lambda b, i, h: (b, i, h))
    keys = pl.BlockSpec((None, width, LANES), lambda b, i, h: (b, 0, h))
    query_table = pl.BlockSpec((None, block, LANES), lambda b, i, h: (b, i, 0))  # the same for every tile
    key_table = pl.BlockSpec((None, width, LANES), lambda b, i, h: (b, 0, 0))
    kernel = functools.partial(_kernel, head_dim=head_dim, scale=scale)
    return pl.pallas_call(
        kernel,
        grid=grid,
        in_specs=[queries, keys, keys, query_table, query_table, key_table, key_table,
                  pl.BlockSpec((LANES, LANES), lambda b, i, h: (0, 0)),
                  pl.BlockSpec((None, block, LANES), lambda b, i, h: (b, i, 0)),
                  pl.BlockSpec((None, 8, width), lambda b, i, h: (b, 0, 0))],
        out_specs=queries,
        out_shape=jax.ShapeDtypeStruct((batch, width, dim), jnp.bfloat16),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "parallel"),
                                             vmem_limit_bytes=VMEM_LIMIT_BYTES),
        interpret=interpret,
    )(q, k, v, cos, sin, cos, sin, turn, q_ids, kv_ids)


def _rotated(x: jax.Array, cos: jax.Array, sin: jax.Array, turn: jax.Array, scale: float = 1.0) -> jax.Array:
    """rot(x * scale) in fp32 for a (rows, 128) tile: x * cos + rotate_half(x) * sin, with
    rotate_half(x * scale) = (x @ R) * scale exactly: R's entries are 0 and +-1, so each output
    lane is one input lane, exact in a bf16 pass for bf16 x; an fp32 x is split into three bf16
    parts that sum to it exactly (8 + 8 + 8 bits of its 24), each passed through R on its own."""
    turn = turn.astype(jnp.bfloat16)
    if x.dtype == jnp.float32:
        high = x.astype(jnp.bfloat16)
        rest = x - high.astype(jnp.float32)
        middle = rest.astype(jnp.bfloat16)
        low = (rest - middle.astype(jnp.float32)).astype(jnp.bfloat16)
        parts = (high, middle, low)
    else:
        parts = (x.astype(jnp.bfloat16),)
    turned = sum(jnp.dot(part, turn, preferred_element_type=jnp.float32) for part in parts)
    x = x.astype(jnp.float32)
    if scale != 1.0:
        x, turned = x * scale, turned * scale
    return x * cos + turned * sin


def _kernel(q_ref, k_ref, v_ref, q_cos_ref, q_sin_ref, k_cos_ref, k_sin_ref, turn_ref, q_ids_ref, kv_ids_ref,
            out_ref, *, head_dim: int, scale: float):
    turn = turn_ref[...]
    q = _rotated(q_ref[...], q_cos_ref[...], q_sin_ref[...], turn, scale)  # (Tq, 128) fp32
    k = _rotated(k_ref[...], k_cos_ref[...], k_sin_ref[...], turn).astype(jnp.bfloat16)  # (T, 128)
    v = v_ref[...].astype(jnp.bfloat16)
    queries, width = q.shape[0], k.shape[0]
    same = jnp.tile(q_ids_ref[...], (1, width // LANES)) == kv_ids_ref[:1, :]  # (Tq, T)
    bias = jnp.where(same, 0.0, MASK_VALUE)
    lane = jax.lax.broadcasted_iota(jnp.int32, (queries, LANES), 1)
    out = jnp.zeros((queries, LANES), jnp.float32)
    for head in range(LANES // head_dim):
        mine = (lane >= head * head_dim) & (lane < (head + 1) * head_dim)
        q_head = jnp.where(mine, q, 0.0).astype(jnp.bfloat16)  # the other heads' lanes zero
        scores = jax.lax.dot_general(q_head, k, (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32) + bias
        weights = jnp.exp(scores - scores.max(axis=1, keepdims=True))
        total = weights.sum(axis=1, keepdims=True)
        values = jnp.dot(weights.astype(jnp.bfloat16), v, preferred_element_type=jnp.float32) / total
        out = jnp.where(mine, values, out)
    out_ref[...] = out.astype(out_ref.dtype)

"""flamino's TPU attention kernel (``flash_tpu``), run in Pallas's interpreter on the CPU: its
arithmetic against an independent einsum reference that rounds where the fast mode rounds, and its
wiring in ``attention`` against the exact pure-JAX path on packed rows of real proteins. On a
TPU the same kernel is compiled; tests/parity/test_accelerator_flash.py checks it there against fp32.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from flamino_core.alphabet import encode
from flamino_core.model import attention, flash_tpu
from flamino_core.model.rotary import rotate
from flamino_core.model.segments import layout

# Two real proteins packed in one row (P69905 HBA_HUMAN and P68871 HBB_HUMAN, UniProt, their first
# residues), then padding: two sequences, rotary positions starting again at the second.
HBA = "MVLSPADKTNVKAAWGKVGAHAGEYGAEALERMFLSFPTTKTYFPHFDLSHGSAQVKGHGKKVADALTNAVAHVDDMPNALSALSDLHAHKL"
HBB = "MVHLTPEEKSAVTALWGKVNVDEVGGEALGRLLVVYPWTQRFFESFGDLSTPDAVMGNPKVKAHGKKVLGAFSDGLAHLDNLKGTFATLSEL"


def bf16(a):
    return a.astype(jnp.bfloat16).astype(jnp.float32)


def reference(q, k, v, cos, sin, q_ids, kv_ids, head_dim, scale):
    """The fast mode's attention written as einsums over heads: q scaled then rotated (the
    references' rotate_half formula, ``rotary.rotate``) in fp32, q and k rounded to bf16, scores
    and P V in full fp32 precision, P rounded to bf16 before it multiplies v."""
    batch, width, dim = q.shape
    heads = dim // head_dim
    split = lambda a: a.reshape(batch, width, heads, head_dim).astype(jnp.float32)  # noqa: E731
    c, s = cos[:, :, None], sin[:, :, None]
    qr, kr, vr = bf16(rotate(split(q) * scale, c, s)), bf16(rotate(split(k), c, s)), bf16(split(v))
    scores = jnp.einsum("bqhd,bkhd->bhqk", qr, kr, precision="highest")
    scores = jnp.where((q_ids[:, None, :, None] == kv_ids[:, None, None, :]), scores, -1e30)
    weights = jnp.exp(scores - scores.max(-1, keepdims=True))
    out = jnp.einsum("bhqk,bkhd->bqhd", bf16(weights), vr, precision="highest")
    return (out / weights.sum(-1).transpose(0, 2, 1)[..., None]).reshape(batch, width, dim)


def rotary_table(width: int, head_dim: int) -> tuple[jax.Array, jax.Array]:
    """(cos, sin) of ESM-2's rotary angles (base 10,000) for positions 0..width-1: (width, hd / 2) each."""
    inv_freq = 1.0 / (10000 ** (np.arange(0, head_dim, 2) / head_dim))
    angles = np.arange(width)[:, None] * inv_freq
    return jnp.asarray(np.cos(angles), jnp.float32), jnp.asarray(np.sin(angles), jnp.float32)


@pytest.mark.parametrize("head_dim, heads, dtype", [
    (64, 4, jnp.bfloat16),  # two heads a tile (ESM-2 650M / 3B, SaProt): the fast mode's bf16 projections
    (32, 8, jnp.float32),  # four a tile, fp32 inputs (ESM C's q and k come from a LayerNorm in fp32)
    (128, 2, jnp.bfloat16),  # one a tile (ESM-2 15B)
])
def test_the_kernel_computes_the_fast_modes_attention(head_dim, heads, dtype):
    rng = np.random.default_rng(47)
    batch, width = 2, 256
    q, k, v = (jnp.asarray(rng.normal(size=(batch, width, heads * head_dim)) * 2, dtype) for _ in range(3))
    # Row 0: two sequences of 100 and 156 tokens (positions restart); row 1: one of 200 and padding.
    positions = np.stack([np.r_[np.arange(100), np.arange(width - 100)], np.arange(width)])
    q_ids = np.stack([np.where(np.arange(width) < 100, 0, 100), np.zeros(width, int)])
    kv_ids = q_ids.copy()
    kv_ids[1, 200:] = -1
    table = rotary_table(width, head_dim)
    cos, sin = (t[positions] for t in table)
    cos_lanes, sin_lanes = (flash_tpu.lane_table(t, jnp.asarray(positions), head_dim) for t in table)
    out = flash_tpu.rotary_flash(q, k, v, cos_lanes, sin_lanes, jnp.asarray(q_ids), jnp.asarray(kv_ids),
                                 head_dim=head_dim, scale=head_dim**-0.5, query_block=128, interpret=True)
    assert out.shape == q.shape and out.dtype == jnp.bfloat16
    expected = np.asarray(reference(q, k, v, cos, sin, jnp.asarray(q_ids), jnp.asarray(kv_ids),
                                    head_dim, head_dim**-0.5))
    got = np.asarray(out.astype(jnp.float32))
    # The kernel rounds its output to bf16 once; the reference sums in another order, so a value
    # near a rounding boundary of the output (or of a probability) can land one bf16 step away:
    # at most one step of the largest outputs (2^-7 relative), and rarely (measured: 0.005-0.12%
    # of the values). A wrong head, lane, position or segment moves most values by O(1).
    step = 2.0 ** (np.floor(np.log2(np.abs(expected).max())) - 7)
    assert np.abs(got - expected).max() <= step
    assert np.mean(got != np.asarray(bf16(jnp.asarray(expected)))) < 0.01


def test_the_lane_permutation_is_rotate_half():
    """x @ R is rotate_half(x) head by head: ``rotary.rotate`` with cos 0 and sin 1 is [-x2, x1]."""
    x = np.random.default_rng(3).normal(size=(5, flash_tpu.LANES)).astype(np.float32)
    for head_dim in (32, 64, 128):
        heads = x.reshape(5, -1, head_dim)
        turned = rotate(heads, np.zeros((1, 1, head_dim // 2), np.float32), np.ones((1, 1, head_dim // 2), np.float32))
        np.testing.assert_array_equal(x @ flash_tpu.half_turn(head_dim), np.asarray(turned).reshape(5, -1))


def test_which_rows_take_the_kernel():
    assert flash_tpu.fits(20, 64, 1024)  # ESM-2 650M's packed rows
    assert flash_tpu.fits(40, 64, 256) and flash_tpu.fits(40, 128, 512)  # 3B; 15B
    assert not flash_tpu.fits(15, 64, 1024)  # ESM C 300M: 15 heads do not fill 128-lane tiles
    assert not flash_tpu.fits(20, 16, 1024)  # ESM-2 8M: 16-wide heads (the kernel of Pallas then)
    assert not flash_tpu.fits(20, 64, 2048)  # wider than one block: Pallas's kernel
    assert not flash_tpu.fits(20, 64, 1000)  # not whole tiles of tokens


def test_attention_wires_the_kernel_to_packed_rows():
    """``attention._flash_tokens_major`` on a packed row of two real proteins and padding, against
    the exact pure-JAX path (fp32 throughout). The fast mode rounds q and k to bf16 (2^-9
    relative each), so the scores move by about 2^-8 of their size (they are O(1) here: unit
    inputs, hd^-0.5 scaling) and the probabilities by about 1% of theirs, P by another 2^-9:
    the outputs stay within 3% of the largest |v|. Positions that did not restart at the second
    protein, or a padding key seen, move them by O(1)."""
    tokens, segments = packed([HBA, HBB], width=256)
    rows = layout(tokens, segments)
    positions, spans = rows.queries()
    heads, head_dim = 4, 64
    rng = np.random.default_rng(50)
    q, k, v = (jnp.asarray(rng.normal(size=(1, 256, heads, head_dim)), jnp.float32) for _ in range(3))
    table = rotary_table(256, head_dim)
    fast = attention._flash_tokens_major(q, k, v, positions, spans, table, head_dim**-0.5, interpret=True)
    exact = attention._pure_jax(q, k, v, positions, spans, table, head_dim**-0.5)
    real = int(segments.shape[1] - np.sum(np.asarray(tokens) == 1))  # padding queries are not compared
    difference = np.abs(np.asarray(fast.astype(jnp.float32)) - np.asarray(exact))[:, :real]
    assert difference.max() <= 0.03 * float(jnp.abs(v).max())


def packed(sequences, width):
    """One row: each sequence's <cls> ... <eos> one after the other, then padding (<pad> is 1)."""
    ids = [np.asarray(encode(s)) for s in sequences]
    tokens = np.ones((1, width), np.int32)
    segments = np.full((1, width), len(ids) - 1, np.int32)
    at = 0
    for index, row in enumerate(ids):
        tokens[0, at:at + len(row)] = row
        segments[0, at:at + len(row)] = index
        at += len(row)
    return jnp.asarray(tokens), jnp.asarray(segments)

"""Rows that pack several sequences, as the model sees them (JAX; planned by ``packing``).

A packed row holds sequences one after the other, each ``<cls> ... <eos>`` as if it were alone,
then right padding. Its per-token segment ids (non-decreasing along the row, padding in the last
segment) are all the model needs: from them come each token's rotary position (restarting at 0
with every ``<cls>``), the span of keys its query may see (its own sequence: block-diagonal
attention) and the per-sequence sums token dropout rescales by. A sequence in a packed row gets
the numbers it would get alone, up to float summation order.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp


class PackedRows(NamedTuple):
    """Where each token of a (B, T) batch of packed rows belongs (all (B, T) int32)."""

    segments: jax.Array  # segment id, non-decreasing along a row; padding in the last segment
    positions: jax.Array  # rotary position: the token's index within its segment
    key_start: jax.Array  # index of the first token of its segment
    key_stop: jax.Array  # one past the last token of its segment (padding included)


def from_segments(segments: jax.Array) -> PackedRows:
    """The layout of packed rows from their (B, T) segment ids (equal ids must be contiguous)."""
    segments = jnp.asarray(segments, jnp.int32)
    batch, length = segments.shape
    index = jnp.broadcast_to(jnp.arange(length, dtype=jnp.int32), (batch, length))
    change = segments[:, 1:] != segments[:, :-1]
    edge = jnp.ones((batch, 1), bool)
    first = jnp.concatenate([edge, change], axis=1)  # a segment starts here
    last = jnp.concatenate([change, edge], axis=1)  # a segment ends here
    start = jax.lax.cummax(jnp.where(first, index, 0), axis=1)
    stop = jax.lax.cummin(jnp.where(last, index + 1, length), axis=1, reverse=True)
    return PackedRows(segments, index - start, start, stop)


def segment_sum(values: jax.Array, rows: PackedRows) -> jax.Array:
    """For each token, the sum of ``values`` (B, T) over its segment: (B, T), exact for integers."""
    totals = jnp.concatenate([jnp.zeros_like(values[:, :1]), jnp.cumsum(values, axis=1)], axis=1)
    return jnp.take_along_axis(totals, rows.key_stop, axis=1) - jnp.take_along_axis(totals, rows.key_start, axis=1)


def same_segment(segments: jax.Array) -> jax.Array:
    """(..., T, T) booleans: query i and key j are in the same segment; ``segments`` (..., T)."""
    return segments[..., :, None] == segments[..., None, :]

"""Where each token of a batch belongs, computed once at the model's boundary (JAX).

A row holds one sequence, ``<cls> ... <eos>`` then right padding, or (packed by ``planner``)
several sequences one after the other, then padding. Its per-token segment ids (non-decreasing
along the row, padding in the last segment) are all the model needs: from them come each
token's rotary position (restarting at 0 with every ``<cls>``), the span of keys its query may
see (the real tokens of its own sequence: block-diagonal attention) and the per-sequence sums
token dropout rescales by. A row of one sequence is simply one segment (as flax's gemma treats
an unpacked row), so every attention path has the one contract ``attention.attend`` states,
and a sequence in a packed row gets the numbers it would get alone, up to float summation order.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from flamino_core.alphabet import PAD_IDX
from flamino_core.model.attention import Positions, Spans


@struct.dataclass
class Layout:
    """Positions and key spans of a (B, T) batch (all (B, T) int32)."""

    positions: jax.Array  # rotary position: the token's index within its sequence
    key_start: jax.Array  # first key its query may see: its sequence's <cls>
    key_stop: jax.Array  # one past the last real token of its sequence (padding is never a key)
    one_per_row: bool = struct.field(pytree_node=False, default=True)  # no row holds two sequences

    def queries(self, at: jax.Array | None = None) -> tuple[Positions, Spans]:
        """Positions and spans for queries at every token, or at token indices ``at`` (B, Tq)."""
        pick = (lambda a: a) if at is None else (lambda a: jnp.take_along_axis(a, at, axis=1))  # noqa: E731
        spans = Spans(pick(self.key_start), pick(self.key_stop), shared=self.one_per_row)
        return Positions(pick(self.positions), self.positions), spans


def layout(tokens: jax.Array, segments: jax.Array | None = None) -> Layout:
    """The layout of (B, T) right-padded ``tokens``; ``segments``: (B, T) segment ids of packed
    rows (equal ids contiguous, padding in the last segment), None for one sequence per row."""
    batch, length = tokens.shape
    index = jnp.broadcast_to(jnp.arange(length, dtype=jnp.int32), (batch, length))
    real = (tokens != PAD_IDX).sum(axis=1, keepdims=True).astype(jnp.int32)  # right padding: tokens 0..real-1
    if segments is None:
        return Layout(index, jnp.zeros_like(index), jnp.broadcast_to(real, (batch, length)), one_per_row=True)
    segments = jnp.asarray(segments, jnp.int32)
    change = segments[:, 1:] != segments[:, :-1]
    edge = jnp.ones((batch, 1), bool)
    first = jnp.concatenate([edge, change], axis=1)  # a segment starts here
    last = jnp.concatenate([change, edge], axis=1)  # a segment ends here
    start = jax.lax.cummax(jnp.where(first, index, 0), axis=1)
    stop = jax.lax.cummin(jnp.where(last, index + 1, length), axis=1, reverse=True)
    return Layout(index - start, start, jnp.minimum(stop, real), one_per_row=False)


def segment_sum(values: jax.Array, layout: Layout) -> jax.Array:
    """For each token, the sum of ``values`` (B, T) over its sequence's real tokens: (B, T),
    exact for integers."""
    totals = jnp.concatenate([jnp.zeros_like(values[:, :1]), jnp.cumsum(values, axis=1)], axis=1)
    return (jnp.take_along_axis(totals, layout.key_stop, axis=1)
            - jnp.take_along_axis(totals, layout.key_start, axis=1))

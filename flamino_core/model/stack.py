"""What every family's network shares: a stack of blocks applied with ``nnx.scan``, attention
maps sown (``nnx.sow``) only for the layers asked for, hidden states in fair-esm's numbering, and
masked passes whose last block runs at the masked position only.

A family's module (``esm2.ESM2``, ``esmc.ESMC``) subclasses ``LayerStack`` and supplies its
blocks as ``self.layers`` (one module whose arrays carry a leading layer axis, made with
``nnx.vmap``; each called as ``layer(x, positions, spans, attention, at=None, capture=False)``)
and four pieces: ``embed``, ``final_norm``, ``lm_logits`` and ``contacts`` (``None`` where the
family has no contact head).

What a forward pass keeps is one declaration, ``Capture`` (as Flax's Gemma takes a
``SowConfig``): a frozen, hashable value, so the engine's jitted forward takes it as its one
static argument and compiles once per combination actually used. What comes back is typed,
``ModelOutput`` (a pytree: ``jax.device_get`` returns it with NumPy leaves), its shapes in its
docstring.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import jax
import jax.numpy as jnp
from flax import nnx, struct

from flamino_core.alphabet import PAD_IDX
from flamino_core.model.attention import AttentionImpl, Positions, Spans
from flamino_core.model.segments import Layout, layout

PURE_JAX = AttentionImpl("xla")  # the default when a caller names no implementation


@dataclasses.dataclass(frozen=True)
class Capture:
    """What one forward pass keeps.

    hidden: hidden states, fair-esm numbering: 0 is the embedding output, ``num_layers`` the final
      representation (after the final LayerNorm); negatives count from the end.
    attention: 1-based layers whose (B, H, T, T) attention maps to keep (-1: the last). Only these
      are materialised (every layer's when ``contacts``).
    logits: run the LM head.
    contacts: run the contact head (a family without one refuses).
    """

    hidden: tuple[int, ...] = ()
    attention: tuple[int, ...] = ()
    logits: bool = True
    contacts: bool = False


@struct.dataclass
class ModelOutput:
    """A forward pass's outputs for B rows of T tokens.

    hidden: {layer: (B, T, D)} for each of ``Capture.hidden`` (normalised to 0..N).
    logits: (B, T, output width) or None.
    attentions: (B, len(Capture.attention), H, T, T), padding rows and columns zeroed, or None.
    contacts: (B, T-2, T-2) contact probabilities or None.

    ``output["logits"]`` (and ``"representations"`` for ``hidden``) reads a field as the dict of
    earlier versions did.
    """

    hidden: dict
    logits: jax.Array | None = None
    attentions: jax.Array | None = None
    contacts: jax.Array | None = None

    def __getitem__(self, key: str):
        value = self.get(key)
        if value is None:
            raise KeyError(key)
        return value

    def get(self, key: str, default=None):
        value = self.hidden if key == "representations" else getattr(self, key, None)
        return default if value is None else value


class LayerStack(nnx.Module):
    """The forward pass and the masked pass of a stack of pre-norm blocks."""

    layers: nnx.Module
    contact_head: nnx.Module | None = None

    def embed(self, tokens: jax.Array, rows: Layout) -> jax.Array:
        raise NotImplementedError

    def final_norm(self, x: jax.Array) -> jax.Array:
        raise NotImplementedError

    def lm_logits(self, x: jax.Array) -> jax.Array:
        raise NotImplementedError

    def _run_layers(self, start: int, stop: int, x: jax.Array, rows: Layout, attention: AttentionImpl,
                    capture: bool):
        """Apply layers [start, stop) with nnx.scan; returns (x, attention maps or None)."""
        graphdef, state = nnx.split(self.layers)
        positions, spans = rows.queries()
        if not capture and (start, stop) != (0, self.config.num_layers):
            return self._run_part(graphdef, state, start, stop, x, positions, spans, attention), None
        segment = nnx.merge(graphdef, jax.tree.map(lambda a: a[start:stop], state))  # all: no copy

        @nnx.scan(in_axes=(0, nnx.Carry, None, None), out_axes=nnx.Carry)
        def scan_layers(layer: nnx.Module, x: jax.Array, positions: Positions, spans: Spans) -> jax.Array:
            return layer(x, positions, spans, attention, capture=capture)

        if not capture:
            return scan_layers(segment, x, positions, spans), None
        x, sown = nnx.capture(scan_layers, nnx.Intermediate)(segment, x, positions, spans)
        (maps,) = jax.tree.leaves(sown)  # (stop-start, B, H, T, T), stacked by the scan
        return x, maps

    @staticmethod
    def _run_part(graphdef, state, start: int, stop: int, x, positions, spans, attention, emit: bool = False):
        """Layers [start, stop) of the stack, each read from the stacked arrays in its turn.

        Why not a scan over ``a[start:stop]``: XLA materialises a static slice of the stacked
        weights as a copy: a masked pass (layers 0..n-2) held 11/12 of t12's weights twice
        (172 MB of temporaries for 134 MB of weights, measured with ``memory_analysis``), the
        3B model's would not fit a 16 GiB chip beside its weights, and every hidden state kept
        (ESMFold's stem) copied the whole stack. Indexing the stack by the loop's counter reads
        one layer at a time, as the scan over all layers does; the arithmetic is the same.
        """
        def one_layer(x, index):
            layer = nnx.merge(graphdef, jax.tree.map(lambda a: jax.lax.dynamic_index_in_dim(a, index, 0, False), state))
            x = layer(x, positions, spans, attention, capture=False)
            return x, (x if emit else None)

        x, every = jax.lax.scan(one_layer, x, jnp.arange(start, stop))
        return (x, every) if emit else x  # every: (stop - start, B, T, D), the state after each layer

    def masked_logits(self, tokens: jax.Array, positions: jax.Array, attention: AttentionImpl = PURE_JAX) -> jax.Array:
        """LM logits at one position per row, (B, vocab): equal to ``__call__``'s logits there.

        For masked-marginal scans, where each row needs the prediction at its masked position
        only. Layers 1..N-1 run in full (every position feeds the next layer's keys and values),
        but the last layer's queries, feed-forward, final LayerNorm and LM head run at that one
        position: for t6 about a sixth less arithmetic per pass, for t30 about 3% less.
        """
        n = self.config.num_layers
        rows = layout(tokens)
        x = self.embed(tokens, rows)
        if n > 1:
            x, _ = self._run_layers(0, n - 1, x, rows, attention, False)
        graphdef, state = nnx.split(self.layers)
        last = nnx.merge(graphdef, jax.tree.map(lambda a: a[n - 1], state))
        at = positions[:, None]  # (B, 1)
        x_at = self.final_norm(last(x, *rows.queries(at), attention, at=at)[:, 0])  # (B, D)
        return self.lm_logits(x_at)

    def __call__(self, tokens: jax.Array, capture: Capture = Capture(), segments: jax.Array | Layout | None = None,
                 attention: AttentionImpl = PURE_JAX) -> ModelOutput:
        """Run the model on (B, T) tokens, keeping what ``capture`` declares.

        Args:
          tokens: (B, T) int token ids, each row ``<cls> ... <eos>`` right-padded with ``<pad>``,
            or with ``segments`` several such sequences one after the other, then padding.
          capture: what to keep (``Capture``).
          segments: (B, T) int segment ids of packed rows (``segments.layout``: non-decreasing,
            padding in the last segment); each sequence then attends only to itself, with rotary
            positions and token dropout of its own. No attention maps or contacts from packed rows.
            Or a whole ``Layout`` as it is (ESM C's chains in one row, ``esmc_chains.chain_layout``:
            positions run on over the row, each chain's keys its own).
          attention: how attention is computed where no map is captured (``hardware.choose``).
        """
        n = self.config.num_layers
        repr_layers = sorted({layer % (n + 1) for layer in capture.hidden})
        attention_layers = [a % (n + 1) for a in capture.attention]  # -1 is the last layer
        maps_of = set(range(1, n + 1)) if capture.contacts else set(attention_layers)
        if segments is not None and maps_of:
            raise ValueError("attention maps and contacts come from rows of one sequence, not packed rows")
        rows = segments if isinstance(segments, Layout) else layout(tokens, segments)
        x = self.embed(tokens, rows)
        hidden = {0: x} if 0 in repr_layers else {}
        maps: dict[int, jax.Array] = {}
        for start, stop in self._stack_segments(repr_layers, maps_of):
            if stop - start > 1 and not maps_of and all(layer in repr_layers for layer in range(start + 1, stop)):
                # A run of kept layers (single-layer segments merged): one loop emitting each state;
                # one small loop per layer had XLA copy each layer's weights (142 MB of
                # temporaries for t12's 134 MB of weights with every hidden state kept).
                x, every = self._run_part(*nnx.split(self.layers), start, stop, x, *rows.queries(), attention,
                                          emit=True)
                hidden.update({start + offset + 1: every[offset] for offset in range(stop - start - 1)})
                if stop in repr_layers and stop < n:
                    hidden[stop] = x
                continue
            x, seg_maps = self._run_layers(start, stop, x, rows, attention, start + 1 in maps_of)
            if seg_maps is not None:
                for offset in range(stop - start):
                    maps[start + offset + 1] = seg_maps[offset]
            if stop in repr_layers and stop < n:
                hidden[stop] = x
        x = self.final_norm(x)
        if n in repr_layers:
            hidden[n] = x
        heads = self._maps_and_contacts(tokens, maps, attention_layers, capture.contacts) if maps else {}
        return ModelOutput(hidden, self.lm_logits(x) if capture.logits else None, **heads)

    def _stack_segments(self, repr_layers: Sequence[int], capture: set[int]) -> list[tuple[int, int]]:
        """Where to split the stack: at a hidden state to keep or where capturing maps switches
        on or off, so maps are built only for the layers that need them. Segment [start, stop)
        holds layers start+1 .. stop (1-based)."""
        n = self.config.num_layers
        boundaries = [0]
        for layer in range(1, n):
            if layer in repr_layers or ((layer in capture) != (layer + 1 in capture)):
                boundaries.append(layer)
        boundaries.append(n)
        segments = list(zip(boundaries[:-1], boundaries[1:]))
        if capture:
            return segments
        merged: list[tuple[int, int]] = []  # without maps, consecutive one-layer segments run as one
        for start, stop in segments:
            if merged and stop - start == 1 and merged[-1][1] == start and (
                    merged[-1][1] - merged[-1][0] == 1
                    or all(l in repr_layers for l in range(merged[-1][0] + 1, start + 1))):
                merged[-1] = (merged[-1][0], stop)
            else:
                merged.append((start, stop))
        return merged

    def _maps_and_contacts(self, tokens: jax.Array, maps: dict[int, jax.Array], attention_layers: Sequence[int],
                           need_contacts: bool) -> dict[str, jax.Array]:
        not_pad = (tokens != PAD_IDX).astype(jnp.float32)
        pair_mask = (not_pad[:, None, :] * not_pad[:, :, None])[:, None]  # (B, 1, T, T)
        # Padding rows/cols zeroed, as fair-esm does before returning or using the maps.
        maps = {layer: m * pair_mask for layer, m in maps.items()}
        out = {}
        if attention_layers:
            out["attentions"] = jnp.stack([maps[a] for a in attention_layers], axis=1)
        if need_contacts:
            if self.contact_head is None:
                raise ValueError("this model has no contact head")
            stacked = jnp.stack([maps[a] for a in range(1, self.config.num_layers + 1)], axis=1)
            out["contacts"] = self.contact_head(tokens, stacked)
        return out

"""ESM-2 (Lin et al., Science 2023) in Flax NNX.

Attribute names follow fair-esm's checkpoint keys (``embed_tokens``, ``layers.self_attn.q_proj``,
``fc1``, ``emb_layer_norm_after``, ``lm_head``, ``contact_head.regression``), so converting a
checkpoint is a key map plus transposes. Every choice that matters for numerical parity with the
PyTorch references is commented at the line that makes it.
"""

from __future__ import annotations

from typing import Sequence

import jax
import jax.numpy as jnp
from flax import nnx

from flamino_core.alphabet import EOS_IDX, MASK_IDX, PAD_IDX
from flamino_core.model.attention import AttentionImpl, Positions, Spans, attend
from flamino_core.analysis.attention_maps import apc, symmetrize
from flamino_core.model.config import ESM2Config
from flamino_core.model.rotary import RotaryEmbedding
from flamino_core.model.segments import Layout, layout, segment_sum

# Token dropout during training masks 15% of tokens, 80% of which become <mask>; the model
# rescales embeddings by the expected unmasked fraction, at inference too.
MASK_RATIO_TRAIN = 0.15 * 0.8
PURE_JAX = AttentionImpl("xla")  # the default when a caller names no implementation


def gelu(x: jax.Array) -> jax.Array:
    # Exact erf GELU as in fair-esm and HF; jax.nn.gelu's default tanh approximation drifts.
    return jax.nn.gelu(x, approximate=False)


def layer_norm(dim: int, config: ESM2Config, rngs: nnx.Rngs) -> nnx.LayerNorm:
    return nnx.LayerNorm(dim, epsilon=config.layer_norm_eps, rngs=rngs)


def take_tokens(x: jax.Array, at: jax.Array | None) -> jax.Array:
    """x (B, T, ...) at token indices ``at`` (B, Tq), or all of x."""
    if at is None:
        return x
    return jnp.take_along_axis(x, at.reshape(at.shape + (1,) * (x.ndim - 2)), axis=1)


class MultiheadAttention(nnx.Module):
    def __init__(self, config: ESM2Config, rngs: nnx.Rngs):
        dim = config.embed_dim
        self.num_heads = config.attention_heads
        self.head_dim = config.head_dim
        self.scaling = self.head_dim**-0.5
        self.q_proj = nnx.Linear(dim, dim, rngs=rngs)
        self.k_proj = nnx.Linear(dim, dim, rngs=rngs)
        self.v_proj = nnx.Linear(dim, dim, rngs=rngs)
        self.out_proj = nnx.Linear(dim, dim, rngs=rngs)
        self.rot_emb = RotaryEmbedding(self.head_dim, config.rotary_base)

    def _tokens_major(self, x: jax.Array) -> jax.Array:
        batch, seq_len, _ = x.shape
        return x.reshape(batch, seq_len, self.num_heads, self.head_dim)  # (B, T, H, hd), no copy

    def __call__(self, x: jax.Array, positions: Positions, spans: Spans, attention: AttentionImpl,
                 at: jax.Array | None = None, capture: bool = False) -> jax.Array:
        """Self-attention of x (B, T, D) at every token, or at token indices ``at`` (B, Tq)
        (keys and values always from every token). ``positions`` and ``spans`` are the queries'
        (``segments.Layout.queries``). With ``capture`` the probabilities are sown
        (``attention_weights``, (B, H, Tq, T)). Returns (B, Tq, D), what out_proj gives."""
        batch, seq_len, _ = x.shape
        q = self._tokens_major(self.q_proj(take_tokens(x, at)))  # (B, Tq, H, hd), unscaled
        k, v = self._tokens_major(self.k_proj(x)), self._tokens_major(self.v_proj(x))
        out = attend(q, k, v, positions, spans, attention, table=self.rot_emb.table(seq_len),
                     scale=self.scaling, probabilities=capture)
        if capture:
            out, probs = out
            self.sow(nnx.Intermediate, "attention_weights", probs)
        return self.out_proj(out.reshape(batch, q.shape[1], -1))  # (B, Tq, D)


class TransformerLayer(nnx.Module):
    """Pre-LayerNorm block: x + attn(LN(x)), then x + fc2(gelu(fc1(LN(x))))."""

    def __init__(self, config: ESM2Config, rngs: nnx.Rngs):
        self.self_attn_layer_norm = layer_norm(config.embed_dim, config, rngs)
        self.self_attn = MultiheadAttention(config, rngs)
        self.final_layer_norm = layer_norm(config.embed_dim, config, rngs)
        self.fc1 = nnx.Linear(config.embed_dim, config.ffn_dim, rngs=rngs)
        self.fc2 = nnx.Linear(config.ffn_dim, config.embed_dim, rngs=rngs)

    def __call__(self, x: jax.Array, positions: Positions, spans: Spans, attention: AttentionImpl,
                 at: jax.Array | None = None, capture: bool = False) -> jax.Array:
        """The layer's output at every token of x (B, T, D), or at token indices ``at`` (B, Tq):
        (B, Tq, D), the same arithmetic row by row (keys and values from every token)."""
        attended = self.self_attn(self.self_attn_layer_norm(x), positions, spans, attention, at, capture)
        x = take_tokens(x, at) + attended
        return x + self.fc2(gelu(self.fc1(self.final_layer_norm(x))))


class LMHead(nnx.Module):
    """dense -> gelu -> LayerNorm -> decoder tied to the token embedding, plus a bias."""

    def __init__(self, config: ESM2Config, rngs: nnx.Rngs):
        self.dense = nnx.Linear(config.embed_dim, config.embed_dim, rngs=rngs)
        self.layer_norm = layer_norm(config.embed_dim, config, rngs)
        self.bias = nnx.Param(jnp.zeros((config.vocab_size,), jnp.float32))

    def __call__(self, x: jax.Array, embedding: jax.Array) -> jax.Array:
        x = self.layer_norm(gelu(self.dense(x)))
        return x @ embedding.T + self.bias[...]


class ContactPredictionHead(nnx.Module):
    """Logistic regression over APC-corrected, symmetrised attention maps of all layers and heads."""

    def __init__(self, config: ESM2Config, rngs: nnx.Rngs):
        self.regression = nnx.Linear(config.num_layers * config.attention_heads, 1, rngs=rngs)

    def __call__(self, tokens: jax.Array, attentions: jax.Array) -> jax.Array:
        """tokens (B, T); attentions (B, layers, heads, T, T) with padding rows/cols zeroed.

        Returns (B, T-2, T-2) contact probabilities; for a sequence of L residues in a padded
        batch the first (L, L) block is its map (the rest is padding).
        """
        # As fair-esm: zero <eos> rows/cols (in a padded batch <eos> is not the last token),
        # then drop the last and the first (<cls>) position.
        not_eos = (tokens != EOS_IDX).astype(attentions.dtype)
        attentions = attentions * (not_eos[:, None, :] * not_eos[:, :, None])[:, None, None]
        attentions = attentions[..., 1:-1, 1:-1]
        batch, layers, heads, seq_len, _ = attentions.shape
        attentions = attentions.reshape(batch, layers * heads, seq_len, seq_len)
        features = apc(symmetrize(attentions)).transpose(0, 2, 3, 1)  # (B, T-2, T-2, layers*heads)
        return jax.nn.sigmoid(self.regression(features)[..., 0])


class ESM2(nnx.Module):
    """The ESM-2 masked language model."""

    def __init__(self, config: ESM2Config, rngs: nnx.Rngs):
        self.config = config
        self.embed_tokens = nnx.Embed(config.vocab_size, config.embed_dim, rngs=rngs)

        @nnx.split_rngs(splits=config.num_layers)
        @nnx.vmap(in_axes=(0,), out_axes=0)
        def make_layers(rngs: nnx.Rngs) -> TransformerLayer:
            return TransformerLayer(config, rngs)

        self.layers = make_layers(rngs)  # one module whose arrays carry a leading layer axis
        self.emb_layer_norm_after = layer_norm(config.embed_dim, config, rngs)
        self.lm_head = LMHead(config, rngs)
        self.contact_head = ContactPredictionHead(config, rngs)

    # --- pieces of the forward pass ------------------------------------------------------
    def embed(self, tokens: jax.Array, rows: Layout) -> jax.Array:
        """Token embeddings with token dropout applied exactly as the references do at inference."""
        x = self.embed_tokens(tokens)  # (B, T, D)
        is_pad = tokens == PAD_IDX
        if self.config.token_dropout:
            is_mask = tokens == MASK_IDX
            x = jnp.where(is_mask[..., None], 0.0, x)
            # Observed mask fraction per sequence, over its non-pad tokens (<cls>/<eos> included):
            # integer counts over the sequence's span, then one division, as the references.
            lengths = segment_sum((~is_pad).astype(jnp.int32), rows)
            masks = segment_sum(is_mask.astype(jnp.int32), rows)
            observed = masks.astype(x.dtype) / lengths
            x = x * ((1 - MASK_RATIO_TRAIN) / (1 - observed))[..., None]
        return jnp.where(is_pad[..., None], 0.0, x)

    def _run_layers(self, start: int, stop: int, x: jax.Array, rows: Layout, attention: AttentionImpl,
                    capture: bool):
        """Apply layers [start, stop) with nnx.scan; returns (x, attention maps or None)."""
        graphdef, state = nnx.split(self.layers)
        segment = nnx.merge(graphdef, jax.tree.map(lambda a: a[start:stop], state))
        positions, spans = rows.queries()

        @nnx.scan(in_axes=(0, nnx.Carry, None, None), out_axes=nnx.Carry)
        def scan_layers(layer: TransformerLayer, x: jax.Array, positions: Positions, spans: Spans) -> jax.Array:
            return layer(x, positions, spans, attention, capture=capture)

        if not capture:
            return scan_layers(segment, x, positions, spans), None
        x, sown = nnx.capture(scan_layers, nnx.Intermediate)(segment, x, positions, spans)
        (maps,) = jax.tree.leaves(sown)  # (stop-start, B, H, T, T), stacked by the scan
        return x, maps

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
        x_at = self.emb_layer_norm_after(last(x, *rows.queries(at), attention, at=at)[:, 0])  # (B, D)
        return self.lm_head(x_at, self.embed_tokens.embedding[...])

    def __call__(
        self,
        tokens: jax.Array,
        repr_layers: Sequence[int] = (),
        attention_layers: Sequence[int] = (),
        need_logits: bool = True,
        need_contacts: bool = False,
        segments: jax.Array | None = None,
        attention: AttentionImpl = PURE_JAX,
    ) -> dict[str, jax.Array | dict[int, jax.Array]]:
        """Run the model.

        Args:
          tokens: (B, T) int token ids, each row ``<cls> ... <eos>`` right-padded with ``<pad>``,
            or with ``segments`` several such sequences one after the other, then padding.
          repr_layers: hidden states to return, fair-esm numbering: 0 is the embedding output,
            ``num_layers`` the final representation (after ``emb_layer_norm_after``).
          attention_layers: 1-based layers whose attention maps to return. Only these are
            materialised (all of them when ``need_contacts``).
          need_logits: compute the LM head.
          need_contacts: run the contact head (needs the maps of every layer).
          segments: (B, T) int segment ids of packed rows (``segments.layout``: non-decreasing,
            padding in the last segment); each sequence then attends only to itself, with rotary
            positions and token dropout of its own. No attention maps or contacts from packed rows.
          attention: how attention is computed where no map is captured (``hardware.choose``).

        Returns:
          dict with ``representations`` {layer: (B, T, D)}, and as requested ``logits``
          (B, T, vocab), ``attentions`` (B, len(attention_layers), H, T, T), ``contacts``
          (B, T-2, T-2).
        """
        n = self.config.num_layers
        repr_layers = sorted({layer % (n + 1) for layer in repr_layers})
        attention_layers = [a % (n + 1) for a in attention_layers]  # -1 is the last layer
        capture = set(range(1, n + 1)) if need_contacts else set(attention_layers)
        if segments is not None and capture:
            raise ValueError("attention maps and contacts come from rows of one sequence, not packed rows")
        rows = layout(tokens, segments)
        x = self.embed(tokens, rows)
        hidden = {0: x} if 0 in repr_layers else {}
        maps: dict[int, jax.Array] = {}
        for start, stop in self._stack_segments(repr_layers, capture):
            x, seg_maps = self._run_layers(start, stop, x, rows, attention, start + 1 in capture)
            if seg_maps is not None:
                for offset in range(stop - start):
                    maps[start + offset + 1] = seg_maps[offset]
            if stop in repr_layers and stop < n:
                hidden[stop] = x
        x = self.emb_layer_norm_after(x)
        if n in repr_layers:
            hidden[n] = x

        out: dict = {"representations": hidden}
        if need_logits:
            out["logits"] = self.lm_head(x, self.embed_tokens.embedding[...])
        if maps:
            out.update(self._maps_and_contacts(tokens, maps, attention_layers, need_contacts))
        return out

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
        return list(zip(boundaries[:-1], boundaries[1:]))

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
            stacked = jnp.stack([maps[a] for a in range(1, self.config.num_layers + 1)], axis=1)
            out["contacts"] = self.contact_head(tokens, stacked)
        return out

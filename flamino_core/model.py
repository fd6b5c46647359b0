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

from .attention_paths import _attend_heads, attend, attend_tokens_major  # noqa: F401  (attend: public)
from .alphabet import EOS_IDX, MASK_IDX, PAD_IDX
from .attention_maps import apc, symmetrize
from .config import ESM2Config
from .segments import PackedRows, from_segments, segment_sum

# Token dropout during training masks 15% of tokens, 80% of which become <mask>; the model
# rescales embeddings by the expected unmasked fraction, at inference too.
MASK_RATIO_TRAIN = 0.15 * 0.8


class Buffer(nnx.Variable):
    """A non-trainable array stored in checkpoints (the rotary ``inv_freq``)."""


def gelu(x: jax.Array) -> jax.Array:
    # Exact erf GELU as in fair-esm and HF; jax.nn.gelu's default tanh approximation drifts.
    return jax.nn.gelu(x, approximate=False)


def layer_norm(dim: int, config: ESM2Config, rngs: nnx.Rngs) -> nnx.LayerNorm:
    return nnx.LayerNorm(dim, epsilon=config.layer_norm_eps, rngs=rngs)


class RotaryEmbedding(nnx.Module):
    """Rotary position embedding (Su et al. 2021), fair-esm's ``rot_emb``."""

    def __init__(self, head_dim: int, base: float):
        exponents = jnp.arange(0, head_dim, 2, dtype=jnp.float32) / head_dim
        # Loading a checkpoint overwrites this with the stored copy: ESM-2's was saved with fp16
        # precision, and recomputing it changes results noticeably (HF's converter copies it too).
        self.inv_freq = Buffer(1.0 / (base**exponents))

    def cos_sin(self, positions: jax.Array) -> tuple[jax.Array, jax.Array]:
        """cos and sin of the rotation angles at integer ``positions``: (..., head_dim / 2) each."""
        angles = positions.astype(jnp.float32)[..., None] * self.inv_freq[...]  # (..., hd/2)
        return jnp.cos(angles), jnp.sin(angles)

    @staticmethod
    def rotate(x: jax.Array, cos: jax.Array, sin: jax.Array) -> jax.Array:
        """x * cos + rotate_half(x) * sin, the references' formula, where cos and sin repeat
        the same angles in both halves and rotate_half(x) = [-x2, x1]. Written per half (the
        same products and sums, so the same rounding): XLA:CPU fused the concatenated
        rotate_half into the head transpose about 10% less efficiently (t6, 16 x 304 tokens)."""
        x1, x2 = jnp.split(x, 2, axis=-1)
        return jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)

    def __call__(self, q: jax.Array, k: jax.Array, positions: jax.Array | None = None) -> tuple[jax.Array, jax.Array]:
        """Rotate q and k, (B, H, T, hd), by their positions: 0..T-1, or (B, T) ``positions``."""
        if positions is None:
            cos, sin = self.cos_sin(jnp.arange(q.shape[-2]))  # (T, hd/2)
        else:
            cos, sin = (a[:, None] for a in self.cos_sin(positions))  # (B, 1, T, hd/2)
        return self.rotate(q, cos, sin), self.rotate(k, cos, sin)


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
        # How attention is computed when no map is captured (see hardware.ATTENTION_PATHS; an
        # engine sets it with ``set_attention_path``). "xla" is the code below; the others work
        # on the (B, T, H, hd) layout in ``_attend_tokens_major``. Capturing maps always takes
        # the pure-JAX path, which keeps the probabilities for nnx.sow.
        self.attention_path = "xla"
        self.attention_dtype = "float32"  # dot-product-attention's inputs (bf16: cuDNN on GPU)

    def _heads(self, x: jax.Array) -> jax.Array:
        batch, seq_len, _ = x.shape
        x = x.reshape(batch, seq_len, self.num_heads, self.head_dim)  # (B, T, H, hd)
        return x.transpose(0, 2, 1, 3)  # (B, H, T, hd)

    def _tokens_major(self, x: jax.Array) -> jax.Array:
        batch, seq_len, _ = x.shape
        return x.reshape(batch, seq_len, self.num_heads, self.head_dim)  # (B, T, H, hd), no copy

    def _attend_tokens_major(self, q: jax.Array, x: jax.Array, key_bias: jax.Array,
                             q_positions: jax.Array, rows: PackedRows | None = None) -> jax.Array:
        """Attention without head transposes (``attention_paths``): the fused kernel or
        jax.nn.dot_product_attention.

        q: (B, Tq, D) from q_proj, unscaled; x: (B, T, D) for keys and values; key_bias
        (B, 1, 1, T); q_positions (B, Tq); rows: packed rows (Tq == T). Returns (B, Tq, D),
        what out_proj reads.
        """
        batch, seq_len, _ = x.shape
        q, k, v = self._tokens_major(q), self._tokens_major(self.k_proj(x)), self._tokens_major(self.v_proj(x))
        cos, sin = self.rot_emb.cos_sin(jnp.arange(seq_len))  # (T, hd/2)
        out = attend_tokens_major(self.attention_path, q, k, v, cos, sin, q_positions,
                                  key_bias.reshape(batch, seq_len), self.scaling, self.attention_dtype, rows)
        return out.reshape(batch, q.shape[1], -1)  # (B, Tq, D)

    def __call__(self, x: jax.Array, key_bias: jax.Array, capture: bool, rows: PackedRows | None = None) -> jax.Array:
        """x: (B, T, D); key_bias: (B, 1, 1, T), 0 for real tokens and -inf for padding; rows:
        packed rows (several sequences per row, each attending only to itself)."""
        if capture and rows is not None:
            raise ValueError("attention maps are captured from rows of one sequence, not packed rows")
        if not capture and self.attention_path != "xla":
            batch, seq_len, _ = x.shape
            positions = jnp.broadcast_to(jnp.arange(seq_len), (batch, seq_len))
            return self.out_proj(self._attend_tokens_major(self.q_proj(x), x, key_bias, positions, rows))
        # q is scaled before rotary is applied, as in both references.
        q = self._heads(self.q_proj(x) * self.scaling)
        k = self._heads(self.k_proj(x))
        v = self._heads(self.v_proj(x))
        q, k = self.rot_emb(q, k, None if rows is None else rows.positions)
        if capture:
            # Heads-major batched matmul with an additive mask (on XLA:CPU several times faster
            # than an einsum followed by a where); the probabilities are kept for nnx.sow.
            scores = q @ k.swapaxes(-1, -2) + key_bias  # (B, H, T, T)
            probs = jax.nn.softmax(scores.astype(jnp.float32), axis=-1)
            self.sow(nnx.Intermediate, "attention_weights", probs)
            out = probs.astype(v.dtype) @ v  # (B, H, T, hd)
        else:
            out = attend(q, k, v, key_bias, None if rows is None else rows.segments)
        batch, _, seq_len, _ = out.shape
        out = out.transpose(0, 2, 1, 3).reshape(batch, seq_len, -1)  # (B, T, D)
        return self.out_proj(out)

    def at_positions(self, x: jax.Array, key_bias: jax.Array, positions: jax.Array) -> jax.Array:
        """Attention output at one query position per row: (B, D); x (B, T, D), positions (B,).

        Keys and values come from every token as in ``__call__``; only the query side is cut
        down to the one position whose output is wanted (the same arithmetic, row by row).
        """
        x_at = jnp.take_along_axis(x, positions[:, None, None], axis=1)  # (B, 1, D)
        if self.attention_path != "xla":
            out = self._attend_tokens_major(self.q_proj(x_at), x, key_bias, positions[:, None])
            return self.out_proj(out[:, 0])
        q = self._heads(self.q_proj(x_at) * self.scaling)  # (B, H, 1, hd)
        k = self._heads(self.k_proj(x))
        v = self._heads(self.v_proj(x))
        cos, sin = self.rot_emb.cos_sin(jnp.arange(x.shape[1]))
        k = self.rot_emb.rotate(k, cos, sin)
        cos_at, sin_at = self.rot_emb.cos_sin(positions)  # (B, hd/2)
        q = self.rot_emb.rotate(q, cos_at[:, None, None], sin_at[:, None, None])
        out = _attend_heads(q, k, v, key_bias)  # (B, H, 1, hd)
        return self.out_proj(out.reshape(out.shape[0], -1))


def set_attention_path(model: nnx.Module, path: str, dtype: str = "float32") -> None:
    """Make every attention layer of ``model`` use ``path`` (see ``hardware.ATTENTION_PATHS``)
    when no map is captured; ``dtype`` is dot-product-attention's input type."""
    for _, module in nnx.iter_modules(model):
        if isinstance(module, MultiheadAttention):
            module.attention_path = path
            module.attention_dtype = dtype


class TransformerLayer(nnx.Module):
    """Pre-LayerNorm block: x + attn(LN(x)), then x + fc2(gelu(fc1(LN(x))))."""

    def __init__(self, config: ESM2Config, rngs: nnx.Rngs):
        self.self_attn_layer_norm = layer_norm(config.embed_dim, config, rngs)
        self.self_attn = MultiheadAttention(config, rngs)
        self.final_layer_norm = layer_norm(config.embed_dim, config, rngs)
        self.fc1 = nnx.Linear(config.embed_dim, config.ffn_dim, rngs=rngs)
        self.fc2 = nnx.Linear(config.ffn_dim, config.embed_dim, rngs=rngs)

    def __call__(self, x: jax.Array, key_bias: jax.Array, capture: bool = False,
                 rows: PackedRows | None = None) -> jax.Array:
        x = x + self.self_attn(self.self_attn_layer_norm(x), key_bias, capture, rows)
        return x + self.fc2(gelu(self.fc1(self.final_layer_norm(x))))

    def at_positions(self, x: jax.Array, key_bias: jax.Array, positions: jax.Array) -> jax.Array:
        """This layer's output at one position per row, (B, D): what ``__call__`` gives there."""
        x_at = jnp.take_along_axis(x, positions[:, None, None], axis=1)[:, 0]  # (B, D)
        x_at = x_at + self.self_attn.at_positions(self.self_attn_layer_norm(x), key_bias, positions)
        return x_at + self.fc2(gelu(self.fc1(self.final_layer_norm(x_at))))


class LMHead(nnx.Module):
    """dense -> gelu -> LayerNorm -> decoder tied to the token embedding, plus a bias."""

    def __init__(self, config: ESM2Config, rngs: nnx.Rngs):
        self.dense = nnx.Linear(config.embed_dim, config.embed_dim, rngs=rngs)
        self.layer_norm = layer_norm(config.embed_dim, config, rngs)
        self.bias = nnx.Param(jnp.zeros((config.vocab_size,), jnp.float32))

    def __call__(self, x: jax.Array, embedding: jax.Array) -> jax.Array:
        x = self.layer_norm(gelu(self.dense(x)))
        return x @ embedding.T + self.bias[...]


def padding_bias(tokens: jax.Array) -> jax.Array:
    """Additive attention bias over keys, (B, 1, 1, T): 0 for real tokens, -inf for padding."""
    return jnp.where(tokens == PAD_IDX, -jnp.inf, 0.0)[:, None, None, :]


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
    def embed(self, tokens: jax.Array, rows: PackedRows | None = None) -> jax.Array:
        """Token embeddings with token dropout applied exactly as the references do at inference."""
        x = self.embed_tokens(tokens)  # (B, T, D)
        is_pad = tokens == PAD_IDX
        if self.config.token_dropout:
            is_mask = tokens == MASK_IDX
            x = jnp.where(is_mask[..., None], 0.0, x)
            # Observed mask fraction per sequence, over non-pad tokens (<cls>/<eos> included):
            # per row, or per sequence of a packed row (the same integer counts and division).
            if rows is None:
                lengths, masks = (~is_pad).sum(-1, keepdims=True), is_mask.sum(-1, keepdims=True)
            else:
                lengths = segment_sum((~is_pad).astype(jnp.int32), rows)
                masks = segment_sum(is_mask.astype(jnp.int32), rows)
            observed = masks.astype(x.dtype) / lengths
            x = x * ((1 - MASK_RATIO_TRAIN) / (1 - observed))[..., None]
        return jnp.where(is_pad[..., None], 0.0, x)

    def _run_layers(self, start: int, stop: int, x: jax.Array, key_bias: jax.Array, capture: bool,
                    rows: PackedRows | None = None):
        """Apply layers [start, stop) with nnx.scan; returns (x, attention maps or None)."""
        graphdef, state = nnx.split(self.layers)
        segment = nnx.merge(graphdef, jax.tree.map(lambda a: a[start:stop], state))

        @nnx.scan(in_axes=(0, nnx.Carry, None, None), out_axes=nnx.Carry)
        def scan_layers(layer: TransformerLayer, x: jax.Array, key_bias: jax.Array, rows) -> jax.Array:
            return layer(x, key_bias, capture, rows)

        if not capture:
            return scan_layers(segment, x, key_bias, rows), None
        x, sown = nnx.capture(scan_layers, nnx.Intermediate)(segment, x, key_bias, rows)
        (maps,) = jax.tree.leaves(sown)  # (stop-start, B, H, T, T), stacked by the scan
        return x, maps

    def masked_logits(self, tokens: jax.Array, positions: jax.Array) -> jax.Array:
        """LM logits at one position per row, (B, vocab): equal to ``__call__``'s logits there.

        For masked-marginal scans, where each row needs the prediction at its masked position
        only. Layers 1..N-1 run in full (every position feeds the next layer's keys and values),
        but the last layer's queries, feed-forward, final LayerNorm and LM head run at that one
        position: for t6 about a sixth less arithmetic per pass, for t30 about 3% less.
        """
        n = self.config.num_layers
        x = self.embed(tokens)
        key_bias = padding_bias(tokens)
        if n > 1:
            x, _ = self._run_layers(0, n - 1, x, key_bias, False)
        graphdef, state = nnx.split(self.layers)
        last = nnx.merge(graphdef, jax.tree.map(lambda a: a[n - 1], state))
        x_at = self.emb_layer_norm_after(last.at_positions(x, key_bias, positions))
        return self.lm_head(x_at, self.embed_tokens.embedding[...])

    def __call__(
        self,
        tokens: jax.Array,
        repr_layers: Sequence[int] = (),
        attention_layers: Sequence[int] = (),
        need_logits: bool = True,
        need_contacts: bool = False,
        segments: jax.Array | None = None,
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
          segments: (B, T) int segment ids of packed rows (``segments.PackedRows``: non-decreasing,
            padding in the last segment); each sequence then attends only to itself, with rotary
            positions and token dropout of its own. No attention maps or contacts from packed rows.

        Returns:
          dict with ``representations`` {layer: (B, T, D)}, and as requested ``logits``
          (B, T, vocab), ``attentions`` (B, len(attention_layers), H, T, T), ``contacts``
          (B, T-2, T-2).
        """
        n = self.config.num_layers
        repr_layers = sorted({layer % (n + 1) for layer in repr_layers})
        attention_layers = [a % (n + 1) for a in attention_layers]  # -1 is the last layer
        capture = set(range(1, n + 1)) if need_contacts else set(attention_layers)
        rows = None if segments is None else from_segments(segments)
        if rows is not None and capture:
            raise ValueError("attention maps and contacts come from rows of one sequence, not packed rows")
        x = self.embed(tokens, rows)
        key_bias = padding_bias(tokens)  # (B, 1, 1, T)

        hidden = {0: x} if 0 in repr_layers else {}
        maps: dict[int, jax.Array] = {}
        # Split the stack where a hidden state must be kept or attention capture switches on or
        # off, so maps are built only for the layers that need them. Segment [start, stop) holds
        # layers start+1 .. stop (1-based).
        boundaries = [0]
        for layer in range(1, n):
            if layer in repr_layers or ((layer in capture) != (layer + 1 in capture)):
                boundaries.append(layer)
        boundaries.append(n)
        for start, stop in zip(boundaries[:-1], boundaries[1:]):
            wanted = start + 1 in capture
            x, seg_maps = self._run_layers(start, stop, x, key_bias, wanted, rows)
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
            not_pad = (tokens != PAD_IDX).astype(jnp.float32)
            pair_mask = (not_pad[:, None, :] * not_pad[:, :, None])[:, None]  # (B, 1, T, T)
            # Padding rows/cols zeroed, as fair-esm does before returning or using the maps.
            maps = {layer: m * pair_mask for layer, m in maps.items()}
            if attention_layers:
                out["attentions"] = jnp.stack([maps[a] for a in attention_layers], axis=1)
            if need_contacts:
                stacked = jnp.stack([maps[a] for a in range(1, n + 1)], axis=1)
                out["contacts"] = self.contact_head(tokens, stacked)
        return out

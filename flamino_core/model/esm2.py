"""ESM-2 (Lin et al., Science 2023) in Flax NNX, and ESM-1b / ESM-1v (Rives et al. 2021, Meier et
al. 2021), the same pre-LayerNorm network with learned absolute positions added to the token
embedding and a LayerNorm before the stack (``families``: ``positions="learned"``).

Attribute names follow fair-esm's checkpoint keys (``embed_tokens``, ``layers.self_attn.q_proj``,
``fc1``, ``emb_layer_norm_after``, ``lm_head``, ``contact_head.regression``), so converting a
checkpoint is a key map plus transposes. Every choice that matters for numerical parity with the
PyTorch references is commented at the line that makes it.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from flamino_core.alphabet import EOS_IDX, PAD_IDX
from flamino_core.model.attention import AttentionImpl, Positions, Spans, attend
from flamino_core.analysis.attention_maps import apc, symmetrize
from flamino_core.model.config import ModelConfig
from flamino_core.model.families import MAX_RESIDUES, family_of
from flamino_core.model.rotary import RotaryEmbedding
from flamino_core.model.segments import Layout, segment_sum
from flamino_core.model.stack import LayerStack

# Token dropout during training masks 15% of tokens, 80% of which become <mask>; the model
# rescales embeddings by the expected unmasked fraction, at inference too.
MASK_RATIO_TRAIN = 0.15 * 0.8


def gelu(x: jax.Array) -> jax.Array:
    # Exact erf GELU as in fair-esm and HF; jax.nn.gelu's default tanh approximation drifts.
    # In fp32 whatever comes in (the fast mode's bf16 MLP intermediate, precision.Bf16Linear).
    return jax.nn.gelu(x.astype(jnp.float32), approximate=False)


def layer_norm(dim: int, config: ModelConfig, rngs: nnx.Rngs) -> nnx.LayerNorm:
    return nnx.LayerNorm(dim, epsilon=config.layer_norm_eps, rngs=rngs)


def take_tokens(x: jax.Array, at: jax.Array | None) -> jax.Array:
    """x (B, T, ...) at token indices ``at`` (B, Tq), or all of x."""
    if at is None:
        return x
    return jnp.take_along_axis(x, at.reshape(at.shape + (1,) * (x.ndim - 2)), axis=1)


class MultiheadAttention(nnx.Module):
    def __init__(self, config: ModelConfig, rngs: nnx.Rngs):
        dim = config.embed_dim
        self.num_heads = config.attention_heads
        self.head_dim = config.head_dim
        self.scaling = self.head_dim**-0.5
        self.q_proj = nnx.Linear(dim, dim, rngs=rngs)
        self.k_proj = nnx.Linear(dim, dim, rngs=rngs)
        self.v_proj = nnx.Linear(dim, dim, rngs=rngs)
        self.out_proj = nnx.Linear(dim, dim, rngs=rngs)
        rotary = family_of(config).positions == "rotary"
        self.rot_emb = RotaryEmbedding(self.head_dim, config.rotary_base) if rotary else None

    def _table(self, length: int) -> tuple[jax.Array, jax.Array]:
        """Rotary's (cos, sin); with learned positions the identity rotation (cos 1, sin 0:
        x * 1 + rotate_half(x) * 0 is x exactly), so every attention path serves both."""
        if self.rot_emb is not None:
            return self.rot_emb.table(length)
        return jnp.ones((length, self.head_dim // 2), jnp.float32), jnp.zeros((length, self.head_dim // 2), jnp.float32)

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
        out = attend(q, k, v, positions, spans, attention, table=self._table(seq_len),
                     scale=self.scaling, probabilities=capture)
        if capture:
            out, probs = out
            self.sow(nnx.Intermediate, "attention_weights", probs)
        return self.out_proj(out.reshape(batch, q.shape[1], -1))  # (B, Tq, D)


class TransformerLayer(nnx.Module):
    """Pre-LayerNorm block: x + attn(LN(x)), then x + fc2(gelu(fc1(LN(x))))."""

    def __init__(self, config: ModelConfig, rngs: nnx.Rngs):
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

    def __init__(self, config: ModelConfig, rngs: nnx.Rngs):
        self.dense = nnx.Linear(config.embed_dim, config.embed_dim, rngs=rngs)
        self.layer_norm = layer_norm(config.embed_dim, config, rngs)
        self.bias = nnx.Param(jnp.zeros((config.vocab_size,), jnp.float32))

    def __call__(self, x: jax.Array, embedding: jax.Array) -> jax.Array:
        x = self.layer_norm(gelu(self.dense(x)))
        return x @ embedding.T + self.bias[...]


class ContactPredictionHead(nnx.Module):
    """Logistic regression over APC-corrected, symmetrised attention maps of all layers and heads."""

    def __init__(self, config: ModelConfig, rngs: nnx.Rngs):
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


class ESM2(LayerStack):
    """The ESM-2 masked language model (and ESM-1b / ESM-1v: ``family_of(config).positions``)."""

    def __init__(self, config: ModelConfig, rngs: nnx.Rngs):
        self.config = config
        self.embed_tokens = nnx.Embed(config.vocab_size, config.embed_dim, rngs=rngs)

        @nnx.split_rngs(splits=config.num_layers)
        @nnx.vmap(in_axes=(0,), out_axes=0)
        def make_layers(rngs: nnx.Rngs) -> TransformerLayer:
            return TransformerLayer(config, rngs)

        self.layers = make_layers(rngs)  # one module whose arrays carry a leading layer axis
        self.emb_layer_norm_after = layer_norm(config.embed_dim, config, rngs)
        self.lm_head = LMHead(config, rngs)
        self.contact_head = ContactPredictionHead(config, rngs) if family_of(config).contact_head else None
        if family_of(config).positions == "learned":
            # fair-esm's LearnedPositionalEmbedding: rows for 1,024 tokens after the padding
            # index's rows (PAD_IDX + 1 = 2 of them): 1,026, HF's max_position_embeddings.
            self.embed_positions = nnx.Embed(MAX_RESIDUES + 2 + PAD_IDX + 1, config.embed_dim, rngs=rngs)
            self.emb_layer_norm_before = layer_norm(config.embed_dim, config, rngs)

    # --- pieces of the forward pass ------------------------------------------------------
    def embed(self, tokens: jax.Array, rows: Layout) -> jax.Array:
        """Token embeddings with token dropout applied exactly as the references do at inference."""
        x = self.embed_tokens(tokens)  # (B, T, D)
        is_pad = tokens == PAD_IDX
        if self.config.token_dropout:
            is_mask = tokens == family_of(self.config).mask_token  # <mask>: 32, SaProt's 4
            x = jnp.where(is_mask[..., None], 0.0, x)
            # Observed mask fraction per sequence, over its non-pad tokens (<cls>/<eos> included):
            # integer counts over the sequence's span, then one division, as the references.
            lengths = segment_sum((~is_pad).astype(jnp.int32), rows)
            masks = segment_sum(is_mask.astype(jnp.int32), rows)
            observed = masks.astype(x.dtype) / lengths
            x = x * ((1 - MASK_RATIO_TRAIN) / (1 - observed))[..., None]
        if family_of(self.config).positions == "learned":
            # Token t of a sequence reads row t + PAD_IDX + 1, as fair-esm's cumsum over non-pad
            # tokens and HF's create_position_ids_from_input_ids; then the LayerNorm before the
            # stack, then padding zeroed (both references, in this order).
            x = x + self.embed_positions(rows.positions + PAD_IDX + 1)
            x = self.emb_layer_norm_before(x)
        return jnp.where(is_pad[..., None], 0.0, x)

    def final_norm(self, x: jax.Array) -> jax.Array:
        return self.emb_layer_norm_after(x)

    def lm_logits(self, x: jax.Array) -> jax.Array:
        return self.lm_head(x, self.embed_tokens.embedding[...])

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

from .alphabet import EOS_IDX, MASK_IDX, PAD_IDX
from .config import ESM2Config

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


def rotate_half(x: jax.Array) -> jax.Array:
    x1, x2 = jnp.split(x, 2, axis=-1)
    return jnp.concatenate([-x2, x1], axis=-1)


class RotaryEmbedding(nnx.Module):
    """Rotary position embedding (Su et al. 2021), fair-esm's ``rot_emb``."""

    def __init__(self, head_dim: int, base: float):
        exponents = jnp.arange(0, head_dim, 2, dtype=jnp.float32) / head_dim
        # Loading a checkpoint overwrites this with the stored copy: ESM-2's was saved with fp16
        # precision, and recomputing it changes results noticeably (HF's converter copies it too).
        self.inv_freq = Buffer(1.0 / (base**exponents))

    def __call__(self, q: jax.Array, k: jax.Array) -> tuple[jax.Array, jax.Array]:
        seq_len = q.shape[-2]
        positions = jnp.arange(seq_len, dtype=jnp.float32)
        freqs = positions[:, None] * self.inv_freq[...][None, :]  # (T, hd/2)
        angles = jnp.concatenate([freqs, freqs], axis=-1)  # (T, hd)
        cos, sin = jnp.cos(angles), jnp.sin(angles)
        return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


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

    def _heads(self, x: jax.Array) -> jax.Array:
        batch, seq_len, _ = x.shape
        x = x.reshape(batch, seq_len, self.num_heads, self.head_dim)  # (B, T, H, hd)
        return x.transpose(0, 2, 1, 3)  # (B, H, T, hd)

    def __call__(self, x: jax.Array, key_bias: jax.Array, capture: bool) -> jax.Array:
        """x: (B, T, D); key_bias: (B, 1, 1, T), 0 for real tokens and -inf for padding."""
        # q is scaled before rotary is applied, as in both references.
        q = self._heads(self.q_proj(x) * self.scaling)
        k = self._heads(self.k_proj(x))
        v = self._heads(self.v_proj(x))
        q, k = self.rot_emb(q, k)
        # Heads-major batched matmul with an additive mask: on XLA:CPU several times faster than
        # an einsum followed by a where.
        scores = q @ k.swapaxes(-1, -2) + key_bias  # (B, H, T, T)
        probs = jax.nn.softmax(scores.astype(jnp.float32), axis=-1)
        if capture:
            self.sow(nnx.Intermediate, "attention_weights", probs)
        out = probs.astype(v.dtype) @ v  # (B, H, T, hd)
        batch, _, seq_len, _ = out.shape
        out = out.transpose(0, 2, 1, 3).reshape(batch, seq_len, -1)  # (B, T, D)
        return self.out_proj(out)


class TransformerLayer(nnx.Module):
    """Pre-LayerNorm block: x + attn(LN(x)), then x + fc2(gelu(fc1(LN(x))))."""

    def __init__(self, config: ESM2Config, rngs: nnx.Rngs):
        self.self_attn_layer_norm = layer_norm(config.embed_dim, config, rngs)
        self.self_attn = MultiheadAttention(config, rngs)
        self.final_layer_norm = layer_norm(config.embed_dim, config, rngs)
        self.fc1 = nnx.Linear(config.embed_dim, config.ffn_dim, rngs=rngs)
        self.fc2 = nnx.Linear(config.ffn_dim, config.embed_dim, rngs=rngs)

    def __call__(self, x: jax.Array, key_bias: jax.Array, capture: bool = False) -> jax.Array:
        x = x + self.self_attn(self.self_attn_layer_norm(x), key_bias, capture)
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


def symmetrize(x: jax.Array) -> jax.Array:
    return x + x.swapaxes(-1, -2)


def apc(x: jax.Array) -> jax.Array:
    """Average product correction over the last two axes (Dunn et al. 2008)."""
    row = x.sum(-1, keepdims=True)
    col = x.sum(-2, keepdims=True)
    total = x.sum((-1, -2), keepdims=True)
    return x - row * col / total


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
    def embed(self, tokens: jax.Array) -> jax.Array:
        """Token embeddings with token dropout applied exactly as the references do at inference."""
        x = self.embed_tokens(tokens)  # (B, T, D)
        is_pad = tokens == PAD_IDX
        if self.config.token_dropout:
            is_mask = tokens == MASK_IDX
            x = jnp.where(is_mask[..., None], 0.0, x)
            # Observed mask fraction per sequence, over non-pad tokens (<cls>/<eos> included).
            lengths = (~is_pad).sum(-1)
            observed = is_mask.sum(-1).astype(x.dtype) / lengths
            x = x * ((1 - MASK_RATIO_TRAIN) / (1 - observed))[:, None, None]
        return jnp.where(is_pad[..., None], 0.0, x)

    def _run_layers(self, start: int, stop: int, x: jax.Array, key_bias: jax.Array, capture: bool):
        """Apply layers [start, stop) with nnx.scan; returns (x, attention maps or None)."""
        graphdef, state = nnx.split(self.layers)
        segment = nnx.merge(graphdef, jax.tree.map(lambda a: a[start:stop], state))

        @nnx.scan(in_axes=(0, nnx.Carry, None), out_axes=nnx.Carry)
        def scan_layers(layer: TransformerLayer, x: jax.Array, key_bias: jax.Array) -> jax.Array:
            return layer(x, key_bias, capture)

        if not capture:
            return scan_layers(segment, x, key_bias), None
        x, sown = nnx.capture(scan_layers, nnx.Intermediate)(segment, x, key_bias)
        (maps,) = jax.tree.leaves(sown)  # (stop-start, B, H, T, T), stacked by the scan
        return x, maps

    def __call__(
        self,
        tokens: jax.Array,
        repr_layers: Sequence[int] = (),
        attention_layers: Sequence[int] = (),
        need_logits: bool = True,
        need_contacts: bool = False,
    ) -> dict[str, jax.Array | dict[int, jax.Array]]:
        """Run the model.

        Args:
          tokens: (B, T) int token ids, each row ``<cls> ... <eos>`` right-padded with ``<pad>``.
          repr_layers: hidden states to return, fair-esm numbering: 0 is the embedding output,
            ``num_layers`` the final representation (after ``emb_layer_norm_after``).
          attention_layers: 1-based layers whose attention maps to return. Only these are
            materialised (all of them when ``need_contacts``).
          need_logits: compute the LM head.
          need_contacts: run the contact head (needs the maps of every layer).

        Returns:
          dict with ``representations`` {layer: (B, T, D)}, and as requested ``logits``
          (B, T, vocab), ``attentions`` (B, len(attention_layers), H, T, T), ``contacts``
          (B, T-2, T-2).
        """
        n = self.config.num_layers
        repr_layers = sorted({layer % (n + 1) for layer in repr_layers})
        attention_layers = [a % (n + 1) for a in attention_layers]  # -1 is the last layer
        capture = set(range(1, n + 1)) if need_contacts else set(attention_layers)
        x = self.embed(tokens)
        key_bias = jnp.where(tokens == PAD_IDX, -jnp.inf, 0.0)[:, None, None, :]  # (B, 1, 1, T)

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
            x, seg_maps = self._run_layers(start, stop, x, key_bias, wanted)
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

"""ESM C (EvolutionaryScale, 2024) in Flax NNX.

Pre-LayerNorm blocks without biases in their projections: LayerNorm on the queries and keys
(over the whole width, before the heads are split), rotary positions, SwiGLU feed-forward, and
each residual branch divided by sqrt(layers / 36); a bias-free LayerNorm after the stack; an LM
head (dense, GELU, LayerNorm, a decoder of its own) 64 wide, of which the 33 tokens of
``alphabet.TOKENS`` are used (index 31 is the chain break ``|`` where ESM-2 has ``<null_1>``).

Attribute names follow transformers' ``EsmcForMaskedLM`` (``layers.N.self_attn.q_proj``,
``q_norm``, ``o_proj``, ``mlp.gate_proj``, ``input_layernorm``, ``norm``, ``lm_head.decoder``);
EvolutionaryScale's ``.pth`` keys (``transformer.blocks.N.attn.layernorm_qkv``, ...) are mapped
onto them in ``weights/key_maps.py``. No token dropout, no contact head.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from flax import nnx

from flamino_core.alphabet import PAD_IDX
from flamino_core.model.attention import AttentionImpl, Positions, Spans, attend
from flamino_core.model.config import ModelConfig
from flamino_core.model.esm2 import gelu, take_tokens
from flamino_core.model.rotary import RotaryEmbedding
from flamino_core.model.segments import Layout
from flamino_core.model.stack import PURE_JAX, LayerStack


def layer_norm(dim: int, config: ModelConfig, rngs: nnx.Rngs, bias: bool = True) -> nnx.LayerNorm:
    # torch's default eps (1e-5); nnx.LayerNorm's 1e-6 would break parity.
    return nnx.LayerNorm(dim, epsilon=config.layer_norm_eps, use_bias=bias, rngs=rngs)


def linear(d_in: int, d_out: int, rngs: nnx.Rngs, bias: bool = False) -> nnx.Linear:
    return nnx.Linear(d_in, d_out, use_bias=bias, rngs=rngs)


class Attention(nnx.Module):
    """Multi-head self-attention with LayerNorm on q and k, rotary, no biases."""

    def __init__(self, config: ModelConfig, rngs: nnx.Rngs):
        dim = config.embed_dim
        self.num_heads, self.head_dim = config.attention_heads, config.head_dim
        self.q_proj, self.k_proj = linear(dim, dim, rngs), linear(dim, dim, rngs)
        self.v_proj, self.o_proj = linear(dim, dim, rngs), linear(dim, dim, rngs)
        self.q_norm = layer_norm(dim, config, rngs, bias=False)
        self.k_norm = layer_norm(dim, config, rngs, bias=False)
        self.rot_emb = RotaryEmbedding(self.head_dim, config.rotary_base)

    def __call__(self, x: jax.Array, positions: Positions, spans: Spans, attention: AttentionImpl,
                 at: jax.Array | None = None, capture: bool = False) -> jax.Array:
        """As ``esm2.MultiheadAttention``: x (B, T, D), queries at every token or at ``at``."""
        batch, seq_len, _ = x.shape
        heads = lambda a: a.reshape(batch, a.shape[1], self.num_heads, self.head_dim)  # noqa: E731
        q = heads(self.q_norm(self.q_proj(take_tokens(x, at))))
        k, v = heads(self.k_norm(self.k_proj(x))), heads(self.v_proj(x))
        # Both references rotate, then scale the scores; scaling q first is the same product.
        out = attend(q, k, v, positions, spans, attention, table=self.rot_emb.table(seq_len),
                     scale=self.head_dim**-0.5, probabilities=capture)
        if capture:
            out, probs = out
            self.sow(nnx.Intermediate, "attention_weights", probs)
        return self.o_proj(out.reshape(batch, q.shape[1], -1))


class SwiGLU(nnx.Module):
    """down(silu(gate(x)) * up(x)): esm 3.x's one Linear to 2 x hidden, split in halves."""

    def __init__(self, config: ModelConfig, rngs: nnx.Rngs):
        self.gate_proj = linear(config.embed_dim, config.ffn_dim, rngs)
        self.up_proj = linear(config.embed_dim, config.ffn_dim, rngs)
        self.down_proj = linear(config.ffn_dim, config.embed_dim, rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        # In fp32 whatever the projections give (the fast mode's bf16 outputs, precision.Bf16Linear).
        return self.down_proj(jax.nn.silu(self.gate_proj(x).astype(jnp.float32)) * self.up_proj(x))


class Block(nnx.Module):
    """x + attn(LN(x)) / s, then x + mlp(LN(x)) / s, with s = sqrt(layers / 36)."""

    def __init__(self, config: ModelConfig, rngs: nnx.Rngs):
        self.input_layernorm = layer_norm(config.embed_dim, config, rngs)
        self.self_attn = Attention(config, rngs)
        self.post_attention_layernorm = layer_norm(config.embed_dim, config, rngs)
        self.mlp = SwiGLU(config, rngs)
        self.scaling = math.sqrt(config.num_layers / 36)  # ESM3's residual scaling, in every ESM C

    def __call__(self, x: jax.Array, positions: Positions, spans: Spans, attention: AttentionImpl,
                 at: jax.Array | None = None, capture: bool = False) -> jax.Array:
        attended = self.self_attn(self.input_layernorm(x), positions, spans, attention, at, capture)
        x = take_tokens(x, at) + attended.astype(x.dtype) / self.scaling  # (scaled in fp32: see SwiGLU)
        return x + self.mlp(self.post_attention_layernorm(x)) / self.scaling


class LMHead(nnx.Module):
    """dense -> GELU -> LayerNorm -> decoder (64 wide, with biases)."""

    def __init__(self, config: ModelConfig, rngs: nnx.Rngs):
        self.dense = linear(config.embed_dim, config.embed_dim, rngs, bias=True)
        self.layer_norm = layer_norm(config.embed_dim, config, rngs)
        self.decoder = linear(config.embed_dim, config.vocab_size, rngs, bias=True)

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.decoder(self.layer_norm(gelu(self.dense(x))))


class ESMC(LayerStack):
    """The ESM C masked language model."""

    def __init__(self, config: ModelConfig, rngs: nnx.Rngs):
        self.config = config
        self.contact_head = None  # none published
        self.embed_tokens = nnx.Embed(config.vocab_size, config.embed_dim, rngs=rngs)

        @nnx.split_rngs(splits=config.num_layers)
        @nnx.vmap(in_axes=(0,), out_axes=0)
        def make_layers(rngs: nnx.Rngs) -> Block:
            return Block(config, rngs)

        self.layers = make_layers(rngs)
        self.norm = layer_norm(config.embed_dim, config, rngs, bias=False)
        self.lm_head = LMHead(config, rngs)

    def embed(self, tokens: jax.Array, rows: Layout) -> jax.Array:
        # Padding zeroed: no reference does, but padding is never a key, so only padding rows
        # (dropped) see the difference.
        return jnp.where((tokens == PAD_IDX)[..., None], 0.0, self.embed_tokens(tokens))

    def final_norm(self, x: jax.Array) -> jax.Array:
        return self.norm(x)

    def lm_logits(self, x: jax.Array) -> jax.Array:
        return self.lm_head(x)

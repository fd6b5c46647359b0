"""ESMFold2's denoiser, as transformers' ``modeling_esmfold2.py`` writes it
(``EsmFold2DiffusionConditioning``, ``EsmFold2DiffusionAttention``/``Layer``/``Transformer``,
``EsmFold2DiffusionModule``; attribute names its checkpoint keys ``structure_head.*``).

One call maps noisy atom coordinates at noise level sigma to denoised ones with EDM's
preconditioning (Karras et al. 2022): the atom encoder reads ``c_in * x`` (``c_in = 1 /
sqrt(sigma^2 + sigma_data^2)``) beside each atom's reference embedding, pools atoms into tokens,
a pair-biased token transformer conditioned on the trunk's single inputs and the Fourier-embedded
``log(sigma / sigma_data) / 4`` updates them, the atom decoder turns them into a per-atom update
F, and the result is ``c_skip * x + c_out * F`` with ``c_skip = sigma_data^2 / (sigma^2 +
sigma_data^2)``, ``c_out = sigma * sigma_data / sqrt(sigma^2 + sigma_data^2)``.

How to call it (the sampler's contract; the reference's ``_sample_structure`` does the same):

    conditioning = module.prepare_conditioning(atom_inputs, pair_trunk, relative_position_encoding,
                                               single_inputs, attention_mask, num_diffusion_samples)
    denoised = module(noisy_coords, noise_level, conditioning)          # or, jitted:
    denoised = denoise(graphdef, state, conditioning, noisy_coords, noise_level)

``prepare_conditioning`` runs once per fold (everything that depends on neither the noise level nor
the coordinates: atom embeddings, rotary tables, masks, the pair conditioning and each layer's
pair bias, the projected single inputs) and expands it to ``B * num_diffusion_samples`` rows, sample
s of batch row b at row ``b * S + s`` (``repeat_interleave``). ``noisy_coords`` (B*S, N_atoms, 3)
fp32 Angstrom; ``noise_level`` sigma, (B*S,) or a scalar; returns the denoised coordinates, same
shape. Everything random (the starting noise, the centring rotations) is the sampler's.

The pair conditioning (the L^2 part) is computed ``chunk_size`` rows at a time, which the reference
does not (it runs it unchunked, for bf16 reasons); each pair (i, j) is computed on its own, so in
fp32 the numbers are the same (the parity tests run chunked) and only the peak memory falls.
"""

from __future__ import annotations

import contextlib
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from flax import nnx

from flamino_core.model import exact_math
from flamino_core.model.esmfold.pair import rows_in_chunks
from flamino_core.model.esmfold2.atoms import AtomDecoder, AtomEncoder, AtomInputs, Rotary
from flamino_core.model.esmfold2.config import EsmFold2Config
from flamino_core.model.esmfold2.layers import (
    AdaptiveLayerNorm, FourierEmbedding, LayerNorm, SwiGLU, Transition, attention, linear,
)


class DenoiserConditioning(NamedTuple):
    """``EsmFold2DenoiserConditioning``: what every denoising step of one fold reuses (a pytree).

    atom_embeds (B*S, N, atom hidden); rotary (cos, sin) (B*S, N, head_dim); atom_mask (B*S, N)
    bool (the atom layers build their window from it; the reference keeps a dense N x N mask);
    atom_to_token (B*S, N); projected_single_inputs (B*S, T, hidden); token_attention_bias: one
    (B or B*S, H, T, T) additive bias per token-transformer layer.
    """

    atom_embeds: jax.Array
    rotary: Rotary
    atom_mask: jax.Array
    atom_to_token: jax.Array
    projected_single_inputs: jax.Array
    token_attention_bias: tuple[jax.Array, ...]


class DiffusionConditioning(nnx.Module):
    """``EsmFold2DiffusionConditioning``: the pair conditioning (trunk pair state beside the
    relative positions, projected, two transitions) and the noise-dependent single conditioning."""

    def __init__(self, config: EsmFold2Config, rngs: nnx.Rngs):
        d, pair = config.diffusion, config.pairwise_hidden_size
        self.sigma_data = d.sigma_data
        self.pair_input_norm = LayerNorm(2 * pair, rngs)
        self.pair_proj = linear(2 * pair, pair, rngs)
        self.pair_transition_0 = Transition(pair, d.pair_intermediate_size, None, rngs)
        self.pair_transition_1 = Transition(pair, d.pair_intermediate_size, None, rngs)
        self.single_input_norm = LayerNorm(config.single_inputs_size, rngs)
        self.single_proj = linear(config.single_inputs_size, d.hidden_size, rngs)
        self.fourier = FourierEmbedding(d.fourier_dim, rngs)
        self.noise_norm = LayerNorm(d.fourier_dim, rngs)
        self.noise_proj = linear(d.fourier_dim, d.hidden_size, rngs)
        self.single_transition_0 = Transition(d.hidden_size, d.intermediate_size, None, rngs)
        self.single_transition_1 = Transition(d.hidden_size, d.intermediate_size, None, rngs)

    def compute_pair_repr(self, pair_trunk: jax.Array, relative_position_encoding: jax.Array) -> jax.Array:
        """(B, T, T, pair) from the trunk's pair state and the relative-position encoding."""
        pair = self.pair_proj(self.pair_input_norm(jnp.concatenate([pair_trunk, relative_position_encoding], -1)))
        return self.pair_transition_1(self.pair_transition_0(pair))

    def compute_single_repr(self, single_inputs: jax.Array) -> jax.Array:
        return self.single_proj(self.single_input_norm(single_inputs))

    def __call__(self, noise_level: jax.Array, single_states: jax.Array) -> jax.Array:
        """The projected single inputs plus the embedded noise level (B,), through two transitions."""
        # exact_math.log: a TPU's log is ~700 ulp off (measured on a v5e); one value per sample.
        log_noise = 0.25 * exact_math.log(jnp.maximum(noise_level / self.sigma_data, 1e-20))
        noise = self.noise_proj(self.noise_norm(self.fourier(log_noise)))
        return self.single_transition_1(self.single_transition_0(single_states + noise[:, None]))


class DiffusionAttention(nnx.Module):
    """``EsmFold2DiffusionAttention``: gated self-attention over tokens with a ready additive bias;
    only ``q_proj`` has a bias."""

    def __init__(self, config: EsmFold2Config, rngs: nnx.Rngs):
        width = config.diffusion.hidden_size
        self.head_dim = config.diffusion.head_dim
        self.q_proj = linear(width, width, rngs, bias=True)
        for name in ("k_proj", "v_proj", "gate_proj", "o_proj"):
            setattr(self, name, linear(width, width, rngs))

    def __call__(self, x: jax.Array, bias: jax.Array) -> jax.Array:
        shape = x.shape[:-1] + (-1, self.head_dim)
        q, k, v = (jnp.swapaxes(p(x).reshape(shape), 1, 2) for p in (self.q_proj, self.k_proj, self.v_proj))
        out = attention(q, k, v, self.head_dim ** -0.5, bias=bias).reshape(x.shape[:-1] + (-1,))
        return self.o_proj(out * jax.nn.sigmoid(self.gate_proj(x)))


class DiffusionLayer(nnx.Module):
    """``EsmFold2DiffusionLayer``: adaLN-conditioned attention and SwiGLU, each added through a
    sigmoid gate of the single conditioning; the per-head pair bias is built here once per fold."""

    def __init__(self, config: EsmFold2Config, rngs: nnx.Rngs):
        d = config.diffusion
        self.input_layernorm = AdaptiveLayerNorm(d.hidden_size, rngs)
        self.self_attn = DiffusionAttention(config, rngs)
        self.attn_gate = linear(d.hidden_size, d.hidden_size, rngs, bias=True)
        self.post_attention_layernorm = AdaptiveLayerNorm(d.hidden_size, rngs)
        self.mlp = SwiGLU(d.hidden_size, d.intermediate_size, rngs)
        self.mlp_gate = linear(d.hidden_size, d.hidden_size, rngs, bias=True)
        self.pair_norm = LayerNorm(config.pairwise_hidden_size, rngs)
        self.pair_bias_proj = linear(config.pairwise_hidden_size, d.num_attention_heads, rngs)

    def compute_pair_bias(self, pair_states: jax.Array, attention_mask: jax.Array | None = None,
                          chunk_size: int | None = None) -> jax.Array:
        """(B, H, T, T): the projected normed pair state, padding keys at the dtype's lowest value
        (added, as the reference builds it)."""
        bias = rows_in_chunks(lambda rows: self.pair_bias_proj(self.pair_norm(rows)), chunk_size, pair_states)
        bias = jnp.transpose(bias, (0, 3, 1, 2))  # (B, Q, K, H) -> (B, H, Q, K)
        if attention_mask is not None:
            lowest = jnp.finfo(bias.dtype).min
            bias = bias + jnp.where(attention_mask.astype(bool)[:, None, None, :], 0.0, lowest).astype(bias.dtype)
        return bias

    def __call__(self, x: jax.Array, single: jax.Array, bias: jax.Array) -> jax.Array:
        x = x + jax.nn.sigmoid(self.attn_gate(single)) * self.self_attn(self.input_layernorm(x, single), bias)
        return x + jax.nn.sigmoid(self.mlp_gate(single)) * self.mlp(self.post_attention_layernorm(x, single))


class DiffusionTransformer(nnx.Module):
    """``EsmFold2DiffusionTransformer``: the token layers, one pair bias each."""

    def __init__(self, config: EsmFold2Config, rngs: nnx.Rngs):
        self.layers = nnx.List([DiffusionLayer(config, rngs) for _ in range(config.diffusion.num_hidden_layers)])

    def compute_pair_biases(self, pair_states: jax.Array, attention_mask: jax.Array | None = None,
                            chunk_size: int | None = None) -> tuple[jax.Array, ...]:
        return tuple(layer.compute_pair_bias(pair_states, attention_mask, chunk_size) for layer in self.layers)

    def __call__(self, x: jax.Array, single: jax.Array, biases: tuple[jax.Array, ...]) -> jax.Array:
        for layer, bias in zip(self.layers, biases):
            x = layer(x, single, bias)
        return x


class DiffusionModule(nnx.Module):
    """``EsmFold2DiffusionModule`` (``structure_head``): the denoiser; see the module docstring."""

    def __init__(self, config: EsmFold2Config, rngs: nnx.Rngs):
        d = config.diffusion
        self.sigma_data = d.sigma_data
        self.chunk_size = config.chunk_size
        self.conditioning = DiffusionConditioning(config, rngs)
        self.coords_linear = linear(6, d.atom_encoder.hidden_size, rngs)
        self.atom_encoder = AtomEncoder(config, d.atom_encoder, rngs)
        self.atom_decoder = AtomDecoder(config, rngs)
        self.single_to_token = linear(d.hidden_size, d.hidden_size, rngs)
        self.token_transformer = DiffusionTransformer(config, rngs)
        self.single_step_norm = LayerNorm(d.hidden_size, rngs)
        self.token_norm = LayerNorm(d.hidden_size, rngs)

    def prepare_conditioning(self, atom_inputs: AtomInputs, pair_trunk: jax.Array,
                             relative_position_encoding: jax.Array, single_inputs: jax.Array,
                             attention_mask: jax.Array | None = None,
                             num_diffusion_samples: int = 1) -> DenoiserConditioning:
        """The per-fold conditioning, expanded to ``B * num_diffusion_samples`` rows (the pair
        biases stay at B when B is 1, where they broadcast, as the reference keeps them).
        ``atom_inputs`` and ``single_inputs``/``relative_position_encoding`` as the trunk returns
        them; ``pair_trunk`` its final pair state (B, T, T, pair); ``attention_mask`` (B, T) tokens."""
        samples = num_diffusion_samples
        atom_embeds, rotary = self.atom_encoder.embed_atoms(atom_inputs)
        pair = rows_in_chunks(self.conditioning.compute_pair_repr, self.chunk_size, pair_trunk,
                              relative_position_encoding)
        biases = self.token_transformer.compute_pair_biases(pair, attention_mask, self.chunk_size)
        if single_inputs.shape[0] != 1:
            biases = tuple(jnp.repeat(b, samples, axis=0) for b in biases)

        def expand(x: jax.Array) -> jax.Array:
            return jnp.repeat(x, samples, axis=0)

        return DenoiserConditioning(
            atom_embeds=expand(atom_embeds), rotary=(expand(rotary[0]), expand(rotary[1])),
            atom_mask=expand(atom_inputs.atom_attention_mask.astype(bool)),
            atom_to_token=expand(atom_inputs.atom_to_token),
            projected_single_inputs=self.conditioning.compute_single_repr(expand(single_inputs)),
            token_attention_bias=biases)

    def __call__(self, noisy_coords: jax.Array, noise_level: jax.Array, conditioning: DenoiserConditioning
                 ) -> jax.Array:
        """One denoising step: (B*S, N, 3) noisy coordinates at sigma ``noise_level`` (B*S,) or a
        scalar -> denoised coordinates (B*S, N, 3)."""
        c = conditioning
        sigma_data = self.sigma_data
        noise_level = jnp.broadcast_to(jnp.asarray(noise_level, jnp.float32), noisy_coords.shape[:1])
        single = self.conditioning(noise_level, c.projected_single_inputs)

        scale = jnp.sqrt(noise_level * noise_level + sigma_data * sigma_data)[:, None, None]
        normalized = noisy_coords / scale
        # The second coordinate slot is unused in this release: coords_linear sees [x / scale, 0].
        coord_embeds = self.coords_linear(jnp.concatenate([normalized, jnp.zeros_like(normalized)], axis=-1))
        tokens, atom_states = self.atom_encoder(c.atom_embeds + coord_embeds, c.atom_embeds, c.rotary, c.atom_mask,
                                                c.atom_to_token, single.shape[1])
        tokens = tokens + self.single_to_token(self.single_step_norm(single))
        tokens = self.token_norm(self.token_transformer(tokens, single, c.token_attention_bias))
        update = self.atom_decoder(tokens, atom_states, c.atom_embeds, c.atom_mask, c.rotary, c.atom_to_token)

        sigma_data_sq, noise_sq = sigma_data * sigma_data, noise_level * noise_level
        skip = (sigma_data_sq / (sigma_data_sq + noise_sq))[:, None, None]
        out = ((sigma_data * noise_level) / jnp.sqrt(sigma_data_sq + noise_sq))[:, None, None]
        return skip * noisy_coords + out * update


@functools.partial(jax.jit, static_argnames=("graphdef", "matmul_precision"))
def _denoise(graphdef: nnx.GraphDef, state: nnx.State, conditioning: DenoiserConditioning,
             noisy_coords: jax.Array, noise_level: jax.Array, matmul_precision: str | None) -> jax.Array:
    # None leaves the caller's setting alone (a ``default_matmul_precision(None)`` would reset it).
    with contextlib.nullcontext() if matmul_precision is None else jax.default_matmul_precision(matmul_precision):
        return nnx.merge(graphdef, state)(noisy_coords, noise_level, conditioning)


def denoise(graphdef: nnx.GraphDef, state: nnx.State, conditioning: DenoiserConditioning, noisy_coords: jax.Array,
            noise_level: jax.Array | float, matmul_precision: str | None = None) -> jax.Array:
    """One jitted denoiser call, a pure function of ``nnx.split(module)`` and its inputs (compiled
    once per shape; ``noise_level`` is traced, so every step of a schedule reuses it).
    ``matmul_precision``: JAX's name ('highest' for exact fp32 on a TPU, whose default rounds
    products to bf16); None keeps the caller's ``jax.default_matmul_precision``."""
    noise_level = jnp.broadcast_to(jnp.asarray(noise_level, jnp.float32), noisy_coords.shape[:1])
    return _denoise(graphdef, state, conditioning, noisy_coords, noise_level, matmul_precision)

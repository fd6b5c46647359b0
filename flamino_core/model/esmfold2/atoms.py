"""ESMFold2's atom stack: a sliding-window atom transformer with 3D rotary positions, used by the
input embedder (atoms -> tokens) and by the denoiser (noisy atoms -> tokens -> coordinate update),
as transformers' ``modeling_esmfold2.py`` writes it (``EsmFold2AtomAttention``,
``EsmFold2AtomLayer``, ``EsmFold2RotaryEmbedding``, ``scatter_atom_to_token``,
``EsmFold2AtomEncoder``, ``EsmFold2AtomDecoder``; attribute names its checkpoint keys).

Atoms are laid out in token order, so a window over the atom index (``|i - j| <= sliding_window //
2``, the reference's ``sliding_window`` being the total width) is a window over nearby residues.
The reference masks a dense N x N attention, which at 1,000 residues (~8,000 atoms) and 8 samples
is 8 GB of logits per layer; here long inputs attend block by block, each block of queries to
the keys its window can reach (``windowed_attention``): the same softmax over the same keys.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from flax import nnx

from flamino_core.model.esmfold2.config import AtomEncoderConfig, EsmFold2Config
from flamino_core.model.esmfold2.layers import LayerNorm, SwiGLU, attention, linear, rms_norm

Rotary = tuple[jax.Array, jax.Array]  # (cos, sin), each (B, N_atoms, head_dim)


class AtomInputs(NamedTuple):
    """``EsmFold2AtomInputs`` after ``EsmFold2Model._prepare_features``: the reference-conformer
    atom features with the categorical ones one-hot and the padding zeroed (a pytree, so it passes
    through ``jit``).

    ref_pos (B, N, 3); ref_charge (B, N); atom_attention_mask (B, N) bool; ref_element
    (B, N, max_atomic_number) one-hot; ref_atom_name_chars (B, N, max_chars, char_vocab_size)
    one-hot; ref_space_uid (B, N) int (the atom's token); atom_to_token (B, N) int, 0 at padding.
    """

    ref_pos: jax.Array
    ref_charge: jax.Array
    atom_attention_mask: jax.Array
    ref_element: jax.Array
    ref_atom_name_chars: jax.Array
    ref_space_uid: jax.Array
    atom_to_token: jax.Array


def rotate_half(x: jax.Array) -> jax.Array:
    half = x.shape[-1] // 2
    return jnp.concatenate([-x[..., half:], x[..., :half]], axis=-1)


def rotary_embedding(config: AtomEncoderConfig, ref_pos: jax.Array, ref_space_uid: jax.Array) -> Rotary:
    """``EsmFold2RotaryEmbedding``: rotary angles from physical position instead of a sequence
    index. Of a head's ``head_dim // 2`` frequency pairs, ``num_spatial_rope_pairs_per_axis`` per
    axis turn with x, y and z (pairs ordered x,x,..,y,y,..,z,z,..) at base ``spatial_rope_base_frequency``,
    ``num_uid_rope_pairs`` with the space UID (the atom's token) at ``uid_rope_base_frequency``, and
    the rest stay still (zero frequency). Built in fp32; returns (cos, sin) at the full head width."""
    n_spatial, n_uid = config.num_spatial_rope_pairs_per_axis, config.num_uid_rope_pairs
    n_inactive = config.head_dim // 2 - 3 * n_spatial - n_uid
    spatial = 1.0 / (config.spatial_rope_base_frequency ** (jnp.arange(n_spatial, dtype=jnp.float32) / n_spatial))
    uid = 1.0 / (config.uid_rope_base_frequency ** (jnp.arange(n_uid, dtype=jnp.float32) / n_uid))
    inv_freq = jnp.concatenate([jnp.tile(spatial, 3), uid, jnp.zeros((n_inactive,), jnp.float32)])
    uid_positions = jnp.broadcast_to(ref_space_uid.astype(jnp.float32)[..., None],
                                     ref_space_uid.shape + (n_uid + n_inactive,))
    positions = jnp.concatenate([jnp.repeat(ref_pos.astype(jnp.float32), n_spatial, axis=-1), uid_positions], axis=-1)
    freqs = positions * inv_freq  # (B, N, head_dim // 2)
    emb = jnp.concatenate([freqs, freqs], axis=-1)
    return jnp.cos(emb), jnp.sin(emb)


def sliding_window_mask(atom_mask: jax.Array, sliding_window: int) -> jax.Array:
    """``EsmFold2AtomEncoder.build_attention_mask``: (B, 1, N, N) bool, True where query i may
    attend key j: j is a real atom and ``|i - j| <= sliding_window // 2`` (inclusive radius)."""
    n = atom_mask.shape[1]
    index = jnp.arange(n)
    window = jnp.abs(index[:, None] - index[None, :]) <= sliding_window // 2  # (N, N)
    return (window[None, None] & atom_mask.astype(bool)[:, None, None, :])


def _block_size(radius: int) -> int:
    return max(32, 2 * radius)


def windowed_attention(q: jax.Array, k: jax.Array, v: jax.Array, atom_mask: jax.Array, radius: int,
                       scaling: float) -> jax.Array:
    """``attention`` under ``sliding_window_mask`` (radius ``radius``) without the N x N logits:
    queries in blocks of ``_block_size``, each against the ``block + 2 * radius`` keys around it.
    A key outside the window adds exactly zero to the dense softmax (exp of the lowest float), so
    the result is the same up to summation order. A query with no real key in its window gets the
    dense eager result there, every value averaged evenly (padding atoms only). q/k/v (B, H, N,
    D); atom_mask (B, N); returns (B, N, H, D)."""
    batch, heads, n, dim = q.shape
    block = _block_size(radius)
    if n <= block + 2 * radius:  # one block would see every key: the dense form is no bigger
        return attention(q, k, v, scaling, mask=sliding_window_mask(atom_mask, 2 * radius))
    blocks = -(-n // block)
    tail = blocks * block - n
    keys = jnp.arange(blocks)[:, None] * block + jnp.arange(block + 2 * radius)[None, :] - radius  # (nb, K)
    queries = jnp.arange(blocks)[:, None] * block + jnp.arange(block)[None, :]  # (nb, Q)
    padded_mask = jnp.pad(atom_mask.astype(bool), ((0, 0), (radius, radius + tail)))
    real_key = padded_mask[:, keys + radius]  # (B, nb, K): in range and a real atom
    near = jnp.abs(queries[:, :, None] - keys[:, None, :]) <= radius  # (nb, Q, K)
    allowed = (near[None] & real_key[:, :, None, :])[:, None]  # (B, 1, nb, Q, K)

    def key_blocks(x: jax.Array) -> jax.Array:
        x = jnp.pad(x, ((0, 0), (0, 0), (radius, radius + tail), (0, 0)))
        return x[:, :, keys + radius]  # (B, H, nb, K, D)

    qb = jnp.pad(q, ((0, 0), (0, 0), (0, tail), (0, 0))).reshape(batch, heads, blocks, block, dim)
    logits = jnp.einsum("bhnqd,bhnkd->bhnqk", qb, key_blocks(k)) * scaling
    logits = jnp.where(allowed, logits, jnp.finfo(logits.dtype).min)
    weights = jax.nn.softmax(logits.astype(jnp.float32), axis=-1).astype(q.dtype)
    out = jnp.einsum("bhnqk,bhnkd->bhnqd", weights, key_blocks(v)).reshape(batch, heads, blocks * block, dim)
    lonely = ~jnp.any(allowed, axis=-1).reshape(batch, 1, blocks * block, 1)
    out = jnp.where(lonely, jnp.mean(v, axis=2, keepdims=True), out)[:, :, :n]
    return jnp.swapaxes(out, 1, 2)


def scatter_atom_to_token(atom_features: jax.Array, atom_to_token: jax.Array, num_tokens: int,
                          atom_mask: jax.Array | None = None) -> jax.Array:
    """The mean of each token's atoms' features, (B, N, C) -> (B, num_tokens, C); masked atoms left
    out, a token without atoms zero (``scatter_reduce(mean, include_self=False)`` on zeros)."""
    batch, _, width = atom_features.shape
    index = atom_to_token if atom_mask is None else jnp.where(atom_mask.astype(bool), atom_to_token, num_tokens)
    rows = jnp.arange(batch)[:, None]
    sums = jnp.zeros((batch, num_tokens + 1, width), atom_features.dtype).at[rows, index].add(atom_features)
    counts = jnp.zeros((batch, num_tokens + 1), atom_features.dtype).at[rows, index].add(1.0)
    return (sums / jnp.maximum(counts, 1.0)[..., None])[:, :num_tokens]


def gather_token_to_atom(token_features: jax.Array, atom_to_token: jax.Array) -> jax.Array:
    """Each atom's token's features: (B, T, C) with (B, N) indices -> (B, N, C)."""
    return jnp.take_along_axis(token_features, atom_to_token[..., None], axis=1)


class AtomAttention(nnx.Module):
    """``EsmFold2AtomAttention``: windowed self-attention, q and k RMS-normed (weightless) then
    rotated, output gated by ``sigmoid(gate_proj(x))``; no biases."""

    def __init__(self, config: AtomEncoderConfig, radius: int, rngs: nnx.Rngs):
        width = config.hidden_size
        self.head_dim, self.radius = config.head_dim, radius
        for name in ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj"):
            setattr(self, name, linear(width, width, rngs))

    def __call__(self, x: jax.Array, atom_mask: jax.Array, rotary: Rotary) -> jax.Array:
        """x (B, N, C); atom_mask (B, N) bool, the real atoms; rotary (cos, sin) (B, N, head_dim)."""
        shape = x.shape[:-1] + (-1, self.head_dim)

        def heads(proj: nnx.Linear) -> jax.Array:
            return jnp.swapaxes(proj(x).reshape(shape), 1, 2)  # (B, H, N, D)

        cos, sin = (t[:, None] for t in rotary)  # (B, 1, N, D)
        q, k = rms_norm(heads(self.q_proj)), rms_norm(heads(self.k_proj))
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        out = windowed_attention(q, k, heads(self.v_proj), atom_mask, self.radius, self.head_dim ** -0.5)
        # The reference's ``nan_to_num`` guards its SDPA path; the eager one (``attention``) has no NaN.
        out = out.reshape(x.shape[:-1] + (-1,))
        return self.o_proj(out * jax.nn.sigmoid(self.gate_proj(x)))


class AtomLayer(nnx.Module):
    """``EsmFold2AtomLayer``: adaLN-Zero-modulated attention and SwiGLU, the six shifts, scales and
    gates from ``adaln_linear(silu(conditioning))`` in that order; the pre-norms are weightless RMS."""

    def __init__(self, config: AtomEncoderConfig, radius: int, rngs: nnx.Rngs):
        self.adaln_linear = linear(config.hidden_size, 6 * config.hidden_size, rngs)
        self.self_attn = AtomAttention(config, radius, rngs)
        self.mlp = SwiGLU(config.hidden_size, config.intermediate_size, rngs)

    def __call__(self, x: jax.Array, conditioning: jax.Array, atom_mask: jax.Array, rotary: Rotary) -> jax.Array:
        modulation = self.adaln_linear(jax.nn.silu(conditioning))
        if modulation.ndim == 2:
            modulation = modulation[:, None]
        attn_shift, attn_scale, attn_gate, mlp_shift, mlp_scale, mlp_gate = jnp.split(modulation, 6, axis=-1)
        x = x + attn_gate * self.self_attn(rms_norm(x) * (1 + attn_scale) + attn_shift, atom_mask, rotary)
        return x + mlp_gate * self.mlp(rms_norm(x) * (1 + mlp_scale) + mlp_shift)


class AtomEncoder(nnx.Module):
    """``EsmFold2AtomEncoder``: per-atom features -> ``atom_norm(atom_linear(.))``, the atom layers,
    then ``relu(atom_to_token_linear(.))`` averaged over each token's atoms. ``atoms`` is the
    sub-config of the call site (the input embedder's or the denoiser's)."""

    def __init__(self, config: EsmFold2Config, atoms: AtomEncoderConfig, rngs: nnx.Rngs):
        self.atoms = atoms
        self.sliding_window = config.sliding_window
        self.char_feature_dim = config.char_vocab_size * config.max_chars
        self.atom_linear = linear(config.atom_feature_dim, atoms.hidden_size, rngs)
        self.atom_norm = LayerNorm(atoms.hidden_size, rngs)
        radius = config.sliding_window // 2  # the reference's window is the total width
        self.layers = nnx.List([AtomLayer(atoms, radius, rngs) for _ in range(atoms.num_hidden_layers)])
        self.atom_to_token_linear = linear(atoms.hidden_size, atoms.output_dim, rngs)

    def embed_atoms(self, inputs: AtomInputs) -> tuple[jax.Array, Rotary]:
        """The per-atom base embedding (B, N, hidden) and the rotary tables; noise-independent."""
        batch, n = inputs.ref_pos.shape[:2]
        features = jnp.concatenate([
            inputs.ref_pos, inputs.ref_charge[..., None],
            inputs.atom_attention_mask[..., None].astype(inputs.ref_pos.dtype), inputs.ref_element,
            inputs.ref_atom_name_chars.reshape(batch, n, self.char_feature_dim)], axis=-1)
        embeds = self.atom_norm(self.atom_linear(features.astype(jnp.float32)))
        return embeds, rotary_embedding(self.atoms, inputs.ref_pos, inputs.ref_space_uid)

    def build_attention_mask(self, atom_mask: jax.Array) -> jax.Array:
        """The reference's dense window mask (B, 1, N, N), for comparison; the layers build what
        they need from ``atom_mask`` alone."""
        return sliding_window_mask(atom_mask, self.sliding_window)

    def __call__(self, x: jax.Array, conditioning: jax.Array, rotary: Rotary, atom_mask: jax.Array,
                 atom_to_token: jax.Array, num_tokens: int) -> tuple[jax.Array, jax.Array]:
        """Returns (token states (B, T, output_dim), atom states (B, N, hidden)). The input
        embedder passes the embeddings as both ``x`` and ``conditioning``; the denoiser adds the
        embedded noisy coordinates to ``x``. ``atom_mask`` (B, N) bool: the real atoms."""
        for layer in self.layers:
            x = layer(x, conditioning, atom_mask, rotary)
        tokens = scatter_atom_to_token(jax.nn.relu(self.atom_to_token_linear(x)), atom_to_token, num_tokens, atom_mask)
        return tokens, x


class AtomDecoder(nnx.Module):
    """``EsmFold2AtomDecoder`` (the denoiser's only): each atom gets its token's
    ``token_to_atom_linear`` state added, runs the atom layers, and ``output_linear(norm(.))`` is
    its coordinate update (B, N, 3)."""

    def __init__(self, config: EsmFold2Config, rngs: nnx.Rngs):
        diffusion = config.diffusion
        atoms = diffusion.atom_encoder
        self.token_to_atom_linear = linear(diffusion.hidden_size, atoms.hidden_size, rngs)
        self.layers = nnx.List([AtomLayer(atoms, config.sliding_window // 2, rngs)
                                for _ in range(atoms.num_hidden_layers)])
        self.norm = LayerNorm(atoms.hidden_size, rngs)
        self.output_linear = linear(atoms.hidden_size, 3, rngs)

    def __call__(self, tokens: jax.Array, x: jax.Array, conditioning: jax.Array, atom_mask: jax.Array,
                 rotary: Rotary, atom_to_token: jax.Array) -> jax.Array:
        x = x + gather_token_to_atom(self.token_to_atom_linear(tokens), atom_to_token)
        for layer in self.layers:
            x = layer(x, conditioning, atom_mask, rotary)
        return self.output_linear(self.norm(x))

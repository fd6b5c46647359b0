"""ESMFold2's pair-update blocks (transformers' ``EsmFold2TriangleMultiplicativeUpdate``,
``EsmFold2PairUpdateLayer``, ``EsmFold2PairUpdateStack``): the folding trunk, the LM encoder, the
parcae coda and the confidence head's trunk are all stacks of these.

A block is a triangular multiplicative update over outgoing edges, one over incoming edges (each
with a gated, masked projection of the normalised pair state and a gated output) and a SwiGLU
transition. Attribute names are the checkpoint keys (``tri_mul_out.proj_bundle``...). The layers of
a stack are one module with a leading layer axis (``nnx.vmap``), run with ``nnx.scan``: the body is
compiled once, however deep the stack (24 blocks in the released trunk).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from flamino_core.model.esmfold2.config import EsmFold2Config
from flamino_core.model.esmfold2.layers import LayerNorm, Transition, linear


class TriangleMultiplicativeUpdate(nnx.Module):
    """The update of a pair state (B, L, L, C): ``sigmoid(proj_gate(n)) * proj_emit(norm_mix(x))``
    with ``n = norm_start(z)``, ``x_ij = sum_k a_ik b_jk`` (outgoing) or ``sum_k a_ki b_kj``
    (incoming) and ``[a | b] = signal * sigmoid(gate logits) * mask`` from one fused ``proj_bundle``
    (4C wide: signal 2C, then gate logits 2C)."""

    def __init__(self, dim: int, outgoing: bool, rngs: nnx.Rngs):
        self.dim, self.outgoing = dim, outgoing
        self.norm_start = LayerNorm(dim, rngs)
        self.norm_mix = LayerNorm(dim, rngs)
        self.proj_bundle = linear(dim, 4 * dim, rngs)
        self.proj_emit = linear(dim, dim, rngs)
        self.proj_gate = linear(dim, dim, rngs)

    def __call__(self, z: jax.Array, pair_mask: jax.Array) -> jax.Array:
        normed = self.norm_start(z)
        signal, gate_logits = jnp.split(self.proj_bundle(normed), 2, axis=-1)
        routed = signal * jax.nn.sigmoid(gate_logits) * pair_mask[..., None].astype(z.dtype)
        left, right = jnp.split(routed, 2, axis=-1)
        # The reference runs this contraction chunk_size output rows at a time for memory; each
        # output element is the same sum over k either way, so it is one einsum here.
        if self.outgoing:
            contracted = jnp.einsum("bikd,bjkd->bijd", left, right)
        else:
            contracted = jnp.einsum("bkid,bkjd->bijd", left, right)
        return self.proj_emit(self.norm_mix(contracted)) * jax.nn.sigmoid(self.proj_gate(normed))


class PairUpdateLayer(nnx.Module):
    """``z + tri_mul_out(z)``, then ``+ tri_mul_in``, then the pair transition (by rows of
    ``chunk_size``, as the reference)."""

    def __init__(self, config: EsmFold2Config, rngs: nnx.Rngs):
        dim = config.pairwise_hidden_size
        self.tri_mul_out = TriangleMultiplicativeUpdate(dim, True, rngs)
        self.tri_mul_in = TriangleMultiplicativeUpdate(dim, False, rngs)
        self.pair_transition = Transition(dim, config.pair_transition_intermediate_size, config.chunk_size, rngs)

    def __call__(self, z: jax.Array, pair_mask: jax.Array) -> jax.Array:
        z = z + self.tri_mul_out(z, pair_mask)
        z = z + self.tri_mul_in(z, pair_mask)
        return self.pair_transition(z)


class PairUpdateStack(nnx.Module):
    """``num_layers`` ``PairUpdateLayer``s, stacked on a leading axis (checkpoint
    ``<stack>.layers.<i>.*`` is index i of ``<stack>.layers.*``)."""

    def __init__(self, config: EsmFold2Config, num_layers: int, rngs: nnx.Rngs):
        self.num_layers = num_layers

        @nnx.split_rngs(splits=num_layers)
        @nnx.vmap(in_axes=(0,), out_axes=0)
        def make_layers(rngs: nnx.Rngs) -> PairUpdateLayer:
            return PairUpdateLayer(config, rngs)

        self.layers = make_layers(rngs)

    def __call__(self, z: jax.Array, pair_mask: jax.Array) -> jax.Array:
        """z (B, L, L, C), pair_mask (B, L, L) float (1 where both tokens are real)."""

        @nnx.scan(in_axes=(0, nnx.Carry, None), out_axes=nnx.Carry)
        def run(layer: PairUpdateLayer, z: jax.Array, pair_mask: jax.Array) -> jax.Array:
            return layer(z, pair_mask)

        return run(self.layers, z, pair_mask)

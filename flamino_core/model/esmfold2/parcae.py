"""The trunk's linear recurrence over its loops (transformers' ``EsmFold2Parcae``, internally
"parcae"): a diagonal state-space update whose time axis is the recycling loop, not the sequence.
Each loop decays the pair state per channel and injects the freshly refined pair input; after the
last loop the state is projected (``out_proj``) and refined by a coda of pair-update blocks
(``output_stack``). Attribute names are the checkpoint keys (``parcae.*``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from flamino_core.model import exact_math
from flamino_core.model.esmfold2.config import EsmFold2Config
from flamino_core.model.esmfold2.layers import LayerNorm, linear
from flamino_core.model.esmfold2.pair import PairUpdateStack


class Parcae(nnx.Module):
    """``state' = decay * state + input_norm(injected) @ B^T``, with the discretised
    ``decay = exp(-softplus(log_delta) * exp(log_state_decay))`` and
    ``B = softplus(log_delta)[:, None] * input_matrix_continuous`` (kept in torch's (out, in)
    layout, as the reference applies it with ``F.linear``)."""

    def __init__(self, config: EsmFold2Config, rngs: nnx.Rngs):
        dim = config.pairwise_hidden_size
        self.input_norm = LayerNorm(dim, rngs)
        self.log_state_decay = nnx.Param(jnp.zeros((dim,), jnp.float32))
        self.log_delta = nnx.Param(jnp.zeros((dim,), jnp.float32))
        self.input_matrix_continuous = nnx.Param(jnp.eye(dim, dtype=jnp.float32))
        self.out_proj = linear(dim, dim, rngs)
        self.output_stack = PairUpdateStack(config, config.parcae_num_coda_layers, rngs)

    def discretize(self) -> tuple[jax.Array, jax.Array]:
        """(decay (C,), input matrix (C, C) in (out, in) layout): loop-invariant.

        Parity: softplus and exp from ``exact_math``, not the device's. A TPU's softplus is ~900
        ulp off (1e-4 relative, measured on a v5e) and the decay multiplies the state on every
        loop: the parity test's trunk moved 1.3e-4 for a 1e-5 relative error here, and the chip's
        was 5.4e-4 from the reference with the device's functions. The vectors are (C,): no cost."""
        delta = exact_math.softplus(self.log_delta[...])
        decay = exact_math.exp(-delta * exact_math.exp(self.log_state_decay[...]))
        return decay, delta[:, None] * self.input_matrix_continuous[...]

    def __call__(self, state: jax.Array, injected: jax.Array, decay: jax.Array, input_matrix: jax.Array) -> jax.Array:
        """One loop's step on (B, L, L, C) states."""
        return decay * state + self.input_norm(injected) @ input_matrix.T

    def decode_state(self, state: jax.Array, pair_mask: jax.Array) -> jax.Array:
        return self.output_stack(self.out_proj(state), pair_mask)

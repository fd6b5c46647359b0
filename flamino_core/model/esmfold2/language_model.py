"""How ESMFold2 reads its language model: ESM C's hidden states (the embeddings and every layer's
output, the last after the final norm), mixed over layers with learned weights and turned into a
pair representation (transformers' ``EsmFold2LanguageModelEncoder`` and ``EsmFold2SingleToPair``;
attribute names are the checkpoint keys, ``language_model.*``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from flamino_core.model.esmfold.pair import rows_in_chunks
from flamino_core.model.esmfold2.config import EsmFold2Config
from flamino_core.model.esmfold2.layers import LayerNorm, linear


class SingleToPair(nnx.Module):
    """``output_fc2(gelu(output_fc1([h_i * h_j, h_i - h_j])))`` with ``h = downproject(x)``, all
    ``pairwise_hidden_size`` wide; pair (i, j) takes token i first, as the reference does."""

    def __init__(self, dim: int, rngs: nnx.Rngs, chunk_size: int | None = None):
        self.chunk_size = chunk_size  # rows of the (B, L, L, 2C) input at a time (each row on its own)
        self.downproject = linear(dim, dim, rngs, bias=True)
        self.output_fc1 = linear(2 * dim, dim, rngs, bias=True)
        self.output_fc2 = linear(dim, dim, rngs, bias=True)

    def __call__(self, x: jax.Array) -> jax.Array:
        """x (B, L, C) -> (B, L, L, C)."""
        h = self.downproject(x)

        def rows(h_rows: jax.Array) -> jax.Array:
            pair = jnp.concatenate([h_rows[:, :, None] * h[:, None, :], h_rows[:, :, None] - h[:, None, :]], axis=-1)
            # torch's F.gelu is the exact (erf) GELU, not the tanh approximation JAX defaults to.
            return self.output_fc2(jax.nn.gelu(self.output_fc1(pair), approximate=False))

        return rows_in_chunks(rows, self.chunk_size, h)


class LanguageModelEncoder(nnx.Module):
    """ESM C hidden states (B, L, layers + 1, D_lm) -> pair states (B, L, L, C):
    ``pair_output_norm(single_to_pair(softmax(layer_weights) . pair_proj(pair_input_norm(h))))``."""

    def __init__(self, config: EsmFold2Config, rngs: nnx.Rngs):
        dim, lm_dim = config.pairwise_hidden_size, config.esmc.embed_dim
        self.single_to_pair = SingleToPair(dim, rngs, config.chunk_size)
        self.pair_output_norm = LayerNorm(dim, rngs)
        self.pair_input_norm = LayerNorm(lm_dim, rngs)
        self.pair_proj = linear(lm_dim, dim, rngs)
        self.layer_weights = nnx.Param(jnp.zeros((config.esmc.num_layers + 1,), jnp.float32))

    def __call__(self, hidden_states: jax.Array) -> jax.Array:
        projected = self.pair_proj(self.pair_input_norm(hidden_states.astype(jnp.float32)))  # (B, L, N+1, C)
        weights = jax.nn.softmax(self.layer_weights[...])
        mixed = jnp.einsum("n,blnc->blc", weights, projected)
        return self.pair_output_norm(self.single_to_pair(mixed))

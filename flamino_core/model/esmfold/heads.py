"""ESMFold's confidence heads and what is read from them: pLDDT (50 bins of lDDT in [0, 1] per
atom37 slot, from the structure module's state), the predicted aligned error (64 bins up to
31 Angstrom, from the pair state) and the pTM derived from the same logits (AlphaFold 2
supplement 1.9.7; OpenFold's ``openfold/utils/loss.py`` ``compute_tm`` and
``compute_predicted_aligned_error``, Apache License 2.0).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from flamino_core.model.esmfold.pair import layer_norm, linear

LDDT_BINS = 50
DISTOGRAM_BINS = 64  # the distogram's and the PAE's
PAE_MAX_BIN = 31.0  # Angstrom


class LDDTHead(nnx.Module):
    """LayerNorm then three Linear layers with no activation between them (the reference's
    ``nn.Sequential``: ``lddt_head.0`` .. ``.3``), to 37 atoms x 50 bins."""

    def __init__(self, state_dim: int, hidden: int, rngs: nnx.Rngs):
        self.norm = layer_norm(state_dim, rngs)
        self.linear_1 = linear(state_dim, hidden, rngs)
        self.linear_2 = linear(hidden, hidden, rngs)
        self.linear_3 = linear(hidden, 37 * LDDT_BINS, rngs)

    def __call__(self, states: jax.Array) -> jax.Array:
        x = self.linear_3(self.linear_2(self.linear_1(self.norm(states))))
        return x.reshape(states.shape[:-1] + (37, LDDT_BINS))


def plddt_from_logits(logits: jax.Array) -> jax.Array:
    """Expected lDDT in [0, 1] (bin centres 0.01, 0.03, ... 0.99): (..., 37, 50) -> (..., 37)."""
    edges = jnp.linspace(0.0, 1.0, LDDT_BINS + 1, dtype=jnp.float32)
    centres = (edges[:-1] + edges[1:]) / 2
    return jax.nn.softmax(logits, axis=-1) @ centres


def _error_bin_centres() -> jax.Array:
    """63 boundaries from 0 to 31 Angstrom; centres half a step past each, and one more past the last."""
    boundaries = jnp.linspace(0.0, PAE_MAX_BIN, DISTOGRAM_BINS - 1, dtype=jnp.float32)
    step = boundaries[1] - boundaries[0]
    centres = boundaries + step / 2
    return jnp.concatenate([centres, centres[-1:] + step])


def predicted_aligned_error(logits: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(expected error (..., L, L) in Angstrom, the largest it can be: the last bin's centre)."""
    centres = _error_bin_centres()
    return jnp.sum(jax.nn.softmax(logits, axis=-1) * centres, axis=-1), centres[-1]


def predicted_tm(logits: jax.Array, mask: jax.Array, eps: float = 1e-8) -> jax.Array:
    """pTM per protein (B,) from (B, L, L, 64) logits and its residues' mask (B, L).

    TM-score's d0 from the number of residues (at least 19), each aligned frame's expected TM
    averaged over the residues, and the best frame's value. The reference counts every row of a
    padded batch as a residue (and takes one maximum over the whole batch); here a protein's own
    residues count, which is the reference's number for a batch of one.
    """
    centres = _error_bin_centres()
    n = jnp.maximum(jnp.sum(mask, axis=-1), 19.0)  # (B,)
    d0 = 1.24 * (n - 15) ** (1.0 / 3) - 1.8
    tm_per_bin = 1.0 / (1 + centres**2 / d0[:, None] ** 2)  # (B, 64)
    expected = jnp.sum(jax.nn.softmax(logits, axis=-1) * tm_per_bin[:, None, None, :], axis=-1)  # (B, L, L)
    weights = mask / (eps + jnp.sum(mask, axis=-1, keepdims=True))
    per_frame = jnp.sum(expected * weights[:, None, :], axis=-1)  # (B, L)
    return jnp.max(jnp.where(mask > 0, per_frame, -jnp.inf), axis=-1)

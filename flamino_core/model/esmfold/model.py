"""ESMFold (Lin et al., Science 2023) in Flax NNX: an ESM-2 language model (the stem, frozen),
the folding trunk, the structure module and the heads, as transformers' ``EsmForProteinFolding``
computes them at inference (its attribute names are the checkpoint keys: ``esm``,
``esm_s_combine``, ``esm_s_mlp``, ``embedding``, ``trunk``, ``distogram_head``, ``ptm_head``,
``lm_head``, ``lddt_head``).

1. The stem reads the sequence in ESM-2's alphabet (``af2_to_esm`` maps AlphaFold's residue order
   to it) and keeps every hidden state, the embeddings included: the engine's ESM-2 pass computes
   them (``StemPass``, ``engine/fold.py``), on the stem's weights held here.
2. ``esm_s_combine``: a softmax over learned per-layer weights mixes them into one (L, D) state,
   projected by ``esm_s_mlp`` to the trunk's sequence state, plus an embedding of the residue
   type; the pair state starts at zero.
3. The trunk runs ``passes`` times (1 + recycles), each pass fed the previous one's states and
   its structure's binned distances; the structure module runs after every pass.
4. Heads on the last pass: distogram and PAE/pTM from the pair state, pLDDT from the structure
   module's states, LM logits from the sequence state.
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx, struct

from flamino_core.alphabet import AA_TO_IDX, CLS_IDX, EOS_IDX, PAD_IDX
from flamino_core.model.esm2 import ESM2
from flamino_core.model.esmfold import residue_constants as rc
from flamino_core.model.esmfold.atoms import atom14_to_atom37
from flamino_core.model.esmfold.config import FoldConfig
from flamino_core.model.esmfold.heads import (
    DISTOGRAM_BINS, LDDTHead, plddt_from_logits, predicted_aligned_error, predicted_tm,
)
from flamino_core.model.esmfold.pair import layer_norm, linear
from flamino_core.model.esmfold.structure import StructureOutput
from flamino_core.model.esmfold.trunk import FoldingTrunk, recycle_bins

# The stem's pass: (the stem's state, tokens (B, T)) -> {layer: (B, T, D)} for every layer 0..N (0 the
# embeddings, N after the final norm). The network does not run its stem itself: the engine's pass
# does (``engine/fold.py``), with the attention path, precision mode and memory plan of every ESM-2
# pass; the engine sits above this layer, so the fold is handed it.
StemPass = Callable[[nnx.State, jax.Array], dict]

# ESM-2's token for each AlphaFold residue index (row 0 of the reference's af2_to_esm is <pad>
# and the rest are shifted by one; the shift is folded in here).
AF2_TO_ESM = np.array([AA_TO_IDX[letter] for letter in rc.RESTYPES_WITH_X], dtype=np.int32)
RESIDUE_TOKENS = len(rc.RESTYPES_WITH_X) + 2  # 20 residues, X, and the reference's padding and mask rows: 23


class ESMFoldStem(ESM2):
    """ESM-2 as ESMFold holds it: transformers' ``EsmModel``, with the contact head and no LM head."""

    def __init__(self, config, rngs: nnx.Rngs):
        super().__init__(config, rngs)
        del self.lm_head  # the folding checkpoint has none; nothing here reads logits


class ResidueMLPProjection(nnx.Module):
    """``esm_s_mlp``: LayerNorm, Linear, ReLU, Linear (checkpoint ``.0``, ``.1``, ``.3``)."""

    def __init__(self, d_in: int, d_out: int, rngs: nnx.Rngs):
        self.norm = layer_norm(d_in, rngs)
        self.fc1 = linear(d_in, d_out, rngs)
        self.fc2 = linear(d_out, d_out, rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.fc2(jax.nn.relu(self.fc1(self.norm(x))))


@struct.dataclass
class FoldOutput:
    """One forward pass of B proteins of L residues (padded), float32.

    positions: (N, B, L, 14, 3) atom14 positions per structure-module iteration (Angstrom); the last
      is the prediction. atom37: (B, L, 37, 3) the last in atom37 layout; atom37_exists (B, L, 37).
    frames: (N, B, L, 7); angles: (N, B, L, 7, 2); states: (N, B, L, C).
    plddt: (B, L, 37) expected lDDT in [0, 1] per atom slot (the reference's scale).
    pae: (B, L, L) Angstrom; max_pae: the largest it can be. ptm: (B,).
    distogram_logits: (B, L, L, 64); lm_logits: (B, L, 23); s_s, s_z: the trunk's last states.
    recycle_bins: (passes, B, L, L) the distance bins each pass was fed (all 0 for the first).
    """

    positions: jax.Array
    atom37: jax.Array
    atom37_exists: jax.Array
    frames: jax.Array
    angles: jax.Array
    states: jax.Array
    plddt: jax.Array
    pae: jax.Array
    max_pae: jax.Array
    ptm: jax.Array
    distogram_logits: jax.Array
    lm_logits: jax.Array
    s_s: jax.Array
    s_z: jax.Array
    recycle_bins: jax.Array


class ESMFold(nnx.Module):
    def __init__(self, config: FoldConfig, rngs: nnx.Rngs):
        self.config = config
        # The stem's precision mode, as its engine runs it (``engine/fold.py``): "fp32", or "bf16"
        # (``weights.esmfold.with_stem_precision``: its dense kernels stored rounded).
        self.stem_precision = "fp32"
        # The whole fold's: "fp32", or "fast" (``weights.esmfold.with_fold_precision``: the trunk's
        # blocks on bf16 operands with fp32 accumulation, the stem in bf16), labelled in every output.
        self.fold_precision = "fp32"
        stem, trunk = config.stem, config.trunk
        sm_dim = trunk.structure_module.sequence_dim
        self.esm = ESMFoldStem(stem, rngs)
        self.esm_s_combine = nnx.Param(jnp.zeros((stem.num_layers + 1,), jnp.float32))
        self.esm_s_mlp = ResidueMLPProjection(stem.embed_dim, trunk.sequence_state_dim, rngs)
        self.embedding = nnx.Embed(RESIDUE_TOKENS, trunk.sequence_state_dim, rngs=rngs) if config.embed_aa else None
        self.trunk = FoldingTrunk(trunk, rngs)
        self.distogram_head = linear(trunk.pairwise_state_dim, DISTOGRAM_BINS, rngs)
        self.ptm_head = linear(trunk.pairwise_state_dim, DISTOGRAM_BINS, rngs)
        self.lm_head = linear(trunk.sequence_state_dim, RESIDUE_TOKENS, rngs)
        self.lddt_head = LDDTHead(sm_dim, config.lddt_head_hid_dim, rngs)

    def stem_tokens(self, aatype: jax.Array, mask: jax.Array) -> jax.Array:
        """(B, L + 2) the stem's token rows: <cls> residues <eos> then <pad>, the <eos> at the first
        padding position, as the reference builds them."""
        batch, length = aatype.shape
        tokens = jnp.where(mask, jnp.asarray(AF2_TO_ESM)[aatype], PAD_IDX)
        tokens = jnp.concatenate([jnp.full((batch, 1), CLS_IDX), tokens, jnp.full((batch, 1), PAD_IDX)], axis=1)
        lengths = jnp.sum(mask, axis=1)
        return jnp.where(jnp.arange(length + 2)[None, :] == lengths[:, None] + 1, EOS_IDX, tokens)

    def language_model_states(self, aatype: jax.Array, mask: jax.Array, stem: StemPass) -> jax.Array:
        """(B, L, layers + 1, D): every hidden state of the stem at the residues, computed by
        ``stem`` (the engine's pass, ``engine/fold.py``) on the stem's own weights; the states at
        <cls> and at the last column are dropped."""
        hidden = stem(nnx.state(self.esm), self.stem_tokens(aatype, mask))
        n = self.config.stem.num_layers
        return jnp.stack([hidden[layer] for layer in range(n + 1)], axis=2)[:, 1:-1]

    def initial_states(self, aatype: jax.Array, mask: jax.Array, stem: StemPass) -> tuple[jax.Array, jax.Array]:
        """The trunk's input: sequence state (B, L, Ds) and a zero pair state (B, L, L, Dz)."""
        esm_s = jax.lax.stop_gradient(self.language_model_states(aatype, mask, stem))
        weights = jax.nn.softmax(self.esm_s_combine[...])
        s = self.esm_s_mlp(jnp.einsum("n,blnd->bld", weights, esm_s))
        if self.embedding is not None:
            # The reference embeds the AlphaFold index as it is (its row 0, "padding", is alanine's).
            s = s + self.embedding(aatype)
        batch, length = aatype.shape
        return s, jnp.zeros((batch, length, length, self.config.trunk.pairwise_state_dim), s.dtype)

    def __call__(self, aatype: jax.Array, mask: jax.Array, residue_index: jax.Array | None = None,
                 passes: int | None = None, chunk_size: int | None = None, *, stem: StemPass) -> FoldOutput:
        """Fold B proteins.

        Args:
          stem: the stem's pass (``StemPass``): the engine's, ``engine/fold.stem_pass``.
          aatype: (B, L) AlphaFold residue indices (``residue_constants.aatype``), padded anyhow.
          mask: (B, L) bool, True at residues.
          residue_index: (B, L) positions for the relative-position embedding (0..L-1 by default).
          passes: trunk passes, 1 + recycles (``TrunkConfig.max_recycles`` when None, as the reference).
          chunk_size: rows of the pair state at a time in its attention and MLP (None: all at once).
        """
        if residue_index is None:
            residue_index = jnp.broadcast_to(jnp.arange(aatype.shape[1]), aatype.shape)
        passes = self.config.trunk.max_recycles if passes is None else passes
        s0, z0 = self.initial_states(aatype, mask, stem)
        graphdef, state = nnx.split(self)
        sm = self.config.trunk.structure_module

        def one_pass(carry, step):
            # The passes share one compiled body (lax.scan): the module is rebuilt from its
            # state inside the body, as a function of arrays (an NNX module may not cross traces).
            model = nnx.merge(graphdef, state, copy=True)
            s, z, structure = carry
            # The previous pass's structure as distance bins (bin 0 everywhere before the first).
            bins = jnp.where(step > 0, recycle_bins(structure.positions[-1]), 0)
            recycle_s, recycle_z = model.trunk.recycled(s, z, bins)
            s, z = model.trunk.blocks_pass(s0 + recycle_s, z0 + recycle_z, residue_index, mask, chunk_size)
            structure = model.trunk.structure_module(model.trunk.trunk2sm_s(s), model.trunk.trunk2sm_z(z), aatype,
                                                     mask.astype(jnp.float32))
            return (s, z, structure), bins

        no_structure = StructureOutput.zeros(sm.num_blocks, aatype.shape, sm.sequence_dim)
        start = (jnp.zeros_like(s0), jnp.zeros_like(z0), no_structure)
        (s, z, structure), bins = jax.lax.scan(one_pass, start, jnp.arange(passes))
        return self._heads(structure, s, z, aatype, mask, bins)

    def _heads(self, structure, s, z, aatype, mask, bins) -> FoldOutput:
        disto = self.distogram_head(z)
        ptm_logits = self.ptm_head(z)
        pae, max_pae = predicted_aligned_error(ptm_logits)
        atom37, exists = atom14_to_atom37(structure.positions[-1], aatype)
        return FoldOutput(
            positions=structure.positions, atom37=atom37, atom37_exists=exists * mask[..., None],
            frames=structure.frames, angles=structure.angles, states=structure.states,
            plddt=plddt_from_logits(self.lddt_head(structure.states[-1])), pae=pae, max_pae=max_pae,
            ptm=predicted_tm(ptm_logits, mask.astype(jnp.float32)),
            distogram_logits=(disto + jnp.swapaxes(disto, 1, 2)) / 2, lm_logits=self.lm_head(s), s_s=s, s_z=z,
            recycle_bins=bins)

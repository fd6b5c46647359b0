"""ESMFold2's confidence head (transformers' ``EsmFold2ConfidenceInputEmbedder``,
``EsmFold2RowAttentionPooling``, ``EsmFold2ConfidenceHead``): given the trunk's states and sampled
coordinates, per-atom pLDDT and resolved logits, PAE and PDE per token pair, and the pTM / ipTM /
chain-pair ipTM summaries, all on a 0-1 scale (PAE and PDE in Angstrom). Attribute names are the
checkpoint keys (``confidence_head.*``).

Per sample: the pair input is embedded once, repeated for each of K samples (the reference's
``repeat_interleave``, so sample k of protein b is row ``b * K + k``), and the representative atoms'
distances binned into it.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from flamino_core.model.esmfold2.config import EsmFold2Config
from flamino_core.model.esmfold2.layers import LayerNorm, linear
from flamino_core.model.esmfold2.pair import PairUpdateStack

LIGAND = 3  # mol_type of a non-polymer token
CONTACT = 8.0  # Angstrom: a token is at an interface when another chain's is this close
PAE_MAX = 32.0  # PAE and PDE bins span 0-32 Angstrom


def gather_tokens(source: jax.Array, index: jax.Array) -> jax.Array:
    """``source`` (B, N, d) at ``index`` (B, M) along axis 1: (B, M, d)."""
    return jnp.take_along_axis(source, index[..., None], axis=1)


def categorical_mean(logits: jax.Array, start: float, end: float) -> jax.Array:
    """Expected value of a categorical over evenly spaced bins spanning [start, end]."""
    edges = jnp.linspace(start, end, logits.shape[-1] + 1, dtype=jnp.float32)
    centers = (edges[:-1] + edges[1:]) / 2
    return jax.nn.softmax(logits.astype(jnp.float32), axis=-1) @ centers


def intra_token_index(atom_to_token: jax.Array) -> jax.Array:
    """Each atom's index within its token (B, A): a count restarting where the token changes."""
    same_as_prev = jnp.concatenate([jnp.zeros_like(atom_to_token[:, :1], bool),
                                    atom_to_token[:, 1:] == atom_to_token[:, :-1]], axis=1)
    count = jnp.broadcast_to(jnp.arange(1, atom_to_token.shape[1] + 1), atom_to_token.shape)
    return count - jax.lax.cummax(jnp.where(same_as_prev, 0, count), axis=1)


class ConfidenceInputEmbedder(nnx.Module):
    """The head's pair input: the normalised trunk pair state plus the relative-position and
    bond encodings and three projections of the normalised single inputs (row, column, product)."""

    def __init__(self, config: EsmFold2Config, rngs: nnx.Rngs):
        single, pair = config.single_inputs_size, config.pairwise_hidden_size
        self.single_inputs_norm = LayerNorm(single, rngs)
        self.pair_norm = LayerNorm(pair, rngs)
        for name in ("single_to_pair", "single_to_pair_transpose", "single_to_pair_prod_in1",
                     "single_to_pair_prod_in2"):
            setattr(self, name, linear(single, pair, rngs))
        self.single_to_pair_prod_out = linear(pair, pair, rngs)

    def __call__(self, single_inputs, pair_states, relative_position_encoding, token_bonds_encoding):
        s = self.single_inputs_norm(single_inputs)
        z = self.pair_norm(pair_states) + relative_position_encoding + token_bonds_encoding
        z = z + self.single_to_pair(s)[:, :, None]
        z = z + self.single_to_pair_transpose(s)[:, None]
        return z + self.single_to_pair_prod_out(self.single_to_pair_prod_in1(s)[:, :, None]
                                                * self.single_to_pair_prod_in2(s)[:, None])


class RowAttentionPooling(nnx.Module):
    """Each row i of the pair state pooled over j with softmax(attn_proj(z_ij)) weights (padding
    keys excluded), projected to the single width."""

    def __init__(self, config: EsmFold2Config, rngs: nnx.Rngs):
        self.attn_proj = linear(config.pairwise_hidden_size, 1, rngs)
        self.out_proj = linear(config.pairwise_hidden_size, config.hidden_size, rngs)

    def __call__(self, z: jax.Array, token_mask: jax.Array) -> jax.Array:
        scores = self.attn_proj(z)[..., 0]
        # finfo.min rather than -inf, as the reference: a row of padding keys stays finite.
        scores = jnp.where(token_mask[:, None, :], scores, jnp.finfo(scores.dtype).min)
        weights = jax.nn.softmax(scores.astype(jnp.float32), axis=-1)
        return self.out_proj(jnp.einsum("bij,bijc->bic", weights, z))


class ConfidenceHead(nnx.Module):
    def __init__(self, config: EsmFold2Config, rngs: nnx.Rngs):
        head = config.confidence_head
        self.eps = head.eps
        # Stored in the checkpoint (a buffer there); read back as is.
        self.boundaries = nnx.Param(jnp.linspace(head.min_dist, head.max_dist, head.distogram_bins - 1,
                                                 dtype=jnp.float32))
        self.dist_bin_pairwise_embed = nnx.Embed(head.distogram_bins, config.pairwise_hidden_size, rngs=rngs)
        self.input_embedder = ConfidenceInputEmbedder(config, rngs)
        self.row_attention_pooling = RowAttentionPooling(config, rngs)
        self.folding_trunk = PairUpdateStack(config, head.num_hidden_layers, rngs)
        self.plddt_layernorm = LayerNorm(config.hidden_size, rngs)
        self.plddt_weight = nnx.Param(
            jnp.zeros((config.max_atoms_per_token, config.hidden_size, head.num_plddt_bins), jnp.float32))
        self.pae_layernorm = LayerNorm(config.pairwise_hidden_size, rngs)
        self.pae_head = linear(config.pairwise_hidden_size, head.num_pae_bins, rngs)
        self.pde_layernorm = LayerNorm(config.pairwise_hidden_size, rngs)
        self.pde_head = linear(config.pairwise_hidden_size, head.num_pde_bins, rngs)
        self.resolved_layernorm = LayerNorm(config.hidden_size, rngs)
        self.resolved_weight = nnx.Param(jnp.zeros((config.max_atoms_per_token, config.hidden_size, 2), jnp.float32))

    def __call__(self, single_inputs, pair_states, predicted_coords, distogram_atom_idx, attention_mask,
                 atom_to_token, atom_attention_mask, asym_id, mol_type, relative_position_encoding,
                 token_bonds_encoding, num_diffusion_samples: int = 1, num_chains: int | None = None) -> dict:
        """As the reference's ``forward``: ``predicted_coords`` (B*K, A, 3) or (B, K, A, 3);
        ``atom_to_token`` zeroed at padding (the trunk's ``TrunkOutput.atom_to_token``);
        ``num_chains``: the size of ``pair_chains_iptm`` (static; the reference's max(asym_id) + 1).
        Returns the reference's dict of arrays, each with a leading B*K axis."""
        k = num_diffusion_samples
        repeat = lambda x: jnp.repeat(x, k, axis=0)  # noqa: E731 (torch's repeat_interleave)
        z = repeat(self.input_embedder(single_inputs, pair_states, relative_position_encoding,
                                       token_bonds_encoding))
        atom_to_token, atom_mask = repeat(atom_to_token), repeat(atom_attention_mask)
        rep_idx, token_mask = repeat(distogram_atom_idx), repeat(attention_mask).astype(bool)
        asym, mol = repeat(asym_id), repeat(mol_type)
        coords = predicted_coords.reshape(-1, *predicted_coords.shape[-2:])

        rep = gather_tokens(coords, rep_idx)
        # A direct difference, as the reference's cdist(compute_mode="donot_use_mm_for_euclid_dist").
        distances = jnp.sqrt(jnp.sum(jnp.square(rep[:, :, None] - rep[:, None, :]), axis=-1))
        bins = jnp.sum(distances[..., None] > self.boundaries[...], axis=-1)
        z = z + self.dist_bin_pairwise_embed(bins)
        pair_mask = (token_mask[:, :, None] & token_mask[:, None, :]).astype(jnp.float32)
        # The stack's output (itself z plus its updates) is added to z again, as the reference does.
        z = z + self.folding_trunk(z, pair_mask)
        single = self.row_attention_pooling(z, token_mask)

        out = self._atom_confidences(single, atom_to_token, atom_mask, rep_idx, distances, mol, asym)
        out["pae_logits"] = self.pae_head(self.pae_layernorm(z))
        out["pde_logits"] = self.pde_head(self.pde_layernorm(z))
        out["pae"] = categorical_mean(out["pae_logits"], 0.0, PAE_MAX)
        out["pde"] = categorical_mean(out["pde_logits"], 0.0, PAE_MAX)
        chains = int(num_chains) if num_chains is not None else int(jnp.max(asym_id)) + 1
        out.update(ptm_iptm(out["pae_logits"], token_mask, asym, chains, self.eps))
        return out

    def _per_atom_logits(self, single_at_atoms, norm: LayerNorm, weight: jax.Array, slot: jax.Array) -> jax.Array:
        """Each atom's logits from its slot's weight (max_atoms, hidden, bins): every slot's logits,
        then the atom's own (the reference gathers the weights per atom; the same sums, without
        an (atoms, hidden, bins) copy)."""
        every_slot = jnp.einsum("bac,mcn->bamn", norm(single_at_atoms), weight)
        return jnp.take_along_axis(every_slot, slot[:, :, None, None], axis=2)[:, :, 0]

    def _atom_confidences(self, single, atom_to_token, atom_mask, rep_idx, distances, mol_type, asym) -> dict:
        mask = atom_mask.astype(jnp.float32)
        at_atoms = gather_tokens(single, atom_to_token)
        slot = jnp.minimum(intra_token_index(atom_to_token), self.plddt_weight.shape[0] - 1)
        plddt_logits = self._per_atom_logits(at_atoms, self.plddt_layernorm, self.plddt_weight[...], slot)
        per_atom = categorical_mean(plddt_logits, 0.0, 1.0)
        rows = jnp.arange(single.shape[0])[:, None]
        token_sum = jnp.zeros(single.shape[:2], jnp.float32).at[rows, atom_to_token].add(per_atom * mask)
        atom_count = jnp.zeros(single.shape[:2], jnp.float32).at[rows, atom_to_token].add(mask)
        is_ligand = (mol_type == LIGAND).astype(jnp.float32)
        inter_chain = (asym[:, :, None] != asym[:, None, :]).astype(jnp.float32)
        near = (distances < CONTACT).astype(jnp.float32)
        interface = jnp.max(near * inter_chain * (1.0 - is_ligand)[:, :, None], axis=-1)
        # Ligand tokens always count, at double weight; polymer tokens only at an interface.
        iplddt_weight = jnp.where(is_ligand > 0, 2.0, interface)
        atom_weight = mask * gather_tokens(iplddt_weight[..., None], atom_to_token)[..., 0]
        return {
            "plddt_logits": plddt_logits,
            "plddt": token_sum / jnp.maximum(atom_count, 1e-6),
            "plddt_per_atom": per_atom,
            "plddt_ca": jnp.take_along_axis(per_atom, rep_idx, axis=1),
            "complex_plddt": jnp.sum(per_atom * mask, -1) / (jnp.sum(mask, -1) + self.eps),
            "complex_iplddt": jnp.sum(per_atom * atom_weight, -1) / (jnp.sum(atom_weight, -1) + self.eps),
            "resolved_logits": self._per_atom_logits(at_atoms, self.resolved_layernorm, self.resolved_weight[...],
                                                     slot),
        }


def ptm_iptm(pae_logits: jax.Array, token_mask: jax.Array, asym: jax.Array, num_chains: int, eps: float) -> dict:
    """pTM, ipTM and the (chains x chains) ipTM matrix from PAE logits (B, L, L, bins): the TM
    score's expected per-pair term (d0 from the number of real tokens, floored at 19), averaged
    over a row's columns, maximised over rows; ipTM over other chains' columns only; entry (i, j)
    of the matrix averages over chain i's columns and maximises over chain j's rows."""
    num_bins = pae_logits.shape[-1]
    width = PAE_MAX / num_bins
    centers = (jnp.arange(num_bins, dtype=jnp.float32) + 0.5) * width
    mask = token_mask.astype(jnp.float32)
    residues = jnp.sum(mask, axis=-1, keepdims=True)
    d0 = 1.24 * (jnp.maximum(residues, 19.0) - 15.0) ** (1.0 / 3.0) - 1.8  # Zhang & Skolnick (2004)
    tm_per_bin = 1.0 / (1.0 + (centers / d0) ** 2)  # (B, bins)
    tm = jnp.sum(jax.nn.softmax(pae_logits.astype(jnp.float32), axis=-1) * tm_per_bin[:, None, None, :], axis=-1)
    pair = mask[:, :, None] * mask[:, None, :]
    ptm = jnp.max(jnp.sum(tm * pair, -1) / (jnp.sum(pair, -1) + eps), axis=-1)
    inter = (asym[:, :, None] != asym[:, None, :]).astype(jnp.float32) * pair
    iptm = jnp.max(jnp.sum(tm * inter, -1) / (jnp.sum(inter, -1) + eps), axis=-1)
    member = (asym[..., None] == jnp.arange(num_chains)).astype(jnp.float32) * mask[..., None]  # (B, L, C)
    column_mean = jnp.einsum("blj,bjc->blc", tm, member) / (jnp.sum(member, axis=1)[:, None, :] + eps)
    in_row_chain = member[:, :, None, :] > 0  # (B, L, 1, C_j)
    best = jnp.max(jnp.where(in_row_chain, column_mean[:, :, :, None], -jnp.inf), axis=1)  # (B, C_i, C_j)
    return {"ptm": ptm, "iptm": iptm, "pair_chains_iptm": jnp.maximum(best, 0.0)}

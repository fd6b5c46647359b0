"""ESM C over several chains in one row: the language-model pass ESMFold2's stem runs.

transformers' ``EsmFold2Model._compute_lm_hidden_states`` (models/esmfold2, 5.25) and
``EsmcModel(..., sequence_id=..., output_hidden_states=True)`` (models/esmc), in three pure steps:

1. ``chain_rows`` (host, NumPy): the protein tokens of a structure row collapsed to one LM token
   per ``(asym_id, residue_index)`` (the first in input order: a modified residue spans several
   structure tokens but was one token to the LM), grouped by chain in ascending ``asym_id`` and
   wrapped ``[BOS] chain1 [EOS BOS] chain2 ... [EOS]``, right-padded; ``sequence_id`` numbers the
   chains (each BOS starts one; PAD -1); and, per input token, the LM position it reads back.
2. ``chain_layout`` + the engine's ESM C pass (``ChainPass``, ``engine/fold.py``: the network's
   forward keeping every hidden state, on that ``Layout``), with rotary positions absolute over
   the whole row (they run on across chain boundaries, as transformers' docstring says) and each
   token's keys those of its own chain (block-diagonal: ``Layout``'s spans, the contract of every
   attention path). The reference masks by ``sequence_id`` only when a row holds more than one
   chain and by padding otherwise; both give every real token the keys of its chain, and differ
   only at padding queries, which are never read back.
3. ``lm_hidden_states``: both, then each input token's (N + 1) hidden states gathered from its LM
   position; tokens that are not protein (or are padding) get zeros, as the reference's.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from flamino_core.alphabet import CLS_IDX, EOS_IDX, PAD_IDX
from flamino_core.model.segments import Layout

PROTEIN = 0  # ESMFold2's mol_type of a protein token (1 DNA, 2 RNA, 3 ligand)


@dataclasses.dataclass(frozen=True)
class ChainRows:
    """The LM's input for B structure rows of N tokens (NumPy)."""

    tokens: np.ndarray  # (B, L) int32: [BOS] chain1 [EOS BOS] chain2 ... [EOS], then PAD
    sequence_id: np.ndarray  # (B, L) int32: the chain of each token (0, 1, ...), -1 at PAD
    lm_position: np.ndarray  # (B, N) int32: each input token's LM position, -1 where none
    max_chains: int  # the most chains in one row


def chain_rows(input_ids, asym_id, residue_index, mol_type, attention_mask, multiple: int = 1) -> ChainRows:
    """Step 1 (see the module): ``input_ids`` are ESM C token ids (``alphabet``) for the protein
    tokens; all inputs (B, N). ``multiple``: pad L up to a multiple of it (fewer compiled shapes).

    Raises:
      ValueError: a row with no protein token (the reference has nothing to run there either).
    """
    input_ids, asym_id, residue_index = (np.asarray(a) for a in (input_ids, asym_id, residue_index))
    protein = (np.asarray(mol_type) == PROTEIN) & np.asarray(attention_mask).astype(bool)
    rows, positions, max_chains = [], np.full(input_ids.shape, -1, np.int32), 0
    for b in range(input_ids.shape[0]):
        where = np.flatnonzero(protein[b])
        if where.size == 0:
            raise ValueError(f"structure row {b} holds no protein token: ESM C has nothing to read there")
        first: dict[tuple[int, int], int] = {}  # key -> its collapsed index, in order of first appearance
        inverse = np.array([first.setdefault((int(asym_id[b, t]), int(residue_index[b, t])), len(first))
                            for t in where])
        kept = where[np.unique(inverse, return_index=True)[1]]  # the first token of each key
        chains = np.asarray(asym_id[b, kept])
        lm_of_collapsed = np.empty(len(kept), np.int32)
        row, cursor = [CLS_IDX], 1
        chain_ids = np.unique(chains)  # ascending asym_id, as torch.unique(sorted=True)
        for i, chain in enumerate(chain_ids):
            members = np.flatnonzero(chains == chain)
            row.extend(int(t) for t in input_ids[b, kept[members]])
            lm_of_collapsed[members] = np.arange(cursor, cursor + members.size)
            cursor += members.size
            row.extend([EOS_IDX, CLS_IDX] if i < len(chain_ids) - 1 else [EOS_IDX])
            cursor += 2
        positions[b, where] = lm_of_collapsed[inverse]
        max_chains = max(max_chains, len(chain_ids))
        rows.append(row)
    width = -(-max(map(len, rows)) // multiple) * multiple
    tokens = np.full((len(rows), width), PAD_IDX, np.int32)
    for b, row in enumerate(rows):
        tokens[b, :len(row)] = row
    sequence_id = np.where(tokens == PAD_IDX, -1, np.cumsum(tokens == CLS_IDX, axis=1) - 1).astype(np.int32)
    return ChainRows(tokens, sequence_id, positions, max_chains)


def chain_layout(sequence_id) -> Layout:
    """The ``Layout`` of right-padded rows whose chains ``sequence_id`` numbers (B, L): positions
    0..L-1 over the whole row, each token's keys the run of its own chain (padding's: the padding).

    Raises:
      ValueError: a chain that is not one contiguous run, or padding (-1) before a chain's token.
    """
    ids = np.asarray(sequence_id)
    for b, row in enumerate(ids):
        runs = row[np.r_[True, row[1:] != row[:-1]]]
        if len(set(runs.tolist())) != len(runs) or (-1 in runs and runs[-1] != -1):
            raise ValueError(f"row {b}: each chain's tokens must be one run and padding (-1) last, "
                             f"as [BOS] chain [EOS BOS] chain ... [EOS] then padding (got runs {runs.tolist()})")
    ids = jnp.asarray(ids, jnp.int32)
    batch, length = ids.shape
    index = jnp.broadcast_to(jnp.arange(length, dtype=jnp.int32), (batch, length))
    change = ids[:, 1:] != ids[:, :-1]
    edge = jnp.ones((batch, 1), bool)
    start = jax.lax.cummax(jnp.where(jnp.concatenate([edge, change], axis=1), index, 0), axis=1)
    stop = jax.lax.cummin(jnp.where(jnp.concatenate([change, edge], axis=1), index + 1, length), axis=1,
                          reverse=True)
    return Layout(index, start, stop, one_per_row=False)


# The pass over the rows: (tokens (B, L), their ``Layout``) -> {layer: (B, L, D)} for every layer 0..N
# (0 the embeddings, N after the final norm), as transformers' ``hidden_states`` stacks them (its last
# entry is tied to ``last_hidden_state``, the normed one). The engine's forward (``engine/fold.py``).
ChainPass = Callable[[jax.Array, Layout], dict]


def esmc_hidden_states(stem: ChainPass, tokens, sequence_id) -> jax.Array:
    """Step 2: (N + 1, B, L, D) hidden states of ESM C over ``tokens`` (B, L) with chain-aware
    attention, by ``stem`` (the engine's pass over the ESM C network), as ``EsmcModel(input_ids,
    sequence_id=sequence_id, output_hidden_states=True).hidden_states`` stacked."""
    hidden = stem(jnp.asarray(tokens, jnp.int32), chain_layout(sequence_id))
    return jnp.stack([hidden[layer] for layer in sorted(hidden)])


def lm_hidden_states(stem: ChainPass, input_ids, asym_id, residue_index, mol_type, attention_mask,
                     multiple: int = 16) -> np.ndarray:
    """Step 3: (B, N, layers + 1, D) float32, ``_compute_lm_hidden_states``'s layout: each
    structure token's ESM C hidden states (embeddings first, the final-normed layer last),
    zeros for tokens that are not protein or are padding."""
    rows = chain_rows(input_ids, asym_id, residue_index, mol_type, attention_mask, multiple)
    every = np.asarray(esmc_hidden_states(stem, rows.tokens, rows.sequence_id), np.float32)
    gathered = np.take_along_axis(every, np.maximum(rows.lm_position, 0)[None, :, :, None], axis=2)
    out = np.moveaxis(gathered, 0, 2)  # (B, N, layers + 1, D)
    out[rows.lm_position < 0] = 0.0
    return out

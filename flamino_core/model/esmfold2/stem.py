"""ESMFold2's language-model stem: ESM C's hidden states for a complex, as transformers'
``EsmFold2Model._compute_lm_hidden_states`` computes them.

Per row: the protein tokens, one per (asym_id, residue_index) in order of first appearance (a
modified residue split into several structure tokens is one LM token: the LM was trained per
residue); the chains, in increasing asym_id, wrapped ``<cls> chain1 <eos> <cls> chain2 ... <eos>``
(``<cls>`` is ESM C's BOS); each chain attends only to itself (<cls> through <eos>) when any row
holds several, while rotary positions run on across chains (the reference's ``sequence_id``
masking, absolute ``position_ids``). Every hidden state is kept: the embeddings, each layer's
output, the last after the final norm; each structure token gets its LM token's states, non-protein
and padding tokens zeros.

flamino's ``ESMC`` packs sequences with positions restarting per sequence (``segments.layout``),
not what the reference does here, so this builds its own ``Layout`` (global positions, one key
span per chain) and runs the model's layer stack through ``LayerStack._run_part``. The collapse
and wrapping are data-dependent and run on the host (NumPy); the network part is jitted.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from flamino_core.alphabet import PAD_IDX
from flamino_core.model.attention import AttentionImpl
from flamino_core.model.esmc import ESMC
from flamino_core.model.segments import Layout
from flamino_core.model.stack import PURE_JAX, LayerStack

BOS, EOS = 0, 2  # ESM C's <cls> (its BOS) and <eos>
PROTEIN = 0  # mol_type of a protein token


def lm_inputs(input_ids, asym_id, residue_index, mol_type, attention_mask) -> dict[str, np.ndarray]:
    """The ESM C rows of a batch (NumPy, all (B, L) token inputs): ``tokens`` (B, T) right-padded
    with <pad>; ``key_start``/``key_stop`` (B, T), each token's chain span (<cls> to <eos>; padding
    the whole row's real tokens, never read); ``lm_position`` (B, L), each structure token's LM
    token, -1 where it has none (non-protein, padding)."""
    input_ids, asym_id, residue_index = (np.asarray(a) for a in (input_ids, asym_id, residue_index))
    protein = (np.asarray(mol_type) == PROTEIN) & np.asarray(attention_mask).astype(bool)
    batch, num_tokens = input_ids.shape
    rows, spans, lm_position = [], [], np.full((batch, num_tokens), -1, np.int64)
    for b in range(batch):
        at = np.flatnonzero(protein[b])
        residue_of: dict[tuple[int, int], int] = {}  # (asym, residue) -> its LM residue, in order of first token
        firsts, inverse = [], []  # each LM residue's first token; each protein token's LM residue
        for t in at:
            key = (int(asym_id[b, t]), int(residue_index[b, t]))
            if key not in residue_of:
                residue_of[key] = len(firsts)
                firsts.append(t)
            inverse.append(residue_of[key])
        firsts, inverse = np.asarray(firsts, np.int64), np.asarray(inverse, np.int64)
        chain_of = asym_id[b, firsts] if len(firsts) else np.zeros(0, np.int64)
        row, row_spans, lm_of_residue = [BOS], [], np.zeros(len(firsts), np.int64)
        chains = np.unique(chain_of)
        for i, chain in enumerate(chains):
            members = np.flatnonzero(chain_of == chain)
            start = len(row) - 1  # this chain's <cls>
            lm_of_residue[members] = np.arange(len(row), len(row) + len(members))
            row += [int(t) for t in input_ids[b, firsts[members]]] + [EOS]
            row_spans.append((start, len(row)))
            if i < len(chains) - 1:
                row.append(BOS)
        if not len(chains):
            row.append(EOS)
            row_spans.append((0, 2))
        rows.append(row)
        spans.append(row_spans)
        lm_position[b, at] = lm_of_residue[inverse]
    length = max(len(r) for r in rows)
    tokens = np.full((batch, length), PAD_IDX, np.int64)
    key_start, key_stop = np.zeros((batch, length), np.int64), np.zeros((batch, length), np.int64)
    for b, (row, row_spans) in enumerate(zip(rows, spans)):
        tokens[b, :len(row)] = row
        key_stop[b] = len(row)  # padding: any non-empty span (its states are never read)
        for start, stop in row_spans:
            key_start[b, start:stop], key_stop[b, start:stop] = start, stop
    return {"tokens": tokens, "key_start": key_start, "key_stop": key_stop, "lm_position": lm_position}


def esmc_hidden_states(esmc: ESMC, tokens: jax.Array, key_start: jax.Array, key_stop: jax.Array,
                       attention: AttentionImpl = PURE_JAX) -> jax.Array:
    """(B, T, layers + 1, D): the embeddings, every layer's output, the last one normalised (the
    reference's ``hidden_states``: transformers ties the last to ``last_hidden_state``)."""
    index = jnp.broadcast_to(jnp.arange(tokens.shape[1], dtype=jnp.int32), tokens.shape)
    rows = Layout(index, key_start.astype(jnp.int32), key_stop.astype(jnp.int32), one_per_row=False)
    x = esmc.embed(tokens, rows)
    n = esmc.config.num_layers
    last, every = LayerStack._run_part(*nnx.split(esmc.layers), 0, n, x, *rows.queries(), attention, emit=True)
    states = jnp.concatenate([x[None], every[:-1], esmc.final_norm(last)[None]], axis=0)  # (n + 1, B, T, D)
    return jnp.moveaxis(states, 0, 2)


@functools.partial(jax.jit, static_argnames=("graphdef",))
def _hidden_states_jit(graphdef, state, tokens, key_start, key_stop, lm_position):
    esmc = nnx.merge(graphdef, state)
    states = esmc_hidden_states(esmc, tokens, key_start, key_stop)
    gathered = jnp.take_along_axis(states, jnp.maximum(lm_position, 0)[:, :, None, None], axis=1)
    return jnp.where((lm_position >= 0)[:, :, None, None], gathered, 0.0)


def language_model_states(esmc: ESMC, features: dict) -> jax.Array:
    """(B, L, layers + 1, D) ESM C states of each structure token of ``features`` (the
    featuriser's dict: ``input_ids``, ``asym_id``, ``residue_index``, ``mol_type``,
    ``attention_mask``), zeros where a token has none. Not jittable as a whole (the LM rows'
    length depends on the data); the network part is."""
    rows = lm_inputs(*(features[k] for k in ("input_ids", "asym_id", "residue_index", "mol_type",
                                             "attention_mask")))
    graphdef, state = nnx.split(esmc)
    return _hidden_states_jit(graphdef, state, *(jnp.asarray(rows[k]) for k in
                                                 ("tokens", "key_start", "key_stop", "lm_position")))

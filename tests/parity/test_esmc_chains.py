"""The chain-aware ESM C pass ESMFold2's stem needs (``model/esmc_chains.py``) against transformers
5.25 on the same random weights: ``EsmcModel(..., sequence_id=..., output_hidden_states=True)`` and
``EsmFold2Model._compute_lm_hidden_states`` itself (run on a stand-in holding the ESM C model and
its config: the method reads only ``config.esmc_config``, ``esmc`` and ``device``).

The structure rows are built the way ESMFold2's featurisation lays them out: two protein chains
given out of ``asym_id`` order, a ligand's tokens between them (not protein: zeros), a modified
residue spanning three structure tokens of one ``(asym_id, residue_index)`` (one LM token, read
back three times), padding; a second row of one chain, shorter (the single-chain case, padded).

Bound: test_parity.py's 1e-4 absolute + 1e-5 relative (fp32, summation order only); every hidden
state of every real token, embeddings and the final-normed layer included.
"""

from __future__ import annotations

import types

import numpy as np
import pytest
import torch

from flamino_core import load_weights
from flamino_core.alphabet import encode
from flamino_core.model import esmc_chains
from flamino_core.model.config import ModelConfig
from flamino_core.weights.convert import params_to_model
from conftest import checkpoint_seed
from family_checkpoints import make_hf_esmc
from test_parity import close

CONFIG = ModelConfig.esmc(2, 128, 2, name="esmc-t2-128")  # head width 64, as every published ESM C
LIGAND = 3


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    hf = make_hf_esmc(CONFIG, checkpoint_seed("esmc", "chains"))
    folder = tmp_path_factory.mktemp("esmc-chains") / "esmc"
    hf.save_pretrained(folder)
    weights = load_weights(str(folder))
    return hf, params_to_model(weights.params, weights.config)


def structure_rows(a: str, b: str, c: str):
    """Row 0: chain 2 (``b``), 3 ligand tokens, chain 1 (``a``, its 5th residue modified: three
    tokens), then padding; row 1: chain 0 (``c``) alone, padded."""
    def chain(sequence, asym, modified=None):
        ids = list(encode(sequence)[1:-1])
        residues = list(range(1, len(sequence) + 1))
        if modified is not None:  # three structure tokens of one residue (atom-tokenised)
            ids[modified + 1:modified + 1] = [ids[modified]] * 2
            residues[modified + 1:modified + 1] = [residues[modified]] * 2
        return ids, [asym] * len(ids), residues, [0] * len(ids)

    parts0 = [chain(b, 2), ([20, 20, 20], [9] * 3, [1, 1, 1], [LIGAND] * 3), chain(a, 1, modified=4)]
    row0 = [sum((list(p[i]) for p in parts0), []) for i in range(4)]
    row1 = [list(x) for x in chain(c, 0)]
    width = len(row0[0]) + 4
    arrays = np.zeros((4, 2, width), np.int64)
    mask = np.zeros((2, width), bool)
    for r, row in enumerate((row0, row1)):
        for i in range(4):
            arrays[i, r, :len(row[i])] = row[i]
        mask[r, :len(row[0])] = True
    input_ids, asym_id, residue_index, mol_type = arrays
    mol_type[~mask] = LIGAND  # padding: neither protein nor attended
    return input_ids, asym_id, residue_index, mol_type, mask


@pytest.fixture(scope="module")
def rows(real_sequences):
    chosen = sorted((s for s in real_sequences.values() if 60 <= len(s) <= 120), key=len)
    a, b, c = chosen[0][:37], chosen[1][:29], chosen[2][:41]
    return structure_rows(a, b, c)


def test_chain_rows_wrap_each_chain_and_collapse_modified_residues(rows):
    built = esmc_chains.chain_rows(*rows, multiple=16)
    input_ids, asym_id, _, mol_type, mask = rows
    tokens = built.tokens[0]
    # [BOS] chain 1 (36 residues + the modified one once) [EOS BOS] chain 2 (29) [EOS], padded to 16s.
    assert tokens[0] == 0 and tokens[38] == 2 and tokens[39] == 0 and tokens[69] == 2 and (tokens[70:] == 1).all()
    assert built.tokens.shape[1] % 16 == 0 and built.max_chains == 2
    assert list(np.unique(built.sequence_id[0])) == [-1, 0, 1]
    protein = (mol_type == 0) & mask
    assert (built.lm_position[~protein] == -1).all()
    assert (built.tokens[protein.nonzero()[0], built.lm_position[protein]] == input_ids[protein]).all()
    chain1 = np.flatnonzero(protein[0] & (asym_id[0] == 1))
    assert list(built.lm_position[0, chain1[3:8]]) == [4, 5, 5, 5, 6]  # the modified residue: one LM token


def engine_pass(network, path: str = "xla"):
    """The engine's pass over ``network`` (``engine.fold.StemPass``: every hidden state) on one CPU
    attention path, as ``esmc_chains`` takes it: (tokens, layout) -> {layer: states}."""
    from flax import nnx

    from flamino_core.engine.fold import StemPass
    from flamino_core.model.attention import AttentionImpl

    stem, state = StemPass.of(nnx.graphdef(network), AttentionImpl(path), None, CONFIG.num_layers), nnx.state(network)
    return lambda tokens, rows: stem(state, tokens, rows)


def attention_paths() -> list[str]:
    from flamino_core.model import fused_attention

    return ["xla", "dot-product-attention"] + (["fused"] if fused_attention.status().available else [])


@pytest.mark.parametrize("path", attention_paths())
def test_hidden_states_match_transformers_with_sequence_id(models, rows, path):
    """On each CPU attention path, through the engine's pass: the chains reach attention as spans,
    the one contract of all."""
    hf, ours = models
    built = esmc_chains.chain_rows(*rows)
    mine = np.asarray(esmc_chains.esmc_hidden_states(engine_pass(ours, path), built.tokens, built.sequence_id))
    with torch.no_grad():
        out = hf.esmc(input_ids=torch.as_tensor(built.tokens, dtype=torch.long),
                      sequence_id=torch.as_tensor(built.sequence_id, dtype=torch.long), output_hidden_states=True)
    reference = torch.stack(out.hidden_states).numpy()
    assert mine.shape == reference.shape == (CONFIG.num_layers + 1, *built.tokens.shape, CONFIG.embed_dim)
    real = built.sequence_id >= 0  # padding's rows: never read back (the module says why they differ)
    for layer in range(CONFIG.num_layers + 1):
        close(mine[layer][real], reference[layer][real], f"hidden state {layer}")
    # The chains' mask matters: one row of both chains without it is another answer.
    unmasked = np.asarray(esmc_chains.esmc_hidden_states(engine_pass(ours), built.tokens, np.where(real, 0, -1)))
    assert np.abs(unmasked[-1][0][real[0]] - mine[-1][0][real[0]]).max() > 1e-2


def test_lm_hidden_states_match_esmfold2s_compute_lm_hidden_states(models, rows):
    from transformers.models.esmfold2.modeling_esmfold2 import EsmFold2Model

    hf, ours = models
    stand_in = types.SimpleNamespace(config=types.SimpleNamespace(esmc_config=hf.config), esmc=hf.esmc,
                                     device=torch.device("cpu"))
    input_ids, asym_id, residue_index, mol_type, mask = (torch.as_tensor(a) for a in rows)
    reference = EsmFold2Model._compute_lm_hidden_states(stand_in, input_ids, asym_id, residue_index, mol_type,
                                                        mask).numpy()
    mine = esmc_chains.lm_hidden_states(engine_pass(ours), *rows)
    assert mine.shape == reference.shape == (*rows[0].shape, CONFIG.num_layers + 1, CONFIG.embed_dim)
    close(mine, reference, "ESMFold2's LM hidden states")
    assert (mine[~((rows[3] == 0) & rows[4])] == 0).all()


def test_a_chain_split_in_two_runs_is_refused():
    with pytest.raises(ValueError, match="one run and padding"):
        esmc_chains.chain_layout(np.array([[0, 0, 1, 1, 0, -1]]))
    with pytest.raises(ValueError, match="one run and padding"):
        esmc_chains.chain_layout(np.array([[0, 0, -1, 1, 1, -1]]))

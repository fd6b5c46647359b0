"""Issue 23 item 4: masked passes over a protein longer than ESM-2's 1,024 tokens give ProteinGym's
numbers. The reference is ProteinGym's procedure written again here (nothing imported from it):
``proteingym/baselines/esm/compute_fitness.py``, masked-marginals with ``--scoring-window optimal``,
and ``get_optimal_window`` of ``proteingym/utils/scoring_utils.py`` (github.com/OATML-Markslab/
ProteinGym at bb685245f8f4bb95a5b54b470396c23826cd6284): fair-esm's batch converter tokenizes
the whole sequence, the token is masked there, 1,024 tokens are cut out around it, and the
log-softmax of the model's logits is read at the masked token. The model is HF transformers'
``EsmForMaskedLM`` with the same random weights as flamino's engine (never biology).

The protein is real: NPC1_HUMAN, 1,278 residues (1,280 tokens), a ProteinGym target
(``../shared/fasta/proteingym_targets.fa``; its assay NPC1_HUMAN_Erwood_2022_RPE1 scores
positions all along it).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from flamino_core import Engine, load_weights
from flamino_core.model.config import ESM2Config
from flamino_core.engine.windows import masked_window
from reference_checkpoints import hf_forward

TINY = ESM2Config.tiny()
# The parity bound of tests/parity/test_parity.py on log-probabilities (fp32 noise is several times lower).
ATOL = 1e-4
MODEL_WINDOW = 1024  # ProteinGym's model_window for ESM


def proteingym_get_optimal_window(mutation_position_relative, seq_len_wo_special, model_window):
    """ProteinGym's ``get_optimal_window``, line for line (see the module docstring)."""
    half_model_window = model_window // 2
    if seq_len_wo_special <= model_window:
        return [0, seq_len_wo_special]
    elif mutation_position_relative < half_model_window:
        return [0, model_window]
    elif mutation_position_relative >= seq_len_wo_special - half_model_window:
        return [seq_len_wo_special - model_window, seq_len_wo_special]
    else:
        return [max(0, mutation_position_relative - half_model_window),
                min(seq_len_wo_special, mutation_position_relative + half_model_window)]  # fmt: skip


def proteingym_masked_log_probs(hf, sequence: str, positions: list[int]) -> np.ndarray:
    """ProteinGym's masked-marginals loop for the residues at 0-based ``positions``: (n, vocab)."""
    import esm  # fair-esm's alphabet and batch converter, as ProteinGym's script uses

    alphabet = esm.data.Alphabet.from_architecture("ESM-1b")
    _, _, batch_tokens = alphabet.get_batch_converter()([("protein1", sequence)])
    out = []
    for position in positions:
        i = position + 1  # the token (ProteinGym loops over every token; label_row reads 1 + idx)
        batch_tokens_masked = batch_tokens.clone()
        batch_tokens_masked[0, i] = alphabet.mask_idx
        start = 0
        if batch_tokens.size(1) > 1024:
            start, end = proteingym_get_optimal_window(i, len(sequence) + 2, MODEL_WINDOW)
            batch_tokens_masked = batch_tokens_masked[:, start:end]
        logits = hf_forward(hf, batch_tokens_masked.numpy()).logits.double()
        out.append(torch.log_softmax(logits, dim=-1)[0, i - start].numpy())
    return np.stack(out)


@pytest.fixture(scope="module")
def npc1(real_sequences) -> str:
    sequence = real_sequences.get("NPC1_HUMAN")
    if sequence is None:
        pytest.skip("NPC1_HUMAN is not in ../shared/fasta/proteingym_targets.fa")
    assert len(sequence) == 1278
    return sequence


def test_windows_are_proteingym_windows():
    for n_tokens in (3, 1024, 1025, 1280, 5000):
        for token in sorted({1, 2, 511, 512, 513, n_tokens // 2, n_tokens - 513, n_tokens - 512, n_tokens - 2}):
            if 1 <= token <= n_tokens - 2:
                assert list(masked_window(token, n_tokens)) == proteingym_get_optimal_window(token, n_tokens, 1024)


def test_masked_log_probs_of_a_long_protein_are_proteingyms(hf_checkpoints, npc1):
    directory, hf = hf_checkpoints(TINY, "5x")
    engine = Engine(load_weights(str(directory)))
    # First window (<cls> + residues 1-1,023), interior (no special token), last (+ <eos>), and
    # the positions where one turns into the next (tokens 511/512 and 767/768 of 1,280).
    positions = [0, 300, 510, 511, 600, 700, 766, 767, 1000, 1277]
    ours = engine.compute_masked(npc1, positions)
    theirs = proteingym_masked_log_probs(hf, npc1, positions)
    np.testing.assert_allclose(ours, theirs, atol=ATOL)
    # The old rule (a 1,022-residue window wrapped in <cls>/<eos>) gives other numbers: the
    # comparison can fail. Interior position 600: residues 89-1,110 then, tokens 89-1,112 now.
    old = np.concatenate([[0], engine_tokens(npc1)[1 + 89:1 + 89 + 1022], [2]])
    old[1 + 600 - 89] = 32
    old_log_probs = torch.log_softmax(hf_forward(hf, old[None]).logits.double(), -1).numpy()[0, 1 + 600 - 89]
    assert np.abs(old_log_probs - theirs[positions.index(600)]).max() > 10 * ATOL


def engine_tokens(sequence: str) -> np.ndarray:
    from flamino_core.alphabet import encode

    return encode(sequence)

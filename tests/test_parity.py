"""Numerical parity with the PyTorch references on the same (random, published-format) weights."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from flamino_core import Engine, load_weights, scores
from flamino_core.alphabet import MASK_IDX, batch_encode
from conftest import T6, TINY
from reference_checkpoints import hf_forward

# fp32 parity: 1e-4 absolute, plus 1e-5 relative for large values (logits reach ~30 with these
# deliberately large weights, where fp32 rounding alone is ~4e-6 per operation).
ATOL, RTOL = 1e-4, 1e-5


def close(ours, ref, what, atol=ATOL, rtol=RTOL):
    ours, ref = np.asarray(ours, np.float64), np.asarray(ref, np.float64)
    assert ours.shape == ref.shape, f"{what}: shape {ours.shape} vs reference {ref.shape}"
    excess = np.abs(ours - ref) - (atol + rtol * np.abs(ref))
    worst = np.unravel_index(np.argmax(excess), excess.shape) if excess.size else ()
    assert excess.size == 0 or excess.max() <= 0, (
        f"{what}: error {abs(ours[worst] - ref[worst]):.3g} at {worst} (reference {ref[worst]:.4g})"
    )


def sequences_for(real_sequences, config):
    seqs = list(real_sequences.values())
    if config is TINY:
        seqs = seqs + ["MKV", "ACDEFGHIKLMNPQRSTVWYXBUZO"]
    return seqs


@pytest.mark.parametrize("config", [TINY, T6], ids=["tiny", "t6"])
@pytest.mark.parametrize("style", ["2022", "5x"])
def test_forward_matches_hf(hf_checkpoints, real_sequences, config, style):
    directory, hf = hf_checkpoints(config, style)
    engine = Engine(load_weights(str(directory)))
    n = config.num_layers
    seqs = sequences_for(real_sequences, config)
    results = engine.run(seqs, repr_layers=range(n + 1), attention_layers=range(1, n + 1), contacts=True)
    # Reference: all sequences in one padded batch, exactly how HF users call it.
    tokens = batch_encode(seqs)
    ref = hf_forward(hf, tokens, output_hidden_states=True, output_attentions=True)
    with torch.no_grad():
        t = torch.as_tensor(tokens, dtype=torch.long)
        ref_contacts = hf.esm.predict_contacts(t, (t != 1).long()).numpy()
    for i, (seq, res) in enumerate(zip(seqs, results)):
        L = len(seq)
        close(res.logits, ref.logits[i, 1 : L + 1].numpy(), f"logits of {i}")
        for layer in range(n + 1):
            close(res.representations[layer], ref.hidden_states[layer][i, 1 : L + 1].numpy(), f"layer {layer} of {i}")
        ref_attn = torch.stack(ref.attentions, 1)[i, :, :, : L + 2, : L + 2].numpy()
        close(res.attentions, ref_attn, f"attentions of {i}")
        close(res.contacts, ref_contacts[i, :L, :L], f"contacts of {i}")


@pytest.mark.parametrize("config", [TINY, T6], ids=["tiny", "t6"])
def test_masked_inputs_and_token_dropout_match_hf(hf_checkpoints, real_sequences, config):
    """Masked tokens change the token-dropout scale: logits must still agree."""
    directory, hf = hf_checkpoints(config, "2022")
    weights = load_weights(str(directory))
    from flamino_core.convert import params_to_model
    import jax.numpy as jnp

    model = params_to_model(weights.params, config)
    seqs = sequences_for(real_sequences, config)[:2]
    tokens = batch_encode(seqs)
    rng = np.random.default_rng(0)
    for row, seq in enumerate(seqs):
        positions = rng.choice(np.arange(1, len(seq) + 1), size=max(1, len(seq) // 7), replace=False)
        tokens[row, positions] = MASK_IDX
    ours = np.asarray(model(jnp.asarray(tokens))["logits"])
    ref = hf_forward(hf, tokens).logits.numpy()
    real = tokens != 1
    close(ours[real], ref[real], "logits with masks")


@pytest.mark.parametrize("config", [TINY, T6], ids=["tiny", "t6"])
def test_masked_marginals_match_hf(hf_checkpoints, real_sequences, config):
    directory, hf = hf_checkpoints(config, "5x")
    engine = Engine(load_weights(str(directory)))
    seq = real_sequences["HBB_HUMAN"][:60]
    ours = scores.masked_marginals(engine, seq)
    tokens = np.repeat(batch_encode([seq]), len(seq), axis=0)
    tokens[np.arange(len(seq)), np.arange(len(seq)) + 1] = MASK_IDX
    log_probs = torch.log_softmax(hf_forward(hf, tokens).logits, -1).numpy()
    at_mask = log_probs[np.arange(len(seq)), np.arange(len(seq)) + 1]
    # Independent score: log p(mt) - log p(wt) written out with the reference alphabet.
    import esm

    alphabet = esm.data.Alphabet.from_architecture("ESM-1b")
    aas = "ACDEFGHIKLMNPQRSTVWY"
    ref = np.array([[at_mask[i, alphabet.get_idx(mt)] - at_mask[i, alphabet.get_idx(wt)] for mt in aas]
                    for i, wt in enumerate(seq)])
    close(ours, ref, "masked-marginal scores")
    ref_pppl = np.exp(-np.mean([at_mask[i, alphabet.get_idx(wt)] for i, wt in enumerate(seq)]))
    ours_pppl = scores.pseudo_perplexity(engine.masked_log_probs(seq), seq)
    assert abs(ours_pppl - ref_pppl) / ref_pppl < 1e-4


def test_pytorch_bin_checkpoint_matches_hf(hf_checkpoints, real_sequences):
    directory, hf = hf_checkpoints(TINY, "2022-bin")
    engine = Engine(load_weights(str(directory)))
    seq = real_sequences["HBB_HUMAN"]
    (res,) = engine.run([seq])
    close(res.logits, hf_forward(hf, batch_encode([seq])).logits[0, 1:-1].numpy(), "logits from .bin")


@pytest.mark.parametrize("config", [TINY, T6], ids=["tiny", "t6"])
def test_fair_esm_pt_matches_fair_esm(tmp_path, real_sequences, config):
    from reference_checkpoints import make_fair_esm_model, write_fair_esm_pt

    model, alphabet = make_fair_esm_model(config, seed=7)
    path = write_fair_esm_pt(model, config, tmp_path / "esm2_custom.pt")
    engine = Engine(load_weights(str(path)))
    n = config.num_layers
    seqs = list(real_sequences.values())
    results = engine.run(seqs, repr_layers=range(n + 1), attention_layers=range(1, n + 1), contacts=True)
    _, _, tokens = alphabet.get_batch_converter()([(str(i), s) for i, s in enumerate(seqs)])
    with torch.no_grad():
        ref = model(tokens, repr_layers=list(range(n + 1)), need_head_weights=True, return_contacts=True)
    for i, (seq, res) in enumerate(zip(seqs, results)):
        L = len(seq)
        close(res.logits, ref["logits"][i, 1 : L + 1].numpy(), f"logits of {i}")
        for layer in range(n + 1):
            close(res.representations[layer], ref["representations"][layer][i, 1 : L + 1].numpy(), f"layer {layer}")
        close(res.attentions, ref["attentions"][i, :, :, : L + 2, : L + 2].numpy(), f"attentions of {i}")
        close(res.contacts, ref["contacts"][i, :L, :L].numpy(), f"contacts of {i}")


@pytest.mark.parametrize("config", [TINY, T6], ids=["tiny", "t6"])
def test_plain_forward_and_scan_match_hf_on_long_rows(hf_checkpoints, real_sequences, config):
    """The fast paths: no maps captured, rows long enough (HAC1_ASPOR, 345 residues) that
    attention is computed a few heads at a time, and the scan's last layer at the mask only."""
    directory, hf = hf_checkpoints(config, "2022")
    engine = Engine(load_weights(str(directory)))
    seqs = sequences_for(real_sequences, config)
    assert max(map(len, seqs)) + 2 > 192  # beyond ALL_HEADS_AT_ONCE_UP_TO
    results = engine.run(seqs)  # one padded batch of mixed lengths
    ref = hf_forward(hf, batch_encode(seqs), output_hidden_states=True)
    for i, (seq, res) in enumerate(zip(seqs, results)):
        L = len(seq)
        close(res.logits, ref.logits[i, 1 : L + 1].numpy(), f"logits of {i}")
        close(res.final, ref.hidden_states[-1][i, 1 : L + 1].numpy(), f"final representation of {i}")
    seq = max(seqs, key=len)
    positions = [0, 1, 100, len(seq) // 2, len(seq) - 1]
    ours = engine.masked_log_probs(seq, positions=positions)
    tokens = np.repeat(batch_encode([seq]), len(positions), axis=0)
    tokens[np.arange(len(positions)), np.array(positions) + 1] = MASK_IDX
    log_probs = torch.log_softmax(hf_forward(hf, tokens).logits, -1).numpy()
    close(ours, log_probs[np.arange(len(positions)), np.array(positions) + 1], "masked log-probs")

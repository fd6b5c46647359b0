"""ESM-1b, ESM-1v and ESM C against their references on the same random weights, written by the
references' own code in the published layouts (tests/family_checkpoints.py), loaded as
``flamino embed -m`` loads them (``load_weights`` of the folder or file), on real proteins.

Bound: test_parity.py's 1e-4 absolute + 1e-5 relative (fp32 summation order; measured figures
in docs/models.md). The long protein (over 1,022 residues) runs in windows: the reference runs
each window on its own and the windows are averaged where they overlap, as flamino says it does.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from flamino_core import Engine, load_weights
from flamino_core.alphabet import MASK_IDX, batch_encode
from flamino_core.model.config import ModelConfig
from flamino_core.engine import windows
from flamino_core.variants import substitution_maps
from conftest import checkpoint_seed
from family_checkpoints import (
    esm1b_config, evolutionaryscale_state_dict, fair_esm_reference, make_fair_esm1b, make_hf_esm1b, make_hf_esmc,
    windowed_reference, write_fair_esm1b_pt, write_hf_esm1b_2022,
)
from reference_checkpoints import hf_forward
from test_parity import close

ESM1B = esm1b_config("esm1b")
ESMC = ModelConfig.esmc(3, 128, 2, name="esmc-t3-128")  # head width 64, as every published ESM C



@pytest.fixture(scope="module")
def proteins(shared_fasta) -> dict[str, str]:
    """HBB_HUMAN and the two UniProt entries (test_parity.py's), and the shortest ProteinGym
    target longer than 1,022 residues (windowed)."""
    from flamino_core.inputs.fasta import read_fasta

    found = {r.id: r.sequence for name in ("HBB_HUMAN.fa", "uniprot_two.fa")
             for r in read_fasta(shared_fasta / name).records}
    targets = read_fasta(shared_fasta / "proteingym_targets.fa").records
    long = min((r for r in targets if len(r.sequence) > 1022), key=lambda r: len(r.sequence))
    found[long.id] = long.sequence
    return found


def short(proteins):
    return [s for s in proteins.values() if len(s) <= 1022]


@pytest.fixture(scope="module")
def esm1b_folders(tmp_path_factory):
    """The HF model and its folder in both layouts (2022 Hub names, save_pretrained)."""
    hf = make_hf_esm1b(ESM1B, checkpoint_seed("esm1b", "hf"))
    root = tmp_path_factory.mktemp("esm1b")
    hf.save_pretrained(root / "esm1b-5x")
    return hf, {"2022": write_hf_esm1b_2022(hf, ESM1B, root / "esm1b-2022"), "5x": root / "esm1b-5x"}


@pytest.fixture(scope="module")
def esmc_checkpoints(tmp_path_factory):
    hf = make_hf_esmc(ESMC, checkpoint_seed("esmc", "hf"))
    root = tmp_path_factory.mktemp("esmc")
    hf.save_pretrained(root / "esmc-5x")
    pth = root / "esmc_custom.pth"
    torch.save(evolutionaryscale_state_dict(hf), pth)
    return hf, {"5x": root / "esmc-5x", "pth": pth}


def compare_forward(engine, hf_call, seqs, n, what):
    """Logits, every hidden state and every attention map of each sequence against one padded
    reference batch. ``hf_call(tokens)`` -> (logits, hidden states by layer, attentions by layer)."""
    results = engine.run(seqs, repr_layers=range(n + 1), attention_layers=range(1, n + 1))
    logits, hidden, attentions = hf_call(batch_encode(seqs))
    for i, (seq, res) in enumerate(zip(seqs, results)):
        length = len(seq)
        close(res.logits, logits[i, 1:length + 1], f"{what}: logits of {i}")
        for layer in range(n + 1):
            close(res.representations[layer], hidden[layer][i, 1:length + 1], f"{what}: layer {layer} of {i}")
        close(res.attentions, attentions[i, :, :, :length + 2, :length + 2], f"{what}: attentions of {i}")


def hf_esm_call(hf):
    def call(tokens):
        out = hf_forward(hf, tokens, output_hidden_states=True, output_attentions=True)
        return out.logits.numpy(), [h.numpy() for h in out.hidden_states], torch.stack(out.attentions, 1).numpy()
    return call


@pytest.mark.parametrize("style", ["2022", "5x"])
def test_esm1b_hf_folders_match_transformers(esm1b_folders, proteins, style):
    hf, folders = esm1b_folders
    weights = load_weights(str(folders[style]))
    assert weights.config.family == "esm1b"
    engine = Engine(weights)
    compare_forward(engine, hf_esm_call(hf), short(proteins), ESM1B.num_layers, f"ESM-1b {style}")
    with torch.no_grad():
        t = torch.as_tensor(batch_encode(short(proteins)[:1]), dtype=torch.long)
        ref_contacts = hf.esm.predict_contacts(t, (t != 1).long()).numpy()[0]
    (res,) = engine.run(short(proteins)[:1], contacts=True)
    close(res.contacts, ref_contacts, "ESM-1b contacts")


def test_esm1b_long_protein_runs_in_windows_like_the_reference(esm1b_folders, proteins):
    """Over 1,022 residues: learned positions end at 1,026 rows, so flamino runs windows; each
    window against transformers on that window, averaged over overlaps; one pass is refused."""
    hf, folders = esm1b_folders
    engine = Engine(load_weights(str(folders["5x"])))
    seq = max(proteins.values(), key=len)
    assert len(seq) > 1022
    (res,) = engine.run([seq], repr_layers=(-1,))

    def window(start):
        out = hf_forward(hf, batch_encode([seq[start:start + 1022]]), output_hidden_states=True)
        return np.concatenate([out.logits[0, 1:-1].numpy(), out.hidden_states[-1][0, 1:-1].numpy()], axis=1)

    ref = windowed_reference(window, len(seq), windows.window_starts(len(seq)), 1022)
    close(res.logits, ref[:, :33], "windowed logits")
    close(res.final, ref[:, 33:], "windowed final representation")
    with pytest.raises(ValueError, match="learned positions for 1,022 residues"):
        engine.run([seq], long="full")


def test_esm1b_fair_esm_pt_matches_fair_esm(tmp_path, proteins):
    model, args = make_fair_esm1b(ESM1B, checkpoint_seed("esm1b", "pt"))
    path = write_fair_esm1b_pt(model, args, tmp_path / "esm1b_custom.pt")
    reference, alphabet = fair_esm_reference(path)  # fair-esm's own loader (zeroes <mask>'s row)
    engine = Engine(load_weights(str(path)))
    assert engine.config.family == "esm1b"
    n = ESM1B.num_layers
    seqs = short(proteins)
    results = engine.run(seqs, repr_layers=range(n + 1), attention_layers=range(1, n + 1), contacts=True)
    _, _, tokens = alphabet.get_batch_converter()([(str(i), s) for i, s in enumerate(seqs)])
    with torch.no_grad():
        ref = reference(tokens, repr_layers=list(range(n + 1)), need_head_weights=True, return_contacts=True)
    for i, (seq, res) in enumerate(zip(seqs, results)):
        length = len(seq)
        close(res.logits, ref["logits"][i, 1:length + 1].numpy(), f"logits of {i}")
        for layer in range(n + 1):
            close(res.representations[layer], ref["representations"][layer][i, 1:length + 1].numpy(), f"layer {layer}")
        close(res.attentions, ref["attentions"][i, :, :, :length + 2, :length + 2].numpy(), f"attentions of {i}")
        close(res.contacts, ref["contacts"][i, :length, :length].numpy(), f"contacts of {i}")


def test_esm1v_pt_without_regression_loads_and_refuses_contacts(tmp_path, proteins):
    """fair-esm ships ESM-1v without a contact regression: the .pt loads (its name says ESM-1v),
    its logits are fair-esm's, and contacts are refused in one sentence."""
    model, args = make_fair_esm1b(ESM1B, checkpoint_seed("esm1v", "pt"))
    path = write_fair_esm1b_pt(model, args, tmp_path / "esm1v_t2_custom_1.pt", regression=False)
    reference, alphabet = fair_esm_reference(path)
    engine = Engine(load_weights(str(path)))
    assert engine.config.family == "esm1v"
    seq = short(proteins)[0]
    (res,) = engine.run([seq])
    _, _, tokens = alphabet.get_batch_converter()([("0", seq)])
    with torch.no_grad():
        close(res.logits, reference(tokens)["logits"][0, 1:-1].numpy(), "ESM-1v logits")
    with pytest.raises(ValueError, match="ESM-1v has no contact head"):
        engine.run([seq], contacts=True)


def test_esm1b_masked_marginals_match_transformers(esm1b_folders, proteins):
    hf, folders = esm1b_folders
    engine = Engine(load_weights(str(folders["2022"])))
    seq = proteins["HBB_HUMAN"][:40]
    ours = engine.compute_masked(seq)
    tokens = np.repeat(batch_encode([seq]), len(seq), axis=0)
    tokens[np.arange(len(seq)), np.arange(len(seq)) + 1] = MASK_IDX
    ref = torch.log_softmax(hf_forward(hf, tokens).logits, -1).numpy()[np.arange(len(seq)), np.arange(len(seq)) + 1]
    close(ours, ref, "ESM-1b masked log-probabilities")


def hf_esmc_call(hf):
    def call(tokens):
        out = hf_forward(hf, tokens, output_hidden_states=True, output_attentions=True)
        # transformers' hidden_states: the embedding, then every block's output before the
        # final norm; flamino's layer N is after it (fair-esm's numbering), HF's last_hidden_state.
        hidden = [h.numpy() for h in out.hidden_states[:-1]]
        final = hf.esmc(input_ids=torch.as_tensor(tokens), attention_mask=torch.as_tensor(tokens != 1).long())
        return out.logits.numpy(), hidden + [final.last_hidden_state.detach().numpy()], torch.stack(out.attentions, 1).numpy()
    return call


@pytest.mark.parametrize("layout", ["5x", "pth"])
def test_esmc_matches_transformers(esmc_checkpoints, proteins, layout):
    """transformers' save_pretrained folder, and EvolutionaryScale's .pth names (fused q/k/v and
    SwiGLU rows): both load and match EsmcForMaskedLM, all 64 logits, hidden states, maps."""
    hf, paths = esmc_checkpoints
    weights = load_weights(str(paths[layout]))
    assert weights.config.family == "esmc" and weights.config.ffn_dim == ESMC.ffn_dim
    compare_forward(Engine(weights), hf_esmc_call(hf), short(proteins), ESMC.num_layers, f"ESM C {layout}")


def test_esmc_masked_marginals_match_transformers(esmc_checkpoints, proteins):
    hf, paths = esmc_checkpoints
    engine = Engine(load_weights(str(paths["5x"])))
    seq = proteins["HBB_HUMAN"][:40]
    ours = substitution_maps.substitution_map(engine, seq, "masked-marginals").substitutions
    tokens = np.repeat(batch_encode([seq]), len(seq), axis=0)
    tokens[np.arange(len(seq)), np.arange(len(seq)) + 1] = MASK_IDX
    log_probs = torch.log_softmax(hf_forward(hf, tokens).logits, -1).numpy()[np.arange(len(seq)), np.arange(len(seq)) + 1]
    from transformers.models.esmc.tokenization_esmc import EsmcTokenizer  # noqa: F401  (same vocabulary, checked in test_families)
    from flamino_core.alphabet import TOKEN_TO_IDX

    aas = "ACDEFGHIKLMNPQRSTVWY"
    ref = np.array([[log_probs[i, TOKEN_TO_IDX[mt]] - log_probs[i, TOKEN_TO_IDX[wt]] for mt in aas]
                    for i, wt in enumerate(seq)])
    close(ours, ref, "ESM C masked-marginal scores")


@pytest.mark.parametrize("family", ["esm1b", "esmc"])
def test_every_attention_path_and_packed_rows_match_the_reference(esm1b_folders, esmc_checkpoints, proteins, family):
    """The passes that capture no maps, on each attention path (the fused C++ kernel when built,
    pure JAX, jax.nn.dot_product_attention), with short proteins packed into shared rows where
    the path packs: learned positions (ESM-1b, through the identity rotary table) and ESM C's
    rotary restart with each sequence, as each reference computes it alone."""
    from flamino_core.model import fused_attention

    hf, paths = esm1b_folders if family == "esm1b" else esmc_checkpoints
    folder = paths["5x"]
    seqs = short(proteins) + ["MKV", "ACDEFGHIKLMNPQRSTVWY", "GSHMW"]
    reference = hf_forward(hf, batch_encode(seqs)).logits.numpy()
    attention_paths = ["xla", "dot-product-attention"] + (["fused"] if fused_attention.status().available else [])
    for path in attention_paths:
        engine = Engine(load_weights(str(folder)), attention=path)
        assert engine.attention_path == path
        for i, (seq, res) in enumerate(zip(seqs, engine.run(seqs))):
            close(res.logits, reference[i, 1:len(seq) + 1], f"{family} {path}: logits of {i}")

"""SaProt against transformers on the same random weights, in SaProt's published Hub layout
(``westlake-repl/SaProt_*``: transformers' ``EsmForMaskedLM`` folder with its 446-token
``vocab.txt``), on real proteins with real structure tokens (the chains of ../shared/structures,
their 3Di letters from ``structure/three_di.py``; HBB_HUMAN of ../shared/fasta without a
structure, every residue ``#``).

Bound: test_parity.py's 1e-4 absolute + 1e-5 relative (fp32 summation order; figures measured
in docs/models.md). The tokens are checked against transformers' own ``EsmTokenizer`` reading
flamino's vocab file, so flamino's encoding is not its own reference.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from flamino_core import Engine, load_weights
from flamino_core.alphabet import AA_TO_IDX, STANDARD_AMINO_ACIDS
from flamino_core.model import saprot
from flamino_core.model.config import ModelConfig
from flamino_core.structure import three_di
from flamino_core.structure.reading import chain_residues, read_structure
from flamino_core.weights.loading import ModelError
from conftest import SHARED_FASTA, checkpoint_seed
from reference_checkpoints import hf_forward, randomize_
from test_parity import close

SAPROT = ModelConfig(num_layers=3, embed_dim=64, attention_heads=4, ffn_dim=256, vocab_size=446,
                     name="saprot-t3-64", family="saprot")
STRUCTURES = SHARED_FASTA.parent / "structures"
CHAINS = (("1GBT.cif", "A"), ("1A7G.cif", "E"), ("4ZHL.cif", "U"))


def make_hf_saprot(config: ModelConfig, seed: int):
    from transformers import EsmConfig, EsmForMaskedLM

    cfg = EsmConfig(**config.to_hf_config())
    assert cfg.vocab_size == 446 and cfg.mask_token_id == 4 and cfg.position_embedding_type == "rotary"
    cfg._attn_implementation = "eager"  # SDPA returns no attention maps
    torch.manual_seed(seed)
    model = EsmForMaskedLM(cfg).eval()
    randomize_(model, seed)
    return model


@pytest.fixture(scope="module")
def saprot_folder(tmp_path_factory):
    """transformers' save_pretrained folder with SaProt's vocab.txt written by EsmTokenizer."""
    from transformers import EsmTokenizer

    hf = make_hf_saprot(SAPROT, checkpoint_seed("saprot", "hf"))
    folder = tmp_path_factory.mktemp("saprot") / "SaProt_t3_custom"
    hf.save_pretrained(folder)
    tokenizer = EsmTokenizer(vocab_file=str(saprot.VOCAB_FILE))
    tokenizer.save_pretrained(folder)
    return hf, EsmTokenizer.from_pretrained(folder), folder


@pytest.fixture(scope="module")
def proteins(shared_fasta) -> dict[str, tuple[str, str]]:
    """name -> (residues, 3Di letters): three real chains with their structure, HBB without."""
    from flamino_core.inputs.fasta import read_fasta

    found = {}
    for name, chain in CHAINS:
        parsed = read_structure(STRUCTURES / name)
        sequence = chain_residues(parsed, chain).sequence
        found[f"{name}:{chain}"] = (sequence, three_di.structure_tokens(sequence, parsed, chain).letters)
    (hbb,) = read_fasta(shared_fasta / "HBB_HUMAN.fa").records
    found["HBB_HUMAN"] = (hbb.sequence, three_di.no_structure(hbb.sequence).letters)
    return found


def padded(rows: list[np.ndarray]) -> np.ndarray:
    out = np.full((len(rows), max(map(len, rows))), saprot.PAD_IDX, np.int32)
    for r, ids in enumerate(rows):
        out[r, :len(ids)] = ids
    return out


def test_vocabulary_file_is_sapRots_construction_and_transformers_reads_it_so():
    """The shipped vocab.txt is SaProt's tokenizer's list (five specials, then amino acid x 3Di,
    amino acid outer) and transformers' EsmTokenizer gives each token its line number."""
    from transformers import EsmTokenizer

    assert saprot.published_vocabulary() == saprot.TOKENS and len(saprot.TOKENS) == 446
    vocab = EsmTokenizer(vocab_file=str(saprot.VOCAB_FILE)).get_vocab()
    assert all(vocab[token] == i for i, token in enumerate(saprot.TOKENS))
    # ProteinGym sums an amino acid's 21 tokens as one slice starting at its "p" token.
    assert [saprot.TOKENS[i] for i in saprot.amino_acid_columns("K")[0]] == [f"K{s}" for s in saprot.STRUCTURE_LETTERS]


def test_tokens_match_transformers_tokenizer(saprot_folder, proteins):
    _, tokenizer, _ = saprot_folder
    for name, (sequence, letters) in proteins.items():
        ref = tokenizer(saprot.combined(sequence, letters))["input_ids"]
        assert saprot.encode(sequence, letters).tolist() == ref, name


def test_folder_loads_as_saprot_and_matches_transformers(saprot_folder, proteins):
    """Logits (all 446), every hidden state and every attention map of each protein, in one
    padded batch, against EsmForMaskedLM."""
    hf, _, folder = saprot_folder
    weights = load_weights(str(folder))
    assert weights.config.family == "saprot" and weights.config.vocab_size == 446
    engine = Engine(weights)
    n = SAPROT.num_layers
    tokens = padded([saprot.encode(s, letters) for s, letters in proteins.values()])
    ours = engine.forward_tokens(tokens, repr_layers=range(n + 1), attention_layers=range(1, n + 1))
    ref = hf_forward(hf, tokens, output_hidden_states=True, output_attentions=True)
    maps = torch.stack(ref.attentions, 1).numpy()
    for i, (name, (sequence, _)) in enumerate(proteins.items()):
        span = slice(0, len(sequence) + 2)
        close(ours["logits"][i, span], ref.logits[i, span].numpy(), f"{name}: logits")
        for layer in range(n + 1):
            close(ours["representations"][layer][i, span], ref.hidden_states[layer][i, span].numpy(),
                  f"{name}: layer {layer}")
        close(ours["attentions"][i, :, :, span, span], maps[i, :, :, span, span], f"{name}: attentions")


def proteingym_log_probs(hf, sequence: str, letters: str, position: int) -> np.ndarray:
    """ProteinGym's SaProt ``predict_mut`` at one position, written from its code (baselines/
    saprot/compute_fitness.py): the residue's token becomes ``#`` + its 3Di letter, softmax over
    all 446 tokens, an amino acid's probability the sum of its 21 tokens. Returns log P per
    standard amino acid."""
    tokens = [a + s for a, s in zip(sequence, letters)]
    tokens[position] = "#" + tokens[position][-1]
    ids = np.array([[0] + [saprot.TOKEN_TO_IDX.get(t, 3) for t in tokens] + [2]])
    probs = torch.softmax(hf_forward(hf, ids).logits[0, position + 1].double(), -1).numpy()
    return np.array([np.log(probs[saprot.TOKEN_TO_IDX[aa + "p"]:saprot.TOKEN_TO_IDX[aa + "p"] + 21].sum())
                     for aa in STANDARD_AMINO_ACIDS])


def test_masked_passes_are_proteingyms_marginals(saprot_folder, proteins):
    """Engine.compute_masked with the structure: each amino acid's column is ProteinGym's summed
    probability (log), at positions with a 3Di letter and with '#'."""
    hf, _, folder = saprot_folder
    engine = Engine(load_weights(str(folder)))
    sequence, letters = proteins["1A7G.cif:E"]
    positions = [0, 5, 40, len(sequence) - 1]
    ours = engine.compute_masked(sequence, positions, structure=letters)
    columns = [AA_TO_IDX[a] for a in STANDARD_AMINO_ACIDS]
    for row, p in zip(ours, positions):
        close(row[columns], proteingym_log_probs(hf, sequence, letters, p), f"position {p}")
    hbb, none = proteins["HBB_HUMAN"]
    (row,) = engine.compute_masked(hbb, [10], structure=none)
    close(row[columns], proteingym_log_probs(hf, hbb, none, 10), "HBB without a structure")


def test_a_folder_with_another_vocabulary_is_refused(saprot_folder, tmp_path):
    import shutil

    _, _, folder = saprot_folder
    copy = tmp_path / "SaProt_shuffled"
    shutil.copytree(folder, copy)
    lines = (copy / "vocab.txt").read_text().split()
    lines[5], lines[6] = lines[6], lines[5]
    (copy / "vocab.txt").write_text("\n".join(lines) + "\n")
    with pytest.raises(ModelError, match="not SaProt's published vocabulary \\(token 5 is 'Ay', not 'Ap'\\)"):
        load_weights(str(copy))

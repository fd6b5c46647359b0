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
from flamino_core.structure.files.reading import chain_residues, read_structure
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


def proteingym_score(hf, sequence: str, letters: str, mutant: str) -> float:
    """ProteinGym's SaProt ``predict_mut`` of one variant (A12V or A12V:G40D), written from its
    code: every mutated residue masked to ``#`` + its 3Di letter in one pass, each position's
    log(P(mt) / P(wt)) with P summed over the 21 tokens of the amino acid, summed over positions."""
    tokens = [a + s for a, s in zip(sequence, letters)]
    changes = [(m[0], int(m[1:-1]), m[-1]) for m in mutant.split(":")]
    for _, pos, _ in changes:
        tokens[pos - 1] = "#" + tokens[pos - 1][-1]
    ids = np.array([[0] + [saprot.TOKEN_TO_IDX.get(t, 3) for t in tokens] + [2]])
    probs = torch.softmax(hf_forward(hf, ids).logits[0].double(), -1).numpy()
    total = 0.0
    for wt, pos, mt in changes:
        p = lambda aa: probs[pos, saprot.TOKEN_TO_IDX[aa + "p"]:saprot.TOKEN_TO_IDX[aa + "p"] + 21].sum()  # noqa: E731
        total += np.log(p(mt) / p(wt))
    return float(total)


def test_flamino_variants_with_a_structure_scores_as_proteingym(saprot_folder, proteins, tmp_path, capsys):
    """`flamino variants --structure 1A7G.cif --chain E -m <SaProt folder>`: singles under
    masked-marginals and a double under joint-masked (ProteinGym masks a multi-mutant's
    positions together) equal ProteinGym's predict_mut on transformers; the chain and the
    structure-aware residues are said."""
    from flamino_core.cli import main

    hf, _, folder = saprot_folder
    sequence, letters = proteins["1A7G.cif:E"]
    fasta = tmp_path / "1a7g_e.fa"
    fasta.write_text(f">1A7G_E\n{sequence}\n")
    swap = lambda i, to: f"{sequence[i]}{i + 1}{to if sequence[i] != to else 'Y'}"  # noqa: E731  (never synonymous)
    mutants = [swap(2, "A"), swap(40, "W"), f"{swap(9, 'G')}:{swap(60, 'K')}"]
    for strategy in ("masked-marginals", "joint-masked"):
        out = tmp_path / f"{strategy}.csv"
        assert main(["variants", str(fasta), "--mutations", ", ".join(mutants), "--strategy", strategy,
                     "--structure", str(STRUCTURES / "1A7G.cif"), "--chain", "E", "-m", str(folder),
                     "-o", str(out)]) == 0
        rows = out.read_text().splitlines()[1:]
        scores = [float(line.split(",")[2]) for line in rows]
        for mutant, score in zip(mutants[:2], scores):  # singles: both strategies are predict_mut
            assert abs(score - proteingym_score(hf, sequence, letters, mutant)) < 1e-4, (strategy, mutant)
    assert abs(scores[2] - proteingym_score(hf, sequence, letters, mutants[2])) < 1e-4  # joint-masked double
    err = capsys.readouterr().err
    assert f"structure: 1A7G.cif chain E: {len(sequence)} of {len(sequence)} residues structure-aware" in err


def test_the_store_keys_masked_passes_by_the_structure_too(saprot_folder, proteins, tmp_path):
    """The same sequence with its structure and without is two entries: each computed once, each
    read back as computed; a model that reads sequences only refuses a structure."""
    from flamino_core.store.passes import masked_log_probs, model_key
    from flamino_core.store.result_store import ResultStore
    from flamino_core.variants.scoring import score_variants
    from flamino_core.variants.notation import parse_mutations

    _, _, folder = saprot_folder
    engine = Engine(load_weights(str(folder)))
    store = ResultStore(tmp_path / "results.sqlite")
    sequence, letters = proteins["1A7G.cif:E"]
    with_structure = masked_log_probs(engine, sequence, [5, 6], store=store, structure=letters)
    without = masked_log_probs(engine, sequence, [5, 6], store=store)
    columns = [AA_TO_IDX[a] for a in STANDARD_AMINO_ACIDS]  # the other columns are -inf (no such amino acid)
    assert np.isneginf(np.delete(with_structure, columns, axis=1)).all()
    assert np.abs(with_structure[:, columns] - without[:, columns]).max() > 1e-3  # the letters change the passes
    assert model_key(engine, letters) != model_key(engine) == engine.fingerprint == model_key(engine, "#" * len(letters))
    stored = store.masked(model_key(engine, letters), sequence, [5, 6])
    np.testing.assert_array_equal(np.stack([stored[5], stored[6]]), with_structure)
    np.testing.assert_array_equal(masked_log_probs(engine, sequence, [5, 6], store=store, structure=letters),
                                  with_structure)
    variants, _ = parse_mutations(f"{sequence[5]}6A", sequence)
    with pytest.raises(ValueError, match="wt-marginals does not read the structure"):
        score_variants(engine, sequence, variants, "wt-marginals", structure=letters, store=store)
    esm2 = Engine(load_weights("random:tiny"))
    with pytest.raises(ValueError, match="ESM-2 reads sequences only"):
        score_variants(esm2, sequence, variants, "masked-marginals", structure=letters, store=store)


def test_flamino_dms_with_a_structure_scores_as_proteingym(saprot_folder, proteins, tmp_path, capsys):
    """`flamino dms --structure`: each row's score is ProteinGym's predict_mut; a sequence model
    given --structure is refused in one sentence."""
    from flamino_core.cli import main

    hf, _, folder = saprot_folder
    sequence, letters = proteins["1A7G.cif:E"]
    (tmp_path / "wt.fa").write_text(f">1A7G_E\n{sequence}\n")
    mutants = [f"{sequence[i]}{i + 1}{'A' if sequence[i] != 'A' else 'G'}" for i in (1, 17, 44)]
    (tmp_path / "assay.csv").write_text("mutant,DMS_score\n" + "".join(f"{m},{k}\n" for k, m in enumerate(mutants)))
    args = ["dms", str(tmp_path / "assay.csv"), "--sequence", str(tmp_path / "wt.fa"), "--structure",
            str(STRUCTURES / "1A7G.cif"), "-o", str(tmp_path / "out.csv"), "--metrics", str(tmp_path / "m.json")]
    assert main(args + ["-m", str(folder)]) == 0
    scores = [float(line.split(",")[2]) for line in (tmp_path / "out.csv").read_text().splitlines()[1:]]
    for mutant, score in zip(mutants, scores):
        assert abs(score - proteingym_score(hf, sequence, letters, mutant)) < 1e-4, mutant
    assert "structure: 1A7G.cif chain E: 82 of 82 residues structure-aware" in capsys.readouterr().err
    assert main(args + ["-m", "random:tiny"]) == 2
    assert "--structure is read by structure-aware models (ESM-2 reads sequences only)" in capsys.readouterr().err


def test_sequence_only_passes_read_every_residue_as_hash(saprot_folder, proteins):
    """Engine.run (embeddings, the pages' unmasked passes) on a SaProt model: each residue's token
    is its amino acid with '#' (not ESM-2's ids), the hidden states transformers' on those tokens,
    the logits each amino acid's log-probability summed over its 21 tokens."""
    hf, _, folder = saprot_folder
    engine = Engine(load_weights(str(folder)))
    sequence, _ = proteins["HBB_HUMAN"]
    (res,) = engine.run([sequence], repr_layers=(-1,))
    tokens = saprot.encode(sequence)[None]
    ref = hf_forward(hf, tokens, output_hidden_states=True)
    close(res.final, ref.hidden_states[-1][0, 1:-1].numpy(), "final hidden state")
    log_probs = torch.log_softmax(ref.logits[0, 1:-1].double(), -1).numpy()
    columns = [AA_TO_IDX[a] for a in STANDARD_AMINO_ACIDS]
    probs = np.exp(log_probs)  # ProteinGym's sum of an amino acid's 21 tokens, written out
    ref_aa = np.stack([np.log(probs[:, saprot.TOKEN_TO_IDX[a + "p"]:saprot.TOKEN_TO_IDX[a + "p"] + 21].sum(1))
                       for a in STANDARD_AMINO_ACIDS], axis=1)
    close(res.logits[:, columns], ref_aa, "amino-acid logits")


def test_sapRots_esm_version_pt_matches_fair_esm(tmp_path, proteins):
    """SaProt's "esm version" (its README's second way): fair-esm's ESM2 over SaProt's alphabet,
    saved as {"model": state dict, "config": {...}}, the alphabet built as SaProt's
    utils/esm_loader.py builds it (written out here). flamino reads the .pt as SaProt and matches
    fair-esm's logits and hidden states on the chains with their 3Di letters."""
    import itertools

    import esm
    from esm.model.esm2 import ESM2

    tokens = ["<cls>", "<pad>", "<eos>", "<unk>", "<mask>"] + [
        a + s for a, s in itertools.product("ACDEFGHIKLMNPQRSTVWY#", "pynwrqhgdlvtmfsaeikc#")]
    alphabet = esm.data.Alphabet(standard_toks=tokens, prepend_toks=[], append_toks=[], prepend_bos=True,
                                 append_eos=True, use_msa=False)
    alphabet.all_toks = alphabet.all_toks[:-2]
    alphabet.unique_no_split_tokens = alphabet.all_toks
    alphabet.tok_to_idx = {tok: i for i, tok in enumerate(alphabet.all_toks)}
    assert alphabet.tok_to_idx == saprot.TOKEN_TO_IDX and alphabet.mask_idx == saprot.MASK_IDX
    model = ESM2(num_layers=SAPROT.num_layers, embed_dim=SAPROT.embed_dim, attention_heads=SAPROT.attention_heads,
                 alphabet=alphabet, token_dropout=True).eval()
    randomize_(model, checkpoint_seed("saprot", "esm-pt"))
    path = tmp_path / "SaProt_t3_custom.pt"
    config = {"num_layers": SAPROT.num_layers, "embed_dim": SAPROT.embed_dim,
              "attention_heads": SAPROT.attention_heads, "token_dropout": True}
    torch.save({"model": model.state_dict(), "config": config}, path)
    weights = load_weights(str(path))
    assert weights.config.family == "saprot"
    engine = Engine(weights)
    n = SAPROT.num_layers
    rows = padded([saprot.encode(s, letters) for s, letters in proteins.values()])
    ours = engine.forward_tokens(rows, repr_layers=range(n + 1))
    with torch.no_grad():
        ref = model(torch.as_tensor(rows, dtype=torch.long), repr_layers=list(range(n + 1)))
    for i, (name, (sequence, _)) in enumerate(proteins.items()):
        span = slice(0, len(sequence) + 2)
        close(ours["logits"][i, span], ref["logits"][i, span].numpy(), f"{name}: logits")
        for layer in range(n + 1):
            close(ours["representations"][layer][i, span], ref["representations"][layer][i, span].numpy(),
                  f"{name}: layer {layer}")


def test_engine_run_with_structures_matches_transformers(saprot_folder, proteins):
    """Engine.run(structures=...) (embeddings and attention maps of structure-aware tokens): each
    chain with its 3Di letters, one run, against EsmForMaskedLM on the same tokens; a sequence
    model refuses structure letters."""
    hf, _, folder = saprot_folder
    engine = Engine(load_weights(str(folder)))
    n = SAPROT.num_layers
    named = [(name, s, letters) for name, (s, letters) in proteins.items() if name != "HBB_HUMAN"]
    results = engine.run([s for _, s, _ in named], structures=[letters for _, _, letters in named],
                         repr_layers=range(n + 1), attention_layers=range(1, n + 1))
    for (name, sequence, letters), res in zip(named, results):
        ref = hf_forward(hf, saprot.encode(sequence, letters)[None], output_hidden_states=True,
                         output_attentions=True)
        for layer in range(n + 1):
            close(res.representations[layer], ref.hidden_states[layer][0, 1:-1].numpy(), f"{name}: layer {layer}")
        close(res.attentions, torch.stack(ref.attentions, 1)[0].numpy(), f"{name}: attentions")
    with pytest.raises(ValueError, match="ESM-2 reads sequences only"):
        Engine(load_weights("random:tiny")).run([named[0][1]], structures=[named[0][2]])


def test_vocabulary_file_agrees_with_the_published_folders_files():
    """flamino's vocab.txt against what is published of SaProt_35M_AF2's (tests/data/saprot/
    SOURCES.md: the Hub's vocab.txt itself cannot be read from here, its config.json,
    special_tokens_map.json and tokenizer_config.json can): 446 tokens, ``<mask>`` at 4 and
    ``<pad>`` at 1 as config.json says, the specials special_tokens_map.json names, the size the
    Hub lists (1.35 kB), and the preset's shape."""
    import json
    from pathlib import Path

    from flamino_core.model.families import PRESETS

    published = Path(__file__).parent.parent / "data" / "saprot"
    config = json.loads((published / "SaProt_35M_AF2.config.json").read_text())
    specials = json.loads((published / "SaProt_35M_AF2.special_tokens_map.json").read_text())
    tokenizer = json.loads((published / "SaProt_35M_AF2.tokenizer_config.json").read_text())
    lines = saprot.VOCAB_FILE.read_text().splitlines()
    assert tokenizer == {"tokenizer_class": "EsmTokenizer"}  # which reads vocab.txt one token a line
    assert len(lines) == config["vocab_size"] == 446
    assert lines.index(specials["mask_token"]) == config["mask_token_id"] == saprot.MASK_IDX == 4
    assert lines.index(specials["pad_token"]) == config["pad_token_id"] == saprot.PAD_IDX == 1
    assert lines[:5] == [specials[k] for k in ("cls_token", "pad_token", "eos_token", "unk_token", "mask_token")]
    assert f"{saprot.VOCAB_FILE.stat().st_size / 1000:.2f} kB" == "1.35 kB"  # the Hub's listing of vocab.txt
    preset = PRESETS["SaProt_35M_AF2"]
    assert (preset.layers, preset.dim, preset.heads) == (config["num_hidden_layers"], config["hidden_size"],
                                                         config["num_attention_heads"])
    assert config["intermediate_size"] == 4 * config["hidden_size"]  # ESM-2's feed-forward width
    assert config["position_embedding_type"] == "rotary" and not config["emb_layer_norm_before"]

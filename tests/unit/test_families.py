"""The family declarations (flamino_core/model/families.py): nothing outside the model and
weights packages names a family; presets, vocabularies and refusals read from them."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from flamino_core.model.families import FAMILIES, PRESETS, families_sentence, preset_name

ROOT = Path(__file__).resolve().parents[2]
# Where families may be named: their networks and their checkpoints. flamino_core/__init__.py is
# the public face: it re-exports the model's names (ESM2, ESM2Config) lazily, as before families.
ALLOWED = ("flamino_core/model/", "flamino_core/weights/", "flamino_core/__init__.py")


def network_names() -> set[str]:
    """Every name a family's code goes by: its module's class, its module, the old config name."""
    names = {"ESM2Config"}
    for family in FAMILIES.values():
        module, cls = family.network.split(":")
        names |= {cls, module.rsplit(".", 1)[-1]}
    return names


def outside_files() -> list[Path]:
    files = sorted((ROOT / "flamino_core").rglob("*.py")) + [ROOT / "app.py"] + sorted((ROOT / "app_pages").rglob("*.py"))
    return [f for f in files if not str(f.relative_to(ROOT)).startswith(ALLOWED)]


def test_nothing_outside_the_model_and_weights_packages_names_a_family():
    """No class or module of a family's network (as a word, docstrings included), and no family
    id as a string: the engine, planner, windows, store, scores and pages read the declaration."""
    names = network_names()
    word = re.compile(r"\b(" + "|".join(sorted(names)) + r")\b")
    found = []
    for path in outside_files():
        text = path.read_text()
        rel = path.relative_to(ROOT)
        found += [f"{rel}:{text[:m.start()].count(chr(10)) + 1}: {m.group()}" for m in word.finditer(text)
                  if not text[max(0, m.start() - 1)] in "_/"]  # esm2_t6_... preset names are data
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Constant) and node.value in FAMILIES:
                found.append(f"{rel}:{node.lineno}: the family id {node.value!r}")
    assert not found, "family named outside model/ and weights/:\n" + "\n".join(found)


def test_the_structural_check_can_fail(tmp_path, monkeypatch):
    """The check above finds a family named in code (it is not vacuous)."""
    fake = ROOT / "flamino_core" / "engine" / "_family_probe.py"
    fake.write_text('from flamino_core.model.esmc import ESMC\nKIND = "esm1b"\n')
    try:
        with pytest.raises(AssertionError, match=r"ESMC[\s\S]*'esm1b'"):
            test_nothing_outside_the_model_and_weights_packages_names_a_family()
    finally:
        fake.unlink()


def test_presets_and_identifiers():
    assert {p.family for p in PRESETS.values()} <= set(FAMILIES)  # every preset's family is declared
    assert {"esm2", "esm1b", "esm1v", "esmc"} <= {p.family for p in PRESETS.values()}
    assert preset_name("facebook/esm1b_t33_650M_UR50S") == "esm1b_t33_650M_UR50S"
    assert [preset_name(f"facebook/esm1v_t33_650M_UR90S_{i}") for i in range(1, 6)] == [
        f"esm1v_t33_650M_UR90S_{i}" for i in range(1, 6)]
    assert preset_name("EvolutionaryScale/esmc-300m-2024-12") == "esmc_300m_2024_12_v0"
    assert preset_name("esm2_t6_8M_UR50D") == "esm2_t6_8M_UR50D" and preset_name("nope") is None
    titles = [f.title for f in FAMILIES.values()]
    assert families_sentence() == ", ".join(titles[:-1]) + " and " + titles[-1]  # every family, in words
    assert all(title in families_sentence() for title in ("ESM-2", "ESM-1b", "ESM-1v", "ESM C"))


def test_esmc_vocabulary_is_the_esm_alphabet_with_a_chain_break():
    """ESM C's tokenizer (transformers') gives every token flamino encodes the same id; index 31
    is its chain break ``|`` where ESM-2 keeps ``<null_1>``."""
    from transformers.models.esmc.tokenization_esmc import EsmcTokenizer

    from flamino_core.alphabet import TOKENS

    tokenizer = EsmcTokenizer()
    ids = tokenizer.convert_tokens_to_ids(list(TOKENS))
    differ = [(i, t) for i, (t, got) in enumerate(zip(TOKENS, ids)) if got != i]
    assert differ == [(31, "<null_1>")]
    assert tokenizer.convert_tokens_to_ids(FAMILIES["esmc"].chain_break) == 31


@pytest.mark.parametrize("config_json, match", [
    ({"model_type": "bert", "architectures": ["BertForMaskedLM"]}, "model type 'bert'"),
    ({"model_type": "esm", "is_folding_model": True}, "an ESMFold checkpoint"),
    ({"model_type": "esm", "position_embedding_type": "absolute", "emb_layer_norm_before": False,
      "num_hidden_layers": 2, "hidden_size": 32, "num_attention_heads": 4}, "'absolute' positions"),
])
def test_a_checkpoint_of_an_unknown_family_is_refused_in_one_sentence(tmp_path, config_json, match):
    from flamino_core.weights.loading import ModelError, load_weights

    (tmp_path / "config.json").write_text(json.dumps(config_json))
    (tmp_path / "model.safetensors").write_bytes(b"")
    with pytest.raises(ModelError) as err:
        load_weights(str(tmp_path))
    message = str(err.value)
    assert re.search(match, message) and message.endswith(f"it reads {families_sentence()}"), message
    assert "\n" not in message


def test_the_command_line_says_it_in_one_sentence(tmp_path, capsys):
    from flamino_core.cli import main

    (tmp_path / "config.json").write_text(json.dumps({"model_type": "t5"}))
    (tmp_path / "model.safetensors").write_bytes(b"")
    fasta = tmp_path / "p.fa"
    fasta.write_text(">p\nMKV\n")
    code = main(["embed", str(fasta), "-m", str(tmp_path), "-o", str(tmp_path / "out.npz")])
    err = capsys.readouterr().err
    assert code != 0 and "model type 't5' is not a language model flamino reads" in err
    assert "KeyError" not in err and "Traceback" not in err


def test_a_fair_esm_file_of_another_architecture_is_refused(tmp_path):
    import argparse

    import torch

    from flamino_core.weights.loading import ModelError, load_weights

    path = tmp_path / "esm_msa1b_t12_100M_UR50S.pt"
    torch.save({"model": {}, "args": argparse.Namespace(arch="msa_transformer")}, path)
    with pytest.raises(ModelError, match=f"'msa_transformer' model is not one flamino reads; it reads {families_sentence()}"):
        load_weights(str(path))


def test_fetch_of_an_ensemble_fetches_its_members(monkeypatch, capsys):
    """``flamino fetch esm1v_ensemble`` asks for each member; offline the first one says how to
    get it here (the download path itself is ESM-2's, tested in test_weights.py)."""
    from flamino_core.cli import main

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main(["fetch", "esm1v_ensemble"]) == 2
    err = capsys.readouterr().err
    assert "esm1v_t33_650M_UR90S_1" in err and "flamino fetch esm1v_t33_650M_UR90S_1" in err


def test_the_offline_message_offers_fair_esm_files_only_where_they_exist():
    """#66 D7: SaProt's offline message suggested a fair-esm .pt with a contact-regression file;
    SaProt has neither (no fair-esm release, no contact head), ESM-1v has the .pt without one."""
    from flamino_core.weights.hub import offline_message

    saprot = offline_message("SaProt_35M_AF2")
    assert ".pt" not in saprot and "contact-regression" not in saprot and saprot.endswith("set HF_HOME to it.")
    assert "esm1v_t33_650M_UR90S_1.pt and pass" in offline_message("esm1v_t33_650M_UR90S_1")
    assert "contact-regression" not in offline_message("esm1v_t33_650M_UR90S_1")
    assert "esm2_t6_8M_UR50D-contact-regression.pt" in offline_message("esm2_t6_8M_UR50D")

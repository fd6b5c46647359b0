"""The complex notation read by the one input reader (``inputs.fasta_records.chain_records``, which
``flamino fold`` reads too): a record written ``A:B`` on the Input page is its chains ``<id>:A``,
``<id>:B``, picked together on the Structure page's ESMFold2 panel (a homodimer without entering
the record twice), a ':' anywhere else said plainly; and that panel's opt-in bf16 ESM C stem,
labelled where the fold is shown and stored apart from fp32's."""

from __future__ import annotations

import pytest
from test_app import assert_clean, open_page, paste, settle, start, unescaped
from flamino_core.inputs.fasta import parse_fasta_text
from flamino_core.structure import folding
from flamino_core.model.model_id import ModelId

AppTest = pytest.importorskip("streamlit.testing.v1").AppTest
ABETA42 = "DAEFRHDSGYEVHHQKLVFFAEDVGSNKGAIIGLMVGGVVIA"  # amyloid beta 1-42 (P05067 672-713)
UBQ50 = "MQIFVKTLTGKTITLEVEPSDTIENVKAKIQDKEGIPPDQQRLIFAGKQL"  # human ubiquitin 1-50 (P0CG48)
PREDICT = "Predict the complex (ESMFold2)"


@pytest.fixture(autouse=True)
def environment(monkeypatch, tmp_path):
    monkeypatch.setenv("FLAMINO_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("FLAMINO_MODEL", "random:tiny")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def test_the_reader_takes_colon_as_the_chain_separator_only():
    parsed = parse_fasta_text(f">hd amyloid dimer\n{ABETA42}:\n{ABETA42}\n>ubq\n{UBQ50}\n")
    assert [(r.id, r.complex_of, r.description) for r in parsed.records] == [
        ("hd:A", "hd", "amyloid dimer"), ("hd:B", "hd", "amyloid dimer"), ("ubq", "", "")]
    assert all(r.sequence == ABETA42 for r in parsed.records[:2]) and not parsed.errors
    # An empty chain: said as such, and the complex is read whole or not at all.
    bad = parse_fasta_text(f">hd\n{ABETA42}::{ABETA42}\n")
    assert not bad.records
    said = [str(e) for e in bad.errors]
    assert "hd chain B: an empty chain: ':' separates a complex's chains (A:B)" in said[1]
    assert said[0] == "hd chain A: the complex is read whole or not at all (hd chain B refused)"


def test_an_a_b_record_folds_as_its_chains_with_a_labelled_bf16_stem():
    at = start()
    paste(at, f">hd amyloid dimer\n{ABETA42}:{ABETA42}\n>ubq50\n{UBQ50}\n")
    assert_clean(at)
    at = open_page(at, "structure")
    at.radio(key="fold_engine").set_value("ESMFold2 (a record or a complex)").run()
    said = [unescaped(c.value) for c in at.caption]
    assert any("A = hd:A (42 residues), B = hd:B (42 residues)" in c for c in said)  # picked together
    at.radio(key="fold2_stem_precision").set_value("bf16").run()
    next(b for b in at.button if b.label == PREDICT).click()
    settle(at.run())
    assert_clean(at)
    assert any(h.value == "The predicted complex" for h in at.subheader)
    assert any("Predicted by random:esmfold2-tiny" in unescaped(c.value) and "stem in bf16" in unescaped(c.value)
               for c in at.caption)
    bf16_key = folding.complex_key(ModelId.parse("random:esmfold2-tiny"), "bf16")
    from flamino_core.store import default_store

    store = default_store()
    names = ("hd:A", "hd:B")
    assert folding.stored_complex(store, bf16_key, (ABETA42, ABETA42), names, "x") is not None
    assert folding.stored_complex(store, folding.complex_key(ModelId.parse("random:esmfold2-tiny")),
                                  (ABETA42, ABETA42), names, "x") is None  # fp32's key holds no bf16 fold

"""The Variant effects page with a structure-aware model (SaProt's network on random weights,
``random:tiny-saprot``): with a structure held (uploaded on the Structure page) the mutation list
is scored on the record's 3Di letters, and the page says which structure and chain it used and
how many residues were structure-aware; the scores equal the core's (``score_variants`` with
``three_di.structure_tokens``), which tests/parity/test_saprot.py checks against ProteinGym's SaProt
code on transformers. Without a structure the page says what the model reads instead."""

from __future__ import annotations

import numpy as np
import pytest

from flamino_core import Engine, load_weights
from flamino_core.structure import three_di
from flamino_core.structure.files.reading import chain_residues, read_structure
from flamino_core.variants.notation import parse_mutations
from flamino_core.variants.scoring import score_variants
from test_app import ROOT, assert_clean, open_page, paste, start, unescaped
from test_app_variants import type_list
from test_structure_app import STRUCTURES, upload

MODEL = "random:tiny-saprot"
pytestmark = pytest.mark.skipif(not STRUCTURES.is_dir(), reason=f"real structures not found at {STRUCTURES}")


@pytest.fixture(autouse=True)
def saprot_model(monkeypatch, tmp_path):
    monkeypatch.setenv("FLAMINO_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("FLAMINO_MODEL", MODEL)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def chain_e() -> str:
    return chain_residues(read_structure(STRUCTURES / "1A7G.cif"), "E").sequence


def test_a_list_scored_structure_aware_says_the_structure_and_chain():
    sequence = chain_e()
    mutations = f"{sequence[4]}5A, {sequence[30]}31W"
    at = paste(start(), f">query\n{sequence}\n")
    at = open_page(at, "variants")
    at = type_list(at, mutations)
    assert_clean(at)
    assert any("reads every residue as '#'" in unescaped(c.value) for c in at.caption)  # no structure yet
    open_page(at, "structure")
    upload(at, "1A7G.cif")
    at = type_list(open_page(at, "variants"), mutations)
    assert_clean(at)
    assert at.toggle(key="_w_vstructure").value
    said = [unescaped(c.value) for c in at.caption if unescaped(c.value).startswith("Structure-aware:")]
    assert said == ["Structure-aware: 1A7G.cif chain E: 82 of 82 residues structure-aware."]
    shown = at.dataframe[0].value
    engine = Engine(load_weights(MODEL))
    letters = three_di.structure_tokens(sequence, read_structure(STRUCTURES / "1A7G.cif"), "E").letters
    variants, _ = parse_mutations(mutations, sequence)
    core = score_variants(engine, sequence, variants, "masked-marginals", structure=letters).table
    np.testing.assert_allclose(shown["score"].to_numpy(float), core["score"].to_numpy(float), atol=1e-6)
    plain = score_variants(engine, sequence, variants, "masked-marginals").table
    assert np.abs(core["score"].to_numpy(float) - plain["score"].to_numpy(float)).max() > 1e-4  # it did read them
    # The masked map behind the variants is scanned on the same letters: every position stored under them.
    from flamino_core.store.passes import model_key
    from flamino_core.store.result_store import default_store
    from test_app import settle

    settle(at.radio(key="_w_vmap").set_value("masked-marginals").run(), start=True)
    assert_clean(at)
    held = default_store().held_positions(model_key(engine, letters), sequence)
    assert set(range(len(sequence))) <= set(held)



def test_a_dms_table_scored_structure_aware_on_the_record():
    """The DMS section with the selected record as wild type: the same choice, the same line, the
    core's scores (``score_dms`` with the structure letters)."""
    from flamino_core.variants.dms import parse_dms, score_dms
    from test_app_variants import upload_dms
    from test_app import settle

    sequence = chain_e()
    rows = [f"{sequence[i]}{i + 1}{'A' if sequence[i] != 'A' else 'G'}" for i in (3, 10, 20, 50)]
    data = ("mutant,DMS_score\n" + "".join(f"{m},{0.1 * k}\n" for k, m in enumerate(rows))).encode()
    at = paste(start(), f">query\n{sequence}\n")
    open_page(at, "structure")
    upload(at, "1A7G.cif")
    at = open_page(at, "variants")
    at.radio(key="_w_vinput").set_value("dms").run()
    at = upload_dms(at, "assay.csv", data)
    at = settle(at.radio(key="_w_dmswt").set_value("record").run(), start=True)
    assert_clean(at)
    said = [unescaped(c.value) for c in at.caption if unescaped(c.value).startswith("Structure-aware:")]
    assert said == ["Structure-aware: 1A7G.cif chain E: 82 of 82 residues structure-aware."]
    letters = three_di.structure_tokens(sequence, read_structure(STRUCTURES / "1A7G.cif"), "E").letters
    core = score_dms(Engine(load_weights(MODEL)), parse_dms(data, sequence), "masked-marginals", structure=letters)
    shown = next(d.value for d in at.dataframe if "DMS_score" in d.value.columns and "score" in d.value.columns)
    np.testing.assert_allclose(shown["score"].to_numpy(float), core.frame["score"].to_numpy(float), atol=1e-6)


def test_the_structure_page_colours_a_score_track_structure_aware():
    """The Structure page with a masked score track: the scan reads the structure's letters (the
    viewer's values are the mean substitution score from passes with the letters, not without),
    and the page says so."""
    from flamino_core.structure.track_values import mean_score_track
    from flamino_core.variants import substitution_maps
    from test_app import settle
    from test_structure_app import viewer_values

    sequence = chain_e()
    at = paste(start(), f">query\n{sequence}\n")
    open_page(at, "structure")
    upload(at, "1A7G.cif")
    at.selectbox(key="_w_strack").set_value("mean-score").run()
    at = settle(at.radio(key="_w_sscore").set_value("masked-marginals").run(), start=True)
    assert_clean(at)
    said = [unescaped(c.value) for c in at.caption if unescaped(c.value).startswith("Structure-aware:")]
    assert said == ["Structure-aware: 1A7G.cif chain E: 82 of 82 residues structure-aware."]
    engine = Engine(load_weights(MODEL))
    letters = three_di.structure_tokens(sequence, read_structure(STRUCTURES / "1A7G.cif"), "E").letters
    log_probs = engine.compute_masked(sequence, structure=letters)
    expected = mean_score_track(substitution_maps.from_log_probs(log_probs, sequence).substitutions, sequence)
    np.testing.assert_allclose(viewer_values(at), expected, atol=1e-5)


def test_saprot_is_named_and_the_pages_say_what_it_reads_without_a_structure():
    """Issue 50: the header and the picker's help listed four families without SaProt; the banner
    said "Choose an ESM-2 model" whatever the family; the sequence-only pages showed SaProt's
    numbers without saying that it reads every residue as '#' there; the contact-count track
    (SaProt has no contact head) made the 3D viewer vanish without a word."""
    from test_structure_app import scene

    sequence = chain_e()
    at = paste(start(), f">query\n{sequence}\n")
    assert_clean(at)
    assert any("SaProt)" in c.value for c in at.sidebar.caption)  # the header's list of families
    assert "SaProt" in at.sidebar.selectbox(key="_w_model_choice").help
    (banner,) = [unescaped(w.value) for w in at.warning if "Untrained test model" in w.value]
    assert "a 2-layer SaProt model" in banner and "Choose a SaProt model in the sidebar" in banner
    docs = (ROOT / "docs" / "models.md").read_text()
    for page in ("predictions", "embeddings", "attention", "records", "predict"):
        open_page(at, page)
        assert_clean(at)
        assert any("SaProt reads every residue here as '#'" in unescaped(c.value) for c in at.caption), page
        (opened,) = [e for e in at.expander if e.label.startswith("What SaProt reads without a structure")]
        assert "Without a structure every residue is `#`" in docs
        assert "Without a structure every residue is `#`" in " ".join(m.value for m in opened.markdown)
    open_page(at, "variants")  # it reads structures: its own line, not this one
    assert not any("reads every residue here" in unescaped(c.value) for c in at.caption)

    at.session_state["strack"] = "contact-count"  # as a link or an ESM-2 session before would keep it
    open_page(at, "structure")
    upload(at, "1A7G.cif")
    assert_clean(at)
    tracks = at.selectbox(key="_w_strack")
    offered = [option.split(":")[0] for option in tracks.options]  # "entropy: ..." labels
    assert "entropy" in offered and "contact-count" not in offered and tracks.value == "entropy"
    assert any(unescaped(c.value).startswith("The contact-count track needs predicted contacts, which SaProt cannot "
                                             "give") for c in at.caption)
    assert scene(at) is not None  # the viewer is drawn, on the track shown

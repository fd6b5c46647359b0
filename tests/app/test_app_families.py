"""The app with a model of another family: ESM C (random two-layer weights, its 64-wide head and
no contact head) on the pages a biologist opens first. Numbers are checked against transformers
in test_family_parity.py; here: every page draws, the Attention page shows ESM C's maps and says
where contacts come from."""

from __future__ import annotations

import pytest

from test_app import UBIQUITIN, assert_clean, figures, open_page, paste, start


@pytest.fixture(autouse=True)
def esmc_model(monkeypatch, tmp_path):
    monkeypatch.setenv("FLAMINO_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("FLAMINO_MODEL", "random:tiny-esmc")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def test_esmc_predictions_embeddings_and_attention_maps_without_contacts():
    at = paste(start(), f">ubq\n{UBIQUITIN}\n")
    for page in ("predictions", "embeddings"):
        open_page(at, page)
        assert_clean(at)
        assert figures(at), page
    open_page(at, "attention")
    assert_clean(at)
    titles = [f["layout"]["title"]["text"] for f in figures(at)]
    assert any(t.startswith("Attention, layer 2 (final)") for t in titles), titles
    assert not any("ontact" in t for t in titles), titles  # no contact map drawn
    (note,) = [i.value for i in at.info if "contact head" in i.value]
    assert note.startswith("ESM C has no contact head") and "contacts come from ESM-2 and ESM-1b" in note


def test_the_picker_tells_esm_cs_releases_apart_and_says_each_licence():
    """ESM C's 2024-12 and 2026 weights share family and size: the short label names the release,
    the line under the picker the licence of that identifier (docs/models.md gives the sources)."""
    from app_pages._ui.input.model_picker import model_details, model_label

    assert model_label("esmc_600m_2024_12_v0") == "ESM C 600M · 2024-12"
    assert model_label("ESMC-600M") == "ESM C 600M · 2026" and model_label("ESMC-6B") == "ESM C 6B"
    assert "weights licence: EvolutionaryScale Cambrian Non-Commercial License" in model_details("esmc_600m_2024_12_v0")
    assert "weights licence: MIT" in model_details("ESMC-600M")
    assert "weights licence: MIT" in model_details("ESMC-6B")

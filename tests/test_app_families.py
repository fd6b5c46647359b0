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

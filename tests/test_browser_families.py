"""In Chromium (#35 done-when): pick ESM C in the sidebar and see the embeddings and the attention
of a pasted protein. ESM C's published weights cannot reach this machine, so the model picked is
a random two-layer ESM C that transformers' EsmcForMaskedLM wrote with save_pretrained (the
published HF layout), chosen as a user picks any checkpoint folder: "Local checkpoint…", its
path, "Load checkpoint". Its numbers are checked against transformers in test_family_parity.py."""

from __future__ import annotations

import pytest

from test_browser import CHROMIUM, SCREENSHOTS, TIMEOUT_MS, UBIQUITIN, _nav, _settle, _wait_for_charts, load_local_checkpoint

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs /usr/bin/chromium (apt-get install chromium)"),
]


def test_pick_esmc_then_see_embeddings_and_attention_of_a_pasted_protein(server, browser, tmp_path):
    from family_checkpoints import make_hf_esmc
    from flamino_core.model.config import ModelConfig

    folder = tmp_path / "esmc-tiny"
    make_hf_esmc(ModelConfig.esmc(2, 64, 1), seed=5).save_pretrained(folder)

    page = browser.new_context(viewport={"width": 1400, "height": 1600}).new_page()
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(server.url)
    page.get_by_text("Your sequences").wait_for()
    load_local_checkpoint(page, folder)

    box = page.get_by_label("FASTA or sequence")
    box.fill(f">ubq\n{UBIQUITIN}\n")
    box.press("Control+Enter")
    page.get_by_text("1 record ready for analysis.").wait_for()
    _settle(page)

    _nav(page, "Embeddings").click()
    _wait_for_charts(page, 1)
    page.screenshot(path=str(SCREENSHOTS / "esmc_embeddings.png"), full_page=True)
    _nav(page, "Attention").click()
    _wait_for_charts(page, 1)
    page.get_by_text("ESM C has no contact head").wait_for()
    titles = page.evaluate("() => [...document.querySelectorAll('.gtitle')].map(e => e.textContent)")
    assert any(t.startswith("Attention, layer 2 (final)") for t in titles), titles
    assert not any("ontact" in t for t in titles), titles
    page.screenshot(path=str(SCREENSHOTS / "esmc_attention.png"), full_page=True)
    page.context.close()

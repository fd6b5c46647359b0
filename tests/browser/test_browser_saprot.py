"""In Chromium (#36 done-when): load a SaProt checkpoint, upload a structure, score a mutation
list structure-aware, and see which chain and how many residues were structure-aware. SaProt's
published weights cannot reach this machine: the model is a random three-layer SaProt folder
written by transformers' save_pretrained with SaProt's vocab.txt (tests/parity/test_saprot.py checks
its numbers against transformers), chosen as a user picks any checkpoint folder."""

from __future__ import annotations

import pytest

from test_browser import CHROMIUM, SCREENSHOTS, TIMEOUT_MS, _nav, _settle, load_local_checkpoint, paste_one_record

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs /usr/bin/chromium (apt-get install chromium)"),
]


def test_upload_a_structure_and_score_a_list_with_saprot(server, browser, tmp_path):
    from transformers import EsmTokenizer

    from flamino_core.model import saprot
    from flamino_core.structure.files.reading import chain_residues, read_structure
    from conftest import checkpoint_seed
    from test_saprot import SAPROT, STRUCTURES, make_hf_saprot

    structure = STRUCTURES / "1A7G.cif"
    if not structure.exists():
        pytest.skip(f"real structure not found at {structure}")
    sequence = chain_residues(read_structure(structure), "E").sequence
    folder = tmp_path / "SaProt_t3_custom"
    make_hf_saprot(SAPROT, checkpoint_seed("saprot", "browser")).save_pretrained(folder)
    EsmTokenizer(vocab_file=str(saprot.VOCAB_FILE)).save_pretrained(folder)

    page = browser.new_context(viewport={"width": 1400, "height": 1600}).new_page()
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(server.url)
    page.get_by_text("Your sequences").wait_for()
    load_local_checkpoint(page, folder)

    paste_one_record(page, f">query\n{sequence}\n")
    _nav(page, "Structure").click()
    page.get_by_role("heading", name="Structure", exact=True).wait_for()
    page.locator('[data-testid="stFileUploader"] input[type="file"]').set_input_files(str(structure))
    page.get_by_text("chain E: 82 residues, 82 aligned", exact=False).first.wait_for()
    _settle(page)

    _nav(page, "Variant effects").click()
    variants = page.get_by_label("Variants: one per line", exact=False)
    variants.fill(f"{sequence[4]}5A\n{sequence[30]}31W\n")
    variants.press("Control+Enter")
    page.get_by_text("Structure-aware: 1A7G.cif chain E: 82 of 82 residues structure-aware.").wait_for()
    page.locator('[data-testid="stDataFrame"]').first.wait_for()
    assert page.locator('[data-testid="stMetricValue"]').first.inner_text() == "2"  # scored
    page.screenshot(path=str(SCREENSHOTS / "saprot_variants.png"), full_page=True)
    page.context.close()

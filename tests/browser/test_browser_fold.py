"""Predict the structure (ESMFold) in headless Chromium (``streamlit run app.py``, the untrained
``random:esmfold-tiny``): a pasted sequence with no structure -> Structure -> Predict -> the
viewer drawn with pLDDT in its B-factors, the PAE heatmap, and a PDB download that Biopython
reads back with the coordinates and B-factors of a fold made here directly (``fold_sequence``);
no request leaves the machine. The sequence is one no other browser test folds (the server's
result store is shared by the run's tests)."""

from __future__ import annotations

import numpy as np
import pytest
from test_browser import (CHROMIUM, TIMEOUT_MS, _download, _nav, _settle, _wait_for_charts, load_local_checkpoint,
                          paste_one_record)
from test_browser_structure import _offline_page, _photograph
from flamino_core.model.model_id import ModelId

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs /usr/bin/chromium (apt-get install chromium)"),
]
# Human ubiquitin's first 50 residues (P0CG48): a real sequence, folded by no other test.
SEQUENCE = "MQIFVKTLTGKTITLEVEPSDTIENVKAKIQDKEGIPPDQQRLIFAGKQL"
# Amyloid beta 1-42 (P05067 672-713), for the SaProt flow: another sequence, so neither test finds
# the other's fold in the server's store (both pad to 64 residues: one compilation).
ABETA42 = "DAEFRHDSGYEVHHQKLVFFAEDVGSNKGAIIGLMVGGVVIA"


def test_predict_draws_the_fold_by_plddt_the_pae_and_a_pdb_biopython_reads_back(server, browser, tmp_path):
    from Bio.PDB import PDBParser

    from flamino_core.engine.fold import fold_sequence
    from flamino_core.weights.esmfold import load_fold_model

    page, outside = _offline_page(browser, server)
    page.goto(f"{server.url}/?page=structure&seq={SEQUENCE}")
    page.get_by_text("untrained test model (random weights)").first.wait_for(timeout=3 * TIMEOUT_MS)
    page.get_by_role("button", name="Predict the structure (ESMFold)").click()
    # The fold compiles first (~20-60 s on a loaded 2-core CPU), then the page holds the prediction.
    page.get_by_role("heading", name="The predicted structure").wait_for(timeout=6 * TIMEOUT_MS)
    page.wait_for_selector('iframe[src*="flamino_molecule"]', timeout=3 * TIMEOUT_MS)
    frame = next(f for f in page.frames if "flamino_molecule" in f.url)
    frame.wait_for_function("document.body.dataset.drawn", timeout=TIMEOUT_MS)
    assert frame.evaluate("document.body.dataset.drawn") == str(len(SEQUENCE))
    _wait_for_charts(page, 2)  # the PAE heatmap and the contact map against the prediction
    assert page.locator('[data-testid="stException"]').count() == 0
    assert page.get_by_text("Predicted aligned error").count() >= 1
    # #66 D9: the PAE's axes as drawn hold the residues only (were -50..200 for 146 residues)
    drawn_ranges = page.evaluate(
        "() => { const g = [...document.querySelectorAll('.js-plotly-plot')].find(g => "
        "(g.layout.title.text || '').includes('Predicted aligned error')); "
        "return [g._fullLayout.xaxis.range, g._fullLayout.yaxis.range]; }")
    assert drawn_ranges == [[0.5, len(SEQUENCE) + 0.5], [len(SEQUENCE) + 0.5, 0.5]]
    _photograph(page, "structure_predicted")

    reference = fold_sequence(load_fold_model(ModelId.parse("random:esmfold-tiny"))[0], SEQUENCE)
    exists = reference.atom37_exists > 0.5
    # What 3Dmol.js read: residue 10's B-factor is its C-alpha pLDDT x 100 (two decimals in the column).
    read = frame.evaluate("window.flamino.atomsOf('A', 10).find(a => a.atom === 'CA').b")
    assert abs(read - 100 * reference.residue_plddt[9]) < 0.006
    # #66 D2: drawn in AlphaFold's fixed bands (the untrained fold is 49-57: orange or yellow), the
    # legend naming the four bands, never a scale stretched over the data.
    from flamino_core.structure.confidence import plddt_colours

    drawn = [frame.evaluate(f"window.flamino.drawnColour('A', {k + 1})") for k in range(len(SEQUENCE))]
    assert drawn == plddt_colours(100 * reference.residue_plddt)
    legend = frame.evaluate("document.getElementById('legend').innerText")
    for band in ("very low (< 50)", "low (50-70)", "confident (70-90)", "very high (≥ 90)"):
        assert band in legend

    pdb = _download(page, "Predicted structure (PDB, pLDDT as B-factors)", tmp_path)
    atoms = list(PDBParser(QUIET=True).get_structure("p", str(pdb)).get_atoms())
    # Another process, the same XLA program on the same CPU: coordinates to the column's 0.001 A.
    np.testing.assert_allclose([a.coord for a in atoms], reference.atom37[exists], atol=1.5e-3)
    np.testing.assert_allclose([a.bfactor for a in atoms], 100 * reference.plddt[exists], atol=0.006)
    cif = _download(page, "Predicted structure (mmCIF)", tmp_path)
    assert cif.suffix == ".cif" and "_atom_site" in cif.read_text()
    assert outside == []
    page.context.close()


def test_saprot_scores_a_list_on_the_predicted_structure_masked_below_70(server, browser, tmp_path):
    """The issue's last step in the browser: a SaProt checkpoint in the sidebar, a pasted sequence
    with no structure, Predict on the Structure page, then a mutation list on Variant effects
    scored on the prediction's 3Di letters, with residues of pLDDT < 70 read as '#'. The untrained
    fold model is unsure everywhere (pLDDT 50-53 on every residue, tests/app/test_structure_predict_app.py),
    so every residue is masked and the page says so; the scores' numbers are checked against the
    core in that AppTest."""
    from transformers import EsmTokenizer

    from conftest import checkpoint_seed
    from flamino_core.model import saprot
    from test_saprot import SAPROT, make_hf_saprot

    folder = tmp_path / "SaProt_t3_custom"
    make_hf_saprot(SAPROT, checkpoint_seed("saprot", "browser-fold")).save_pretrained(folder)
    EsmTokenizer(vocab_file=str(saprot.VOCAB_FILE)).save_pretrained(folder)
    page, outside = _offline_page(browser, server)
    page.goto(server.url)
    page.get_by_text("Your sequences").wait_for()
    load_local_checkpoint(page, folder)
    paste_one_record(page, f">abeta42\n{ABETA42}\n")
    _nav(page, "Structure").click()
    page.get_by_role("button", name="Predict the structure (ESMFold)").click()
    page.get_by_role("heading", name="The predicted structure").wait_for(timeout=6 * TIMEOUT_MS)
    _settle(page)
    _nav(page, "Variant effects").click()
    variants = page.get_by_label("Variants: one per line", exact=False)
    variants.fill("D1A\nF4W\nG38V\n")
    variants.press("Control+Enter")
    page.get_by_text(f"Structure-aware: abeta42_esmfold.pdb chain A: 0 of {len(ABETA42)} residues structure-aware; "
                     f"{len(ABETA42)} masked for pLDDT < 70.").wait_for(timeout=3 * TIMEOUT_MS)
    page.locator('[data-testid="stDataFrame"]').first.wait_for()
    assert page.locator('[data-testid="stMetricValue"]').first.inner_text() == "3"  # scored
    # #66 D6: every residue masked is said as what it means, in place
    page.get_by_text("so these scores are sequence-only").wait_for()
    assert page.locator('[data-testid="stException"]').count() == 0
    assert outside == []
    page.context.close()

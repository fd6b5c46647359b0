"""An ESMFold2 complex in headless Chromium (``streamlit run app.py``, the untrained
``random:esmfold2-tiny``), issue #63's flow: two records pasted -> Structure -> ESMFold2, both
records picked as chains A and B -> Predict -> the 3D view coloured by chain (each chain its own
colour, as 3Dmol.js drew it), the PAE heatmap with the chains' block boundaries, ipTM shown, and an
mmCIF download that Biopython's MMCIFParser reads back with the right chains, residues and per-atom
pLDDT (checked against the confidences JSON downloaded beside it); no request leaves the machine.
The numbers themselves (against a fold made directly) are checked in tests/app/test_structure_complex_app.py."""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_browser import CHROMIUM, TIMEOUT_MS, _download, _nav, _settle, _wait_for_charts
from test_browser_structure import _offline_page, _photograph

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs /usr/bin/chromium (apt-get install chromium)"),
]
# Protein G's B1 domain (P06654 fragment, 56 residues) and the Trp-cage miniprotein (20): real
# sequences no other browser test folds (the server's result store is shared by the run's tests).
GB1 = "MTYKLILNGKTLKGETTTEAVDAATAEKVFKQYANDNGVDGEWTYDDATKTFTVTE"
TRPCAGE = "NLYIQWLKDGGPSSGRPPPS"
OTHER_CHAINS = "#d0d0d0"  # viewer.js's grey for chains not coloured
# The PAE chart's title and its shapes, read from plotly's own graph div.
PAE_SHAPES = ("[...document.querySelectorAll('.js-plotly-plot')].filter(gd => (gd.layout.title.text || '')"
              ".includes('Predicted aligned error, chains A/B')).map(gd => gd.layout.shapes.map(s => [s.x0, s.x1,"
              " s.y0, s.y1]))")


def test_two_records_fold_as_a_complex_coloured_by_chain_with_pae_blocks_iptm_and_mmcif(server, browser, tmp_path):
    from Bio.PDB import MMCIFParser

    page, outside = _offline_page(browser, server)
    page.goto(server.url)
    page.get_by_text("Your sequences").wait_for()
    box = page.get_by_label("FASTA or sequence")
    box.fill(f">gb1\n{GB1}\n>trpcage\n{TRPCAGE}\n")
    box.press("Control+Enter")
    page.get_by_text("2 records ready for analysis.").wait_for()
    _settle(page)
    _nav(page, "Structure").click()
    page.get_by_text("ESMFold2 (a record or a complex)").click()
    _settle(page)
    chains = page.locator('[data-testid="stMultiSelect"]').filter(has_text="Chains of the complex")
    chains.locator("input").fill("trpcage")
    chains.locator("input").press("Enter")
    chains.locator("input").press("Escape")  # the list closed (it would cover what follows)
    _settle(page)
    page.get_by_text("A = gb1 (56 residues), B = trpcage (20 residues)").wait_for()
    page.get_by_text("untrained test model (random weights)").first.wait_for()
    page.get_by_text("Memory: about").wait_for()
    _settle(page)
    page.get_by_text("Memory: about").scroll_into_view_if_needed()
    _photograph(page, "structure_complex_offer")
    page.get_by_role("button", name="Predict the complex (ESMFold2)").click()
    # The fold compiles first (~50-100 s on a loaded 2-core CPU), then the page holds the complex.
    page.get_by_role("heading", name="The predicted complex").wait_for(timeout=6 * TIMEOUT_MS)
    _wait_for_charts(page, 2)  # the PAE heatmap and the contact map against the complex's chain A
    assert page.locator('[data-testid="stException"]').count() == 0
    page.wait_for_function("[...document.querySelectorAll('iframe')].some(f => f.src.includes('flamino_molecule'))")
    frame = next(f for f in page.frames if "flamino_molecule" in f.url)  # the first viewer: the complex's
    frame.wait_for_function("document.body.dataset.drawn", timeout=TIMEOUT_MS)
    assert frame.evaluate("document.body.dataset.drawn") == str(len(GB1) + len(TRPCAGE))
    assert frame.evaluate("window.flamino.scene.chains") == ["A", "B"]
    # Coloured by chain, as 3Dmol.js drew it: every residue of a chain one colour, the two apart, none grey.
    drawn = {chain: {frame.evaluate(f"window.flamino.drawnColour('{chain}', {i})") for i in range(1, n + 1)}
             for chain, n in (("A", len(GB1)), ("B", len(TRPCAGE)))}
    assert all(len(colours) == 1 for colours in drawn.values()), drawn
    assert drawn["A"] != drawn["B"] and OTHER_CHAINS not in drawn["A"] | drawn["B"]
    # PAE with the chains' blocks: one line across each axis between residues 56 and 57.
    assert sorted(page.evaluate(PAE_SHAPES)[0]) == [[0.5, 76.5, 56.5, 56.5], [56.5, 56.5, 0.5, 76.5]]
    metric = page.locator('[data-testid="stMetric"]').filter(has_text="ipTM")
    iptm = float(metric.locator('[data-testid="stMetricValue"]').inner_text())
    assert 0 <= iptm <= 1 and page.get_by_text("Chain-pair ipTM").count() == 1
    _photograph(page, "structure_complex")
    page.locator('iframe[src*="flamino_molecule"]').first.scroll_into_view_if_needed()
    _photograph(page, "structure_complex_view")
    page.get_by_text("Chain-pair ipTM").scroll_into_view_if_needed()
    _photograph(page, "structure_complex_pae")

    cif = _download(page, "Predicted complex (mmCIF, pLDDT as B-factors)", tmp_path)
    confidences = json.loads(_download(page, "Confidences (JSON: pLDDT, PAE, pTM, ipTM)", tmp_path).read_text())
    assert cif.suffix == ".cif" and abs(confidences["iptm"] - iptm) <= 5e-4  # the metric shows 3 decimals
    # By pLDDT: each residue drawn in AlphaFold's band of its pLDDT (the JSON's, 2 decimals: no value
    # of this fold lies within 0.01 of a band's edge, checked below).
    page.get_by_text("pLDDT", exact=True).click()
    frame.wait_for_function("window.flamino.scene.legend.label.startsWith('pLDDT')", timeout=TIMEOUT_MS)
    plddt = np.array(confidences["plddt"])
    assert np.min(np.abs(plddt[:, None] - np.array([50.0, 70.0, 90.0]))) > 0.01
    bands = np.select([plddt >= 90, plddt >= 70, plddt >= 50], ["#0053d6", "#65cbf3", "#ffdb13"], "#ff7d45")
    colours = [frame.evaluate(f"window.flamino.drawnColour('{chain}', {i})")
               for chain, n in (("A", len(GB1)), ("B", len(TRPCAGE))) for i in range(1, n + 1)]
    assert colours == bands.tolist() and len(set(colours)) >= 2
    page.locator('iframe[src*="flamino_molecule"]').first.scroll_into_view_if_needed()
    _photograph(page, "structure_complex_plddt")
    model = MMCIFParser(QUIET=True).get_structure("complex", str(cif))[0]
    assert [chain.id for chain in model] == ["A", "B"]
    assert ["".join(r.get_resname() for r in chain)[:9] for chain in model] == ["METTHRTYR", "ASNLEUTYR"]
    assert [len(chain) for chain in model] == [len(GB1), len(TRPCAGE)]
    # Each residue's pLDDT (the JSON, 2 decimals) is the mean of its atoms' B-factors (2 decimals each).
    means = [np.mean([a.bfactor for a in residue]) for chain in model for residue in chain]
    np.testing.assert_allclose(means, confidences["plddt"], atol=0.011)
    assert outside == []
    page.context.close()

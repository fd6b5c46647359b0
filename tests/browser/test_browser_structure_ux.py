"""What a structural biologist meets, in headless Chromium (issue #66), on the run's shared server
(``random:tiny``, ``random:esmfold-tiny``; no request leaves the machine):

- 1GBT's S195A on Variant effects is at 195 on every scale shown by default (the table's
  positions, the From/To filters, the substitution map's marks), and the sidebar does not warn
  about the id the app built from the file (D4);
- HBB and HBB E6V (the sickle-cell mutation, in the mature chain's numbering) folded by the test
  model, the variant drawn superposed on the wild type and coloured by its C-alpha displacement,
  the tracks, the caveat with its source visible, the per-residue table downloaded (item 3).

Each test uses sequences no other browser test folds or scores (the server's store is shared).
"""

from __future__ import annotations

import csv

import pytest
from test_browser import CHROMIUM, TIMEOUT_MS, _download, _nav
from test_browser_structure import STRUCTURES, _offline_page, _photograph, _viewer_frame

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs /usr/bin/chromium (apt-get install chromium)"),
]
# HBB (P68871) without its initiator methionine: the mature chain, 146 residues, numbered as
# hemoglobin structures (2HHB chain B) and the literature number it: E6V is sickle-cell disease.
HBB_MATURE = ("VHLTPEEKSAVTALWGKVNVDEVGGEALGRLLVVYPWTQRFFESFGDLSTPDAVMGNPKVKAHGKKVLGAFSDGLAHLDNLKGTFATLSE"
              "LHCDKLHVDPENFRLLGNVLVCVLAHHFGKEFTPPVQAAYQKVVAGVANALAHKYH")
MAP_TRACES = "[...document.querySelectorAll('.js-plotly-plot')].flatMap(g => g.data || [])"


def test_1gbt_s195a_is_at_195_on_every_scale_shown_by_default(server, browser):
    structure = STRUCTURES / "1GBT.cif"
    if not structure.exists():
        pytest.skip(f"real structures not found in {STRUCTURES}")
    page, outside = _offline_page(browser, server)
    page.goto(f"{server.url}/?page=input")
    page.get_by_role("heading", name="Your sequences").wait_for()
    page.locator('[data-testid="stFileUploader"] input[type="file"]').set_input_files(str(structure))
    page.get_by_text("1 record ready for analysis").wait_for()
    sidebar = page.locator('[data-testid="stSidebar"]')
    sidebar.get_by_text("numbered as its structure file numbers it").wait_for()
    assert sidebar.get_by_text("but the sequence has").count() == 0  # no warning about the app's own id
    _nav(page, "Variant effects").click()
    box = page.get_by_label("Variants: one per line", exact=False)
    box.fill("S195A\nH57A\nD102N\n")
    box.press("Control+Enter")
    page.locator('[data-testid="stDataFrame"]').first.wait_for(timeout=3 * TIMEOUT_MS)
    page.get_by_text("3 of 3 scored variants shown").wait_for(timeout=3 * TIMEOUT_MS)
    # The From/To filters in 1GBT's numbering (16-245), not the record's 16-238.
    assert page.get_by_label("From position").input_value() == "16"
    assert page.get_by_label("To position").input_value() == "245"
    # The map's marks name the residues as 1GBT does (the hover and the axis read these).
    page.wait_for_function(f"{MAP_TRACES}.some(t => t.name === 'your variants')", timeout=TIMEOUT_MS)
    marked = page.evaluate(f"{MAP_TRACES}.find(t => t.name === 'your variants').x")
    assert sorted(marked) == ["D102", "H57", "S195"]
    # The table as drawn (a canvas grid: its cells are read from the CSV-like copy Streamlit keeps)
    page.get_by_label("From position").fill("190")
    page.get_by_label("From position").press("Enter")
    page.get_by_text("Showing 1 of 3 scored variants: From position 190.").wait_for()
    _photograph(page, "variants_1gbt_structure_numbering")
    assert outside == []
    page.context.close()


def test_hbb_e6v_folded_beside_the_wild_type_superposed_with_its_tracks_and_caveat(server, browser, tmp_path):
    page, outside = _offline_page(browser, server)
    page.goto(f"{server.url}/?page=variants&seq={HBB_MATURE}")
    box = page.get_by_label("Variants: one per line", exact=False)
    box.fill("E6V\n")
    box.press("Control+Enter")
    page.get_by_role("heading", name="A variant's structure (ESMFold)").wait_for(timeout=3 * TIMEOUT_MS)
    page.get_by_text("Feldman, Brogi and Skolnick 2026").wait_for()  # the caveat, in place
    page.get_by_role("button", name="Fold the wild type and 1 variant").click()
    # Two folds of 146 residues with the untrained model, compiled first (minutes on a loaded CPU)
    page.get_by_text("E6V: C-alpha RMSD").wait_for(timeout=8 * TIMEOUT_MS)
    frame = _viewer_frame(page)  # the one viewer on the page: the variant's
    # The variant is chain A, coloured by displacement; the wild type chain B, grey; E6 in magenta.
    assert frame.evaluate("window.flamino.scene.chain") == "A"
    assert frame.evaluate("window.flamino.scene.chosen.key") == "A|6|"
    assert frame.evaluate("window.flamino.atomsOf('B', 6).length") > 0  # the wild type is drawn too
    assert frame.evaluate("window.flamino.scene.legend.label") == "C-alpha displacement (Å)"
    assert page.get_by_text("Feldman, Brogi and Skolnick 2026").count() >= 1
    titles = page.evaluate("() => [...document.querySelectorAll('.gtitle')].map(e => e.textContent)")
    assert any("E6V against the wild type" in t for t in titles)
    rows = list(csv.DictReader(_download(page, "Per-residue table (CSV)", tmp_path).read_text().splitlines()))
    assert len(rows) == len(HBB_MATURE) and [r["position"] for r in rows if r["mutated"] == "True"] == ["6"]
    shown = frame.evaluate("window.flamino.scene.residues.map(r => r.value)")
    assert [round(v, 3) for v in shown] == [round(float(r["ca_displacement"]), 3) for r in rows]
    page.get_by_text("Read this first").evaluate("e => e.scrollIntoView({block: 'start'})")
    _photograph(page, "variant_structure_hbb_e6v")
    assert outside == []
    page.context.close()

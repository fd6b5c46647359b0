"""The Variant effects page in Chromium with indels (issue #38): a pasted list of a deletion, a
stop and a frameshift without its new stop, scored with wt-pll-approx (chosen by the link), on
the run's shared server (``browser_fixtures.py``). What a browser adds to the AppTest of
tests/app/test_app_variants.py: the pass plan and the table as drawn, and the CSV as downloaded.

The list is scored against the first 60 residues of HBB (``VHLTPEEKSAVTALWGKVNVDEVGG…``), a
sequence no other browser test uses (the shared server's result store is shared)."""

from __future__ import annotations

import csv

import pytest
from test_browser import CHROMIUM, SCREENSHOTS, TIMEOUT_MS, VIEWPORT, _download

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs /usr/bin/chromium (apt-get install chromium)"),
]

HBB60 = "VHLTPEEKSAVTALWGKVNVDEVGGEALGRLLVVYPWTQRFFESFGDLSTPDAVMGNPKV"


def test_indels_pasted_on_the_variants_page_are_scored_and_downloaded(server, browser, tmp_path):
    page = browser.new_context(viewport=VIEWPORT).new_page()
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(f"{server.url}/?seq={HBB60}&page=variants&vstrategy=wt-pll-approx")
    box = page.get_by_label("Variants: one per line", exact=False)
    box.fill("p.Lys8del\np.Trp37Ter\np.Trp15fs\n")
    box.press("Control+Enter")
    page.get_by_text("Pass plan: wt-pll-approx: 2 unmasked passes", exact=False).wait_for()
    page.locator('[data-testid="stDataFrame"]').first.wait_for()
    assert page.locator('[data-testid="stMetricValue"]').first.inner_text() == "2"  # scored
    page.screenshot(path=str(SCREENSHOTS / "variants_indels.png"), full_page=True)
    rows = list(csv.reader(_download(page, "Scores (CSV)", tmp_path).read_text().splitlines()))
    assert rows[0] == ["record_id", "mutant", "variant", "position", "score", "status", "normalisation", "model"]
    assert [r[1:4] for r in rows[1:]] == [["p.Lys8del", "K8del", "8"], ["p.Trp37Ter", "W37*", "37"],
                                         ["p.Trp15fs", "", ""]]
    assert [r[5:7] for r in rows[1:3]] == [["ok", "sum"], ["ok", "min-llr"]]
    assert "without its new stop" in rows[3][5]
    page.context.close()

"""What only a real browser shows (headless Chromium, ``streamlit run app.py``, ``random:tiny``):
figures that fit a narrow window, no developer toolbar, whole model names in the sidebar, the
contacts download of a long protein, and a masked scan cancelled and resumed mid-run.

Same server and browser fixtures as ``test_browser.py``; screenshots go to the same folder.
"""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest

from test_browser import (
    CHROMIUM,
    SCREENSHOTS,
    TIMEOUT_MS,
    UBIQUITIN,
    _download,
    _nav,
    _settle,
    _wait_for_charts,
    paste_one_record,
)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs /usr/bin/chromium (apt-get install chromium)"),
]
RNG = np.random.default_rng(3)
LONG = "".join(RNG.choice(list("ACDEFGHIKLMNPQRSTVWY"), 1100))
# 1,200 residues, not 3,000: what is checked is the same (a scan over the 500 residues shown at
# first, cancelled mid-way, resumed from what it kept): it is still 19 chunks of 64 positions, the
# cancel's grain, and the Cancel is clicked as soon as the page draws one, within the first chunk
# or two, so 17 or more are left. Its rest ran 10 s here at load 4.6, the 3,000's 29 s (with its
# Resume and 3,000-wide figures, 121 s for the test).
SCAN = "".join(RNG.choice(list("ACDEFGHIKLMNPQRSTVWY"), 1200))


def _open(browser, server, text: str, width: int = 1400):
    page = browser.new_context(viewport={"width": width, "height": 1600}).new_page()
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(server.url)
    page.get_by_text("Your sequences").wait_for()
    paste_one_record(page, text)
    return page


def _boxes(page, chart: int, selector: str) -> list[dict]:
    return page.evaluate(
        """([chart, selector]) => [...document.querySelectorAll('[data-testid="stPlotlyChart"]')[chart]
              .querySelectorAll(selector)].map(e => { const b = e.getBoundingClientRect();
              return {left: b.left, top: b.top, right: b.right, bottom: b.bottom}; })""",
        [chart, selector],
    )


def _overlap(a: dict, b: dict) -> bool:
    return a["left"] < b["right"] and b["left"] < a["right"] and a["top"] < b["bottom"] and b["top"] < a["bottom"]


def test_an_800_px_window_fits_titles_legends_labels_and_shows_no_developer_menu(server, browser):
    from app_pages._ui.input.model_loading import model_choices
    from app_pages._ui.input.model_picker import model_label

    page = _open(browser, server, f">ubq\n{UBIQUITIN}\n", width=800)
    _nav(page, "Masked predictions").click()
    _wait_for_charts(page, 3)
    (title,) = _boxes(page, 0, ".g-gtitle")
    (legend,) = _boxes(page, 0, ".legend")
    assert not _overlap(title, legend), (title, legend)  # they overlapped at 800 px before
    ticks = page.evaluate(
        """() => [...document.querySelectorAll('[data-testid="stPlotlyChart"]')[1].querySelectorAll('.xtick text')]
              .map(e => e.textContent)"""
    )
    assert ticks == list("ACDEFGHIKLMNPQRSTVWY")  # every amino acid, not every other one
    page.screenshot(path=str(SCREENSHOTS / "predictions_800px.png"), full_page=True)

    # Visitors get no developer items (Deploy, Rerun, Clear cache), only what they can use.
    assert page.get_by_role("button", name="Deploy").count() == 0
    page.get_by_test_id("stMainMenuButton").click()
    page.wait_for_timeout(300)
    menu = page.get_by_test_id("stMainMenuList").inner_text()
    assert "Print" in menu and not any(item in menu for item in ("Deploy", "Rerun", "Clear cache", "Settings"))
    page.keyboard.press("Escape")

    # Every model label fits the sidebar's picker (they were cut off with "…").
    picker = page.locator('[data-testid="stSidebar"] [data-testid="stSelectbox"] input').first
    labels = [model_label(choice) for choice in model_choices()]
    too_wide = picker.evaluate(
        """(e, labels) => { const s = getComputedStyle(e); const c = document.createElement('canvas').getContext('2d');
              c.font = s.font; const room = e.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight);
              return labels.filter(t => c.measureText(t).width > room); }""",
        labels,
    )
    assert too_wide == []
    page.context.close()


def test_a_long_proteins_contacts_download_says_which_pairs_were_not_predicted(server, browser, tmp_path):
    page = _open(browser, server, f">long\n{LONG}\n")
    _nav(page, "Attention").click()
    _wait_for_charts(page, 3)
    page.get_by_text("Showing residues 1–500 of 1,100 residues").wait_for()
    page.get_by_role("button", name="Show the whole sequence").click()
    page.get_by_text("Showing the whole sequence (1,100 residues).").wait_for()
    _wait_for_charts(page, 3)
    page.get_by_text("of the pairs shown are not predicted").wait_for()
    page.screenshot(path=str(SCREENSHOTS / "attention_long.png"), full_page=True)
    (legend,) = _boxes(page, 1, ".legend")  # the "not predicted" entry: clear of every label
    for label in _boxes(page, 1, ".g-gtitle") + _boxes(page, 1, ".g-xtitle") + _boxes(page, 1, ".xtick"):
        assert not _overlap(legend, label), (legend, label)
    csv = _download(page, "Contacts (CSV)", tmp_path)
    assert csv.name == "long_random_tiny_contacts.csv"  # the record and the model (issue 50 row 13)
    frame = pd.read_csv(io.StringIO(csv.read_text()))
    assert list(frame.columns) == ["i", "residue_i", "j", "residue_j", "probability", "model"]
    assert len(frame) == 1100 * 1099 // 2
    assert "NaN" in csv.read_text()  # written as NaN, not as an empty cell or 0
    # The window rule, independently: windows of 1022 every 511, plus one ending at residue 1100.
    starts = sorted(set(range(0, 1100 - 1022, 511)) | {1100 - 1022})
    i, j = frame["i"].to_numpy() - 1, frame["j"].to_numpy() - 1
    covered = np.zeros(len(frame), bool)
    for s in starts:
        covered |= (i >= s) & (j < s + 1022)
    np.testing.assert_array_equal(frame["probability"].isna().to_numpy(), ~covered)
    page.context.close()


def test_a_running_masked_scan_can_be_cancelled_and_resumed(server, browser):
    page = _open(browser, server, f">scan\n{SCAN}\n")
    _nav(page, "Masked predictions").click()
    _wait_for_charts(page, 3)
    page.get_by_role("button", name="Show the whole sequence").click()
    _wait_for_charts(page, 3)
    page.get_by_text("masked-marginals — exact").click()  # the map's strategy
    # The first chunk measures this machine's rate; then the scan runs on, or, on a slow machine,
    # the page first says how long it takes and asks. The page's own Cancel (the sidebar has one
    # too) is clicked as soon as it is drawn: while that first chunk runs (a shape this server never
    # compiled: the page does not wait for it) or in the rest. Either must stop the scan (a Cancel
    # in the first chunk used to end it as measured, and the rest then ran as a new job).
    start = page.get_by_role("button", name="Start (")
    cancel = page.get_by_test_id("stMain").get_by_role("button", name="Cancel").first
    start.or_(cancel).first.wait_for(timeout=TIMEOUT_MS)
    if start.count():
        assert "at the rate this machine measured" in page.get_by_text("masked passes (one per position)").inner_text()
        start.click()
        cancel.wait_for(timeout=TIMEOUT_MS)
    cancel.click()
    stopped = page.get_by_text("was cancelled after")
    try:
        stopped.wait_for(timeout=TIMEOUT_MS)
    finally:
        page.screenshot(path=str(SCREENSHOTS / "scan_after_cancel.png"), full_page=True)
    text = stopped.inner_text()
    done = int(text.split("cancelled after ")[1].split(" of ")[0].replace(",", ""))
    assert 0 < done < len(SCAN) and "they are kept" in text
    metric = page.get_by_test_id("stMetric").filter(has_text="Pseudo-perplexity")
    assert metric.count() == 0
    page.screenshot(path=str(SCREENSHOTS / "scan_cancelled.png"), full_page=True)
    page.get_by_role("button", name="Resume").click()
    metric.first.wait_for(timeout=4 * TIMEOUT_MS)
    _settle(page)
    assert page.locator('[data-testid="stException"]').count() == 0
    page.context.close()

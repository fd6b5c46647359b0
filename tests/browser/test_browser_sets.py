"""A real set in a real browser (issue 20's "done when"): 186 ProteinGym target proteins uploaded,
Records then Embeddings, then the server restarted and Records opened again.

The server runs with a ``sitecustomize`` (tests/browser_hooks/) that logs every engine call and
the rows it was sent, so the test sees which page ran the model: Embeddings runs no unmasked pass
over the records Records stored, and after a restart Records runs none at all (its table comes
from the result store). The map of 186 records has its labels off, and colours by the headers'
``taxon=`` without a table (issue 37).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from flamino_core.figures.style import SAFE_CATEGORY_COLOURS
from test_browser import (
    CHROMIUM,
    ROOT,
    SCREENSHOTS,
    TIMEOUT_MS,
    VIEWPORT,
    _nav,
    _settle,
    _wait_for_charts,
    start_server,
    stop_server,
)

TARGETS = ROOT.parent / "shared" / "fasta" / "proteingym_targets.fa"
MAP_TRACES = "(document.querySelectorAll('.js-plotly-plot')[2]?.data || [])"  # the records' map
HOOKS = Path(__file__).resolve().parents[1] / "browser_hooks"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs /usr/bin/chromium (apt-get install chromium)"),
    pytest.mark.skipif(not TARGETS.exists(), reason=f"real records not found at {TARGETS}"),
]


class Server:
    """A local server (``test_browser.start_server``) with the engine-call log on."""

    def __init__(self, cache: Path, calls: Path, log: Path, model: str = "random:tiny"):
        self.calls = calls
        hooks = {"FLAMINO_MODEL": model, "FLAMINO_TEST_ENGINE_LOG": str(calls),
                 "PYTHONPATH": os.pathsep.join([str(HOOKS), os.environ.get("PYTHONPATH", "")])}
        self.process = start_server(cache, log, hooks, timeout=120)
        self.url = self.process.url

    def engine_calls(self) -> list[dict]:
        """Every engine call so far: {"call": "run" | "masked", "rows": n, "logits": bool, ...}."""
        if not self.calls.exists():
            return []
        return [json.loads(line) for line in self.calls.read_text().splitlines() if line.strip()]

    def stop(self) -> None:
        stop_server(self.process)


@pytest.fixture
def servers(tmp_path):
    started = []

    def start(name: str) -> Server:
        server = Server(tmp_path / "cache", tmp_path / f"{name}.calls", tmp_path / f"{name}.log")
        started.append(server)
        return server

    try:
        yield start
    finally:
        for server in started:
            server.stop()


def upload_targets(browser, server: Server):
    page = browser.new_context(viewport=VIEWPORT).new_page()
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(server.url)
    page.get_by_text("Your sequences").wait_for()
    page.locator('[data-testid="stFileUploader"] input[type="file"]').set_input_files(str(TARGETS))
    page.get_by_text("186 records ready for analysis.").wait_for()
    _settle(page)
    return page


# No cell waiting to fill in, and no job of the set still running (the sidebar keeps a finished
# job's line, "…: done", until the next rerun).
DONE = ("!document.body.innerText.includes('fill in as the records are computed')"
        " && !/Unmasked passes of 186 records: (?!done)/.test(document.body.innerText)")
# A button's text starts with its icon's name ("play_arrow"): the label is its last line. (Whether
# the page asks depends on this machine's measured rate: a slower CPU is asked, a faster one not.)
ASKED = ("[...document.querySelectorAll('button')]"
         ".some(b => b.innerText.trim().split('\\n').pop().trim().startsWith('Start ('))")


def records_done(page, timeout_ms: int = 600_000) -> int:
    """Wait until the Records table is complete: no job runs and no cell waits to fill in. A
    job the page says is long (its cost measured on a first chunk) is started as a user would.
    Returns how many times the page asked."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    asked = 0
    deadline = time.monotonic() + timeout_ms / 1000
    while True:
        if time.monotonic() >= deadline:  # what the page shows then says why (a job stopped, failed, never rerun)
            page.screenshot(path=str(SCREENSHOTS / "records_186_incomplete.png"), full_page=True)
            raise AssertionError("the Records table did not complete; the page said:\n" + page.inner_text("body")[-3000:])
        try:
            page.wait_for_function(f"({DONE}) || ({ASKED})", timeout=max(1000, (deadline - time.monotonic()) * 1000))
        except PlaywrightTimeout:
            continue  # past the deadline: the check above says what the page shows
        if page.evaluate(f"() => {ASKED}"):
            try:  # a button of a run being replaced can be gone before the click: then look again
                page.get_by_role("button", name="Start (", exact=False).first.click(timeout=10_000)
            except PlaywrightTimeout:
                page.screenshot(path=str(SCREENSHOTS / "records_186_start_gone.png"), full_page=True)
                continue
            asked += 1
            page.wait_for_timeout(1000)
            continue
        _settle(page)
        if page.evaluate(f"() => {DONE}"):
            return asked


def set_passes(calls: list[dict]) -> int:
    """Rows of the records' unmasked passes (every layer and the logits: ``passes.record_outputs``)."""
    return sum(c["rows"] for c in calls if c["call"] == "run" and c["logits"] and c["all_layers"])


def test_186_records_records_then_embeddings_then_a_restart(servers, browser):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    first = servers("first")
    page = upload_targets(browser, first)
    _nav(page, "Records").click()
    page.wait_for_url("**/records*")
    page.locator('[data-testid="stDataFrame"]').wait_for()  # the table is there at once...
    records_done(page)  # ...and fills in
    after_records = first.engine_calls()
    assert set_passes(after_records) == 186  # one unmasked pass per record, all 186 distinct
    page.screenshot(path=str(SCREENSHOTS / "records_186.png"), full_page=True)

    _nav(page, "Embeddings").click()
    page.wait_for_url("**/embeddings*")
    _wait_for_charts(page, 3)
    new = first.engine_calls()[len(after_records):]
    assert set_passes(new) == 0, new  # the map's mean embeddings came from Records' passes
    assert sum(c["rows"] for c in new) <= 1  # at most the selected record's per-residue states
    modes = page.evaluate("() => document.querySelectorAll('.js-plotly-plot')[2].data.map(t => [t.name, t.mode])")
    points = [mode for name, mode in modes if not name.startswith("selected")]
    assert points and all(mode == "markers" for mode in points), modes  # 186 records: no labels
    assert page.get_by_text("186 records", exact=False).count() >= 1
    page.screenshot(path=str(SCREENSHOTS / "embeddings_186.png"), full_page=True)

    # Coloured by the headers' own taxon= (issue 37), with no table: one legend entry per taxon,
    # most frequent first, each in its own colour of the colour-blind-safe palette.
    page.locator('[data-testid="stSelectbox"]').filter(has_text="Colour records by").click()
    page.get_by_role("option", name="taxon", exact=True).wait_for()
    options = page.get_by_role("option").all_inner_texts()
    assert {"selection", "assay"} <= {o.strip() for o in options} and not any("(table)" in o for o in options)
    page.get_by_role("option", name="taxon", exact=True).click()
    page.wait_for_function(f"{MAP_TRACES}.some(t => t.name === 'Human')")
    _wait_for_charts(page, 3)
    legend = page.locator(".js-plotly-plot").nth(2).locator(".legendtext").all_text_contents()  # SVG: no innerText
    assert legend[:4] == ["Human", "Prokaryote", "Eukaryote", "Virus"], legend
    colours = page.evaluate(f"() => {MAP_TRACES}.slice(0, 4).map(t => t.marker.color)")
    assert colours == list(SAFE_CATEGORY_COLOURS[:4])
    assert page.locator(".js-plotly-plot").nth(2).locator(".legendtitletext").text_content() == "taxon"
    page.screenshot(path=str(SCREENSHOTS / "embeddings_186_taxon.png"), full_page=True)
    page.context.close()

    first.stop()
    second = servers("second")  # a restarted server on the same cache
    page = upload_targets(browser, second)
    _nav(page, "Records").click()
    page.wait_for_url("**/records*")
    page.locator('[data-testid="stDataFrame"]').wait_for()
    records_done(page, timeout_ms=360_000)  # from the store, but a new server compiles first
    assert set_passes(second.engine_calls()) == 0  # the whole table from the store
    page.context.close()

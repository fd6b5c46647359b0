"""Issue 50 row 1 in Chromium: Records on a model architecture never run in the server process
shows its table and a progress line saying what is measured within 2 s of the click, instead of
the page's intro line alone for 77-91 s (the page waited for the first chunk, compilation
included; now it waits for a first chunk only while it does not compile). The server is started
on ``random:tiny-esmc`` with a fresh cache: no pass rate known, nothing compiled for that
architecture."""

from __future__ import annotations

import os
import time

import pytest

from shared_cpu import sharing_reason
from test_browser import CHROMIUM, TIMEOUT_MS, VIEWPORT, _nav, _settle, start_server, stop_server
from test_app_sets import SET

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs /usr/bin/chromium (apt-get install chromium)"),
]
FASTA = "".join(f">{i} {d}\n{s}\n" for i, d, s in SET[:3])
# The bound. The click's own round trip and the page's drawing take well under a second
# on an idle machine; what used to take 77-91 s was the wait for the compiled first chunk. On a
# CPU shared with other work (shared_cpu.py: inside make test, two workers on the cores) a browser
# round trip alone was measured at 1.8 s and the whole 2.8 s in CI (2026-12-07, load 3.4 on 2
# cores), so there the bar is 10 s: still a fraction of the 77 s this test exists to catch, and
# the times are printed. That the page is drawn before the compilation is over is shown apart
# from the clock: the progress line naming the compilation is on the page.
WITHIN_S = 2.0
WITHIN_S_SHARED = 10.0


def test_records_on_a_never_measured_architecture_draws_the_table_and_the_progress_line_at_once(browser, tmp_path):
    server = start_server(tmp_path / "cache", tmp_path / "server.log", {"FLAMINO_MODEL": "random:tiny-esmc"},
                          timeout=120)
    try:
        page = browser.new_context(viewport=VIEWPORT).new_page()
        page.set_default_timeout(TIMEOUT_MS)
        page.goto(server.url)
        box = page.get_by_label("FASTA or sequence")
        box.fill(FASTA)
        box.press("Control+Enter")
        page.get_by_text("3 records ready for analysis.").wait_for()
        _settle(page)  # the model is loaded (the sidebar names it); nothing of it has run yet
        began, load = time.monotonic(), os.getloadavg()[0]
        _nav(page, "Records").click()
        page.locator('[data-testid="stDataFrame"]').first.wait_for(timeout=60_000)
        table_s = time.monotonic() - began
        page.get_by_text("a model new to this server compiles first", exact=False).first.wait_for(timeout=60_000)
        line_s = time.monotonic() - began
        loads = (round(load, 2), round(os.getloadavg()[0], 2))
        print(f"Records on a never-measured architecture: table after {table_s:.2f} s, progress line after "
              f"{line_s:.2f} s (load average {loads[0]} -> {loads[1]} on {os.cpu_count()} cores; "
              f"{sharing_reason(*loads) or 'the machine to itself'})")
        bound = WITHIN_S_SHARED if sharing_reason(*loads) else WITHIN_S
        assert table_s < bound and line_s < bound, (table_s, line_s, loads)
        # ...and the work goes on: the entropy column fills in without a click (read once the
        # page's run is over: before, its caption may not be drawn yet).
        _settle(page)
        page.wait_for_function("!document.body.innerText.includes('fill in as the records are computed')",
                               timeout=TIMEOUT_MS * 2)
    finally:
        stop_server(server)

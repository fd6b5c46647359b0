"""Chromium, issue #37's done-when line on estimates: pseudo-perplexity of a 40-record set of real
ProteinGym targets on the shared server (``random:tiny``): the first record's value within 15 s of
the click, the estimate the job says at 10% of its work within 1.5x of when it ended, Cancel then
Resume keeping the time left consistent (within 1.5x), and the sidebar never saying done while
passes remain (watched through the job).

The page's job line (``Status.line``: "Pseudo-perplexity of 40 records: n of N positions · about
X left") is read from the page's text; the estimate the job said at 10% and its actual time are
also the ones the job logs into the server's pass-rate file (``Rates.record_job``), from the same
``Job._left`` the page draws, so the check does not depend on when Chromium happened to sample.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from test_browser import TIMEOUT_MS, VIEWPORT, _nav, _settle
from browser_fixtures import browser, playwright_session, server  # noqa: F401

from flamino_core.inputs.fasta import read_fasta, to_fasta

TARGETS = Path(__file__).resolve().parents[2] / "shared" / "fasta" / "proteingym_targets.fa"
TITLE = "Pseudo-perplexity of 40 records"
LINE = re.compile(TITLE + r": ([\d,]+) of ([\d,]+) positions(?: · about (\d+) (second|minute)s? left)?")
# The done-when bars (issue #37). 1.5x: the issue's own factor for an estimate a user can plan by.
# 15 s for the first record: the job's first chunk is at most 64 positions of one record (<= 150
# residues here), seconds on random:tiny even with its compilations, plus the page's reruns.
FIRST_ROWS_S, FACTOR = 15.0, 1.5

pytestmark = [
    pytest.mark.browser,
    # Run 1 (21:47, before Job.carry_on): first record 9.1 s, but the estimate at 10% 118.8 s for
    # 57 s of work, and Resume's cost-model estimate 12 s against 30 s said before Cancel (27 s
    # taken). Run 2 (22:21, with carry_on): the page's job line was not seen within 300 s, not yet
    # diagnosed. Run 3 (2026-12-05, compilations out of the rate, Intel Xeon, quiet): first record
    # 4.2 s, Resume consistent (1.0), the estimate at 10% 24.2 s for 16.1 s of work (0.666, the bar
    # 0.667). Not strict: it reports, it does not yet gate (docs/reliability.md).
    pytest.mark.xfail(reason="issue #37 done-when not yet met in Chromium (see the comment above)", strict=False),
]


def forty_targets() -> list:
    """40 real ProteinGym targets of 60-150 residues, in file order (4,000-odd positions: a job of
    seconds to a minute on random:tiny, long enough to cancel at a third and resume)."""
    if not TARGETS.is_file():
        pytest.skip(f"the ProteinGym targets are not at {TARGETS}")
    records = [r for r in read_fasta(TARGETS).records if 60 <= len(r.sequence) <= 150][:40]
    assert len(records) == 40
    return records


def job_line(page):
    """(done, total, seconds left or None) of the set's pseudo-perplexity on the page, or None."""
    found = LINE.search(page.evaluate("document.querySelector('section.main, [data-testid=\"stMain\"]')"
                                      "?.innerText ?? ''"))
    if found is None:
        return None
    done, total = (int(g.replace(",", "")) for g in found.groups()[:2])
    left = None if found.group(3) is None else int(found.group(3)) * (60 if found.group(4) == "minute" else 1)
    return done, total, left


def sidebar_text(page) -> str:
    return page.get_by_test_id("stSidebar").inner_text()


def watch(page, until, samples: list, timeout_s: float = 300) -> None:
    """Sample the page every 200 ms until ``until(sample)``; each sample (time, job line, sidebar
    says done) kept. The sidebar's line must never say done while the page's count (the same
    script run's) shows passes left."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        line, side = job_line(page), sidebar_text(page)
        sample = (time.monotonic(), line, f"{TITLE}: done" in side)
        samples.append(sample)
        assert not (sample[2] and line is not None and line[0] < line[1]), (
            f"the sidebar says done while the page counts {line[0]:,} of {line[1]:,} positions")
        if until(sample):
            return
        page.wait_for_timeout(200)
    raise AssertionError("the job did not get there in time")


def history(server) -> list[dict]:
    """The jobs the server logged (predicted and actual times), from its pass-rate file."""
    rates = Path(server.cache) / "pass_rates.json"
    return json.loads(rates.read_text()).get("jobs", []) if rates.is_file() else []


def test_pseudo_perplexity_of_40_records_first_rows_estimate_cancel_resume(server, browser):
    records = forty_targets()
    page = browser.new_context(viewport=VIEWPORT).new_page()
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(server.url)
    page.get_by_text("Your sequences").wait_for()
    box = page.get_by_label("FASTA or sequence")
    box.fill(to_fasta(records))
    box.press("Control+Enter")
    page.get_by_text("40 records ready for analysis.").wait_for()
    _settle(page)
    _nav(page, "Records").click()
    page.get_by_role("button", name="Compute pseudo-perplexity").wait_for()
    _settle(page)
    logged = len(history(server))
    clicked = time.monotonic()
    page.get_by_role("button", name="Compute pseudo-perplexity").click()  # the click is the go-ahead
    samples: list = []
    first = len(records[0].sequence)  # the first record's positions: its value is in once they are
    watch(page, lambda s: s[1] is not None and s[1][0] >= first, samples)
    first_row_s = samples[-1][0] - clicked
    total = samples[-1][1][1]
    watch(page, lambda s: s[1] is not None and s[1][0] >= total // 3, samples)  # a third in: cancel
    before = samples[-1][1]
    page.get_by_role("button", name="Cancel").first.click()
    page.get_by_text("kept", exact=False).first.wait_for()
    _settle(page)
    resumed_at = time.monotonic()
    page.get_by_role("button", name="Resume").first.click()
    watch(page, lambda s: s[1] is not None and s[1][2] is not None and s[0] > resumed_at, samples)
    after = samples[-1][1]
    watch(page, lambda s: s[2], samples)  # to the end: the sidebar says done (checked honest above)
    ended = [e for e in history(server)[logged:] if e["title"] == TITLE]  # (not the set's entropies)
    print(json.dumps({"first_row_s": round(first_row_s, 1), "before_cancel": before, "after_resume": after,
                      "jobs": ended}))
    assert first_row_s < FIRST_ROWS_S, f"the first record's value took {first_row_s:.1f} s"
    assert len(ended) == 2, ended
    cancelled, rest = ended
    # Cancel, then Resume: the time left the resumed job says at its start (its prediction, logged;
    # the page's "about X left" after the click, ``after``, rounds it) against the time left the page
    # said before the cancel, scaled to the positions left at the resume. "about X" rounds to 5 s
    # below a minute: a said time under 10 s is compared as 10 s.
    assert before[2] is not None
    left_then = before[2] * (total - after[0]) / max(total - before[0], 1)
    assert 1 / FACTOR <= max(rest["predicted_s"], 10) / max(left_then, 10) <= FACTOR, (before, after, rest)
    # The first job (cancelled) said at 10% when it would end; its actual end had it run on is its
    # time to the cancel plus what the resumed job took for the rest.
    said, actual = cancelled["predicted_s_at_tenth"], cancelled["actual_s"] + rest["actual_s"]
    assert said is not None and 1 / FACTOR <= actual / said <= FACTOR, (cancelled, rest)

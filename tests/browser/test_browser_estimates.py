"""Chromium, issue #37's done-when line on estimates, for two jobs: pseudo-perplexity of a
40-record set of real ProteinGym targets, and a DMS pll (the first 300 rows of the shared NEIME
assay), on the shared server (``random:tiny``). For each: the first rows within 15 s of the
go-ahead, the estimate the job says at 10% of its work within 1.5x of when it ended (asserted when
the test had the machine: ``shared_cpu.py``), Cancel then Resume keeping the time left
consistent (within 1.5x), and the sidebar never saying done while units remain (watched through
the job).

The page's job line (``Status.line``: "Pseudo-perplexity of 40 records: n of N positions · about
X left") is read from the page's text; the estimate the job said at 10% and its actual time are
also the ones the job logs into the server's pass-rate file (``Rates.record_job``), from the same
``Job._left`` the page draws, so the check does not depend on when Chromium happened to sample.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest

from shared_cpu import sharing_reason
from test_browser import CHROMIUM, TIMEOUT_MS, VIEWPORT, _nav, _settle

from flamino_core.inputs.fasta import read_fasta, to_fasta

SHARED = Path(__file__).resolve().parents[3] / "shared"
TARGETS = SHARED / "fasta" / "proteingym_targets.fa"
ASSAY = SHARED / "dms" / "A0A1I9GEU1_NEIME_Kennouche_2019.csv"
SET_TITLE = "Pseudo-perplexity of 40 records"
DMS_ROWS = 300
DMS_TITLE = f"Scoring {DMS_ROWS} DMS rows (pll)"
# The done-when bars (issue #37). 1.5x: the issue's own factor for an estimate a user can plan by.
# 15 s for the first rows: the set's first chunk is at most 64 positions of one record (<= 400
# residues here), the DMS pll's first chunk one row (161 masked passes of NEIME's 161 residues),
# seconds on random:tiny even with their compilations, plus the page's reruns.
FIRST_ROWS_S, FACTOR = 15.0, 1.5
# The estimate at 10% against the actual end is a wall-clock promise for this machine: when other
# work takes the cores mid-job (the suite's other workers starting and stopping), no estimator can
# foresee it. On 2026-12-05 a run inside `make test` (4 workers on 2 cores) said 45.6 s at 10% and
# took 73.9 s: the rest, predicted at 12.9 s, took 37.4 s as other tests came and went; on
# 2026-12-07 two workers (load 2.2-2.8, under the old load rule's bar) said 69.7 s for 37.0 s. So
# that bar is asserted only when the test had the machine (shared_cpu.py: run alone, the load
# average at most the cores + 1.5 at the go-ahead and at the end), and otherwise printed with the
# reason, not asserted; benchmarks/estimates.py measures it quiet. What does not depend on the
# load is asserted always: the first rows, the states, Resume's consistency (two predictions),
# the sidebar.

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs /usr/bin/chromium (apt-get install chromium)"),
    # (server, browser: the run's shared ones, browser_fixtures.py, a plugin of conftest.py. This
    # module imported them until 2026-12-05, which made a second Playwright in the same worker and
    # failed at setup; the xfail mark it had then hid that in the suite.)
    # History (docs/reliability.md): run 1 (2026-12-03) the estimate at 10% 118.8 s for 57 s of work
    # (compilations in the rate); run 3 (2026-12-05, Intel Xeon, quiet) 0.666 of the work against
    # the 0.667 bar. On 2026-12-05 the set of 60-150 residues ended in 5 s, before the page drew
    # the resumed job (run 2's 300 s wait), so the set is 150-400 residues; then the rates moved to
    # per MFLOP, a borrowed rate weighs less, the set's job measures its rate per MFLOP, a Resume
    # counts what was finished and carries the pace said at the last report. Four runs then, quiet:
    # the estimate at 10% 0.82-1.27 of the work (pseudo-perplexity 1.20, 1.15, 1.21, 1.27; DMS pll
    # 0.90, 0.90, 0.82, 0.98), the first rows 1.9-2.5 s, Resume consistent.
]


class JobLine:
    """One job's line on the page (``Status.line``): "<title>: n of N <unit> · about X left"."""

    def __init__(self, title: str, unit: str):
        self.title = title
        self.pattern = re.compile(re.escape(title) + r": ([\d,]+) of ([\d,]+) " + unit
                                  + r"(?: · about (\d+) (second|minute)s? left)?")

    def read(self, page):
        """(done, total, seconds left or None) on the page's main part, or None."""
        found = self.pattern.search(page.evaluate(
            "document.querySelector('section.main, [data-testid=\"stMain\"]')?.innerText ?? ''"))
        if found is None:
            return None
        done, total = (int(g.replace(",", "")) for g in found.groups()[:2])
        left = None if found.group(3) is None else int(found.group(3)) * (60 if found.group(4) == "minute" else 1)
        return done, total, left

    def watch(self, page, until, samples: list, timeout_s: float = 300) -> None:
        """Sample the page every 200 ms until ``until(sample)``; each sample (time, job line,
        sidebar says done) kept. The sidebar's line must never say done while the page's count
        (the same script run's) shows units left."""
        deadline = time.monotonic() + timeout_s
        lying = 0  # samples in a row where the sidebar says done while the page counts units left
        while time.monotonic() < deadline:
            line = self.read(page)
            sample = (time.monotonic(), line, f"{self.title}: done" in page.get_by_test_id("stSidebar").inner_text())
            samples.append(sample)
            # Two samples in a row (200 ms apart): the page and the sidebar are read one after the
            # other, and a rerun that ends between the two reads (the job done: the sidebar redrawn,
            # the page's line not yet) showed "10,588 of 10,638" beside "done" once in `make test`
            # (2026-12-06). The lie this guards against (done after a first chunk, 184 records
            # left) stays on the page until the user acts.
            lying = lying + 1 if sample[2] and line is not None and line[0] < line[1] else 0
            assert lying < 2, f"the sidebar says done while the page counts {line[0]:,} of {line[1]:,}"
            if until(sample):
                return
            page.wait_for_timeout(200)
        raise AssertionError(f"{self.title}: not there in {timeout_s:.0f} s; last seen {samples[-1:]}")


def history(server) -> list[dict]:
    """The jobs the server logged (predicted and actual times), from its pass-rate file."""
    rates = Path(server.cache) / "pass_rates.json"
    return json.loads(rates.read_text()).get("jobs", []) if rates.is_file() else []


def rates(server) -> dict[str, float]:
    """The server's measured seconds per token, per compilation (to read a missed estimate by)."""
    path = Path(server.cache) / "pass_rates.json"
    return {k: v for k, v in json.loads(path.read_text()).items() if isinstance(v, float)} if path.is_file() else {}


def rate_recorded(server, kind: str, timeout_s: float = 120) -> None:
    """Wait until the server's pass-rate file holds a measured rate of ``kind`` passes, in full or
    narrow batches (``pass_cost.is_narrow``: a short set's records may all run in narrow ones)."""
    deadline = time.monotonic() + timeout_s
    while not any(key.endswith((f" {kind}", f" {kind} narrow")) for key in rates(server)):
        assert time.monotonic() < deadline, f"no {kind} rate recorded in {timeout_s:.0f} s: {rates(server)}"
        time.sleep(0.5)


def first_rows(page, job: JobLine, clicked: float, first: int, samples: list) -> float:
    """Seconds from the go-ahead (``clicked``) until the page counts ``first`` units done."""
    job.watch(page, lambda s: s[1] is not None and s[1][0] >= first, samples)
    return samples[-1][0] - clicked


def cancel_resume_finish(page, server, job: JobLine, first_row_s: float, samples: list, logged: int,
                         rates_before: dict[str, float], load_at_start: float) -> None:
    """From the first rows to the end: Cancel a third in, Resume, and the sidebar's done; then the
    bars against what the server logged (``logged``: its jobs before this test's)."""
    job.watch(page, lambda s: s[1] is not None, samples)
    total = samples[-1][1][1]
    job.watch(page, lambda s: s[1] is not None and s[1][0] >= total // 3, samples)  # a third in: cancel
    before = samples[-1][1]
    page.get_by_role("button", name="Cancel").first.click()
    kept = page.get_by_text(re.compile(re.escape(job.title) + r" was cancelled after [\d,]+ of")).first
    kept.wait_for()
    at_cancel = int(re.search(r"after ([\d,]+) of", kept.inner_text()).group(1).replace(",", ""))
    _settle(page)
    page.get_by_role("button", name="Resume").first.click()
    # To the end: the sidebar says done (checked honest on the way). The resumed job's first "about
    # X left" is not waited for: on a fast machine the rest of a short job ends before the page's
    # first draw of it (run 2's 300 s wait); what it said at its start is in the log.
    job.watch(page, lambda s: s[2], samples)
    ended = [e for e in history(server)[logged:] if e["title"] == job.title]  # (not other jobs of the page)
    loads = (round(load_at_start, 2), round(os.getloadavg()[0], 2))
    print(json.dumps({"job": job.title, "first_row_s": round(first_row_s, 1), "before_cancel": before,
                      "at_cancel": at_cancel, "jobs": ended, "rates_before": rates_before, "rates": rates(server),
                      "load_average_start_end": loads, "shared": sharing_reason(*loads)}))
    assert first_row_s < FIRST_ROWS_S, f"the first rows took {first_row_s:.1f} s"
    cancelled, rest = ended[-2:]
    assert cancelled["state"] == "cancelled" and rest["state"] == "done", ended
    # Cancel, then Resume: the time left the resumed job says at its start (its prediction, logged:
    # what the page's "about X left" rounds) against the time left the page said before the cancel,
    # scaled to the units left at the resume. "about X" rounds to 5 s below a minute: a said time
    # under 10 s is compared as 10 s.
    assert before[2] is not None
    left_then = before[2] * (total - at_cancel) / max(total - before[0], 1)
    assert 1 / FACTOR <= max(rest["predicted_s"], 10) / max(left_then, 10) <= FACTOR, (before, at_cancel, rest)
    # The first job (cancelled) said at 10% when it would end; its actual end had it run on is its
    # time to the cancel plus what the resumed job took for the rest.
    said, actual = cancelled["predicted_s_at_tenth"], cancelled["actual_s"] + rest["actual_s"]
    assert said is not None
    if sharing_reason(*loads):
        print(f"the CPU was shared ({sharing_reason(*loads)}): the estimate at 10% against the actual end, "
              f"{actual / said:.2f}, is reported, not asserted")
        return
    assert 1 / FACTOR <= actual / said <= FACTOR, (cancelled, rest, loads)


def forty_targets() -> list:
    """40 real ProteinGym targets of 150-400 residues, in file order (10,638 positions: on the Intel
    Xeon of 2026-12-05 about 30 s on random:tiny, long enough to cancel at a third and resume; the
    first choice, 60-150 residues, 3,268 positions, ended in 5 s there, before the page drew the
    resumed job)."""
    if not TARGETS.is_file():
        pytest.skip(f"the ProteinGym targets are not at {TARGETS}")
    records = [r for r in read_fasta(TARGETS).records if 150 <= len(r.sequence) <= 400][:40]
    assert len(records) == 40
    return records


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
    # The table's entropies first: on a model this server never ran, their first chunk compiles
    # and measures the rate while the page is already drawn (issue 50), and a pseudo-perplexity
    # clicked meanwhile starts with no rate to predict from (nothing logged to check). After the
    # page's run is over (before, its caption may not be drawn yet).
    _settle(page)
    page.wait_for_function("!document.body.innerText.includes('fill in as the records are computed')",
                           timeout=TIMEOUT_MS)
    _settle(page)
    # The entropies' rate is recorded when their last call returns, after its last report filled
    # the table: clicked before, the pseudo-perplexity started with no rate, so no prediction and
    # no logged record of its cancelled part (2026-12-07, load 7.8: only the resumed job logged).
    rate_recorded(server, "unmasked")
    logged, rates_before = len(history(server)), rates(server)
    clicked, load = time.monotonic(), os.getloadavg()[0]
    page.get_by_role("button", name="Compute pseudo-perplexity").click()  # the click is the go-ahead
    job, samples = JobLine(SET_TITLE, "positions"), []
    first = len(records[0].sequence)  # the first record's positions: its value is in once they are
    cancel_resume_finish(page, server, job, first_rows(page, job, clicked, first, samples), samples, logged,
                         rates_before, load)
    page.context.close()


def test_dms_pll_first_rows_estimate_cancel_resume(server, browser, tmp_path):
    """The first 300 rows of the shared NEIME assay (161 residues; 300 x 161 masked passes, and the
    wild type's once), scored with pll on the Variants page: its rows come in chunks of 24 after a
    first row alone (``scoring.CHUNK_ROWS``). The go-ahead is the Start click, or the upload when
    the cost model puts the job under the page's threshold and it starts on its own."""
    if not ASSAY.is_file():
        pytest.skip(f"the shared assay is not at {ASSAY}")
    table = tmp_path / f"neime_first_{DMS_ROWS}.csv"
    table.write_text("".join(ASSAY.read_text().splitlines(keepends=True)[:DMS_ROWS + 1]))
    page = browser.new_context(viewport=VIEWPORT).new_page()
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(f"{server.url}/?page=variants&vinput=dms&vstrategy=pll")
    uploader = page.locator('[data-testid="stFileUploader"]').filter(has_text="DMS table")
    logged, rates_before, load = len(history(server)), rates(server), os.getloadavg()[0]
    uploader.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(str(table))
    uploaded = time.monotonic()
    job, samples = JobLine(DMS_TITLE, "rows"), []
    start = page.get_by_role("button", name=re.compile(r"^Start \(about"))
    first_row_s = None
    deadline = uploaded + TIMEOUT_MS / 1000
    while time.monotonic() < deadline:
        if start.count():  # the page says the cost and waits for Start (after a measuring row, or at once)
            clicked = time.monotonic()
            start.first.click()
            if first_row_s is None:
                first_row_s = first_rows(page, job, clicked, 1, samples)
            break
        line = job.read(page)  # no rate measured yet: the first row alone runs on its own, to measure it
        if first_row_s is None and line is not None and line[0] >= 1:
            first_row_s = time.monotonic() - uploaded
        if first_row_s is not None and line is not None and line[2] is not None:
            break  # estimated under the page's threshold: it started on its own and runs on
        page.wait_for_timeout(200)
    assert first_row_s is not None, "neither a Start button nor a first row came"
    cancel_resume_finish(page, server, job, first_row_s, samples, logged, rates_before, load)
    page.context.close()

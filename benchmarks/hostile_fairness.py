"""The heavy slot under the worst fit (issues #51 row 5, #53 row 1), for benchmarks/hostile_visitor.py
(``fit-and-scan``): a second visitor's 300-residue masked scan timed alone (after a first scan compiled its
shapes; each scan a protein of its own, which the result store has not seen), then another while a
first visitor's fit of 300 sequences with 51 string classes holds the only heavy slot; what each
page says of the queue meanwhile; then the first tab closed mid-fit, and the seconds until the
server logs the job abandoned and its fit worker's process is gone.
"""

from __future__ import annotations

import random
import re
import time

from fit_estimate import classes_table
from hostile_visitor import AMINO, SCAN, Visit, settle

MiB = 2**20
QUEUE_WORDS = re.compile(r"[^\n]*(in line|waiting for a free slot|heavy job)[^\n]*")


def _texts(page, seen: list[str]) -> None:
    """Lines about the queue on ``page`` now, each kept once in the order first seen."""
    try:
        body = page.evaluate("document.body.innerText")
    except Exception:  # noqa: BLE001 - a page mid-rerun
        return
    for match in QUEUE_WORDS.finditer(body):
        line = re.sub(r"waited \d+ s", "waited N s", match.group(0).strip())[:160]
        if line not in seen:
            seen.append(line)


def protein(seed: int) -> str:
    """A 300-residue protein of its own (the result store would answer a scan of one seen before)."""
    return "".join(random.Random(seed).choices(AMINO, k=len(SCAN)))


def scan(v: Visit, sequence: str, watch=None) -> tuple[float, list[str]]:
    """Seconds from the masked-marginals choice to the pseudo-perplexity of ``sequence`` (its whole map)."""
    page = v.open(f"?seq={sequence}&page=predictions")
    seen: list[str] = []
    started = time.monotonic()
    page.get_by_text("masked-marginals — exact").click()
    start, done = page.get_by_role("button", name="Start ("), page.get_by_test_id("stMetric").filter(has_text="Pseudo-perplexity")
    while not done.count():
        if start.count():
            start.first.click()
        _texts(page, seen)
        if watch is not None:
            _texts(watch, seen)
        page.wait_for_timeout(1000)
        assert time.monotonic() - started < 1800, "the scan did not end within 30 minutes"
    return time.monotonic() - started, seen


def fit_and_scan(server, browser, folder) -> dict:
    result: dict = {}
    alone = Visit(server, browser, folder)
    result["scan_first_s"] = round(scan(alone, SCAN)[0], 1)  # its shapes compiled
    result["scan_alone_s"] = round(scan(alone, protein(1))[0], 1)
    alone.close()

    first = Visit(server, browser, folder)
    table = folder / "classes51.csv"
    table.write_bytes(classes_table(300, 60, 51))
    page = first.open("?page=predict")
    first.go()
    first.upload(page, [table], "Labelled table")
    estimate = page.get_by_text("Fitting: ", exact=False).first
    estimate.wait_for()
    result["fit_estimate"] = estimate.inner_text()[:240]
    settle(page)
    page.get_by_role("button", name="Fit the predictor").click()
    clicked = time.monotonic()
    fitting = page.get_by_text(re.compile(r"\d+ of \d+ scikit-learn fits")).first
    fitting.wait_for()
    result["fit_fits_started_after_s"] = round(time.monotonic() - clicked, 1)
    result["fit_progress_when_scan_starts"] = fitting.inner_text()[:160]

    second = Visit(server, browser, folder)
    shared_s, seen = scan(second, protein(2), watch=page)
    result["scan_during_fit_s"], result["queue_lines_seen"] = round(shared_s, 1), seen[:12]
    result["fit_progress_when_scan_ends"] = fitting.inner_text()[:160] if fitting.count() else None
    second.close()

    workers = server.workers()
    log_before = server.log.read_text().count("heavy job abandoned (Fitting")
    first.close()  # the tab closes mid-fit
    closed = time.monotonic()
    abandoned = gone = None
    while time.monotonic() - closed < 300 and (abandoned is None or gone is None):
        if abandoned is None and server.log.read_text().count("heavy job abandoned (Fitting") > log_before:
            abandoned = time.monotonic() - closed
        if gone is None and not any(pid in server.workers() for pid in workers):
            gone = time.monotonic() - closed
        time.sleep(0.2)
    time.sleep(10)
    result.update(workers_when_closed=len(workers), abandoned_logged_after_close_s=abandoned and round(abandoned, 1),
                  worker_gone_after_close_s=gone and round(gone, 1), rss_before_mib=round(first.before / MiB),
                  peak_mib=round(server.peak / MiB), children_peak_mib=round(server.children_peak / MiB),
                  after_close_mib=round(server.rss() / MiB))  # fmt: skip
    return result

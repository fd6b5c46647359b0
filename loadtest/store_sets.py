"""The result store on a real set: 186 ProteinGym target proteins (../shared/fasta/proteingym_targets.fa)
through a local server in headless Chromium, Records -> Embeddings -> restart -> Records, timed;
then the store's size and how many lookups per second it answers.

Run: `.venv/bin/python loadtest/store_sets.py [--model random:tiny] [--runs 3]` (needs Debian's
chromium; a few minutes on the untrained model). Prints a markdown table for docs/reliability.md
and the machine's load average, which says whether the timings were taken on a shared machine.
Each run starts from an empty FLAMINO_CACHE.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
import kind_folders  # noqa: E402,F401  (the test folders on the path: test modules' helpers)

from test_browser import CHROMIUM, _nav, _wait_for_charts  # noqa: E402
from test_browser_sets import Server, records_done, upload_targets  # noqa: E402

TIMEOUT_MS = 1_800_000


def records(page) -> float:
    started = time.monotonic()
    _nav(page, "Records").click()
    page.wait_for_url("**/records*")
    page.locator('[data-testid="stDataFrame"]').wait_for()
    records_done(page, timeout_ms=TIMEOUT_MS)
    return time.monotonic() - started


def one_run(browser, model: str, folder: Path) -> dict[str, float]:
    cache = folder / "cache"
    first = Server(cache, folder / "first.calls", folder / "first.log", model)
    try:
        page = upload_targets(browser, first)
        times = {"records": records(page)}
        started = time.monotonic()
        _nav(page, "Embeddings").click()
        page.wait_for_url("**/embeddings*")
        _wait_for_charts(page, 3)
        times["embeddings"] = time.monotonic() - started
        page.context.close()
    finally:
        first.stop()
    started = time.monotonic()
    second = Server(cache, folder / "second.calls", folder / "second.log", model)
    try:
        times["restart"] = time.monotonic() - started
        page = upload_targets(browser, second)
        times["records_after_restart"] = records(page)
        page.context.close()
    finally:
        second.stop()
    times.update(store_figures(cache, model))
    return times


def store_figures(cache: Path, model: str) -> dict[str, float]:
    """The store's size, and lookups per second of what the pages read: a record's entropy (one
    output) and one masked position."""
    os.environ["FLAMINO_CACHE"] = str(cache)
    from flamino_core import Engine, load_weights
    from flamino_core.store import passes
    from flamino_core.inputs.fasta import read_fasta
    from flamino_core.store.result_store import ResultStore

    store = ResultStore(cache / "results.sqlite")
    stats = store.stats()
    engine = Engine(load_weights(model))
    from test_browser_sets import TARGETS

    sequences = [r.sequence for r in read_fasta(TARGETS).records]
    n = engine.config.num_layers
    names = [passes.output_names(n, len(s), "window", False)[n + 1] for s in sequences]
    rounds, started = 5, time.monotonic()
    for _ in range(rounds):
        for sequence, name in zip(sequences, names):
            assert name in store.outputs(engine.fingerprint, sequence, [name])
    output_rate = rounds * len(sequences) / (time.monotonic() - started)
    passes.masked_log_probs(engine, sequences[0], range(64), store=store)  # something to look up
    started, count = time.monotonic(), 0
    while time.monotonic() - started < 3:
        store.masked(engine.fingerprint, sequences[0], [count % 64])
        count += 1
    return {"store_entries": stats.entries, "store_value_bytes": stats.value_bytes, "store_file_bytes": stats.file_bytes,
            "output_lookups_per_s": output_rate, "masked_lookups_per_s": count / (time.monotonic() - started)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="random:tiny")
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    load_before = os.getloadavg()
    results = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox", "--disable-gpu"])
        for run in range(args.runs):
            folder = Path(tempfile.mkdtemp(prefix="flamino-store-sets-"))
            try:
                results.append(one_run(browser, args.model, folder))
            finally:
                shutil.rmtree(folder, ignore_errors=True)
            print(f"run {run + 1}: {results[-1]}", file=sys.stderr)
        browser.close()
    load_after = os.getloadavg()
    median = {key: statistics.median(r[key] for r in results) for key in results[0]}
    print(f"model {args.model}, {args.runs} run(s), median; load average {load_before[0]:.1f} before, "
          f"{load_after[0]:.1f} after, on {os.cpu_count()} CPUs")
    print("| step | time |\n|---|---|")
    for key, label in [("records", "Records (186 records, empty store)"), ("embeddings", "then Embeddings"),
                       ("restart", "server restart (to healthy)"), ("records_after_restart", "Records again, after the restart")]:
        print(f"| {label} | {median[key]:.1f} s |")
    print(f"\nstore: {median['store_entries']:.0f} entries, {median['store_value_bytes'] / 1e6:.1f} MB of values, "
          f"{median['store_file_bytes'] / 1e6:.1f} MB on disk; {median['output_lookups_per_s']:,.0f} output lookups/s, "
          f"{median['masked_lookups_per_s']:,.0f} masked-position lookups/s")


if __name__ == "__main__":
    main()

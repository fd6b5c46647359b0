"""The hostile-visitor run of issues #51 and #53 against a live hosted server.

    .venv/bin/python benchmarks/hostile_visitor.py [ATTACK ...] [--out FILE.jsonl]

Starts ``streamlit run app.py`` as docs/deploy.md sets a hosted server (``FLAMINO_HOSTED=1``, a
2 MB upload cap, the default single heavy slot) on the untrained 8M model (the same shapes as
``esm2_t6_8M_UR50D`` without a download), then replays each attack row of the two issues in
headless Chromium (``/usr/bin/chromium``), or with raw requests where the row is about raw
requests (``flood``: benchmarks/upload_flood.py). For each attack it prints one JSON line: the
seconds from the hostile action to the page's answer (a refusal or a plan), the server process's
peak resident memory meanwhile (and its children's: a fit's worker), and its memory 10 s after
the attack's tabs closed, with the 1-minute load average (this machine is shared). The files are
generated small, as the tests make them (``tests/hostile_files.py``). ATTACK is one of ``ATTACKS``
or ``EXTRA``; none: all, in that order. ``--app-root DIR`` serves another tree (a "before").
``flood-addresses`` (30 visitors by forged ``X-Forwarded-For``, on a server trusting that header)
and ``fit-rate`` (a server restarted within the row) each start a server of their own.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "benchmarks")]
import kind_folders  # noqa: E402,F401  (the test folders on the path: test modules' helpers)

import hostile_files  # noqa: E402
from fit_estimate import classes_table  # noqa: E402
from test_browser import CHROMIUM, _free_port, stop_server  # noqa: E402

MODEL = "random:esm2_t6_8M_UR50D"
ANSWER_MS = int(os.environ.get("ANSWER_MS", 600_000))  # a page's answer may take this long before it counts as never
AFTER_S = 10.0  # memory "after" is read this long after the attack's tabs closed
AMINO = "ACDEFGHIKLMNPQRSTVWY"
RECORD = "".join(random.Random(53).choices(AMINO, k=2_000))  # tests/unit/test_hosted_attacks_indels.py's record
SCAN = "".join(random.Random(300).choices(AMINO, k=300))  # the second visitor's 300-residue protein
MiB = 2**20


class Server:
    """The hosted server, its log, and its memory sampled every 0.2 s (itself and its children)."""

    def __init__(self, folder: Path, app_root: Path = ROOT, env: dict | None = None):
        self.log, port, self.app_root = folder / "streamlit.log", _free_port(), app_root
        env = {**os.environ, "FLAMINO_HOSTED": "1", "FLAMINO_MODEL": MODEL, "FLAMINO_HOSTED_MODELS": "",
               "FLAMINO_CACHE": str(folder / "cache"), "HF_HUB_OFFLINE": "1", **(env or {})}
        with self.log.open("w") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
                 "--server.port", str(port), "--server.address", "127.0.0.1", "--server.maxUploadSize", "2"],
                cwd=app_root, env=env, stdout=out, stderr=subprocess.STDOUT)  # fmt: skip
        self.url, self.ps = f"http://127.0.0.1:{port}", psutil.Process(self.process.pid)
        self.peak = self.children_peak = 0
        self._stop = threading.Event()
        deadline = time.monotonic() + 180
        while "Local URL" not in self.log.read_text() and "You can now view" not in self.log.read_text():
            if self.process.poll() is not None or time.monotonic() > deadline:
                sys.exit(f"streamlit did not start:\n{self.log.read_text()}")
            time.sleep(0.5)
        threading.Thread(target=self._sample, daemon=True).start()

    def rss(self) -> int:
        return self.ps.memory_info().rss

    def children_rss(self) -> int:
        total = 0
        for child in self.ps.children(recursive=True):
            try:
                total += child.memory_info().rss
            except psutil.Error:
                pass
        return total

    def _sample(self) -> None:
        while not self._stop.wait(0.2):
            try:
                self.peak, self.children_peak = max(self.peak, self.rss()), max(self.children_peak, self.children_rss())
            except psutil.Error:
                return

    def reset(self) -> None:
        self.peak, self.children_peak = self.rss(), self.children_rss()

    def workers(self) -> list[int]:
        return [c.pid for c in self.ps.children(recursive=True) if "flamino_core.predictors.worker" in " ".join(c.cmdline())]

    def warm(self, browser) -> None:
        """A first visitor's page, then its memory left to settle (within 8 MiB over 10 s, at most
        180 s): the model loaded and compiled, as for any later visitor. The page draws before its
        first pass is in (#50), so closing it at once left the load to the first attack (a flood
        counted the model's ~300 MiB as the uploads')."""
        warm = Visit(self, browser, self.log.parent)
        warm.open(f"?seq={RECORD[:60]}&page=predictions")
        started, seen = time.monotonic(), [self.rss()]
        while time.monotonic() - started < 180:
            time.sleep(2)
            seen.append(self.rss())
            if len(seen) > 5 and max(seen[-6:]) - min(seen[-6:]) < 8 * MiB:
                break
        warm.close()

    def stop(self) -> None:
        self._stop.set()
        stop_server(self.process)


class Visit:
    """One attack: the tabs it opens, the clock from its hostile action, what it measured."""

    def __init__(self, server: Server, browser, folder: Path):
        self.server, self.browser, self.folder = server, browser, folder
        self.contexts, self.started, self.notes = [], None, {}

    def open(self, tail: str):
        context = self.browser.new_context(viewport={"width": 1400, "height": 2000})
        self.contexts.append(context)
        page = self.last = context.new_page()
        page.set_default_timeout(ANSWER_MS)
        page.goto(f"{self.server.url}/{tail}")
        settle(page)
        return page

    def go(self) -> None:
        """The hostile action starts now: the clock and the memory peaks start here."""
        self.server.reset()
        self.before, self.started = self.server.rss(), time.monotonic()

    def answer(self, page, pattern: str) -> str:
        """The first text of the page's HTML (a message, or a cell of a table the grid keeps
        hidden) that matches ``pattern``, waited for; the seconds to it are the attack's."""
        wanted = re.compile(pattern)  # alone: with [^<>]* around it the search was quadratic in a big text box
        while time.monotonic() - self.started < ANSWER_MS / 1000:
            html = page.content()
            found = wanted.search(html)
            if found:
                self.notes["answer_s"] = round(time.monotonic() - self.started, 2)
                start, end = html.rfind(">", 0, found.start()) + 1, html.find("<", found.end())
                return html[max(start, found.start() - 200):end if end >= 0 else found.end()].strip()[:200]
            page.wait_for_timeout(200)
        raise TimeoutError(f"no {pattern!r} on the page in {ANSWER_MS / 1000:.0f} s")

    def upload(self, page, files, uploader: str | None = None) -> None:
        box = page.locator('[data-testid="stFileUploader"]')
        box = box.filter(has_text=uploader) if uploader else box
        box.locator('input[type="file"]').first.set_input_files([str(f) for f in files])

    def close(self) -> None:
        for context in self.contexts:
            context.close()
        self.contexts = []


def settle(page) -> None:
    page.wait_for_timeout(500)
    page.wait_for_selector('[data-testid="stStatusWidget"]', state="detached", timeout=ANSWER_MS)
    page.wait_for_timeout(300)


def paste_list(v: Visit, seq: str, entries: str, answer: str, strategy: str = "pll") -> str:
    """A mutation list given on the Variants page: typed into the box when short; a long one (the
    indel attacks: 250 kB-1 MB) through the page's list upload, whose text the server puts in the
    box (filling the box with 20,000 lines kept Chromium's own renderer busy for minutes)."""
    page = v.open(f"?seq={seq}&page=variants&vstrategy={strategy}")
    box = page.get_by_label("Variants: one per line", exact=False)
    if len(entries) < 10_000:
        box.fill(entries)
        v.go()
        box.press("Control+Enter")
    else:
        listed = v.folder / "list.txt"
        listed.write_text(entries)
        v.go()
        v.upload(page, [listed])  # the list mode's one uploader
    return v.answer(page, answer)


# --- the attacks: each returns the page's answer --------------------------------------------------------------
def predict_wide_row(v):
    page = v.open("?page=predict")
    v.go()
    v.upload(page, [hostile_files.wide_row_table(v.folder)], "Labelled table")
    return v.answer(page, "has 990,001 fields")


def dms_commas(v):
    page = v.open("?page=variants&vinput=dms")
    v.go()
    v.upload(page, [hostile_files.comma_table(v.folder)], "DMS table")
    return v.answer(page, "has 60,001 fields")


def metadata_commas(v):
    page = v.open("")
    page.get_by_label("FASTA or sequence").fill("".join(f">r{i}\n{RECORD[i * 40:i * 40 + 60]}\n" for i in range(6)))
    page.get_by_label("FASTA or sequence").press("Control+Enter")
    settle(page)
    page.locator('[data-testid="stSidebarNavLink"]').filter(has_text="Embeddings").click()
    page.get_by_text("Colour by your own table").first.wait_for()
    settle(page)
    v.go()
    v.upload(page, [hostile_files.comma_table(v.folder, "id,taxon")], "Metadata table")
    return v.answer(page, "has 60,001 fields")


def mmcif_chains(v):
    page = v.open("")
    v.go()
    v.upload(page, [hostile_files.many_chains_mmcif(v.folder)])
    return v.answer(page, "has 15,000 chains")


def mmcif_78000_atoms_x10(v):
    one = hostile_files.large_mmcif(v.folder).read_bytes()
    copies = []
    for k in range(10):  # the hosted Input page takes 10 files at a time (the issue sent 16)
        copies.append(v.folder / f"copy{k}.cif.gz")
        copies[-1].write_bytes(one)
    page = v.open("")
    v.go()
    v.upload(page, copies)
    return v.answer(page, r"copy9\.cif\.gz ·")


def dms_cr_only(v):
    table = v.folder / "1E0L_cr_only.csv"
    table.write_bytes((ROOT / "tests/data/dms/TCRG1_MOUSE_Rocklin_2023_1E0L.csv").read_bytes().replace(b"\n", b"\r"))
    page = v.open("?page=variants&vinput=dms")
    v.go()
    v.upload(page, [table], "DMS table")
    return v.answer(page, r"1,058|columns")


def mutations_200000(v):
    page = v.open(f"?page=variants&seq={hostile_files.MUTATED}")
    v.go()
    v.upload(page, [hostile_files.valid_mutations(v.folder)])
    text = v.answer(page, "has 200,000 entries")
    settle(page)
    v.notes["none_of_the_1_entries_shown"] = page.get_by_text("None of the 1 entries").count() > 0
    return text


def unicode_digits(v):
    return paste_list(v, RECORD[:60], "M１A\nM𝟏A\nA١٢C\n", "not one of the digits", "masked-marginals")


def _indels(kind: str):
    def attack(v):
        from test_hosted_attacks_indels import _hostile

        return paste_list(v, RECORD, _hostile(kind) + "\n", r"Pass plan|needs at least|[Nn]othing to run|this server (reads|scores|takes)|too long")
    return attack


def fasta_headers(v):
    rng = random.Random(53)
    records = "".join(">r%d %s\n%s\n" % (i, " ".join(f"k{i}_{j}={rng.choice(['x', '1', ''])}" for j in range(60))[:300],
                                           "".join(rng.choices(AMINO, k=80))) for i in range(100))  # fmt: skip
    page = v.open("")
    box = page.get_by_label("FASTA or sequence")
    box.fill(records)
    v.go()
    box.press("Control+Enter")
    settle(page)
    page.locator('[data-testid="stSidebarNavLink"]').filter(has_text="Records").click()
    page.locator('[data-testid="stDataFrame"]').first.wait_for()
    v.notes["answer_s"] = round(time.monotonic() - v.started, 2)
    settle(page)
    log = v.server.log.read_text()
    v.notes["arrow_tracebacks_in_log"] = log.count("ArrowInvalid") + log.count("ArrowTypeError")
    return "the Records table drawn"


ATTACKS = {
    "predict-wide-row": ("#51 High", predict_wide_row),
    "dms-commas": ("#51 Medium", dms_commas),
    "metadata-commas": ("#51 Medium", metadata_commas),
    "mmcif-78000-atoms-x10": ("#51 Medium", mmcif_78000_atoms_x10),
    "mmcif-15000-chains": ("#51 Medium / #53 Low", mmcif_chains),
    "indels-large-dups": ("#51 to measure / #53 High", _indels("large duplications")),
    "indels-long-insertions": ("#51 to measure", _indels("long insertions")),
    "indels-long-delins": ("#51 to measure", _indels("long delins")),
    "indels-multi-allele-dups": ("#51 to measure", _indels("multi-allele duplications")),
    "unicode-digits": ("#51 to measure / #53 Low", unicode_digits),
    "dms-cr-only": ("#53 Low", dms_cr_only),
    "mutations-200000": ("#53 Low", mutations_200000),
    "fasta-headers": ("#53 Low", fasta_headers),
}
# benchmarks/hostile_fairness.py, upload_flood.py (one address; many), hostile_fit_rate.py
EXTRA = ("fit-and-scan", "flood", "flood-addresses", "fit-rate")


def run(name: str, server: Server, browser, out) -> None:
    folder = Path(tempfile.mkdtemp(prefix=f"hv-{name}-"))
    load = os.getloadavg()[0]
    if name == "flood":  # in a thread of its own: Playwright's sync API holds this thread's event loop
        import asyncio
        from concurrent.futures import ThreadPoolExecutor

        from upload_flood import flood

        attack = flood(server.url, server.process.pid, 30, 16, 2_000_000, 300.0)
        with ThreadPoolExecutor(1) as pool:
            line = {"attack": name, "row": "#53 Medium", **pool.submit(asyncio.run, attack).result()}
    elif name == "flood-addresses":  # 30 visitors by forged X-Forwarded-For, on a server that trusts the header
        import asyncio
        from concurrent.futures import ThreadPoolExecutor

        from upload_flood import flood

        trusting = Server(folder, server.app_root, {"FLAMINO_VISITOR_HEADER": "X-Forwarded-For"})
        try:
            trusting.warm(browser)
            attack = flood(trusting.url, trusting.process.pid, 30, 16, 2_000_000, 120.0, forged=True)
            with ThreadPoolExecutor(1) as pool:
                line = {"attack": name, "row": "#53 item 4", **pool.submit(asyncio.run, attack).result()}
            line["refusals_logged"] = trusting.log.read_text().count("upload refused")
        finally:
            trusting.stop()
    elif name == "fit-and-scan":
        from hostile_fairness import fit_and_scan

        line = {"attack": name, "row": "#51 to measure / #53 High", **fit_and_scan(server, browser, folder)}
    elif name == "fit-rate":  # a server of its own (a fresh cache), restarted within the row
        from hostile_fit_rate import fit_rate

        line = {"attack": name, "row": "#53 Medium", **fit_rate(folder, browser)}
    else:
        row, attack = ATTACKS[name]
        v = Visit(server, browser, folder)
        try:
            answer = attack(v)
        except Exception as err:  # noqa: BLE001 - a run goes on to the next attack, saying what failed
            answer = f"FAILED: {type(err).__name__}: {str(err)[:300]}"
            if getattr(v, "last", None) is not None:
                v.last.screenshot(path=str(folder / "failed.png"), full_page=True)
                answer += f" (screenshot {folder / 'failed.png'})"
        peak, children = server.peak, server.children_peak
        v.close()
        time.sleep(AFTER_S)
        line = {"attack": name, "row": row, "answer": answer, **v.notes,
                "rss_before_mib": round(getattr(v, "before", 0) / MiB), "peak_mib": round(peak / MiB),
                "children_peak_mib": round(children / MiB), "after_close_mib": round(server.rss() / MiB)}
    line["load_1min"] = round(load, 1)
    print(json.dumps(line), flush=True)
    if out:
        with open(out, "a") as handle:
            handle.write(json.dumps(line) + "\n")


def main() -> None:
    from playwright.sync_api import sync_playwright

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("attacks", nargs="*", help=f"any of {', '.join([*ATTACKS, *EXTRA])} (none: all)")
    parser.add_argument("--out", help="append each JSON line to this file too")
    parser.add_argument("--app-root", type=Path, default=ROOT,
                        help="serve another tree's app.py (git archive COMMIT | tar -x -C DIR): a 'before'")
    args = parser.parse_args()
    unknown = set(args.attacks) - {*ATTACKS, *EXTRA}
    if unknown:
        parser.error(f"unknown attacks {sorted(unknown)}")
    server = Server(Path(tempfile.mkdtemp(prefix="hv-server-")), args.app_root)
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM))
            server.warm(browser)
            for name in args.attacks or [*ATTACKS, *EXTRA]:
                run(name, server, browser, args.out)
            browser.close()
        print(json.dumps({"server_log_tracebacks": server.log.read_text().count("Traceback")}))
    finally:
        server.stop()


if __name__ == "__main__":
    main()

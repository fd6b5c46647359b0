"""The review's upload attacks (issue #26) against a real hosted server, driven by headless
Chromium, while a thread polls ``/_stcore/health`` and samples the server's memory.

Done when (#26): the health endpoint answers within 2 s throughout each attack, and the server's
peak resident memory stays under 2 GB per upload attack, on the 8M model (here its untrained
copy, ``random:esm2_t6_8M_UR50D``: the same shapes and memory without a download). The
figures each attack measured are printed (``-s``) and recorded in docs/reliability.md.

These are the only timed assertions of the suite, and they are the issue's own bar: the old
code failed them by minutes (a 40 kB list: three 30 s health-check time-outs) and gigabytes
(3.2 GB and 7.2 GB peaks), not by a margin a busy machine could explain. Marked ``browser`` (a
real server and Chromium) and ``slow``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

import hostile_files
from test_browser import CHROMIUM, ROOT, _free_port, stop_server

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs /usr/bin/chromium (apt-get install chromium)"),
]

STRUCTURES = ROOT.parent / "shared" / "structures"
HEALTH_SECONDS = 2.0  # the bar for /_stcore/health during an attack
PEAK_BYTES = 2 * 1024**3  # the bar for the server's resident memory during an upload attack
ANSWER_MS = 600_000  # the page's answer to an attack (a refusal) may take this long on a busy machine
MODEL = "random:esm2_t6_8M_UR50D"


@pytest.fixture(scope="module")
def hosted_server(tmp_path_factory):
    """``streamlit run app.py`` in hosted mode on the 8M model, on a free 127.0.0.1 port."""
    port = _free_port()
    env = {**os.environ, "FLAMINO_HOSTED": "1", "FLAMINO_MODEL": MODEL, "FLAMINO_HOSTED_MODELS": "",
           "FLAMINO_CACHE": str(tmp_path_factory.mktemp("flamino-cache")), "HF_HUB_OFFLINE": "1"}
    log = tmp_path_factory.mktemp("server") / "streamlit.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
             "--server.port", str(port), "--server.address", "127.0.0.1", "--server.maxUploadSize", "2"],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while _health(url, timeout=2) is None:
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"streamlit did not start:\n{log.read_text()}")
            time.sleep(0.5)
        process.url, process.log = url, log
        yield process
    finally:
        stop_server(process)


def _health(url: str, timeout: float) -> float | None:
    """Seconds ``/_stcore/health`` took to answer 200, or None."""
    started = time.monotonic()
    try:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=timeout) as response:
            return time.monotonic() - started if response.status == 200 else None
    except OSError:
        return None


class Watch:
    """While an attack runs: the slowest health answer (a failed one counts as its time-out) and
    the server's peak resident memory, sampled every 0.25 s."""

    def __init__(self, server):
        import psutil

        self.server, self.process = server, psutil.Process(server.pid)
        self.slowest, self.peak, self.checks = 0.0, 0, 0
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._health), threading.Thread(target=self._memory)]

    def _health(self) -> None:
        while not self._stop.is_set():
            took = _health(self.server.url, timeout=30)
            self.slowest = max(self.slowest, 30.0 if took is None else took)
            self.checks += 1
            self._stop.wait(0.25)

    def _memory(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.process.memory_info().rss)
            self._stop.wait(0.25)

    def __enter__(self):
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()


def _attack(server, browser, url_tail: str, file: Path, answer: str, uploader: int = 0, before=None):
    """Open ``url_tail``, upload ``file`` into the page's ``uploader``-th file input and wait for
    ``answer`` on the page; returns the Watch of that attack."""
    context = browser.new_context(viewport={"width": 1400, "height": 2000})
    page = context.new_page()
    page.set_default_timeout(ANSWER_MS)
    page.goto(f"{server.url}/{url_tail}")
    page.locator('[data-testid="stFileUploader"]').nth(uploader).wait_for()
    if before is not None:
        before(page)
    with Watch(server) as watch:
        page.locator('[data-testid="stFileUploader"] input[type="file"]').nth(uploader).set_input_files(str(file))
        page.get_by_text(answer).first.wait_for()
    context.close()
    return watch


def _report(name: str, watch: Watch, file: Path) -> None:
    print(f"\n#26 {name}: upload {file.stat().st_size / 1e3:,.0f} kB; slowest /_stcore/health "
          f"{watch.slowest:.2f} s over {watch.checks} checks; server peak RSS {watch.peak / 2**20:,.0f} MiB")
    assert watch.checks >= 1
    assert watch.slowest < HEALTH_SECONDS, f"{name}: /_stcore/health took {watch.slowest:.1f} s"
    assert watch.peak < PEAK_BYTES, f"{name}: the server peaked at {watch.peak / 2**30:.2f} GiB"


def test_the_mutation_list_of_digits(hosted_server, browser, tmp_path):
    """Item 1: 1 MB of digits as the mutation list (a 40 kB one cost three 30 s health time-outs)."""
    file = hostile_files.digits(tmp_path)
    watch = _attack(hosted_server, browser, "?page=variants&seq=MKVLAAGIVGLLLAAQPAMA", file,
                    "None of the 1 entries can be scored")
    _report("mutation list of 999,000 digits", watch, file)


def test_the_gzipped_fasta_bomb(hosted_server, browser, tmp_path):
    """Item 2: a 260 kB gzipped FASTA inflating to 256 MiB (peak 7.2 GB for 56 s, then refused)."""
    file = hostile_files.fasta_bomb(tmp_path)  # 270 MB of two-letter lines
    watch = _attack(hosted_server, browser, "", file, "decompresses to more than")
    _report("gzipped FASTA bomb", watch, file)


@pytest.mark.skipif(not STRUCTURES.is_dir(), reason=f"real structures not found at {STRUCTURES}")
def test_the_multi_model_structure_bomb(hosted_server, browser, tmp_path):
    """Item 2: a 981 kB gzipped PDB of 1.35 M atoms (47.7 s, peak 3.2 GB, 1.6 GB kept per file)."""
    file = hostile_files.structure_bomb(tmp_path, STRUCTURES / "2BEG.pdb")
    watch = _attack(hosted_server, browser, "?page=structure&seq=DAEFRHDSGYEVHHQKLVFFAEDVGSNKGAIIGLMVGGVVIA",
                    file, "decompresses to more than")
    _report("multi-model structure bomb", watch, file)


def test_the_dms_table_of_a_100000_residue_wild_type(hosted_server, browser, tmp_path):
    """Item 3: a 990 kB DMS table deriving a 100,000-residue wild type (a 554 MB result message,
    peak 3.6 GB)."""
    file = hostile_files.long_wild_type_dms(tmp_path)
    watch = _attack(hosted_server, browser, "?page=variants&vinput=dms", file, "has 100,000 residues")
    _report("DMS table, 100,000-residue wild type", watch, file)


def test_the_server_is_healthy_after_the_attacks(hosted_server):
    assert _health(hosted_server.url, timeout=5) is not None
    assert "Traceback" not in hosted_server.log.read_text()


# --- issue #33: the Predict page and the last open doors -------------------------------------------------------
GROWTH_BYTES = 300 * 2**20  # #33's bar: the server's resident memory may grow less than this during an attack


def _rss(server) -> int:
    import psutil

    return psutil.Process(server.pid).memory_info().rss


def _attack_growth(server, browser, url_tail: str, file: Path, answer: str, name: str) -> None:
    """``_attack``, with the server's memory once the page has drawn (its model loaded and
    compiled): #33's bars are growth and health."""
    rss = []

    def settled(page):
        page.wait_for_timeout(500)
        page.wait_for_selector('[data-testid="stStatusWidget"]', state="detached")
        rss.append(_rss(server))

    watch = _attack(server, browser, url_tail, file, answer, before=settled)
    before = rss[0]
    growth = watch.peak - before
    print(f"\n#33 {name}: RSS before {before / 2**20:,.0f} MiB, growth {growth / 2**20:,.0f} MiB")
    _report(name, watch, file)
    assert growth < GROWTH_BYTES, f"{name}: the server grew {growth / 2**20:,.0f} MiB"


def test_the_labelled_table_of_a_50000_residue_wild_type(hosted_server, browser, tmp_path):
    """High 1: one 50,000-residue mutated_sequence, then 4,000 rows A1C,,k (78 kB): +440 MiB before
    its refusal, every row built as the whole wild type first."""
    file = hostile_files.long_wild_type_labels(tmp_path, rows=4_000)
    _attack_growth(hosted_server, browser, "?page=predict", file, "has 50,000 residues",
                   "labelled table, 50,000-residue wild type")


def test_the_labelled_table_of_40000_rows(hosted_server, browser, tmp_path):
    """High 1: the same with 40,000 rows (330 kB): 0.86 to 4.1 GiB in 109 s."""
    file = hostile_files.long_wild_type_labels(tmp_path)
    _attack_growth(hosted_server, browser, "?page=predict", file, "has 40,001 rows", "labelled table, 40,001 rows")


def test_the_labelled_table_of_960000_columns(hosted_server, browser, tmp_path):
    """Medium: 960 kB of commas (302 s before the target picker, health up to 5.9 s, +760 MiB)."""
    file = hostile_files.wide_table(tmp_path)
    _attack_growth(hosted_server, browser, "?page=predict", file, "has 960,001 columns",
                   "labelled table, 960,001 columns")


def test_the_fit_of_6000_duplicate_rows(hosted_server, browser, tmp_path):
    """High 2: 6,000 copies of one mutant (60 kB), "1 of 1 passes", then 49 minutes of fitting
    in the only heavy-job slot: now costed by its fits and refused before any work."""
    file = hostile_files.duplicate_rows(tmp_path)
    _attack_growth(hosted_server, browser, "?page=predict", file, "learns from 6,000 rows",
                   "fit of 6,000 duplicate rows")


def test_a_mutation_list_of_200000_valid_entries(hosted_server, browser, tmp_path):
    """Low: 200,000 valid mutations (~900 kB): scored in 90-200 s, +250 MiB kept per session."""
    file = hostile_files.valid_mutations(tmp_path)
    _attack_growth(hosted_server, browser, f"?page=variants&seq={hostile_files.MUTATED}", file,
                   "has 200,000 entries", "mutation list of 200,000 entries")


def test_a_flood_of_uploads_into_ones_own_session(hosted_server, browser, tmp_path):
    """Medium: 150 PUTs of 2 MB to /_stcore/upload_file/<own session>/... were all kept (+297 MiB)
    until the session expired. Streamlit's store now keeps the newest 16 files of a hosted session (and
    the app drops those no widget holds); the rate of PUTs is the proxy's to limit (deploy.md)."""
    table = tmp_path / "small.csv"
    table.write_text("mutant,y\nA1C,1\n")
    context = browser.new_context(viewport={"width": 1400, "height": 2000})
    page = context.new_page()
    page.set_default_timeout(ANSWER_MS)
    puts = []
    page.on("request", lambda r: puts.append(r) if r.method == "PUT" and "/_stcore/upload_file/" in r.url else None)
    page.goto(f"{hosted_server.url}/?page=predict")
    page.locator('[data-testid="stFileUploader"] input[type="file"]').first.set_input_files(str(table))
    page.get_by_text("Target: the column to predict").first.wait_for()  # the upload went through
    page.wait_for_timeout(500)
    page.wait_for_selector('[data-testid="stStatusWidget"]', state="detached")
    session = puts[0].url.split("/_stcore/upload_file/", 1)[1].split("/", 1)[0]
    token = puts[0].headers.get("x-xsrftoken", "")
    payload = b"x" * 2_000_000
    before = _rss(hosted_server)
    with Watch(hosted_server) as watch:
        for n in range(150):
            response = page.request.put(
                f"{hosted_server.url}/_stcore/upload_file/{session}/flood-{n}", headers={"X-Xsrftoken": token},
                multipart={"file": {"name": f"flood-{n}.bin", "mimeType": "application/octet-stream",
                                    "buffer": payload}})
            assert response.status == 204, response.status  # Streamlit takes each: the proxy must limit them
    kept = _rss(hosted_server) - before
    context.close()
    print(f"\n#33 upload flood: 150 x 2 MB; RSS before {before / 2**20:,.0f} MiB, peak growth "
          f"{(watch.peak - before) / 2**20:,.0f} MiB, kept {kept / 2**20:,.0f} MiB; slowest health {watch.slowest:.2f} s")
    assert watch.slowest < HEALTH_SECONDS
    assert watch.peak - before < GROWTH_BYTES and kept < 100 * 2**20  # was 300 MB kept


# --- issue #51: rows wider than their header, and structures past their chain cap ------------------------------
def test_a_labelled_table_row_of_990000_commas(hosted_server, browser, tmp_path):
    """High: a 3-column header and one row of 990,000 commas (990 kB): still parsing after 901 s
    at 8.25 GB; the column cap read the header only."""
    file = hostile_files.wide_row_table(tmp_path)
    _attack_growth(hosted_server, browser, "?page=predict", file, "has 990,001 fields",
                   "labelled table, a row of 990,000 commas")


def test_a_dms_table_of_60_kb_of_commas(hosted_server, browser, tmp_path):
    """Medium: 60 kB of commas in one row of a DMS table (35 s of page work)."""
    file = hostile_files.comma_table(tmp_path)
    _attack_growth(hosted_server, browser, "?page=variants&vinput=dms", file, "has 60,001 fields",
                   "DMS table, a row of 60,000 commas")


def test_an_mmcif_of_15000_chains(hosted_server, browser, tmp_path):
    """Medium: an mmCIF of 15,000 one-atom chains (0.77 MB) on the Input page (12 s of page work)."""
    file = hostile_files.many_chains_mmcif(tmp_path)
    _attack_growth(hosted_server, browser, "", file, "has 15,000 chains", "mmCIF of 15,000 chains")


# --- issue #51 item 5: the one heavy slot shared while a fit runs, and a closed tab's fit stopped ---------------
CLOSED_TAB_S = 30.0  # the bar: a closed tab's heavy job stops within this
SCANNED = "".join(__import__("random").Random(51).choices("ACDEFGHIKLMNPQRSTVWY", k=80))  # the second visitor's protein


def _worker_pids(server) -> set[int]:
    """The server's live fit workers. A worker killed but not yet reaped is a zombie whose command
    line cannot be read (psutil raises): it is gone, so it is not counted."""
    import psutil

    pids = set()
    for child in psutil.Process(server.pid).children(recursive=True):
        try:
            if child.status() != psutil.STATUS_ZOMBIE and "flamino_core.predictors.worker" in " ".join(child.cmdline()):
                pids.add(child.pid)
        except (psutil.ZombieProcess, psutil.NoSuchProcess):
            continue
    return pids


def test_a_second_visitor_is_served_while_a_fit_holds_the_slot_and_a_closed_tabs_fit_stops(hosted_server, browser,
                                                                                          tmp_path):
    """Issue #51 item 5 (and #53 row 1): with one heavy slot, a first visitor's logistic fit of 51
    classes (minutes) runs a scikit-learn fit at a time in its worker; a second visitor's page
    draws and its masked scan of 80 residues ends while that fit still runs, its page having said
    its place in the queue whenever it waited; the first tab closed, its fit's worker is killed and
    the server logs the job abandoned within 30 s (it was ~50 s, at the next fit boundary)."""
    import re

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from fit_estimate import classes_table

    table = tmp_path / "classes51.csv"
    table.write_bytes(classes_table(300, 60, 51))
    first = browser.new_context(viewport={"width": 1400, "height": 2000})
    fitting_page = first.new_page()
    fitting_page.set_default_timeout(ANSWER_MS)
    fitting_page.goto(f"{hosted_server.url}/?page=predict")
    uploader = fitting_page.locator('[data-testid="stFileUploader"]').filter(has_text="Labelled table")
    uploader.locator('input[type="file"]').set_input_files(str(table))
    fitting_page.get_by_text("Fitting: 42 scikit-learn fits", exact=False).first.wait_for()
    fitting_page.wait_for_timeout(500)
    fitting_page.wait_for_selector('[data-testid="stStatusWidget"]', state="detached")
    fitting_page.get_by_role("button", name="Fit the predictor").click()
    progress = fitting_page.get_by_text(re.compile(r"\d+ of 42 scikit-learn fits")).first
    progress.wait_for()

    second = browser.new_context(viewport={"width": 1400, "height": 2000})
    page = second.new_page()
    page.set_default_timeout(ANSWER_MS)
    started = time.monotonic()
    page.goto(f"{hosted_server.url}/?seq={SCANNED}&page=predictions")
    page.get_by_text("masked-marginals — exact").first.wait_for()
    drawn_s = time.monotonic() - started
    page.get_by_text("masked-marginals — exact").click()
    start, done = page.get_by_role("button", name="Start ("), page.get_by_test_id("stMetric").filter(
        has_text="Pseudo-perplexity")
    waits = set()
    while not done.count():
        if start.count():
            start.first.click()
        waits |= set(re.findall(r"waiting for a free slot: [^\n(]*", page.evaluate("document.body.innerText")))
        page.wait_for_timeout(500)
        assert time.monotonic() - started < 900, "the second visitor's scan did not end within 15 minutes"
    scan_s = time.monotonic() - started
    still_fitting = progress.inner_text()
    print(f"\n#51 item 5: the second visitor's page drawn in {drawn_s:.1f} s, its scan ended in {scan_s:.1f} s "
          f"while the fit said '{still_fitting}'; its waits said {sorted(waits)}")
    assert re.search(r"\d+ of 42 scikit-learn fits", still_fitting), still_fitting  # the fit still running
    assert all(re.fullmatch(r"waiting for a free slot: (next|\d+(st|nd|rd|th)) in line ", w) for w in waits), waits
    second.close()

    workers = _worker_pids(hosted_server)
    abandoned = hosted_server.log.read_text().count("heavy job abandoned (Fitting")
    first.close()  # the tab closes mid-fit
    closed = time.monotonic()
    while (hosted_server.log.read_text().count("heavy job abandoned (Fitting") == abandoned
           or workers & _worker_pids(hosted_server)):
        assert time.monotonic() - closed < CLOSED_TAB_S, (
            f"the fit went on {CLOSED_TAB_S:.0f} s after its tab closed; log: {hosted_server.log.read_text()[-1500:]}")
        time.sleep(0.2)
    print(f"#51 item 5: the closed tab's fit stopped {time.monotonic() - closed:.1f} s after the tab closed "
          f"({len(workers)} worker process(es) killed)")

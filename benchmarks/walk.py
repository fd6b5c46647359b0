"""A new user's walk through the app (#66 item 4), in headless Chromium, on the untrained test models:
each page of the navigation with its default action, a screenshot after each step, and a summary of
each step's time and any error text the page showed. Anyone can rerun it:

    PYTHONPATH=$PWD .venv/bin/python benchmarks/walk.py [--out test-artifacts/walk] [--only STEP ...]

It starts ``streamlit run app.py`` as the browser tests do (``tests/test_browser.start_server``: a
free local port, ``random:tiny``, a fresh cache folder of its own) and Debian's Chromium
(``/usr/bin/chromium``), refusing every request to anywhere but the app (listed in the summary).
The walk: open the app; Input: paste HBB (``../shared/fasta/HBB_HUMAN.fa``) and upload two UniProt
records (``uniprot_two.fa``); Records (its table, every Start clicked); Masked predictions; Variant
effects with a mutation list (HBB's E6V, the sickle-cell mutation, and a double), then with the NEIME
DMS assay (``../shared/dms``, scored against its own wild type); Predict from labels (the assay,
Fit the predictor); Embeddings; Attention; Structure: a fold of HBB with the test fold model
(``random:esmfold-tiny``), then the first UniProt record (Y4WG, no structure yet) and HBB as an
ESMFold2 complex (``random:esmfold2-tiny``). Every figure is an untrained model's: the walk checks the app, never biology.

Screenshots (``NN_step.png``, the page as a 1400 x 2600 window shows it) and ``summary.md`` go to
``--out``, a git-ignored folder. A step that fails (its wait timed out, a button was missing) is said
in the summary with its error and the walk goes on; any exception or error box on a page is listed
with its text (an exception on a page is a defect). Exit status 1 if any step failed or any page
showed an exception.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
import kind_folders  # noqa: E402,F401  (the test folders on the path: test modules' helpers)

HBB = SHARED / "fasta" / "HBB_HUMAN.fa"
TWO = SHARED / "fasta" / "uniprot_two.fa"
ASSAY = SHARED / "dms" / "A0A1I9GEU1_NEIME_Kennouche_2019.csv"
STEP_MS = 15 * 60_000  # the longest a fold or a job may take (a first fold compiles for minutes on a loaded CPU)
WAIT_MS = 4 * 60_000  # the longest anything else may take to appear
EXCEPTION, ERROR = '[data-testid="stException"]', '[data-testid="stAlertContentError"]'


def _settle(page) -> None:
    from test_browser import _settle as settle

    settle(page)


# The navigation's titles and the pages' addresses (``app_pages/_ui/frame/views.PAGES``).
ADDRESSES = {"Records": "records", "Masked predictions": "predictions", "Variant effects": "variants",
             "Predict from labels": "predict", "Embeddings": "embeddings", "Attention": "attention",
             "Structure": "structure"}


def _nav(page, title: str) -> None:
    """Click ``title`` in the navigation and wait until the address is that page's (a click the app
    does not follow fails the step: the walk of 2026-12-07 clicked Embeddings while a fit ran, and
    the Predict page stayed for 325 s)."""
    from test_browser import _nav as nav

    nav(page, title).click()
    page.wait_for_url(f"**/{ADDRESSES[title]}*", timeout=WAIT_MS)
    _settle(page)


def _wait_for_work(page, most_ms: int = STEP_MS) -> None:
    """Click every Start a page offers and wait until no job of the session runs (no Cancel button)."""
    deadline = time.monotonic() + most_ms / 1000
    while time.monotonic() < deadline:
        _settle(page)
        start = page.get_by_role("button", name="Start (", exact=False)
        if start.count():
            start.first.click()
            continue
        if page.get_by_role("button", name="Cancel", exact=False).count() == 0:
            return
        page.wait_for_timeout(2000)
    raise TimeoutError(f"work still running after {most_ms / 60_000:.0f} minutes")


def _charts(page, count: int) -> None:
    from test_browser import DRAWN_CHARTS

    page.wait_for_function(f"{DRAWN_CHARTS} >= {count}", timeout=STEP_MS)
    _settle(page)


# --- the steps: (name, what a user does) -------------------------------------------------------------------
def open_app(page, url: str) -> None:
    page.goto(url)
    page.get_by_text("Your sequences").wait_for()


def paste_hbb(page, url: str) -> None:
    box = page.get_by_label("FASTA or sequence")
    box.fill(HBB.read_text())
    box.press("Control+Enter")
    page.get_by_text("1 record ready for analysis.").wait_for()
    _settle(page)


def upload_records(page, url: str) -> None:
    page.locator('[data-testid="stFileUploader"] input[type="file"]').first.set_input_files(str(TWO))
    page.get_by_text("3 records ready for analysis").wait_for()
    _settle(page)


def records(page, url: str) -> None:
    _nav(page, "Records")
    page.locator('[data-testid="stDataFrame"]').first.wait_for()
    _wait_for_work(page)


def predictions(page, url: str) -> None:
    _nav(page, "Masked predictions")
    _charts(page, 3)


def variants_list(page, url: str) -> None:
    _nav(page, "Variant effects")
    box = page.get_by_label("Variants: one per line", exact=False)
    box.fill("E6V\nK17E:E6V\n")
    box.press("Control+Enter")
    page.locator('[data-testid="stDataFrame"]').first.wait_for()
    _wait_for_work(page)


def variants_dms(page, url: str) -> None:
    page.get_by_text("a DMS table", exact=True).click()
    _settle(page)
    page.locator('[data-testid="stFileUploader"] input[type="file"]').first.set_input_files(str(ASSAY))
    _wait_for_work(page)
    page.get_by_text("Spearman ρ").first.wait_for(timeout=STEP_MS)
    _settle(page)


def predict_from_labels(page, url: str) -> None:
    _nav(page, "Predict from labels")
    page.locator('[data-testid="stFileUploader"] input[type="file"]').first.set_input_files(str(ASSAY))
    _settle(page)
    page.get_by_role("button", name="Fit the predictor").click()
    _wait_for_work(page)
    # The fit's own job (a worker) has no Cancel on the page: its results end with the map's offer.
    page.get_by_role("heading", name="Prediction map: every single substitution").wait_for(timeout=STEP_MS)
    _settle(page)


def embeddings(page, url: str) -> None:
    _nav(page, "Embeddings")
    _charts(page, 3)


def attention(page, url: str) -> None:
    _nav(page, "Attention")
    _charts(page, 3)


def structure_fold(page, url: str) -> None:
    _nav(page, "Structure")
    page.get_by_role("button", name="Predict the structure (ESMFold)").click()
    page.get_by_role("heading", name="The predicted structure").wait_for(timeout=STEP_MS)
    page.wait_for_selector('iframe[src*="flamino_molecule"]', timeout=STEP_MS)
    _charts(page, 2)


def structure_complex(page, url: str) -> None:
    """The fold is offered for a record without a structure (HBB has its fold now): Y4WG, with HBB
    as chain B."""
    if not page.url.rstrip("/").split("?")[0].endswith("structure"):
        _nav(page, "Structure")
    sidebar = page.get_by_test_id("stSidebar")
    sidebar.get_by_test_id("stSelectbox").filter(has_text="Record (").click()
    page.get_by_role("option", name="sp|P55685|Y4WG_RHISN (181 aa)").click()
    _settle(page)
    page.get_by_text("ESMFold2 (a record or a complex)").click()
    _settle(page)
    chains = page.locator('[data-testid="stMultiSelect"]').filter(has_text="Chains of the complex")
    chains.locator("input").fill("HBB_HUMAN")
    chains.locator("input").press("Enter")
    chains.locator("input").press("Escape")
    _settle(page)
    page.get_by_role("button", name="Predict the complex (ESMFold2)").click()
    page.get_by_role("heading", name="The predicted complex").wait_for(timeout=STEP_MS)
    _charts(page, 2)


STEPS = [open_app, paste_hbb, upload_records, records, predictions, variants_list, variants_dms,
         predict_from_labels, embeddings, attention, structure_fold, structure_complex]


def _errors(page) -> list[str]:
    """The text of every exception (``exception: ...``) and error box (``error: ...``) on the page,
    each on one line, cut at 300 characters."""
    found = []
    for kind, selector in (("exception", EXCEPTION), ("error", ERROR)):
        try:
            found += [f"{kind}: {' '.join(t.split())[:300]}" for t in page.locator(selector).all_inner_texts()]
        except Exception:  # noqa: BLE001 - a page gone (the server down) says so in the step's own error
            pass
    return found


def main() -> int:
    from test_browser import CHROMIUM, VIEWPORT, start_server, stop_server
    from browser_fixtures import CHROMIUM_ARGS
    from playwright.sync_api import sync_playwright

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "test-artifacts" / "walk")
    parser.add_argument("--only", nargs="+", metavar="STEP", choices=[s.__name__ for s in STEPS],
                        help="run only these steps (each needs the ones it builds on: the input's)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for old in args.out.glob("*.png"):
        old.unlink()
    cache = Path(tempfile.mkdtemp(prefix="flamino-walk-"))
    server = start_server(cache, cache / "streamlit.log", timeout=180)
    rows, outside, failed = [], [], False
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            page = browser.new_context(viewport=VIEWPORT).new_page()
            page.set_default_timeout(WAIT_MS)

            def refuse(route):
                outside.append(route.request.url)
                route.abort()

            page.route(lambda address: not address.startswith(server.url), refuse)
            for number, step in enumerate(STEPS, 1):
                if args.only and step.__name__ not in args.only:
                    continue
                started = time.monotonic()
                problem = ""
                try:
                    step(page, server.url)
                except Exception as err:  # noqa: BLE001 - said in the summary; the walk goes on
                    problem = f"{type(err).__name__}: {' '.join(str(err).split())[:300]}"
                seconds = time.monotonic() - started
                shot = args.out / f"{number:02d}_{step.__name__}.png"
                page.screenshot(path=str(shot))
                found = _errors(page)
                failed = failed or bool(problem) or any(t.startswith("exception") for t in found)
                rows.append((number, step.__name__, seconds, problem, found, shot.name))
                print(f"{number:2d} {step.__name__:22s} {seconds:7.1f} s  {problem or 'ok'}"
                      + "".join(f"\n     on the page: {t}" for t in found), flush=True)
            browser.close()
    finally:
        stop_server(server)
    summary = _summary(rows, outside, cache / "streamlit.log")
    (args.out / "summary.md").write_text(summary)
    print(summary)
    return 1 if failed else 0


def _summary(rows, outside: list[str], log: Path) -> str:
    lines = ["| # | step | seconds | outcome | error text on the page | screenshot |", "|---|---|---|---|---|---|"]
    for number, name, seconds, problem, found, shot in rows:
        page_text = "<br>".join(t.replace("|", "/") for t in found) or "none"
        lines.append(f"| {number} | {name} | {seconds:.1f} | {(problem or 'ok').replace('|', '/')} | {page_text} | "
                     f"{shot} |")
    tracebacks = log.read_text().count("Traceback") if log.exists() else 0
    lines += ["", f"Requests to anywhere but the app, refused: {len(outside)}.",
              f"Tracebacks in the server's log ({log}): {tracebacks}."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())

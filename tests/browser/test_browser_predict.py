"""The Predict page in headless Chromium: upload a labelled table (the real ProteinGym assay, its
first 150 rows), see the out-of-fold scatter and the statistics, predict the substitution map,
download the predictor and reload it with ``flamino predict``; no request leaves this machine."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

# The server, the browser and the waits of tests/browser/test_browser.py (same markers and skips).
from test_browser import (  # noqa: F401
    DRAWN_CHARTS, SCREENSHOTS, TIMEOUT_MS, VIEWPORT, _download, _nav, _settle, _wait_for_charts, pytestmark,
    refuse_outside_requests, wait_for_work,
)

DMS_DIR = Path(__file__).resolve().parents[3] / "shared" / "dms"
ASSAY = DMS_DIR / "A0A1I9GEU1_NEIME_Kennouche_2019.csv"
ROWS = 150



def _labelled_table_uploader(page):
    """The labelled table's file input (the page has a second uploader: Design rounds' .zip)."""
    uploader = page.locator('[data-testid="stFileUploader"]').filter(has_text="Labelled table")
    return uploader.locator('[data-testid="stFileUploaderDropzoneInput"]')


def test_predict_page_upload_fit_map_download_and_reload(server, browser, tmp_path, monkeypatch):
    if not ASSAY.is_file():
        pytest.skip(f"the ProteinGym assay is not at {ASSAY}")
    table = tmp_path / "assay150.csv"
    pd.read_csv(ASSAY).head(ROWS).to_csv(table, index=False)
    context = browser.new_context(viewport=VIEWPORT, accept_downloads=True)
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS * 3)  # a fit embeds 150 mutants on a shared, busy CPU
    outside = refuse_outside_requests(page, server.url)  # a CDN would show up here
    page.goto(f"{server.url}/predict")
    page.get_by_text("Predict from your labels").first.wait_for()
    _labelled_table_uploader(page).set_input_files(str(table))
    page.get_by_text("Model passes: embedding", exact=False).first.wait_for()
    _settle(page)
    page.get_by_role("button", name="Fit the predictor").click()
    # The fit is a background job (its passes, then its fits): waited for while it moves.
    wait_for_work(page, lambda: page.evaluate(f"{DRAWN_CHARTS} >= 1"))
    _wait_for_charts(page, 1)  # the out-of-fold scatter (the first tab)
    assert page.locator('[data-testid="stException"]').count() == 0
    assert page.locator('[data-testid="stAlertContentError"]').count() == 0
    metric = page.locator('[data-testid="stMetric"]').filter(has_text="Out-of-fold Spearman")
    spearman = float(metric.locator('[data-testid="stMetricValue"]').inner_text())
    assert -1 <= spearman <= 1
    assert page.get_by_text("Out-of-fold predictions: Spearman", exact=False).count() >= 1  # the scatter's title
    page.screenshot(path=str(SCREENSHOTS / "predict.png"), full_page=True)

    predictor = _download(page, "Predictor (.zip, for flamino predict)", tmp_path)
    out_of_fold = _download(page, "Out-of-fold predictions (CSV)", tmp_path)
    oof = pd.read_csv(out_of_fold)
    assert len(oof) == ROWS and oof["prediction"].notna().all() and sorted(oof["fold"].unique()) == [0, 1, 2, 3, 4]

    page.get_by_role("button", name="Predict the substitution map").click()
    page.get_by_text("Predicted effect of every single substitution", exact=False).first.wait_for()
    _settle(page)
    assert page.locator('[data-testid="stAlertContentError"]').count() == 0
    page.screenshot(path=str(SCREENSHOTS / "predict_map.png"), full_page=True)
    context.close()
    assert outside == [], f"requests left the machine: {outside[:5]}"

    # The downloaded .zip is the predictor flamino predict reads: its predictions are those of the
    # model fitted on every row, fitted again here with scikit-learn on the same embeddings.
    from sklearn.linear_model import RidgeCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from flamino_core.cli import main
    from flamino_core.engine.engine import Engine
    from flamino_core.store.passes import record_outputs
    from flamino_core.weights.loading import load_weights

    monkeypatch.setenv("FLAMINO_CACHE", str(tmp_path / "cache"))
    assert main(["predict", str(predictor), str(table), "-o", str(tmp_path / "p.csv")]) == 0
    predicted = pd.read_csv(tmp_path / "p.csv")
    engine = Engine(load_weights("random:tiny"))
    means = np.stack([o.means[2] for o in record_outputs(engine, list(oof["mutated_sequence"]))]).astype(float)
    final = make_pipeline(StandardScaler(), RidgeCV(alphas=10.0 ** np.arange(-2, 5.5, 0.5)))
    expected = final.fit(means, oof["DMS_score"].to_numpy(float)).predict(means)
    np.testing.assert_allclose(predicted["prediction"], expected, atol=1e-6)


def _jobs_logged(cache) -> list:
    """(title, state, units, seconds) of each job the server logged in its pass-rate file."""
    import json

    rates = cache / "pass_rates.json"
    jobs = json.loads(rates.read_text()).get("jobs", []) if rates.is_file() else []
    return [(j.get("title"), j.get("state"), j.get("units"), j.get("actual_s")) for j in jobs]


def test_a_fit_of_the_shared_assay_shows_progress_an_estimate_cancels_and_stops_with_its_tab(browser, tmp_path):
    """Issue #33: a fit is a background job. On the whole shared assay (922 rows; its fitness bins
    as the target, so that logistic fits make the job last minutes): the cost said before the
    button, progress with the time left while it runs, Cancel, Resume, and a closed tab stops it
    (the server's log says so) instead of fitting on for the 40 minutes the review saw."""
    import os
    import re
    import signal
    import time

    from test_browser import start_server, stop_server

    if not ASSAY.is_file():
        pytest.skip(f"the ProteinGym assay is not at {ASSAY}")
    frame = pd.read_csv(ASSAY)
    table = tmp_path / "assay_bins.csv"
    frame.assign(DMS_score=frame["DMS_score_bin"]).to_csv(table, index=False)
    log = tmp_path / "streamlit.log"
    server = start_server(tmp_path / "cache", log)  # its own: the test reads its log
    try:
        context = browser.new_context(viewport=VIEWPORT)
        page = context.new_page()
        page.set_default_timeout(TIMEOUT_MS * 5)  # 922 embeddings and 161 masked passes first, on a busy CPU
        page.goto(f"{server.url}/predict")
        page.get_by_text("Predict from your labels").first.wait_for()
        _labelled_table_uploader(page).set_input_files(str(table))
        estimate = page.get_by_text("Fitting: 63 scikit-learn fits", exact=False).first
        estimate.wait_for()
        assert re.search(r"of up to 922 rows x 3,221 features; about \d+ (seconds|minutes?)", estimate.inner_text())
        _settle(page)
        page.get_by_role("button", name="Fit the predictor").click()
        running = re.compile(r"Fitting the predictor \(embedding, 922 rows\): \d+ of 63 scikit-learn fits · about")
        page.get_by_text(running).first.wait_for()  # progress, with the time left at the job's own rate
        page.get_by_role("button", name="Cancel").first.click()
        page.get_by_text("was cancelled after", exact=False).first.wait_for()
        assert page.get_by_text("its fits start again", exact=False).count() >= 1
        page.get_by_role("button", name="Resume").click()
        # The resumed job's own panel, not the cancelled one's last line (the sidebar can still show
        # it): a suite run closed the tab on that stale line before the Resume's rerun had started a
        # job, so no job ran, none was abandoned, and the wait below failed (no job thread in the
        # server's stacks, only the cancelled job in its log).
        page.get_by_role("button", name="Resume").wait_for(state="detached")
        page.get_by_role("button", name="Cancel").first.wait_for()
        page.get_by_text(running).first.wait_for()
        context.close()  # the tab closes mid-fit
        # A closed socket stops it within a poll (0.2 s); a socket that lingers, once the browser
        # has not run the app for background.GONE_AFTER_S (180 s): a CI run saw the fit go on 600 s.
        deadline = time.monotonic() + 300
        while "heavy job abandoned (Fitting the predictor" not in log.read_text():
            if time.monotonic() > deadline:  # say how the jobs ended and what every server thread does
                os.kill(server.pid, signal.SIGUSR1)  # app.py: faulthandler writes the stacks to the log
                time.sleep(2)
                pytest.fail(f"the fit went on after its tab closed; jobs logged: {_jobs_logged(tmp_path / 'cache')}; "
                            f"server log: {log.read_text()[-12000:]}")
            time.sleep(1)
        assert "Traceback" not in log.read_text()
    finally:
        stop_server(server)

"""The Predict page's Design rounds section in headless Chromium, on the real ProteinGym assay
(its wild type through the link): start a campaign, upload round 1's measurements, see the
proposals with their predicted values and intervals, download the plate as CSV, upload round 2's
measurements (the plate looked up in the assay), see the history; no request leaves the machine."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

# The server, the browser and the waits of tests/browser/test_browser.py (same markers and skips).
from test_browser import SCREENSHOTS, TIMEOUT_MS, VIEWPORT, _download, _settle, pytestmark, refuse_outside_requests  # noqa: F401

DMS = Path(__file__).resolve().parents[3] / "shared" / "dms" / "A0A1I9GEU1_NEIME_Kennouche_2019.csv"


def _upload(page, label: str, path: Path) -> None:
    uploader = page.locator('[data-testid="stFileUploader"]').filter(has_text=label)
    uploader.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(str(path))
    _settle(page)


def _no_errors(page) -> None:
    for test_id in ("stException", "stAlertContentError"):
        found = page.locator(f'[data-testid="{test_id}"]')
        assert found.count() == 0, found.first.inner_text()


def test_two_design_rounds_in_the_browser(server, browser, tmp_path):
    if not DMS.is_file():
        pytest.skip(f"the ProteinGym assay is not at {DMS}")
    assay = pd.read_csv(DMS)
    wild_type = "".join(DMS.with_suffix(".wt.fa").read_text().splitlines()[1:])
    context = browser.new_context(viewport=VIEWPORT, accept_downloads=True)
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS * 3)
    outside = refuse_outside_requests(page, server.url)  # a CDN would show up here
    page.goto(f"{server.url}/?seq={wild_type}&page=predict")
    page.get_by_text("Design rounds").first.wait_for()
    _settle(page)
    page.get_by_role("button", name="Start a campaign on the selected record").click()
    page.get_by_text("next round 1", exact=False).first.wait_for()
    round1 = tmp_path / "round1.csv"
    assay.iloc[::40][["mutant", "DMS_score"]].to_csv(round1, index=False)
    _upload(page, "Round 1's measurements", round1)
    page.get_by_role("button", name="Add as round 1").click()
    page.get_by_text("24 measured values stored", exact=False).first.wait_for()
    _settle(page)
    page.get_by_role("button", name="Propose round 2").click()
    page.get_by_text("Round 2: 24 proposals", exact=False).first.wait_for()
    _settle(page)
    _no_errors(page)
    page.screenshot(path=str(SCREENSHOTS / "design_rounds.png"), full_page=True)
    plate = pd.read_csv(_download(page, "Plate of round 2 (CSV)", tmp_path))
    assert len(plate) == 24 and plate["mutant"].str[1:-1].is_unique
    assert (plate["low"] < plate["prediction"]).all() and (plate["prediction"] < plate["high"]).all()
    assert not set(plate["mutant"]) & set(assay.iloc[::40]["mutant"])  # nothing measured twice

    round2 = tmp_path / "round2.csv"
    measured = assay[assay["mutant"].isin(plate["mutant"])][["mutant", "DMS_score"]]
    measured.to_csv(round2, index=False)
    _upload(page, "Round 2's measurements", round2)
    page.get_by_role("button", name="Add as round 2").click()
    page.get_by_text(f"{len(measured)} measured values stored", exact=False).first.wait_for()
    _settle(page)
    _no_errors(page)
    history = page.locator('[data-testid="stDataFrame"]').last
    assert history.is_visible()
    assert page.get_by_text("next round 3", exact=False).count() >= 1
    campaign = _download(page, "Campaign (.zip)", tmp_path)
    context.close()
    assert outside == [], f"requests left the machine: {outside[:5]}"

    from flamino_core.design import campaign as campaigns

    copy = campaigns.from_zip(campaign.read_bytes(), tmp_path / "copy")
    assert [r["n_measured"] for r in copy.rounds] == [24, len(measured)]
    assert list(copy.stored_proposals(2)["mutant"]) == list(plate["mutant"])

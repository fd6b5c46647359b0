"""The Predict page's Design rounds section under ``streamlit.testing.v1.AppTest``, on the real
ProteinGym assay in ../shared/dms/ (its wild type pasted as the record): start a campaign, upload
round 1's measurements, see the proposals with their predicted values and intervals (the same as
``flamino_core.design.proposals.propose`` on the same measurements and seed), the plate's
download, round 2's measurements, the history, and the campaign's .zip taken back."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from flamino_core.design import campaign as campaigns
from flamino_core.design.proposals import Settings, propose
# The AppTest helpers of tests/app/test_app.py, and its autouse ``environment`` fixture (random:tiny).
from test_app import assert_clean, environment, open_page, paste, start, unescaped  # noqa: F401

from app_pages._ui.predict_from_labels.design_rounds import FOLDER

DMS = Path(__file__).resolve().parents[3] / "shared" / "dms" / "A0A1I9GEU1_NEIME_Kennouche_2019.csv"


@pytest.fixture(scope="module")
def assay() -> pd.DataFrame:
    if not DMS.is_file():
        pytest.skip(f"the ProteinGym assay is not at {DMS}")
    return pd.read_csv(DMS)


def wild_type() -> str:
    return "".join(DMS.with_suffix(".wt.fa").read_text().splitlines()[1:])


def button(at, label: str):
    return next(b for b in at.button if b.label == label)


def add_round(at, number: int, table: pd.DataFrame):
    at.file_uploader(key=f"_design_measured_{number}").set_value(
        [(f"round{number}.csv", table.to_csv(index=False).encode(), "text/csv")])
    at = at.run()
    return button(at, f"Add as round {number}").click().run()


def plate(at) -> pd.DataFrame:
    return next(d.value for d in at.dataframe if "mutant" in d.value.columns)


def test_two_rounds_on_the_page(assay, tmp_path):
    at = open_page(paste(start(), f">A0A1I9GEU1\n{wild_type()}\n"), "predict")
    assert_clean(at)
    assert any(s.value == "Design rounds" for s in at.subheader)
    at = button(at, "Start a campaign on the selected record").click().run()
    assert_clean(at)
    round1 = assay.iloc[::40][["mutant", "DMS_score"]]  # 24 measured variants
    at = add_round(at, 1, round1)
    assert_clean(at)
    assert any("Round 1: 24 measured values stored" in unescaped(s.value) for s in at.success)
    at = button(at, "Propose round 2").click().run()
    assert_clean(at)
    shown = plate(at)
    folder = Path(at.session_state[FOLDER])
    found = campaigns.load(folder)
    expected = propose(found.wild_type, found.numbering, found.measured(before=2), Settings(batch=24), seed=0,
                       round_number=2).table
    assert list(shown["mutant"]) == list(expected["mutant"])  # the core's proposals, same seed
    # shown to 3 significant digits (the plate's CSV holds every digit)
    np.testing.assert_allclose(shown["prediction"].astype(float), expected["prediction"], rtol=5e-3)
    assert (shown["low"].astype(float) < shown["prediction"].astype(float)).all()
    assert (shown["prediction"].astype(float) < shown["high"].astype(float)).all()
    assert shown["mutant"].str[1:-1].is_unique  # one proposal per position
    labels = [b.label for b in at.get("download_button")]
    assert "Plate of round 2 (CSV)" in labels and "Campaign (.zip)" in labels
    # round 2 measured: the proposals that the assay holds (the others were not in the assay)
    measured = assay[assay["mutant"].isin(shown["mutant"])][["mutant", "DMS_score"]]
    at = add_round(at, 2, measured)
    assert_clean(at)
    history = next(d.value for d in at.dataframe if "best_so_far" in d.value.columns)
    assert list(history["measured"]) == [24, len(measured)]
    assert list(history["proposed"]) == [0, 24]
    best = max(round1["DMS_score"].max(), measured["DMS_score"].max())
    assert history["best_so_far"].iloc[-1] == pytest.approx(best)
    # the campaign's .zip is the folder: unpacked elsewhere it reads the same rounds
    copy = campaigns.from_zip(campaigns.to_zip(campaigns.load(folder)), tmp_path / "copy")
    assert [r["n_measured"] for r in copy.rounds] == [24, len(measured)]


def test_a_campaign_is_offered_on_the_uploaded_tables_wild_type():
    """Issue 50 row 14: after a table was uploaded (its wild type derived from mutated_sequence),
    Design rounds offered only the selected record, another protein. The offered wild type is the
    assay's own (its .wt.fa beside it, read here independently)."""
    at = open_page(paste(start(), ">ubiquitin\nMQIFVKTLTGKTITLEVEPSDTIENVKAKIQDKEGIPPDQQRLIFAGKQLEDGRTLSDYNIQKESTLHLVLRLRGG\n"),
                   "predict")
    assert not any(b.label.endswith("'s wild type") for b in at.button)  # nothing uploaded: the record only
    at.file_uploader(key="_predict_upload").set_value([(DMS.name, DMS.read_bytes(), "text/csv")])
    at = at.run()
    assert_clean(at)
    at = button(at, f"Start a campaign on {DMS.stem}'s wild type").click().run()
    assert_clean(at)
    found = campaigns.load(Path(at.session_state[FOLDER]))
    assert found.wild_type == wild_type() and found.data["record_id"] == DMS.stem
    assert any(f"Campaign on {DMS.stem} ({len(wild_type()):,} residues)" in unescaped(c.value) for c in at.caption)

"""The Predict page and the Variant effects page's suggestions under ``streamlit.testing.v1.AppTest``,
on the untrained ``random:tiny`` model. What the pages show is checked against the core functions
(themselves checked against scikit-learn directly in tests/integration/test_predict.py and against
``flamino variants`` in tests/integration/test_suggest.py)."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from flamino_core.engine.engine import Engine
from flamino_core.predictors.table_fit import fit_table
from flamino_core.predictors.saved import JSON_NAME, from_zip, zip_bytes
from flamino_core.predictors.table import parse_labelled_table
from flamino_core.predictors.suggest import Constraints, suggest
from flamino_core.weights.loading import load_weights
# The AppTest helpers of tests/app/test_app.py, and its autouse ``environment`` fixture (random:tiny).
from test_app import (  # noqa: F401
    assert_clean, environment, every_text, example, figures, open_page, settle, start, unescaped, values,
)
from test_hosted_attacks import hosted  # noqa: F401  (the hosted-server fixture)

from app_pages._ui.predict_from_labels.fit_results import PREDICTOR

DMS_DIR = Path(__file__).resolve().parents[3] / "shared" / "dms"
ASSAY = DMS_DIR / "A0A1I9GEU1_NEIME_Kennouche_2019.csv"
ROWS = 150  # the first 150 mutants (positions 1-8): enough for 5 folds, quick on random:tiny


@pytest.fixture(scope="module")
def engine():
    return Engine(load_weights("random:tiny"))  # the app's model (FLAMINO_MODEL=random:tiny)


@pytest.fixture(scope="module")
def table_bytes() -> bytes:
    if not ASSAY.is_file():
        pytest.skip(f"the ProteinGym assay is not at {ASSAY}")
    frame = pd.read_csv(ASSAY).head(ROWS)
    return frame.to_csv(index=False).encode()


def upload(at, data: bytes):
    at.file_uploader(key="_predict_upload").set_value([("assay.csv", data, "text/csv")])
    return at.run()


def button(at, label: str):
    return next(b for b in at.button if b.label == label)


def test_the_page_asks_for_a_table():
    at = open_page(start(), "predict")
    assert_clean(at)
    assert at.header[0].value == "Predict from your labels"
    assert any("Upload a table" in i.value for i in at.info)


def test_fit_shows_out_of_fold_statistics_figures_and_the_prediction_map(engine, table_bytes):
    at = upload(open_page(start(), "predict"), table_bytes)
    assert_clean(at)
    assert any("Model passes: embedding (layer 2): 150 of 150" in unescaped(c.value) for c in at.caption)  # before
    at = settle(button(at, "Fit the predictor").click().run())  # the fit is a background job
    assert_clean(at)
    # After the fit the plan says what is true: its passes are stored, nothing is left to run
    # (issue #37: "150 of 150 ... to run" stayed on the page).
    plan = [unescaped(c.value) for c in at.caption if unescaped(c.value).startswith("Model passes:")]
    assert plan and all("nothing left to run, all" in line and " 0 stored" not in line and not any(
        f"{n} of {n}" in line for n in (150, 27)) for line in plan), plan
    assert any("embedding (layer 2): nothing left to run, all 150 unmasked passes" in line for line in plan)
    reference = fit_table(parse_labelled_table(table_bytes, "DMS_score"), "embedding", engine=engine,
                          model="random:tiny")
    shown = {m.label: m.value for m in at.metric}
    assert shown["Out-of-fold Spearman ρ"] == f"{reference.headline['spearman']:.3f}"
    head = reference.headline  # the tile shows its interval (issue #37), not only its tooltip
    assert any(f"95% bootstrap interval {head['spearman_low']:.3f} – {head['spearman_high']:.3f}" in unescaped(c.value)
               for c in at.caption)
    comparison = at.dataframe[0].value
    assert list(comparison["features"]) == [row["label"] for row in reference.comparison]
    np.testing.assert_allclose(comparison["Spearman ρ"], [row["spearman"] for row in reference.comparison])
    scatter, compare, curve = figures(at)[:3]
    assert "RANDOM WEIGHTS" in scatter["layout"]["title"]["text"]
    points = np.concatenate([values(trace["x"]) for trace in scatter["data"]])
    assert sorted(points) == pytest.approx(sorted(reference.result.predictions))
    # The session keeps the predictor (the Variant effects page shows it beside its proposals);
    # its download is the .zip flamino predict reads.
    kept = at.session_state[PREDICTOR]
    np.testing.assert_array_equal(from_zip(zip_bytes(kept)).model.coef, reference.predictor.model.coef)

    at = button(at, "Predict the substitution map").click().run()
    assert_clean(at)
    heatmap = figures(at)[3]
    z = heatmap["data"][0]["z"]  # plotly sends arrays base64-encoded with their shape (test_app.values)
    grid = np.array(values(z), dtype=float).reshape([int(n) for n in str(z["shape"]).split(",")]) \
        if isinstance(z, dict) else np.array(z, dtype=float)  # (20, L)
    wild_type = reference.table.wild_type
    assert grid.shape == (20, len(wild_type))
    from flamino_core.predictors.apply import prediction_map

    expected, _ = prediction_map(reference.predictor, wild_type, engine)
    np.testing.assert_allclose(grid, expected.T, atol=1e-9)

    # Fitted again on other features, the map is that predictor's, drawn when asked for again. (The
    # map was cached by the statistic's name instead of the fit: the second fit of a regression
    # showed the first fit's map at once.)
    at.radio(key="_w_pfeat").set_value("onehot")
    at = settle(button(at, "Fit the predictor").click().run())
    assert_clean(at)
    assert len(figures(at)) == 3  # the new fit's three figures; no map before the button
    at = button(at, "Predict the substitution map").click().run()
    z = figures(at)[3]["data"][0]["z"]
    grid = np.array(values(z), dtype=float).reshape([int(n) for n in str(z["shape"]).split(",")]) \
        if isinstance(z, dict) else np.array(z, dtype=float)
    onehot = fit_table(parse_labelled_table(table_bytes, "DMS_score"), "onehot", engine=None, model="random:tiny")
    expected, _ = prediction_map(onehot.predictor, wild_type, None)
    np.testing.assert_allclose(grid, expected.T, atol=1e-9)


def test_features_that_do_not_apply_are_refused_with_the_reason():
    sequences = pd.DataFrame({"sequence": ["MKT", "MKTAYIAK", "MKVLA", "MAAGG", "MKKKT", "MTTTA"],
                              "score": [1.0, 2.0, 3.0, 4.0, 5.0, 6.5]})
    at = upload(open_page(start(), "predict"), sequences.to_csv(index=False).encode())
    at.selectbox(key="_w__predict_target").set_value("score").run()
    at.radio(key="_w_pfeat").set_value("augmented").run()
    assert any("do not apply to this table" in w.value for w in at.warning)


def test_suggestions_on_the_variant_effects_page(engine):
    at = open_page(example(start(), "Haemoglobin β (human)"), "variants")
    at.text_input(key="_w__suggest_avoid").input("C, P")
    at = button(at.run(), "Propose mutations").click().run()
    assert_clean(at)
    table = at.dataframe[-1].value
    record = at.session_state["_suggest_for"][1]
    found = suggest([("random:tiny", engine)], record, constraints=Constraints(avoid=frozenset("CP")),
                    strategies=("wt-marginals", "masked-marginals", "joint-masked"))
    assert list(table["mutant"]) == list(found.table["mutant"])
    np.testing.assert_allclose(table["wt-marginals"], found.table["wt-marginals"])
    assert (table[table["kind"] == "single"]["wt-marginals"] > 0).all()
    assert not any("C" == m[-1] or "P" == m[-1] for m in table["mutant"])
    # "consensus" is said for one model (issue #37): the page's one model's own wt-marginal score.
    assert any(unescaped(c.value).startswith("consensus: the mean wt-marginal") for c in at.caption)
    singles = table[table["kind"] == "single"]
    np.testing.assert_allclose(singles["consensus"], singles["wt-marginals"])


def test_a_hosted_fit_names_the_operators_model_by_its_public_name(hosted, monkeypatch, tmp_path, table_bytes):
    """The predictor's JSON and the metrics named the model by its identifier: on a hosted server
    with the operator's own checkpoint, its path (issue #26 item 8). Now the public name."""
    from flamino_core.weights.loading import save_checkpoint

    weights = load_weights("random:tiny")
    secret = save_checkpoint(tmp_path / "srv" / "esm2-lab-secret", weights.config, weights.params, "test")
    monkeypatch.setenv("FLAMINO_MODEL", str(secret))
    monkeypatch.setenv("FLAMINO_MODEL_NAME", "lab-model")
    small = pd.read_csv(io.BytesIO(table_bytes)).head(40).to_csv(index=False).encode()  # 40 rows: 5 folds
    at = upload(open_page(start(), "predict"), small)
    at = settle(button(at, "Fit the predictor").click().run())
    assert_clean(at)
    kept = at.session_state[PREDICTOR]
    assert kept.model_id == "lab-model"  # the .zip download is zip_bytes of this predictor
    with zipfile.ZipFile(io.BytesIO(zip_bytes(kept))) as archive:
        saved = archive.read(JSON_NAME).decode()
    assert json.loads(saved)["model"] == "lab-model"
    shown = every_text(at) + " ".join(str(f) for f in figures(at)) + saved
    assert "esm2-lab-secret" not in shown and str(tmp_path) not in shown

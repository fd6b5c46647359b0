"""In Chromium (#35 done-when): pick ESM C in the sidebar and see the embeddings and the attention
of a pasted protein; compare ESM-2 and an ESM-1v ensemble on a DMS table (the last test). ESM C's published weights cannot reach this machine, so the model picked is
a random two-layer ESM C that transformers' EsmcForMaskedLM wrote with save_pretrained (the
published HF layout), chosen as a user picks any checkpoint folder: "Local checkpoint…", its
path, "Load checkpoint". Its numbers are checked against transformers in test_family_parity.py."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import scipy.stats

from test_browser import (CHROMIUM, SCREENSHOTS, TIMEOUT_MS, UBIQUITIN, _download, _nav, _settle, _wait_for_charts,
                          load_local_checkpoint, paste_one_record)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs /usr/bin/chromium (apt-get install chromium)"),
]


def test_pick_esmc_then_see_embeddings_and_attention_of_a_pasted_protein(server, browser, tmp_path):
    from family_checkpoints import make_hf_esmc
    from flamino_core.model.config import ModelConfig

    folder = tmp_path / "esmc-tiny"
    make_hf_esmc(ModelConfig.esmc(2, 64, 1), seed=5).save_pretrained(folder)

    page = browser.new_context(viewport={"width": 1400, "height": 1600}).new_page()
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(server.url)
    page.get_by_text("Your sequences").wait_for()
    load_local_checkpoint(page, folder)

    paste_one_record(page, f">ubq\n{UBIQUITIN}\n")

    _nav(page, "Embeddings").click()
    _wait_for_charts(page, 1)
    page.screenshot(path=str(SCREENSHOTS / "esmc_embeddings.png"), full_page=True)
    _nav(page, "Attention").click()
    _wait_for_charts(page, 1)
    page.get_by_text("ESM C has no contact head").wait_for()
    titles = page.evaluate("() => [...document.querySelectorAll('.gtitle')].map(e => e.textContent)")
    assert any(t.startswith("Attention, layer 2 (final)") for t in titles), titles
    assert not any("ontact" in t for t in titles), titles
    page.screenshot(path=str(SCREENSHOTS / "esmc_attention.png"), full_page=True)
    page.context.close()


# The ProteinGym assay in ../shared/dms, whole: 922 rows over 161 positions. masked-marginals (the
# page's default, and how Meier et al. and ProteinGym score the ESM-1v ensemble) costs one masked
# pass per position whatever the rows, so a slice of rows would save little: the time goes to
# loading and compiling six small models, not to the table.
ASSAY = Path(__file__).resolve().parents[3] / "shared" / "dms" / "A0A1I9GEU1_NEIME_Kennouche_2019.csv"


def test_compare_esm2_with_an_esm1v_ensemble_of_local_folders_on_a_dms_table(server, browser, tmp_path):
    """#35 done-when: compare ESM-2 and the ESM-1v ensemble on a DMS table. The published ESM-1v
    five cannot reach this machine, so the ensemble is five random two-layer ESM-1v folders
    (transformers' EsmForMaskedLM with learned positions, save_pretrained: random weights, their
    scores are not biology) typed as paths under "Compare models", as a user with the five
    downloaded folders does; ESM-2 is the shared server's random:tiny. The Spearman of each model
    with the experiment and between the two, in the downloaded JSON, in the tables as drawn and
    in the scatter's title, equal scipy's computed here from the downloaded scores."""
    if not ASSAY.exists():
        pytest.skip(f"the ProteinGym assay is not at {ASSAY}")
    from conftest import checkpoint_seed
    from family_checkpoints import esm1b_config, make_hf_esm1b

    folders = [tmp_path / f"esm1v_random_{i}" for i in range(1, 6)]
    for i, folder in enumerate(folders, 1):  # the seeds of tests/parity/test_ensemble.py's members
        make_hf_esm1b(esm1b_config("esm1v"), checkpoint_seed("esm1v", str(i))).save_pretrained(folder)

    page = browser.new_context(viewport={"width": 1400, "height": 2400}).new_page()
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(f"{server.url}/?page=variants&vinput=dms&vstrategy=masked-marginals")
    page.get_by_role("heading", name="Variant effects", exact=True).wait_for()
    page.locator('[data-testid="stFileUploader"] input[type="file"]').set_input_files(str(ASSAY))
    page.get_by_text("Spearman ρ").first.wait_for(timeout=3 * TIMEOUT_MS)
    _settle(page)
    page.get_by_text("Compare models").click()
    box = page.get_by_role("textbox", name="Or checkpoints on this machine")
    box.fill("\n".join(str(f) for f in folders))
    box.press("Control+Enter")
    _settle(page)
    page.get_by_role("button", name="Add to the comparison").click()
    # .last: while Streamlit reruns, the section's stale copy can stand beside the new one for a
    # moment (a loaded fresh clone's run, 2026-12-07, met both at once; alone the test sees one).
    page.get_by_text("Agreement with the experiment").last.wait_for(timeout=5 * TIMEOUT_MS)
    _wait_for_charts(page, 2)  # the page's own scatter, then the comparison's
    page.get_by_text("Agreement with the experiment").last.evaluate("e => e.scrollIntoView({block: 'start'})")
    page.screenshot(path=str(SCREENSHOTS / "compare_esm2_esm1v_ensemble.png"), full_page=True)

    ensemble = "ensemble:" + ",".join(f.name for f in folders)
    scores = pd.read_csv(_download(page, "Scores by model (CSV)", tmp_path))
    report = json.loads(_download(page, "Comparison (JSON)", tmp_path).read_text())
    assert report["models"] == ["random:tiny", ensemble]
    columns = {"random:tiny": "score_random:tiny", ensemble: "score_ensemble"}
    used = scores[list(columns.values())].notna().all(axis=1)
    assert used.sum() == report["n_scored"] == 922
    truth = scores.loc[used, "DMS_score"]
    for model, column in columns.items():  # each model's agreement with the experiment
        rho = scipy.stats.spearmanr(truth, scores.loc[used, column]).statistic
        assert report["metrics"][model]["spearman"] == pytest.approx(rho, abs=1e-9), model
    between = scipy.stats.spearmanr(scores.loc[used, "score_random:tiny"], scores.loc[used, "score_ensemble"]).statistic
    assert report["spearman_between_models"]["random:tiny"][ensemble] == pytest.approx(between, abs=1e-9)
    assert not np.allclose(scores.loc[used, "score_random:tiny"], scores.loc[used, "score_ensemble"])
    titles = page.evaluate("() => [...document.querySelectorAll('.gtitle')].map(e => e.textContent)")
    assert any("against" in t and f"Spearman ρ {between:.3f}" in t for t in titles), titles
    # The tables as drawn (the grid's accessible table: the cells' full values), row by row.
    grids = page.evaluate("() => [...document.querySelectorAll('[data-testid=\"stDataFrame\"] table')].map(t => "
                          "[...t.querySelectorAll('tr')].map(r => [...r.querySelectorAll('th, td')].map(c => c.innerText)))")
    shown = next(g for g in grids if "Spearman ρ" in g[0])
    assert [row[0] for row in shown[1:]] == ["untrained test model", "Ensemble of 5: esm1v_random_1 … esm1v_random_5"]
    for row, model in zip(shown[1:], columns):
        assert float(row[shown[0].index("Spearman ρ")]) == pytest.approx(report["metrics"][model]["spearman"], abs=1e-9)
    pairs = next(g for g in grids if g[0][1:2] == ["untrained test model"] and g[1][1:] == ["1"])
    assert float(pairs[2][1]) == pytest.approx(between, abs=1e-9)  # the ensemble's row, ESM-2's column
    page.context.close()

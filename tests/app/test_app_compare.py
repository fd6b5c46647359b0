"""The Variant effects page compares models on a DMS table (#35 item 5): the real ProteinGym assay
in ../shared/dms, the app's model (random:tiny) beside a random ESM-1b and an ensemble of two
random ESM-1v models (each loaded and scored as its own job through the result store). Every
Spearman shown is recomputed here with scipy from the core's scores of the same table."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats

from flamino_core.engine.engine import Engine
from flamino_core.variants.dms import parse_dms, score_dms
from flamino_core.weights.loading import load_weights
from test_app import assert_clean, environment, figures, settle, start  # noqa: F401  (autouse: random:tiny)
from test_app_variants import ASSAY, upload_dms, variants_page
from app_pages._ui.frame.widgets import widget_key

OTHERS = ["random:tiny-esm1b", "ensemble:random:tiny-esm1v:1,random:tiny-esm1v:2"]


def test_three_models_side_by_side_on_a_real_assay(monkeypatch):
    if not ASSAY.exists():
        pytest.skip(f"the ProteinGym assay is not at {ASSAY}")
    from app_pages._ui.variants import compare

    # The picker offers published checkpoints (not here) and the untrained model: offer these.
    monkeypatch.setattr(compare, "comparison_choices", lambda current: OTHERS)
    data = ASSAY.read_bytes()
    at = variants_page(start())
    at.radio(key="_w_vinput").set_value("dms").run()
    at = upload_dms(at, "assay.csv", data)
    assert_clean(at)
    at.multiselect(key=widget_key(compare.CHOICE)).set_value(OTHERS)
    at = settle(at.run(), start=True)
    assert_clean(at)

    table = parse_dms(data)
    truth = table.frame["DMS_score"].to_numpy()
    own = {m: score_dms(Engine(load_weights(m)), table).frame["score"].to_numpy()
           for m in ("random:tiny", "random:tiny-esm1b", "random:tiny-esm1v:1", "random:tiny-esm1v:2")}
    expected = {"random:tiny": own["random:tiny"], OTHERS[0]: own["random:tiny-esm1b"],
                OTHERS[1]: (own["random:tiny-esm1v:1"] + own["random:tiny-esm1v:2"]) / 2}
    metrics = next(d.value for d in at.dataframe if "Spearman ρ" in d.value.columns)
    assert len(metrics) == 3
    for (label, row), model in zip(metrics.iterrows(), expected):
        assert row["Spearman ρ"] == pytest.approx(scipy.stats.spearmanr(truth, expected[model]).statistic, abs=1e-9)
    between = next(d.value for d in at.dataframe if d.value.shape == (3, 3) and np.allclose(np.diag(d.value), 1)
                   and (d.value.to_numpy() < 1).any())
    rho = scipy.stats.spearmanr(expected["random:tiny"], expected[OTHERS[0]]).statistic
    assert between.iloc[0, 1] == pytest.approx(rho, abs=1e-9)
    scatter = figures(at)[-1]
    assert "against" in scatter["layout"]["title"]["text"] and "n = 922" in scatter["layout"]["title"]["text"]
    assert {"Scores by model (CSV)", "Comparison (JSON)"} <= {b.proto.label for b in at.get("download_button")}

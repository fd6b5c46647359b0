"""The Embeddings page's records map per model (#35 item 5): two records, the app's model
(random:tiny) beside a random ESM C and a random ESM-1b; each map's points are the PCA of that
model's final-layer mean embeddings, recomputed here with scikit-learn from the engine's own run."""

from __future__ import annotations

import numpy as np
from sklearn.decomposition import PCA

from flamino_core.engine.engine import Engine
from flamino_core.weights.loading import load_weights
from test_app import UBIQUITIN, assert_clean, environment, figures, open_page, paste, settle, start  # noqa: F401
from test_app import values
from app_pages._ui.frame.widgets import widget_key

OTHERS = ["random:tiny-esmc", "random:tiny-esm1b"]
RECORDS = {"ubq": UBIQUITIN, "half": UBIQUITIN[:40], "other": "MKTAYIAKQRQISFVKSHFSRQLEERLGLIEVQAPILSRVGDGTQDNLSGAEKAVQVKVKALPDAQFEVV"}


def test_one_map_per_model(monkeypatch):
    from app_pages._ui.records import compare_maps

    monkeypatch.setattr(compare_maps, "comparison_choices", lambda current: OTHERS)
    at = paste(start(), "".join(f">{name}\n{seq}\n" for name, seq in RECORDS.items()))
    at = settle(open_page(at, "embeddings"), start=True)
    at.multiselect(key=widget_key(compare_maps.CHOICE)).set_value(OTHERS)
    at = settle(at.run(), start=True)
    assert_clean(at)
    maps = {f["layout"]["title"]["text"].split(",")[0]: f for f in figures(at) if "(PCA)" in f["layout"]["title"]["text"]
            and "layer 2" in f["layout"]["title"]["text"]}
    assert {"untrained test model", "untrained test model (tiny-esmc)", "untrained test model (tiny-esm1b)"} <= set(maps)
    for model in OTHERS:
        means = np.stack([o.mean for o in Engine(load_weights(model)).run(list(RECORDS.values()))])
        expected = PCA(n_components=2).fit_transform(means)
        shown = maps[f"untrained test model ({model.removeprefix('random:')})"]
        xs = np.concatenate([values(t["x"]) for t in shown["data"][:1]])
        ys = np.concatenate([values(t["y"]) for t in shown["data"][:1]])
        # PCA's axes are defined up to sign: compare each axis up to its sign (1e-4: fp32 means).
        for got, want in ((xs, expected[:, 0]), (ys, expected[:, 1])):
            assert min(np.abs(got - want).max(), np.abs(got + want).max()) < 1e-4, (model, got, want)

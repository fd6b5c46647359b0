"""Models compared on the real ProteinGym assay in ../shared/dms (#35 item 5): ``flamino dms -m A
--compare B`` writes a column per model and a comparison JSON whose every number is recomputed
here from the CSV with scipy / NumPy (two random two-layer models of two families: what is
checked is the comparison, not biology; each family's scores are checked against its reference
in test_family_parity.py and test_ensemble.py)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import scipy.stats

from flamino_core.variants.compare import MAX_MODELS, compare_models, top_shared

ASSAY = "A0A1I9GEU1_NEIME_Kennouche_2019"


def test_flamino_dms_compares_two_models_on_a_real_assay(tmp_path, shared_fasta):
    from flamino_core.cli import main

    dms = shared_fasta.parent / "dms" / f"{ASSAY}.csv"
    out, comparison = tmp_path / "scores.csv", tmp_path / "comparison.json"
    code = main(["dms", str(dms), "-m", "random:tiny", "--compare", "random:tiny-esm1b", "-o", str(out),
                 "--metrics", str(tmp_path / "m.json"), "--comparison", str(comparison)])
    assert code == 0
    frame, result = pd.read_csv(out), json.loads(comparison.read_text())
    a, b = frame["score_random:tiny"].to_numpy(), frame["score_random:tiny-esm1b"].to_numpy()
    np.testing.assert_array_equal(a, frame["score"])  # -m's score is its column
    truth = frame["DMS_score"].to_numpy()
    assert result["n_scored"] == len(frame) == 922
    # The CSV holds 6 significant digits: Spearman on it is the JSON's to rounding of ranks' ties.
    for name, values in (("random:tiny", a), ("random:tiny-esm1b", b)):
        assert abs(result["metrics"][name]["spearman"] - scipy.stats.spearmanr(truth, values).statistic) < 1e-4
    between = result["spearman_between_models"]["random:tiny"]["random:tiny-esm1b"]
    assert abs(between - scipy.stats.spearmanr(a, b).statistic) < 1e-4
    top_a, top_b = a >= np.percentile(a, 90), b >= np.percentile(b, 90)
    assert result["top10_shared"]["random:tiny"]["random:tiny-esm1b"] == pytest.approx((top_a & top_b).sum() / top_a.sum(),
                                                                                       abs=2 / top_a.sum())
    assert result["top10_shared"]["random:tiny"]["random:tiny"] == 1.0


def test_top_shared_and_the_model_count():
    a = np.arange(100.0)
    assert top_shared(a, a) == 1.0 and top_shared(a, -a) == 0.0
    assert top_shared(a, np.r_[a[:95], -a[95:]]) == pytest.approx(5 / 10)  # the 10 best by a (>= 89.1): 90..99
    with pytest.raises(ValueError, match=f"compare 1 to {MAX_MODELS} different models"):
        compare_models(lambda m: None, [f"m{i}" for i in range(MAX_MODELS + 1)])
    with pytest.raises(ValueError, match="different models"):
        compare_models(lambda m: None, ["a", "a"])


def test_compare_needs_somewhere_to_write(tmp_path, shared_fasta, capsys):
    from flamino_core.cli import main

    dms = shared_fasta.parent / "dms" / f"{ASSAY}.csv"
    code = main(["dms", str(dms), "--compare", "random:tiny", "-o", str(tmp_path / "s.csv"),
                 "--metrics", str(tmp_path / "m.json")])
    assert code != 0 and "--compare needs --comparison" in capsys.readouterr().err


def test_the_scatter_of_one_model_against_another():
    from flamino_core.variants.compare import Comparison
    from flamino_core.variants.figures import model_scatter

    frame = pd.DataFrame({"mutant": ["A1C", "A1D", "K2E"], "DMS_score": [0.1, -1.0, 0.5],
                          "score_x": [1.0, 2.0, 3.0], "score_y": [3.0, 1.0, 2.0], "status": ["ok"] * 3})
    table = pd.DataFrame({"x": {"x": 1.0, "y": -0.5}, "y": {"x": -0.5, "y": 1.0}})
    shared = pd.DataFrame({"x": {"x": 1.0, "y": 0.0}, "y": {"x": 0.0, "y": 1.0}})
    comparison = Comparison(["x", "y"], ["score_x", "score_y"], frame, np.array([True, True, False]), {},
                            table, shared)
    figure = model_scatter(comparison, "x", "y")
    (points,) = figure.data
    assert list(points.x) == [1.0, 2.0] and list(points.y) == [3.0, 1.0] and list(points.text) == ["A1C", "A1D"]
    title = figure.layout.title.text
    assert "y against x" in title and "Spearman ρ -0.500" in title and "top 10% shared 0%" in title and "n = 2" in title

"""``flamino fit`` / ``flamino predict`` on the real ProteinGym assay in ../shared/dms/: every row
gets an out-of-fold prediction, the statistics equal scipy's / scikit-learn's on the written CSV,
the fit is reimplemented here with scikit-learn directly on the same features and folds, and the
saved predictor (JSON + NPZ) reloads to the same predictions.

The model is ``random:tiny`` (random weights): the embedding and zero-shot numbers are noise, which
is all these tests need: they check the arithmetic of the fit, not biology.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import scipy.stats
from sklearn.linear_model import RidgeCV
from sklearn.model_selection import KFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from flamino_core.numbering import Numbering
from flamino_core.cli import main

DMS_DIR = Path(__file__).resolve().parents[3] / "shared" / "dms"
ASSAY = DMS_DIR / "A0A1I9GEU1_NEIME_Kennouche_2019.csv"
WILD_TYPE = DMS_DIR / "A0A1I9GEU1_NEIME_Kennouche_2019.wt.fa"
MODEL = "random:tiny"
LAST_LAYER = 2  # ESM2Config.tiny(): two layers
# The ridge grid docs/predict.md documents: 1e-2 ... 1e5 in half decades.
ALPHAS = 10.0 ** np.arange(-2, 5.5, 0.5)
AMINO_ACIDS = "ACDEFGHIKLMNPQRSTVWY"
# Predictions are recomputed here with the same scikit-learn estimators on the same float64
# features; only the order of floating-point sums may differ (scikit-learn is deterministic), so
# values of order 1 agree far below 1e-6, the bound.
ATOL = 1e-6


@pytest.fixture(autouse=True)
def one_blas_thread():
    """The references below are computed with the arithmetic ``flamino fit`` uses: scikit-learn on
    one BLAS thread (``predictors.worker.run_on_one_thread``). On two threads OpenBLAS sums in
    another order, and the augmented column's 1e4 scale amplifies that to 2.3e-6 in the ridge's
    predictions (measured 2026-12-07), over the 1e-6 bound below for no fault of either side."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        yield


@pytest.fixture(scope="module")
def assay() -> pd.DataFrame:
    if not ASSAY.is_file():
        pytest.skip(f"the ProteinGym assay is not at {ASSAY}")
    return pd.read_csv(ASSAY)


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory):
    """One result store for the module: the fits below share their embeddings through it."""
    return tmp_path_factory.mktemp("store")


@pytest.fixture(scope="module")
def fitted(assay, store_dir, tmp_path_factory):
    """``flamino fit`` with embedding features, every feature set compared (random 5 folds)."""
    out = tmp_path_factory.mktemp("fit")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FLAMINO_CACHE", str(store_dir))
        code = main(["fit", str(ASSAY), "--target", "DMS_score", "--features", "embedding", "-m", MODEL,
                     "-o", str(out / "oof.csv"), "--metrics", str(out / "m.json"), "--save-model", str(out / "model")])
    assert code == 0
    return out, pd.read_csv(out / "oof.csv"), json.loads((out / "m.json").read_text())


def onehot(sequences) -> np.ndarray:
    """One-hot residues written independently of flamino: position-major, alphabetical letters."""
    X = np.zeros((len(sequences), len(sequences[0]) * 20))
    for row, sequence in enumerate(sequences):
        for position, aa in enumerate(sequence):
            X[row, position * 20 + AMINO_ACIDS.index(aa)] = 1.0
    return X


def reference_oof(X: np.ndarray, y: np.ndarray, folds: np.ndarray, standardise: bool) -> np.ndarray:
    """Out-of-fold ridge predictions, regularisation by RidgeCV's leave-one-out on the training fold."""
    predictions = np.full(len(y), np.nan)
    for fold in np.unique(folds):
        test = folds == fold
        model = make_pipeline(StandardScaler(), RidgeCV(alphas=ALPHAS)) if standardise else RidgeCV(alphas=ALPHAS)
        predictions[test] = model.fit(X[~test], y[~test]).predict(X[test])
    return predictions


def random_folds(n: int) -> np.ndarray:
    """The documented random folds: scikit-learn KFold(5, shuffle=True, random_state=0) over the rows."""
    folds = np.empty(n, dtype=int)
    for fold, (_, test) in enumerate(KFold(5, shuffle=True, random_state=0).split(np.arange(n))):
        folds[test] = fold
    return folds


def stored_embeddings(store_dir, sequences, monkeypatch) -> np.ndarray:
    """The embedding features as the result store holds them (the fit is what is reimplemented)."""
    from flamino_core.engine.engine import Engine
    from flamino_core.store.passes import record_outputs
    from flamino_core.weights.loading import load_weights

    monkeypatch.setenv("FLAMINO_CACHE", str(store_dir))
    engine = Engine(load_weights(MODEL))
    outputs = record_outputs(engine, list(sequences))
    # They are the model's mean embeddings: the engine's own final-layer mean, one record at a time.
    for sequence, out in zip(sequences[:3], outputs[:3]):
        (direct,) = engine.run([sequence], repr_layers=(LAST_LAYER,))
        np.testing.assert_allclose(out.means[LAST_LAYER], direct.representations[LAST_LAYER].mean(0), atol=1e-5)
    return np.stack([out.means[LAST_LAYER] for out in outputs]).astype(np.float64)


def test_fit_gives_every_row_an_out_of_fold_prediction_and_scipys_spearman(fitted, assay):
    _, oof, metrics = fitted
    assert len(oof) == len(assay) == metrics["n_rows"] == metrics["n_evaluated"]
    assert list(oof.columns) == list(assay.columns) + ["prediction", "fold"]
    assert oof["prediction"].notna().all() and np.isfinite(oof["prediction"]).all()
    assert sorted(oof["fold"].unique()) == [0, 1, 2, 3, 4]
    np.testing.assert_array_equal(oof["fold"].to_numpy(), random_folds(len(assay)))
    spearman = scipy.stats.spearmanr(oof["DMS_score"], oof["prediction"]).statistic
    assert metrics["spearman"] == pytest.approx(spearman, abs=1e-12)
    assert metrics["random_weights"] is True and metrics["model"] == MODEL


def test_feature_sets_side_by_side_with_intervals(fitted):
    _, _, metrics = fitted
    rows = {row["features"]: row for row in metrics["comparison"]}
    assert {"onehot", "embedding", "augmented", "zero-shot"} <= set(rows)
    assert rows["onehot"]["uses_model"] is False and rows["embedding"]["uses_model"] is True
    for name in ("onehot", "embedding", "augmented"):
        row = rows[name]
        assert row["n"] == 922 and row["n_resamples"] == 1000
        assert row["spearman_low"] < row["spearman"] < row["spearman_high"], row
    assert rows["embedding"]["spearman"] == metrics["spearman"]
    # The zero-shot score alone uses no label: its Spearman is the score's against DMS_score.
    curve = metrics["learning_curve"]["embedding"]
    sizes = [point["train_size"] for point in curve]
    assert sizes == sorted(sizes) and sizes[-1] in (737, 738)  # 4/5 of 922 rows


def test_embedding_fit_equals_scikit_learn_on_the_same_features_and_folds(fitted, assay, store_dir, monkeypatch):
    _, oof, _ = fitted
    X = stored_embeddings(store_dir, assay["mutated_sequence"].tolist(), monkeypatch)
    reference = reference_oof(X, assay["DMS_score"].to_numpy(float), random_folds(len(assay)), standardise=True)
    np.testing.assert_allclose(oof["prediction"].to_numpy(), reference, rtol=0, atol=ATOL)


def run_fit(tmp_path, *extra) -> tuple[pd.DataFrame, dict]:
    code = main(["fit", str(ASSAY), "--target", "DMS_score", "-m", MODEL, "-o", str(tmp_path / "o.csv"),
                 "--metrics", str(tmp_path / "m.json"), "--save-model", str(tmp_path / "model"), *extra])
    assert code == 0
    return pd.read_csv(tmp_path / "o.csv"), json.loads((tmp_path / "m.json").read_text())


def test_onehot_and_augmented_fits_equal_scikit_learn(fitted, assay, store_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("FLAMINO_CACHE", str(store_dir))
    compared = {row["features"]: row for row in fitted[2]["comparison"]}
    folds = random_folds(len(assay))
    y = assay["DMS_score"].to_numpy(float)
    X = onehot(assay["mutated_sequence"].tolist())
    oof, metrics = run_fit(tmp_path, "--features", "onehot", "--no-compare")
    np.testing.assert_allclose(oof["prediction"].to_numpy(), reference_oof(X, y, folds, False), rtol=0, atol=ATOL)
    assert metrics["spearman"] == pytest.approx(compared["onehot"]["spearman"], abs=1e-12)  # the same folds

    # Augmented (Hsu et al. 2022): one-hot plus the zero-shot score scaled by sqrt(1 / 1e-8),
    # as their JointPredictor does; the score is flamino variants' masked-marginals.
    from flamino_core.engine.engine import Engine
    from flamino_core.variants.notation import parse_variant
    from flamino_core.variants.scoring import score_variants
    from flamino_core.weights.loading import load_weights

    wild_type = "".join(WILD_TYPE.read_text().split("\n", 1)[1].split())
    variants = [parse_variant(m, wild_type, Numbering(1), n) for n, m in enumerate(assay["mutant"])]
    scores = score_variants(Engine(load_weights(MODEL)), wild_type, variants).table["score"].to_numpy(float)
    augmented = np.hstack([X, 1e4 * scores[:, None]])
    oof, metrics = run_fit(tmp_path, "--features", "augmented", "--no-compare")
    np.testing.assert_allclose(oof["prediction"].to_numpy(), reference_oof(augmented, y, folds, False),
                               rtol=0, atol=ATOL)
    assert metrics["spearman"] == pytest.approx(compared["augmented"]["spearman"], abs=1e-12)


def test_a_refit_runs_no_model_pass(fitted, store_dir, tmp_path, monkeypatch):
    """Embeddings come from the result store: another fit of the same table runs nothing."""
    from flamino_core.engine.engine import Engine

    def refuse(*args, **kwargs):
        raise AssertionError("the model ran")

    monkeypatch.setenv("FLAMINO_CACHE", str(store_dir))
    monkeypatch.setattr(Engine, "run", refuse)
    oof, metrics = run_fit(tmp_path, "--features", "embedding", "--no-compare", "--folds", "random")
    assert metrics["spearman"] == fitted[2]["spearman"]


def test_saved_predictor_reloads_to_the_final_models_predictions(fitted, assay, store_dir, tmp_path, monkeypatch):
    """``flamino predict`` on the saved folder (and on the app's .zip of it) gives the model fitted
    on every row, reimplemented here; the files are plain JSON and a pickle-free NPZ."""
    out, _, _ = fitted
    meta = json.loads((out / "model" / "predictor.json").read_text())
    assert meta["format"] == "flamino-predictor" and meta["version"] == 1 and meta["random_weights"] is True
    assert meta["features"] == {"kind": "embedding", "layer": LAST_LAYER} and meta["model"] == MODEL
    with np.load(out / "model" / "coefficients.npz", allow_pickle=False) as arrays:
        assert sorted(arrays.files) == ["coef", "intercept", "mean", "scale"]
    X = stored_embeddings(store_dir, assay["mutated_sequence"].tolist(), monkeypatch)
    final = make_pipeline(StandardScaler(), RidgeCV(alphas=ALPHAS)).fit(X, assay["DMS_score"].to_numpy(float))
    assert meta["regularisation"]["alpha"] == final[-1].alpha_
    assert main(["predict", str(out / "model"), str(ASSAY), "-o", str(tmp_path / "p.csv")]) == 0
    predicted = pd.read_csv(tmp_path / "p.csv")
    assert list(predicted.columns) == list(assay.columns) + ["prediction"]
    np.testing.assert_allclose(predicted["prediction"].to_numpy(), final.predict(X), rtol=0, atol=ATOL)
    archive = tmp_path / "model.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        for name in ("predictor.json", "coefficients.npz"):
            zipped.write(out / "model" / name, name)
    assert main(["predict", str(archive), str(ASSAY), "-o", str(tmp_path / "z.csv")]) == 0
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "z.csv"), predicted)


def test_predict_the_substitution_map(fitted, assay, store_dir, tmp_path, monkeypatch):
    """``--singles``: every single substitution of the record; the assay's own mutants get the
    same prediction as in the table (they are the same sequences)."""
    out, _, _ = fitted
    monkeypatch.setenv("FLAMINO_CACHE", str(store_dir))
    assert main(["predict", str(out / "model"), str(WILD_TYPE), "--singles", "-o", str(tmp_path / "map.csv")]) == 0
    assert main(["predict", str(out / "model"), str(ASSAY), "-o", str(tmp_path / "p.csv")]) == 0
    grid = pd.read_csv(tmp_path / "map.csv")
    assert list(grid.columns) == ["record_id", "position", "wt", "mt", "prediction"] and len(grid) == 161 * 20
    by_name = {f"{w}{p}{m}": v for w, p, m, v in zip(grid["wt"], grid["position"], grid["mt"], grid["prediction"])}
    table = pd.read_csv(tmp_path / "p.csv")
    np.testing.assert_allclose([by_name[m] for m in table["mutant"]], table["prediction"], rtol=0, atol=ATOL)
    wild = grid[grid["wt"] == grid["mt"]]["prediction"]
    assert np.ptp(wild) < ATOL  # every wild-type cell holds the wild type's own prediction


def test_classification_on_the_fitness_bins(assay, tmp_path):
    """DMS_score_bin (0/1) is classified: AUC and MCC equal scikit-learn's on the CSV, the majority
    class baseline sits beside it (AUC 0.5, MCC 0). Every third row of the assay (308 rows, 157
    and 151 in the two bins): the path is the same as for all 922, and the 21 logistic fits of the
    whole assay took 47-69 s of the suite (2026-12-06/07) for nothing more to check."""
    from sklearn.metrics import matthews_corrcoef, roc_auc_score

    table = tmp_path / "every_third_row.csv"
    assay.iloc[::3].to_csv(table, index=False)
    code = main(["fit", str(table), "--target", "DMS_score_bin", "--features", "onehot", "--no-compare", "-m", MODEL,
                 "-o", str(tmp_path / "o.csv"), "--metrics", str(tmp_path / "m.json"),
                 "--save-model", str(tmp_path / "model")])
    assert code == 0
    oof = pd.read_csv(tmp_path / "o.csv")
    metrics = json.loads((tmp_path / "m.json").read_text())
    assert metrics["task"] == "classification"
    assert list(oof.columns)[-4:] == ["prediction", "fold", "probability_0", "probability_1"]
    assert metrics["auc"] == pytest.approx(roc_auc_score(oof["DMS_score_bin"], oof["probability_1"]), abs=1e-12)
    assert metrics["mcc"] == pytest.approx(matthews_corrcoef(oof["DMS_score_bin"], oof["prediction"]), abs=1e-12)
    majority = next(row for row in metrics["comparison"] if row["features"] == "majority")
    assert majority["auc"] == 0.5 and majority["mcc"] == 0.0 and majority["uses_model"] is False


def test_fold_columns_are_used_as_given(assay, tmp_path):
    """A ProteinGym fold column (here fold_modulo_5, position modulo 5) decides the folds."""
    table = assay.copy()
    positions = table["mutant"].str[1:-1].astype(int)
    table["fold_modulo_5"] = positions % 5
    path = tmp_path / "folds.csv"
    table.to_csv(path, index=False)
    code = main(["fit", str(path), "--target", "DMS_score", "--features", "onehot", "--folds", "fold_modulo_5",
                 "--no-compare", "-m", MODEL, "-o", str(tmp_path / "o.csv"), "--metrics", str(tmp_path / "m.json"),
                 "--save-model", str(tmp_path / "model")])
    assert code == 0
    oof = pd.read_csv(tmp_path / "o.csv")
    np.testing.assert_array_equal(oof["fold"], table["fold_modulo_5"])
    y = table["DMS_score"].to_numpy(float)
    reference = reference_oof(onehot(table["mutated_sequence"].tolist()), y, table["fold_modulo_5"].to_numpy(), False)
    np.testing.assert_allclose(oof["prediction"], reference, rtol=0, atol=ATOL)


def test_a_mutant_table_with_the_wild_type_as_fasta(assay, tmp_path):
    """A mutant column alone (no mutated_sequence) is read against --sequence."""
    path = tmp_path / "mutants.csv"
    assay[["mutant", "DMS_score"]].to_csv(path, index=False)
    code = main(["fit", str(path), "--target", "DMS_score", "--sequence", str(WILD_TYPE), "--features", "onehot",
                 "--no-compare", "-m", MODEL, "-o", str(tmp_path / "o.csv"), "--metrics", str(tmp_path / "m.json"),
                 "--save-model", str(tmp_path / "model")])
    assert code == 0
    oof = pd.read_csv(tmp_path / "o.csv")
    y = assay["DMS_score"].to_numpy(float)
    reference = reference_oof(onehot(assay["mutated_sequence"].tolist()), y, random_folds(len(y)), False)
    np.testing.assert_allclose(oof["prediction"], reference, rtol=0, atol=ATOL)


@pytest.mark.parametrize("argv, message", [
    (["--target", "fitness"], "no column 'fitness' to predict"),
    (["--target", "DMS_score", "--folds", "fold_contiguous_5"], "no column 'fold_contiguous_5'"),
])
def test_clear_errors(argv, message, tmp_path, capsys):
    code = main(["fit", str(ASSAY), *argv, "--features", "onehot", "-m", MODEL, "-o", str(tmp_path / "o.csv"),
                 "--metrics", str(tmp_path / "m.json"), "--save-model", str(tmp_path / "model")])
    assert code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "o.csv").exists()


def test_sequences_of_different_lengths(tmp_path, capsys):
    """A table of sequences: one-hot is refused (lengths differ), composition is the baseline."""
    rng = np.random.default_rng(7)
    rows = []
    for n in range(40):
        sequence = "".join(rng.choice(list(AMINO_ACIDS), size=int(rng.integers(20, 40))))
        rows.append((sequence, sequence.count("K") / len(sequence) + rng.normal(0, 0.01)))
    path = tmp_path / "sequences.csv"
    pd.DataFrame(rows, columns=["sequence", "charge"]).to_csv(path, index=False)
    args = ["fit", str(path), "--target", "charge", "-m", MODEL, "-o", str(tmp_path / "o.csv"),
            "--metrics", str(tmp_path / "m.json"), "--save-model", str(tmp_path / "model")]
    assert main([*args, "--features", "onehot"]) == 2
    assert "onehot features need sequences of one length" in capsys.readouterr().err
    assert main(args) == 0
    metrics = json.loads((tmp_path / "m.json").read_text())
    rows = {row["features"]: row for row in metrics["comparison"]}
    assert set(rows) == {"composition", "embedding"}
    # The K fraction is in the composition features: the baseline finds it.
    assert rows["composition"]["spearman"] > 0.9

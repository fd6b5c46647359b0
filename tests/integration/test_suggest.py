"""``flamino suggest`` on a real record (the wild type of the shared ProteinGym assay), with two
models that must agree (two untrained ``random:tiny`` models of different seeds: their numbers are
noise, enough to check the rule): only substitutions above the threshold under both, keep/avoid
honoured, and every score equal to ``flamino variants`` on the same mutants. The wt-marginal
log-ratios the rule reads are taken from ``flamino score --strategy wt-marginals``'s map."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from flamino_core.cli import main

DMS_DIR = Path(__file__).resolve().parents[3] / "shared" / "dms"
WILD_TYPE = DMS_DIR / "A0A1I9GEU1_NEIME_Kennouche_2019.wt.fa"
MODELS = ("random:tiny:1", "random:tiny:2")
STRATEGIES = ("masked-marginals", "wt-marginals", "joint-masked", "pll")
KEEP = "1-20,45"
AVOID = "C,P"


@pytest.fixture(scope="module")
def record() -> tuple[Path, str]:
    if not WILD_TYPE.is_file():
        pytest.skip(f"the shared wild type is not at {WILD_TYPE}")
    return WILD_TYPE, "".join(WILD_TYPE.read_text().split("\n", 1)[1].split())


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return tmp_path_factory.mktemp("store")


def run(monkeypatch, store, *argv) -> int:
    monkeypatch.setenv("FLAMINO_CACHE", str(store))
    return main(list(argv))


@pytest.fixture(scope="module")
def suggested(record, store, tmp_path_factory) -> pd.DataFrame:
    out = tmp_path_factory.mktemp("suggest") / "s.csv"
    with pytest.MonkeyPatch.context() as patch:
        code = run(patch, store, "suggest", str(record[0]), "-m", MODELS[0], "-m", MODELS[1], "--keep", KEEP,
                   "--avoid", AVOID, "--top", "12", "--combine", "3", "-o", str(out))
    assert code == 0
    return pd.read_csv(out, dtype={"mutant": str})


@pytest.fixture(scope="module")
def wt_marginals(record, store, tmp_path_factory) -> dict[str, dict[str, float]]:
    """{model: {A23V: wt-marginal log-ratio}} from ``flamino score``'s full map."""
    maps = {}
    with pytest.MonkeyPatch.context() as patch:
        for model in MODELS:
            out = tmp_path_factory.mktemp("score") / "map.csv"
            assert run(patch, store, "score", str(record[0]), "-m", model, "--strategy", "wt-marginals",
                       "-o", str(out)) == 0
            table = pd.read_csv(out)
            maps[model] = {f"{w}{p}{m}": s for w, p, m, s in zip(table["wt"], table["position"], table["mt"],
                                                                 table["score"])}
    return maps


def column(strategy: str, model: str) -> str:
    return f"{strategy} ({model})"


def test_only_substitutions_above_the_threshold_under_every_model(suggested, wt_marginals, record):
    singles = suggested[suggested["kind"] == "single"]
    assert len(singles) == 12 and list(singles["rank"]) == list(range(1, 13))
    for mutant in singles["mutant"]:
        assert all(wt_marginals[model][mutant] > 0 for model in MODELS), mutant
    # Ranked by the mean over the models; nothing allowed and agreed by both is left out above the last kept.
    means = {m: np.mean([wt_marginals[model][m] for model in MODELS]) for m in wt_marginals[MODELS[0]]}
    kept = [means[m] for m in singles["mutant"]]
    # Both CSVs hold 6 significant digits of scores of order 1: half a unit of the 6th is <= 5e-6
    # each, so a mean read back from them is within 1e-5 and a consensus written again within 2e-5.
    assert all(a >= b - 2e-5 for a, b in zip(kept, kept[1:]))
    np.testing.assert_allclose(singles["consensus"], kept, atol=2e-5)
    sequence = record[1]
    fixed = set(range(1, 21)) | {45}
    better = [m for m, v in means.items() if v > kept[-1] + 2e-5 and m[0] != m[-1] and m not in set(singles["mutant"])
              and int(m[1:-1]) not in fixed and m[-1] not in "CP"
              and all(wt_marginals[model][m] > 0 for model in MODELS)]
    assert better == []
    assert len(sequence) == 161


def test_keep_and_avoid_are_honoured(suggested):
    for mutant in suggested["mutant"]:
        for change in mutant.split(":"):
            assert int(change[1:-1]) not in set(range(1, 21)) | {45}, mutant
            assert change[-1] not in "CP", mutant


def test_a_higher_threshold_and_explore(record, store, tmp_path, wt_marginals, monkeypatch):
    out = tmp_path / "s.csv"
    assert run(monkeypatch, store, "suggest", str(record[0]), "-m", MODELS[0], "--explore", "30-60",
               "--threshold", "0.5", "--top", "200", "--combine", "0", "--strategies", "wt-marginals",
               "-o", str(out)) == 0
    table = pd.read_csv(out)
    assert (table["kind"] == "single").all() and list(table.columns) == [
        "record_id", "kind", "rank", "mutant", "n_mutations", "consensus", "wt-marginals"]
    assert all(30 <= int(m[1:-1]) <= 60 for m in table["mutant"])
    expected = {m for m, v in wt_marginals[MODELS[0]].items() if 30 <= int(m[1:-1]) <= 60 and v > 0.5 + 1e-5}
    borderline = {m for m, v in wt_marginals[MODELS[0]].items() if 30 <= int(m[1:-1]) <= 60 and abs(v - 0.5) <= 1e-5}
    assert expected <= set(table["mutant"]) <= expected | borderline
    assert (table["wt-marginals"] > 0.5).all()


def test_scores_equal_flamino_variants_on_the_same_mutants(suggested, record, store, tmp_path, monkeypatch):
    """Every proposal and combination, under every strategy and model, is the number ``flamino
    variants`` writes for that mutant (both write 6 significant digits of the same function)."""
    mutants = list(suggested["mutant"])
    assert (suggested["kind"] == "combination").sum() == 4  # 3 proposals: 3 doubles and the triple
    for model in MODELS:
        for strategy in STRATEGIES:
            out = tmp_path / f"{strategy}.csv"
            assert run(monkeypatch, store, "variants", str(record[0]), "--mutations", ", ".join(mutants),
                       "--strategy", strategy, "-m", model, "-o", str(out)) == 0
            reference = pd.read_csv(out, dtype={"mutant": str})
            assert list(reference["mutant"]) == mutants
            np.testing.assert_array_equal(suggested[column(strategy, model)].to_numpy(), reference["score"].to_numpy())
            if strategy == "joint-masked":
                np.testing.assert_array_equal(suggested[column("non_additivity", model)].to_numpy(),
                                              reference["non_additivity"].to_numpy())


def test_combinations_flag_non_additivity(suggested):
    combos = suggested[suggested["kind"] == "combination"]
    assert set(combos["n_mutations"]) == {2, 3}
    singles = set(suggested[suggested["kind"] == "single"]["mutant"])
    for mutant in combos["mutant"]:
        assert set(mutant.split(":")) <= singles
    worst = combos[[column("non_additivity", m) for m in MODELS]].abs().max(axis=1)
    assert (combos["non_additive"] == (worst >= 1.0)).all()
    assert not suggested[suggested["kind"] == "single"]["non_additive"].any()


def test_constraints_that_leave_nothing_are_refused(record, tmp_path, capsys):
    assert main(["suggest", str(record[0]), "-m", MODELS[0], "--keep", "1-161", "-o", str(tmp_path / "s.csv")]) == 2
    assert "leave no substitution" in capsys.readouterr().err
    assert main(["suggest", str(record[0]), "-m", MODELS[0], "--keep", "170", "-o", str(tmp_path / "s.csv")]) == 2
    assert "outside the sequence (1-161)" in capsys.readouterr().err
    assert main(["suggest", str(record[0]), "-m", MODELS[0], "--avoid", "B", "-o", str(tmp_path / "s.csv")]) == 2
    assert "not among the 20 standard amino acids" in capsys.readouterr().err

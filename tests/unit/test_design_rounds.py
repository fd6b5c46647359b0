"""Design rounds (``flamino_core.design``) on the real ProteinGym assay in ../shared/dms/: the
Gaussian process against scikit-learn's own predictions, its posterior draws, the calibration of
its intervals, the acquisitions' diversity rules, the candidate pool and its constraints, and
proposals reproduced from the same seed. One-hot features only: no model runs here.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from flamino_core.design import campaign
from flamino_core.design.acquisition import Diversity, select, similarity
from flamino_core.design.candidates import Measured, build_pool, read_given
from flamino_core.design.gaussian_process import DesignError, LinearGP, calibration, centred
from flamino_core.design.proposals import Settings, design_matrix, propose
from flamino_core.numbering import Numbering
from flamino_core.predictors.suggest import Constraints
from flamino_core.predictors.table import parse_labelled_table

DMS = Path(__file__).resolve().parents[3] / "shared" / "dms" / "A0A1I9GEU1_NEIME_Kennouche_2019.csv"


@pytest.fixture(scope="module")
def assay():
    table = parse_labelled_table(DMS.read_bytes(), "DMS_score", task="regression")
    rows = np.flatnonzero(table.labelled)
    variants = [table.variants[r] for r in rows]
    sequences = [table.sequences[r] for r in rows]
    X = design_matrix("onehot", table.wild_type, sequences, len(sequences))
    return table.wild_type, variants, sequences, table.values[rows].astype(float), X


def measured_rows(assay, rows) -> Measured:
    _, variants, sequences, y, _ = assay
    return Measured([variants[r] for r in rows], [sequences[r] for r in rows], y[rows], np.ones(len(rows), int))


def test_one_hot_is_centred_on_the_wild_type(assay):
    wild_type, variants, _, _, X = assay
    # a single substitution: -1 at the wild-type letter's column, +1 at the new one, nothing else
    assert (X.getnnz(axis=1) == 2).all()
    assert sorted(X[0].data) == [-1.0, 1.0]
    s = variants[0].substitutions[0]
    columns = set(X[0].indices)
    order = "ACDEFGHIKLMNPQRSTVWY"  # the columns' order within a position (STANDARD_AMINO_ACIDS)
    assert columns == {s.index * 20 + order.index(s.wt), s.index * 20 + order.index(s.mt)}


def test_predictions_equal_scikit_learns_on_the_training_columns(assay):
    *_, y, X = assay
    rows = np.random.default_rng(0).permutation(len(y))[:96]
    gp = LinearGP(0).fit(X[rows], y[rows])
    # scikit-learn predicts the rows it has the columns of: the training rows themselves
    mean, sd = gp.gpr.predict(gp.X_used, return_std=True)
    ours = gp.predict(X[rows])
    np.testing.assert_allclose(ours.mean, mean, rtol=0, atol=1e-9)  # the same arithmetic, reordered
    np.testing.assert_allclose(ours.sd, sd, rtol=0, atol=1e-9)
    # a candidate whose substitution no training row carries keeps that column's prior variance
    unseen = np.setdiff1d(np.arange(len(y)), rows)
    post = gp.predict(X[unseen])
    assert (post.sd > post.sd_latent).all() and (post.sd_latent > 0).all()
    assert np.all(post.low < post.mean) and np.all(post.mean < post.high)


def test_posterior_draws_have_the_posteriors_mean_and_sd(assay):
    *_, y, X = assay
    rows = np.arange(0, len(y), 7)
    gp = LinearGP(0).fit(X[rows], y[rows])
    targets = X[np.arange(1, 200, 20)]
    draws = gp.sample(targets, 4000, np.random.default_rng(1))
    post = gp.predict(targets)
    # 4000 draws: the standard error of a mean is sd / 63, of an sd about sd / 89; 5 of them
    # bound every one of the 10 targets with room (a wrong correction term is off by ~sd).
    assert np.all(np.abs(draws.mean(axis=0) - post.mean) < 5 * post.sd_latent / math.sqrt(4000))
    assert np.all(np.abs(draws.std(axis=0) - post.sd_latent) < 5 * post.sd_latent / math.sqrt(2 * 4000))


def test_intervals_hold_80_percent_of_held_out_measurements(assay):
    *_, y, X = assay
    rows = np.random.default_rng(0).permutation(len(y))[:144]  # six plates of 24
    result = calibration(X[rows], y[rows], seed=0)
    # The bar: within 10 points of 80% on held-out folds (measured: 0.81 here, 0.83 on all
    # 922 rows). 144 rows: a calibrated interval's coverage has a binomial sd of 3.3 points.
    assert result["n"] == 144 and result["within"]
    assert abs(result["coverage"] - 0.8) <= 0.10
    assert calibration(X[rows[:8]], y[rows[:8]])["coverage"] is None  # too few to hold out


def test_too_few_measurements_are_refused(assay):
    *_, y, X = assay
    with pytest.raises(DesignError, match="at least 3"):
        LinearGP(0).fit(X[:2], y[:2])


def test_no_two_proposals_at_one_position_and_near_duplicates_penalised():
    subs = [frozenset({(1, "A")}), frozenset({(1, "C")}), frozenset({(2, "A")}), frozenset({(1, "A"), (3, "D")}),
            frozenset({(4, "E")})]
    values = np.array([5.0, 4.9, 4.0, 4.8, 0.5])
    pick = lambda rule: [c.index for c in select(subs, 5, lambda k: values, lambda k, j, p: "", rule)]  # noqa: E731
    assert pick(Diversity(per_position=1, penalty=0.0)) == [0, 2, 4]  # 1 and 3 share position 1 with 0
    # no position rule, no penalty: by value. With a penalty of 2 sds x similarity 0.5 (the sd of
    # the open values: 1.78 after the first pick), the other letter at position 1 (4.9 - 1.78)
    # and the double holding the pick (4.8 - 1.78) fall behind position 2's 4.0; then they come
    # back in their order, the penalty being the same for both.
    assert pick(Diversity(per_position=None, penalty=0.0)) == [0, 1, 3, 2, 4]
    assert pick(Diversity(per_position=None, penalty=2.0)) == [0, 2, 1, 3, 4]
    assert similarity(subs[0], subs[1]) == 0.5 and similarity(subs[0], subs[3]) == 0.5
    assert similarity(subs[0], subs[2]) == 0.0 and similarity(subs[0], subs[0]) == 1.0


def test_ties_are_broken_by_the_seed_not_the_pool_order():
    subs = [frozenset({(i, "A")}) for i in range(50)]
    values = np.zeros(50)
    picks = lambda seed: [c.index for c in select(subs, 5, lambda k: values, lambda k, j, p: "",  # noqa: E731
                                                  rng=np.random.default_rng(seed))]
    assert picks(0) == picks(0) and picks(0) != picks(1) and picks(0) != [0, 1, 2, 3, 4]


def test_the_pool_keeps_the_constraints_and_combines_the_good_singles(assay):
    wild_type, variants, sequences, y, _ = assay
    best = np.argsort(-y)[:3]  # W57S, Q32K, I37M: three positions
    # and the 4 worst: the median of the 7 is the highest of those, so only the 3 are above it
    measured = measured_rows(assay, np.concatenate([best, np.argsort(y)[:4]]))
    keep = frozenset(range(0, 20))
    pool = build_pool(wild_type, Numbering(), measured, Constraints(keep=keep, avoid=frozenset("CP")), max_mutations=2)
    assert not set(pool.sequences) & set(measured.sequences)
    for variant in pool.variants:
        assert all(s.index not in keep and s.mt not in "CP" for s in variant.substitutions)
        assert 1 <= len(variant.substitutions) <= 2
    multis = [j for j, kind in enumerate(pool.kinds) if kind == "multi-mutant"]
    names = {pool.variants[j].mutant for j in multis}
    assert names == {"Q32K:I37M", "Q32K:W57S", "I37M:W57S"}  # pairs of the 3 singles above the median
    reference = float(np.median(measured.values))  # the wild type was not measured
    j = [j for j in multis if pool.variants[j].mutant == "Q32K:W57S"][0]
    assert pool.additive[j] == pytest.approx(reference + (5.070 - reference) + (6.211 - reference))
    singles = len(pool) - len(multis)
    allowed = sum(1 for i in range(20, len(wild_type)) for aa in "ADEFGHIKLMNQRSTVWY" if aa != wild_type[i])
    measured_allowed = sum(1 for v in measured.variants if v.indices[0] >= 20 and v.substitutions[0].mt not in "CP")
    assert singles == allowed - measured_allowed


def test_given_candidates_bound_the_pool(assay):
    wild_type, variants, _, y, _ = assay
    given, problems = read_given([v.mutant for v in variants[:50]] + ["X5A", "F1F"], wild_type, Numbering())
    assert len(given) == 50 and len(problems) == 2
    pool = build_pool(wild_type, Numbering(), measured_rows(assay, np.arange(10)), given=given)
    assert [v.mutant for v in pool.variants] == [v.mutant for v in variants[10:50]]


@pytest.mark.parametrize("acquisition", ["greedy", "ucb", "thompson", "random"])
def test_proposals_are_reproduced_by_the_same_seed(assay, acquisition):
    wild_type, variants, *_ = assay
    measured = measured_rows(assay, np.arange(0, 900, 30))
    settings = Settings(batch=12, acquisition=acquisition)
    given = variants
    make = lambda seed, number: propose(wild_type, Numbering(), measured, settings, seed=seed, round_number=number,  # noqa: E731
                                        given=given).table
    first, again = make(0, 2), make(0, 2)
    pd.testing.assert_frame_equal(first, again)
    assert len(first) == 12 and first["mutant"].is_unique
    positions = [m[1:-1] for m in first["mutant"]]
    assert len(set(positions)) == 12  # the default: one proposal per position
    if acquisition in ("thompson", "random"):  # the seed and the round draw the choice
        assert list(make(1, 2)["mutant"]) != list(first["mutant"])
        assert list(make(0, 3)["mutant"]) != list(first["mutant"])
    if acquisition == "greedy":  # the highest predicted left: in decreasing order
        assert first["prediction"].is_monotonic_decreasing or len(set(positions)) == 12


def test_a_campaign_folder_round_trip(assay, tmp_path):
    wild_type, variants, _, y, _ = assay
    made = campaign.init(tmp_path / "c", wild_type, "DMS_score", seed=4, settings=Settings(batch=6),
                         candidates=pd.DataFrame({"mutant": [v.mutant for v in variants]}).to_csv(index=False).encode())
    start = pd.DataFrame({"mutant": [variants[r].mutant for r in range(0, 240, 10)], "DMS_score": y[0:240:10]})
    assert made.add_round(start.to_csv(index=False).encode(), "start.csv")[:2] == (1, 24)
    loaded = campaign.load(tmp_path / "c")
    proposals = propose(loaded.wild_type, loaded.numbering, loaded.measured(before=2), loaded.settings, seed=loaded.seed,
                        round_number=2, given=loaded.given())
    loaded.save_proposals(proposals)
    again = campaign.load(tmp_path / "c")
    assert list(again.stored_proposals(2)["mutant"]) == list(proposals.table["mutant"])
    assert again.next_round == 2 and again.round(2)["proposal"]["acquisition"] == "ucb"
    history = campaign.history(again)
    assert list(history["measured"]) == [24, 0] and list(history["proposed"]) == [0, 6]
    assert history["best_so_far"].iloc[0] == pytest.approx(y[0:240:10].max())
    with pytest.raises(DesignError, match="already holds a campaign"):
        campaign.init(tmp_path / "c", wild_type, "DMS_score")
    with pytest.raises(DesignError, match="no campaign here"):
        campaign.load(tmp_path / "nothing")


def test_a_campaign_zip_holds_only_campaign_files(assay, tmp_path):
    import io
    import zipfile

    wild_type, variants, _, y, _ = assay
    made = campaign.init(tmp_path / "c", wild_type, "DMS_score")
    start = pd.DataFrame({"mutant": [v.mutant for v in variants[:12]], "DMS_score": y[:12]})
    made.add_round(start.to_csv(index=False).encode(), "start.csv")
    (tmp_path / "c" / "notes.txt").write_text("not part of a campaign")
    data = campaign.to_zip(campaign.load(tmp_path / "c"))
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        assert sorted(archive.namelist()) == ["campaign.json", "round-1/measured.csv"]
    copy = campaign.from_zip(data, tmp_path / "copy")
    assert len(copy.measured()) == 12 and copy.next_round == 2
    strange = io.BytesIO()
    with zipfile.ZipFile(strange, "w") as archive:
        archive.writestr("campaign.json", "{}")
        archive.writestr("../escape.csv", "x")
    with pytest.raises(DesignError, match="which a campaign does not"):
        campaign.from_zip(strange.getvalue(), tmp_path / "third")
    assert not (tmp_path / "escape.csv").exists() and not (tmp_path / "third" / "campaign.json").exists()


def test_a_round_over_a_servers_table_limits_is_refused(assay, tmp_path):
    from flamino_core.inputs.tables import TableLimits

    wild_type, variants, _, y, _ = assay
    made = campaign.init(tmp_path / "c", wild_type, "DMS_score")
    table = pd.DataFrame({"mutant": [v.mutant for v in variants[:50]], "DMS_score": y[:50]}).to_csv(index=False)
    with pytest.raises(DesignError, match="rows"):
        made.add_round(table.encode(), "big.csv", TableLimits(max_rows=20))
    assert campaign.load(tmp_path / "c").rounds == []  # nothing stored
    assert made.add_round(table.encode(), "ok.csv", TableLimits(max_rows=100))[:2] == (1, 50)


def test_a_fit_that_finds_little_signal_says_so(assay):
    """400 measured variants: with their real values the process gives the features 30% of a
    candidate's variance (no note); with the same values shuffled over the variants, 10% (the note).
    (At a few dozen measurements the fitted split is unstable, 0% or 100%; the note reports the fit.)"""
    from flamino_core.design.proposals import _notes, fit_posterior, signal_fraction

    *_, y, X = assay
    rows = np.random.default_rng(0).permutation(len(y))
    train, pool = rows[:400], rows[400:]
    shuffled = np.random.default_rng(1).permutation(y)
    real = signal_fraction(fit_posterior(X[train], y[train], X[pool], 0))
    noise = signal_fraction(fit_posterior(X[train], shuffled[train], X[pool], 0))
    assert real > 0.2 > noise
    say = lambda fraction: " ".join(_notes([None] * 24, Settings(), 400, "ucb", None,  # noqa: E731
                                           {"signal_fraction": fraction}))
    assert "little the features explain" in say(noise) and "little the features explain" not in say(real)

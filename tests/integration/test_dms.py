"""DMS tables: reading, wild type, scoring, ProteinGym's metrics against references, figures."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.metrics import matthews_corrcoef, ndcg_score, roc_auc_score

from flamino_core import Engine, load_weights

from flamino_core.variants import substitution_maps as scores
from flamino_core.variants.dms import DmsError, output_frame, parse_dms, read_dms, score_dms
from flamino_core.variants.metrics import agreement_metrics, dms_metrics
from flamino_core.inputs.fasta import read_fasta
from flamino_core.numbering import Numbering
from flamino_core.variants.notation import parse_mutations
from flamino_core.variants.figures import clicked_cell, dms_heatmaps, dms_scatter, substitution_map, variant_map
from flamino_core.variants.scoring import filter_scored, score_variants

DMS_DIR = Path(__file__).resolve().parents[3] / "shared" / "dms"
ASSAY = DMS_DIR / "A0A1I9GEU1_NEIME_Kennouche_2019.csv"
HBB = "MVHLTPEEKSAVTALWGKVNVDEVGGEALGRLLVVYPWTQRFFESFGDLSTPDAVMGNPKVKAHGKKVLGAFSDGLAHLDNLKGTFATLSELHCDKLHVDPENFRLLGNVLVCVLAHHFGKEFTPPVQAAYQKVVAGVANALAHKYH"


@pytest.fixture(scope="module")
def assay():
    if not ASSAY.exists():
        pytest.skip(f"the ProteinGym assay is not at {ASSAY}")
    wild_type = read_fasta(ASSAY.with_suffix(".wt.fa")).records[0].sequence
    return ASSAY, wild_type


@pytest.fixture(scope="module")
def engine():
    return Engine(load_weights("random:tiny:1"))


# --- references, written from ProteinGym's definitions, independently of flamino_core ------------
def reference_metrics(true, pred, bins=None) -> dict:
    true, pred = np.asarray(true, float), np.asarray(pred, float)
    ranks_true, ranks_pred = pd.Series(true).rank(), pd.Series(pred).rank()  # average ranks for ties
    out = {"spearman": float(np.corrcoef(ranks_true, ranks_pred)[0, 1])}
    # top-10% recall: at or above the 90th percentile (ProteinGym's >= since its commit f5e47f1),
    # as sets of row numbers.
    top_true = {i for i, t in enumerate(true) if t >= pd.Series(true).quantile(0.9)}
    top_pred = {i for i, p in enumerate(pred) if p >= pd.Series(pred).quantile(0.9)}
    out["top10_recall"] = len(top_true & top_pred) / len(top_true)
    if bins is not None:
        out["auc"] = roc_auc_score(bins, pred)
        out["mcc"] = matthews_corrcoef(bins, (pred >= np.median(pred)).astype(int))
    return out


def reference_ndcg(true, pred) -> float:
    """NDCG@floor(n/10) of min-max scaled DMS scores (scikit-learn; equal to ProteinGym's without ties)."""
    gains = (true - true.min()) / (true.max() - true.min())
    return float(ndcg_score(gains[None, :], np.asarray(pred)[None, :], k=int(len(true) // 10)))


def assert_metrics_match(ours: dict, ref: dict, tol=1e-12):
    for key, value in ref.items():
        assert ours[key] is not None and math.isclose(ours[key], value, abs_tol=tol), (key, ours[key], value)


# --- the real assay ----------------------------------------------------------------------------------
def test_real_assay_reads_with_its_wild_type(assay):
    path, wild_type = assay
    derived = read_dms(path)
    assert derived.wild_type == wild_type and derived.wild_type_source.startswith("derived")
    assert len(derived.frame) == 922 and not derived.issues and derived.has_bins
    assert list(derived.frame.columns) == ["mutant", "mutated_sequence", "DMS_score", "DMS_score_bin"]
    given = read_dms(path, wild_type=wild_type)
    assert given.wild_type_source == "given" and not given.issues


def test_metrics_on_the_real_assay_match_references(assay):
    frame = read_dms(assay[0]).frame
    true, bins = frame["DMS_score"].to_numpy(), frame["DMS_score_bin"].to_numpy()
    rng = np.random.default_rng(0)
    noisy = true + rng.normal(0, 1.5, len(true))  # a predictor with real signal, no ties
    ours = agreement_metrics(true, noisy, bins)
    assert_metrics_match(ours, reference_metrics(true, noisy, bins))
    assert math.isclose(ours["ndcg"], reference_ndcg(true, noisy), abs_tol=1e-12)
    assert 0.5 < ours["spearman"] < 0.9 and ours["auc"] > 0.7  # the signal is seen
    tied = np.round(noisy)  # many ties: average ranks (Spearman), half-counted pairs (AUC)
    assert_metrics_match(agreement_metrics(true, tied, bins), reference_metrics(true, tied, bins))
    # Ties in the experiment too, so "at or above the 90th percentile" must hold on both sides.
    coarse = np.round(true)
    assert (coarse == np.percentile(coarse, 90)).sum() > 1
    assert_metrics_match(agreement_metrics(coarse, tied, bins), reference_metrics(coarse, tied, bins))
    flipped = agreement_metrics(true, -noisy, bins)
    assert math.isclose(flipped["spearman"], -ours["spearman"]) and math.isclose(flipped["auc"], 1 - ours["auc"])


def test_real_assay_scored_end_to_end(assay, engine):
    path, wild_type = assay
    scored = score_dms(engine, read_dms(path, wild_type=wild_type), record_id="A0A1I9GEU1_NEIME")
    frame = scored.frame
    assert list(frame.columns) == ["mutant", "mutated_sequence", "DMS_score", "DMS_score_bin", "score", "status"]
    assert (frame.status == "ok").all() and frame.score.notna().all()
    assert scored.passes == len({int(m[1:-1]) for m in frame.mutant}) <= len(wild_type)
    metrics = dms_metrics(scored, model="random:tiny:1")
    ref = reference_metrics(frame.DMS_score, frame.score, frame.DMS_score_bin)
    assert_metrics_match(metrics, ref)
    assert math.isclose(metrics["ndcg"], reference_ndcg(frame.DMS_score.to_numpy(), frame.score.to_numpy()), abs_tol=1e-12)
    assert {k: metrics[k] for k in ("n_scored", "n_skipped", "model", "strategy")} == {
        "n_scored": 922, "n_skipped": 0, "model": "random:tiny:1", "strategy": "masked-marginals"}
    # The same substitutions from the full masked-marginal map (L passes): the same numbers.
    full = scores.substitution_map(engine, wild_type, "masked-marginals").substitutions
    column = {aa: j for j, aa in enumerate("ACDEFGHIKLMNPQRSTVWY")}
    expected = [full[int(m[1:-1]) - 1, column[m[-1]]] for m in frame.mutant]
    np.testing.assert_allclose(frame.score, expected, atol=1e-5)

    fig = dms_scatter(scored, metrics)
    assert f"Spearman ρ {metrics['spearman']:.3f}" in fig.layout.title.text and "n = 922" in fig.layout.title.text
    assert sum(len(t.x) for t in fig.data) == 922
    heat = dms_heatmaps(scored)
    experiment, model = [t for t in heat.data if t.type == "heatmap"]
    # Laid out as the Masked predictions map: positions across (x), mutants down (y).
    column = list(experiment.x).index("F1")
    assert experiment.z[list(experiment.y).index("I")][column] == frame.DMS_score[frame.mutant == "F1I"].item()
    assert model.z[list(model.y).index("I")][column] == frame.score[frame.mutant == "F1I"].item()
    assert list(experiment.x) == list(model.x) and len(experiment.x) == len(wild_type)
    assert list(experiment.y) == list("ACDEFGHIKLMNPQRSTVWY")
    # White means "like the wild type" in both: 0 for the model; this assay has no synonymous
    # rows, so 0 for the experiment too (said in the panel's title), each range symmetric.
    assert model.zmid == 0 and experiment.zmid == 0 and experiment.zmin == -experiment.zmax
    assert abs(experiment.zmax) == np.nanmax(np.abs(frame.DMS_score))
    assert "no synonymous rows" in heat.layout.title.text and heat.layout.plot_bgcolor == "#d9d9d9"  # grey: not measured
    assert heat.layout.height >= 800  # two full-width panels, not 160 px


# --- a small multi-mutant table, built by hand -------------------------------------------------------
def small_table() -> str:
    rows = [
        ("V2A", 1.0, 1), ("H3D", -2.0, 0), ("L4P", -3.0, 0), ("T5A", 0.5, 1), ("P6G", -1.0, 0),
        ("E7V", 0.2, 1), ("E8K", 0.8, 1), ("K9R", 1.5, 1), ("S10P", -2.5, 0), ("A11G", -0.5, 0),
        ("V2A:H3D", -1.5, 0), ("T5A:E7V", 0.9, 1), ("E8K:K9R:S10P", -1.2, 0), ("L4P:A11G", -4.0, 0),
        ("V12I", "", 1),         # missing DMS_score: scored, not in the statistics
        ("V2A", 1.1, 1),         # duplicate: scored, only the first V2A counts
        ("A3D", 0.0, 0),         # wrong wild-type letter (H3)
        ("E7*", -5.0, 0),        # stop
        ("T13S:T13A", 0.1, 1),   # repeated position
        ("p.Ala14Gly", -0.7, 0), # HGVS spelling is read too
    ]
    lines = ["mutant,DMS_score,DMS_score_bin,mutated_sequence"]
    for mutant, value, fit in rows:
        variants, _ = parse_mutations(mutant, HBB)
        mutated = variants[0].apply(HBB) if variants else ""
        lines.append(f"{mutant},{value},{fit},{mutated}")
    assert lines[3].startswith("L4P,") and lines[3].endswith("H")
    lines[3] = lines[3][:-1] + "Q"  # L4P's mutated_sequence disagrees at the last residue
    return "\n".join(lines) + "\n"


def test_small_multi_mutant_table(engine):
    text = small_table()
    dms = parse_dms(text, wild_type=HBB)
    issues = " | ".join(dms.issues)
    assert "line 16: DMS_score is missing" in issues
    assert "V2A (2x)" in issues
    assert "line 4: mutated_sequence is not the given wild type with the mutant applied" in issues
    scored = score_dms(engine, dms)
    frame = scored.frame
    assert len(frame) == 20 and list(frame.columns[:4]) == ["mutant", "DMS_score", "DMS_score_bin", "mutated_sequence"]
    status = dict(zip(frame.mutant, frame.status))
    assert "has H at position 3, not A" in status["A3D"] and "stop" in status["E7*"]
    assert "position 13 is mutated twice" in status["T13S:T13A"] and status["p.Ala14Gly"] == "ok"
    summary = " | ".join(scored.dms.issues)
    assert "3 rows cannot be scored" in summary and "wrong-wild-type" in summary

    # Additive by default: a multi-mutant's score is the sum of its singles' (same masked passes).
    single = dict(zip(frame.mutant[:10], frame.score[:10]))
    for multi in ("V2A:H3D", "T5A:E7V", "E8K:K9R:S10P", "L4P:A11G"):
        parts = multi.split(":")
        assert math.isclose(frame.score[frame.mutant == multi].item(), sum(single[p] for p in parts), abs_tol=1e-5)

    used = (frame.status == "ok") & frame.DMS_score.notna() & ~frame.index.isin([15])  # 15: the second V2A
    assert list(np.flatnonzero(scored.in_metrics)) == list(np.flatnonzero(used))
    metrics = dms_metrics(scored, model="m")
    assert metrics["n_scored"] == 15 and metrics["n_skipped"] == 5 and metrics["n_excluded"] == 0
    assert_metrics_match(metrics, reference_metrics(frame.DMS_score[used], frame.score[used], frame.DMS_score_bin[used]))

    # The scatter tells singles (circles) from multi-mutants (diamonds), each trace one kind.
    scatter = dms_scatter(scored, metrics)
    shapes = {t.marker.symbol: sum(len(x.x) for x in scatter.data if x.marker.symbol == t.marker.symbol)
              for t in scatter.data}
    assert shapes == {"circle": 11, "diamond": 4}
    assert all(("multi-mutant" in t.name) == (t.marker.symbol == "diamond") for t in scatter.data)

    singles = dms_metrics(scored, model="m", singles_only=True)
    only = used & (frame.mutant.str.count(":") == 0)
    # The 4 usable multi-mutants are excluded by choice, not skipped (issue 24).
    assert singles["n_scored"] == 11 and singles["n_skipped"] == 5 and singles["n_excluded"] == 4
    assert list(singles) == ["spearman", "auc", "mcc", "ndcg", "top10_recall", "n_scored", "n_skipped",
                             "n_excluded", "model", "strategy"]  # the metrics JSON's keys, exactly
    assert_metrics_match(singles, reference_metrics(frame.DMS_score[only], frame.score[only], frame.DMS_score_bin[only]))

    joint = score_dms(engine, dms, "joint-masked")
    assert "non_additivity" in joint.frame and (joint.frame.non_additivity[:10] == 0).all()
    assert joint.passes == scored.passes + 4  # one joint pass per multi-mutant


def test_wild_type_derived_by_majority_and_disagreements_reported():
    rows = ["mutant,DMS_score,mutated_sequence"]
    for i, mutant in enumerate(["V2A", "H3D", "L4P", "T5A"]):
        mutated = parse_mutations(mutant, HBB)[0][0].apply(HBB)
        if i == 3:
            mutated = mutated[:20] + "W" + mutated[21:]  # this row's background differs at 21
        rows.append(f"{mutant},{i},{mutated}")
    dms = parse_dms("\n".join(rows))
    assert dms.wild_type == HBB
    assert any("line 5: mutated_sequence with the mutant undone gives another wild type" in i for i in dms.issues)


@pytest.mark.parametrize(
    "text, words",
    [
        ("mutation,score\nA1V,1\n", ["needs the columns mutant and DMS_score", "mutant, DMS_score missing"]),
        ("mutant,DMS_score\nV2A,1\n", ["no mutated_sequence column", "FASTA"]),
        ("mutant,DMS_score\n", ["no rows"]),
        ("", ["could not be read"]),
        ("mutant,DMS_score,mutated_sequence\nV2A,1,QQQQ\n", ["cannot be derived"]),
    ],
)
def test_unusable_tables_are_refused_with_a_reason(text, words):
    with pytest.raises(DmsError) as error:
        parse_dms(text)
    for word in words:
        assert word in str(error.value)


def test_a_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(DmsError, match="cannot read the DMS table"):
        read_dms(tmp_path / "nope.csv")


def test_undefined_statistics_are_none():
    # One row is its own 90th percentile on both sides: ProteinGym's ">=" gives recall 1.
    assert agreement_metrics([1.0], [2.0]) == {"spearman": None, "auc": None, "mcc": None, "ndcg": None,
                                               "top10_recall": 1.0}
    one_class = agreement_metrics(np.arange(20.0), np.arange(20.0), np.ones(20))
    assert one_class["auc"] is None and one_class["mcc"] is None and one_class["spearman"] == 1.0
    assert agreement_metrics(np.ones(20), np.arange(20.0))["ndcg"] is None


def test_variant_map_marks_every_substitution_by_label(engine):
    variants, issues = parse_mutations("mutant,label\nE23V,pathogenic\nK18A:V19D,benign\nG25A,\n", HBB[10:40], Numbering(11))
    assert not issues
    sequence = HBB[10:40]
    result = score_variants(engine, sequence, variants)
    fig = variant_map(scores.substitution_map(engine, sequence, "masked-marginals").substitutions, sequence, variants, numbering=Numbering(11), table=result.table)
    heatmap = fig.data[0]
    assert heatmap.x[0] == "A11" and heatmap.x[-1] == f"{sequence[-1]}40"
    marked = {t.name: list(zip(t.x, t.y)) for t in fig.data[1:]}
    assert marked["pathogenic"] == [("E23", "V")]
    assert marked["benign"] == [("K18", "A"), ("V19", "D")]
    assert marked["your variants"] == [("G25", "A")]
    assert len(marked["wild type"]) == len(sequence)
    benign = next(t for t in fig.data if t.name == "benign")
    assert f"variant score {result.table.score[1]:.3f}" in benign.text[0]


def test_substitution_map_marks_wild_types_and_a_click_selects_a_cell():
    sequence = HBB[10:40]
    table = np.random.default_rng(3).normal(size=(len(sequence), 20))
    fig = substitution_map(table, sequence, "wt-marginals", numbering=Numbering(11), clickable=True)
    heatmap, cells, wild = fig.data
    assert heatmap.x[0] == "A11" and list(wild.x) == [f"{aa}{i + 11}" for i, aa in enumerate(sequence)]
    assert list(wild.y) == list(sequence)
    # One point per cell, row by row, carrying that cell's score: the heatmap's z is (20, L).
    assert sequence[:2] == "AV"
    assert len(cells.x) == 20 * len(sequence) and cells.x[21] == "V12" and cells.y[21] == "C"
    assert cells.customdata[21] == table[1, 1] == heatmap.z[1][1]
    assert clicked_cell([{"x": "V12", "y": "C", "curve_number": 1}], sequence, Numbering(11)) == (1, "C")
    assert clicked_cell([], sequence, Numbering(11)) is None and clicked_cell(None, sequence, Numbering(11)) is None
    assert clicked_cell([{"x": "V2", "y": "C"}], sequence, Numbering(11)) is None  # not this numbering
    assert clicked_cell([{"x": "V12", "y": "X"}], sequence, Numbering(11)) is None
    plain = substitution_map(table, sequence, "wt-marginals")
    assert [t.name for t in plain.data] == [None, "wild type"] and plain.data[0].x[0] == "A1"


def test_filter_scored_by_position_and_effect(engine):
    variants, issues = parse_mutations("V2A, H3D:L4P, E7*, T5A, A11G, K9R", HBB)
    table = score_variants(engine, HBB, variants, issues=issues).table
    ok = table[table.status == "ok"]
    assert list(filter_scored(table).mutant) == list(ok.mutant)  # the skipped stop is never shown
    assert list(filter_scored(table, 4, 9).mutant) == ["H3D:L4P", "T5A", "K9R"]  # any position counts
    assert list(filter_scored(table, last=3).mutant) == ["V2A", "H3D:L4P"]
    below = filter_scored(table, effect="below")
    assert list(below.mutant) == [m for m, s in zip(ok.mutant, ok.score) if s < 0]
    above = filter_scored(table, effect="above")
    assert sorted(below.index.tolist() + above.index.tolist()) == ok.index.tolist()
    with pytest.raises(ValueError, match="unknown effect"):
        filter_scored(table, effect="bad")


def test_output_frame_keeps_the_values_as_written(engine):
    text = "mutant,DMS_score,DMS_score_bin\nV2A,1.50,1\nH3D,NA,0\nL4P,-3.5980000000000003,0\n"
    scored = score_dms(engine, parse_dms(text, wild_type=HBB))
    frame = output_frame(scored)
    assert list(frame.columns) == ["mutant", "DMS_score", "DMS_score_bin", "score", "status"]
    assert list(frame.DMS_score) == ["1.50", "NA", "-3.5980000000000003"] and list(frame.DMS_score_bin) == ["1", "0", "0"]
    assert list(frame.score) == list(scored.frame.score) and scored.frame.DMS_score.isna().sum() == 1


_CELLS = st.sampled_from(["mutant", "DMS_score", "DMS_score_bin", "mutated_sequence", "V2A", "H3D:L4P", "A1V", "",
                          "nan", "1", "0", "-2.5", "x", "E7*", HBB[:10], '"', "\t", "p.[Val2Ala;His3Asp]"])
_TABLES = st.lists(st.lists(_CELLS, max_size=5).map(",".join), max_size=8).map("\n".join)


@settings(deadline=None, max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(_TABLES, st.text(max_size=200)), st.one_of(st.none(), st.just(HBB)))
def test_any_table_is_read_or_refused_with_a_reason(text, wild_type):
    try:
        dms = parse_dms(text, wild_type=wild_type)
    except DmsError as error:
        assert str(error).strip()
        return
    assert len(dms.frame) > 0 and dms.wild_type
    assert all(isinstance(issue, str) and issue for issue in dms.issues)


def test_the_experiment_map_is_white_at_the_median_of_synonymous_rows(engine):
    """Issue 24: the experiment's colours were centred nowhere in particular (white at about
    -1.5). With synonymous rows (the wild type measured through the assay) their median is white."""
    from flamino_core.variants.figures import experiment_neutral

    text = small_table() + f"V2V,0.3,1,{HBB}\nH3H,0.7,1,{HBB}\nT5T,0.4,1,{HBB}\n"
    scored = score_dms(engine, parse_dms(text, wild_type=HBB), "wt-marginals")
    synonymous = scored.frame[scored.frame.mutant.isin(["V2V", "H3H", "T5T"])]
    assert synonymous.status.str.contains("synonymous").all()  # not scored, but measured
    assert experiment_neutral(scored)[0] == pytest.approx(0.4)  # the median of 0.3, 0.7, 0.4
    heat = dms_heatmaps(scored)
    experiment, model = [t for t in heat.data if t.type == "heatmap"]
    assert experiment.zmid == pytest.approx(0.4) and model.zmid == 0
    assert experiment.zmax - 0.4 == pytest.approx(0.4 - experiment.zmin)
    assert "median of 3 synonymous rows" in heat.layout.title.text

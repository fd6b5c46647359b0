"""The Variants page and the clickable substitution map under ``streamlit.testing.v1.AppTest``, on
the untrained ``random:tiny`` model. What the page shows is checked against the core functions
(themselves checked against HF transformers and scipy/scikit-learn in tests/parity/test_variant_scores.py,
tests/integration/test_dms.py and tests/integration/test_cli_variants.py) and, for the statistics, against scipy here."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import scipy.stats

from flamino_core.variants import substitution_maps as scores
from flamino_core.alphabet import AA_TO_IDX
from flamino_core.engine.engine import Engine
from flamino_core.inputs.fasta import read_fasta
from flamino_core.variants.dms import parse_dms, score_dms
from flamino_core.variants.notation import parse_mutations
from flamino_core.variants.scoring import score_variants
from flamino_core.weights.loading import load_weights
# The AppTest helpers of tests/app/test_app.py, and its autouse ``environment`` fixture (random:tiny).
from test_app import ROOT, assert_clean, environment, example, figures, open_page, paste, settle, start, unescaped  # noqa: F401
from test_app import values

from app_pages._ui.frame.views import MAX_LINK_MUTATIONS, OPTIONS

DMS_DIR = Path(__file__).resolve().parents[3] / "shared" / "dms"
ASSAY = DMS_DIR / "A0A1I9GEU1_NEIME_Kennouche_2019.csv"
HBB = read_fasta(ROOT / "assets" / "HBB_HUMAN.fa").records[0].sequence  # VHLTPEEKS...: E6 is HbS's
LIST = "E6V, p.[Glu6Val;Lys8Ala], E6*, A6V, K17E"


@pytest.fixture(scope="module")
def engine():
    return Engine(load_weights("random:tiny"))  # the app's model (FLAMINO_MODEL=random:tiny)


def variants_page(at):
    return open_page(at, "variants")


def type_list(at, text: str):
    at.text_area(key="_w_mutation_text").input(text)
    return settle(at.run(), start=True)


def metric_values(at) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def link(at) -> dict[str, str]:
    return {k: v[-1] if isinstance(v, list) else v for k, v in dict(at.query_params).items()}


def upload_dms(at, name: str, data: bytes):
    at.file_uploader(key="_dms_upload").set_value([(name, data, "text/csv")])
    return settle(at.run(), start=True)


def test_the_page_offers_exactly_the_core_strategies():
    from flamino_core.options import scoring_strategies
    from flamino_core.variants.scoring import EFFECTS

    assert tuple(OPTIONS["vstrategy"].kind.labels) == scoring_strategies()  # the command line's choices
    assert tuple(OPTIONS["veffect"].kind.labels) == EFFECTS


# --- a pasted list -------------------------------------------------------------------------------------
def test_a_pasted_list_gives_the_table_the_skipped_entries_and_the_map(engine):
    at = variants_page(example(start(), "Haemoglobin β (human)"))
    assert_clean(at)
    assert any("Paste your variants" in i.value for i in at.info)
    at = type_list(at, LIST)
    assert_clean(at)
    table = at.dataframe[0].value
    assert list(table["mutant"]) == ["E6V", "p.[Glu6Val;Lys8Ala]", "K17E"]  # input order, scored only
    assert list(table["variant"]) == ["E6V", "E6V:K8A", "K17E"]
    variants, issues = parse_mutations(LIST, HBB)
    reference = score_variants(engine, HBB, variants, "masked-marginals", issues=issues).table
    np.testing.assert_allclose(table["score"], reference.score[reference.status == "ok"], atol=1e-6)
    assert metric_values(at) == {"Scored": "3", "Not scored": "2", "Model passes": "3"}
    skipped = at.dataframe[1].value
    assert list(skipped["mutant"]) == ["E6*", "A6V"] and "stop" in list(skipped["status"])[0]
    assert "Scores (CSV)" in {b.proto.label for b in at.get("download_button")}
    # The CSV keeps the entries as typed and adds them normalised, with their positions (issue 24).
    from app_pages._ui.variants.views import download_frame

    csv = download_frame(reference, "masked-marginals")
    assert list(csv.columns) == ["record_id", "mutant", "variant", "position", "score", "status"]
    assert csv[["mutant", "variant", "position"]].values.tolist() == [
        ["E6V", "E6V", "6"], ["p.[Glu6Val;Lys8Ala]", "E6V:K8A", "6;8"], ["E6*", "", ""], ["A6V", "", ""],
        ["K17E", "K17E", "17"]]

    (variant_map,) = figures(at)
    traces = {trace.get("name"): trace for trace in variant_map["data"]}
    ours = traces["your variants"]
    assert sorted(zip(ours["x"], ours["y"])) == sorted([("E6", "V"), ("E6", "V"), ("K8", "A"), ("K17", "E")])
    wild = traces["wild type"]
    assert wild["x"][:3] == ["V1", "H2", "L3"] and wild["y"][:3] == ["V", "H", "L"] and len(wild["x"]) == len(HBB)

    # Filters: the predicted effect, then a position range (a multi-mutant counts by any position).
    at.radio(key="_w_veffect").set_value("below").run()
    shown = at.dataframe[0].value
    assert (shown["score"] < 0).all() and len(shown) == int((table["score"] < 0).sum())
    at.radio(key="_w_veffect").set_value("all").run()
    at.number_input(key="_w_vfrom").set_value(8).run()
    assert list(at.dataframe[0].value["mutant"]) == ["p.[Glu6Val;Lys8Ala]", "K17E"]
    at.number_input(key="_w_vto").set_value(10).run()
    assert list(at.dataframe[0].value["mutant"]) == ["p.[Glu6Val;Lys8Ala]"]


def test_labels_become_markers_and_strategies_change_the_columns(engine):
    at = variants_page(example(start(), "Haemoglobin β (human)"))
    at = type_list(at, "mutant,label\nE6V,pathogenic\nV1A,benign\nK17E:E6V,pathogenic\n")
    assert_clean(at)
    assert list(at.dataframe[0].value["label"]) == ["pathogenic", "benign", "pathogenic"]
    names = {trace.get("name") for trace in figures(at)[0]["data"]}
    assert {"benign", "pathogenic", "wild type"} <= names

    settle(at.radio(key="_w_vstrategy").set_value("joint-masked").run(), start=True)
    assert_clean(at)
    table = at.dataframe[0].value
    assert "non_additivity" in table.columns
    variants, _ = parse_mutations("E6V V1A K17E:E6V", HBB)
    reference = score_variants(engine, HBB, variants, "joint-masked").table
    np.testing.assert_allclose(table["non_additivity"], reference.non_additivity, atol=1e-6)
    assert table["non_additivity"].iloc[0] == 0 and table["non_additivity"].iloc[2] != 0

    settle(at.radio(key="_w_vmap").set_value("masked-marginals").run(), start=True)  # the map behind them
    assert_clean(at)
    assert "masked-marginals" in figures(at)[0]["layout"]["title"]["text"]


def test_hosted_server_refuses_pll_above_its_size_with_the_reason(monkeypatch):
    from app_pages._ui.server import heavy_jobs

    monkeypatch.setenv("FLAMINO_HOSTED", "1")
    monkeypatch.setenv("FLAMINO_MAX_PLL_PASSES", "400")
    monkeypatch.setattr(heavy_jobs, "_QUEUE", None)
    at = variants_page(example(start(), "Haemoglobin β (human)"))
    at = type_list(at, "E6V V1A")
    at.radio(key="_w_vstrategy").set_value("pll").run()  # 146 residues x 3 sequences = 438 passes > 400
    assert not at.exception
    (error,) = at.error
    assert "pll needs 438 masked passes" in unescaped(error.value) and "at most 400" in unescaped(error.value)
    assert not at.dataframe
    at = type_list(at, "E6V")  # 292 passes: allowed, and said
    assert_clean(at)
    assert len(at.dataframe[0].value) == 1
    assert any("292 masked passes" in c.value for c in at.caption)


def test_hosted_full_queue_says_so_and_scores_when_a_slot_is_free(monkeypatch):
    from app_pages._ui.server import heavy_jobs

    monkeypatch.setenv("FLAMINO_HOSTED", "1")
    queue = heavy_jobs.HeavyJobQueue(workers=1, max_waiting=0)
    monkeypatch.setattr(heavy_jobs, "_QUEUE", queue)
    at = variants_page(example(start(), "Haemoglobin β (human)"))
    with queue.slot():  # another session's job holds the only slot
        at = type_list(at, "H2A K8E:V1A")  # masked passes: queued
        assert not at.exception and not at.error
        assert any("scoring the variants was not computed" in w.value for w in at.warning)
        assert not at.dataframe
    settle(at, start=True)  # the next run tries again
    assert_clean(at)
    assert list(at.dataframe[0].value["mutant"]) == ["H2A", "K8E:V1A"]


# --- the share link --------------------------------------------------------------------------------------
def test_the_link_carries_a_short_list_and_says_when_one_was_too_long():
    at = variants_page(example(start(), "Haemoglobin β (human)"))
    at = type_list(at, "E6V\nK17E")
    at.radio(key="_w_vstrategy").set_value("wt-marginals").run()
    params = link(at)
    assert params["page"] == "variants" and params["muts"] == "E6V\nK17E" and "mlong" not in params
    assert params["vstrategy"] == "wt-marginals"
    shared = start(params)
    assert_clean(shared)
    assert shared.header[0].value == "Variant effects"
    assert shared.text_area(key="_w_mutation_text").value == "E6V\nK17E"
    assert list(shared.dataframe[0].value["mutant"]) == ["E6V", "K17E"]
    assert metric_values(shared)["Model passes"] == "1"  # wt-marginals came back too

    many = "\n".join(f"p.{aa}{i + 1}{mt}" for i, aa in enumerate(HBB) for mt in "AG" if mt != aa)  # 2 per position
    assert len(many) > MAX_LINK_MUTATIONS
    at = type_list(at, many)
    params = link(at)
    assert "muts" not in params and params["mlong"] == "1"
    shared = start(params)
    assert_clean(shared)
    assert any("too long to travel in the link: paste it again" in w.value for w in shared.warning)
    assert not shared.dataframe
    assert link(shared)["mlong"] == "1"  # still said by the link of the untouched page


def test_filters_say_what_they_hide_and_start_over_on_other_data():
    """Issue 50: a "From position 16" kept from a record numbered from 16 hid rows of the next
    table numbered from 1, unsaid. Filters that hide rows are said with a Reset, and start over
    when the table's record (or upload) changes."""
    at = paste(start(), f">a/16-60\n{HBB[:45]}\n>b\n{HBB}\n")
    at = type_list(variants_page(at), "V16A, H17Y, E21K")  # HBB's V1, H2, E6 numbered from 16
    assert_clean(at)
    assert any(c.value.startswith("3 of 3 scored variants shown") for c in at.caption)
    at.number_input(key="_w_vfrom").set_value(17).run()
    assert list(at.dataframe[0].value["mutant"]) == ["H17Y", "E21K"]
    assert "Showing 2 of 3 scored variants: From position 17." in [unescaped(c.value) for c in at.caption]
    next(b for b in at.button if b.label == "Reset").click().run()
    assert len(at.dataframe[0].value) == 3 and at.number_input(key="_w_vfrom").value == 16
    # Another record, numbered from 1: the range kept from the first (16-60) would hide V1A and H2Y.
    at.sidebar.selectbox(key="_w_record").set_value("b").run()
    at = type_list(at, "V1A, H2Y, E6K")
    assert_clean(at)
    assert list(at.dataframe[0].value["mutant"]) == ["V1A", "H2Y", "E6K"]
    assert at.number_input(key="_w_vfrom").value == 1 and not any(b.label == "Reset" for b in at.button)


# --- a DMS table --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def assay():
    if not ASSAY.exists():
        pytest.skip(f"the ProteinGym assay is not at {ASSAY}")
    return ASSAY.read_bytes(), read_fasta(ASSAY.with_suffix(".wt.fa")).records[0].sequence


def test_a_dms_upload_gives_the_metrics_the_figures_and_the_downloads(engine, assay):
    data, wild_type = assay
    at = start()
    at = variants_page(at)
    at.radio(key="_w_vinput").set_value("dms").run()
    assert any("Upload a deep mutational scanning table" in i.value for i in at.info)
    at = upload_dms(at, "assay.csv", data)
    assert_clean(at)
    # The statistics shown, against scipy on the core's scores of the same table (same model).
    scored = score_dms(engine, parse_dms(data))
    frame = scored.frame
    shown = metric_values(at)
    rho = scipy.stats.spearmanr(frame.DMS_score, frame.score).statistic
    assert shown["Spearman ρ"] == f"{rho:.3f}" and shown["Rows used"] == "922"
    assert all(shown[k] != "—" for k in ("AUC", "MCC", "NDCG", "Top-10% recall"))

    scatter, maps = figures(at)
    assert f"Spearman ρ {rho:.3f}" in scatter["layout"]["title"]["text"]
    assert sum(len(values(t["x"])) for t in scatter["data"]) == 922
    experiment, model = [t for t in maps["data"] if t["type"] == "heatmap"]
    assert experiment["y"] == model["y"] and experiment["x"] == model["x"]  # the same axes
    assert len(experiment["x"]) == len(wild_type)  # positions across, as the Masked predictions map
    downloads = {b.proto.label for b in at.get("download_button")}
    assert {"Scored table (CSV)", "Metrics (JSON)"} <= downloads
    assert len(at.dataframe[0].value) == 922 and "DMS_score" in at.dataframe[0].value.columns

    # Another page and back (issue #37): Streamlit's uploader forgets its file, the page says which
    # table it kept and still scores it; Remove forgets it.
    at = variants_page(open_page(at, "input"))
    assert_clean(at)
    assert any(unescaped(c.value).startswith(f"Using assay.csv ({len(data):,} bytes), kept from your upload")
               for c in at.caption)
    assert metric_values(at)["Spearman ρ"] == f"{rho:.3f}"
    next(b for b in at.button if b.label == "Remove" and b.key == "_dms_forget").click().run()
    assert any("Upload a deep mutational scanning table" in i.value for i in at.info)


def test_a_dms_table_with_multi_mutants_against_the_selected_record(engine, assay):
    _, wild_type = assay
    rows = ["mutant,DMS_score,DMS_score_bin"]
    singles = [f"{wild_type[i]}{i + 1}{'A' if wild_type[i] != 'A' else 'G'}" for i in range(0, 40, 2)]
    rows += [f"{m},{(i * 7) % 11 - 5},{i % 2}" for i, m in enumerate(singles)]
    rows += [f"{singles[0]}:{singles[1]},-3,0", f"{singles[2]}:{singles[5]},2,1", "Q1A,1,1"]
    data = ("\n".join(rows) + "\n").encode()
    at = start({"seq": wild_type, "page": "variants", "vinput": "dms"})
    at = upload_dms(at, "small.csv", data)
    settle(at.radio(key="_w_dmswt").set_value("record").run(), start=True)
    assert_clean(at)
    assert metric_values(at)["Rows used"] == "22"  # 20 singles + 2 multi-mutants; Q1A does not fit
    assert any("1 not scored" in e.label for e in at.expander)
    at.toggle(key="_w_singles").set_value(True).run()
    assert_clean(at)
    assert metric_values(at)["Rows used"] == "20"
    scored = score_dms(engine, parse_dms(data, wild_type=wild_type))
    singles_frame = scored.frame[:20]
    rho = scipy.stats.spearmanr(singles_frame.DMS_score, singles_frame.score).statistic
    assert metric_values(at)["Spearman ρ"] == f"{rho:.3f}"
    scatter = figures(at)[0]
    assert sum(len(values(t["x"])) for t in scatter["data"]) == 20
    assert "single substitutions only" in scatter["layout"]["title"]["text"]


def test_a_dms_table_that_cannot_be_used_says_why():
    at = variants_page(start())
    at.radio(key="_w_vinput").set_value("dms").run()
    at = upload_dms(at, "bad.csv", b"mutant,fitness\nF1A,1\n")
    assert not at.exception
    assert "needs the columns mutant and DMS\\_score" in at.error[0].value


# --- indels, stops and frameshifts (issue 38) ------------------------------------------------------------
INDELS = "E6V, p.Lys8del, p.Thr12_Ala13insGlyVal, p.Val18_Asn19delinsTrp, p.Ala27_Gly29dup, p.Trp37Ter, p.Trp15fs"


def test_indels_are_scored_by_the_sequence_strategies_with_the_plan_said_first(engine):
    from app_pages._ui.variants.views import download_frame
    from flamino_core.variants import indels
    from flamino_core.variants.sequence_scores import pass_plan

    at = variants_page(example(start(), "Haemoglobin β (human)"))
    at = type_list(at, INDELS)  # masked-marginals: the substitution scored, the rest listed with the way to score them
    assert_clean(at)
    assert any("5 entries are indels, stops or frameshifts" in i.value and "wt-pll-approx" in i.value for i in at.info)
    assert list(at.dataframe[0].value["mutant"]) == ["E6V"]
    assert "a deletion; masked-marginals scores substitutions only" in list(at.dataframe[1].value["status"])[0]

    variants, issues = indels.parse_mutations(INDELS, HBB)
    for strategy, kept in (("wt-pll-approx", INDELS), ("pll", "p.Lys8del, p.Trp37Ter, E6V")):
        if kept != INDELS:
            at = type_list(at, kept)
            variants, issues = indels.parse_mutations(kept, HBB)
        settle(at.radio(key="_w_vstrategy").set_value(strategy).run(), start=True)
        assert_clean(at)
        plan = pass_plan(HBB, variants, strategy)
        assert any(f"Pass plan: {plan.describe(len(variants))}." == unescaped(c.value) for c in at.caption), strategy
        reference = score_variants(engine, HBB, variants, strategy, issues=issues).table
        ok = reference[reference.status == "ok"]
        table = at.dataframe[0].value
        assert list(table["mutant"]) == list(ok.mutant)
        np.testing.assert_allclose(table["score"], ok.score, atol=1e-6)
        assert metric_values(at)["Model passes"] == f"{plan.total:,}"
    assert list(table["kind"]) == ["deletion", "stop", "substitution"]
    assert list(table["normalisation"]) == ["sum", "min-llr", "sum"]

    # The page says what a sum and a stop's min-llr are where it shows them, with the docs' own
    # passages opened in place (issue 50): the words are docs/variants.md's, read here from the file.
    said = " ".join(unescaped(c.value) for c in at.caption)
    assert "a sum favours deletions" in said and "min-llr (stops and frameshifts)" in said
    docs = (ROOT / "docs" / "variants.md").read_text()
    opened = {e.label: " ".join(m.value for m in e.markdown) for e in at.expander}
    assert "get_minLLR" in docs and "get_minLLR" in opened["Stops and frameshifts (docs/variants.md)"]
    assert "deletions look better" in opened["Sums or per residue (docs/variants.md)"]

    settle(at.radio(key="_w_vstrategy").set_value("wt-pll-approx").run(), start=True)
    at = type_list(at, INDELS)
    table = at.dataframe[0].value
    assert list(table["kind"]) == ["substitution", "deletion", "insertion", "delins", "duplication", "stop"]
    skipped = at.dataframe[1].value  # the frameshift without its new stop, with the reason
    assert list(skipped["mutant"]) == ["p.Trp15fs"] and "without its new stop" in list(skipped["status"])[0]
    variants, issues = indels.parse_mutations(INDELS, HBB)
    csv = download_frame(score_variants(engine, HBB, variants, "wt-pll-approx", issues=issues).table, "wt-pll-approx")
    assert list(csv.columns) == ["record_id", "mutant", "variant", "position", "score", "status", "normalisation"]
    assert list(csv["normalisation"]) == ["sum"] * 5 + ["min-llr", ""]
    assert any("the map marks substitutions only" in c.value for c in at.caption)


def test_an_indel_dms_table_gives_the_cores_metrics(engine, real_sequences):
    """ProteinGym's indel layout (mutated_sequence, no mutant) uploaded on the page, against the
    selected record: refused with the way out until it can be scored, then ProteinGym's statistics
    (its functions, written again in tests/unit/test_dms_proteingym.py) of the same rows and scores.
    The table is built from a real protein (CBX4_HUMAN) in tests/integration/test_dms_indels.py: no ProteinGym
    indel assay can be had on this machine."""
    from test_dms_indels import distinct_usable, indel_table
    from test_dms_proteingym import proteingym_metrics

    wild = real_sequences["CBX4_HUMAN"]
    data = indel_table(wild).to_csv(index=False).encode()
    at = start({"seq": wild, "page": "variants", "vinput": "dms"})
    at = upload_dms(at, "CBX4_indels.csv", data)
    assert not at.exception and "Choose **the selected record** as the wild type" in at.error[0].value
    settle(at.radio(key="_w_dmswt").set_value("record").run(), start=True)
    assert any("its rows are whole mutated sequences" in e.value for e in at.error)  # masked-marginals
    settle(at.radio(key="_w_vstrategy").set_value("wt-pll-approx").run(), start=True)
    assert_clean(at)
    scored = score_dms(engine, parse_dms(data, wild_type=wild), "wt-pll-approx")
    used = distinct_usable(indel_table(wild))  # the rows ProteinGym's statistics read, chosen with pandas
    assert list(scored.frame[scored.rows_used()].index) == list(used.index)
    theirs = proteingym_metrics(scored.frame.loc[used.index].astype({"score": float}), "score")
    shown = metric_values(at)
    assert shown["Rows used"] == f"{len(used):,}"
    for key, label in (("spearman", "Spearman ρ"), ("auc", "AUC"), ("mcc", "MCC"), ("ndcg", "NDCG"),
                       ("top10_recall", "Top-10% recall")):
        assert shown[label] == f"{float(theirs[key]):.3f}", label
    table = at.dataframe[0].value
    assert {"deletion", "insertion", "substitution", "delins"} <= set(table["kind"])
    assert list(table["mutant"][:2]) == [f"{wild[0]}1del", f"{wild[1]}2del"]
    names = {trace.get("name") for trace in figures(at)[0]["data"]}
    assert any("indel" in str(name) for name in names), names


# --- the substitution map on the Masked predictions page ---------------------------------------------------
def test_the_substitution_map_marks_wild_type_cells_and_is_clickable(engine):
    at = open_page(example(start(), "Haemoglobin β (human)"), "predictions")
    assert_clean(at)
    chart = at.get("plotly_chart")[2]
    assert list(chart.proto.selection_mode)  # a click selects (points), Streamlit reruns the page
    traces = {trace.get("name"): trace for trace in json.loads(chart.proto.spec)["data"]}
    assert traces["wild type"]["x"][:2] == ["V1", "H2"] and traces["wild type"]["y"][:2] == ["V", "H"]
    assert len(traces["wild type"]["x"]) == len(HBB)
    assert len(values(traces["cells"]["x"])) == 20 * len(HBB)  # one clickable point per cell

    # What the click callback stores (Streamlit's test runner cannot click a chart; the browser
    # test does): the page then names the variant with its score and masks its position.
    at.session_state["_picked_cell"] = (HBB, 5, "V")
    at.session_state["pos"] = at.session_state["_w_pos"] = 6
    at.run()
    assert_clean(at)
    wt_map = scores.substitution_map(engine, HBB, "wt-marginals").substitutions  # (L, 20)
    expected = wt_map[5, "ACDEFGHIKLMNPQRSTVWY".index("V")]
    assert any(f"E6V: wt-marginals score {expected:.3f}" in i.value for i in at.info)
    log_probs = engine.compute_masked(HBB, [5])[0]
    masked = log_probs[AA_TO_IDX["V"]] - log_probs[AA_TO_IDX["E"]]
    assert any(f"E6V (clicked on the map): masked-marginal score {masked:.3f}" in c.value for c in at.caption)


def test_with_the_masked_map_on_each_position_is_masked_once(monkeypatch):
    """Issue 20: the variants' mutated positions and the masked map behind them share their
    passes (through the result store): each position of the record is masked exactly once."""
    masked: list[int] = []
    real = Engine.compute_masked

    def counting(self, sequence, positions=None, progress=None):
        if sequence == HBB:
            masked.extend(range(len(sequence)) if positions is None else positions)
        return real(self, sequence, positions, progress)

    monkeypatch.setattr(Engine, "compute_masked", counting)
    at = variants_page(example(start(), "Haemoglobin β (human)"))
    at = type_list(at, "E6V, K17E, E6V:K8A")  # masked-marginals: positions 6, 8 and 17 masked
    assert sorted(masked) == [5, 7, 16]
    settle(at.radio(key="_w_vmap").set_value("masked-marginals").run(), start=True)
    assert_clean(at)
    assert "masked-marginals" in figures(at)[0]["layout"]["title"]["text"]
    assert sorted(masked) == list(range(len(HBB)))  # every position once: 6, 8 and 17 were not run again
    settle(at.radio(key="_w_vstrategy").set_value("masked-marginals").run(), start=True)
    open_page(at, "predictions")
    settle(at.radio(key="_w_scan").set_value("masked-marginals").run(), start=True)  # the predictions page's map too
    assert_clean(at)
    assert sorted(masked) == list(range(len(HBB)))

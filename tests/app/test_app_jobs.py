"""Long work in the app as background jobs (issue 20, AppTest on ``random:tiny``): pll on a real
DMS table fills its rows in with a time estimate, its Cancel keeps what finished, a new session
resumes from the store; the job runs on while the user is on another page, shown in the
sidebar; work over ~30 s says its cost first and offers the cheaper strategy."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from app_pages._ui.server import background, jobs_panel

from app_pages._ui.variants import scoring as variant_results
from flamino_core.jobs import background as jobs, pass_cost
from flamino_core.numbering import Numbering
from flamino_core.engine.planner import masked_batch_rows
from flamino_core.store.passes import CHUNK
from flamino_core.engine.engine import Engine
from flamino_core.weights.loading import load_weights
from test_app import assert_clean, environment, open_page, paste, settle, start, unescaped  # noqa: F401

DMS_DIR = Path(__file__).resolve().parents[3] / "shared" / "dms"
ASSAY = DMS_DIR / "A0A1I9GEU1_NEIME_Kennouche_2019.csv"
ROWS = 30  # of the real assay: 30 mutants x 161 residues + the wild type = 4,991 masked passes
MODEL = " · untrained test model (tiny)"  # what the sidebar's job lines end with (the model they run)


@pytest.fixture
def assay() -> bytes:
    if not ASSAY.exists():
        pytest.skip(f"the ProteinGym assay is not at {ASSAY}")
    return b"".join(ASSAY.read_bytes().splitlines(keepends=True)[:ROWS + 1])


def wait_for(condition, what: str, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


class Gate:
    """Holds the engine once it is asked for the masked passes of the ``at``-th distinct
    sequence (a pll mutant), as a slow machine would be busy with it; counts what ran."""

    def __init__(self, monkeypatch, at: int):
        self.at, self.open, self.seen, self.masked = at, threading.Event(), [], []
        real = Engine.compute_masked

        def held(engine, sequence, positions=None, progress=None):
            if sequence not in self.seen:
                self.seen.append(sequence)
            if len(self.seen) >= self.at:
                assert self.open.wait(300)
            self.masked.append((sequence, len(positions) if positions is not None else len(sequence)))
            return real(engine, sequence, positions, progress)

        monkeypatch.setattr(Engine, "compute_masked", held)


def dms_page(at, data: bytes):
    open_page(at, "variants")
    at.radio(key="_w_vinput").set_value("dms").run()
    at.file_uploader(key="_dms_upload").set_value([("assay.csv", data, "text/csv")])
    return at.run()


def test_pll_on_a_dms_table_fills_in_says_how_long_cancels_keeping_rows_and_resumes(assay, monkeypatch):
    from flamino_core.store.result_store import default_store

    monkeypatch.setattr(variant_results, "CHUNK_ROWS", 10)
    engine = Engine(load_weights("random:tiny"))
    at = settle(dms_page(start(), assay))  # scored with masked-marginals first (the default strategy)
    wild_type = variant_results.dms_table(assay, None, Numbering()).wild_type
    held = len(default_store().held_positions(engine.fingerprint, wild_type))  # masked-marginals' positions
    # A rate this machine measured (0.01 s per masked pass here): the job's cost is known, over 30 s.
    rates = jobs.default_rates()
    rates.weight = 1.0  # this measurement replaces the one the masked-marginals job made
    row = pass_cost.masked_position_work(engine, len(wild_type))  # one masked row's work (MFLOP and per token)
    rates.record(engine.fingerprint, "masked", 1000 * row, 10.0)
    monkeypatch.setattr(pass_cost, "compile_seconds", lambda *_: 0.0)  # compilations: tests/integration/test_jobs.py
    monkeypatch.setattr(pass_cost, "BATCH_FIXED_S", 0.0)  # each batch's fixed cost: tests/integration/test_first_guess.py
    rates.weight = jobs.Rates().weight
    # Rows arrive in chunks of 1 (the first alone: a row within seconds), then 10: the wild type, then
    # mutants; hold the 12th mutant (the third chunk's first), with 11 rows in.
    gate = Gate(monkeypatch, at=13)
    at.radio(key="_w_vstrategy").set_value("pll").run()
    assert_clean(at)
    (ask,) = [unescaped(i.value) for i in at.info if "masked passes" in i.value]
    passes = (ROWS + 1) * len(wild_type) - held  # the wild type's and 30 distinct mutants', less the stored
    assert f"needs {passes:,} masked passes" in ask
    # One count per choice (issue #37): the pass plan above counts every pass; the cost says which are stored.
    plan = (ROWS + 1) * len(wild_type)
    assert any(f"pll: {plan:,} masked passes" in unescaped(c.value) for c in at.caption)
    assert f"the other {held:,} of the plan's {plan:,} are stored" in ask
    # 0.01 s a row: each record's passes go 64 positions a call, a call's last pass padded to a power of two.
    max_rows = engine.masked_pass_shape(len(wild_type))[0]
    rows = sum(sum(masked_batch_rows(min(CHUNK, n - first), max_rows)) for n in [len(wild_type) - held] + [len(wild_type)] * ROWS
               for first in range(0, n, CHUNK))
    assert f"{jobs_panel.about(rows * 0.01)} at the rate this machine measured" in ask
    assert any(b.label == "Use masked-marginals instead" for b in at.button)  # the cheaper strategy
    next(b for b in at.button if b.label.startswith("Start")).click().run()
    wait_for(lambda: len(gate.seen) >= gate.at, "the second chunk of rows did not start")
    at.run()  # as the browser's watcher reruns the page when the job has news
    assert_clean(at)
    (rows,) = at.dataframe
    assert len(rows.value) == 11 and rows.value["score"].notna().all()  # the first 11 rows are in
    assert any("11 rows scored so far" in c.value for c in at.caption)
    (bar,) = [p for p in at.main.get("progress") if "DMS rows" in p.proto.text]
    assert "11 of 30 rows · about" in bar.proto.text and "left" in bar.proto.text  # from the job's own rate

    next(b for b in at.button if b.label == "Cancel").click().run()
    gate.open.set()  # the chunk of positions in flight finishes (kept), then the job stops
    settle(at)
    (cancelled,) = [i.value for i in at.info if "cancelled" in i.value]
    assert "cancelled after 11 of 30 rows; they are kept" in cancelled
    first_ten = set(gate.seen[:12])  # the wild type and the first 11 mutants

    # Reopening (a new session on the same server): only what is missing runs. (AppTest gives
    # every test session the same id: the second one is told apart here.)
    monkeypatch.setattr(background, "session_id", lambda: "a second session")
    ran_before = len(gate.masked)
    again = settle(dms_page(start(), assay))
    settle(again.radio(key="_w_vstrategy").set_value("pll").run())
    start_button = next((b for b in again.button if b.label.startswith("Start")), None)
    if start_button is not None:  # the rate measured meanwhile may make the rest quick enough to start at once
        settle(start_button.click().run())
    assert_clean(again)
    resumed = {sequence for sequence, _ in gate.masked[ran_before:]}
    assert not resumed & first_ten  # the stored rows' passes were not run again
    assert len(again.dataframe[0].value) == ROWS and again.dataframe[0].value["score"].notna().all()


def test_a_job_runs_on_while_the_user_is_on_another_page_and_shows_in_the_sidebar(monkeypatch):
    gate = threading.Event()
    real = Engine.compute_masked
    calls = []

    def slow(engine, sequence, positions=None, progress=None):
        if len(positions) > 1:  # not the page's "mask one position"
            calls.append(len(positions))
            if len(calls) == 2:
                assert gate.wait(300)
        return real(engine, sequence, positions, progress)

    monkeypatch.setattr(Engine, "compute_masked", slow)
    sequence = "MVHLTPEEKSAVTALWGKVNVDEVGGEALGRLLVVYPWTQRFFESFGDLSTPDAVMGNPKVKAHGKKVLGAFSDGLAHLDNLKGTFATLSEL" * 2
    engine = Engine(load_weights("random:tiny"))
    jobs.default_rates().record(engine.fingerprint, "masked", 1000, 0.001)  # quick: starts without asking
    at = open_page(start({"seq": sequence}), "predictions")
    at.radio(key="_w_scan").set_value("masked-marginals").run()
    wait_for(lambda: len(calls) >= 2, "the scan's second chunk did not start")
    open_page(at, "input")  # the user leaves the page
    assert_clean(at)
    (bar,) = [p for p in at.sidebar.get("progress") if "Masked scan" in p.proto.text]
    n = len(sequence)  # position 1 is stored already (the page's "Mask one position"): 1 + 64 done
    assert bar.proto.text.startswith(f"Masked scan of residues 1–{n}: 65 of {n} positions")
    assert any(b.label == "Cancel" for b in at.sidebar.button)
    gate.set()
    (job,) = [j for j in background.every_job() if j.title.startswith("Masked scan") and not j.finished] or [None]
    assert job is None or job.wait(300)
    settle(at)
    assert any(f"Masked scan of residues 1–{n}: done" in unescaped(c.value) for c in at.sidebar.caption)
    open_page(at, "predictions")
    assert_clean(at)
    assert at.metric[0].label == "Pseudo-perplexity" and calls == [64, 64, n - 1 - 128]  # no position twice


def test_the_sidebar_never_says_done_while_passes_remain(monkeypatch):
    """Issue #37, item 2, watched through a job: the Records page's mean entropies of 3 records (one
    record per engine call here) first run one chunk to measure this machine's rate; the sidebar then
    says the rate was measured and the rest waits for Start (it said "done" before, while the page
    asked to start the other records), and through the whole job after Start it says "done" only
    once every record is in. Each engine call is slowed (1 s) so the watch sees the job running;
    every job here asks first (QUICK_SECONDS = 0)."""
    from app_pages._ui.records import set_results

    background.forget_all()  # AppTest's sessions share one id: an earlier test's jobs would be listed here
    monkeypatch.setattr(jobs_panel, "QUICK_SECONDS", 0.0)
    monkeypatch.setattr(set_results, "CHUNK_RESIDUES", 50)  # one record per engine call
    real = Engine.run

    def slow(engine, *args, **kwargs):
        time.sleep(1.0)
        return real(engine, *args, **kwargs)

    monkeypatch.setattr(Engine, "run", slow)
    hbb = "MVHLTPEEKSAVTALWGKVNVDEVGGEALGRLLVVYPWTQRFFESFGDLSTPDAVMGNPKVKAHGKKVLGAFSDGLAHLDNLKGTFATLSEL"
    fasta = "".join(f">r{i}\n{s}\n" for i, s in enumerate([hbb, hbb[::-1], hbb[10:] + hbb[:10]]))
    at = open_page(paste(start(), fasta), "records")
    assert background.wait_all(300)
    at.run()
    assert_clean(at)

    def sidebar() -> list[str]:
        texts = [p.proto.text for p in at.sidebar.get("progress")] + [unescaped(c.value) for c in at.sidebar.caption]
        return [t for t in texts if t.startswith("Unmasked passes of 3 records")]

    (measured,) = sidebar()
    done = job_done = next(j for j in background.every_job() if j.title.startswith("Unmasked passes")).done
    assert 0 < done < 3  # the selected record may have been computed before the set's job (its own page run)
    assert measured == (f"Unmasked passes of 3 records: rate measured on {done} of 3 records; the other {3 - done} "
                        f"wait{'s' if 3 - done == 1 else ''} for Start on its page{MODEL}")
    assert any(f"mean entropy {job_done} of 3 records" in unescaped(c.value) for c in at.caption)  # the page agrees
    next(b for b in at.button if b.label.startswith("Start (")).click().run()
    job = max((j for j in background.every_job() if j.title.startswith("Unmasked passes")), key=lambda j: j.id)
    seen = []
    while True:
        finished = job.finished  # read before the run: a "done" drawn then must be true
        at.run()
        assert_clean(at)
        for text in sidebar():
            seen.append(text)
            assert ": done" not in text or finished and job.done == job.total, text
        if finished:
            break
        time.sleep(0.1)
    assert any(" of 3 records" in text and "rate measured" not in text for text in seen), seen  # seen running
    assert seen[-1] == f"Unmasked passes of 3 records: done (3 records){MODEL}"
    assert at.dataframe[0].value["mean entropy (bits)"].notna().all()


def test_sidebar_job_lines_count_their_true_units_and_name_the_model():
    """Issue 50: "Scoring 12 variants (pll): done (12 passes)" after 2,007 passes (a short pll list
    counts its variants, which the line called passes), and two models' lines read alike."""
    from types import SimpleNamespace

    from flamino_core.variants.indels import parse_mutations
    from flamino_core.variants.sequence_scores import pass_plan
    from test_app_variants import HBB, type_list

    background.forget_all()
    at = open_page(paste(start(), f">hbb\n{HBB}\n"), "variants")
    mutations = "E6V, p.Lys8del, K17E"
    at = type_list(at, mutations)
    at = settle(at.radio(key="_w_vstrategy").set_value("pll").run(), start=True)
    assert_clean(at)
    lines = [unescaped(c.value) for c in at.sidebar.caption if unescaped(c.value).startswith("Scoring 3 variants")]
    variants, _ = parse_mutations(mutations, HBB)
    passes = pass_plan(HBB, variants, "pll").total  # the wild type's and each mutant's, counted independently
    assert passes > 3 and {m.label: m.value for m in at.metric}["Model passes"] == f"{passes:,}"
    # masked-marginals first (the page's default: the two substitutions' positions), then pll.
    assert lines == [f"Scoring 3 variants (masked-marginals): done (2 passes){MODEL}",
                     f"Scoring 3 variants (pll): done (3 variants) · {passes:,} model passes{MODEL}"]

    def engine(name, is_random=False):
        return SimpleNamespace(weights=SimpleNamespace(name=name, is_random=is_random))

    assert jobs_panel.engine_name(engine("esm2_t33_650M_UR50D")) == "esm2_t33_650M_UR50D"
    assert jobs_panel.engine_name(engine("facebook/esm1b_t33_650M_UR50S")) == "esm1b_t33_650M_UR50S"
    assert jobs_panel.engine_name(engine("/data/models/my-esm1b/")) == "my-esm1b"  # the path is in the sidebar
    assert jobs_panel.engine_name(engine("/data/esm2_t6_8M_UR50D.pt")) == "esm2_t6_8M_UR50D"


def test_a_job_replaced_under_its_key_is_news_even_with_the_same_history(monkeypatch):
    """A set's first chunks while no rate is measured: each a new job under the same key, each with
    the same history (started, one record, measured). The second finishing while the page drew must
    still read as news (``jobs_panel.version`` changes), or no watcher reruns the page and the
    table stops filling: a sum of the jobs' change counts ended on the same number for both, and
    the 186-record Records table of a fresh clone stopped after 11 records."""
    monkeypatch.setattr(background, "session_id", lambda: "replaced-job session")
    monkeypatch.setattr(background, "visitor_key", lambda: "replaced-job visitor")
    key = ("records", "same work")

    def one_record(job):
        job.progress(1, 3)
        return None

    first = background.submit(key, "Unmasked passes", "records", one_record)
    assert first.wait(30)
    seen = jobs_panel.version()  # what the page read before drawing
    second = background.submit(key, "Unmasked passes", "records", one_record)
    assert second is not first and second.wait(30)
    assert second.version == first.version  # the same history: the old sum could not tell them apart
    assert jobs_panel.has_news(seen, jobs_panel.version())
    # Drawn by the page as it ended (``_drawn``: a job a full queue stopped at once), the same job
    # is no news: else every run started the next try, and the hosted full-queue pages never settled.
    assert not jobs_panel.has_news({**seen, second.id: second.version}, jobs_panel.version())
    background.forget(key)

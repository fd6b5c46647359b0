"""The time left a job says between two of its reports, and where a compilation's seconds go.

CI, 2026-12-05, inside `make test` (load average 6 on 2 cores): a pseudo-perplexity of 40 records
said "about 20 s left" a third in, just before Cancel, and its Resume then predicted 11.2 s for
the same work. The time left was the smoothing formula read at the moment the page drew it: it
counts the time of the chunk in flight but none of its units, so a third into a set each second
in flight added 1.75 s, and a compiling chunk under load inflated it by its compile time times
that. Now the time left is what was said at the last report, counting down for one chunk's time,
then up by each second late; and a compilation is told to the job when the batch that paid it
reports, not when the call ends. Fake clocks and a fake engine: every figure is exact.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from flamino_core.jobs import background as jobs
from flamino_core.jobs import metered as metered_module
from flamino_core.jobs.metered import MeteredEngine


def resumed_after_cancel(now: list[float], title: str, unit: str, total: int, done: int, seconds: float):
    """A job cancelled after ``done`` of ``total`` units in ``seconds`` (on the fake clock ``now``),
    and the job its Resume starts, carrying it on (not yet told its progress)."""
    first = jobs.Job(title, unit)
    first.progress(0, total)
    now[0] = seconds
    first.progress(done, total)
    first.cancel()
    first._finish(jobs.CANCELLED)
    resumed = jobs.Job(title, unit)
    resumed.carry_on(first)
    return resumed


def test_between_reports_the_time_left_counts_down_for_a_chunk_then_rises_by_the_lateness(monkeypatch):
    now = [0.0]
    monkeypatch.setattr(jobs.time, "monotonic", lambda: now[0])
    job = jobs.Job("Pseudo-perplexity of 3 records", "positions")
    job.expect(100.0)  # 1 s per position predicted, for 100 positions
    job.progress(0, 100)
    now[0] = 10.0
    job.progress(10, 100)  # (5 x 1 + 10) / (5 + 10) = 1 s per position: 90 left
    now[0] = 20.0
    job.progress(20, 100)  # chunks of 10 s
    assert job.seconds_left() == pytest.approx(80.0)
    now[0] = 24.0
    assert job.seconds_left() == pytest.approx(76.0)  # the formula read now: 80 x (5 + 24) / 25 = 92.8
    now[0] = 30.0
    assert job.seconds_left() == pytest.approx(70.0)  # one chunk's time, counted down
    now[0] = 35.0
    assert job.seconds_left() == pytest.approx(75.0)  # 5 s late: 5 s more (the formula: 128 s)
    now[0] = 38.0
    job.progress(30, 100)  # the late chunk in: the formula, from the measured rate
    assert job.seconds_left() == pytest.approx(70 * (5 + 38) / 35)


def test_what_was_shown_before_a_cancel_is_what_the_resume_goes_on_from(monkeypatch):
    """The Chromium bar (issue #37): the time left the page shows just before Cancel, scaled to the
    units left at the Resume, within 1.5x of what the Resume predicts: here within a chunk."""
    now = [0.0]
    monkeypatch.setattr(jobs.time, "monotonic", lambda: now[0])
    job = jobs.Job("Pseudo-perplexity of 3 records", "positions")
    job.expect(100.0)

    def work(job):
        job.progress(0, 100)
        now[0] = 10.0
        job.progress(10, 100)
        now[0] = 20.0
        job.progress(20, 100)
        now[0] = 28.0  # the page draws the job 8 s into its third chunk, the user clicks Cancel
        shown.append(job.seconds_left())
        job.cancel()
        now[0] = 30.0
        job.progress(30, 100)  # the chunk in flight ends
        from flamino_core.store.passes import Cancelled
        raise Cancelled()

    shown: list[float] = []
    job._run(work)
    assert job.state == jobs.CANCELLED and shown == [pytest.approx(72.0)]  # the formula: 105.6 s
    resumed = jobs.Job("Pseudo-perplexity of 3 records", "positions")
    resumed.carry_on(job)
    resumed.progress(0, 70)  # the rest: 70 positions not stored
    assert resumed.seconds_left() == pytest.approx(70.0)  # (5 + 30) / (5 + 30) = 1 s per position
    assert resumed.seconds_left() == pytest.approx(shown[0] * 70 / 80, rel=0.15)  # 63 s scaled


def test_a_compilation_is_told_to_the_job_when_its_batch_reports(monkeypatch, tmp_path):
    """Three batches, the first compiling (4 s beyond its 1 s at the measured rate): the job hears
    of the 4 s before the first batch's progress, and nothing more at the call's end."""
    now = [0.0]
    monkeypatch.setattr(metered_module.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(metered_module.pass_cost, "BATCH_FIXED_S", 0.0)  # a batch's fixed cost: test_first_guess.py
    config = SimpleNamespace(family="esm2", num_layers=2, embed_dim=32, attention_heads=4, ffn_dim=64, vocab_size=33)
    engine = SimpleNamespace(compiled_shapes={"16x64"}, fingerprint="m", config=config,
                             backend=SimpleNamespace(attention="xla", precision="fp32"))
    rates = jobs.Rates(tmp_path / "pass_rates.json")
    rates.record("m", "masked", 1000, 1.0)  # 1 ms per MFLOP: 1 s per batch of 1000 MFLOP
    heard: list[tuple[str, float]] = []
    metered = MeteredEngine(engine, rates, on_compile=lambda s: heard.append(("compiled", s)),
                            on_compiling=lambda: heard.append(("compiling", None)))
    batches = [("16x128", 1000.0), ("16x128", 1000.0), ("4x128", 250.0)]

    def call(report):
        for done, end in enumerate((5.0, 6.0, 6.5), start=1):  # the last compiles too: 0.5 s for 0.25 s
            now[0] = end
            report(done, len(batches))
        return "log probs"

    assert metered._timed("masked", batches, call, lambda d, t: heard.append(("progress", d))) == "log probs"
    # "compiling" before the call (issue 50: a page does not wait for a first chunk that compiles)
    assert heard == [("compiling", None), ("compiled", pytest.approx(4.0)), ("progress", 1), ("progress", 2),
                     ("compiled", pytest.approx(0.25)), ("progress", 3)]  # nothing left for the call's end
    heard.clear()  # its shapes are compiled now: nothing is said before the next call
    engine.compiled_shapes |= {"16x128", "4x128"}
    metered._timed("masked", batches, call, lambda d, t: heard.append(("progress", d)))
    assert ("compiling", None) not in heard



def test_a_job_that_compiles_says_so_while_it_measures_and_its_next_stage_does_not():
    """Issue 50 row 1: a first chunk compiling a model new to the server says so on its progress
    line (the page no longer waits for it); a fit's next stage (its scikit-learn fits, which
    compile nothing) must not inherit the words from its passes' stage."""
    import threading

    told, go_on, end = threading.Event(), threading.Event(), threading.Event()

    def work(job):
        job.progress(0, 10)
        job.compiling()  # MeteredEngine says so before a call that compiles
        told.set()
        assert go_on.wait(30)
        job.stage("scikit-learn fits", 5)
        job.progress(0, 5)
        told.set()
        assert end.wait(30)

    job = jobs.start(work, "Fitting the predictor", "model passes (embedding)")
    assert told.wait(30) and job.compiles
    assert job.status().line() == ("Fitting the predictor: 0 of 10 model passes (embedding) · measuring this "
                                   "machine's rate on a first chunk (a model new to this server compiles first)…")
    assert not job.wait_unless_compiling(0.1)  # returns at once: it compiles, it has not finished
    told.clear()
    go_on.set()
    assert told.wait(30)
    assert not job.compiles
    assert job.status().line() == "Fitting the predictor: 0 of 5 scikit-learn fits · measuring this machine's rate…"
    end.set()
    assert job.wait(30) and job.wait_unless_compiling(0.1)  # finished: True


def test_a_resume_on_a_busier_machine_says_a_time_left_that_falls_as_the_work_is_done(monkeypatch):
    """Issue 50 row 2: "about 6 minutes left" stayed for 4.5 minutes of a resumed pseudo-perplexity.
    A Resume goes on from the pace said before the Cancel (``carry_on``); when the machine is
    busier since (Chromium, load 10-11: 11.9 s carried for the 35.3 s the rest took, 3x), a pace
    weighing 5% of the rest (PRIOR_SHARE, before) had the time left rise for 13 reports, then fall
    2-14 s per 30 s report for 7 more (2,100 s said at 10% for 2,700). Weighing one chunk's worth
    (``CARRIED_SHARE``), it is within 1.5x of the truth at 10% (2,536 s) and from 15% on falls at
    every report by at least half the time the report took. Fake clock: the pace 1 s a unit, the
    rest 3 s a unit, chunks of 10 units."""
    now = [0.0]
    monkeypatch.setattr(jobs.time, "monotonic", lambda: now[0])
    resumed = resumed_after_cancel(now, "Pseudo-perplexity of 40 records", "positions", 1300, 300, 300.0)  # 1 s each
    resumed.progress(300, 1300)
    assert resumed.seconds_left() == pytest.approx(1000.0)  # the carried pace: no jump at the click
    said = []
    for done in range(310, 1301, 10):
        now[0] += 30.0  # 3 s a position now
        resumed.progress(done, 1300)
        said.append((done - 300, resumed.seconds_left()))
    at_tenth = dict(said)[100]
    assert 1 / 1.5 <= (900 * 3.0) / at_tenth <= 1.5, at_tenth
    falls = [before - after for (_, before), (done, after) in zip(said, said[1:]) if done >= 150]
    assert min(falls) >= 15.0, falls


def test_a_duration_under_two_minutes_is_said_in_seconds_not_rounded_to_a_minute():
    """#66 D8: Start said 89 s (its own caption: 0.48 s x 186) as "about 1 minute"."""
    from flamino_core.jobs.status import about

    assert about(89) == "about 90 seconds" and about(42) == "about 40 seconds"
    assert about(61) == "about 60 seconds" and about(112) == "about 110 seconds"
    assert about(130) == "about 2 minutes" and about(3 * 3600 + 600) == "about 3 hours 10 minutes"

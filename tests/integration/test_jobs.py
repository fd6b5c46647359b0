"""Jobs off the caller's thread (``flamino_core.jobs.background``), without Streamlit: progress and the time
left from the measured rate, a cancel that keeps every finished chunk in the store and resumes,
the engine calls bounded by a queue slot, the pass rates kept on disk."""

from __future__ import annotations

import contextlib
import json
import threading

import jax
import numpy as np
import pytest

from flamino_core import Engine, load_weights

from flamino_core.jobs import background as jobs, pass_cost
from flamino_core.jobs.metered import MeteredEngine
from test_time_left import resumed_after_cancel

from flamino_core.store import passes
from flamino_core.engine.engine import TRACE_COUNTS
from flamino_core.store.result_store import ResultStore


@pytest.fixture(scope="module")
def engine():
    return Engine(load_weights("random:tiny:3"))


@pytest.fixture
def store(tmp_path):
    return ResultStore(tmp_path / "results.sqlite")


class Counting:
    """The engine with the masked positions it is sent counted (the reference: what ran)."""

    def __init__(self, engine):
        self.engine, self.masked = engine, []
        self.config, self.fingerprint = engine.config, engine.fingerprint

    def compute_masked(self, sequence, positions=None, progress=None):
        self.masked.extend(positions)
        return self.engine.compute_masked(sequence, positions, progress=progress)


class FakeClock:
    """Stands in for the ``time`` module inside ``jobs``: the job's rate is then a fact of the test,
    not of how busy the machine happens to be (the wall-clock version failed once on a loaded
    machine: 0.0376 measured against 0.0439 expected)."""

    def __init__(self):
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


def test_a_job_reports_progress_and_its_value_and_the_time_left_from_its_own_rate(monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(jobs, "time", clock)
    steps = []

    def work(job):
        job.progress(2, 10)  # 2 were stored before: not this job's speed
        for done in range(3, 11):
            clock.now += 0.25  # each thing takes a quarter of a second on the fake clock
            job.progress(done, 10)
            steps.append((job.rate(), job.seconds_left()))
        return "value"

    job = jobs.start(work, "ten things", "things")
    assert job.wait(30)
    assert job.state == jobs.DONE and job.value == "value" and job.done == 10 and job.fraction() == 1.0
    rate, left = steps[3]  # 4 things in 1 s since the first report
    # With the clock standing still between the report and the two reads, the rate is exactly
    # 4 things a second and the 4 left take 1 s; the tolerance is only float rounding.
    assert rate == pytest.approx(4.0, rel=1e-9) and left == pytest.approx((10 - 6) / 4.0, rel=1e-9)
    assert steps[-1][1] == 0


def test_a_failing_job_says_why_and_a_stopped_one_keeps_its_reason():
    def fail(job):
        raise ValueError("no such residue")

    def stop(job):
        raise jobs.Stopped("1 heavy job running, 4 waiting")

    failed, stopped = jobs.start(fail, "f", "x"), jobs.start(stop, "s", "x")
    assert failed.wait(30) and stopped.wait(30)
    assert failed.state == jobs.FAILED and failed.error == "ValueError: no such residue"
    assert stopped.state == jobs.STOPPED and stopped.error == "1 heavy job running, 4 waiting"


def test_cancel_keeps_the_finished_chunks_and_the_next_job_resumes_without_repeating_one(engine, store,
                                                                                            real_sequences):
    sequence = real_sequences["HBB_HUMAN"]  # 147 residues: chunks of 64, 64, 19
    counting = Counting(engine)
    in_first_chunk, release = threading.Event(), threading.Event()

    def slot():  # each engine call waits here: the test cancels while the first one runs
        in_first_chunk.set()
        assert release.wait(60)
        return contextlib.nullcontext()

    metered = MeteredEngine(counting, slot=slot)

    def work(job):
        return passes.masked_log_probs(metered, sequence, store=store, progress=job.progress, cancelled=job.cancelled)

    job = jobs.start(work, "scan", "positions")
    assert in_first_chunk.wait(60)
    job.cancel()
    release.set()  # the chunk in flight finishes and is kept; the next is not started
    assert job.wait(60) and job.state == jobs.CANCELLED
    assert counting.masked == list(range(64)) and job.done == 64
    assert sorted(store.held_positions(engine.fingerprint, sequence)) == list(range(64))

    again = jobs.start(lambda job: passes.masked_log_probs(metered, sequence, store=store, progress=job.progress),
                       "scan", "positions")
    assert again.wait(120) and again.state == jobs.DONE
    assert counting.masked == list(range(len(sequence)))  # every position once, across both jobs
    # The numbers are the engine's own (no store), to float32 rounding of different batchings.
    np.testing.assert_allclose(again.value, engine.compute_masked(sequence), atol=1e-5)


def test_the_metered_engine_holds_a_slot_per_call_and_measures_the_rate(engine, tmp_path):
    rates = jobs.Rates(tmp_path / "rates.json")
    held = []

    @contextlib.contextmanager
    def slot():
        held.append("in")
        yield
        held.append("out")

    metered = MeteredEngine(engine, rates, slot=slot)
    sequence = "MKTAYIAKQRQISFVKSHFSRQ"
    for _ in range(2):  # the first calls may compile these shapes: that time is no rate
        metered.compute_masked(sequence, range(5))
        metered.run([sequence], repr_layers=(), logits=True)
    assert held == ["in", "out"] * 4
    assert metered.fingerprint == engine.fingerprint and metered.config is engine.config  # the rest is the engine's
    masked = pass_cost.masked_seconds(engine, [(len(sequence), 5)], rates)
    unmasked = pass_cost.unmasked_seconds(engine, [len(sequence)], rates)
    assert masked is not None and masked > 0 and unmasked is not None and unmasked > 0
    # Kept on disk: a restarted server (a new Rates on the same file) knows them.
    again = jobs.Rates(tmp_path / "rates.json")
    assert again.seconds(engine.fingerprint, "masked", 100) == pytest.approx(rates.seconds(engine.fingerprint,
                                                                                           "masked", 100))
    # These calls' batches are narrow (5 positions, one short record: under half the rows their
    # width allows), so their rates are the narrow class's, which is never lent to another model
    # (pass_cost.unit_rate; a few-row batch's rate is mostly jitter, docs/reliability.md). Before
    # the classes this asserted the borrowing on them; it then passed vacuously (None == None) or
    # failed, by whether this worker had compiled the unmasked shape before (fresh clone, 4c3d855).
    assert all(pass_cost.is_narrow(engine, key) for key, _ in pass_cost.masked_batches(engine, [(len(sequence), 5)]))
    assert again.measured(engine.fingerprint, pass_cost.narrow_kind("masked"))
    assert again.seconds("another model", "masked", 100) is None
    # A model never timed here borrows the full batches' rates of the models timed here (issue 50);
    # none timed: nothing to go by.
    pass_cost.record_call(again, engine.fingerprint, "masked", 1e3, 4, 0.05)  # as a call of full batches is
    assert again.measured(engine.fingerprint, "masked")
    assert again.seconds("another model", "masked", 100) == again.seconds(engine.fingerprint, "masked", 100)
    assert jobs.Rates(tmp_path / "none.json").seconds("another model", "masked", 100) is None


def test_a_call_that_compiles_a_new_shape_sets_no_rate(engine, tmp_path):
    """A one-batch call that traced a shape never seen in this process timed its compilation
    (seconds) rather than its pass (milliseconds); recording it made the app's estimates
    20-700x too long. The same call once compiled is recorded (a narrow batch, 4 rows where its
    width holds 256: into the narrow batches' rate, ``pass_cost.is_narrow``)."""
    rates = jobs.Rates(tmp_path / "rates.json")
    metered = MeteredEngine(engine, rates)
    sequence = "MKTAYIAKQRQISFVKSHFSRQ"
    jax.clear_caches()  # as in a new process: this shape is not compiled yet (later tests recompile)
    traces = sum(TRACE_COUNTS.values())
    metered.compute_masked(sequence, range(3))  # one batch
    assert sum(TRACE_COUNTS.values()) > traces  # it compiled here (else this test checks nothing)
    assert not pass_cost.measured(engine, "masked", rates)
    traces = sum(TRACE_COUNTS.values())
    metered.compute_masked(sequence, range(3, 6))
    assert sum(TRACE_COUNTS.values()) == traces
    assert rates.seconds(engine.fingerprint, "masked narrow", 100) is not None


def test_a_calls_rate_leaves_out_the_batches_that_compiled():
    """The rate of a call is timed on its batches of shapes compiled before them: not the first
    (setup), nor a shape's first batch in the call when the call compiled it (a record's last chunk
    ends in rows of its own, whose compilation inflated the rate 4x, in Chromium)."""
    from flamino_core.jobs.metered import _clean

    batches = [("16x192", 5.0), ("16x192", 5.0), ("4x192", 1.0), ("4x192", 1.0), ("16x192", 5.0)]
    finished = [1.0, 2.0, 9.0, 9.2, 10.2]  # the first 4-row batch compiled: 7 s
    assert _clean(batches, finished, {"16x192"}) == (11.0, 3, pytest.approx(2.2))  # 1 + 0.2 + 1 s
    assert _clean(batches, finished, {"16x192", "4x192"}) == (12.0, 4, pytest.approx(9.2))  # none compiled here
    assert _clean(batches[:1], finished[:1], set()) == (0.0, 0, 0.0)  # nothing to time


def test_what_a_compiling_call_tells_its_job(engine, tmp_path):
    """``MeteredEngine`` tells the job (``on_compile``) what a compiling call spent compiling: its
    time beyond its work at the measured rate, or before any rate, what the cost model gives
    its compilations, never more than the call took."""
    rates = jobs.Rates(tmp_path / "rates.json")
    metered = MeteredEngine(engine, rates)
    per_compile = pass_cost.compile_seconds(engine, "masked compile", rates)  # the default: none measured here
    assert metered._compiling_seconds("masked", None, 30.0, 2, 0) == 2 * per_compile  # no rate measured yet
    assert metered._compiling_seconds("masked", None, 1.5, 2, 0) == 1.5  # at most the call's time
    rates.record(engine.fingerprint, "masked", 1000, 0.5)  # 0.5 ms per MFLOP
    running = rates.seconds(engine.fingerprint, "masked", 1000)
    assert metered._compiling_seconds("masked", running, 4.0, 1, 0) == pytest.approx(3.5)
    assert metered._compiling_seconds("masked", running, 0.3, 1, 0) == 0.0  # faster than the rate: none


def test_a_metered_engine_through_the_store_masks_each_position_once(engine, store):
    """The one masked-pass path: ``passes.masked_log_probs`` over a metered engine reads the store
    first and asks the engine (``compute_masked``, one queue slot per chunk) only for what is missing."""
    from flamino_core.store import passes

    counting = Counting(engine)
    metered = MeteredEngine(counting)
    sequence = "MKTAYIAKQRQISFVKSHFSRQLEERLGLIEVQ"
    first = passes.masked_log_probs(metered, sequence, [3, 7], store=store)
    second = passes.masked_log_probs(metered, sequence, [7, 3, 9], store=store)
    assert counting.masked == [3, 7, 9]
    np.testing.assert_array_equal(second[:2], first[::-1])


def test_work_counts_are_the_batches_the_engine_runs(engine, store):
    """The cost's plan is the engine's: the (rows, width) of every pass it reports compiling, and
    its work counted from them, filler rows included (a pass of 3 masked positions runs 4 rows):
    per row the matmul MFLOPs of docs/benchmarks.md's efficiency count, written out here from
    that page (layers x (2W(4D^2 + 2DF) + 4W^2 D), the LM head 2D(D + V) per output token), and
    each token's own cost per layer at the pass kind's measured MFLOP-equivalent."""
    from flamino_core.engine.planner import bucket_length

    c = engine.config

    def mflop(width: int, head_tokens: int) -> float:
        layer = 2 * width * (4 * c.embed_dim ** 2 + 2 * c.embed_dim * c.ffn_dim) + 4 * width ** 2 * c.embed_dim
        kind = "masked" if head_tokens == 1 else "unmasked"
        return ((c.num_layers * layer + head_tokens * 2 * c.embed_dim * (c.embed_dim + c.vocab_size)) / 1e6
                + pass_cost.TOKEN_LAYER_MFLOP[kind] * width * c.num_layers)

    for length, positions in ((22, 3), (300, 70), (1030, 20)):
        sequence = ("MKTAYIAKQRQISFVKSHFSRQ" * 60)[:length]
        engine.compiled_shapes.clear()
        engine.compute_masked(sequence, range(positions))
        planned = pass_cost.masked_batches(engine, [(length, positions)], chunk=None)
        assert {key for key, _ in planned} == engine.compiled_shapes
        rows, width = engine.masked_pass_shape(length)
        run_rows = rows * (positions // rows) + (0 if positions % rows == 0 else 1 << (positions % rows - 1).bit_length())
        assert sum(t for _, t in planned) == pytest.approx(run_rows * mflop(width, 1))
    # An unmasked pass of 2,000 residues: windows of 1022 every 511 residues, 3 of them, one batch
    # (packed rows are each 1,024 wide: a window alone fills one).
    engine.compiled_shapes.clear()
    passes.record_outputs(engine, ["A" * 2000, "M" * 100, "K" * 100], store=store)
    planned = pass_cost.unmasked_batches(engine, [2000, 100, 100])
    assert {key for key, _ in planned} == engine.compiled_shapes
    # 3 rows: a batch of 2 and one of 1 (power-of-two pieces, no filler rows).
    width = bucket_length(1024)
    assert sum(t for _, t in pass_cost.unmasked_batches(engine, [2000])) == pytest.approx(3 * mflop(width, width))


def test_a_cost_counts_the_shapes_not_compiled_in_this_process(engine, store, tmp_path):
    """A fresh process compiles each new shape once (seconds, against milliseconds per pass of a
    small model): the cost adds the compilations the plan needs and this process has not run,
    at the seconds per compilation measured here (none measured: the default), and fewer once
    the persistent compilation cache holds them."""
    rates = jobs.Rates(tmp_path / "rates.json")
    sequence = "MKTAYIAKQRQISFVKSHFSRQLEERLGLIEVQAPILSRVGDGTQ"  # 45 residues
    rates.record(engine.fingerprint, "masked", 100_000, 1.0)  # 10 us per MFLOP: the pass's share is small
    need = [(len(sequence), 40)]
    planned = pass_cost.masked_batches(engine, need)
    work = sum(t for _, t in planned) / 100_000 + len(planned) * pass_cost.BATCH_FIXED_S  # seconds, compiled
    engine.compiled_shapes.clear()
    cold = pass_cost.masked_seconds(engine, need, rates)
    shapes = len({key for key, _ in pass_cost.masked_batches(engine, need)})
    assert cold == pytest.approx(work + shapes * pass_cost.DEFAULT_COMPILE_S["masked compile"])
    metered = MeteredEngine(engine, rates)
    jax.clear_caches()  # the shapes really compile in this call (its time measures a compilation)
    passes.masked_log_probs(metered, sequence, range(40), store=store)
    assert pass_cost.masked_seconds(engine, need, rates) == pytest.approx(work)  # compiled now
    measured = pass_cost.compile_seconds(engine, "masked compile", rates)
    assert measured != pass_cost.DEFAULT_COMPILE_S["masked compile"] and 0 < measured < 120
    # The other kind of pass, never compiled: this architecture's measured masked compilation,
    # scaled by the defaults' ratio (not the constant measured on another machine).
    defaults = pass_cost.DEFAULT_COMPILE_S
    assert pass_cost.compile_seconds(engine, "unmasked compile", rates) == pytest.approx(
        measured * defaults["unmasked compile"] / defaults["masked compile"])
    # Another process on this machine, with the persistent cache on: the same shapes are cheap.
    engine.compiled_shapes.clear()
    rates.add_compiled(pass_cost.architecture(engine), [key for key, _ in pass_cost.masked_batches(engine, need)])
    jax.config.update("jax_compilation_cache_dir", str(tmp_path / "jax"))
    try:
        warm = pass_cost.masked_seconds(engine, need, rates)
    finally:
        jax.config.update("jax_compilation_cache_dir", None)
    assert warm == pytest.approx(work + shapes * pass_cost.DEFAULT_COMPILE_S["cached compile"])


def test_a_cancel_during_the_first_chunk_that_measures_the_rate_stops_the_work_and_says_so(engine):
    """A masked scan's first chunk measures this machine's rate and does not poll ``cancelled``
    (one chunk); a Cancel clicked while it runs used to end it as ``MEASURED``, and the page's next
    run started the rest as a new job: the Chromium scan test saw all 3,000 positions done after
    its Cancel. A Cancel that arrives after the chunk ended, before the page drew that, is the
    same click on the same progress bar: it cancels too."""
    from flamino_core.jobs.plan import MaskedScan

    sequence = "".join(np.random.default_rng(50).choice(list("ACDEFGHIKLMNPQRSTVWY"), 200))  # 64 + 136 left
    scan = MaskedScan(engine, sequence, tuple(range(len(sequence))))
    in_chunk, release = threading.Event(), threading.Event()

    def slot():  # the chunk's engine call waits here: the test cancels while it runs
        in_chunk.set()
        assert release.wait(60)
        return contextlib.nullcontext()

    def first_chunk(job):
        job.measure_only()  # what jobs_panel._measuring does
        return scan.run(job, MeteredEngine(engine, slot=slot), first_only=True)

    job = jobs.start(first_chunk, "Masked scan", "positions")
    assert in_chunk.wait(60)
    job.cancel()
    release.set()
    assert job.wait(60) and job.state == jobs.CANCELLED
    assert job.status().line() == "Masked scan: cancelled after 64 of 200 positions, kept"
    assert scan.needed().passes == len(sequence) - 64  # the chunk is kept: a Resume runs the rest

    measured = jobs.start(lambda job: (job.measure_only(), job.progress(4, 10)), "first chunk", "records")
    assert measured.wait(30) and measured.state == jobs.MEASURED
    measured.cancel()
    assert measured.state == jobs.CANCELLED and measured.pace is None  # it never said a pace: no rate
    assert measured.status().line() == "first chunk: cancelled after 4 of 10 records, kept"


def test_a_jobs_status_names_each_phase_in_one_place_and_is_never_done_while_units_remain():
    """``Job.status()`` (issue #37, item 2): queued before its first report, measuring until its own
    rate is known, n of N with the time left, cancelling from the click until the chunk in flight
    ends; a measuring chunk that ends with units left is "measured", never "done"; a cancelled job
    says how much it kept."""
    from flamino_core.store.passes import Cancelled

    gates = [threading.Event() for _ in range(4)]
    reached = [threading.Event() for _ in range(3)]

    def work(job, first_only=False):
        if first_only:
            job.measure_only()
        assert gates[0].wait(30)
        job.progress(2, 10)  # stored before: the baseline, no rate yet
        reached[0].set()
        assert gates[1].wait(30)
        job.progress(4, 10)
        reached[1].set()
        assert gates[2].wait(30)
        if job.cancelled():
            raise Cancelled("cancelled")
        return "first chunk"

    measured = jobs.start(lambda job: work(job, first_only=True), "Pseudo-perplexity of 3 records", "positions")
    assert measured.status().phase == "queued" and measured.status().words().startswith("queued")
    gates[0].set()
    assert reached[0].wait(30)
    assert measured.status().phase == "measuring"
    assert measured.status().words() == "2 of 10 positions · measuring this machine's rate…"
    gates[1].set()
    assert reached[1].wait(30)
    status = measured.status()
    assert status.phase == "running" and status.seconds_left is not None
    assert status.words().startswith("4 of 10 positions · about") and status.words().endswith("left")
    gates[2].set()
    assert measured.wait(30)
    status = measured.status()
    assert measured.state == jobs.MEASURED and measured.finished and status.ended and status.fraction < 1
    assert status.line() == ("Pseudo-perplexity of 3 records: rate measured on 4 of 10 positions; "
                             "the other 6 wait for Start on its page")
    assert "done" not in status.line()

    for gate in gates:
        gate.clear()
    for mark in reached:
        mark.clear()
    cancelled = jobs.start(work, "Unmasked passes of 10 records", "records")
    gates[0].set()
    gates[1].set()
    assert reached[1].wait(30)
    cancelled.cancel()
    assert cancelled.status().phase == "cancelling" and "cancelling" in cancelled.status().line()
    gates[2].set()
    assert cancelled.wait(30)
    assert cancelled.status().line() == "Unmasked passes of 10 records: cancelled after 4 of 10 records, kept"

    whole = jobs.start(lambda job: (job.measure_only(), job.progress(10, 10)), "all at once", "records")
    assert whole.wait(30) and whole.state == jobs.DONE  # a first chunk that did everything is done
    assert whole.status().line() == "all at once: done (10 records)" and whole.status().fraction == 1.0


def test_the_time_left_leans_on_the_cost_model_until_the_job_measures_its_own_and_the_outcome_is_kept(
        tmp_path, monkeypatch):
    """Issue #37, item 1: a job given the cost model's time (``expect``) says a time left before its
    first chunk, does not jump at the first (slow) unit, moves to its own rate as it measures more,
    and when it ends its predicted, at-10% and actual times go into the pass-rate file, beside the
    rates, which still read. A pass kind never measured borrows the other's time per MFLOP. The
    clock is a fake one, so every figure is exact (no tolerance needed)."""
    path = tmp_path / "pass_rates.json"
    rates = jobs.Rates(path)
    rates.record("m", "unmasked", 1000, 2.0)
    assert rates.seconds("m", "masked", 500) == 1.0  # borrowed: 2 ms per MFLOP
    assert rates.seconds("other", "masked", 500) is None

    now = [0.0]
    monkeypatch.setattr(jobs.time, "monotonic", lambda: now[0])
    job = jobs.Job("Scoring 110 DMS rows (pll)", "rows")
    job.expect(100.0, log=rates.record_job)  # 100 s for the 100 rows not stored
    assert job.seconds_left() == 100.0  # before any report: the prediction

    def work(job):
        job.progress(10, 110)  # 10 rows stored before the job: not its speed
        assert job.seconds_left() == 100.0
        now[0] = 5.0
        job.progress(11, 110)  # the first row took 5 s, not 1 s: weight 5 rows at 1 s + 5 s over 6 rows
        assert job.seconds_left() == pytest.approx(99 * (5 * 1.0 + 5.0) / (5 + 1))  # 165 s, not 495
        now[0] = 50.0
        job.progress(20, 110)  # a tenth of the work: (5 + 50) / (5 + 10) s per row, 90 rows left
        assert job.seconds_left() == pytest.approx(90 * 55 / 15)
        now[0] = 320.0
        job.progress(110, 110)
        return "scores"

    job._run(work)
    assert job.state == jobs.DONE and job.seconds_left() is None
    (entry,) = jobs.Rates(path).history()  # read back from the file
    assert entry["title"] == "Scoring 110 DMS rows (pll)" and entry["state"] == "done"
    assert (entry["units"], entry["units_asked"], entry["predicted_s"]) == (100, 100, 100.0)
    assert entry["predicted_s_at_tenth"] == pytest.approx(50 + 90 * 55 / 15, abs=0.01)  # 380 s
    assert entry["actual_s"] == 320.0 and entry["machine"] == jobs.machine()
    assert jobs.Rates(path).seconds("m", "unmasked", 1000) == 2.0  # the rates still read


def test_compilations_are_counted_once_not_in_the_time_per_unit(monkeypatch):
    """Issue #37: a fresh job compiles a batch shape the first time it meets it, seconds each
    against milliseconds per pass. Before, a compilation in its first tenth was extrapolated over
    the other nine tenths (in Chromium: 118.8 s said at 10% for 57 s of work). The cost model's
    compilations (``expect(compiling=)``) and those the job has paid (``compiled``) are kept out of
    the time per unit and counted once. Fake clock: every figure exact."""
    now = [0.0]
    monkeypatch.setattr(jobs.time, "monotonic", lambda: now[0])
    job = jobs.Job("Pseudo-perplexity of 2 records", "positions")
    job.expect(30.0, compiling=10.0)  # 20 s of passes for 100 positions, two compilations of 5 s
    assert job.seconds_left() == 30.0
    job.progress(0, 100)
    now[0] = 7.0
    job.compiled(5.0)  # the first chunk compiled its shape: 5 of its 7 s
    job.progress(10, 100)
    # 0.2 s per position predicted, worth w = 5 positions; 2 s measured on 10: (5 x 0.2 + 2) / 15
    # per position, for 90 positions, plus the 5 s of compilation not yet paid.
    assert job.seconds_left() == pytest.approx(90 * (5 * 0.2 + 2.0) / 15 + 5.0)  # 23 s, not 90 x 8 / 15 = 48 s
    now[0] = 14.0
    job.compiled(5.0)  # the second shape
    job.progress(40, 100)
    assert job.seconds_left() == pytest.approx(60 * (5 * 0.2 + 4.0) / 45)  # nothing left to compile
    job.compiled(3.0)  # a compilation the cost model did not foresee (another shape): out of the rate
    assert job.seconds_left() == pytest.approx(60 * (5 * 0.2 + 1.0) / 45)
    unforeseen = jobs.Job("Masked scan", "positions")  # no cost model: its own rate without compilations
    unforeseen.progress(0, 10)
    now[0] = 20.0
    unforeseen.compiled(4.0)
    unforeseen.progress(2, 10)
    assert unforeseen.seconds_left() == pytest.approx(8 * (6.0 - 4.0) / 2)


def test_a_cost_borrowed_from_the_other_kind_of_pass_says_so_and_weighs_less(engine, tmp_path, monkeypatch):
    """Issue #37: a pass kind never timed for a model borrows the other kind's time per MFLOP
    (``Rates.seconds``); the cost says so (``PassSeconds.borrowed``) and the job leans on it with
    ``BORROWED_SHARE``, not ``PRIOR_SHARE``: in Chromium a pseudo-perplexity borrowed from the
    Records table's unmasked passes said 20 s for 5 s of work (an unmasked pass capturing every
    layer of random:tiny took 18x a masked pass's time per token). Fake clock: figures exact."""
    rates = jobs.Rates(tmp_path / "rates.json")
    rates.record(engine.fingerprint, "unmasked", 1000, 2.0)
    need = [(20, 20)]
    borrowed = pass_cost.masked_seconds(engine, need, rates)
    assert borrowed.borrowed and not pass_cost.unmasked_seconds(engine, [20], rates).borrowed
    rates.record(engine.fingerprint, "masked", 1000, 1.0)
    assert not pass_cost.masked_seconds(engine, need, rates).borrowed  # timed now: its own

    now = [0.0]
    monkeypatch.setattr(jobs.time, "monotonic", lambda: now[0])
    said = {}
    for name, borrowed_rate in (("firm", False), ("borrowed", True)):
        job = jobs.Job("Pseudo-perplexity of 40 records", "positions")
        job.expect(400.0, borrowed=borrowed_rate)  # 1 s per position predicted, for 400
        job.progress(0, 400)
        now[0] += 10.0
        job.progress(40, 400)  # a tenth, at 0.25 s per position
        said[name] = job.seconds_left()
        now[0] += 100.0
    # w = 5% of 400 = 20 positions (firm) or 0.5% = 2 (borrowed) at 1 s, plus 10 s over 40 positions.
    assert said["firm"] == pytest.approx(360 * (20 * 1.0 + 10.0) / (20 + 40))  # 180 s for 90 s of work
    assert said["borrowed"] == pytest.approx(360 * (2 * 1.0 + 10.0) / (2 + 40))  # 103 s


def test_a_job_that_reports_its_work_says_its_time_left_per_work_not_per_unit(monkeypatch):
    """Issue #37: a set's positions cost what their record's length makes them (a masked row of 400
    residues is several of 150's); a job whose first tenth was short records said the rest from
    their rate (Chromium: 5 s said before Cancel, 21 s taken). With ``progress(work=)`` the time
    left is the work left at the job's rate per work. Fake clock: figures exact."""
    now = [0.0]
    monkeypatch.setattr(jobs.time, "monotonic", lambda: now[0])
    job = jobs.Job("Pseudo-perplexity of 2 records", "positions")  # 100 positions of work 1, 100 of work 4
    job.progress(0, 200, (0.0, 500.0))
    now[0] = 10.0
    job.progress(100, 200, (100.0, 500.0))  # the short record: 0.1 s per unit of work
    assert job.seconds_left() == pytest.approx(400 * 0.1)  # not 100 positions x 0.1 s = 10 s
    job.cancel()
    job._finish(jobs.CANCELLED)
    assert job.pace == pytest.approx(0.1)  # per unit of work: what a Resume goes on from
    resumed = jobs.Job("Pseudo-perplexity of 2 records", "positions")
    resumed.carry_on(job)
    resumed.progress(100, 200, (100.0, 500.0))
    assert resumed.seconds_left() == pytest.approx(400 * 0.1)


def test_a_resume_that_counts_from_zero_again_says_the_time_of_the_rest_only(monkeypatch):
    """A DMS table's pll goes chunk by chunk from row 0 and reads its stored chunks back in a
    moment; a Resume that counted from 0 said the whole table's time again (Chromium: 22.6 s
    said at the click for the 9.8 s the other 179 of 300 rows took). The previous job's finished
    rows count done from the start. Fake clock: figures exact."""
    now = [0.0]
    monkeypatch.setattr(jobs.time, "monotonic", lambda: now[0])
    resumed = resumed_after_cancel(now, "Scoring 300 DMS rows (pll)", "rows", 300, 120, 12.0)  # 0.1 s a row
    resumed.progress(0, 300)  # its work starts from row 0 again
    assert (resumed.done, resumed.seconds_left()) == (120, pytest.approx(180 * 0.1))
    resumed.progress(24, 300)  # a stored chunk read back: not a step back
    assert resumed.done == 120
    now[0] = 14.4
    resumed.progress(144, 300)  # 24 rows of its own in 2.4 s: 0.1 s a row, as the pace it carried
    assert resumed.seconds_left() == pytest.approx(156 * 0.1)


def test_an_architecture_never_compiled_here_borrows_this_machines_compile_time(engine, tmp_path):
    """A compilation of an architecture never measured costs what this machine's other
    architectures measured (their median), not the constant measured on another machine; with
    none measured, the constant."""
    rates = jobs.Rates(tmp_path / "rates.json")
    assert pass_cost.compile_seconds(engine, "masked compile", rates) == pass_cost.DEFAULT_COMPILE_S["masked compile"]
    for architecture, seconds in (("a", 0.4), ("b", 0.9), ("c", 3.0)):
        rates.record(architecture, "masked compile", 1, seconds)
    rates.record("d", "cached compile", 1, 0.1)  # other kinds: not in the median of "masked compile"
    rates.record("e", "unmasked compile", 1, 0.2)
    assert pass_cost.compile_seconds(engine, "masked compile", rates) == 0.9
    assert pass_cost.compile_seconds(engine, "cached compile", rates) == 0.1
    assert pass_cost.compile_seconds(engine, "unmasked compile", rates) == 0.2
    rates.record(pass_cost.architecture(engine), "masked compile", 1, 2.0)
    assert pass_cost.compile_seconds(engine, "masked compile", rates) == 2.0  # its own, once measured
    # Its own other kind of pass before the other architectures: a Records table's entropies
    # (unmasked) measured, then its first pseudo-perplexity (masked; Chromium, 2026-12-07).
    own_unmasked_only = jobs.Rates(tmp_path / "own.json")
    for architecture, seconds in (("a", 0.4), ("b", 0.9), ("c", 3.0)):
        own_unmasked_only.record(architecture, "masked compile", 1, seconds)
    own_unmasked_only.record(pass_cost.architecture(engine), "unmasked compile", 1, 0.3)
    assert pass_cost.compile_seconds(engine, "masked compile", own_unmasked_only) == pytest.approx(0.6)


def test_pass_rates_of_a_file_from_before_they_were_per_mflop_are_not_read(tmp_path):
    """A pass-rate file written when pass rates were per token (before 2026-12-05) keeps its jobs,
    compilations and fits, but not its pass rates: read per MFLOP they would be 1e5x off."""
    path = tmp_path / "pass_rates.json"
    path.write_text(json.dumps({"m masked": 2e-6, "m unmasked": 3e-5, "arch compile": 1.5, "m fit": 1e-7,
                                "jobs": [{"title": "old"}]}))
    rates = jobs.Rates(path)
    assert rates.seconds("m", "masked", 1) is None and rates.seconds("m", "unmasked", 1) is None
    assert rates.seconds("arch", "compile", 2) == 3.0 and rates.seconds("m", "fit", 1e7) == pytest.approx(1.0)
    assert rates.history() == [{"title": "old"}]
    rates.record("m", "masked", 100, 1.0)  # written back per MFLOP, with the marker: read again
    assert jobs.Rates(path).seconds("m", "masked", 100) == pytest.approx(1.0)


def test_a_new_stage_is_predicted_what_the_cost_model_leaves_of_the_whole_job(monkeypatch):
    """A fit's model passes, then its scikit-learn fits (``stage``): the prediction was for the whole
    job, so the fits' stage is predicted what is left of it, not the whole again (the estimate at 10%
    of a fit read 3 s for 126 s before, issue #37); once the earlier stages overran, its own rate."""
    now = [0.0]
    monkeypatch.setattr(jobs.time, "monotonic", lambda: now[0])
    job = jobs.Job("Fitting the predictor", "model passes")
    job.expect(100.0)
    job.progress(0, 10)
    now[0] = 60.0
    job.progress(10, 10)
    job.stage("scikit-learn fits", 4)
    assert job.seconds_left() == 40.0  # 100 s predicted, 60 s spent
    job.progress(0, 4)
    now[0] = 70.0
    job.progress(1, 4)  # 10 s per fit against 10 predicted: w = 1 fit at 10 s + 10 s over 2 fits
    assert job.seconds_left() == pytest.approx(3 * (10.0 + 10.0) / 2)
    late = jobs.Job("Fitting the predictor", "model passes")
    late.expect(50.0)
    now[0] = 130.0  # created at 70: 60 s into a job predicted at 50
    late.stage("scikit-learn fits", 4)
    late.progress(0, 4)
    assert late.seconds_left() is None  # no prediction left to lean on: measuring

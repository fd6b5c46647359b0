"""Long work off the caller's thread: a ``Job`` runs in a background thread of this process (or
hands its heavy part to a Ray cluster, ``jobs_ray``), says how far it is, how fast it goes and
how long is left, and stops between chunks when cancelled.

What a job computes goes through the result store as it goes (``passes``), so a cancelled,
failed or interrupted job keeps every finished chunk and the next job asking for the same work
resumes from there. The job itself holds only its counters and its final value: the app reads
partial results from the store.

No Streamlit here: the app's pages start jobs and draw them (``app_pages/_ui/server/jobs_panel.py``);
this module is tested on its own. Rates measured by ``MeteredEngine`` (seconds per token of a
masked or unmasked pass, for this machine and model) are kept in ``Rates`` (``jobs/rates.py``) and
give the cost of work before it starts; a job given that cost (``Job.expect``) says its time left
from it and from its own rate, smoothed, and logs predicted against actual when it ends. What a
job says of itself is ``Job.status()`` (``jobs/status.py``).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import threading
import time
from typing import Callable, ContextManager

from flamino_core.jobs import pass_cost
from flamino_core.jobs.status import Status
# How fast this machine runs a model (``jobs/rates.py``), re-exported: callers find these names here.
from flamino_core.jobs.rates import Rates, default_rates, machine  # noqa: F401

LOG = logging.getLogger("flamino")
WAITING, RUNNING, DONE, CANCELLED, STOPPED, FAILED = "waiting", "running", "done", "cancelled", "stopped", "failed"
MEASURED = "measured"  # a first chunk that measured the rate ended with units left (never "done")
FINISHED = (DONE, CANCELLED, STOPPED, FAILED, MEASURED)
_ids = itertools.count(1)
# The cost model's prediction counts as this share of a job's units measured: at 10% of the work
# the time left is a third the prediction's and two thirds the job's own rate.
PRIOR_SHARE = 0.05


class Stopped(Exception):
    """The work cannot go on now (the server's queue for heavy jobs is full); what finished is
    kept. The message says why, for the user."""


class Job:
    """One piece of long work: its counters, its state, its value when done. Thread-safe.

    ``work(job)`` runs in a thread of its own (``start``); it reports ``job.progress(done,
    total)`` in the job's ``unit``, polls ``job.cancelled`` between chunks, and returns the
    job's value (it may set ``job.value`` to what it has so far: a job that stops keeps that). ``passes.Cancelled`` (raised by the passes when ``cancelled`` says so) ends it
    as cancelled, ``Stopped`` as stopped, any other exception as failed (logged).
    """

    def __init__(self, title: str, unit: str, total: int | None = None, visitor: str | None = None):
        self.id = next(_ids)
        self.visitor = visitor  # whose job it is, for a caller's queue (the app's cap per visitor)
        self.title, self.unit = title, unit
        self.state = WAITING
        self.done, self.total = 0, total
        self.note: str | None = None  # what it waits for now ("2nd in line for a slot")
        self.error: str | None = None
        self.value = None
        self.created = time.monotonic()
        self.finished_at: float | None = None
        self._changed = threading.Condition()
        self._cancel = threading.Event()
        self._baseline: tuple[float, int] | None = None  # (time, done) of the first report
        self.version = 0  # counts changes, for watchers that redraw only on news
        self.measuring_only = False  # one chunk to measure the rate: ending with units left is MEASURED
        self._expected: float | None = None  # seconds the cost model gives the work of this stage
        self._predicted: float | None = None  # seconds it gave the whole job at its start
        self._log: Callable[[dict], None] | None = None  # gets the prediction and the outcome at the end
        self._at_tenth: float | None = None  # the predicted duration when a tenth of the work was done
        # Seconds per unit the job said when it stopped with units left (``pace``), and the one a
        # resumed job goes on from (``carry_on``).
        self.pace: float | None = None
        self._carried: float | None = None

    # --- what the work calls ------------------------------------------------------------------
    def progress(self, done: int, total: int) -> None:
        """``done`` of ``total`` units finished (those found stored count as done)."""
        with self._changed:
            now = time.monotonic()
            if self._baseline is None:  # what was stored before the job is not its own speed
                self._baseline = (now, done)
            self.done, self.total = done, total
            self.note = None
            first = self._baseline[1]
            if self._at_tenth is None and total > first and done - first >= 0.1 * (total - first):
                left = self._left(now)  # what the job said at 10% of its work: the figure to judge it by
                self._at_tenth = None if left is None else now - self.created + left
            self._bump()

    def expect(self, seconds: float, log: Callable[[dict], None] | None = None) -> None:
        """The cost model's time for the work left when the job starts: the time left leans on it
        until the job has measured its own rate on enough units (``PRIOR_SHARE``), so it neither
        waits for a first chunk nor jumps at the first one. ``log`` gets the prediction and what
        happened when the job ends (``Rates.record_job``: predicted vs actual)."""
        with self._changed:
            self._expected = self._predicted = seconds
            self._log = log
            self._bump()

    def carry_on(self, previous: Job) -> None:
        """A Resume of ``previous`` (cancelled or stopped): the time left goes on from the pace
        ``previous`` said when it stopped (its own measured rate, smoothed), not from the cost
        model, so the estimate does not jump at the click (a 40-record set: 30 s left said before
        Cancel, 12 s from the cost model after Resume, 27 s taken, in Chromium under load)."""
        with self._changed:
            self._carried = previous.pace
            self._bump()

    def stage(self, unit: str, total: int) -> None:
        """A new stage of the work in another unit (a fit's model passes, then its fits): its
        progress and its rate start again from 0 of ``total``; the cost model's time for the
        whole job, less the time spent so far, is this stage's prediction (none once overrun)."""
        with self._changed:
            self.unit, self.done, self.total, self._baseline, self._at_tenth = unit, 0, total, None, None
            if self._predicted is not None:
                left = self._predicted - (time.monotonic() - self.created)
                self._expected = left if left > 0 else None
            self._bump()

    def waiting(self, note: str | None) -> None:
        """Say what the job waits for (None: it does not wait)."""
        with self._changed:
            self.note = note
            self._bump()

    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def measure_only(self) -> None:
        """This run is one chunk that measures the rate: if it ends with units left, it ends as
        ``MEASURED`` (the rest waits for the user), never as done."""
        with self._changed:
            self.measuring_only = True
            self._bump()

    # --- what watchers call ------------------------------------------------------------------
    def cancel(self) -> None:
        """Stop at the next chunk boundary; finished chunks are kept."""
        self._cancel.set()
        with self._changed:
            self._bump()

    @property
    def finished(self) -> bool:
        return self.state in FINISHED

    def rate(self) -> float | None:
        """Units per second measured on this job's own work (None before two reports apart)."""
        with self._changed:
            if self._baseline is None:
                return None
            started, first_done = self._baseline
            end = self.finished_at or time.monotonic()
            if self.done <= first_done or end <= started:
                return None
            return (self.done - first_done) / (end - started)

    def seconds_left(self) -> float | None:
        """Seconds to finish: the job's own time per unit, smoothed with the cost model's
        (``expect``) while few units are measured (None: neither known yet)."""
        with self._changed:
            if self.finished:
                return None
            return self._left(time.monotonic())

    def _left(self, now: float) -> float | None:
        """``seconds_left`` under the lock. Seconds per unit = (w * predicted + elapsed) / (w +
        measured units), the prediction worth ``w`` units (``PRIOR_SHARE`` of the work): no jump
        at the first chunk, and a chunk slower than predicted raises the estimate while it runs."""
        if self.total is None:
            return self._expected
        if self._baseline is None:
            return self._expected
        started, first = self._baseline
        measured, elapsed, remaining = self.done - first, max(now - started, 0.0), max(self.total - self.done, 0)
        prior = self._carried if self._carried is not None else (
            self._expected / (self.total - first) if self._expected is not None and self.total > first else None)
        if prior is not None and self.total > first:
            weight = max(1.0, PRIOR_SHARE * (self.total - first))
            per_unit = (weight * prior + elapsed) / (weight + measured)
        elif measured > 0 and elapsed > 0:
            per_unit = elapsed / measured
        else:
            return None
        return remaining * per_unit

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the job finishes (True) or ``timeout`` passes (False)."""
        with self._changed:
            return self._changed.wait_for(lambda: self.finished, timeout)

    def fraction(self) -> float:
        return self.status().fraction

    def status(self) -> Status:
        """The job's state as every caption, panel and table says it (``jobs/status.py``)."""
        with self._changed:
            finished = {DONE: "done", MEASURED: "measured", CANCELLED: "cancelled", STOPPED: "stopped",
                        FAILED: "failed"}.get(self.state)
            waiting = self.state == WAITING or self.total is None
            fields = dict(title=self.title, unit=self.unit, done=self.done, total=self.total, note=self.note,
                          error=self.error)
        if finished is None and self.cancelled():
            return Status("cancelling", **fields)
        if finished is not None or waiting:
            return Status(finished or "queued", **fields)
        left = self.seconds_left()
        return Status("measuring" if left is None else "running", seconds_left=left, **fields)

    # --- plumbing ---------------------------------------------------------------------------
    def _bump(self) -> None:
        self.version += 1
        self._changed.notify_all()

    def _finish(self, state: str, value=None, error: str | None = None) -> None:
        """End the job; a job that did not finish keeps the partial value its work set."""
        with self._changed:
            if state == DONE and self.measuring_only and self.total is not None and self.done < self.total:
                state = MEASURED  # the value is the first chunk's, the rest is not computed
            if state in (CANCELLED, STOPPED) and self.total is not None and self.total > self.done:
                left = self._left(time.monotonic())
                self.pace = None if left is None else left / (self.total - self.done)
            self.state, self.error = state, error
            if state in (DONE, MEASURED):
                self.value = value
            self.note = None
            self.finished_at = time.monotonic()
            self._bump()
            outcome = self._outcome()
        if outcome is not None:
            try:
                self._log(outcome)
            except Exception:  # noqa: BLE001 - a record that cannot be written never fails the job
                LOG.exception("the job's prediction was not recorded")

    def _outcome(self) -> dict | None:
        """What the cost model predicted and what happened, for ``expect``'s log (under the lock)."""
        if self._log is None or self._predicted is None or self._baseline is None or self.total is None:
            return None
        first = self._baseline[1]
        work = max(self.total - first, 0)
        done = self.done - first
        predicted = self._predicted if self._carried is None else self._carried * work  # said at its start
        return {"title": self.title, "unit": self.unit, "state": self.state, "units": done, "units_asked": work,
                "predicted_s": round(predicted, 2),  # the whole job's, at its start
                "predicted_s_at_tenth": None if self._at_tenth is None else round(self._at_tenth, 2),
                "actual_s": round(self.finished_at - self.created, 2)}

    def _run(self, work: Callable[[Job], object]) -> None:
        from flamino_core.store.passes import Cancelled

        with self._changed:
            self.state = RUNNING
            self._bump()
        try:
            value = work(self)
        except Cancelled:
            self._finish(CANCELLED)
        except Stopped as err:
            self._finish(STOPPED, error=str(err))
        except Exception as err:  # a job never takes its thread's error to the grave silently
            LOG.exception("job %r failed", self.title)
            self._finish(FAILED, error=f"{type(err).__name__}: {err}")
        else:
            self._finish(DONE, value)


def start(work: Callable[[Job], object], title: str, unit: str, total: int | None = None,
          visitor: str | None = None, session: str = "") -> Job:
    """Run ``work(job)`` in a background thread (a daemon: a server's exit does not wait for it;
    what it finished is in the store). Returns the job at once. ``session``: the app's session
    that started it, set before the thread starts (the thread asks whether that tab is still open)."""
    job = Job(title, unit, total, visitor)
    job.session = session
    threading.Thread(target=job._run, args=(work,), name=f"flamino-job-{job.id}", daemon=True).start()
    return job


class MeteredEngine:
    """An engine whose every call (one chunk of masked positions, one group of records) holds a
    slot of the caller's queue for heavy jobs and is timed into ``Rates``.

    ``passes`` calls the engine chunk by chunk, so wrapping the engine bounds each chunk without
    the passes knowing about queues: other users' jobs run between two chunks of a long one.
    Everything else is the engine's own (``fingerprint``, ``config``...).

    Args:
      engine: an ``engine.Engine``.
      rates: where measured rates go (None: not measured).
      slot: a context manager factory held around each call (None: no queue). It may raise
        ``Stopped`` (or anything) to refuse the call.

    Masked passes go through the result store by handing this engine to
    ``passes.masked_log_probs``, which calls ``compute_masked`` only for what is missing.
    """

    def __init__(self, engine, rates: Rates | None = None, slot: Callable[[], ContextManager] | None = None):
        self._engine, self._rates, self._slot = engine, rates, slot or contextlib.nullcontext

    def __getattr__(self, name):
        return getattr(self._engine, name)

    def compute_masked(self, sequence: str, positions=None, progress=None, **options):
        """``Engine.compute_masked``, timed in a slot; ``options``: its own (a structure's letters)."""
        positions = list(range(len(sequence))) if positions is None else list(positions)
        batches = self._planned(pass_cost.masked_batches, [(len(sequence), len(positions))], chunk=None)
        with self._slot():
            return self._timed("masked", batches,
                               lambda report: self._engine.compute_masked(sequence, positions, progress=report,
                                                                          **options), progress)

    def compute_joint_masked(self, sequence: str, position_sets, progress=None, **options):
        position_sets = list(position_sets)
        batches = self._planned(pass_cost.masked_batches, [(len(sequence), len(position_sets))], chunk=None)
        with self._slot():
            return self._timed("masked", batches,
                               lambda report: self._engine.compute_joint_masked(sequence, position_sets,
                                                                                  progress=report, **options), progress)

    def run(self, sequences, progress=None, **options):
        batches = self._planned(pass_cost.unmasked_batches, [len(s) for s in sequences], grouped=False)
        with self._slot():
            return self._timed("unmasked", batches, lambda report: self._engine.run(sequences, progress=report, **options),
                               progress)

    def _planned(self, plan, *args, **options) -> list[tuple[str, int]]:
        """The call's batches (``pass_cost``), planned only when rates are measured."""
        return [] if self._rates is None else plan(self._engine, *args, **options)

    def _timed(self, kind: str, batches: list[tuple[str, int]], call, progress):
        """Run ``call(report)``, recording the rate (``batches``: the call's plan, ``pass_cost``).
        A call that compiled a new shape spent seconds on that, once per process, against
        milliseconds per batch: with three or more batches the first one is left out of the
        rate; with fewer the call says nothing of the rate (a first one-batch scan of a short
        record measured 5.4 s against 0.26 s after). What it spent beyond its tokens at the
        measured rate is the compilations' time (``_record_compilations``)."""
        finished: list[float] = []

        def report(done: int, total: int) -> None:
            finished.append(time.monotonic())
            if progress is not None:
                progress(done, total)

        from flamino_core.runtime.engine import TRACE_COUNTS  # the engine is loaded: it is what this wraps

        fresh, cached = pass_cost.new_shapes(self._engine, batches, self._rates) if self._rates else (0, 0)
        traces, started = sum(TRACE_COUNTS.values()), time.monotonic()
        result = call(report)
        spent = time.monotonic() - started
        compiled = fresh or cached or sum(TRACE_COUNTS.values()) != traces  # (jax.clear_caches: traced again)
        if self._rates is not None and batches:
            total = sum(t for _, t in batches)
            if fresh or cached:
                self._record_compilations(kind, total, spent, fresh, cached, [key for key, _ in batches])
            if len(finished) >= 3:
                share = (sum(t for _, t in batches[1:]) if len(batches) == len(finished)
                         else total * (len(finished) - 1) / len(finished))
                self._rates.record(self.fingerprint, kind, round(share), finished[-1] - finished[0])
            elif not compiled:
                self._rates.record(self.fingerprint, kind, total, spent)
        return result

    def _record_compilations(self, kind: str, tokens: int, spent: float, fresh: int, cached: int, keys) -> None:
        """The seconds per compilation this call measured: its time beyond its tokens at the rate
        measured so far (none measured: nothing to subtract, not recorded), shared by its new
        shapes when they were all new or all from the persistent cache; those shapes are then
        in the persistent cache for a later process."""
        running = self._rates.seconds(self.fingerprint, kind, tokens)
        architecture = pass_cost.architecture(self._engine)
        if running is not None and not (fresh and cached):
            self._rates.record(architecture, "compile" if fresh else "cached compile", fresh or cached, spent - running)
        if pass_cost.persistent_cache_on():
            self._rates.add_compiled(architecture, keys)

"""Long work off the caller's thread: a ``Job`` runs in a background thread of this process (or
hands its heavy part to a Ray cluster, ``jobs_ray``), says how far it is, how fast it goes and
how long is left, and stops between chunks when cancelled.

What a job computes goes through the result store as it goes (``passes``), so a cancelled,
failed or interrupted job keeps every finished chunk and the next job asking for the same work
resumes from there. The job itself holds only its counters and its final value: the app reads
partial results from the store.

No Streamlit here: the app's pages start jobs and draw them (``app_pages/_ui/server/jobs_panel.py``);
this module is tested on its own. Rates measured by ``MeteredEngine`` (``jobs/metered.py``: seconds per token of a
masked or unmasked pass, for this machine and model) are kept in ``Rates`` (``jobs/rates.py``) and
give the cost of work before it starts; a job given that cost (``Job.expect``) says its time left
from it and from its own rate, smoothed, and logs predicted against actual when it ends. What a
job says of itself is ``Job.status()`` (``jobs/status.py``).
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from typing import Callable

from flamino_core.jobs.status import Status
from flamino_core.jobs.time_left import (BORROWED_SHARE, COMPILE_SLACK, PRIOR_SHARE, countdown_step,
                                        progress_weighted, seconds_left_from)
# How fast this machine runs a model (``jobs/rates.py``), re-exported: callers find these names here.
from flamino_core.jobs.rates import Rates, default_rates, machine  # noqa: F401

LOG = logging.getLogger("flamino")
WAITING, RUNNING, DONE, CANCELLED, STOPPED, FAILED = "waiting", "running", "done", "cancelled", "stopped", "failed"
MEASURED = "measured"  # a first chunk that measured the rate ended with units left (never "done")
FINISHED = (DONE, CANCELLED, STOPPED, FAILED, MEASURED)
_ids = itertools.count(1)


class Stopped(Exception):
    """The work cannot go on now (the server's queue for heavy jobs is full); what finished is
    kept. The message says why, for the user."""


class Job:
    """One piece of long work: its counters, its state, its value when done. Thread-safe.

    ``work(job)`` runs in a thread of its own (``start``); it reports ``job.progress(done,
    total)`` in the job's ``unit``, polls ``job.cancelled`` between chunks, and returns the
    job's value (it may set ``job.value`` to what it has so far: a job that stops keeps that).
    ``passes.Cancelled`` (raised by the passes when ``cancelled`` says so) ends it as cancelled,
    ``Stopped`` as stopped, any other exception as failed (logged).
    """

    def __init__(self, title: str, unit: str, total: int | None = None, visitor: str | None = None,
                 session: str = ""):
        self.id = next(_ids)
        self.visitor = visitor  # whose job it is, for a caller's queue (the app's cap per visitor)
        self.session = session  # the app's session (tab) that started it; "": none (the CLI, tests)
        self.title, self.unit = title, unit
        self.state = WAITING
        self.done, self.total = 0, total
        self.note: str | None = None  # what it waits for now ("2nd in line for a slot")
        self.queued_s = 0.0  # seconds it waited for a heavy-job slot over its calls (the queue's aging)
        self.error: str | None = None
        self.value = None
        self.created = time.monotonic()
        self.finished_at: float | None = None
        self._changed = threading.Condition()
        self._cancel = threading.Event()
        self._baseline: tuple[float, int, float | None] | None = None  # (time, done, work done) of the first report
        self._work: tuple[float, float] | None = None  # (done, total) work beside the units (``progress``)
        self.version = 0  # counts changes, for watchers that redraw only on news
        self.measuring_only = False  # one chunk to measure the rate: ending with units left is MEASURED
        self.compiles = False  # a call of its work compiles shapes new to this process (``compiling``)
        self._expected: float | None = None  # seconds the cost model gives the work of this stage
        self._predicted: float | None = None  # seconds it gave the whole job at its start
        self._log: Callable[[dict], None] | None = None  # gets the prediction and the outcome at the end
        self._at_tenth: float | None = None  # the predicted duration when a tenth of the work was done
        # Seconds per unit the job said when it stopped with units left (``pace``), and the one a
        # resumed job goes on from (``carry_on``).
        self.pace: float | None = None
        self._carried: float | None = None
        self._kept: tuple[int, int] | None = None  # (done, total) the resumed job had finished
        self._said_pace: float | None = None  # seconds per unit left, as said at the last report
        # Compilations: seconds the cost model gave them (``expect``) and seconds this stage spent
        # on them so far (``compiled``). A compilation is paid once per new batch shape, so it is
        # kept out of the time per unit and counted once (a fresh job whose first tenth compiled
        # shapes said 118.8 s at 10% for 57 s of work, in Chromium, when compilations were rated).
        self._expected_compiling: float | None = None
        self._compiled_s = 0.0
        self._prior_share = PRIOR_SHARE  # what the prediction weighs (``expect``: less when borrowed)
        # The time left as said at the last report or compilation (time, seconds), and the
        # seconds a chunk took between the last two reports: between reports the time left
        # counts down from the anchor for one such chunk, then each second late adds one
        # (``seconds_left``). The formula itself, read mid-chunk, counts the chunk's time but
        # none of its units: a third into a set it rose 1.75 s per second in flight, and a
        # compiling chunk under load showed 20 s left before a Cancel for 11 s at the Resume.
        self._anchor: tuple[float, float | None] | None = None
        self._reported: tuple[float, float] | None = None  # (time, compiled seconds) at the last report
        self._gap = 0.0
        self._shown: tuple[float, float] | None = None  # (time, seconds) the countdown last showed

    # --- what the work calls ------------------------------------------------------------------
    def progress(self, done: int, total: int, work: tuple[float, float] | None = None) -> None:
        """``done`` of ``total`` units finished (those found stored count as done). ``work``: (done,
        total) in a measure of what the units cost when they differ (MFLOP, ``pass_cost``: a
        position of a 400-residue record costs several of a 150-residue one's); the job's own
        rate and time left are then per work, not per unit. The first report says whether it
        comes (every report of the job gives it, or none does)."""
        with self._changed:
            now = time.monotonic()
            if self._kept is not None and total == self._kept[1]:  # a Resume: what was done is stored
                done = max(done, self._kept[0])
            if self._baseline is None:  # what was stored before the job is not its own speed
                self._baseline = (now, done, None if work is None else work[0])
            self.done, self.total, self._work = done, total, work
            self.note = None
            first = self._baseline[1]
            left = self._say(now)
            if self._at_tenth is None and total > first and done - first >= 0.1 * (total - first):
                self._at_tenth = None if left is None else now - self.created + left  # the figure to judge it by
            if self._reported is not None:  # (a compilation in between is not a chunk's time)
                self._gap = max(now - self._reported[0] - (self._compiled_s - self._reported[1]), 0.0)
            self._reported = (now, self._compiled_s)
            self._bump()

    def _say(self, now: float) -> float | None:
        """The time left as of ``now``, said: the anchor ``seconds_left`` counts from, and the pace
        (per unit of work left) a Resume goes on from. Under the lock, after the first report."""
        left = self._left(now)
        _, done_amount, total_amount = self._amounts()
        self._said_pace = None if left is None or total_amount <= done_amount else left / (total_amount - done_amount)
        self._anchor = (now, left)
        return left

    def expect(self, seconds: float, log: Callable[[dict], None] | None = None,
               compiling: float | None = None, borrowed: bool = False) -> None:
        """The cost model's time for the work left when the job starts: the time left leans on it
        until the job has measured its own rate on enough units (``PRIOR_SHARE``), so it neither
        waits for a first chunk nor jumps at the first one. ``log`` gets the prediction and what
        happened when the job ends (``Rates.record_job``: predicted vs actual). ``compiling``: the
        part of ``seconds`` that is compilations (``pass_cost.PassSeconds.compiling``);
        ``borrowed``: its rate is another kind of pass's (``BORROWED_SHARE``)."""
        with self._changed:
            self._expected = self._predicted = seconds
            self._prior_share = BORROWED_SHARE if borrowed else PRIOR_SHARE
            self._expected_compiling = None if compiling is None else min(max(compiling, 0.0), seconds)
            self._log = log
            self._bump()

    def compiled(self, seconds: float) -> None:
        """The work just spent ``seconds`` compiling new shapes (``MeteredEngine`` says so before
        the chunk's progress): kept out of the job's own time per unit."""
        with self._changed:
            if self._baseline is not None:  # before the first report the clock has not started
                self._compiled_s += max(seconds, 0.0)
                self._say(time.monotonic())
                self._bump()

    def compiling(self) -> None:
        """The work's next call compiles shapes new to this process (``MeteredEngine`` says so
        before it): a model new to the server, a minute or more on a busy machine (issue 50)."""
        with self._changed:
            self.compiles = True
            self._bump()

    def carry_on(self, previous: Job) -> None:
        """A Resume of ``previous`` (cancelled or stopped): the time left goes on from the pace
        ``previous`` said when it stopped (its own measured rate, smoothed), not from the cost
        model, so the estimate does not jump at the click (a 40-record set: 30 s left said before
        Cancel, 12 s from the cost model after Resume, 27 s taken, in Chromium under load). What
        ``previous`` finished is stored: a work that counts from 0 again (a DMS table's chunks,
        its stored ones read back in a moment) counts it done from the start, so the time left
        is for the rest only (a pll resumed at 121 of 300 rows said 22.6 s for 9.8 s before)."""
        with self._changed:
            self._carried = previous.pace
            self._kept = None if previous.total is None else (previous.done, previous.total)
            self._bump()

    def stage(self, unit: str, total: int) -> None:
        """A new stage of the work in another unit (a fit's model passes, then its fits): its
        progress and its rate start again from 0 of ``total``; the cost model's time for the
        whole job, less the time spent so far, is this stage's prediction (none once overrun)."""
        with self._changed:
            self.unit, self.done, self.total, self._baseline, self._at_tenth = unit, 0, total, None, None
            self._anchor, self._reported, self._gap = None, None, 0.0
            self._work = None
            self._expected_compiling, self._compiled_s = None, 0.0  # (a fit's fits compile nothing)
            self.compiles = False  # (its status said a fit's fits compiled, from its passes' stage)
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
        """Stop at the next chunk boundary; finished chunks are kept. A first chunk that measured
        the rate and ended (``MEASURED``) before the click was handled is cancelled too: else the
        page's next run started the rest as a new job, and the user's Cancel did nothing."""
        self._cancel.set()
        with self._changed:
            if self.state == MEASURED:  # the rest goes on only by Resume, at the pace it said
                self.state, self.pace = CANCELLED, self._said_pace
            self._bump()

    @property
    def finished(self) -> bool:
        return self.state in FINISHED

    def rate(self) -> float | None:
        """Units per second measured on this job's own work (None before two reports apart)."""
        with self._changed:
            if self._baseline is None:
                return None
            started, first_done, _ = self._baseline
            end = self.finished_at or time.monotonic()
            if self.done <= first_done or end <= started:
                return None
            return (self.done - first_done) / (end - started)

    def seconds_left(self) -> float | None:
        """Seconds to finish: the job's own time per unit, smoothed with the cost model's
        (``expect``) while few units are measured (None: neither known yet), as said at the last
        report; since then it counts down for as long as the last chunk took, and goes up by
        each second the chunk in flight is later than that."""
        with self._changed:
            if self.finished:
                return None
            now = time.monotonic()
            if self._anchor is None or self._anchor[1] is None:
                return self._left(now)
            said_at, said = self._anchor
            if said <= 0:
                return said
            since = now - said_at
            return max(said - min(since, self._gap) + max(since - self._gap, 0.0), 0.0)

    def countdown(self) -> float | None:
        """The time left as shown (``status``): ``seconds_left``, or the job's wall-clock pace weighted
        by its progress where that is more (``time_left.progress_weighted``), followed by
        ``time_left.countdown_step``, never rising from one reading to the next, across stages too."""
        with self._changed:
            estimate, now = self.seconds_left(), time.monotonic()
            if estimate is None:
                return None
            if self._baseline is not None and self.total is not None:
                estimate = max(estimate, progress_weighted(*self._amounts(), now - self._baseline[0]))
            shown = estimate if self._shown is None else countdown_step(self._shown[1], estimate, now - self._shown[0])
            self._shown = (now, shown)
            return shown

    def _left(self, now: float) -> float | None:
        """``seconds_left`` under the lock, by the rule of ``time_left.seconds_left_from``."""
        if self.total is None or self._baseline is None:
            return self._expected
        first, done, total = self._amounts()
        return seconds_left_from(
            first=first, done=done, total=total, elapsed=now - self._baseline[0] - self._compiles_apart(),
            units=(self._baseline[1], self.total), expected=self._expected, compiling=self._expected_compiling,
            compiled=self._compiled_s, carried=self._carried, prior_share=self._prior_share)

    def _compiles_apart(self) -> float:
        """Compilation seconds kept out of the job's own pace: those paid, at most ``COMPILE_SLACK``
        times the cost model's (``expect``'s ``compiling``) where it gave any (why: there)."""
        cap = None if self._expected_compiling is None else COMPILE_SLACK * self._expected_compiling
        return self._compiled_s if cap is None else min(self._compiled_s, cap)

    def _amounts(self) -> tuple[float, float, float]:
        """(first, done, total) in the job's measure of its work: the work it reports beside its
        units (``progress(work=)``), else its units. Under the lock, after the first report."""
        if self._baseline[2] is not None and self._work is not None:
            return self._baseline[2], self._work[0], self._work[1]
        return self._baseline[1], self.done, self.total

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the job finishes (True) or ``timeout`` passes (False)."""
        with self._changed:
            return self._changed.wait_for(lambda: self.finished, timeout)

    def wait_unless_compiling(self, timeout: float | None = None) -> bool:
        """Block until the job finishes (True), starts compiling (``compiling``: False) or
        ``timeout`` passes (False): a page waits for a first chunk queued for a slot, stopped by
        a full queue or quick, not for one that compiles a new model first."""
        with self._changed:
            self._changed.wait_for(lambda: self.finished or self.compiles, timeout)
            return self.finished

    def fraction(self) -> float:
        return self.status().fraction

    def status(self) -> Status:
        """The job's state as every caption, panel and table says it (``jobs/status.py``)."""
        with self._changed:
            finished = {DONE: "done", MEASURED: "measured", CANCELLED: "cancelled", STOPPED: "stopped",
                        FAILED: "failed"}.get(self.state)
            waiting = self.state == WAITING or (self.total is None and not self.compiles)
            fields = dict(title=self.title, unit=self.unit, done=self.done, total=self.total, note=self.note,
                          error=self.error, compiling=self.compiles)
        if finished is None and self.cancelled():
            return Status("cancelling", **fields)
        if finished is not None or waiting:
            return Status(finished or "queued", **fields)
        left = self.countdown()
        return Status("measuring" if left is None else "running", seconds_left=left, **fields)

    # --- plumbing ---------------------------------------------------------------------------
    def _bump(self) -> None:
        self.version += 1
        self._changed.notify_all()

    def _finish(self, state: str, value=None, error: str | None = None) -> None:
        """End the job; a job that did not finish keeps the partial value its work set."""
        with self._changed:
            units_left = self.total is not None and self.done < self.total
            if state == DONE and self.measuring_only and units_left:
                state = MEASURED  # the value is the first chunk's, the rest is not computed
            if state in (DONE, MEASURED) and units_left and self.cancelled():
                state = CANCELLED  # cancelled in a chunk that does not poll (a first, measuring one): said so
            if state in (CANCELLED, STOPPED) and units_left:
                # The pace it said at its last report (per unit of work where it reports work): the
                # chunk cut short by the cancel counted no unit, and its time would slow the pace
                # (a pll cancelled at 145 of 300 rows said 10 s left, then its Resume 18-23 s).
                self.pace = self._said_pace
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
        first_amount, _, total_amount = self._amounts()
        predicted = (self._predicted if self._carried is None  # said at its start
                     else self._carried * max(total_amount - first_amount, 0))
        return {"title": self.title, "unit": self.unit, "state": self.state, "units": done, "units_asked": work,
                "borrowed": self._prior_share != PRIOR_SHARE,  # the prediction's rate was the other kind's
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
          visitor: str | None = None, session: str = "", setup: Callable[[Job], None] | None = None) -> Job:
    """Run ``work(job)`` in a background thread (a daemon: a server's exit does not wait for it;
    what it finished is in the store). Returns the job at once. ``session``: the app's session
    that started it, set before the thread starts (the thread asks whether that tab is still open).
    ``setup(job)``: called before the thread starts (``expect``, ``carry_on``: a Resume's first
    report must find what it carries on from, else it counts the work from 0 again)."""
    job = Job(title, unit, total, visitor, session)  # the session known before the thread asks for it
    if setup is not None:
        setup(job)
    threading.Thread(target=job._run, args=(work,), name=f"flamino-job-{job.id}", daemon=True).start()
    return job

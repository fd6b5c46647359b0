"""Long work off the caller's thread: a ``Job`` runs in a background thread of this process (or
hands its heavy part to a Ray cluster, ``jobs_ray``), says how far it is, how fast it goes and
how long is left, and stops between chunks when cancelled.

What a job computes goes through the result store as it goes (``passes``), so a cancelled,
failed or interrupted job keeps every finished chunk and the next job asking for the same work
resumes from there. The job itself holds only its counters and its final value: the app reads
partial results from the store.

No Streamlit here: the app's pages start jobs and draw them (``app_pages/_ui/server/jobs_panel.py``);
this module is tested on its own. Rates measured by ``MeteredEngine`` (seconds per token of a
masked or unmasked pass, for this machine and model) are kept in ``Rates`` and give the cost of
work before it starts.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import threading
import time
from pathlib import Path
from typing import Callable, ContextManager, Iterable

from flamino_core.model.config import MAX_RESIDUES
from flamino_core.runtime.planner import bucket_length, masked_width
from flamino_core.runtime.windows import window_starts
from flamino_core.jobs.status import Status

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

    # --- what the work calls ------------------------------------------------------------------
    def progress(self, done: int, total: int) -> None:
        """``done`` of ``total`` units finished (those found stored count as done)."""
        with self._changed:
            now = time.monotonic()
            if self._baseline is None:  # what was stored before the job is not its own speed
                self._baseline = (now, done)
            self.done, self.total = done, total
            self.note = None
            self._bump()

    def stage(self, unit: str, total: int) -> None:
        """A new stage of the work in another unit (a fit's model passes, then its fits): its
        progress and its rate start again from 0 of ``total``."""
        with self._changed:
            self.unit, self.done, self.total, self._baseline = unit, 0, total, None
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
        """Seconds to finish at the measured rate (None: not measured yet or nothing to do)."""
        rate = self.rate()
        if rate is None or self.total is None:
            return None
        return max(self.total - self.done, 0) / rate

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
            self.state, self.error = state, error
            if state in (DONE, MEASURED):
                self.value = value
            self.note = None
            self.finished_at = time.monotonic()
            self._bump()

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
          visitor: str | None = None) -> Job:
    """Run ``work(job)`` in a background thread (a daemon: a server's exit does not wait for it;
    what it finished is in the store). Returns the job at once."""
    job = Job(title, unit, total, visitor)
    threading.Thread(target=job._run, args=(work,), name=f"flamino-job-{job.id}", daemon=True).start()
    return job


# --- how fast this machine runs a model ---------------------------------------------------------------
def masked_tokens(length: int, positions: int) -> int:
    """Tokens the masked passes of ``positions`` positions of a ``length``-residue sequence run
    through the model: one padded row (one masked window of a long sequence) per position, the
    width the engine runs them at (``planner.masked_width``, as ``Engine.masked_pass_shape``)."""
    return positions * masked_width(length)


def unmasked_tokens(lengths: Iterable[int]) -> int:
    """Tokens one unmasked pass over sequences of these lengths runs: each window (overlapping
    ones for a long sequence, ``windows.window_starts``) a padded row."""
    return sum(len(window_starts(length)) * bucket_length(min(length, MAX_RESIDUES) + 2) for length in lengths)


class Rates:
    """Seconds per token of masked and unmasked passes, measured on this machine per model
    (its fingerprint), as a running average; kept in ``FLAMINO_CACHE/pass_rates.json`` so a
    restarted server still knows them. Thread-safe."""

    KINDS = ("masked", "unmasked", "fit")  # fit: seconds per operation of a scikit-learn fit (predict/cost.py)

    def __init__(self, path: str | os.PathLike | None = None, weight: float = 0.3):
        self.path = Path(path) if path is not None else _default_rates_path()
        self.weight = weight  # of each new measurement in the running average
        self._lock = threading.Lock()
        self._rates: dict[str, float] | None = None  # "model kind" -> seconds per token

    def record(self, model: str, kind: str, tokens: int, seconds: float) -> None:
        if tokens <= 0 or seconds <= 0 or kind not in self.KINDS:
            return
        rate = seconds / tokens
        with self._lock:
            rates = self._load()
            key = f"{model} {kind}"
            old = rates.get(key)
            rates[key] = rate if old is None else (1 - self.weight) * old + self.weight * rate
            self._save(rates)

    def seconds(self, model: str, kind: str, tokens: int) -> float | None:
        """Estimated seconds for ``tokens`` more tokens of ``kind`` passes (None: never measured)."""
        with self._lock:
            rate = self._load().get(f"{model} {kind}")
        return None if rate is None else rate * tokens

    def _load(self) -> dict[str, float]:
        if self._rates is None:
            try:
                found = json.loads(self.path.read_text())
                self._rates = {k: float(v) for k, v in found.items() if isinstance(v, (int, float)) and v > 0}
            except (OSError, ValueError, AttributeError):
                self._rates = {}
        return self._rates

    def _save(self, rates: dict[str, float]) -> None:
        from flamino_core.atomic import written_atomically

        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with written_atomically(self.path) as tmp:
                tmp.write_text(json.dumps(rates, indent=0, sort_keys=True))
        except OSError as err:  # a read-only cache: the rates live in memory only
            LOG.debug("pass rates not saved (%s)", err)


def _default_rates_path() -> Path:
    from flamino_core.weights.model_cache import cache_root

    return cache_root() / "pass_rates.json"


_RATES: Rates | None = None
_RATES_LOCK = threading.Lock()


def default_rates() -> Rates:
    """The process's rates, kept under ``FLAMINO_CACHE`` (one per cache folder)."""
    global _RATES
    with _RATES_LOCK:
        path = _default_rates_path()
        if _RATES is None or _RATES.path != path:
            _RATES = Rates(path)
        return _RATES


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

    def compute_masked(self, sequence: str, positions=None, progress=None):
        positions = list(range(len(sequence))) if positions is None else list(positions)
        width = masked_width(len(sequence))
        with self._slot():
            return self._timed("masked", [width] * len(positions),
                               lambda report: self._engine.compute_masked(sequence, positions, progress=report), progress)

    def compute_joint_masked(self, sequence: str, position_sets, progress=None):
        position_sets = list(position_sets)
        width = masked_width(len(sequence))
        with self._slot():
            return self._timed("masked", [width] * len(position_sets),
                               lambda report: self._engine.compute_joint_masked(sequence, position_sets,
                                                                                  progress=report), progress)

    def run(self, sequences, progress=None, **options):
        widths = [unmasked_tokens([len(s)]) for s in sequences]
        with self._slot():
            return self._timed("unmasked", widths, lambda report: self._engine.run(sequences, progress=report, **options),
                               progress)

    def _timed(self, kind: str, tokens: list[int], call, progress):
        """Run ``call(report)``, recording the rate. A call that traced (compiled) a new shape
        spent seconds on that, once per process, against milliseconds per batch: with three or
        more batches the first one is left out of the timing; with fewer the call says nothing
        of the rate and is not recorded (a first one-batch scan of a short record measured 5.4 s
        against 0.26 s after, and set estimates 20-700x too high, so the page asked to confirm
        a scan of seconds as "about 8 minutes")."""
        from flamino_core.runtime.engine import TRACE_COUNTS  # the engine is loaded: it is what this wraps

        finished: list[float] = []

        def report(done: int, total: int) -> None:
            finished.append(time.monotonic())
            if progress is not None:
                progress(done, total)

        traces = sum(TRACE_COUNTS.values())
        started = time.monotonic()
        result = call(report)
        compiled = sum(TRACE_COUNTS.values()) != traces
        if self._rates is not None and tokens:
            total = sum(tokens)
            if len(finished) >= 3:
                share = total * (len(finished) - 1) / len(finished)
                self._rates.record(self.fingerprint, kind, round(share), finished[-1] - finished[0])
            elif not compiled:
                self._rates.record(self.fingerprint, kind, total, time.monotonic() - started)
        return result

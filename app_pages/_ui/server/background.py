"""The jobs of this server's sessions: long work (a set's per-record outputs, pseudo-perplexities,
a masked scan, variant scores) started once, run in a background thread (``flamino_core.jobs.background``),
found again from any page of the session that started it, and shown in the sidebar while it runs
(``jobs_panel.py`` draws them).

Each engine call of a job (a chunk of 64 masked positions, a few records' unmasked pass) holds
one slot of the process-wide queue for heavy jobs (``heavy_jobs.py``), so other sessions' work
runs between the chunks of a long job; the wait is the job's note ("2nd in line"); the job counts
as its visitor's (the cap per visitor, ``heavy_jobs.visitor_key``, read when it starts). A cancelled
job, or one whose browser tab was closed, stops at its next engine call; a full queue stops it
(``flamino_core.jobs.Stopped``); either way what finished is in the result store and the next job
asking for the same work resumes there.

No drawing here; the session's id is Streamlit's (jobs belong to the session that started them).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import Callable, Hashable

from flamino_core.jobs import Job, MeteredEngine, Stopped, default_rates, start

from app_pages._ui.server.heavy_jobs import TURNS, QueueFull, express_queue, heavy_job_queue, ordinal, visitor_key
from app_pages._ui.server.heavy_jobs import jobs as jobs_phrase

LOG = logging.getLogger("flamino")

KEEP_FINISHED = 8  # finished jobs a session keeps listed (the newest)
# A session whose browser has not run the app for this long is gone, whatever its socket says:
# while a job runs, the sidebar's watcher (jobs_panel._watch) reruns every 1.5 s, and a hidden
# tab's timers still fire about once a minute (Chrome's intensive throttling). A CI run saw a
# resumed fit go on for 600 s after its tab closed, the session still listed as connected.
GONE_AFTER_S = 180.0
_JOBS: dict[tuple, Job] = {}  # (session id, *work key) -> its latest job, oldest first
_LOCK = threading.Lock()
_SEEN: dict[str, float] = {}  # session id -> when its browser last ran the app (start or end of a run)
_monotonic = time.monotonic  # the sessions' clock (a test moves it)
_RUNNING: dict[str, int] = {}  # session id -> its script runs in progress (a long page run is not silence)


def session_id() -> str:
    """This session's id (one per browser tab); "" outside a Streamlit script run."""
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx()
    return ctx.session_id if ctx is not None else ""


@contextlib.contextmanager
def browser_run():
    """Around one run of the app (or of the jobs watcher) for this session: the session's
    browser is there (``_session_open``), for the run's length and ``GONE_AFTER_S`` after it."""
    mine, now = session_id(), _monotonic()
    with _LOCK:
        if mine not in _SEEN:  # a new session: forget those long gone (the table stays the live ones'
            # size; not on every run: the watcher runs each session's every 1.5 s)
            for gone in [s for s, seen in _SEEN.items() if now - seen > 10 * GONE_AFTER_S and s not in _RUNNING]:
                del _SEEN[gone]
        _SEEN[mine] = now
        _RUNNING[mine] = _RUNNING.get(mine, 0) + 1
    try:
        yield
    finally:
        with _LOCK:
            _SEEN[mine] = _monotonic()
            _RUNNING[mine] -= 1
            if not _RUNNING[mine]:
                del _RUNNING[mine]


def _heard_from(session: str) -> bool:
    """Whether ``session``'s browser ran the app within ``GONE_AFTER_S`` (or is running it now, or
    was never seen: tests that start jobs outside a browser run)."""
    with _LOCK:
        seen = _SEEN.get(session)
        return seen is None or session in _RUNNING or _monotonic() - seen < GONE_AFTER_S


def find(key: tuple[Hashable, ...]) -> Job | None:
    """This session's latest job for the work ``key`` (running or finished), or None."""
    with _LOCK:
        return _JOBS.get((session_id(), *key))


def submit(key: tuple[Hashable, ...], title: str, unit: str, work: Callable[[Job], object],
           total: int | None = None, setup: Callable[[Job], None] | None = None) -> Job:
    """The running job for ``key`` in this session, or a new one running ``work(job)`` (``setup``:
    ``flamino_core.jobs.start``'s, before its thread starts)."""
    full = (session_id(), *key)
    visitor = visitor_key()  # read here, in the session's thread: the job's own thread has no session
    with _LOCK:
        running = _JOBS.get(full)
        if running is not None and not running.finished:
            return running
        job = start(work, title, unit, total, visitor=visitor, session=full[0], setup=setup)
        _JOBS.pop(full, None)
        _JOBS[full] = job  # the newest last
        _prune(full[0])
        return job


def forget(key: tuple[Hashable, ...]) -> None:
    """Drop this session's finished job for ``key`` (a running one stays)."""
    full = (session_id(), *key)
    with _LOCK:
        job = _JOBS.get(full)
        if job is not None and job.finished:
            del _JOBS[full]


def session_jobs() -> list[Job]:
    """This session's jobs, oldest first."""
    mine = session_id()
    with _LOCK:
        return [job for key, job in _JOBS.items() if key[0] == mine]


def every_job() -> list[Job]:
    """Every session's jobs (tests wait for them; a server's shutdown could)."""
    with _LOCK:
        return list(_JOBS.values())


def wait_all(timeout: float = 300.0) -> bool:
    """Wait until every job has finished (True) or ``timeout`` seconds passed (False)."""
    end = time.monotonic() + timeout
    return all(job.wait(max(0.0, end - time.monotonic())) for job in every_job())


def forget_all(timeout: float = 300.0) -> None:
    """Cancel every job, wait for them to stop and forget them all (tests: a fresh server)."""
    for job in every_job():
        job.cancel()
    wait_all(timeout)
    with _LOCK:
        _JOBS.clear()


def _prune(session: str) -> None:
    finished = [key for key, job in _JOBS.items() if key[0] == session and job.finished]
    for key in finished[:-KEEP_FINISHED] if len(finished) > KEEP_FINISHED else ():
        del _JOBS[key]


# --- the engine a job uses ------------------------------------------------------------------------
def metered(engine, job: Job) -> MeteredEngine:
    """``engine`` for ``job``: each call waits for a heavy-job slot, stops if the job was
    cancelled, and is timed into this machine's pass rates (the core's functions take it where
    they take an engine; their masked passes go through the result store)."""
    return MeteredEngine(engine, default_rates(), slot=lambda: _slot(job), on_compile=job.compiled,
                         on_compiling=job.compiling, express_slot=lambda: _slot(job, express_queue()))


def _session_open(job: Job) -> bool:
    """Whether the session that started ``job`` is still connected: a job goes on while its
    visitor opens other pages, and stops (its finished chunks kept) once the tab is closed."""
    session = job.session
    try:
        from streamlit.runtime import Runtime

        if not session or not Runtime.exists():  # outside a server (tests): nobody to lose
            return True
        return Runtime.instance().is_active_session(session) and _heard_from(session)
    except Exception:  # the runtime is shutting down
        return False


def should_stop(job: Job) -> bool:
    """Whether work that does not go through ``metered`` (a Ray job, a fit's own checks) should stop
    now. A closed tab found here is logged and cancels the job as ``slot`` does: a resumed fit whose
    tab closed stopped at fit_table's own check, silently, and the test waiting for the server's
    'heavy job abandoned' line waited its 600 s."""
    if job.cancelled():
        return True
    if not _session_open(job):
        _give_up(job)
        return True
    return False


def _give_up(job: Job) -> None:
    """Cancel ``job``; the log says so when its visitor closed the tab (not a Cancel click), as
    the in-page heavy jobs do (``results.py``): ``make loadtest`` counts these lines."""
    if not job.cancelled():
        LOG.warning("heavy job abandoned (%s): its session closed", job.title)
    job.cancel()


@contextlib.contextmanager
def _slot(job: Job, queue=None):
    """A slot of ``queue`` (None: the heavy jobs'; the express lane's for a short fold) for one call
    of ``job``, its wait said on the job, given up when the job is cancelled or its tab closed."""
    from flamino_core.store import Cancelled

    queue = heavy_job_queue() if queue is None else queue

    if job.cancelled() or not _session_open(job):
        _give_up(job)
        raise Cancelled(f"{job.title}: cancelled")

    def waiting(seconds: float, place: int) -> None:
        if job.cancelled() or not _session_open(job):  # give up the place in the queue
            _give_up(job)
            raise Cancelled(f"{job.title}: cancelled while waiting")
        ahead = "next in line" if place == 1 else f"{ordinal(place)} in line"
        job.waiting(f"waiting for a free slot: {ahead} ({jobs_phrase(queue.running)} running, "
                    f"waited {seconds:.0f} s; the {TURNS})")

    # The queue orders by the work left (issue #67, ``flamino_core/jobs/queue_order.py``): the job's
    # own time left, its cost model's before it measured any (a fold's estimate, a fit's, a scan's);
    # ``aged``: what it waited on its earlier calls, so a long job's many short turns age it too.
    try:
        with queue.slot(timeout=None, on_wait=waiting, visitor=job.visitor, work=job.seconds_left(),
                                    aged=job.queued_s) as turn:
            job.queued_s += turn.waited
            job.waiting(None)
            yield
    except QueueFull as err:
        raise Stopped(str(err)) from err  # "1 heavy job running, 4 waiting"

"""The queues for heavy jobs and downloads, shared by every session of one server process.

Masked-marginal scans, fits, folds and the attention maps and contacts of long sequences cost
seconds to minutes and gigabytes; bounding them keeps one busy user (or many) from exhausting the
server. App policy like ``policy.py`` (the CLI and batch run one user's jobs and queue nothing). In
hosted mode its size comes from ``FLAMINO_HEAVY_WORKERS`` and ``FLAMINO_HEAVY_WAITING``, and one
visitor (several tabs, several pages) holds at most ``FLAMINO_HEAVY_PER_VISITOR`` (2) of its jobs,
running or waiting, so one visitor cannot fill it. The queue itself is the core's
(``flamino_core/jobs/heavy_queue.py``), its order ``flamino_core/jobs/queue_order.py`` (issue #67:
the job due first runs next, due at its queueing plus twice its estimated seconds and its visitor's
other jobs': a 60-residue fold passes five visitors' 400-residue folds, a visitor's second job waits
behind the others' first, and no job is passed by jobs queued after its due time); here the visitor
is the Streamlit session's (``visitor_key``). The Streamlit side (showing the wait and the place
in the queue, the busy warning) is in ``results/one_record.py``; the background jobs hold a slot
per engine call, with their estimate (``background.py``).
"""

from __future__ import annotations

import contextlib
import threading

from flamino_core import jobs as core_jobs
from flamino_core import settings
# Re-exported: the pages' names for a held slot, the refusals and the words of a place in line.
from flamino_core.jobs import QueueFull, Turn, VisitorBusy, jobs, ordinal  # noqa: F401

from app_pages._ui.server.policy import hosted_mode

# Attention maps and contacts of sequences longer than this go through the heavy-job queue:
# their memory grows with the square of the length.
HEAVY_RESIDUES = 400


# Why a job waits where it does, as a page says it beside the place in line ("The ..." after it).
TURNS = ("queue runs the job due first: the shortest, a visitor's next job after other visitors' first, "
         "and no job is passed once it has waited about twice its estimated time")

CURRENT = "current visitor"  # ``slot``'s default: the visitor of the Streamlit session running it


class HeavyJobQueue(core_jobs.HeavyJobQueue):
    """The core's queue (``flamino_core.jobs.heavy_queue``) whose ``slot`` names, by default, the
    visitor of the Streamlit session running it (``visitor_key``; None outside a session)."""

    def slot(self, timeout: float | None = 300.0, on_wait=None, poll: float = 1.0, visitor: str | None = CURRENT,
             work: float | None = None, aged: float = 0.0):
        return super().slot(timeout, on_wait, poll, visitor_key() if visitor == CURRENT else visitor, work, aged)


def visitor_name(header_value: str | None, address: str | None, session_id: str) -> str:
    """A visitor's name from what their connection says: the operator's header's first hop (the
    client), else the connection's address, else (a local connection, tests) the session itself."""
    if header_value:
        return "header " + header_value.split(",")[0].strip()
    return f"address {address}" if address else f"session {session_id}"


def visitor_key() -> str | None:
    """Who runs the current Streamlit session, for the cap per visitor: the header the operator
    names in ``FLAMINO_VISITOR_HEADER`` (a reverse proxy's ``X-Forwarded-For``/``X-Real-IP``:
    only the proxy's own value may be trusted, so the operator must make it overwrite the
    header), else the connection's address, else (a local connection, tests) the session itself.
    None outside a Streamlit session."""
    try:
        import streamlit as st
        from streamlit.runtime.scriptrunner import get_script_run_ctx
    except ImportError:  # pragma: no cover - the app always has Streamlit
        return None
    context = get_script_run_ctx(suppress_warning=True)
    if context is None:
        return None
    header = settings.VISITOR_HEADER.get()
    value = address = None
    try:
        value = st.context.headers.get(header) if header else None
        address = None if value else st.context.ip_address
    except Exception:  # AppTest and odd clients have no request context
        pass
    return visitor_name(value, address, context.session_id)


_QUEUE: HeavyJobQueue | None = None
_QUEUE_LOCK = threading.Lock()
_FETCHES: HeavyJobQueue | None = None
_EXPRESS: HeavyJobQueue | None = None
FETCH_WAIT_S = 30.0  # a fetch waits this long for a turn, then is refused ("try again")


def heavy_job_queue() -> HeavyJobQueue:
    """The process-wide queue shared by every session."""
    global _QUEUE
    with _QUEUE_LOCK:
        if _QUEUE is None:
            if hosted_mode():
                _QUEUE = HeavyJobQueue(settings.HEAVY_WORKERS.get(), settings.HEAVY_WAITING.get(),
                                       settings.HEAVY_PER_VISITOR.get())
            else:
                _QUEUE = HeavyJobQueue(workers=2, max_waiting=64)
        return _QUEUE


def express_queue() -> HeavyJobQueue:
    """The process-wide queue of the express lane (issue #67): short folds
    (``folding.fold_worker.is_express``) in their own worker, apart from the heavy jobs, so a
    60-residue fold never waits for a 400-residue one. One at a time (one express worker); hosted,
    ``FLAMINO_HEAVY_WAITING`` (4) waiting and one per visitor, in the heavy queue's order."""
    global _EXPRESS
    with _QUEUE_LOCK:
        if _EXPRESS is None:
            _EXPRESS = (HeavyJobQueue(1, settings.HEAVY_WAITING.get(), per_visitor=1) if hosted_mode()
                        else HeavyJobQueue(workers=1, max_waiting=64))
        return _EXPRESS


def fetch_queue() -> HeavyJobQueue:
    """The process-wide queue of server-side downloads (a PDB entry, an AlphaFold DB model, UniProt
    FASTA), apart from the heavy jobs: each holds a connection and up to a 20 s timeout, and ran in
    the visitor's session unbounded (issue #67). Hosted: ``FLAMINO_FETCH_WORKERS`` (2) at once,
    ``FLAMINO_FETCH_WAITING`` (8) waiting, one per visitor at a time, visitors in turn."""
    global _FETCHES
    with _QUEUE_LOCK:
        if _FETCHES is None:
            if hosted_mode():
                _FETCHES = HeavyJobQueue(settings.FETCH_WORKERS.get(), settings.FETCH_WAITING.get(),
                                         per_visitor=1)
            else:
                _FETCHES = HeavyJobQueue(workers=4, max_waiting=64)
        return _FETCHES


@contextlib.contextmanager
def fetch_turn():
    """Hold a turn of ``fetch_queue`` for one server-side download (or one click's downloads).

    Raises:
      QueueFull: the visitor has a download running or waiting already, or the queue is full, or
        no turn came within ``FETCH_WAIT_S``; the message says which, for the visitor.
    """
    try:
        with fetch_queue().slot(timeout=FETCH_WAIT_S):
            yield
    except VisitorBusy:
        raise QueueFull("you already have a download from this server running; wait for it to finish") from None
    except QueueFull as err:
        raise QueueFull(f"the server is downloading for other visitors ({err}); try again in a moment") from None

"""The queue for heavy jobs, shared by every session of one server process, visitors served in turn.

Masked-marginal scans and the attention maps and contacts of long sequences cost seconds to
minutes and gigabytes; bounding them keeps one busy user (or many) from exhausting the server.
App policy like ``policy.py`` (the CLI and batch run one user's jobs and queue nothing). In hosted
mode its size comes from ``FLAMINO_HEAVY_WORKERS`` and ``FLAMINO_HEAVY_WAITING``, and one visitor
(several tabs, several pages) holds at most ``FLAMINO_HEAVY_PER_VISITOR`` (2) of its jobs,
running or waiting, so one visitor cannot fill it. A long job holds the slot one chunk at a time
(``Turn.give_way``), so other visitors' jobs run between its chunks. The Streamlit
side (showing the wait and the place in the queue, the busy warning) is in ``results.py``; the
background jobs hold a slot per engine call (``background.py``).

Fairness: each waiting job holds a ticket, and a free slot goes to the ticket the queue's order
names, never to whichever thread happens to wake first (a semaphore polled with time-outs, as
before, let the first two of six queued scans finish 4th and 5th). Visitors take turns (issue
#67): the next ticket is that of the visitor served longest ago (one never served first), in
arrival order among equals, so a visitor's second job waits behind every other visitor's first,
for folds, fits and scans alike; a long job giving way between chunks queues again as its
visitor's next turn. First in, first out, five visitors' folds held everyone else's work for 3-4
minutes, renewable by pressing Predict again.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import threading
import time
from typing import Callable, Iterator

from flamino_core import settings
from app_pages._ui.server.policy import hosted_mode

# Attention maps and contacts of sequences longer than this go through the heavy-job queue:
# their memory grows with the square of the length.
HEAVY_RESIDUES = 400


# Why a job waits where it does, as a page says it beside the place in line.
TURNS = "visitors take turns: each visitor's next job waits behind every other visitor's first"


def jobs(n: int) -> str:
    return f"{n} heavy job{'' if n == 1 else 's'}"


def ordinal(n: int) -> str:
    """``1st``, ``2nd``, ``11th``: a place in the queue."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


class QueueFull(RuntimeError):
    """Too many heavy jobs are running or waiting; the user should retry later.

    The message says only what is happening ("1 heavy job running, 4 waiting"); the page
    adds that the server is busy and offers to retry.
    """


class VisitorBusy(QueueFull):
    """This visitor already has ``per_visitor`` heavy jobs running or waiting (other tabs)."""


CURRENT = "current visitor"  # ``slot``'s default: the visitor of the Streamlit session running it


class Turn:
    """A held slot, handed to the ``with`` block of ``HeavyJobQueue.slot``."""

    def __init__(self, queue: "HeavyJobQueue", on_wait, poll: float, visitor: str | None = None):
        self._queue, self._on_wait, self._poll, self._visitor = queue, on_wait, poll, visitor
        self.holding = True  # False while (and if) giving way failed: no slot to free

    def give_way(self) -> None:
        """Between two chunks of a long job: if other jobs wait, let the oldest run and queue
        again behind them (keeping this job's admission: a full queue does not refuse it); else
        carry on at once. So a job of many chunks holds the slot one chunk at a time. What
        ``on_wait`` raises meanwhile (a closed session) propagates, with no slot held."""
        queue = self._queue
        with queue._changed:
            if not queue._waiting:
                return
            queue.running -= 1
            self.holding = False
            ticket = next(queue._tickets)
            queue._waiting[ticket] = self._visitor
            queue._changed.notify_all()
        queue._wait_for_turn(ticket, time.monotonic(), None, self._on_wait, self._poll)
        self.holding = True


class HeavyJobQueue:
    """At most ``workers`` heavy jobs run at once and at most ``max_waiting`` wait, visitors served
    in turn (the module's docstring); one visitor holds at most ``per_visitor`` of them, running or waiting (None:
    no such cap). Thread-safe: Streamlit runs each session in its own thread.
    """

    def __init__(self, workers: int = 1, max_waiting: int = 4, per_visitor: int | None = None):
        self.workers, self.max_waiting, self.per_visitor = workers, max_waiting, per_visitor
        self._changed = threading.Condition()
        self._tickets = itertools.count()
        self._waiting: dict[int, str | None] = {}  # waiting ticket -> its visitor, in arrival order
        self._served: collections.OrderedDict[str, int] = collections.OrderedDict()  # visitor -> its last turn
        self._turns = itertools.count()
        self._visitors: collections.Counter[str] = collections.Counter()  # jobs running or waiting
        self.running = 0

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def _order(self) -> list[int]:
        """The waiting tickets in the order they will run: the visitor served longest ago first
        (never: first of all), arrival order among equals. Under the lock."""
        def last_turn(ticket: int) -> tuple[int, int]:
            visitor = self._waiting[ticket]
            return (-1 if visitor is None else self._served.get(visitor, -1), ticket)

        return sorted(self._waiting, key=last_turn)

    def _serve(self, ticket: int | None, visitor: str | None) -> None:
        """``ticket`` (None: a job that did not wait) runs now: its visitor's turn is counted. Under the lock."""
        if ticket is not None:
            del self._waiting[ticket]
        self.running += 1
        if visitor is not None:
            self._served[visitor] = next(self._turns)
            self._served.move_to_end(visitor)
            if len(self._served) > 4096:  # the visitors served longest ago are forgotten (they go first again)
                self._served.popitem(last=False)

    def place(self, ticket: int) -> int:
        """1-based place of a waiting ticket in the queue (1: next to run); 0 once it runs."""
        with self._changed:
            return self._order().index(ticket) + 1 if ticket in self._waiting else 0

    def jobs_of(self, visitor: str) -> int:
        """Heavy jobs of ``visitor`` running or waiting now."""
        with self._changed:
            return self._visitors[visitor]

    @contextlib.contextmanager
    def slot(
        self,
        timeout: float | None = 300.0,
        on_wait: Callable[[float, int], None] | None = None,
        poll: float = 1.0,
        visitor: str | None = CURRENT,
    ) -> Iterator[Turn]:
        """Hold one of the ``workers`` slots for the duration of the ``with`` block.

        Args:
          timeout: seconds to wait for a slot (None: forever).
          on_wait: called as ``on_wait(seconds waited, place in the queue)`` as soon as the job
            is queued (0 seconds) and then about every ``poll`` seconds while it waits, outside
            the queue's lock. Whatever it raises stops the wait (and propagates, the ticket
            given up): the app uses it to show the wait and to notice a closed session.
          visitor: whose job this is, for the cap per visitor; by default the visitor of the
            Streamlit session running it (``visitor_key``); None: not counted.

        Yields:
          A ``Turn``: a long job calls ``give_way()`` between chunks.

        Raises:
          VisitorBusy: this visitor already has ``per_visitor`` jobs running or waiting.
          QueueFull: the queue is full now, or no slot came free within ``timeout``.
        """
        if visitor == CURRENT:
            visitor = visitor_key()
        started = time.monotonic()
        with self._changed:
            if visitor is not None and self.per_visitor is not None and self._visitors[visitor] >= self.per_visitor:
                raise VisitorBusy(f"you already have {jobs(self._visitors[visitor])} running or waiting, "
                                  f"the most one visitor may have at once")
            if self.running < self.workers and not self._waiting:
                self._serve(None, visitor)
                ticket = None
            elif len(self._waiting) >= self.max_waiting:
                raise QueueFull(f"{jobs(self.running)} running, {len(self._waiting)} waiting")
            else:
                ticket = next(self._tickets)
                self._waiting[ticket] = visitor
            if visitor is not None:
                self._visitors[visitor] += 1
        turn = Turn(self, on_wait, poll, visitor)
        try:
            if ticket is not None:
                self._wait_for_turn(ticket, started, timeout, on_wait, poll)
        except BaseException:
            self._forget(visitor)
            raise
        try:
            yield turn
        finally:
            with self._changed:
                if turn.holding:
                    self.running -= 1
                self._changed.notify_all()
            self._forget(visitor)

    def _forget(self, visitor: str | None) -> None:
        if visitor is None:
            return
        with self._changed:
            self._visitors[visitor] -= 1
            if self._visitors[visitor] <= 0:
                del self._visitors[visitor]

    def _wait_for_turn(self, ticket, started, timeout, on_wait, poll) -> None:
        """Block until ``ticket`` is first in the queue's order and a slot is free; then it runs."""
        def turn() -> bool:
            return self.running < self.workers and self._order()[0] == ticket

        try:
            place = self.place(ticket)
            while True:
                if on_wait is not None:
                    on_wait(time.monotonic() - started, place)
                with self._changed:
                    left = None if timeout is None else timeout - (time.monotonic() - started)
                    step = poll if on_wait is not None else left
                    if left is not None and step is not None:
                        step = min(step, left)
                    if (left is None or left > 0) and self._changed.wait_for(turn, step):
                        self._serve(ticket, self._waiting[ticket])
                        self._changed.notify_all()  # the next in line may find a free slot too
                        return
                    if left is not None and time.monotonic() - started >= timeout:
                        raise QueueFull("waited too long for a free slot")
                    place = self._order().index(ticket) + 1
        except BaseException:
            with self._changed:
                self._waiting.pop(ticket, None)
                self._changed.notify_all()  # those behind it move up
            raise


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

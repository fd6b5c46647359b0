"""The first-come-first-served queue for heavy jobs, shared by every session of one server process.

Masked-marginal scans and the attention maps and contacts of long sequences cost seconds to
minutes and gigabytes; bounding them keeps one busy user (or many) from exhausting the server.
App policy like ``policy.py`` (the CLI and batch run one user's jobs and queue nothing). In hosted
mode its size comes from ``FLAMINO_HEAVY_WORKERS`` and ``FLAMINO_HEAVY_WAITING``. The Streamlit
side (showing the wait and the place in the queue, the busy warning) is in ``results.py``.

Fairness: each waiting job holds a ticket in arrival order, and a free slot goes to the oldest
ticket, never to whichever thread happens to wake first (a semaphore polled with time-outs, as
before, let the first two of six queued scans finish 4th and 5th).
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import threading
import time
from typing import Callable, Iterator

from .policy import env_int, hosted_mode

# Attention maps and contacts of sequences longer than this go through the heavy-job queue:
# their memory grows with the square of the length.
HEAVY_RESIDUES = 400


def jobs(n: int) -> str:
    return f"{n} heavy job{'' if n == 1 else 's'}"


class QueueFull(RuntimeError):
    """Too many heavy jobs are running or waiting; the user should retry later.

    The message says only what is happening ("1 heavy job running, 4 waiting"); the page
    adds that the server is busy and offers to retry.
    """


class HeavyJobQueue:
    """At most ``workers`` heavy jobs run at once and at most ``max_waiting`` wait, served in
    arrival order. Thread-safe: Streamlit runs each session in its own thread.
    """

    def __init__(self, workers: int = 1, max_waiting: int = 4):
        self.workers, self.max_waiting = workers, max_waiting
        self._changed = threading.Condition()
        self._tickets = itertools.count()
        self._queue: collections.deque[int] = collections.deque()  # waiting tickets, oldest first
        self.running = 0

    @property
    def waiting(self) -> int:
        return len(self._queue)

    def place(self, ticket: int) -> int:
        """1-based place of a waiting ticket in the queue (1: next to run); 0 once it runs."""
        with self._changed:
            return self._queue.index(ticket) + 1 if ticket in self._queue else 0

    @contextlib.contextmanager
    def slot(
        self,
        timeout: float | None = 300.0,
        on_wait: Callable[[float, int], None] | None = None,
        poll: float = 1.0,
    ) -> Iterator[None]:
        """Hold one of the ``workers`` slots for the duration of the ``with`` block.

        Args:
          timeout: seconds to wait for a slot (None: forever).
          on_wait: called as ``on_wait(seconds waited, place in the queue)`` as soon as the job
            is queued (0 seconds) and then about every ``poll`` seconds while it waits, outside
            the queue's lock. Whatever it raises stops the wait (and propagates, the ticket
            given up): the app uses it to show the wait and to notice a closed session.

        Raises:
          QueueFull: the queue is full now, or no slot came free within ``timeout``.
        """
        started = time.monotonic()
        with self._changed:
            if self.running < self.workers and not self._queue:
                self.running += 1
                ticket = None
            elif len(self._queue) >= self.max_waiting:
                raise QueueFull(f"{jobs(self.running)} running, {len(self._queue)} waiting")
            else:
                ticket = next(self._tickets)
                self._queue.append(ticket)
        if ticket is not None:
            self._wait_for_turn(ticket, started, timeout, on_wait, poll)
        try:
            yield
        finally:
            with self._changed:
                self.running -= 1
                self._changed.notify_all()

    def _wait_for_turn(self, ticket, started, timeout, on_wait, poll) -> None:
        """Block until ``ticket`` is the oldest and a slot is free; then it runs."""
        def turn() -> bool:
            return self._queue[0] == ticket and self.running < self.workers

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
                        self._queue.popleft()
                        self.running += 1
                        self._changed.notify_all()  # the next in line may find a free slot too
                        return
                    if left is not None and time.monotonic() - started >= timeout:
                        raise QueueFull("waited too long for a free slot")
                    place = self._queue.index(ticket) + 1
        except BaseException:
            with self._changed:
                if ticket in self._queue:
                    self._queue.remove(ticket)
                self._changed.notify_all()  # those behind it move up
            raise


_QUEUE: HeavyJobQueue | None = None
_QUEUE_LOCK = threading.Lock()


def heavy_job_queue() -> HeavyJobQueue:
    """The process-wide queue shared by every session."""
    global _QUEUE
    with _QUEUE_LOCK:
        if _QUEUE is None:
            if hosted_mode():
                _QUEUE = HeavyJobQueue(env_int("FLAMINO_HEAVY_WORKERS", 1), env_int("FLAMINO_HEAVY_WAITING", 4))
            else:
                _QUEUE = HeavyJobQueue(workers=2, max_waiting=64)
        return _QUEUE

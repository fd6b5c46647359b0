"""A queue for heavy jobs shared by the threads of one process: at most ``workers`` run at once,
the rest wait for a slot in the order of ``queue_order`` (the job due first: shortest work first,
a visitor's later jobs behind other visitors' first, and no job passed once it has waited about
twice its length; the rule is argued there), new jobs let in by the same order. The app's server
makes one of these for its heavy jobs and one for its downloads (``app_pages/_ui/server/heavy_jobs.py``:
the visitor of a Streamlit session, the hosted sizes); this module knows no Streamlit.

Fairness holds on tickets: a free slot goes to the ticket the order names, never to whichever
thread happens to wake first (a semaphore polled with time-outs let the first two of six queued
scans finish 4th and 5th). A long job holds the slot one chunk at a time (``Turn.give_way``), so
other jobs run between its chunks.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Callable, Iterator

from flamino_core.jobs.queue_order import QueueFull, QueueOrder


class Turn:
    """A held slot, handed to the ``with`` block of ``HeavyJobQueue.slot``. ``waited``: the seconds
    the job waited for it (its gives-way included), for a job whose next call queues again."""

    def __init__(self, queue: "HeavyJobQueue", hold: int, on_wait, poll: float, aged: float, waited: float):
        self._queue, self._hold, self._on_wait, self._poll, self._aged = queue, hold, on_wait, poll, aged
        self.waited = waited
        self.holding = True  # False while (and if) giving way failed: no slot to free

    def give_way(self) -> None:
        """Between two chunks of a long job: if other jobs wait, queue again by the queue's order
        (keeping this job's admission: a full queue does not refuse it; due by what is left of its
        work and its waits so far), so those due first run; else carry on at once. So a job of many
        chunks holds the slot one chunk at a time. What ``on_wait`` raises meanwhile (a closed
        session) propagates, with no slot held."""
        queue = self._queue
        with queue._changed:
            if not queue._order.waiting:
                return
            ticket = queue._order.requeue(self._hold, self._aged + self.waited)
            self.holding = False
            queue._changed.notify_all()
        started = time.monotonic()
        self._hold = queue._wait_for_turn(ticket, started, None, self._on_wait, self._poll)
        self.waited += time.monotonic() - started
        self.holding = True


class HeavyJobQueue:
    """At most ``workers`` heavy jobs run at once and at most ``max_waiting`` wait before a new one
    (``queue_order``); one visitor holds at most ``per_visitor`` of them, running or waiting (None:
    no such cap). ``clock``: the order's (a test's fake one); the waits themselves are real time.
    Thread-safe."""

    def __init__(self, workers: int = 1, max_waiting: int = 4, per_visitor: int | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self._order = QueueOrder(workers, max_waiting, per_visitor, clock)
        self._changed = threading.Condition()

    workers = property(lambda self: self._order.workers)
    max_waiting = property(lambda self: self._order.max_waiting)
    per_visitor = property(lambda self: self._order.per_visitor)

    @property
    def running(self) -> int:
        return len(self._order.running)

    @property
    def waiting(self) -> int:
        return len(self._order.waiting)

    def place(self, ticket: int) -> int:
        """1-based place of a waiting ticket in the queue (1: next to run); 0 once it runs."""
        with self._changed:
            return self._order.place(ticket)

    def jobs_of(self, visitor: str) -> int:
        """Heavy jobs of ``visitor`` running or waiting now."""
        with self._changed:
            return self._order.jobs_of(visitor)

    @contextlib.contextmanager
    def slot(self, timeout: float | None = 300.0, on_wait: Callable[[float, int], None] | None = None,
             poll: float = 1.0, visitor: str | None = None, work: float | None = None,
             aged: float = 0.0) -> Iterator[Turn]:
        """Hold one of the ``workers`` slots for the duration of the ``with`` block.

        Args:
          timeout: seconds to wait for a slot (None: forever).
          on_wait: called as ``on_wait(seconds waited, place in the queue)`` as soon as the job
            is queued (0 seconds) and then about every ``poll`` seconds while it waits, outside
            the queue's lock. Whatever it raises stops the wait (and propagates, the ticket
            given up): the app uses it to show the wait and to notice a closed session.
          visitor: whose job this is, for the order and the cap per visitor (None: nobody's).
          work: the job's estimated seconds left (None: not said, ``queue_order.UNKNOWN_WORK_S``).
          aged: seconds the job waited on its earlier turns (a job of many calls, each a slot).

        Yields:
          A ``Turn``: a long job calls ``give_way()`` between chunks.

        Raises:
          VisitorBusy: this visitor already has ``per_visitor`` jobs running or waiting.
          QueueFull: the queue is full before this job now, or no slot came free within ``timeout``.
        """
        started = time.monotonic()
        with self._changed:
            kind, number = self._order.enter(visitor, work, aged)
        hold = number if kind == "run" else self._wait_for_turn(number, started, timeout, on_wait, poll)
        turn = Turn(self, hold, on_wait, poll, aged, time.monotonic() - started if kind == "wait" else 0.0)
        try:
            yield turn
        finally:
            with self._changed:
                if turn.holding:
                    self._order.leave(hold=turn._hold)
                self._changed.notify_all()

    def _wait_for_turn(self, ticket, started, timeout, on_wait, poll) -> int:
        """Block until ``ticket`` is first in the queue's order and a slot is free; then it runs: its hold."""
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
                    if (left is None or left > 0) and self._changed.wait_for(lambda: self._order.ready(ticket), step):
                        hold = self._order.serve(ticket)
                        self._changed.notify_all()  # the next in line may find a free slot too
                        return hold
                    if left is not None and time.monotonic() - started >= timeout:
                        raise QueueFull("waited too long for a free slot")
                    place = self._order.place(ticket)
        except BaseException:
            with self._changed:
                self._order.leave(ticket=ticket)
                self._changed.notify_all()  # those behind it move up
            raise

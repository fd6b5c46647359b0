"""The heavy-job queue's rule (issue #67): which waiting job runs next, and which new job is let
in. Bookkeeping only, under the caller's lock and on the caller's clock (``clock``: a test gives a
fake one and fake work, and the rule is checked without threads or wall-clock asserts); the
threads, the waiting and the slots are ``heavy_queue.HeavyJobQueue``'s.

The rule: each waiting job is **due** at the time it queued, less what it already waited on its
earlier turns, plus ``DUE_FACTOR`` (2) times its work: its own estimated seconds and those of its
visitor's other jobs running (what is left of them) or waiting. The job due first runs next; the
running job is never stopped for it. Why:

* Shortest first: a job's wait matters against its length. Five visitors' 400-residue folds of a
  minute each, first come first served, made a 60-residue fold of 5 s wait five minutes (60x its
  length) where running it before the four waiting folds costs each of them 5 s (1.1x). A job of
  ``s`` seconds queued ``c`` seconds after jobs of ``E`` is due before them when ``c + 2s < 2E``:
  a 60-residue fold clicked while the first 400-residue fold runs (``c < E``) goes next whenever
  it is shorter than half a 400-residue fold, so it finishes within what is left of that fold plus
  its own time.
* No starvation: a job's due time is fixed when it queues, so a job queued later passes it only if
  it is due earlier, i.e. only if it queued before this job's due time: a job of ``E`` seconds is
  passed by jobs arriving within ``2E`` of it, never later, however many keep arriving (the
  factor 2: a long job waits at most about twice its own length for jobs that arrive after it; a
  larger factor favours short jobs longer, a smaller one drifts back to first come first served).
  The comparison of two waiting jobs never changes with time (both age at the same rate), which is
  the aging (``queued + 2 x work`` is ``work - waited / 2`` plus the same clock for every job).
* Visitors in turn: counting a visitor's other jobs in its work puts a visitor's second job
  behind every other visitor's first that queued about as early (its work counts twice), so five
  Predict presses of one visitor do not hold the others' single jobs; it is aging too, so a
  visitor's second job is not held forever either.
* A job that says nothing of its work counts as ``UNKNOWN_WORK_S``: among such jobs the order is
  first come, first served, as before.

Admission: a new job is let in when fewer than ``max_waiting`` jobs would run before it (its place
in this order, the running ones aside), whatever waits behind it: a visitor was promised at most
``max_waiting`` jobs before theirs, and a short job that goes before long ones keeps that promise
while the long ones' own bound is the due time above. Behind it, at most ``WAITING_CAP`` x
``max_waiting`` jobs wait in all (each holds a thread and a page), and one visitor holds at most
``per_visitor`` jobs running or waiting.
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from typing import Callable

# A waiting job is passed only by jobs due before it: queued + DUE_FACTOR x seconds of work.
DUE_FACTOR = 2.0
# The work of a job that says none (an attention map of a long sequence, a scan's first chunk
# before its rate is measured): the order of the hosted server's usual heavy jobs (a chunk of
# passes, a small fit, a test-model fold of 5-200 s on the 2-core server).
UNKNOWN_WORK_S = 30.0
WAITING_CAP = 2  # at most this many times max_waiting jobs wait, however short


class QueueFull(RuntimeError):
    """Too many heavy jobs are running or waiting; the user should retry later.

    The message says only what is happening ("1 heavy job running, 4 waiting"); the page
    adds that the server is busy and offers to retry.
    """


class VisitorBusy(QueueFull):
    """This visitor already has ``per_visitor`` heavy jobs running or waiting (other tabs)."""


def jobs(n: int) -> str:
    return f"{n} heavy job{'' if n == 1 else 's'}"


def ordinal(n: int) -> str:
    """``1st``, ``2nd``, ``11th``: a place in the queue."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


@dataclasses.dataclass
class Entry:
    """A job in the queue: whose, its estimated seconds (None: not said), when it started running
    (running jobs) or when it is due (waiting ones)."""

    visitor: str | None
    work: float | None
    at: float

    @property
    def seconds(self) -> float:
        return UNKNOWN_WORK_S if self.work is None else max(self.work, 0.0)


class QueueOrder:
    """The waiting and running jobs of one queue, by the module's rule. Not thread-safe: the caller
    holds its lock around every call. Waiting jobs are named by tickets, running ones by holds (two
    counters: a test reads the tickets as 0, 1, 2...)."""

    def __init__(self, workers: int = 1, max_waiting: int = 4, per_visitor: int | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.workers, self.max_waiting, self.per_visitor, self.clock = workers, max_waiting, per_visitor, clock
        self.waiting: dict[int, Entry] = {}  # ticket -> the job, ``at`` its due time
        self.running: dict[int, Entry] = {}  # hold -> the job, ``at`` when it started
        self._tickets, self._holds = itertools.count(), itertools.count()

    def jobs_of(self, visitor: str) -> int:
        """``visitor``'s jobs running or waiting."""
        return sum(entry.visitor == visitor for entry in (*self.waiting.values(), *self.running.values()))

    def order(self) -> list[int]:
        """The waiting tickets in the order they will run: due first, the older ticket among equals."""
        return sorted(self.waiting, key=lambda ticket: (self.waiting[ticket].at, ticket))

    def place(self, ticket: int) -> int:
        """1-based place of a waiting ticket (1: next to run); 0 when it is not waiting."""
        return self.order().index(ticket) + 1 if ticket in self.waiting else 0

    def ready(self, ticket: int) -> bool:
        """Whether ``ticket`` may run now: a slot is free and it is first in the order."""
        return len(self.running) < self.workers and bool(self.waiting) and self.order()[0] == ticket

    def due(self, visitor: str | None, work: float | None, waited: float = 0.0) -> float:
        """When a job of ``visitor`` with ``work`` seconds, queued now after ``waited`` seconds on
        its earlier turns, is due: now - waited + DUE_FACTOR x (its seconds and those of its
        visitor's other jobs, what is left of the running ones)."""
        now = self.clock()
        ahead = 0.0
        if visitor is not None:
            ahead += sum(max(e.seconds - (now - e.at), 0.0) for e in self.running.values() if e.visitor == visitor)
            ahead += sum(e.seconds for e in self.waiting.values() if e.visitor == visitor)
        return now - waited + DUE_FACTOR * (ahead + Entry(visitor, work, now).seconds)

    def enter(self, visitor: str | None, work: float | None, waited: float = 0.0) -> tuple[str, int]:
        """A new job: ``("run", hold)`` when a slot is free and nobody waits, else ``("wait",
        ticket)``. ``work``: its estimated seconds (None: not said); ``waited``: seconds it waited
        on its earlier turns (a job of many calls, each queued on its own).

        Raises:
          VisitorBusy: ``visitor`` already has ``per_visitor`` jobs running or waiting.
          QueueFull: ``max_waiting`` jobs or more would run before it, or the queue holds its most.
        """
        if visitor is not None and self.per_visitor is not None and self.jobs_of(visitor) >= self.per_visitor:
            raise VisitorBusy(f"you already have {jobs(self.jobs_of(visitor))} running or waiting, "
                              f"the most one visitor may have at once")
        if len(self.running) < self.workers and not self.waiting:
            return "run", self._start(visitor, work)
        due = self.due(visitor, work, waited)
        place = 1 + sum(entry.at <= due for entry in self.waiting.values())  # (a new ticket loses ties)
        if place > self.max_waiting or len(self.waiting) >= WAITING_CAP * self.max_waiting:
            raise QueueFull(f"{jobs(len(self.running))} running, {len(self.waiting)} waiting")
        ticket = next(self._tickets)
        self.waiting[ticket] = Entry(visitor, work, due)
        return "wait", ticket

    def serve(self, ticket: int) -> int:
        """The waiting ``ticket`` runs now (``ready`` said so): its hold."""
        entry = self.waiting.pop(ticket)
        return self._start(entry.visitor, entry.work)

    def requeue(self, hold: int, waited: float) -> int:
        """A running job gives way between two of its chunks (others wait): it queues again, without
        admission (it was let in), due by what is left of its work and the ``waited`` seconds of its
        turns so far. Its ticket."""
        entry = self.running.pop(hold)
        left = None if entry.work is None else max(entry.work - (self.clock() - entry.at), 0.0)
        ticket = next(self._tickets)
        self.waiting[ticket] = Entry(entry.visitor, left, self.due(entry.visitor, left, waited))
        return ticket

    def leave(self, ticket: int | None = None, hold: int | None = None) -> None:
        """A job gives up its place (``ticket``) or ends (``hold``)."""
        if ticket is not None:
            self.waiting.pop(ticket, None)
        if hold is not None:
            self.running.pop(hold, None)

    def _start(self, visitor: str | None, work: float | None) -> int:
        hold = next(self._holds)
        self.running[hold] = Entry(visitor, work, self.clock())
        return hold

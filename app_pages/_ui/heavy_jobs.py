"""The bounded queue for heavy jobs, shared by every session of one server process.

Masked-marginal scans and the attention maps and contacts of long sequences cost seconds to
minutes and gigabytes; bounding them keeps one busy user (or many) from exhausting the server.
App policy like ``policy.py`` (the CLI and batch run one user's jobs and queue nothing). In hosted
mode its size comes from ``FLAMINO_HEAVY_WORKERS`` and ``FLAMINO_HEAVY_WAITING``. The Streamlit
side (showing the wait, the busy warning) is in ``results.py``.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Callable, Iterator

from .policy import env_int, hosted_mode

# Attention maps and contacts of sequences longer than this go through the heavy-job queue:
# their memory grows with the square of the length.
HEAVY_RESIDUES = 400


class QueueFull(RuntimeError):
    """Too many heavy jobs are running or waiting; the user should retry later."""


class HeavyJobQueue:
    """At most ``workers`` heavy jobs run at once and at most ``max_waiting`` wait for a slot.

    Thread-safe: Streamlit runs each session in its own thread.
    """

    def __init__(self, workers: int = 1, max_waiting: int = 4):
        self.workers, self.max_waiting = workers, max_waiting
        self._slots = threading.Semaphore(workers)
        self._lock = threading.Lock()
        self.running = 0
        self.waiting = 0

    @contextlib.contextmanager
    def slot(
        self,
        timeout: float | None = 300.0,
        on_wait: Callable[[float], None] | None = None,
        poll: float = 1.0,
    ) -> Iterator[None]:
        """Hold one of the ``workers`` slots for the duration of the ``with`` block.

        Args:
          timeout: seconds to wait for a slot (None: forever).
          on_wait: called about every ``poll`` seconds while waiting, with the seconds waited so
            far. Whatever it raises stops the wait (and propagates): the app uses it to show the
            wait and to notice a session that was closed meanwhile.

        Raises:
          QueueFull: the queue is full now, or no slot came free within ``timeout``.
        """
        with self._lock:
            if self.running >= self.workers and self.waiting >= self.max_waiting:
                raise QueueFull(
                    f"the server is busy ({self.running} heavy job(s) running, {self.waiting} waiting); "
                    "please try again in a minute"
                )
            self.waiting += 1
        acquired = False
        started = time.monotonic()
        try:
            while True:
                left = None if timeout is None else timeout - (time.monotonic() - started)
                if left is not None and left <= 0:
                    break
                step = left if on_wait is None else (poll if left is None else min(poll, left))
                if self._slots.acquire(timeout=step):
                    acquired = True
                    break
                if on_wait is not None:
                    on_wait(time.monotonic() - started)
        finally:
            with self._lock:
                self.waiting -= 1
                if acquired:
                    self.running += 1
        if not acquired:
            raise QueueFull("waited too long for a free slot; please try again later")
        try:
            yield
        finally:
            with self._lock:
                self.running -= 1
            self._slots.release()


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

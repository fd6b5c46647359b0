"""Work run in a process of its own (``ProcessWorker``), so it stops within ``POLL_S`` of being
told to (a Cancel, a closed tab, a spent budget) and gives its memory back when it ends: a
server's scikit-learn fits (``predictors/worker.py``) and its folds (``structure/folding/fold_worker.py``).

The protocol: the caller writes a pickled callable on the worker's stdin, the worker runs it and
answers ``(ok, value or error)`` pickled on its stdout; each frame is its length, then the pickle
(length 0 ends the worker). The caller's thread never blocks longer than ``POLL_S`` on the pipes:
between reads it calls its ``check``, and when that raises the process is killed mid-work.

Why ``python -m`` and not ``multiprocessing``: a spawned child runs the parent's ``__main__``
first, and under ``streamlit run`` that is the app's script: the child ran the whole app before
its first job. The worker is a module run as a program (``module``), importing only what its
work needs.

Its share of the machine (``Share``): a worker may run at a lower priority (``nice``) and on
fewer cores than the server (``cores``: its CPU affinity, set by ``serve`` before the work imports anything, so
XLA's and OpenBLAS's thread pools, sized from the cores a process may use, are that size too):
the server's own thread and every other session keep the rest.
"""

from __future__ import annotations

import dataclasses
import os
import pickle
import select
import struct
import subprocess
import sys
from pathlib import Path
from typing import Callable, TypeVar

from flamino_core import settings

POLL_S = 0.2  # how often the caller's stop check runs while the work runs
_LENGTH = struct.Struct("<Q")  # a frame: its length, then the pickle; length 0 ends the worker
T = TypeVar("T")


class WorkerLost(RuntimeError):
    """The worker's process ended without answering (killed from outside, out of memory)."""


@dataclasses.dataclass(frozen=True)
class Share:
    """How much of the machine a worker may take: ``nice`` (added to the server's priority; 0: the
    same) and ``cores`` (how many CPU cores it may run on, the last ones; None: all of them)."""

    nice: int = 0
    cores: int | None = None

    def cpus(self) -> set[int] | None:
        """The CPU set of the worker (None: the server's own)."""
        if self.cores is None or not hasattr(os, "sched_getaffinity"):
            return None
        mine = sorted(os.sched_getaffinity(0))
        return set(mine[-max(1, min(self.cores, len(mine))):]) if self.cores < len(mine) else None

    def environment(self) -> dict[str, str]:
        """What tells the child its share (``serve`` applies it before the work imports anything):
        not ``Popen``'s ``preexec_fn``, which may deadlock in a process with threads (a server)."""
        cpus = self.cpus()
        return {SHARE_ENV: f"{self.nice};{','.join(map(str, sorted(cpus))) if cpus else ''}"}


SHARE_ENV = settings.WORKER_SHARE.name  # "nice;cpu,cpu": a worker's share, read by ``serve``


def apply_share() -> None:
    """In the worker, first: its priority and CPU set as its parent gave them (``Share``)."""
    nice, _, cpus = settings.WORKER_SHARE.take().partition(";")
    if nice.strip().lstrip("-").isdigit() and int(nice):
        os.nice(int(nice))
    if cpus and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {int(c) for c in cpus.split(",")})


def write_frame(stream, value) -> None:
    data = b"" if value is None else pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_LENGTH.pack(len(data)) + data)
    stream.flush()


def _read_exactly(stream, n: int) -> bytes:
    parts, left = [], n
    while left:
        part = stream.read(left)
        if not part:
            raise EOFError("the pipe closed")
        parts.append(part)
        left -= len(part)
    return b"".join(parts)


def read_frame(stream):
    """The next frame's value; None for the end frame."""
    (n,) = _LENGTH.unpack(_read_exactly(stream, _LENGTH.size))
    return pickle.loads(_read_exactly(stream, n)) if n else None


def serve() -> None:
    """The worker process: run each callable received on stdin, answer (ok, value or error) on stdout."""
    apply_share()
    requests, answers = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # whatever the work prints must not enter the frames
    while True:
        try:
            work = read_frame(requests)
        except EOFError:
            return
        if work is None:
            return
        try:
            answer = (True, work())
        except Exception as err:  # noqa: BLE001 - the caller raises it in its own thread
            answer = (False, _picklable(err))
        write_frame(answers, answer)


def _picklable(err: Exception) -> Exception:
    try:
        pickle.loads(pickle.dumps(err))
        return err
    except Exception:  # noqa: BLE001 - an error that does not travel is said as text
        return RuntimeError(f"{type(err).__name__}: {err}")


class ProcessWorker:
    """One process (``python -m module``, whose main calls ``serve``) running a caller's work one
    call at a time (``run``); a context manager that ends it. Not thread-safe: one thread uses it
    at a time. ``what``: the work in words, for the lost-worker message."""

    def __init__(self, module: str, share: Share = Share(), env: dict[str, str] | None = None, what: str = "work"):
        self.module, self.share, self.env, self.what = module, share, env or {}, what
        self._process: subprocess.Popen | None = None

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def run(self, work: Callable[[], T], check: Callable[[], None] = lambda: None) -> T:
        """``work()`` in the worker's process; ``check()`` is called every ``POLL_S`` meanwhile
        (while the request is written, the work runs and its answer is read), and when it raises
        the process is killed (the work stops mid-way) and the error goes on to the caller."""
        self._start()
        data = pickle.dumps(work, protocol=pickle.HIGHEST_PROTOCOL)
        try:
            self._send(_LENGTH.pack(len(data)) + data, check)
            (n,) = _LENGTH.unpack(self._receive(_LENGTH.size, check))
            ok, value = pickle.loads(self._receive(n, check))
        except (OSError, EOFError, pickle.UnpicklingError) as err:
            self.kill()
            raise WorkerLost(f"the {self.what}'s process ended without a result (out of memory?)") from err
        if not ok:
            raise value
        return value

    def _send(self, data: bytes, check: Callable[[], None]) -> None:
        pipe, left = self._process.stdin, memoryview(data)
        while left:
            if select.select([], [pipe], [], POLL_S)[1]:
                left = left[os.write(pipe.fileno(), left[:65_536]):]
            else:
                self._checked(check)

    def _receive(self, n: int, check: Callable[[], None]) -> bytes:
        pipe, parts, left = self._process.stdout, [], n
        while left:
            if not select.select([pipe], [], [], POLL_S)[0]:
                self._checked(check)
                continue
            part = os.read(pipe.fileno(), min(left, 1 << 20))
            if not part:
                raise EOFError("the worker's pipe closed")
            parts.append(part)
            left -= len(part)
        return b"".join(parts)

    def _checked(self, check: Callable[[], None]) -> None:
        try:
            check()
        except BaseException:
            self.kill()
            raise

    def kill(self) -> None:
        """End the process now, mid-work if it is working."""
        if self._process is not None:
            self._process.kill()
            self._process.wait(5)
            for pipe in (self._process.stdin, self._process.stdout):
                pipe.close()
        self._process = None

    def close(self) -> None:
        """End the process: asked to when idle, killed if it does not end within a second."""
        if self._process is None:
            return
        try:
            write_frame(self._process.stdin, None)
            self._process.wait(1)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.kill()

    def rss_bytes(self) -> int | None:
        """The process's resident memory now (Linux's /proc; None where it cannot be read)."""
        if self._process is None:
            return None
        try:
            for line in Path(f"/proc/{self._process.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        except (OSError, ValueError):
            return None
        return None

    def _start(self) -> None:
        if self.alive:
            return
        self.kill()
        root = str(Path(__file__).resolve().parents[2])  # where flamino_core is, installed or not
        env = {**os.environ, **self.env, **self.share.environment(),
               "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
        self._process = subprocess.Popen([sys.executable, "-m", self.module], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, bufsize=0, env=env, cwd=root)

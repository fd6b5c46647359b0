"""A server's scikit-learn fits, each run in a process of its own (``FitWorker``), so a fit stops
within ``POLL_S`` of being told to: a Cancel, a closed tab, a budget spent.

Why a process: scikit-learn's lbfgs runs inside scipy and Cython loops with no hook between its
iterations, so a fit in the server's thread could be stopped only between two fits: a 300-row,
51-class fit held the heavy-job slot for about 4 minutes per fit, and its closed tab stopped it
~50 s later (issue #53). Killing the worker's process stops it mid-iteration and gives its memory
back; a fit's inputs and result (arrays, a fitted estimator) travel pickled through its pipes.

Why one thread: on the 2-core server under load, scikit-learn's OpenMP loss loops and OpenBLAS
on two threads spun against the other work: the same LogisticRegressionCV (300 rows x 1,200
one-hot features, 51 classes) took 33 s on 2 threads and 5.7 s on 1 (the AMD EPYC at load 3,
2026-12-06). The worker holds both pools to one thread (``threadpoolctl``).

Why ``python -m`` and not ``multiprocessing``: a spawned child runs the parent's ``__main__``
first, and under ``streamlit run`` that is the app's script (Streamlit installs it as
``__main__`` while it runs): the child ran the whole app, and logged its traceback, before its
first fit. The worker is this module run as a program, importing only what a fit needs; it is
started once per ``FitWorker`` (a whole fit: importing scikit-learn costs a second or two).
"""

from __future__ import annotations

import os
import pickle
import select
import struct
import subprocess
import sys
from pathlib import Path
from typing import Callable, TypeVar

POLL_S = 0.2  # how often the caller's stop check runs while a fit works
_LENGTH = struct.Struct("<Q")  # a frame: its length, then the pickle; length 0 ends the worker
T = TypeVar("T")


def run_on_one_thread(fit: Callable[[], T]) -> T:
    """``fit()`` with every BLAS and OpenMP pool of this process held to one thread, as the worker
    holds its own (the module's docstring): the fits run in the caller's process (``flamino fit``,
    a notebook) are the same fits. ``flamino fit`` of the shared assay's fitness bins (308 rows x
    3,220 one-hot features, 21 LogisticRegressionCV fits) took 73.5 s on OpenBLAS's two threads
    and 17.8 s on one, the same predictions to the byte (AMD EPYC, 2 cores, load 4.7,
    2026-12-07): scipy's L-BFGS-B iterations are small vector work that two threads only spin on."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        return fit()


class WorkerLost(RuntimeError):
    """The worker's process ended without answering (killed from outside, out of memory)."""


def _write(stream, value) -> None:
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


def _read(stream):
    """The next frame's value; None for the end frame."""
    (n,) = _LENGTH.unpack(_read_exactly(stream, _LENGTH.size))
    return pickle.loads(_read_exactly(stream, n)) if n else None


def _serve() -> None:
    """The worker process: run each callable received on stdin, answer (ok, value or error) on stdout."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)  # every BLAS and OpenMP pool of this process (see the module's docstring)
    requests, answers = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # whatever a fit prints must not enter the frames
    while True:
        try:
            fit = _read(requests)
        except EOFError:
            return
        if fit is None:
            return
        try:
            answer = (True, fit())
        except Exception as err:  # noqa: BLE001 - the caller raises it in its own thread
            answer = (False, _picklable(err))
        _write(answers, answer)


def _picklable(err: Exception) -> Exception:
    try:
        pickle.loads(pickle.dumps(err))
        return err
    except Exception:  # noqa: BLE001 - an error that does not travel is said as text
        return RuntimeError(f"{type(err).__name__}: {err}")


class FitWorker:
    """One process running a caller's fits one at a time (``run``); a context manager that ends
    it. Not thread-safe: one job's thread uses it."""

    def __init__(self):
        self._process: subprocess.Popen | None = None

    def __enter__(self) -> FitWorker:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    def run(self, fit: Callable[[], T], check: Callable[[], None] = lambda: None) -> T:
        """``fit()`` in the worker's process; ``check()`` is called every ``POLL_S`` meanwhile
        (while the request is written, the fit runs and its answer is read: the server's thread
        never waits longer on the worker), and when it raises the process is killed (the fit
        stops mid-iteration) and the error goes on to the caller."""
        self._start()
        data = pickle.dumps(fit, protocol=pickle.HIGHEST_PROTOCOL)
        try:
            self._send(_LENGTH.pack(len(data)) + data, check)
            (n,) = _LENGTH.unpack(self._receive(_LENGTH.size, check))
            ok, value = pickle.loads(self._receive(n, check))
        except (OSError, EOFError, pickle.UnpicklingError) as err:
            self.kill()
            raise WorkerLost("the fit's process ended without a result (out of memory?)") from err
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
        """End the process now, mid-fit if it is fitting."""
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
            _write(self._process.stdin, None)
            self._process.wait(1)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.kill()

    def _start(self) -> None:
        if self._process is not None and self._process.poll() is None:
            return
        self.kill()
        root = str(Path(__file__).resolve().parents[2])  # where flamino_core is, installed or not
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
        self._process = subprocess.Popen([sys.executable, "-m", "flamino_core.predictors.worker"],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0, env=env, cwd=root)


if __name__ == "__main__":
    _serve()

"""A server's scikit-learn fits, each run in a process of its own (``FitWorker``), so a fit stops
within ``POLL_S`` of being told to: a Cancel, a closed tab, a budget spent.

Why a process: scikit-learn's lbfgs runs inside scipy and Cython loops with no hook between its
iterations, so a fit in the server's thread could be stopped only between two fits: a 300-row,
51-class fit held the heavy-job slot for about 4 minutes per fit, and its closed tab stopped it
~50 s later (issue #53). Killing the worker's process stops it mid-iteration and gives its memory
back; a fit's inputs and result (arrays, a fitted estimator) travel pickled through a pipe.

Why one thread: on the 2-core server under load, scikit-learn's OpenMP loss loops and OpenBLAS
on two threads spun against the other work: the same LogisticRegressionCV (300 rows x 1,200
one-hot features, 51 classes) took 33 s on 2 threads and 5.7 s on 1 (the AMD EPYC at load 3,
2026-12-06). The worker holds both pools to one thread (``threadpoolctl``).

The process is started with ``spawn`` (a fork of a server running JAX's threads is unsafe), once
per ``FitWorker`` (a whole fit: importing scikit-learn costs a second or two), and ended with it.
"""

from __future__ import annotations

import multiprocessing
from typing import Callable, TypeVar

POLL_S = 0.2  # how often the caller's stop check runs while a fit works
T = TypeVar("T")


class WorkerLost(RuntimeError):
    """The worker's process ended without answering (killed from outside, out of memory)."""


def _serve(conn) -> None:
    """The worker process: run each callable received, send back (ok, value or error); None ends it."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)  # every BLAS and OpenMP pool of this process (see the module's docstring)
    while True:
        try:
            fit = conn.recv()
        except EOFError:
            return
        if fit is None:
            return
        try:
            conn.send((True, fit()))
        except Exception as err:  # noqa: BLE001 - the caller raises it in its own thread
            conn.send((False, _picklable(err)))


def _picklable(err: Exception) -> Exception:
    import pickle

    try:
        pickle.loads(pickle.dumps(err))
        return err
    except Exception:  # noqa: BLE001 - an error that does not travel is said as text
        return RuntimeError(f"{type(err).__name__}: {err}")


class FitWorker:
    """One process running a caller's fits one at a time (``run``); a context manager that ends
    it. Not thread-safe: one job's thread uses it."""

    def __init__(self):
        self._process = None
        self._conn = None

    def __enter__(self) -> FitWorker:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    def run(self, fit: Callable[[], T], check: Callable[[], None] = lambda: None) -> T:
        """``fit()`` in the worker's process; ``check()`` is called every ``POLL_S`` meanwhile,
        and when it raises the process is killed (the fit stops mid-iteration) and the error
        goes on to the caller."""
        self._start()
        self._conn.send(fit)
        while not self._conn.poll(POLL_S):
            try:
                check()
            except BaseException:
                self.kill()
                raise
            if not self._process.is_alive():
                self.kill()
                raise WorkerLost("the fit's process ended without a result (out of memory?)")
        try:
            ok, value = self._conn.recv()
        except EOFError as err:
            self.kill()
            raise WorkerLost("the fit's process ended without a result (out of memory?)") from err
        if not ok:
            raise value
        return value

    def kill(self) -> None:
        """End the process now, mid-fit if it is fitting."""
        if self._process is not None:
            self._process.kill()
            self._process.join(5)
            self._conn.close()
        self._process = self._conn = None

    def close(self) -> None:
        """End the process: asked to when idle, killed if it does not end within a second."""
        if self._process is None:
            return
        try:
            self._conn.send(None)
            self._process.join(1)
        except (OSError, ValueError):
            pass
        self.kill()

    def _start(self) -> None:
        if self._process is not None and self._process.is_alive():
            return
        self.kill()
        context = multiprocessing.get_context("spawn")
        parent, child = context.Pipe()
        self._process = context.Process(target=_serve, args=(child,), name="flamino-fit", daemon=True)
        self._process.start()
        child.close()
        self._conn = parent

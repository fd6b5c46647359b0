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

from typing import Callable, TypeVar

# The process, its pipes and their frames are ``jobs/process_worker.py``'s (a fold's worker is one too).
from flamino_core.jobs.process_worker import POLL_S, ProcessWorker, WorkerLost, serve  # noqa: F401

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


def _serve() -> None:
    """The worker process: every BLAS and OpenMP pool held to one thread (see the module's
    docstring), then ``process_worker.serve``."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)
    serve()


class FitWorker(ProcessWorker):
    """One process running a caller's fits one at a time (``run``: the fit, killed mid-fit when
    its ``check`` raises); a context manager that ends it. Not thread-safe: one job's thread uses it."""

    def __init__(self):
        super().__init__("flamino_core.predictors.worker", what="fit")


if __name__ == "__main__":
    _serve()

"""A server's folds in a process of their own (``FoldRunner``, one per server process): the server
only plans, queues and draws; the fold's JAX programs, its model and its memory are the worker's.

Why (issue #67): a fold is one compiled call with no hook between its blocks. In the server's own
thread it could not be stopped (a closed tab's 400-residue fold ran its ~55 s to the end), it took
both cores from every other session (a second visitor's Input page drew in 60 s instead of 3 s at
load ~8), and each new padded length kept its compiled program in the server (RSS 562 MiB ->
2,023 MiB after 7 lengths). In a worker it is killed within ``POLL_S`` of a Cancel, a closed tab
or its time budget (``FoldRunner.fold``'s ``check``), its memory goes with the process, and:

* its share of the machine (``fold_share``): the worker runs at ``nice`` 10 and, on a machine of
  several cores, on all cores but the first (its CPU affinity, set before JAX loads, so XLA's
  thread pool is that size): the server's event loop and the other sessions keep a core and the
  scheduler's preference. ``FLAMINO_FOLD_NICE`` and ``FLAMINO_FOLD_CORES`` (how many cores) set them.
* its compiled programs are bounded: the worker is recycled (ended; the next fold starts a new
  one) after a fold when it has compiled ``FLAMINO_FOLD_WORKER_LENGTHS`` (3) padded lengths or its
  resident memory passed ``FLAMINO_FOLD_WORKER_MIB`` (1,024 MiB); the server's own memory does not
  grow with folds at all.
* an express lane (``express_runner``): folds of at most ``FLAMINO_FOLD_EXPRESS_RESIDUES`` (128)
  residues run in a second worker of their own, beside the long folds' worker, in their own queue
  (the app's ``heavy_jobs.express_queue``): a 60-residue fold never waits for a 400-residue one
  (issue #67: it waited the running fold's 156-270 s, then compiled its own length). Its padded
  lengths are at most two (64, 128), so it compiles each once and keeps them; its memory is
  bounded as the other's (docs/reliability.md says both figures). ``warm_express`` starts it and
  compiles those lengths when a page first offers a fold (``FLAMINO_FOLD_EXPRESS_WARM``), so the
  first short fold does not spend its worker's start and compilation (34-75 s at load) either.

What runs there is any picklable call returning ``(FoldedProtein, seconds of folding)`` (a fold
job: ``FoldRequest`` for ESMFold; another fold model brings its own request). The worker keeps the
models it loaded (``_MODELS``) while it lives. On an accelerator host the worker opens the device
itself: ``FLAMINO_FOLD_PLATFORM`` (``JAX_PLATFORMS`` of the worker) keeps it off a device the
server's own process holds.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from typing import Callable

from flamino_core import settings
from flamino_core.jobs.process_worker import POLL_S, ProcessWorker, Share, serve  # noqa: F401
from flamino_core.model.model_id import ModelId

MODULE = "flamino_core.structure.folding.fold_worker"
NICE = 10  # the worker's priority below the server's (hosted default)
MAX_LENGTHS = 3  # padded lengths a worker compiles before it is recycled
MAX_RSS_MIB = 1024  # resident memory past which a worker is recycled after its fold
EXPRESS_RESIDUES = 128  # folds this short run in the express worker (two padded lengths: 64, 128)
_MODELS: dict[tuple[ModelId, str], object] = {}  # in the worker: (identifier, stem precision) -> model


@dataclasses.dataclass(frozen=True)
class FoldRequest:
    """One ESMFold fold, run in the worker (``__call__``): the model by its identifier (loaded
    once per worker), the sequence, its passes and chunks. Returns (FoldedProtein, seconds of the
    fold itself, its model's loading left out)."""

    identifier: ModelId
    stem_precision: str
    sequence: str
    passes: int | None = None
    chunk_size: int | None = 64

    @property
    def shape_key(self) -> tuple:
        """What one compiled program serves: the model and the padded length."""
        from flamino_core.model.esmfold.folded import PAD_TO, padded_length

        return (self.identifier, self.stem_precision, padded_length(len(self.sequence), PAD_TO))

    def __call__(self):
        from flamino_core.structure.folding.prediction import fold
        from flamino_core.weights import load_fold_model

        key = (self.identifier, self.stem_precision)
        if key not in _MODELS:
            _MODELS.clear()  # one model at a time: a second one would double the worker's weights
            _MODELS[key] = load_fold_model(self.identifier, self.stem_precision)[0]
        started = time.perf_counter()
        folded = fold(_MODELS[key], self.sequence, passes=self.passes, chunk_size=self.chunk_size)
        return folded, time.perf_counter() - started


def _or(value: int | None, default: int) -> int:
    return default if value is None else value


def fold_share() -> Share:
    """The worker's share of the machine: ``nice`` 10 and every core but one (one core: that one)."""
    cores = os.cpu_count() or 1
    return Share(nice=_or(settings.FOLD_NICE.get(), NICE), cores=_or(settings.FOLD_CORES.get(), max(1, cores - 1)))


class FoldRunner:
    """The server's fold worker: one fold at a time (the heavy-job slot orders them), the worker
    started at the first fold, killed by ``check``, recycled past its bounds. Thread-safe."""

    def __init__(self, share: Share | None = None, max_lengths: int | None = None, max_rss_mib: int | None = None):
        self.share = share or fold_share()
        self.max_lengths = max_lengths or _or(settings.FOLD_WORKER_LENGTHS.get(), MAX_LENGTHS)
        self.max_rss = (max_rss_mib or _or(settings.FOLD_WORKER_MIB.get(), MAX_RSS_MIB)) << 20
        platform = settings.FOLD_PLATFORM.get()
        env = {"JAX_PLATFORMS": platform} if platform else {}
        self._worker = ProcessWorker(MODULE, self.share, env, what="fold")
        self._lock = threading.Lock()  # held for a whole fold: one at a time
        self._state = threading.Lock()  # held for a moment: the page asks ``compiled`` while a fold runs
        self._compiled: set[tuple] = set()  # shapes the live worker compiled
        self.recycled = 0  # workers ended for their bounds (tests, the benchmark)

    @property
    def pid(self) -> int | None:
        return self._worker.pid if self._worker.alive else None

    def compiled(self, shape_key: tuple) -> bool:
        """Whether the live worker compiled this shape (the estimate's compilation is then left out).
        Never waits for a running fold (a page asks it on every run)."""
        with self._state:
            return shape_key in self._compiled

    def fold(self, request: Callable, check: Callable[[], None] = lambda: None):
        """``request()`` in the worker; ``check`` polled every ``POLL_S`` (what it raises kills the
        worker mid-fold and goes on to the caller; it is polled too while another fold holds the
        worker, as with two heavy slots). Returns what the request returns."""
        while not self._lock.acquire(timeout=POLL_S):
            check()
        try:
            if not self._worker.alive:
                self._forget()
            try:
                value = self._worker.run(request, check)
            except BaseException:
                self._forget()  # the worker was killed (or lost): its programs with it
                raise
            shape = getattr(request, "shape_key", None)
            with self._state:
                if shape is not None:
                    self._compiled.add(shape)
                lengths = len(self._compiled)
            rss = self._worker.rss_bytes() or 0
            if lengths >= self.max_lengths or rss > self.max_rss:
                self._worker.close()
                self._forget()
                self.recycled += 1
            return value
        finally:
            self._lock.release()

    def _forget(self) -> None:
        with self._state:
            self._compiled.clear()

    def close(self) -> None:
        with self._lock:
            self._worker.close()
            self._forget()


_RUNNER: FoldRunner | None = None
_EXPRESS: FoldRunner | None = None
_RUNNER_LOCK = threading.Lock()


def fold_runner() -> FoldRunner:
    """The process-wide fold worker shared by every session."""
    global _RUNNER
    with _RUNNER_LOCK:
        if _RUNNER is None:
            _RUNNER = FoldRunner()
        return _RUNNER


def express_residues() -> int:
    """The longest fold the express lane takes (``FLAMINO_FOLD_EXPRESS_RESIDUES``; 0: no lane)."""
    return _or(settings.FOLD_EXPRESS_RESIDUES.get(), EXPRESS_RESIDUES)


def is_express(request) -> bool:
    """Whether ``request`` folds in the express lane: an ESMFold fold of at most ``express_residues``
    (a complex's fold, or any other request, keeps the long folds' worker)."""
    return isinstance(request, FoldRequest) and len(request.sequence) <= express_residues()


def express_runner() -> FoldRunner:
    """The process-wide express worker: the short folds' (``is_express``), one at a time, at the
    fold share. Its lengths never reach the recycle bound at the default 128 residues (64 and 128:
    two), so a short fold compiles at most once per server; its memory bound is the other's."""
    global _EXPRESS
    with _RUNNER_LOCK:
        if _EXPRESS is None:
            _EXPRESS = FoldRunner()
        return _EXPRESS


_WARMED: set[tuple] = set()  # (identifier, stem precision) whose express lengths were asked to warm


def warm_express(identifier: ModelId, stem_precision: str) -> threading.Thread | None:
    """Start the express worker and compile its padded lengths (64 and 128 at the default) for this
    model, in a thread of the server's, once per model and process; None when there is nothing to
    do (done before, no lane, ``FLAMINO_FOLD_EXPRESS_WARM=0``). A short fold asked meanwhile waits
    for the worker as it would for its own compilation. What fails here is left to the first fold."""
    from flamino_core.model.esmfold.folded import PAD_TO, padded_length

    key = (identifier, stem_precision)
    longest = express_residues()
    with _RUNNER_LOCK:
        if key in _WARMED or not longest or not settings.FOLD_EXPRESS_WARM.get():
            return None
        _WARMED.add(key)
    runner = express_runner()

    def warm() -> None:
        for length in range(PAD_TO, padded_length(longest, PAD_TO) + 1, PAD_TO):
            try:
                runner.fold(FoldRequest(identifier, stem_precision, "A" * length))
            except Exception:  # noqa: BLE001 - a visitor's fold says what went wrong, in words
                return

    thread = threading.Thread(target=warm, name="fold express warm-up", daemon=True)
    thread.start()
    return thread


def runner_for(request) -> FoldRunner:
    """The worker that folds ``request``: the express one for a short fold, else the long folds'."""
    return express_runner() if is_express(request) else fold_runner()


if __name__ == "__main__":
    serve()

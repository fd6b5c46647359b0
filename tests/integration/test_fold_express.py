"""Issue #67's first row by design: a short fold (at most ``FLAMINO_FOLD_EXPRESS_RESIDUES``, 128)
runs in the express lane, its own queue and its own worker, so it never waits for a long fold
running or queued (``fold_worker.runner_for``, ``FoldPlan``'s ``slot(express=True)``, the app's
``heavy_jobs.express_queue``). The workers here run quick stand-in requests (no JAX): the routing,
the slots and the kill are what is tested; a real fold in the worker is ``test_fold_worker.py``'s."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import threading
import time
from pathlib import Path

import pytest

from flamino_core.jobs import HeavyJobQueue, Job, MeteredEngine
from flamino_core.jobs.process_worker import Share
from flamino_core.model import FoldConfig
from flamino_core.model.model_id import ModelId
from flamino_core.store.passes import Cancelled
from flamino_core.structure.folding import fold_worker
from flamino_core.structure.folding.fold_plan import FoldPlan, fold_in_worker
from flamino_core.structure.folding.fold_worker import FoldRequest, FoldRunner

MODEL = ModelId.parse("random:esmfold-tiny")


def _request(length: int) -> FoldRequest:
    return FoldRequest(MODEL, "fp32", "M" * length)


@dataclasses.dataclass(frozen=True)
class QuickFold(FoldRequest):
    """A short FoldRequest that sleeps ``seconds`` in the worker instead of folding (no JAX): it
    answers (its pid, seconds) where a fold answers (fold, seconds), so the test sees which worker
    ran it."""

    seconds: float = 0.0

    def __call__(self):
        time.sleep(self.seconds)
        return os.getpid(), self.seconds


def test_short_folds_take_the_express_worker_long_ones_and_other_requests_the_long_folds(monkeypatch):
    monkeypatch.delenv("FLAMINO_FOLD_EXPRESS_RESIDUES", raising=False)
    monkeypatch.setattr(fold_worker, "_RUNNER", FoldRunner(Share()))
    monkeypatch.setattr(fold_worker, "_EXPRESS", FoldRunner(Share()))
    assert fold_worker.express_residues() == 128
    assert fold_worker.runner_for(_request(60)) is fold_worker.express_runner()
    assert fold_worker.runner_for(_request(128)) is fold_worker.express_runner()  # padded to 128: the 2nd length
    assert fold_worker.runner_for(_request(129)) is fold_worker.fold_runner()
    assert fold_worker.runner_for(_request(400)) is fold_worker.fold_runner()
    assert fold_worker.runner_for(functools.partial(len, "x")) is fold_worker.fold_runner()  # a complex's, any other
    assert fold_worker.express_runner() is not fold_worker.fold_runner()
    monkeypatch.setenv("FLAMINO_FOLD_EXPRESS_RESIDUES", "0")  # the operator turns the lane off
    assert fold_worker.runner_for(_request(60)) is fold_worker.fold_runner()


class _Refused(Exception):
    pass


class _RecordingEngine:
    """Records which slot a plan asks for, then refuses it (nothing is folded)."""

    def __init__(self):
        self.asked = []

    def slot(self, **lane):
        self.asked.append(lane)
        raise _Refused


class _Job:
    title = "ESMFold of test"

    def progress(self, done, total, work=None):
        pass

    def cancelled(self):
        return False


@pytest.mark.parametrize("length, lane", [(60, {"express": True}), (400, {}), (None, {})])
def test_a_short_fold_in_the_servers_worker_asks_the_express_slot(tmp_path, length, lane):
    """A fold of 60 residues for the server's worker asks ``slot(express=True)``; one of 400, one
    folded in this process (no request) and one with a runner of its own (tests, the CLI) ask the
    heavy slot, as before."""
    from flamino_core.store.result_store import ResultStore

    request = _request(length) if length else None
    plan = FoldPlan(lambda: None, ResultStore(tmp_path / "store"), "esmfold|test", "M" * (length or 60),
                    FoldConfig.tiny(), 1.0, "test model", request=request)
    engine = _RecordingEngine()
    with pytest.raises(_Refused):
        plan.run(_Job(), engine)
    assert engine.asked == [lane]
    if length == 60:
        engine.asked.clear()
        with pytest.raises(_Refused):
            dataclasses.replace(plan, runner=FoldRunner(Share())).run(_Job(), engine)
        assert engine.asked == [{}]


def test_the_metered_engine_gives_the_express_slot_or_else_the_heavy_one():
    taken = []

    def slot(name):
        @contextlib.contextmanager
        def held():
            taken.append(name)
            yield

        return held

    with MeteredEngine(None, slot=slot("heavy"), express_slot=slot("express")).slot(express=True):
        pass
    with MeteredEngine(None, slot=slot("heavy"), express_slot=slot("express")).slot():
        pass
    with MeteredEngine(None, slot=slot("heavy")).slot(express=True):  # no lane: the heavy slot serves both
        pass
    assert taken == ["express", "heavy", "heavy"]


def test_the_express_slot_is_free_while_the_heavy_queue_is_full(monkeypatch):
    """The server's two queues: five visitors' long folds hold the heavy one (1 running, 4
    waiting: full), and a sixth visitor's short fold still gets its express slot at once; in the
    heavy queue (the order alone) it would be next, but after the running fold."""
    from app_pages._ui.server import background, heavy_jobs

    heavy = HeavyJobQueue(workers=1, max_waiting=4, per_visitor=2)
    monkeypatch.setattr(heavy_jobs, "_QUEUE", heavy)
    monkeypatch.setattr(heavy_jobs, "_EXPRESS", HeavyJobQueue(workers=1, max_waiting=4, per_visitor=1))
    release, threads = threading.Event(), []

    def long_fold(name):
        with heavy.slot(timeout=None, visitor=name, work=270.0):
            release.wait(30)

    for index in range(5):
        threads.append(threading.Thread(target=long_fold, args=(f"visitor {index + 1}",)))
        threads[-1].start()
    try:
        deadline = time.monotonic() + 10
        while (heavy.running, heavy.waiting) != (1, 4) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert (heavy.running, heavy.waiting) == (1, 4)
        job = Job("ESMFold of the victim (60 residues)", "structure", visitor="victim")
        engine = background.metered(None, job)
        with engine.slot(express=True):  # once first: its imports (Streamlit's runtime) are no wait
            pass
        asked = time.monotonic()
        with engine.slot(express=True):
            assert time.monotonic() - asked < 0.5
            assert heavy_jobs.express_queue().running == 1 and heavy.running == 1
        # Its heavy slot instead (no lane, as before): next in line, but behind the running long fold.
        entered = threading.Event()

        def heavy_step():
            with engine.slot():
                entered.set()

        heavy_call = threading.Thread(target=heavy_step)
        heavy_call.start()
        time.sleep(0.5)
        assert not entered.is_set() and "next in line" in (job.note or "")
        release.set()
        heavy_call.join(30)
        assert entered.is_set()
    finally:
        release.set()
        for thread in threads:
            thread.join(30)


def test_a_short_fold_runs_in_its_worker_while_a_long_one_holds_the_other_and_a_cancel_kills_only_its_own(
        monkeypatch):
    """Real workers (stand-in requests): the long folds' worker busy for 20 s, a short fold through
    ``fold_in_worker`` (no runner given: the server's choice) is done in its own worker within
    seconds; cancelled, only the express worker is killed, within a second; the long fold goes on."""
    tests = str(Path(__file__).resolve().parent)  # the stand-in request's module, for the worker to unpickle
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [tests, os.environ.get("PYTHONPATH")])))
    long_runner, express = FoldRunner(Share()), FoldRunner(Share())
    monkeypatch.setattr(fold_worker, "_RUNNER", long_runner)
    monkeypatch.setattr(fold_worker, "_EXPRESS", express)
    stop_long = threading.Event()

    def long_check():
        if stop_long.is_set():
            raise Cancelled("the test is over")

    started = threading.Event()
    long_fold = threading.Thread(target=lambda: pytest.raises(Cancelled, long_runner.fold,
                                                              functools.partial(time.sleep, 20.0),
                                                              lambda: (started.set(), long_check())))
    long_fold.start()
    try:
        assert started.wait(20)
        clicked = time.monotonic()
        pid, _, warm = fold_in_worker(_Job(), QuickFold(MODEL, "fp32", "M" * 60), lambda: False, None)
        assert time.monotonic() - clicked < 10  # a worker's start (no JAX), not the long fold's 20 s
        assert pid == express.pid and pid != long_runner.pid and long_fold.is_alive() and warm is False
        asked = time.monotonic()
        with pytest.raises(Cancelled):
            fold_in_worker(_Job(), QuickFold(MODEL, "fp32", "M" * 60, seconds=30.0),
                           lambda: time.monotonic() - asked > 0.5, None)
        assert time.monotonic() - asked < 0.5 + 1.0 and express.pid is None
        assert long_runner.pid is not None and long_fold.is_alive()  # the long fold was not touched
    finally:
        stop_long.set()
        long_fold.join(10)
        long_runner.close()
        express.close()


class _FakeRunner:
    def __init__(self):
        self.folded = []

    def fold(self, request, check=lambda: None):
        self.folded.append((request.identifier, request.stem_precision, len(request.sequence)))


def test_a_fold_offer_warms_the_express_lengths_once_per_model(monkeypatch):
    """``warm_express`` (the Structure page calls it where it offers a fold in a worker) compiles
    each padded length of the lane once per model and server, in a thread: the first short fold
    then finds its program compiled. Off with ``FLAMINO_FOLD_EXPRESS_WARM=0`` or no lane."""
    runner = _FakeRunner()
    monkeypatch.setattr(fold_worker, "_EXPRESS", runner)
    monkeypatch.setattr(fold_worker, "_WARMED", set())
    monkeypatch.delenv("FLAMINO_FOLD_EXPRESS_RESIDUES", raising=False)
    monkeypatch.setenv("FLAMINO_FOLD_EXPRESS_WARM", "0")
    assert fold_worker.warm_express(MODEL, "fp32") is None and runner.folded == []
    monkeypatch.setenv("FLAMINO_FOLD_EXPRESS_WARM", "1")
    fold_worker.warm_express(MODEL, "fp32").join(10)
    assert runner.folded == [(MODEL, "fp32", 64), (MODEL, "fp32", 128)]
    assert fold_worker.warm_express(MODEL, "fp32") is None  # once
    monkeypatch.setenv("FLAMINO_FOLD_EXPRESS_RESIDUES", "100")  # 65-100 pad to 128: both lengths still
    fold_worker.warm_express(MODEL, "bf16").join(10)
    assert runner.folded[2:] == [(MODEL, "bf16", 64), (MODEL, "bf16", 128)]
    monkeypatch.setenv("FLAMINO_FOLD_EXPRESS_RESIDUES", "0")
    assert fold_worker.warm_express(ModelId.parse("random:esmfold-tiny:1"), "fp32") is None

"""Issue #67 rows 2-4: a server's fold runs in a process of its own (``fold_worker.FoldRunner``) at a
lower priority on fewer cores, killed mid-fold by Cancel, a closed tab or its time budget, and
recycled past its bounds so compiled programs never pile up; the fold it returns is the fold made
here. The untrained ``random:esmfold-tiny`` model, short sequences: seconds, most of them the
worker's start (importing JAX)."""

from __future__ import annotations

import functools
import os
import time

import numpy as np
import pytest

from flamino_core.jobs.process_worker import ProcessWorker, Share
from flamino_core.store.passes import Cancelled
from flamino_core.structure.folding import fold_worker
from flamino_core.structure.folding.fold_plan import FoldOverBudget, FoldPlan
from flamino_core.structure.folding.fold_worker import FoldRequest, FoldRunner
from flamino_core.model.model_id import ModelId

MODEL = ModelId.parse("random:esmfold-tiny")
SEQUENCE = "MKTAYIAKQRQISFVKSHFSRQ"  # 22 residues: padded to 64


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (not reaped yet) counts as ended
        return open(f"/proc/{pid}/stat").read().split()[2] != "Z"
    except OSError:
        return False


def test_a_worker_runs_at_its_share_lower_priority_and_fewer_cores():
    """The child's niceness is the server's plus the share's, its CPU set the last ``cores`` of the
    server's (on one core: that core): the server's first core stays with the server."""
    mine = sorted(os.sched_getaffinity(0))
    with ProcessWorker("flamino_core.structure.folding.fold_worker", Share(nice=7, cores=1)) as worker:
        nice = worker.run(functools.partial(os.nice, 0))
        cpus = worker.run(functools.partial(os.sched_getaffinity, 0))
    assert nice == os.nice(0) + 7
    assert cpus == {mine[-1]}


def test_the_default_share_leaves_the_server_a_core(monkeypatch):
    monkeypatch.delenv("FLAMINO_FOLD_CORES", raising=False)
    monkeypatch.delenv("FLAMINO_FOLD_NICE", raising=False)
    share = fold_worker.fold_share()
    assert share.nice == 10 and share.cores == max(1, (os.cpu_count() or 1) - 1)
    monkeypatch.setenv("FLAMINO_FOLD_CORES", "1")
    monkeypatch.setenv("FLAMINO_FOLD_NICE", "15")
    assert fold_worker.fold_share() == Share(nice=15, cores=1)


def test_a_fold_in_the_worker_is_the_fold_made_here_and_the_worker_is_recycled_past_its_lengths():
    """The same coordinates, pLDDT and PAE as ``fold_sequence`` in this process (same weights,
    same XLA program; the worker's thread count may reorder sums: 1e-4 A and 1e-5 in pLDDT cover
    float32 reordering over the trunk's few blocks), the length marked compiled in the live worker;
    a fold at a second padded length reaches ``max_lengths`` = 2: the worker ends (its programs
    with it) and nothing is marked compiled any more."""
    from flamino_core.engine.fold import fold_sequence
    from flamino_core.weights.esmfold import load_fold_model

    runner = FoldRunner(Share(), max_lengths=2)
    request = FoldRequest(MODEL, "fp32", SEQUENCE)
    try:
        folded, seconds = runner.fold(request)
        pid = runner.pid
        assert pid is not None and pid != os.getpid() and seconds > 0
        assert runner.compiled(request.shape_key)
        here = fold_sequence(load_fold_model(MODEL)[0], SEQUENCE)
        np.testing.assert_allclose(folded.atom37, here.atom37, atol=1e-4)
        np.testing.assert_allclose(folded.plddt, here.plddt, atol=1e-5)
        np.testing.assert_allclose(folded.pae, here.pae, atol=1e-4)
        longer = FoldRequest(MODEL, "fp32", SEQUENCE * 4)  # 88 residues: padded to 128
        runner.fold(longer)
        assert runner.recycled == 1 and runner.pid is None and not _alive(pid)
        assert not runner.compiled(request.shape_key)
    finally:
        runner.close()


def test_a_complex_plan_folds_in_the_worker_as_here_and_stores_it(tmp_path):
    """ESMFold2's plan given a ``ComplexRequest`` folds in the worker (another process), the same
    complex as ``fold_complex_exact`` here (same weights, seed and program; 1e-4 A and 1e-5 cover
    float32 sums reordered by the worker's thread count), and keeps it in the store, from where a
    second run reads it without the worker."""
    from flamino_core.store.result_store import ResultStore
    from flamino_core.structure.folding.complex_plan import (ComplexPlan, ComplexRequest, fold_complex_exact,
                                                             load_complex_model)

    chains, names = ("MKTAYIAKQR", "GSHMWLEV"), ("a", "b")
    runner = FoldRunner(Share())
    store = ResultStore(tmp_path / "store")

    class Job:
        title = "complex"

        @staticmethod
        def progress(done, total):
            pass

        @staticmethod
        def cancelled():
            return False

    class Engine:
        @staticmethod
        def slot():
            import contextlib

            return contextlib.nullcontext()

    try:
        plan = ComplexPlan(lambda: pytest.fail("the worker loads the model, not the page"), store,
                           "esmfold2|test", chains, names, "a_b", None, 1.0, "test", request=ComplexRequest(
                               ModelId.parse("random:esmfold2-tiny"), chains, names, "a_b"), runner=runner)
        folded = plan.run(Job, Engine)
        # Another process folded it: the worker is alive, or was recycled right after the fold for
        # its resident memory (ESMFold2's compiled programs put it past 1 GiB on a loaded machine:
        # the fresh clone of 2026-12-07 evening), which only a worker is.
        assert (runner.pid is not None and runner.pid != os.getpid()) or runner.recycled == 1
        here = fold_complex_exact(load_complex_model(ModelId.parse("random:esmfold2-tiny")), chains, names, "a_b")
        np.testing.assert_allclose(folded.positions, here.positions, atol=1e-4)
        np.testing.assert_allclose(folded.plddt, here.plddt, atol=1e-5)
        runner.close()
        assert plan.run(Job, Engine).ptm == pytest.approx(folded.ptm)  # read back: the worker is closed
    finally:
        runner.close()


def test_a_worker_past_its_memory_bound_is_recycled_after_its_fold():
    """Any fold job (here a call that is no fold: the runner runs what it is given) in a worker past
    ``max_rss_mib`` after it (any Python process is past 1 MiB) ends that worker."""
    runner = FoldRunner(Share(), max_lengths=10, max_rss_mib=1)
    try:
        assert runner.fold(functools.partial(len, "fold")) == 4
        assert runner.recycled == 1 and runner.pid is None
    finally:
        runner.close()


def test_a_cancelled_fold_kills_its_worker_within_a_second():
    """The stop check runs every ``POLL_S`` while the worker works: raising there kills the process
    (mid-start or mid-fold alike) and the error reaches the caller at once."""
    runner = FoldRunner(Share())
    started, seen = time.monotonic(), []

    def check():
        seen.append(runner._worker.pid)
        if time.monotonic() - started > 1.0:
            raise Cancelled("cancelled")

    with pytest.raises(Cancelled):
        runner.fold(FoldRequest(MODEL, "fp32", SEQUENCE * 18), check)  # 396 residues: tens of seconds here
    assert time.monotonic() - started < 1.0 + 1.0
    assert seen and seen[-1] is not None and not _alive(seen[-1]) and runner.pid is None


class _Job:
    title = "ESMFold of test"

    def progress(self, done, total, work=None):
        self.done = done

    def cancelled(self):
        return False


class _Engine:
    def slot(self):
        import contextlib

        return contextlib.nullcontext()


def test_a_fold_past_its_budget_is_stopped_in_words(tmp_path):
    """``FoldPlan`` with a request runs it in the runner; past ``budget`` seconds the worker is
    killed and the job fails saying why (not a busy server's Stopped: that would be retried)."""
    from flamino_core.model import FoldConfig
    from flamino_core.store.result_store import ResultStore

    runner = FoldRunner(Share())
    sequence = SEQUENCE * 18
    plan = FoldPlan(lambda: None, ResultStore(tmp_path / "store"), "esmfold|test", sequence, FoldConfig.tiny(), 1.0,
                    "test model", request=FoldRequest(MODEL, "fp32", sequence), runner=runner, budget=1.0)
    started = time.monotonic()
    with pytest.raises(FoldOverBudget, match="past the 1 s this server gives one"):
        plan.run(_Job(), _Engine())
    assert time.monotonic() - started < 2.5 and runner.pid is None


def test_asking_what_is_compiled_never_waits_for_a_running_fold():
    """The Structure page asks ``compiled`` on every run (its estimate): while another visitor's
    fold holds the worker for minutes, the answer comes at once."""
    import threading

    runner = FoldRunner(Share())
    started = threading.Event()

    def check():
        started.set()

    thread = threading.Thread(target=runner.fold, args=(functools.partial(time.sleep, 2.0), check))
    thread.start()
    try:
        assert started.wait(10)
        asked = time.monotonic()
        assert runner.compiled(("x", "fp32", 64)) is False
        assert time.monotonic() - asked < 0.5

        def cancelled():
            raise Cancelled("cancelled while another fold runs")

        with pytest.raises(Cancelled):  # a second fold (two heavy slots) waiting for the worker stops at once
            runner.fold(functools.partial(len, "x"), cancelled)
        assert time.monotonic() - asked < 1.0
    finally:
        thread.join(10)
        runner.close()

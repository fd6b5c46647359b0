"""An engine that holds a heavy-job slot for each call and times it into this machine's pass
rates (``Rates``), telling a job what its calls spent compiling (``Job.compiled``). Moved out of
``background.py``: the job's own bookkeeping and the timing of engine calls are two concerns.
"""

from __future__ import annotations

import contextlib
import time
from typing import Callable, ContextManager

from flamino_core.jobs import pass_cost
from flamino_core.jobs.rates import Rates


class MeteredEngine:
    """An engine whose every call (one chunk of masked positions, one group of records) holds a
    slot of the caller's queue for heavy jobs and is timed into ``Rates``.

    ``passes`` calls the engine chunk by chunk, so wrapping the engine bounds each chunk without
    the passes knowing about queues: other users' jobs run between two chunks of a long one.
    Everything else is the engine's own (``fingerprint``, ``config``...).

    Args:
      engine: an ``engine.Engine``.
      rates: where measured rates go (None: not measured).
      slot: a context manager factory held around each call (None: no queue). It may raise
        ``Stopped`` (or anything) to refuse the call. Public as ``slot()``: a job's steps that
        are not engine calls (a scikit-learn fit) take their turn in the same queue.
      express_slot: the factory of the express lane's slot (``slot(express=True)``: a short fold's,
        issue #67), apart from the heavy jobs'; None: the heavy slot serves both.

    Masked passes go through the result store by handing this engine to
    ``passes.masked_log_probs``, which calls ``compute_masked`` only for what is missing.
    """

    def __init__(self, engine, rates: Rates | None = None, slot: Callable[[], ContextManager] | None = None,
                 on_compile: Callable[[float], None] | None = None, on_compiling: Callable[[], None] | None = None,
                 express_slot: Callable[[], ContextManager] | None = None):
        self._engine, self._rates, self._slot = engine, rates, slot or contextlib.nullcontext
        self._express_slot = express_slot or self._slot
        self._on_compile = on_compile  # told the seconds a call spent compiling (``Job.compiled``)
        self._on_compiling = on_compiling  # told before a call that compiles new shapes (``Job.compiling``)

    def __getattr__(self, name):
        return getattr(self._engine, name)

    def slot(self, express: bool = False) -> ContextManager:
        """The caller's heavy-job slot for one step of the job that is not an engine call (a
        scikit-learn fit): it waits its turn as the engine's calls do, and may refuse the step as
        it refuses a call (``Stopped``; the app's: ``Cancelled`` once the job is cancelled or its
        tab closed). Not timed: the pass rates are the engine's. ``express``: the express lane's
        slot instead (a short fold in the express worker, ``fold_worker.is_express``)."""
        return self._express_slot() if express else self._slot()

    def compute_masked(self, sequence: str, positions=None, progress=None, **options):
        """``Engine.compute_masked``, timed in a slot; ``options``: its own (a structure's letters)."""
        positions = list(range(len(sequence))) if positions is None else list(positions)
        batches = self._planned(pass_cost.masked_batches, [(len(sequence), len(positions))], chunk=None)
        with self._slot():
            return self._timed("masked", batches,
                               lambda report: self._engine.compute_masked(sequence, positions, progress=report,
                                                                          **options), progress)

    def compute_joint_masked(self, sequence: str, position_sets, progress=None, **options):
        position_sets = list(position_sets)
        batches = self._planned(pass_cost.masked_batches, [(len(sequence), len(position_sets))], chunk=None)
        with self._slot():
            return self._timed("masked", batches,
                               lambda report: self._engine.compute_joint_masked(sequence, position_sets,
                                                                                  progress=report, **options), progress)

    def run(self, sequences, progress=None, **options):
        batches = self._planned(pass_cost.unmasked_batches, [len(s) for s in sequences], grouped=False)
        with self._slot():
            def unmasked(report):
                return self._engine.run(sequences, progress=report, **options)

            return self._timed("unmasked", batches, unmasked, progress)

    def _planned(self, plan, *args, **options) -> list[tuple[str, int]]:
        """The call's batches (``pass_cost``), planned only when rates are measured."""
        return [] if self._rates is None else plan(self._engine, *args, **options)

    def _timed(self, kind: str, batches: list[tuple[str, int]], call, progress):
        """Run ``call(report)``, recording the rate (``batches``: the call's plan, ``pass_cost``).
        A call that compiled a new shape spent seconds on that, once per process, against
        milliseconds per batch: the rate is timed on the call's batches after its first whose
        shape was compiled before them (``_clean``); a call with none says nothing of the rate
        (a first one-batch scan of a short record measured 5.4 s against 0.26 s after). What it
        spent beyond its work at the measured rate is the compilations' time
        (``_record_compilations``). The job hears of a compilation when the batch that paid it
        reports (``_compiled_in``), not at the call's end: the reports in between would count it
        as the batches' own time."""
        from flamino_core.engine.engine import TRACE_COUNTS  # the engine is loaded: it is what this wraps

        fresh, cached = pass_cost.new_shapes(self._engine, batches, self._rates) if self._rates else (0, 0)
        compiled_before = set(self._engine.compiled_shapes) if self._rates else set()
        if (fresh or cached) and self._on_compiling is not None:  # before it: a page need not wait for it
            self._on_compiling()
        finished: list[float] = []
        seen, told = set(compiled_before), [0.0]  # shapes met so far; compile seconds told the job so far

        def report(done: int, total: int) -> None:
            finished.append(time.monotonic())
            if total == len(batches) and 0 < done <= total:  # the engine reports batch by batch
                told[0] += self._compiled_in(kind, batches[done - 1], seen, finished, started)
            if progress is not None:
                progress(done, total)

        traces, started = sum(TRACE_COUNTS.values()), time.monotonic()
        result = call(report)
        spent = time.monotonic() - started
        compiled = fresh or cached or sum(TRACE_COUNTS.values()) != traces  # (jax.clear_caches: traced again)
        if self._rates is not None and batches:
            total = sum(t for _, t in batches)
            if fresh or cached:
                running = pass_cost.running_seconds(self._engine, kind, batches, self._rates)  # at the rate so far
                # What the compilation still takes, less what batches already told (told[0]).
                left_to_tell = self._compiling_seconds(kind, running, spent, fresh, cached) - told[0]
                if self._on_compile is not None and left_to_tell > 0:
                    self._on_compile(left_to_tell)
                self._record_compilations(kind, running, spent, fresh, cached, [key for key, _ in batches])
            # Recorded net of each batch's fixed cost (``pass_cost.record_call``), with the model's size,
            # full and narrow batches apart (``pass_cost.is_narrow``; a call of both, 32 + 1 rows,
            # records each class's batches as its own).
            size = pass_cost.token_layer_share(self._engine.config, kind)
            if len(batches) == len(finished) and len(finished) >= 2:  # (a group's two batches: the second)
                for narrow in (False, True):
                    work, counted, seconds = _clean(batches, finished, compiled_before,
                                                    lambda key, narrow=narrow: self._narrow(key) == narrow)
                    if counted:
                        pass_cost.record_call(self._rates, self.fingerprint, kind, work, counted, seconds,
                                              size=size, narrow=narrow)
            elif not compiled:  # not timed batch by batch: the call's class is its biggest batch's
                narrow = self._narrow(max(batches, key=lambda batch: batch[1])[0])
                if len(finished) >= 3:  # batches not reported one by one: all but the first
                    share = (len(finished) - 1) / len(finished)
                    pass_cost.record_call(self._rates, self.fingerprint, kind, total * share, len(batches) * share,
                                          finished[-1] - finished[0], size=size, narrow=narrow)
                else:
                    pass_cost.record_call(self._rates, self.fingerprint, kind, total, len(batches), spent,
                                          size=size, narrow=narrow)
        return result

    def _narrow(self, key: str) -> bool:
        return pass_cost.is_narrow(self._engine, key)

    def _compiled_in(self, kind: str, batch: tuple[str, float], seen: set[str], finished: list[float],
                     started: float) -> float:
        """The seconds the batch that just reported spent compiling, told to the job: its time beyond
        its work at the measured rate when its shape is new to the call and this process (0 else,
        or with no rate measured yet: the call's end tells it then)."""
        key, amount = batch
        new = key not in seen
        seen.add(key)
        if not new or self._on_compile is None or self._rates is None:
            return 0.0
        running = pass_cost.running_seconds(self._engine, kind, [batch], self._rates)
        if running is None:
            return 0.0
        took = finished[-1] - (finished[-2] if len(finished) > 1 else started)
        part = max(took - running, 0.0)
        self._on_compile(part)
        return part

    def _compiling_seconds(self, kind: str, running: float | None, spent: float, fresh: int, cached: int) -> float:
        """What a call that compiled spent on its compilations: its time beyond ``running`` (its
        work at the measured rate), or (no rate yet) what the cost model gives them, at most
        the call's time."""
        if running is not None:
            return max(spent - running, 0.0)
        return min(pass_cost.compilations_seconds(self._engine, kind, fresh, cached, self._rates), spent)

    def _record_compilations(self, kind: str, running: float | None, spent: float, fresh: int, cached: int,
                             keys) -> None:
        """The seconds per compilation this call measured: its time beyond its work at the rate
        measured so far (none measured: nothing to subtract, not recorded), shared by its new
        shapes when they were all new or all from the persistent cache; those shapes are then
        in the persistent cache for a later process."""
        architecture = pass_cost.architecture(self._engine)
        if running is not None and not (fresh and cached):
            compile_kind = pass_cost.compile_kind(kind, cached=not fresh)
            self._rates.record(architecture, compile_kind, fresh or cached, spent - running)
        if pass_cost.persistent_cache_on():
            self._rates.add_compiled(architecture, keys)


def _clean(batches: list[tuple[str, float]], finished: list[float], compiled_before: set[str],
           counts: Callable[[str], bool] = lambda key: True) -> tuple[float, int, float]:
    """(work, batches, seconds) of a call's batches that compiled nothing and whose shape ``counts``
    (one class of batch, ``pass_cost.is_narrow``): not the first (it also carries the
    call's setup), nor the first of a shape not compiled before the call. The last batch of a
    record's chunk has rows of its own (16, 16, 16, 4): counting its compilation in the rate made
    a set's pseudo-perplexity measure 1.4e-4 s per MFLOP where its passes took about 3e-5, and the
    DMS pll after it was predicted 92 s for 18.6 s (Chromium, 2026-12-05)."""
    seen, work, counted, seconds = set(compiled_before), 0.0, 0, 0.0
    for index, ((key, amount), end) in enumerate(zip(batches, finished)):
        if index and key in seen and counts(key):
            work, counted, seconds = work + amount, counted + 1, seconds + end - finished[index - 1]
        seen.add(key)
    return work, counted, seconds

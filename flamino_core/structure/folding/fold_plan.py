"""One ESMFold fold as a plan (``jobs/plan.py``'s protocol), as the Structure page runs it in the
background: one step that is not a model pass of an engine (``Needed.of_steps``), held in the
caller's heavy-job slot (``engine.slot()``: the metered engine's, with no engine behind it), read
back from the result store when it is there, and timed into this machine's fold rate
(``fold_time.record_fold_time``) when it was computed. A server's fold runs in its fold worker
(``fold_worker``, given a ``request``): killed mid-fold when the job stops (a Cancel, a closed
tab) or passes its ``budget``; without a request it runs here, to its end once started.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Callable

from flamino_core.jobs.plan import Needed
from flamino_core.model.esmfold.config import FoldConfig
from flamino_core.store.passes import Cancelled
from flamino_core.structure.folding.fold_time import record_fold_time
from flamino_core.structure.folding.prediction import predict_stored, store_fold, stored_fold


class FoldOverBudget(RuntimeError):
    """A fold in the worker ran past the seconds this server gives one (the message says so)."""


@dataclasses.dataclass(frozen=True)
class FoldPlan:
    """Fold ``sequence`` with the model ``load_model()`` returns (loaded in the job, not on the
    page: a model of 13 GiB takes its time), kept in ``store`` under ``key``. ``config``: the
    model's shape (for the rate); ``seconds``: the estimate said beside the button
    (``fold_time.fold_time_estimate``); ``how``: the model in words; ``visitor``: whose fold, one
    rate sample each; ``request``: the fold as the worker runs it (``fold_worker.FoldRequest``; None:
    in this process with ``load_model``); ``runner``: the worker (None: the server's,
    ``fold_worker.fold_runner``); ``budget``: seconds past which a fold in the worker is killed
    (None: never). The job's value: the ``FoldedProtein``."""

    load_model: Callable[[], object]
    store: object
    key: str
    sequence: str
    config: FoldConfig
    seconds: float | None
    how: str
    visitor: str = ""
    request: Callable | None = None
    runner: object | None = None
    budget: float | None = None
    unit = "structure"

    def needed(self) -> Needed:
        return Needed.of_steps(1, "fold", "folds", self.how, self.seconds)

    def run(self, job, engine, first_only: bool = False, stop: Callable[[], bool] | None = None):
        """The fold in one compiled call: its progress is 0, then 1 structure. ``first_only`` is
        not read (one step is its own first chunk); ``stop`` is polled every ``POLL_S`` while the
        worker folds (without a worker, a fold once started runs to its end)."""
        job.progress(0, 1)
        with engine.slot(**self._lane()):
            if self.request is None:
                folded = predict_stored(self.load_model(), self.store, self.key, self.sequence, folded_in=self._timed)
            else:
                folded = self._in_worker(job, stop or job.cancelled)
        job.progress(1, 1)
        return folded

    def _lane(self) -> dict:
        """The express lane's slot for a short fold in the server's worker (``fold_worker.is_express``:
        its own queue and worker, never behind a long fold); ``{}``: the heavy slot. An engine whose
        ``slot`` knows no lanes (the CLI's, tests') is asked as before."""
        from flamino_core.structure.folding.fold_worker import is_express

        return {"express": True} if self.runner is None and is_express(self.request) else {}

    def _in_worker(self, job, stop: Callable[[], bool]):
        found = stored_fold(self.store, self.key, self.sequence.upper())
        if found is not None:
            return found
        folded, seconds, warm = fold_in_worker(job, self.request, stop, self.budget, self.runner)
        store_fold(self.store, self.key, folded)
        self._timed(seconds, warm)
        return folded

    def _timed(self, seconds: float, warm: bool | None = None) -> None:
        record_fold_time(self.config, len(self.sequence), self.key, seconds, source=self.visitor, warm=warm)


def fold_in_worker(job, request, stop: Callable[[], bool], budget: float | None, runner=None):
    """(fold, seconds, warm) of ``request`` run in the fold worker (``runner``; None: the server's,
    its express worker for a short fold: ``fold_worker.runner_for``),
    ``stop`` polled while it folds (a ``Cancelled``), killed past ``budget`` seconds (a
    ``FoldOverBudget``); ``warm``: whether the worker had compiled its shape. ESMFold's and
    ESMFold2's plans both fold here."""
    from flamino_core.structure.folding.fold_worker import runner_for

    runner = runner or runner_for(request)
    started = time.monotonic()

    def check() -> None:
        if stop():
            raise Cancelled(f"{job.title}: cancelled")
        spent = time.monotonic() - started
        if budget is not None and spent > budget:
            raise FoldOverBudget(f"the fold stopped after {spent:,.0f} s, past the {budget:,.0f} s this "
                                 "server gives one: fold it on your own machine with `flamino fold`")

    warm = runner.compiled(request.shape_key) if hasattr(request, "shape_key") else None
    folded, seconds = runner.fold(request, check)
    return folded, seconds, warm

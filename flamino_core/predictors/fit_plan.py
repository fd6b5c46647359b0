"""A labelled table's fit as a plan (``jobs/plan.py``'s protocol), as the app's Predict page runs
it in the background: its model passes through the result store, a heavy-job slot per engine call,
then each scikit-learn fit in a slot of its own (``MeteredEngine.slot``), so other visitors' jobs
run between two fits, and in a process of its own (``worker.FitWorker``), so it stops within a
fraction of a second, mid-fit, when cancelled, when its tab closes, or past its time budget.

Its cost is not model passes only: ``needed()`` counts the scikit-learn fits (``jobs.plan.Steps``)
and says the seconds its caller estimated before it (``fit_seconds``: the fits at this machine's
rate, the worker's start, the passes still to run). Its fits' progress carries their work as that
estimate counts it, each fit's and each bootstrap's own (``cost.FitCost.schedule``), so the time
left is the work left at the pace measured per operation, not per fit.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import time
from typing import Callable

from flamino_core.progress import ProgressFn
from flamino_core.jobs.pass_cost import masked_seconds, unmasked_seconds
from flamino_core.jobs.plan import Needed
from flamino_core.jobs.rates import default_rates
from flamino_core.predictors.cost import FitCost, record_fit_times, seconds_here, worker_start_seconds
from flamino_core.predictors.features import FeatureError
from flamino_core.predictors.table import LabelError, LabelledTable
from flamino_core.predictors.table_fit import FITS, FitResult, fit_table
from flamino_core.predictors.worker import FitWorker
from flamino_core.store.passes import Cancelled

UNIT = "scikit-learn fits"


class OverBudget(Exception):
    """A running fit passed the time it is given (the message says so)."""


def fit_seconds(engine, table: LabelledTable, planned: FitCost, work: list, rates=None) -> tuple[float, float]:
    """(seconds of the scikit-learn fits at this machine's measured rate, else the default one, and
    the worker's start; seconds of the model passes still to run (``table_fit.planned_work``'s
    ``work``) at this machine's rates, else the cost model's first guess: a fit says its whole
    time before it runs, as the fits' own default rate does)."""
    rates = rates or default_rates()
    fits = seconds_here(planned, rates) + worker_start_seconds(rates)
    length = max(len(s) for s in table.sequences if s is not None)
    passes = 0.0
    for _, missing, _, unit in work:
        if missing:
            passes += (unmasked_seconds(engine, [length] * missing, rates, first_guess=True)
                       if unit.startswith("unmasked")
                       else masked_seconds(engine, [(len(table.wild_type or ""), missing)], rates, first_guess=True))
    return fits, passes


@dataclasses.dataclass(frozen=True)
class FitPlan:
    """``kind`` features fitted on ``table`` under ``folds`` (every other feature set beside it,
    ``table_fit.fit_table``). ``model``: the identifier kept in the predictor (a server's public
    name); ``cost``: its scikit-learn work (``table_fit.planned_fits``); ``seconds``: the whole
    estimate said beside its button (``fit_seconds``: fits and passes together); ``budget``:
    seconds of fitting past which it stops (None: never). The job's value: the ``FitResult``, or
    why it could not be fitted (a string)."""

    table: LabelledTable
    kind: str
    model: str | None
    folds: str
    layer: int | None
    cost: FitCost
    seconds: float
    budget: float | None = None
    unit = UNIT

    def needed(self) -> Needed:
        """Its scikit-learn fits, at the seconds said before it (the passes' own are in them)."""
        return Needed.of_steps(self.cost.fits, "scikit-learn fit", UNIT, self.cost.describe(), self.seconds)

    def run(self, job, engine, first_only: bool = False, stop: Callable[[], bool] | None = None) -> FitResult | str:
        """The fit, each scikit-learn fit in ``engine.slot()``. ``first_only`` is not read: a fit's
        time is always said (the default rate stands in before this machine measured its own),
        so no first chunk is asked to measure it."""
        fitting = _Fitting(job, stop or job.cancelled, engine.slot, self.budget)
        with FitWorker() as worker:
            in_worker = functools.partial(worker.run, check=fitting.check)  # stoppable mid-fit
            try:
                result = fit_table(self.table, self.kind, engine=engine, model=self.model, folds=self.folds,
                                   layer=self.layer, progress=fitting.stage, cancelled=fitting.stop,
                                   each_fit=fitting.each_fit, run_fit=in_worker, weighed=fitting.fits)
            except (FeatureError, LabelError, OverBudget) as err:
                return str(err)
        record_fit_times(default_rates(), self.cost, fitting.took, job.visitor or "")
        return result


class _Fitting:
    """A fit job's bookkeeping: each fit's slot and seconds (``took``: the first also started the
    worker), the budget of fitting time, the stop checked while a fit runs, each stage's progress."""

    def __init__(self, job, stop: Callable[[], bool], slot, budget: float | None):
        self.job, self.stop, self.slot, self.budget = job, stop, slot, budget
        self.spent, self.started, self.took = 0.0, None, []

    def over_budget(self) -> str | None:
        running = time.monotonic() - self.started if self.started is not None else 0.0
        if self.budget is not None and self.spent + running > self.budget:
            return (f"the fit stopped after {self.spent + running:,.0f} s of fitting, past the {self.budget:,.0f} s "
                    "this server gives one: use fewer rows, or run flamino fit locally")
        return None

    def check(self) -> None:
        """Polled while a fit runs in the worker: a stop or a spent budget ends it mid-fit."""
        if self.stop():
            raise Cancelled(f"{self.job.title}: cancelled")
        reason = self.over_budget()
        if reason:
            raise OverBudget(reason)

    @contextlib.contextmanager
    def each_fit(self):
        reason = self.over_budget()
        if reason:
            raise OverBudget(reason)
        with self.slot():
            self.started = time.monotonic()
            try:
                yield
            finally:
                self.took.append(time.monotonic() - self.started)
                self.spent += self.took[-1]
                self.started = None

    def stage(self, name: str) -> ProgressFn | None:
        """``fit_table``'s progress of stage ``name``: the model passes of a feature set (the fits
        report through ``fits``)."""
        return None if name == FITS else functools.partial(self._report, f"model passes ({name})")

    def fits(self, done: int, total: int, work: tuple[float, float]) -> None:
        """The fits' progress with their work (``table_fit.FitSteps``: each fit's and each bootstrap's
        operations, as the estimate counted them), so the time left is the work left at the pace
        measured per operation: the first fits of a set, on the most rows, cost several of its last."""
        self._report(UNIT, done, total, work)

    def _report(self, unit: str, done: int, total: int, work: tuple[float, float] | None = None) -> None:
        if self.job.unit != unit:  # a new stage: its own count and rate
            self.job.stage(unit, total)
        self.job.progress(done, total, work)

"""Issue 49 item 2: a labelled table's fit as a plan (``flamino_core/predictors/fit_plan.py``), run as the
app's job panel runs any plan, without the app: its cost is its scikit-learn fits with the seconds
said before it (``Needed.of_steps``), each fit takes the metered engine's slot (``MeteredEngine.slot``,
public for steps that are not engine calls), its result is ``fit_table``'s, and a stop or a spent
budget ends it in words or as a cancel.
"""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

from flamino_core.jobs.metered import MeteredEngine
from flamino_core.jobs.plan import Needed
from flamino_core.predictors.fit_plan import UNIT, FitPlan
from flamino_core.predictors.table import parse_labelled_table
from flamino_core.predictors.table_fit import feature_sets, fit_table, planned_fits
from flamino_core.store.passes import Cancelled

AMINO_ACIDS = "ACDEFGHIKLMNPQRSTVWY"


class Job:
    """What a plan's run reports to (``jobs.background.Job``'s calls a fit makes)."""

    title, visitor = "Fitting the predictor", None

    def __init__(self, cancelled: bool = False):
        self.unit, self.stages, self.last, self._cancelled = UNIT, [], None, cancelled

    def stage(self, unit, total):
        self.unit = unit
        self.stages.append(unit)

    def progress(self, done, total, work=None):
        self.last = (done, total)

    def cancelled(self):
        return self._cancelled


@pytest.fixture(scope="module")
def table():
    rng = np.random.default_rng(1)
    seqs = ["".join(rng.choice(list(AMINO_ACIDS), 8)) for _ in range(60)]
    data = "sequence,y\n" + "\n".join(f"{s},{s.count('A') + rng.normal():.4f}" for s in seqs)
    return parse_labelled_table(data.encode(), "y")


@pytest.fixture(scope="module")
def engine():
    from flamino_core.engine.engine import Engine
    from flamino_core.weights.loading import load_weights

    return Engine(load_weights("random:tiny"))


def plan_of(table, engine, **choices) -> FitPlan:
    cost = planned_fits(table, feature_sets(table, True), engine)
    return FitPlan(table, "onehot", None, "random", None, cost, seconds=12.5, **choices)


def test_steps_carry_their_own_names_and_the_seconds_their_plan_says():
    needed = Needed.of_steps(63, "scikit-learn fit", "scikit-learn fits", "5 folds", 12.5)
    assert needed.passes == 63 and needed.one == "scikit-learn fit" and needed.many == "scikit-learn fits"
    assert needed.describe() == "63 scikit-learn fits (5 folds)"
    assert needed.seconds(engine=None) == 12.5  # no cost model asked: no engine needed
    assert Needed.of_steps(1, "fold", "folds", "ESMFold", None).seconds(None) is None  # not known before it runs


def test_the_fit_plan_costs_its_fits(table, engine):
    plan = plan_of(table, engine)
    needed = plan.needed()
    assert plan.unit == UNIT and needed.passes == plan.cost.fits == 2 * 21  # one-hot and embeddings
    assert needed.describe() == f"42 scikit-learn fits ({plan.cost.describe()})" and needed.seconds(None) == 12.5


def test_each_fit_holds_the_metered_engines_slot_and_gives_fit_tables_result(table, engine):
    held = []

    @contextlib.contextmanager
    def slot():
        held.append(1)
        yield

    job = Job()
    result = plan_of(table, engine).run(job, MeteredEngine(engine, slot=slot))
    reference = fit_table(table, "onehot", engine=engine)
    np.testing.assert_array_equal(result.result.predictions, reference.result.predictions)
    assert result.comparison == reference.comparison
    # Each engine call, each of the 42 fits and each comparison row's bootstrap (run where the fits
    # run) took a slot; the progress went from the model's passes to the fits.
    assert len(held) > 42 + len(reference.comparison)
    assert job.stages == ["model passes (embedding (layer 2))", UNIT] and job.last == (42, 42)


def test_a_stop_cancels_and_a_spent_budget_is_said_in_words(table, engine):
    with pytest.raises(Cancelled):
        plan_of(table, engine).run(Job(), MeteredEngine(engine), stop=lambda: True)
    said = plan_of(table, engine, budget=0.0).run(Job(), MeteredEngine(engine))
    assert isinstance(said, str) and "past the 0 s this server gives one" in said

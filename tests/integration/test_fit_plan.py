"""Issue 49 item 2: a labelled table's fit as a plan (``flamino_core/predictors/fit_plan.py``), run as the
app's job panel runs any plan, without the app: its cost is its scikit-learn fits with the seconds
said before it (``Needed.of_steps``), each fit takes the metered engine's slot (``MeteredEngine.slot``,
public for steps that are not engine calls), its result is ``fit_table``'s, and a stop or a spent
budget ends it in words or as a cancel. Issue 50: the fits report their work, each fit's and each
bootstrap's own, so the time left is the work left at the pace measured per operation.
"""

from __future__ import annotations

import contextlib
import types

import numpy as np
import pytest

from flamino_core.jobs import background
from flamino_core.jobs.metered import MeteredEngine
from flamino_core.jobs.plan import Needed
from flamino_core.predictors import cost, evaluation, fitting
from flamino_core.predictors.fit_plan import UNIT, FitPlan, _Fitting
from flamino_core.predictors.table import parse_labelled_table
from flamino_core.predictors.table_fit import feature_sets, fit_table, planned_fits
from flamino_core.store.passes import Cancelled

AMINO_ACIDS = "ACDEFGHIKLMNPQRSTVWY"


class Job:
    """What a plan's run reports to (``jobs.background.Job``'s calls a fit makes)."""

    title, visitor = "Fitting the predictor", None

    def __init__(self, cancelled: bool = False):
        self.unit, self.stages, self.last, self._cancelled = UNIT, [], None, cancelled
        self.reports = []  # (unit, done, total, work) of every report

    def stage(self, unit, total):
        self.unit = unit
        self.stages.append(unit)

    def progress(self, done, total, work=None):
        self.last = (done, total)
        self.reports.append((self.unit, done, total, work))

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


def work_of(step) -> float:
    """What ``step`` (a fit or a bootstrap, as ``table_fit.FitSteps`` runs it) costs by the cost
    model, counted from the matrices it was actually given, not from the plan: rows, features and
    non-zero entries of its training matrix, or the rows of its comparison row's bootstrap."""
    if step.func is fitting.fit_estimator:
        X = step.args[2]
    elif step.func is fitting._fit_and_score:
        X = step.args[3]
    else:  # a comparison row's bootstrap: a feature set's, or the zero-shot score's
        assert step.func in (evaluation.regression_metrics, evaluation.zero_shot_metrics), step.func
        return cost.bootstrap_work("regression", len(step.args[0]))
    rows, features = X.shape
    nonzero = X.nnz // rows if hasattr(X, "nnz") else features
    return cost.fit_work("regression", rows, features, nonzero)


def is_fit(step) -> bool:
    return step.func in (fitting.fit_estimator, fitting._fit_and_score)


def counted(table, kind="onehot", **choices):
    """Each step's work, in the order ``fit_table`` ran them: (is a fit, work)."""
    steps = []

    def run_fit(step):
        steps.append((is_fit(step), work_of(step)))
        return step()

    fit_table(table, kind, run_fit=run_fit, **choices)
    return steps


@pytest.fixture(scope="module")
def variants():
    """60 single mutants of a 30-residue wild type: a variant table, whose comparison adds the
    model's zero-shot score (its bootstrap runs after every feature set's) and the augmented set."""
    rng = np.random.default_rng(3)
    wild = "".join(rng.choice(list(AMINO_ACIDS), 30))
    rows = []
    for _ in range(60):
        at = int(rng.integers(30))
        to = rng.choice([a for a in AMINO_ACIDS if a != wild[at]])
        rows.append(f"{wild[at]}{at + 1}{to},{rng.normal():.4f}")
    return parse_labelled_table(("mutant,y\n" + "\n".join(rows)).encode(), "y", wild_type=wild)


@pytest.mark.parametrize("which, steps_run", [("table", 42 + 2), ("variants", 63 + 3 + 1)])
def test_the_fits_report_each_fits_and_each_bootstraps_own_work(which, steps_run, engine, request):
    table = request.getfixturevalue(which)
    plan = plan_of(table, engine)
    job = Job()
    plan.run(job, MeteredEngine(engine))
    steps = counted(table, engine=engine)
    reports = [r for r in job.reports if r[0] == UNIT]
    # The stage said before its first fit, with none of its work done (#67: a minutes-long first fit
    # no longer shows the passes' time left), then one report per fit and per comparison row's
    # bootstrap, each with the work done so far: the sum of what the steps run until then cost,
    # counted from their own matrices.
    assert reports[0][1] == 0 and reports[0][3][0] == 0
    reports = reports[1:]
    assert len(reports) == len(steps) == steps_run
    done = np.cumsum([w for _, w in steps])
    np.testing.assert_allclose([r[3][0] for r in reports], done, rtol=1e-9)
    assert [r[1] for r in reports] == list(np.cumsum([fit for fit, _ in steps]))
    assert [r[3][1] for r in reports] == pytest.approx([plan.cost.work] * len(reports))  # the estimate's count
    assert plan.cost.work == pytest.approx(done[-1])


@pytest.fixture(scope="module")
def heavy_first():
    """800 rows of 50 residues: the one-hot folds (640 rows x 1,000 features) and the final model
    cost several times the learning curve's fits (64-320 rows), and the bootstrap comes between."""
    rng = np.random.default_rng(2)
    seqs = ["".join(rng.choice(list(AMINO_ACIDS), 50)) for _ in range(800)]
    data = "sequence,y\n" + "\n".join(f"{s},{s.count('A') + rng.normal():.4f}" for s in seqs)
    return parse_labelled_table(data.encode(), "y")


def test_the_time_left_at_a_tenth_of_the_fits_is_the_work_left_at_the_pace_measured(heavy_first, monkeypatch):
    # A clock that each step advances by its own work, counted from its matrices (``work_of``):
    # the time left said at each report should be the time the rest of the steps then take.
    clock = [0.0]
    monkeypatch.setattr(background, "time", types.SimpleNamespace(monotonic=lambda: clock[0]))
    job = background.Job("Fitting the predictor", UNIT)
    bridge = _Fitting(job, lambda: False, contextlib.nullcontext, None)  # as ``FitPlan.run`` reports
    said, works = [], []

    def run_fit(step):
        value = step()
        works.append((is_fit(step), work_of(step)))
        clock[0] += works[-1][1] * 1e-9
        return value

    def weighed(done, total, work):
        bridge.fits(done, total, work)
        said.append((done, total, clock[0], job.seconds_left()))

    fit_table(heavy_first, "onehot", run_fit=run_fit, weighed=weighed, progress=bridge.stage)
    fits = [w for fit, w in works if fit]
    assert min(fits[:6]) > 3 * max(fits[6:])  # the folds and the final model: several times the curve's fits
    end, total = clock[0], said[0][1]
    tenth = next(s for s in said if s[0] - 1 >= 0.1 * (total - 1))  # the job's baseline is its first fit
    assert tenth[3] == pytest.approx(end - tenth[2], rel=0.02)
    for _, _, at, left in said[1:]:
        assert left == pytest.approx(end - at, rel=0.02, abs=1e-3)
    # Per fit, the same pace said otherwise: the first fits' pace for the light ones left.
    first = said[0]
    per_fit = (tenth[2] - first[2]) / (tenth[0] - first[0]) * (total - tenth[0])
    assert not 1 / 1.2 < per_fit / (end - tenth[2]) < 1.2


def test_a_machine_that_timed_nothing_counts_the_fits_passes_at_the_default_rate(table, engine, tmp_path):
    """Issue 50: a machine's first fit (no pass timed here yet) said its scikit-learn fits alone,
    10.5 s, and took 23.2 s, 10.9 s of them its 1,083 model passes. Its passes are now counted at
    the cost model's first guess: the same seconds as a rate of ``DEFAULT_SECONDS_PER_UNIT``
    measured here would give (plus the default compilations), said as borrowed."""
    from flamino_core.jobs import pass_cost
    from flamino_core.jobs.rates import Rates
    from flamino_core.predictors.fit_plan import fit_seconds
    from flamino_core.predictors.table_fit import planned_work

    kinds = feature_sets(table, True)
    work = planned_work(table, kinds, engine)
    assert sum(missing for _, missing, _, _ in work) > 0  # the embedding's passes are still to run
    fits = planned_fits(table, kinds, engine)
    nothing_timed = Rates(tmp_path / "empty.json")
    length = max(len(s) for s in table.sequences)
    assert pass_cost.unmasked_seconds(engine, [length] * len(table.sequences), nothing_timed) is None
    fits_s, passes_s = fit_seconds(engine, table, fits, work, nothing_timed)
    assert fits_s > 0 and passes_s > 0
    timed = Rates(tmp_path / "timed.json")  # the default rate, as if measured for this model here
    timed.record(engine.fingerprint, "unmasked", 1.0, pass_cost.DEFAULT_SECONDS_PER_UNIT)
    timed.record(engine.fingerprint, "masked", 1.0, pass_cost.DEFAULT_SECONDS_PER_UNIT)
    assert fit_seconds(engine, table, fits, work, timed)[1] == pytest.approx(passes_s)
    guessed = pass_cost.unmasked_seconds(engine, [length] * len(table.sequences), nothing_timed, first_guess=True)
    assert guessed.borrowed  # a first guess: the job's own rate replaces it quickly (BORROWED_SHARE)

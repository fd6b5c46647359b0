"""What a fit costs before it runs, by what it does: scikit-learn fits of rows x features, for
every fold, the final model and the learning curve, for every feature set compared; and the
bounds a server holds a fit to (``FitLimits``).

Model passes are counted by ``features.missing_passes``; this module counts the rest, which was
not counted before: 6,000 copies of one mutant of a 600-residue protein needed one model pass and
were announced as such, then fitted for 49 minutes (12,000 one-hot columns, a 6,000 x 6,000
eigendecomposition per fit, 21 fits per feature set).

The operations of one fit, ``fit_work``, follow what the estimators do:

* ridge (``RidgeCV``, efficient leave-one-out; scikit-learn's ``gcv_mode="auto"``): with fewer
  rows than features, one eigendecomposition of the Gram matrix (n x n): n²p to form it and n³ to
  decompose it; with more rows, the SVD of X (n x p): 4np² + 8p³ (LAPACK's count); plus the
  leave-one-out values at each of ``ALPHAS``. These floating-point operations run far faster than
  the logistic fit's steps (BLAS level 3): ``RIDGE_GRAM``, ``RIDGE_EIGEN`` and ``RIDGE_OP`` turn
  them into operations at the default rate;
* logistic (``LogisticRegressionCV``, lbfgs): ``LOGISTIC_ITERATIONS`` iterations for the 5
  inner folds x 9 strengths and the refit together, each costing ``ITERATION_OVERHEAD`` (scipy's
  and scikit-learn's Python per iteration) + ``PER_COEFFICIENT`` per coefficient (L-BFGS-B's own
  updates over classes x features coefficients) + ``PER_ENTRY`` per non-zero entry and class
  (the gradient). Two classes fit one coefficient vector; more fit one per class (multinomial),
  so the classes multiply the coefficients and the gradient: 51 classes of 300 one-hot rows cost
  51 times 2 classes' coefficients (issue #53: estimated at 20 s with the classes left out, each
  of 42 fits took about 4 min);
* each fit also pays ``FIT_OVERHEAD`` operations of Python and copies.

The per-iteration costs were measured single-threaded (``worker.FitWorker`` runs a server's fits
on one BLAS/OpenMP thread) on the 2-core AMD EPYC, over one-hot fits of 100-900 rows x 400-3,000
features x 2-51 classes (benchmarks/fit_estimate.py; docs/reliability.md): 0.9 ms + 47 ns per
coefficient + 1.9 ns per entry and class, within 15% of each measured per-iteration time. The
iterations themselves depend on the data (210-690 over the synthetic tables, ~2,000 on the shared
assay's bins): ``LOGISTIC_ITERATIONS`` is their measured typical value, and a running fit is held
to its budget by the worker, not by the estimate.

``DEFAULT_SECONDS_PER_OP`` turns operations into seconds until this machine has measured its own
rate (``jobs.Rates.robust_seconds``, kind ``fit``, per task and size class: ``rate_key``): 1e-9 s,
the slow end of what this 2-core machine measured
under load (1.4e-10 to 1.2e-9 s per operation over ridge fits of 700-3,000 rows, sparse and
dense; see docs/reliability.md), so an estimate errs long.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from flamino_core.predictors import fitting
from flamino_core.predictors.evaluation import BOOTSTRAP
from flamino_core.predictors.features import COMPOSITION

DEFAULT_SECONDS_PER_OP = 1e-9
# A ridge fit's floating-point operations in operations at the default rate, measured single-threaded
# on the 2-core AMD EPYC, quiet (2026-12-06; RidgeCV after StandardScaler, dense and one-hot, 200-4,500
# rows x 320-12,000 features, benchmarks/ridge_rate.py): forming the Gram matrix runs at 0.024 ns per
# n²p, its eigendecomposition at 0.33 ns per n³ (it dominates past ~2,000 rows), the SVD at 0.13 ns
# per flop: each of its 13 shapes within 0.77-1.49x. One rate for all (1 ns) said the whole assay's
# 922-row fit at 44 s; it took 9.6 (issue 50 row 3).
RIDGE_GRAM = 0.024
RIDGE_EIGEN = 0.33
RIDGE_OP = 0.13
FIT_OVERHEAD = 2e7  # ~20 ms of a fit's fixed cost, in operations
# One lbfgs iteration, in operations (~ns at the default rate), measured single-threaded (see above).
ITERATION_OVERHEAD = 9e5
PER_COEFFICIENT = 47.0
PER_ENTRY = 1.9
LOGISTIC_ITERATIONS = 1000  # of one LogisticRegressionCV, every inner fit and the refit together
BOOTSTRAP_FIXED = 3e5  # one resample's AUC and MCC, in operations (see ``bootstrap_work``), measured
BOOTSTRAP_PER_ROW_CLASS = 150.0
RATE_MODEL = "scikit-learn"  # the rate's key in ``jobs.Rates`` (the same for every model)
RATE_KIND = "fit"
# The task's name in the rate's key: a ridge fit's operations were counted otherwise before
# RIDGE_OP, so the rates a server measured under the old key ("regression") are not read.
RATE_TASK = {"regression": "ridge"}
# A fit job's fixed cost: its worker, a Python process (``worker.FitWorker``), imports scikit-learn
# in its first fit. Measured on the 2-core AMD EPYC at load 4-5 (2026-12-06, a 200-row embedding fit
# of the NEIME assay, four jobs): the first of 67 fits took 2.4-4.7 s beyond the others' mean (median
# 2.8), the others 0.03-0.04 s each (median). Left out of the estimate, a 200-row fit was predicted at
# 3.3 s and took 10.3 s warm, 22.3 s in a fresh process (issue 50 row 3; tests/integration/test_fit_worker_start.py).
WORKER_START_S = 2.8
WORKER_KEY = "scikit-learn worker start"  # its measured seconds' key in ``jobs.Rates`` (kind RATE_KIND)


@dataclasses.dataclass(frozen=True)
class FitLimits:
    """Bounds on one fit (None: unbounded, as on the command line)."""

    max_rows: int | None = None  # labelled rows
    max_cells: int | None = None  # rows x features of the widest feature set
    max_seconds: float | None = None  # the estimate at this machine's rate; a running fit stops at twice it


@dataclasses.dataclass(frozen=True)
class SetCost:
    """One feature set's fits: ``rows`` labelled rows of ``features`` columns (``nonzero`` per row)."""

    label: str
    rows: int
    features: int
    nonzero: int
    fits: int
    work: float  # operations
    # The work of each fit, in the order ``table_fit.fit_table`` runs them (the folds, the final
    # model, then the learning curve fold by fold), and of the set's bootstrap intervals, run
    # after the final model: a fit's progress counts them (``FitCost.schedule``).
    each: tuple[float, ...] = ()
    side: float = 0.0


@dataclasses.dataclass(frozen=True)
class FitCost:
    """A whole fit's scikit-learn work (model passes are counted apart)."""

    sets: tuple[SetCost, ...]
    folds: int
    task: str = "regression"

    @property
    def fits(self) -> int:
        return sum(s.fits for s in self.sets)

    @property
    def work(self) -> float:
        return sum(s.work for s in self.sets)

    @property
    def cells(self) -> int:
        """Rows x features of the widest feature set."""
        return max((s.rows * s.features for s in self.sets), default=0)

    @property
    def rows(self) -> int:
        return max((s.rows for s in self.sets), default=0)

    def seconds(self, seconds_per_op: float | None = None) -> float:
        return self.work * (seconds_per_op or DEFAULT_SECONDS_PER_OP)

    def schedule(self) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """(each fit's work, each bootstrap's work), both in the order the fit runs them: a fit's
        progress counts them, so its pace is per operation, not per fit. A set's fits differ
        several-fold (the folds and the final model on 80-100% of the rows, the learning curve on
        10-50%; the assay's 3,220 one-hot features, then random:tiny's 32) and its bootstrap, run after its
        final model, can outweigh all its fits: counted per fit, the 922-row fit's first tenth
        (its heaviest) said 15.1 s for 9.4 s (issue 50)."""
        return (tuple(w for s in self.sets for w in s.each),
                tuple(s.side for s in self.sets))

    def describe(self) -> str:
        """``63 scikit-learn fits (5 folds + the final model + the learning curve, 3 feature sets) of up
        to 922 rows x 3,221 features``."""
        widest = max(self.sets, key=lambda s: s.rows * s.features)
        fitted = sum(1 for s in self.sets if s.fits)  # the majority class's row fits nothing
        return (f"{self.fits:,} scikit-learn fits ({self.folds} folds, the final model and the learning curve, for "
                f"{fitted} feature set{'s' if fitted != 1 else ''}) of up to {widest.rows:,} rows x "
                f"{widest.features:,} features")


def shape(kind: str, length: int | None, embedding_width: int | None) -> tuple[int, int]:
    """(features, non-zero per row) of feature set ``kind``."""
    if kind == "onehot":
        return 20 * (length or 0), length or 0
    if kind == "augmented":
        return 20 * (length or 0) + 1, 20 * (length or 0) + 1  # dense
    if kind == "embedding":
        return embedding_width or 0, embedding_width or 0
    if kind == COMPOSITION:
        return 20, 20
    raise ValueError(f"unknown feature set {kind!r}")


def fit_work(task: str, rows: int, features: int, nonzero: int, classes: int = 2) -> float:
    """Operations of one fit of ``rows`` x ``features`` (``classes``: of a classification; see the
    module's docstring)."""
    if rows <= 0:
        return 0.0
    if task == "regression":
        n, p = float(rows), float(features)
        if n <= p:  # the Gram matrix (n x n), formed and eigendecomposed
            decomposition = RIDGE_GRAM * n * n * p + RIDGE_EIGEN * n ** 3
        else:  # the SVD of X (n x p)
            decomposition = RIDGE_OP * (4 * n * p * p + 8 * p ** 3)
        work = decomposition + RIDGE_OP * len(fitting.ALPHAS) * n * min(n, p)
    else:
        vectors = 1 if classes <= 2 else classes  # binary: one coefficient vector; else one per class
        iteration = (ITERATION_OVERHEAD + PER_COEFFICIENT * vectors * (features + 1)
                     + PER_ENTRY * vectors * rows * max(nonzero, 1))
        work = LOGISTIC_ITERATIONS * iteration
    return work + FIT_OVERHEAD


def set_cost(label: str, task: str, labelled: int, folds: int, features: int, nonzero: int,
             curves: bool, classes: int = 2) -> SetCost:
    """A feature set's fits: one per fold on the other folds, the final one on every labelled row,
    and with ``curves`` one per fold at each learning-curve fraction; its bootstrap intervals."""
    train = labelled * (folds - 1) // max(folds, 1)
    sizes = [train] * folds + [labelled]
    if curves:  # fold by fold, each fraction (``fitting.learning_curve``'s order)
        sizes += [max(int(f * train), 1) for _ in range(folds) for f in fitting.TRAIN_FRACTIONS]
    each = tuple(fit_work(task, n, features, nonzero, classes) for n in sizes)
    side = bootstrap_work(task, labelled, classes)
    return SetCost(label, labelled, features, nonzero, len(sizes), sum(each) + side, each, side)


def bootstrap_work(task: str, labelled: int, classes: int = 2) -> float:
    """Operations of one comparison row's bootstrap intervals (``BOOTSTRAP`` resamples): a
    Spearman per resample, or an AUC (one-vs-rest: a ranking per class) and an MCC. The
    classification figures are ``evaluation``'s own AUC and MCC, CPU time per resample measured
    on the 2-core AMD EPYC (2026-12-06; 100-3,000 rows x 2-51 classes): 0.3 ms + 0.15 us per row and
    class, within 1.5x of each measurement above 300 rows x 5 classes and an over-estimate (up to
    2.4x) below. scikit-learn's functions, used before, cost 10-60 ms a resample in input checks:
    a minute a row for 51 classes of 300 rows, about a second now."""
    if task == "regression":
        return BOOTSTRAP * labelled * 1e3
    return BOOTSTRAP * (BOOTSTRAP_FIXED + BOOTSTRAP_PER_ROW_CLASS * labelled * max(classes, 2))


def fit_cost(task: str, labelled: int, folds: int, kinds: list[tuple[str, str]], length: int | None,
             embedding_width: int | None, curves: bool = True, classes: int = 2, zero_shot: bool = False) -> FitCost:
    """The scikit-learn work of a fit of ``labelled`` rows under ``folds`` folds, for each
    ``(kind, label)`` in ``kinds`` (``length``: the sequences' one length, for one-hot features;
    ``classes``: of a classification; ``zero_shot``: the comparison has the model's zero-shot row)."""
    sets = []
    for kind, label in kinds:
        features, nonzero = shape(kind, length, embedding_width)
        sets.append(set_cost(label, task, labelled, folds, features, nonzero, curves, classes))
    if zero_shot and (task == "regression" or classes == 2):  # its row's bootstrap (a Spearman, an AUC)
        # Left out until issue 50, the 922-row fit's last 0.9 s of 6.4 s of fits were said as none left.
        side = bootstrap_work(task, labelled, classes)
        sets.append(SetCost("zero-shot score", labelled, 0, 0, 0, side, (), side))
    if task == "classification":  # the majority class's row: no fit, its bootstrap intervals
        side = bootstrap_work(task, labelled, classes)
        sets.append(SetCost("majority class", labelled, 0, 0, 0, side, (), side))
    return FitCost(tuple(sets), folds, task)


def rate_key(cost: FitCost) -> tuple[str, str]:
    """(model, kind) of ``cost``'s measured rate in ``jobs.Rates``: per task (ridge and logistic
    have different cost models) and size class (the decade of its operations), so a fit of one
    size and kind measures the rate of its own kind of fit only (``Rates.robust_seconds``)."""
    decade = int(np.floor(np.log10(max(cost.work, 1.0))))
    return f"{RATE_MODEL} {RATE_TASK.get(cost.task, cost.task)} 1e{decade}", RATE_KIND


# How a fit's defaults follow this machine before any fit ran here (``machine_pace``). They were
# measured on the 2-core AMD EPYC on 2026-12-06, when its model passes ran at about
# ``pass_cost.DEFAULT_SECONDS_PER_UNIT`` (8e-6 s per unit). On 2026-12-07 the same kind of machine,
# quiet, ran random:tiny's passes at 2.3-2.8e-6 (0.29-0.35 of that) and a fresh process's first fits
# (922 and 200 rows, benchmarks/estimates.py) took 0.52-0.56 of their default estimates: the fits
# (single-threaded BLAS, a process importing scikit-learn) gain less than the passes (XLA on both
# cores), about as the square root (0.35^0.5 = 0.59). Two days are what this rests on; the pace is
# held within PACE_BOUNDS, and this machine's own fits replace it (``Rates.robust_seconds``).
PACE_EXPONENT = 0.5
PACE_BOUNDS = (0.5, 2.0)


def machine_pace(rates) -> float:
    """How much longer (over 1) or shorter (under 1) a fit takes here than the defaults say, read
    from the model passes this machine timed: the median full-batch masked rate over the models
    measured here (else the unmasked one) against ``pass_cost.DEFAULT_SECONDS_PER_UNIT``, to
    ``PACE_EXPONENT``, within ``PACE_BOUNDS``; 1 where no pass was timed."""
    from flamino_core.jobs.pass_cost import DEFAULT_SECONDS_PER_UNIT  # (jobs sits below predictors)

    measured = rates.typical("masked") or rates.typical("unmasked")
    if not measured:
        return 1.0
    low, high = PACE_BOUNDS
    return min(max((measured / DEFAULT_SECONDS_PER_UNIT) ** PACE_EXPONENT, low), high)


def seconds_here(cost: FitCost, rates) -> float:
    """``cost``'s seconds at this machine's robust measured rate (``DEFAULT_SECONDS_PER_OP`` at
    this machine's pace, ``machine_pace``, until three fits of its key were measured; never more
    than ``Rates``' clamp from it)."""
    return rates.robust_seconds(*rate_key(cost), cost.work, DEFAULT_SECONDS_PER_OP * machine_pace(rates))


def worker_start_seconds(rates) -> float:
    """Seconds a fit job's worker takes to start and import scikit-learn here: its robust measured
    value (``record_fit_times``), ``WORKER_START_S`` at this machine's pace until three jobs
    measured it."""
    return rates.robust_seconds(WORKER_KEY, RATE_KIND, 1.0, WORKER_START_S * machine_pace(rates))


def record_fit_times(rates, cost: FitCost, took: list[float], source: str = "") -> None:
    """A finished fit job's times into ``rates``: ``took``, each of its scikit-learn fits' seconds,
    the first of which also started the worker. The worker's start is the first fit's time beyond
    the others' mean; the rate per operation is timed on the others, ``cost``'s work in proportion
    (so the start is counted once, in ``worker_start_seconds``, not in every operation's rate)."""
    if len(took) < 2:
        if took:
            rates.record_sample(*rate_key(cost), cost.work, took[0], source=source)
        return
    rest = took[1:]
    rates.record_sample(*rate_key(cost), cost.work * len(rest) / len(took), sum(rest), source=source)
    rates.record_sample(WORKER_KEY, RATE_KIND, 1.0, max(took[0] - sum(rest) / len(rest), 1e-3), source=source)


def problem(cost: FitCost, limits: FitLimits, seconds: float) -> str | None:
    """Why a server with ``limits`` refuses this fit (estimated at ``seconds``), or None."""
    advice = "use fewer rows, or run flamino fit locally"
    if limits.max_rows is not None and cost.rows > limits.max_rows:
        return f"this fit learns from {cost.rows:,} rows; this server fits at most {limits.max_rows:,}: {advice}"
    if limits.max_cells is not None and cost.cells > limits.max_cells:
        widest = max(cost.sets, key=lambda s: s.rows * s.features)
        return (f"{widest.label} has {widest.rows:,} rows x {widest.features:,} features = {cost.cells:,} values; "
                f"this server fits at most {limits.max_cells:,}: {advice}")
    if limits.max_seconds is not None and seconds > limits.max_seconds:
        return (f"this fit needs {cost.describe()}, about {seconds / 60:.0f} minutes at this machine's rate; this "
                f"server runs fits of up to {limits.max_seconds / 60:.0f} minutes: {advice}")
    return None


def folds_count(fold_ids: np.ndarray) -> int:
    """The folds a fit evaluates (``table.fold_ids``: -1 is not evaluated)."""
    return len(set(fold_ids[fold_ids >= 0].tolist()))

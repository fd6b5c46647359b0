"""What a fit costs before it runs, by what it does: scikit-learn fits of rows x features, for
every fold, the final model and the learning curve, for every feature set compared; and the
bounds a server holds a fit to (``FitLimits``).

Model passes are counted by ``features.missing_passes``; this module counts the rest, which was
not counted before: 6,000 copies of one mutant of a 600-residue protein needed one model pass and
were announced as such, then fitted for 49 minutes (12,000 one-hot columns, a 6,000 x 6,000
eigendecomposition per fit, 21 fits per feature set).

The operations of one fit, ``fit_work``, follow what the estimators do:

* ridge (``RidgeCV``, efficient leave-one-out): one eigendecomposition of the Gram matrix
  (n x n) when there are fewer rows than features, else of the covariance (p x p): with
  m = min(n, p) and M = max(n, p), m²M to form it and m³ to decompose it;
* logistic (``LogisticRegressionCV``): 5 inner folds x 9 strengths + the refit, lbfgs at up to
  ``LOGISTIC_ITERATIONS`` passes over the non-zero entries;
* each fit also pays ``FIT_OVERHEAD`` operations of Python and copies.

``DEFAULT_SECONDS_PER_OP`` turns operations into seconds until this machine has measured its own
rate (``jobs.Rates``, kind ``fit``): 1e-9 s, the slow end of what this 2-core machine measured
under load (1.4e-10 to 1.2e-9 s per operation over ridge fits of 700-3,000 rows, sparse and
dense; see docs/reliability.md), so an estimate errs long.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from flamino_core.predict import fitting
from flamino_core.predict.evaluation import BOOTSTRAP
from flamino_core.predict.features import COMPOSITION

DEFAULT_SECONDS_PER_OP = 1e-9
FIT_OVERHEAD = 2e7  # ~20 ms of a fit's fixed cost, in operations
# lbfgs passes per inner fit, fitted to this machine: the shared assay's 922 one-hot rows (sparse,
# 161 non-zero of 3,220) took 2.8 s for one LogisticRegressionCV, i.e. ~400 at the default rate.
LOGISTIC_ITERATIONS = 400
RATE_MODEL = "scikit-learn"  # the rate's key in ``jobs.Rates`` (the same for every model)
RATE_KIND = "fit"


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


@dataclasses.dataclass(frozen=True)
class FitCost:
    """A whole fit's scikit-learn work (model passes are counted apart)."""

    sets: tuple[SetCost, ...]
    folds: int

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

    def describe(self) -> str:
        """``63 scikit-learn fits (5 folds + the final model + the learning curve, 3 feature sets) of up
        to 922 rows x 3,221 features``."""
        widest = max(self.sets, key=lambda s: s.rows * s.features)
        return (f"{self.fits:,} scikit-learn fits ({self.folds} folds, the final model and the learning curve, for "
                f"{len(self.sets)} feature set{'s' if len(self.sets) != 1 else ''}) of up to {widest.rows:,} rows x "
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


def fit_work(task: str, rows: int, features: int, nonzero: int) -> float:
    """Operations of one fit of ``rows`` x ``features`` (see the module's docstring)."""
    if rows <= 0:
        return 0.0
    if task == "regression":
        m, big = min(rows, features), max(rows, features)
        work = float(m) ** 2 * big + float(m) ** 3 + len(fitting.ALPHAS) * rows * m
    else:
        inner = fitting.INNER_FOLDS * len(fitting.CS) + 1
        work = float(inner) * LOGISTIC_ITERATIONS * rows * max(nonzero, 1)
    return work + FIT_OVERHEAD


def fits_per_set(folds: int, curves: bool) -> int:
    """A feature set's fits: one per fold, the final model, and each learning-curve size per fold."""
    return folds + 1 + (len(fitting.TRAIN_FRACTIONS) * folds if curves else 0)


def set_cost(label: str, task: str, labelled: int, folds: int, features: int, nonzero: int,
             curves: bool) -> SetCost:
    """A feature set's fits: one per fold on the other folds, the final one on every labelled row,
    and with ``curves`` one per fold at each learning-curve fraction; its bootstrap intervals."""
    train = labelled * (folds - 1) // max(folds, 1)
    sizes = [train] * folds + [labelled]
    if curves:
        sizes += [max(int(f * train), 1) for f in fitting.TRAIN_FRACTIONS for _ in range(folds)]
    work = sum(fit_work(task, n, features, nonzero) for n in sizes)
    work += BOOTSTRAP * labelled * 1e3 * (1 if task == "regression" else 2)  # resampled statistics
    return SetCost(label, labelled, features, nonzero, len(sizes), work)


def fit_cost(task: str, labelled: int, folds: int, kinds: list[tuple[str, str]], length: int | None,
             embedding_width: int | None, curves: bool = True) -> FitCost:
    """The scikit-learn work of a fit of ``labelled`` rows under ``folds`` folds, for each
    ``(kind, label)`` in ``kinds`` (``length``: the sequences' one length, for one-hot features)."""
    sets = []
    for kind, label in kinds:
        features, nonzero = shape(kind, length, embedding_width)
        sets.append(set_cost(label, task, labelled, folds, features, nonzero, curves))
    return FitCost(tuple(sets), folds)


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

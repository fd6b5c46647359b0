"""How sure a predictor is: a Gaussian process on the predictor's features, and its calibration.

Why a Gaussian process and not an ensemble of the current ridge fits:

* its interval is for a *measurement*: the noise of the assay is a term of the model
  (``WhiteKernel``, fitted), where an ensemble's spread says only how much the fit moves with
  the rows drawn and needs a noise term bolted on;
* it knows what it has not seen: a substitution no measured variant carries keeps its prior
  variance, while every ridge of an ensemble gives its (never trained) one-hot column the same
  weight, zero, so the ensemble agrees with itself exactly where it knows least, which is where
  an upper confidence bound should look;
* Thompson sampling needs whole functions drawn from the posterior; an ensemble has as many as
  it has members, a 96-well plate would reuse them;
* campaigns are small (tens to a few hundred measured variants): its n^3 costs nothing.

The kernel is linear, ``c (sigma_0^2 + x . x') + noise`` (scikit-learn's ``ConstantKernel *
DotProduct + WhiteKernel``, its scale and noise chosen by the marginal likelihood, ``normalize_y``):
a Bayesian ridge regression on the same features as ``flamino fit``'s ridge, so its mean is that
kind of model and the interval comes with it. Features are centred before the kernel (one-hot on
the wild type's own one-hot, which keeps them sparse: 2 non-zeros per substitution; embeddings on
the training rows' mean, scaled to unit variance as ``flamino fit`` scales them).

scikit-learn fits the kernel on the training rows restricted to the columns they use (a column
no training row touches adds nothing to their kernel); predictions and posterior draws are
computed here from its Cholesky factor, so a pool of 19 L candidates is never made dense. A test
checks them against ``GaussianProcessRegressor.predict``.

Calibration (``calibration``): 5-fold cross-validation over the measured variants (shuffled,
seed 0, as ``flamino fit``'s random folds), each held-out variant's 80% interval from a process
fitted on the other folds; the fraction of held-out measurements inside their interval should be
0.8. ``CALIBRATION_TOLERANCE`` (10 points) is the issue's bar.
"""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np

NOMINAL = 0.8  # the interval reported everywhere: 80%
Z_80 = 1.2815515655446004  # scipy.stats.norm.ppf(0.9): mean +- Z_80 sd holds 80% of a normal
CALIBRATION_TOLERANCE = 0.10
CALIBRATION_FOLDS = 5
MIN_LABELS = 3  # fewer measured values than this: no process is fitted (nothing to learn a scale from)
# One run of the optimizer from (c 1, noise 0.5 of the normalised variance): restarts from random
# points found the same optimum on the shared assay (24-400 measured) at three times the cost.
RESTARTS = 0
# The kernel's constant term, fixed: the values are centred (``normalize_y``), and when it was
# fitted the marginal likelihood drove it to its lower bound on the shared assay.
SIGMA_0 = 0.1
_CHUNK = 2048  # candidates predicted at once: (chunk, n) kernel blocks


class DesignError(ValueError):
    """A campaign, round or choice that cannot be used (the message says why and what to do)."""


def centred(X, reference=None):
    """``X`` minus ``reference`` (a (1, p) row: the wild type's features), sparse stays sparse;
    None: ``X`` as it is. One-hot rows of substitutions then hold -1 at the wild-type letter and
    +1 at the new one, nothing elsewhere."""
    if reference is None:
        return X
    if hasattr(X, "tocsr"):
        import scipy.sparse

        ones = scipy.sparse.csr_matrix(np.ones((X.shape[0], 1)))
        out = (X.tocsr() - ones @ scipy.sparse.csr_matrix(reference)).tocsr()
        out.eliminate_zeros()
        return out
    return np.asarray(X, np.float64) - np.asarray(reference, np.float64).reshape(1, -1)


@dataclasses.dataclass
class Predictive:
    """The posterior at some rows: ``mean``; ``sd_latent`` (the function's uncertainty: what an
    upper confidence bound adds) and ``sd`` (a new measurement's: the latent one and the fitted
    assay noise); the 80% interval of a measurement is ``low``..``high``."""

    mean: np.ndarray
    sd_latent: np.ndarray
    sd: np.ndarray

    @property
    def low(self) -> np.ndarray:
        return self.mean - Z_80 * self.sd

    @property
    def high(self) -> np.ndarray:
        return self.mean + Z_80 * self.sd


class LinearGP:
    """A Gaussian process with a linear kernel, fitted by scikit-learn, predicting any rows.

    Args:
      seed: the optimizer's restarts (``RESTARTS``) would draw their starting points with it.
    """

    def __init__(self, seed: int = 0):
        self.seed = int(seed)

    def fit(self, X, y) -> "LinearGP":
        """Fit on features ``X`` (n, p), dense or sparse, already centred, and values ``y`` (n,)."""
        from sklearn.gaussian_process import GaussianProcessRegressor
        from sklearn.gaussian_process.kernels import ConstantKernel, DotProduct, WhiteKernel

        y = np.asarray(y, np.float64)
        if len(y) < MIN_LABELS:
            raise DesignError(f"{len(y)} measured value(s): a model of the measurements needs at least {MIN_LABELS}")
        self.X = X.tocsr() if hasattr(X, "tocsr") else np.asarray(X, np.float64)
        used = (self.X.getnnz(axis=0) > 0) if hasattr(self.X, "tocsr") else np.any(self.X != 0, axis=0)
        self.columns = np.flatnonzero(used)
        self.X_used = _dense(self.X[:, self.columns])  # (n, used columns)
        kernel = (ConstantKernel(1.0, (1e-3, 1e3)) * DotProduct(sigma_0=SIGMA_0, sigma_0_bounds="fixed")
                  + WhiteKernel(0.5, (1e-4, 1e1)))
        self.gpr = GaussianProcessRegressor(kernel, normalize_y=True, n_restarts_optimizer=RESTARTS,
                                            random_state=self.seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a bound reached is a fitted value, not an error
            self.gpr.fit(self.X_used, y)
        fitted = self.gpr.kernel_
        self.scale = float(fitted.k1.k1.constant_value)  # c
        self.bias = float(fitted.k1.k2.sigma_0) ** 2  # sigma_0^2
        self.noise = float(fitted.k2.noise_level)  # in units of the normalised values
        self.y_mean, self.y_sd = float(self.gpr._y_train_mean), float(self.gpr._y_train_std)
        return self

    def describe(self) -> dict:
        """The fitted kernel's numbers, in the measured values' units (for the round's record)."""
        return {"kernel": "c (sigma_0^2 + x.x') + noise", "c": self.scale * self.y_sd ** 2,
                "sigma_0": self.bias ** 0.5, "noise_sd": (self.noise ** 0.5) * self.y_sd,
                "log_marginal_likelihood": float(self.gpr.log_marginal_likelihood_value_)}

    def _cross(self, X) -> np.ndarray:
        """(m, n) the kernel between rows ``X`` and the training rows (no noise term)."""
        part = X[:, self.columns]
        return self.scale * (self.bias + np.asarray(part @ self.X_used.T))

    def _prior_variance(self, X) -> np.ndarray:
        squares = np.asarray(X.multiply(X).sum(axis=1)).ravel() if hasattr(X, "tocsr") else np.sum(X * X, axis=1)
        return self.scale * (self.bias + squares)

    def predict(self, X) -> Predictive:
        """The posterior at rows ``X`` (centred as the training rows were), in chunks."""
        from scipy.linalg import solve_triangular

        X = X.tocsr() if hasattr(X, "tocsr") else np.asarray(X, np.float64)
        means, latent = [], []
        for start in range(0, X.shape[0], _CHUNK):
            part = X[start:start + _CHUNK]
            cross = self._cross(part)  # (m, n)
            v = solve_triangular(self.gpr.L_, cross.T, lower=True)  # (n, m)
            means.append(cross @ self.gpr.alpha_)
            latent.append(np.maximum(self._prior_variance(part) - np.sum(v * v, axis=0), 0.0))
        mean = np.concatenate(means).ravel() if means else np.zeros(0)
        var = np.concatenate(latent) if latent else np.zeros(0)
        return Predictive(mean * self.y_sd + self.y_mean, np.sqrt(var) * self.y_sd,
                          np.sqrt(var + self.noise) * self.y_sd)

    def sample(self, X, draws: int, rng: np.random.Generator) -> np.ndarray:
        """(draws, m) functions drawn from the posterior at rows ``X`` (latent, no noise).

        Matheron's rule (Wilson et al. 2020, "Efficiently sampling functions from Gaussian
        process posteriors"): draw the function from the prior over every column, as the linear
        kernel makes it (``sqrt(c) (sigma_0 u0 + x . u)``, u standard normal), then move it by
        the posterior's correction at the training rows. Exact, and O(m n) per draw where the
        joint covariance of m candidates would be O(m^2) memory and O(m^3) work.
        """
        from scipy.linalg import cho_solve

        X = X.tocsr() if hasattr(X, "tocsr") else np.asarray(X, np.float64)
        root = self.scale ** 0.5
        u = rng.standard_normal((self.X.shape[1], draws))  # (p, draws)
        u0 = rng.standard_normal(draws) * self.bias ** 0.5
        noise = rng.standard_normal((self.X.shape[0], draws)) * self.noise ** 0.5
        prior_train = root * (u0 + np.asarray(self.X @ u))  # (n, draws)
        y = self.gpr.y_train_.reshape(-1, 1)  # normalised, as the factor was
        weights = cho_solve((self.gpr.L_, True), y - prior_train - noise)  # (n, draws)
        out = []
        for start in range(0, X.shape[0], _CHUNK):
            part = X[start:start + _CHUNK]
            out.append(root * (u0 + np.asarray(part @ u)) + self._cross(part) @ weights)
        samples = np.concatenate(out, axis=0).T if out else np.zeros((draws, 0))
        return samples * self.y_sd + self.y_mean


def _dense(X) -> np.ndarray:
    return X.toarray() if hasattr(X, "toarray") else np.asarray(X, np.float64)


def calibration(X, y, seed: int = 0, folds: int = CALIBRATION_FOLDS) -> dict:
    """How often held-out measurements fall in their 80% interval.

    Args:
      X: (n, p) centred features of the measured variants; y: (n,) their values.
      seed: shuffles the folds (``KFold(folds, shuffle=True, random_state=seed)``) and fits.

    Returns:
      ``{"nominal": 0.8, "coverage", "n", "folds", "mean_width", "within"}``: ``within`` says
      whether the coverage is within ``CALIBRATION_TOLERANCE`` of nominal; ``coverage`` None
      when there are too few measurements to hold any out (fewer than 2 per fold).
    """
    from sklearn.model_selection import KFold

    y = np.asarray(y, np.float64)
    n = len(y)
    result = {"nominal": NOMINAL, "coverage": None, "n": int(n), "folds": folds, "mean_width": None, "within": None}
    if n < 2 * folds or n - n // folds < MIN_LABELS:
        return result
    X = X.tocsr() if hasattr(X, "tocsr") else np.asarray(X, np.float64)
    inside = np.zeros(n, dtype=bool)
    width = np.zeros(n)
    for train, test in KFold(folds, shuffle=True, random_state=seed).split(np.arange(n)):
        post = LinearGP(seed).fit(X[train], y[train]).predict(X[test])
        inside[test] = (y[test] >= post.low) & (y[test] <= post.high)
        width[test] = post.high - post.low
    coverage = float(inside.mean())
    return {**result, "coverage": coverage, "mean_width": float(width.mean()),
            "within": bool(abs(coverage - NOMINAL) <= CALIBRATION_TOLERANCE)}

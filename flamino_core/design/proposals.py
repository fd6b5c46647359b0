"""One round's proposals: from what was measured to the next plate, with the reason for each.

``propose`` builds the pool (``candidates``), describes every measured and candidate variant by
the round's features, fits the Gaussian process (``gaussian_process``) on the measured values,
checks its intervals on held-out folds, and picks the batch by the acquisition under the
diversity rules (``acquisition``). Everything random draws from one generator seeded with
(campaign seed, round number): the same folder and settings give the same proposals.

Features, built by the functions ``flamino fit`` builds them with (``predictors.features``):

* ``onehot`` (default): the residues, centred on the wild type's; no model: the only features
  whose numbers mean anything on a machine without pretrained weights;
* ``embedding``: the model's mean embedding (last layer), standardised on the measured rows;
* ``augmented``: one-hot, and the model's **zero-shot score as the prior mean**: the values are
  first regressed on the score (least squares, a + b x score, on the measured rows), the process
  learns what the score misses. With few measurements the prior carries the prediction, with
  many the one-hot residual takes over (Hsu et al. 2022 use the score the same way, as a feature
  ridge barely shrinks).

With no measurement yet (round 1), a model ranks the pool by its zero-shot score alone
(``zero-shot``); without a model the first plate is a random choice.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from flamino_core.design.acquisition import (
    ACQUISITIONS, UCB_BETA, ZERO_SHOT, Choice, Diversity, reason, select, values_for,
)
from flamino_core.design.candidates import COMBINE_TOP, DEFAULT_MAX_MUTATIONS, Measured, Pool, build_pool
from flamino_core.design.gaussian_process import MIN_LABELS, DesignError, LinearGP, calibration, centred
from flamino_core.numbering import Numbering
from flamino_core.options import DEFAULT_VARIANT_STRATEGY, PREDICT_FEATURES
from flamino_core.predictors import features
from flamino_core.predictors.suggest import Constraints, SuggestError, parse_amino_acids, parse_positions

DESIGN_FEATURES = PREDICT_FEATURES  # the feature sets of ``flamino fit``, built by the same functions
DEFAULT_FEATURES = "onehot"
DEFAULT_ACQUISITION = "ucb"  # docs/predict.md "Design rounds": the benchmark it was chosen by
DEFAULT_BATCH = 24
LITTLE_SIGNAL = 0.2  # a signal fraction below this is said in the round's notes
COLUMNS = ("round", "rank", "mutant", "n_mutations", "kind", "acquisition", "prediction", "sd", "low", "high",
           "additive", "zero_shot", "parents", "why")


@dataclasses.dataclass(frozen=True)
class Settings:
    """How a round is proposed; kept in the campaign with each round's proposals."""

    batch: int = DEFAULT_BATCH
    acquisition: str = DEFAULT_ACQUISITION
    features: str = DEFAULT_FEATURES
    model: str | None = None
    zero_shot: str = DEFAULT_VARIANT_STRATEGY
    keep: str = ""  # positions in the campaign's numbering: 1-20,45
    explore: str = ""
    avoid: str = ""  # amino acids never introduced: C,P
    max_mutations: int = DEFAULT_MAX_MUTATIONS
    per_position: int | None = 1
    penalty: float = 0.5
    beta: float = UCB_BETA
    combine_top: int = COMBINE_TOP

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> "Settings":
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{key: value for key, value in data.items() if key in known})

    def check(self) -> None:
        """A ``DesignError`` naming the first setting that cannot be used."""
        if self.acquisition not in ACQUISITIONS:
            raise DesignError(f"unknown acquisition {self.acquisition!r}: choose one of {', '.join(ACQUISITIONS)}")
        if self.features not in DESIGN_FEATURES:
            raise DesignError(f"unknown features {self.features!r}: choose one of {', '.join(DESIGN_FEATURES)}")
        if self.batch < 1 or self.max_mutations < 1:
            raise DesignError("the batch and the mutations per variant must be at least 1")
        if self.per_position is not None and self.per_position < 1:
            raise DesignError("proposals per position must be at least 1 (or unlimited)")

    def constraints(self, wild_type: str, numbering: Numbering) -> Constraints:
        try:
            keep = parse_positions(self.keep, len(wild_type), numbering)
            explore = parse_positions(self.explore, len(wild_type), numbering) if self.explore else None
            return Constraints(keep=keep, explore=explore, avoid=parse_amino_acids(self.avoid))
        except SuggestError as err:
            raise DesignError(str(err)) from None


@dataclasses.dataclass
class Proposals:
    """A round's plate (``table``: ``COLUMNS``, docs/predict.md) and how it was made (``info``)."""

    table: pd.DataFrame
    info: dict


@dataclasses.dataclass
class Posterior:
    """The process's view of the pool: mean, sds and interval, and a way to draw functions."""

    gp: LinearGP
    X_pool: object
    mean: np.ndarray
    sd_latent: np.ndarray
    sd: np.ndarray
    low: np.ndarray
    high: np.ndarray
    offset: np.ndarray  # the prior mean at each candidate (augmented), zeros otherwise

    def draws(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return self.gp.sample(self.X_pool, n, rng) + self.offset


def fit_posterior(X_train, y: np.ndarray, X_pool, seed: int, prior_train=None, prior_pool=None) -> Posterior:
    """The process fitted on the measured rows, predicting the pool; with a prior score, on the
    residuals of the values' least-squares line on it."""
    offset_train, offset_pool = np.zeros(len(y)), np.zeros(X_pool.shape[0])
    if prior_train is not None:
        a, b = _line(np.asarray(prior_train, np.float64), y)
        offset_train, offset_pool = a + b * prior_train, a + b * np.asarray(prior_pool, np.float64)
    gp = LinearGP(seed).fit(X_train, y - offset_train)
    post = gp.predict(X_pool)
    mean = post.mean + offset_pool
    return Posterior(gp, X_pool, mean, post.sd_latent, post.sd, post.low + offset_pool, post.high + offset_pool,
                     offset_pool)


def _line(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Intercept and slope of the least-squares line of ``y`` on ``x`` (slope 0 for a constant x)."""
    spread = float(np.var(x))
    slope = float(np.cov(x, y, bias=True)[0, 1] / spread) if spread > 0 else 0.0
    return float(np.mean(y) - slope * np.mean(x)), slope


def pick(acquisition: str, pool_substitutions: list[frozenset], batch: int, rng: np.random.Generator, *,
         posterior: Posterior | None = None, prior=None, diversity: Diversity = Diversity(),
         beta: float = UCB_BETA) -> list[Choice]:
    """The batch by ``acquisition`` (``ACQUISITIONS`` or ``zero-shot``) under the diversity rules.
    ``random`` draws its order from ``rng``, ``thompson`` its ``batch`` posterior functions."""
    m = len(pool_substitutions)
    order = rng.random(m) if acquisition == "random" else None
    draws = posterior.draws(batch, rng) if acquisition == "thompson" else None
    mean = posterior.mean if posterior is not None else None
    sd = posterior.sd_latent if posterior is not None else None
    values = lambda k: values_for(acquisition, k, mean=mean, sd_latent=sd, draws=draws, prior=prior,  # noqa: E731
                                  order=order, beta=beta)

    def explain(k: int, j: int, penalty: float) -> str:
        if posterior is None:
            return reason(acquisition, float(values(k)[j]) - penalty, penalty=penalty)
        return reason(acquisition, float(values(k)[j]) - penalty, mean=float(mean[j]), sd=float(sd[j]),
                      low=float(posterior.low[j]), high=float(posterior.high[j]), k=k, beta=beta, penalty=penalty)

    return select(pool_substitutions, batch, values, explain, diversity, rng)


def design_matrix(kind: str, wild_type: str, sequences: list[str], n_train: int, engine=None, store=None):
    """(n, p) the features the process reads, centred (one-hot on the wild type's, embeddings on
    the first ``n_train`` rows, the measured ones, and scaled as ``flamino fit`` scales them)."""
    if kind in ("onehot", "augmented"):
        spec = features.spec_for("onehot", length=len(wild_type))
        X = features.build(spec, features.Inputs(list(sequences)))
        return centred(X, features.build(spec, features.Inputs([wild_type])).toarray())
    if engine is None:
        raise DesignError(f"{kind} features need a model (-m)")
    spec = features.spec_for("embedding", num_layers=engine.config.num_layers)
    X = features.build(spec, features.Inputs(list(sequences)), engine, store=store)
    rows = X[:n_train] if n_train > 1 else X
    scale = rows.std(axis=0)
    return (X - rows.mean(axis=0)) / np.where(scale > 0, scale, 1.0)


def zero_shot(engine, wild_type: str, variants: list, strategy: str, store=None) -> np.ndarray | None:
    """Each variant's zero-shot score, as ``flamino variants`` computes it (None without a model)."""
    if engine is None or not variants:
        return None
    return features.zero_shot_scores(engine, wild_type, variants, strategy, store=store)


def propose(wild_type: str, numbering: Numbering, measured: Measured, settings: Settings, *, seed: int,
            round_number: int, engine=None, given: list | None = None, store=None) -> Proposals:
    """The proposals of round ``round_number`` from the measurements of the rounds before it.

    Args:
      wild_type, numbering: the campaign's wild type and its residue numbering.
      measured: the measurements of the earlier rounds (``campaign.Campaign.measured``).
      settings: acquisition, features, batch, constraints, diversity.
      seed, round_number: the generator of every random choice is seeded with both.
      engine: the model (augmented and embedding features, and the zero-shot score).
      given: the campaign's candidate table (None: every allowed single, and multi-mutants).

    Raises:
      DesignError: a setting that cannot be used, or nothing left to propose.
    """
    settings.check()
    if settings.features != "onehot" and engine is None:
        raise DesignError(f"{settings.features} features need a model (-m)")
    constraints = settings.constraints(wild_type, numbering)
    pool = build_pool(wild_type, numbering, measured, constraints, settings.max_mutations, given, settings.combine_top)
    if not len(pool):
        raise DesignError("no candidate is left: every allowed variant was measured (loosen --keep, --avoid or "
                          "--max-mutations)")
    rng = np.random.default_rng([seed, round_number])
    n = len(measured)
    scores = zero_shot(engine, wild_type, list(measured.variants) + pool.variants, settings.zero_shot, store)
    info = {"round": round_number, "seed": seed, "settings": settings.to_json(), "n_measured": n,
            "n_candidates": len(pool), "random_weights": bool(getattr(engine, "is_random", False)),
            "model_fingerprint": getattr(engine, "fingerprint", None), "calibration": None, "kernel": None}
    diversity = Diversity(settings.per_position, settings.penalty)
    subs = [frozenset((s.index, s.mt) for s in v.substitutions) for v in pool.variants]
    posterior, acquisition = None, (ZERO_SHOT if scores is not None else "random")
    if n >= MIN_LABELS:
        posterior = _fitted(settings, wild_type, measured, pool, scores, rng, engine, store, info)
        acquisition = settings.acquisition
    info["acquisition"] = acquisition
    prior_pool = scores[n:] if scores is not None else None
    choices = pick(acquisition, subs, settings.batch, rng, posterior=posterior, prior=prior_pool,
                   diversity=diversity, beta=settings.beta)
    info["notes"] = _notes(choices, settings, n, acquisition, engine, info)
    return Proposals(_table(round_number, pool, choices, acquisition, posterior, prior_pool), info)


def _fitted(settings: Settings, wild_type: str, measured: Measured, pool: Pool, scores, rng, engine, store,
            info: dict) -> Posterior:
    """The process on the measured values, its kernel and its calibration written into ``info``."""
    n = len(measured)
    X = design_matrix(settings.features, wild_type, measured.sequences + pool.sequences, n, engine, store)
    prior = scores if settings.features == "augmented" else None
    posterior = fit_posterior(X[:n], measured.values, X[n:], int(rng.integers(2**31)),
                              None if prior is None else prior[:n], None if prior is None else prior[n:])
    residual = measured.values
    if prior is not None:  # the intervals are the residual process's: calibrated on the residuals
        a, b = _line(prior[:n], measured.values)
        residual = measured.values - (a + b * prior[:n])
    info["calibration"] = calibration(X[:n], residual, info["seed"])
    info["kernel"] = posterior.gp.describe()
    info["signal_fraction"] = signal_fraction(posterior)
    return posterior


def signal_fraction(posterior: Posterior) -> float:
    """Of a candidate's prior variance (the median candidate's), the part the features explain:
    signal / (signal + the fitted assay noise). Near 0 the marginal likelihood found little the
    features explain in what was measured, and the posterior barely moves from its mean."""
    gp = posterior.gp
    signal = float(np.median(gp._prior_variance(posterior.X_pool))) if posterior.X_pool.shape[0] else 0.0
    return signal / (signal + gp.noise) if signal + gp.noise > 0 else 0.0


def _notes(choices: list[Choice], settings: Settings, n: int, acquisition: str, engine, info: dict) -> list[str]:
    notes = []
    if len(choices) < settings.batch:
        notes.append(f"{len(choices)} of {settings.batch} proposals: the pool ran out of candidates at positions not "
                     "yet used (--per-position allows more per position)")
    if n < MIN_LABELS and acquisition != settings.acquisition:
        notes.append(f"{n} measured value(s), fewer than {MIN_LABELS}: proposals by {acquisition}, not "
                     f"{settings.acquisition}")
    if (info.get("signal_fraction") or 1.0) < LITTLE_SIGNAL:
        notes.append(f"the fit finds little the features explain: {info['signal_fraction']:.0%} of a candidate's "
                     "variance is signal, the rest assay noise; the predictions barely differ, and the plate is "
                     "close to an even spread over the pool (more measurements, or a model's prior, would help)")
    if getattr(engine, "is_random", False):
        notes.append("the model has random weights (a test model): its zero-shot scores and embeddings are not "
                     "biology")
    return notes


def _table(round_number: int, pool: Pool, choices: list[Choice], acquisition: str, posterior: Posterior | None,
           prior) -> pd.DataFrame:
    rows = []
    for rank, choice in enumerate(choices, start=1):
        j = choice.index
        variant = pool.variants[j]
        why = choice.why
        if pool.parents[j]:
            why += f"; multi-mutant of measured singles {pool.parents[j]} (additive {pool.additive[j]:.3g})"
        rows.append({
            "round": round_number, "rank": rank, "mutant": variant.mutant, "n_mutations": len(variant.substitutions),
            "kind": pool.kinds[j], "acquisition": acquisition,
            "prediction": posterior.mean[j] if posterior is not None else np.nan,
            "sd": posterior.sd[j] if posterior is not None else np.nan,
            "low": posterior.low[j] if posterior is not None else np.nan,
            "high": posterior.high[j] if posterior is not None else np.nan,
            "additive": pool.additive[j], "zero_shot": prior[j] if prior is not None else np.nan,
            "parents": pool.parents[j], "why": why,
        })
    return pd.DataFrame(rows, columns=list(COLUMNS))

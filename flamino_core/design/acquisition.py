"""Which B candidates to measure next: an acquisition, picked one by one under diversity rules.

Acquisitions (the value each candidate is ranked by):

* ``greedy``: the predicted mean; exploits what the fit already believes;
* ``ucb``: mean + ``beta`` x the latent sd (upper confidence bound; the sd without the assay
  noise: measuring noise again teaches nothing); explores where the model is unsure;
* ``thompson``: pick k is the best candidate of the k-th function drawn from the posterior
  (``LinearGP.sample``): each pick is optimal under a plausible world, so the batch spreads
  itself over the worlds the data allow;
* ``random``: a uniform random order (the benchmark's baseline; round 1 without a model);
* ``zero-shot``: the model's zero-shot score (round 1 with a model: no measurement yet).

Diversity, applied while picking (best first):

* at most ``per_position`` proposals mutate any one position (default 1: no two proposals at one
  position; a multi-mutant uses up each of its positions);
* a near-duplicate penalty: a candidate's value is lowered by ``penalty`` x the spread (sd) of
  the values over the pool x its largest similarity to a proposal already picked, where the
  similarity of two variants is (shared substitutions + half the positions both mutate to
  different letters) / the larger one's substitutions: 1 for the same variant, 0.5 for the
  other letter at the same single position, or for a double holding a picked single.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np

ACQUISITIONS = ("greedy", "ucb", "thompson", "random")
ZERO_SHOT = "zero-shot"
UCB_BETA = 1.0  # the mean + 1 sd: the 84th percentile of the latent value
PER_POSITION = 1
PENALTY = 0.5


@dataclasses.dataclass
class Choice:
    """One proposal: its row in the pool, the value it was picked by (after the penalty) and why."""

    index: int
    value: float
    why: str


@dataclasses.dataclass(frozen=True)
class Diversity:
    """The diversity rules: proposals per position (None: no limit) and the near-duplicate penalty."""

    per_position: int | None = PER_POSITION
    penalty: float = PENALTY


def similarity(a: frozenset, b: frozenset) -> float:
    """Of two variants given as sets of (index, letter): shared substitutions plus half the
    positions both mutate to different letters, over the larger one's substitutions."""
    if not a or not b:
        return 0.0
    shared = len(a & b)
    positions = len({i for i, _ in a} & {i for i, _ in b}) - shared
    return (shared + 0.5 * positions) / max(len(a), len(b))


def values_for(acquisition: str, k: int, *, mean=None, sd_latent=None, draws=None, prior=None, order=None,
               beta: float = UCB_BETA) -> np.ndarray:
    """The values the k-th pick ranks the pool by."""
    if acquisition == "greedy":
        return mean
    if acquisition == "ucb":
        return mean + beta * sd_latent
    if acquisition == "thompson":
        return draws[k]
    if acquisition == "random":
        return order
    if acquisition == ZERO_SHOT:
        return prior
    raise ValueError(f"unknown acquisition {acquisition!r}: choose one of {', '.join(ACQUISITIONS)}")


def select(substitutions: list[frozenset], batch: int, values: Callable[[int], np.ndarray],
           explain: Callable[[int, int, float], str], diversity: Diversity = Diversity(),
           rng: np.random.Generator | None = None) -> list[Choice]:
    """Pick up to ``batch`` candidates, best first, under the diversity rules.

    Args:
      substitutions: each candidate's substitutions as (index, letter) pairs.
      batch: proposals wanted; fewer are returned when the position rule leaves no candidate.
      values: the values of every candidate for the k-th pick (the same for greedy and UCB, a
        new posterior draw per pick for Thompson).
      explain: (k, candidate, penalty) -> the reason written beside the proposal.
      diversity: the rules.
      rng: breaks ties: equal values are taken in an order drawn from it (None: pool order).
        Ties are common: under a one-hot model every substitution at a position no measured
        variant touches has the same mean and sd, and taking them in pool order would walk the
        protein from its first residue (it did, in the benchmark, before this).
    """
    m = len(substitutions)
    taken = np.zeros(m, dtype=bool)
    closest = np.zeros(m)  # each candidate's largest similarity to a proposal already picked
    used: dict[int, int] = {}  # proposals mutating each position
    by_position: dict[int, list[int]] = {}
    for j, subs in enumerate(substitutions):
        for index, _ in subs:
            by_position.setdefault(index, []).append(j)
    order = rng.permutation(m) if rng is not None else np.arange(m)
    choices: list[Choice] = []
    for k in range(batch):
        open_ = ~taken & _position_allows(substitutions, used, diversity.per_position)
        if not open_.any():
            break
        raw = np.asarray(values(k), np.float64)
        finite = raw[np.isfinite(raw) & open_]
        spread = float(finite.std()) if finite.size > 1 else 0.0
        penalties = diversity.penalty * spread * closest
        scored = np.where(open_ & np.isfinite(raw), raw - penalties, -np.inf)
        j = int(order[np.argmax(scored[order])])  # ties: the first in the drawn order
        if not np.isfinite(scored[j]):
            break
        choices.append(Choice(j, float(scored[j]), explain(k, j, float(penalties[j]))))
        taken[j] = True
        for index, _ in substitutions[j]:
            used[index] = used.get(index, 0) + 1
            for other in by_position[index]:
                closest[other] = max(closest[other], similarity(substitutions[j], substitutions[other]))
    return choices


def _position_allows(substitutions: list[frozenset], used: dict[int, int], per_position: int | None) -> np.ndarray:
    if per_position is None or not used:
        return np.ones(len(substitutions), dtype=bool)
    full = {index for index, count in used.items() if count >= per_position}
    return np.array([not any(i in full for i, _ in subs) for subs in substitutions], dtype=bool)


def reason(acquisition: str, value: float, *, mean: float | None = None, sd: float | None = None,
           low: float | None = None, high: float | None = None, k: int = 0, beta: float = UCB_BETA,
           penalty: float = 0.0) -> str:
    """The words beside a proposal: what it was picked by."""
    if acquisition == "greedy":
        text = f"greedy: predicted {mean:.3g} (80% interval {low:.3g} to {high:.3g}), the highest left"
    elif acquisition == "ucb":
        text = f"ucb: predicted {mean:.3g} + {beta:g} x latent sd {sd:.3g} = {mean + beta * sd:.3g}, the highest left"
    elif acquisition == "thompson":
        text = f"thompson: the best of posterior draw {k + 1} ({value + penalty:.3g})"
    elif acquisition == ZERO_SHOT:
        text = f"zero-shot score {value + penalty:.3g}, the highest left (no measurements to learn from yet)"
    else:
        text = "random choice"
    if penalty > 0:
        text += f"; near-duplicate penalty {penalty:.3g}"
    return text

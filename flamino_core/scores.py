"""Variant-effect scores from the masked language model (Meier et al. 2021 definitions).

``score`` is the one entry point the command line, batch jobs and the app use: an engine, a
sequence and a strategy name (``options.STRATEGIES``) in, ``SequenceScores`` out. The other
functions are its pieces, for callers that already hold the model's outputs.
"""

from __future__ import annotations

import dataclasses
from typing import Iterator, Literal

import numpy as np

from .alphabet import AA_TO_IDX, STANDARD_AA_TOKEN_IDS, STANDARD_AMINO_ACIDS
from .options import STRATEGIES

Strategy = Literal["masked-marginals", "wt-marginals", "pppl"]


@dataclasses.dataclass(frozen=True)
class SequenceScores:
    """What a strategy says about one sequence."""

    sequence: str  # as scored (wt-marginals under long="truncate": the first 1022 residues)
    strategy: str
    substitutions: np.ndarray  # (L, 20) log p(mt) - log p(wt), columns in STANDARD_AMINO_ACIDS order
    pppl: float | None  # pseudo-perplexity: from the masked strategies only


def score(engine, sequence: str, strategy: str, *, long: str = "window", progress=None, unmasked=None) -> SequenceScores:
    """Score every single substitution of ``sequence`` (and its pseudo-perplexity) by ``strategy``.

    Args:
      engine: an ``engine.Engine``.
      sequence: a validated protein sequence.
      strategy: ``masked-marginals`` (one masked pass per position: the substitution scores
        and the pseudo-perplexity), ``pppl`` (the same passes) or ``wt-marginals`` (one
        unmasked pass: substitution scores only, the fast approximation).
      long: sequences over 1022 residues, for the unmasked pass (see ``Engine.run``); masked
        passes always use ProteinGym's 1,024-token window of the masked position
        (``windows.masked_window``).
      progress: the engine's progress callback, for the masked passes.
      unmasked: this sequence's ``SequenceOutput`` with logits, if the caller has it already
        (a batch job embeds and scores in the same pass); wt-marginals then runs nothing.

    Returns:
      ``SequenceScores``.
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown scoring strategy {strategy!r}; choose from {', '.join(STRATEGIES)}")
    if uses_unmasked_logits(strategy):
        if unmasked is None:
            (unmasked,) = engine.run([sequence], repr_layers=(), logits=True, long=long)
        return SequenceScores(unmasked.sequence, strategy, wt_marginals_from_logits(unmasked.logits, unmasked.sequence), None)
    log_probs = engine.masked_log_probs(sequence, progress=progress)
    return from_masked_log_probs(log_probs, sequence, strategy)


def uses_unmasked_logits(strategy: str) -> bool:
    """True if ``strategy`` scores from an unmasked pass's logits (which ``score`` can reuse)."""
    return strategy == "wt-marginals"


def from_masked_log_probs(masked_log_probs: np.ndarray, sequence: str, strategy: str = "masked-marginals") -> SequenceScores:
    """``SequenceScores`` from ``Engine.masked_log_probs`` of the whole sequence (L, vocab)."""
    return SequenceScores(
        sequence, strategy, substitution_scores(masked_log_probs, sequence),
        pseudo_perplexity(masked_log_probs, sequence),
    )  # fmt: skip


def log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def wt_token_ids(sequence: str) -> np.ndarray:
    return np.array([AA_TO_IDX[aa] for aa in sequence], dtype=np.int32)


def substitution_scores(log_probs: np.ndarray, sequence: str) -> np.ndarray:
    """(L, 20) ``log p(mt) - log p(wt)`` from per-position log-probabilities (L, vocab).

    Columns follow ``STANDARD_AMINO_ACIDS`` (alphabetical one-letter order). Softmax is over the
    full 33-token vocabulary, as fair-esm's variant-prediction example does.
    """
    wt = log_probs[np.arange(len(sequence)), wt_token_ids(sequence)]
    return log_probs[:, STANDARD_AA_TOKEN_IDS] - wt[:, None]


def masked_marginals(engine, sequence: str, progress=None) -> np.ndarray:
    """(L, 20) scores with position i masked for its row: L forward passes."""
    return score(engine, sequence, "masked-marginals", progress=progress).substitutions


def wt_marginals(engine, sequence: str, long: str = "window") -> np.ndarray:
    """(L, 20) scores from one unmasked pass: the fast approximation."""
    return score(engine, sequence, "wt-marginals", long=long).substitutions


def wt_marginals_from_logits(logits: np.ndarray, sequence: str) -> np.ndarray:
    """(L, 20) wt-marginal scores from one unmasked pass's (L, vocab) logits."""
    return substitution_scores(log_softmax(logits.astype(np.float64)).astype(np.float32), sequence)


def pseudo_log_likelihoods(masked_log_probs: np.ndarray, sequence: str) -> np.ndarray:
    """log p(x_i | x with i masked) for each position i: (L,)."""
    return masked_log_probs[np.arange(len(sequence)), wt_token_ids(sequence)]


def pseudo_perplexity(masked_log_probs: np.ndarray, sequence: str) -> float:
    """exp(-mean_i log p(x_i | x masked at i)), over residue positions only (no <cls> off-by-one)."""
    return float(np.exp(-pseudo_log_likelihoods(masked_log_probs, sequence).mean()))


def score_rows(record_id: str, sequence: str, scores: np.ndarray, first: int = 1) -> Iterator[tuple]:
    """CSV rows ``record_id, position, wt, mt, score`` for every position and mt; positions are
    numbered from ``first`` (the number of the sequence's first residue, 1 by default)."""
    for i, wt in enumerate(sequence):
        for j, mt in enumerate(STANDARD_AMINO_ACIDS):
            yield record_id, i + first, wt, mt, float(scores[i, j])

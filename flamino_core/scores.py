"""Variant-effect scores from the masked language model (Meier et al. 2021 definitions)."""

from __future__ import annotations

from typing import Iterator, Literal

import numpy as np

from .alphabet import AA_TO_IDX, STANDARD_AA_TOKEN_IDS, STANDARD_AMINO_ACIDS

Strategy = Literal["masked-marginals", "wt-marginals", "pppl"]
STRATEGIES = ("masked-marginals", "wt-marginals", "pppl")


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
    return substitution_scores(engine.masked_log_probs(sequence, progress=progress), sequence)


def wt_marginals(engine, sequence: str, long: str = "window") -> np.ndarray:
    """(L, 20) scores from one unmasked pass: the fast approximation."""
    (out,) = engine.run([sequence], repr_layers=(), logits=True, long=long)
    return substitution_scores(log_softmax(out.logits.astype(np.float64)).astype(np.float32), out.sequence)


def pseudo_log_likelihoods(masked_log_probs: np.ndarray, sequence: str) -> np.ndarray:
    """log p(x_i | x with i masked) for each position i: (L,)."""
    return masked_log_probs[np.arange(len(sequence)), wt_token_ids(sequence)]


def pseudo_perplexity(masked_log_probs: np.ndarray, sequence: str) -> float:
    """exp(-mean_i log p(x_i | x masked at i)), over residue positions only (no <cls> off-by-one)."""
    return float(np.exp(-pseudo_log_likelihoods(masked_log_probs, sequence).mean()))


def score_rows(record_id: str, sequence: str, scores: np.ndarray) -> Iterator[tuple]:
    """CSV rows ``record_id, position (1-based), wt, mt, score`` for every position and mt."""
    for i, wt in enumerate(sequence):
        for j, mt in enumerate(STANDARD_AMINO_ACIDS):
            yield record_id, i + 1, wt, mt, float(scores[i, j])

"""The per-residue values of the built-in tracks (``tracks.TRACKS`` names each one's function).

Each takes the analysed sequence and the model outputs and choices its track declares, and
returns (L,) float64 values; ``tracks.compute_track`` checks inputs and shape around them.
"""

from __future__ import annotations

import numpy as np

from flamino_core.alphabet import STANDARD_AMINO_ACIDS
from flamino_core.analysis.outputs import pca, residue_entropy
from flamino_core.structure.tracks import CONTACT_MIN_SEPARATION, CONTACT_PROBABILITY


def mean_score_track(scores: np.ndarray, sequence: str) -> np.ndarray:
    """(L,) mean substitution score over the 19 amino acids other than the wild type.

    Args:
      scores: (L, 20) ``log p(mt) - log p(wt)``, columns in ``STANDARD_AMINO_ACIDS`` order.
      sequence: the wild type; where it is not one of the 20 (X, B, Z, U, O) all 20 are averaged.
    """
    scores = np.asarray(scores, dtype=np.float64)
    keep = np.ones_like(scores, dtype=bool)
    for i, wt in enumerate(sequence):
        column = STANDARD_AMINO_ACIDS.find(wt)
        if column >= 0:
            keep[i, column] = False
    return np.where(keep, scores, 0.0).sum(axis=1) / keep.sum(axis=1)


def substitution_track(scores: np.ndarray, amino_acid: str) -> np.ndarray:
    """(L,) score of substituting ``amino_acid`` at each position (0 where it is the wild type)."""
    column = STANDARD_AMINO_ACIDS.find(amino_acid.upper())
    if len(amino_acid) != 1 or column < 0:
        raise ValueError(f"amino_acid must be one of {STANDARD_AMINO_ACIDS}, not {amino_acid!r}")
    return np.asarray(scores, dtype=np.float64)[:, column]


def contact_count_track(
    contacts: np.ndarray, threshold: float = CONTACT_PROBABILITY, min_separation: int = CONTACT_MIN_SEPARATION
) -> np.ndarray:
    """(L,) number of predicted partners per position (NaN entries, uncovered pairs, count as none)."""
    p = np.asarray(contacts, dtype=np.float64)
    positions = np.arange(len(p))
    far = np.abs(positions[:, None] - positions[None, :]) >= min_separation
    with np.errstate(invalid="ignore"):
        return ((p >= threshold) & far).sum(axis=1).astype(np.float64)


def attention_track(layer_attention: np.ndarray, residue: int, head: int | None = None) -> np.ndarray:
    """(L,) attention from one residue to every residue, in one layer.

    Args:
      layer_attention: (H, L+2, L+2) one layer's attention with ``<cls>``/``<eos>`` (as the engine
        returns it); the special tokens' columns are dropped, so a row need not sum to 1.
      residue: 0-based position of the residue attending.
      head: 0-based head, or None for the mean over heads.
    """
    maps = np.asarray(layer_attention, dtype=np.float64)
    heads, length = maps.shape[0], maps.shape[-1] - 2
    if not 0 <= residue < length:
        raise ValueError(f"residue {residue + 1} does not exist: the sequence has positions 1..{length}")
    if head is not None and not 0 <= head < heads:
        raise ValueError(f"head {head + 1} does not exist: this layer has heads 1..{heads}")
    selected = maps.mean(axis=0) if head is None else maps[head]
    return selected[residue + 1, 1:-1]


def pca_track(representations: np.ndarray, component: int = 1) -> np.ndarray:
    """(L,) coordinate of each residue on principal component ``component`` (1-based)."""
    if component < 1:
        raise ValueError(f"component is counted from 1, not {component}")
    return pca(representations, n_components=component).coords[:, component - 1]


# --- the signature ``tracks.compute_track`` calls: (sequence, the declared inputs and choices) ----
def entropy_values(sequence: str, *, logits, **_) -> np.ndarray:
    return residue_entropy(logits)


def mean_score_values(sequence: str, *, scores, **_) -> np.ndarray:
    return mean_score_track(scores, sequence)


def substitution_values(sequence: str, *, scores, amino_acid, **_) -> np.ndarray:
    return substitution_track(scores, amino_acid)


def contact_count_values(sequence: str, *, contacts, **_) -> np.ndarray:
    return contact_count_track(contacts)


def attention_values(sequence: str, *, attention, residue, head=None, **_) -> np.ndarray:
    return attention_track(attention, residue, head)


def pca_values(sequence: str, *, representations, component=1, **_) -> np.ndarray:
    return pca_track(representations, component)

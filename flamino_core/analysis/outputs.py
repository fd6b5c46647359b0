"""Analyses the app shows, as pure NumPy functions of the engine's outputs.

Nothing here touches the model: each function takes arrays (logits, representations,
attention maps) and returns arrays or plain rows, so the CLI, the app and the tests can share
them and check them against independent implementations.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from flamino_core.alphabet import STANDARD_AA_TOKEN_IDS, STANDARD_AMINO_ACIDS, TOKENS
from flamino_core.numbering import Numbering
from flamino_core.analysis.attention_maps import apc, symmetrize  # noqa: F401  (part of this module's API)

# Physico-chemical classes used to colour residues (a common textbook grouping: aromatic
# residues are split from the aliphatic hydrophobic ones; C, G and P have special roles in
# structure). Ambiguous and rare letters (X, B, Z, U, O) are "other".
RESIDUE_CLASSES: dict[str, str] = {
    **dict.fromkeys("AVILM", "hydrophobic"),
    **dict.fromkeys("FWY", "aromatic"),
    **dict.fromkeys("STNQ", "polar"),
    **dict.fromkeys("KRH", "positive"),
    **dict.fromkeys("DE", "negative"),
    **dict.fromkeys("CGP", "special"),
}
CLASS_ORDER = ("hydrophobic", "aromatic", "polar", "positive", "negative", "special", "other")


def residue_class(residue: str) -> str:
    """The class of a one-letter residue code ("other" for X, B, Z, U, O)."""
    return RESIDUE_CLASSES.get(residue.upper(), "other")


def residue_labels(sequence: str, start: int = 1) -> list[str]:
    """Axis labels such as ``M1``, ``Q2``: residue letter and 1-based position."""
    return [f"{aa}{i}" for i, aa in enumerate(sequence, start)]


# --- probabilities and entropy ----------------------------------------------------------------
def log_softmax(logits: np.ndarray) -> np.ndarray:
    """Log-softmax over the last axis (the one definition: scores, the joint-masked passes and
    the probabilities all read it), in the input's precision: give float64 for float64 results.
    The maximum is subtracted first, so large logits never overflow."""
    shifted = np.asarray(logits)
    shifted = shifted - shifted.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def softmax(logits: np.ndarray) -> np.ndarray:
    """Softmax over the last axis, computed in float64 (the logits are float32)."""
    return np.exp(log_softmax(np.asarray(logits, dtype=np.float64)))


def amino_acid_probabilities(logits: np.ndarray) -> np.ndarray:
    """(20, L) probabilities of the standard amino acids at each position.

    Args:
      logits: (L, 33) LM logits over the full token vocabulary.

    Returns:
      Rows in ``STANDARD_AMINO_ACIDS`` order. The softmax runs over all 33 tokens, as in
      ``scores.py``, so a column sums to 1 minus the mass on special and ambiguous tokens
      (see ``other_token_mass``); for a trained model that mass is negligible.
    """
    return softmax(logits)[:, STANDARD_AA_TOKEN_IDS].T


def other_token_mass(logits: np.ndarray) -> np.ndarray:
    """(L,) probability the model puts on tokens that are not one of the 20 amino acids."""
    return 1.0 - amino_acid_probabilities(logits).sum(axis=0)


def entropy(probabilities: np.ndarray, axis: int = 0, base: float = 2.0) -> np.ndarray:
    """Shannon entropy along ``axis`` after renormalising (bits by default).

    Renormalising makes it the entropy of the distribution over the 20 amino acids alone:
    0 when the model is certain, log2(20) ~ 4.32 bits when every amino acid is equally likely.
    """
    p = np.asarray(probabilities, dtype=np.float64)
    p = p / p.sum(axis=axis, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p > 0, p * np.log(p), 0.0)
    return -terms.sum(axis=axis) / np.log(base)


def residue_entropy(logits: np.ndarray) -> np.ndarray:
    """(L,) entropy in bits of the predicted amino acids at each position, from (L, vocab) logits:
    0 where the model is sure, log2(20) ~ 4.32 where it has no idea. The one per-residue entropy
    (the record outputs the Records table averages, the Structure page's track)."""
    return entropy(amino_acid_probabilities(logits), axis=0)


def top_k_rows(probabilities: np.ndarray, sequence: str, k: int = 3, numbering: Numbering = Numbering()) -> list[dict]:
    """One table row per position: the residue, its probability and rank, and the top k.

    Args:
      probabilities: (20, L) from ``amino_acid_probabilities`` (or a masked pass).
      sequence: the L residues.
      k: how many predictions to list (1..20).
      numbering: the sequence's residue numbering.

    Returns:
      Dicts with keys ``position`` (numbered by ``numbering``), ``residue``, ``p(residue)``, ``rank`` (1 = the
      model's favourite; None for X/B/Z/U/O, which are not among the 20), then
      ``top1``, ``p1`` ... ``topk``, ``pk``.
    """
    if not 1 <= k <= len(STANDARD_AMINO_ACIDS):
        raise ValueError(f"k must be between 1 and 20, not {k}")
    p = np.asarray(probabilities)
    if p.shape != (len(STANDARD_AMINO_ACIDS), len(sequence)):
        raise ValueError(f"probabilities have shape {p.shape}, expected (20, {len(sequence)})")
    # Stable sort on -p: ties keep alphabetical order, so the table is deterministic.
    order = np.argsort(-p, axis=0, kind="stable")  # (20, L)
    rows = []
    for i, residue in enumerate(sequence):
        column = STANDARD_AMINO_ACIDS.find(residue)
        row: dict = {
            "position": numbering.number(i),
            "residue": residue,
            "p(residue)": float(p[column, i]) if column >= 0 else None,
            "rank": int(np.flatnonzero(order[:, i] == column)[0]) + 1 if column >= 0 else None,
        }
        for j in range(k):
            aa = order[j, i]
            row[f"top{j + 1}"] = STANDARD_AMINO_ACIDS[aa]
            row[f"p{j + 1}"] = float(p[aa, i])
        rows.append(row)
    return rows


def token_distribution(log_probs: np.ndarray) -> dict[str, float]:
    """A log-probability vector as {token: probability} in alphabet order: the model's output
    over the 33 tokens, or a wider head's (64 outputs) whose outputs past the tokens are none."""
    probs = np.exp(np.asarray(log_probs, dtype=np.float64))
    if len(probs) < len(TOKENS):
        raise ValueError(f"{len(probs)} log-probabilities for {len(TOKENS)} tokens")
    return {token: float(p) for token, p in zip(TOKENS, probs[: len(TOKENS)])}


# --- embeddings ---------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class PCAResult:
    coords: np.ndarray  # (N, n_components) projections of the centred data
    explained_variance_ratio: np.ndarray  # (n_components,), fraction of total variance
    components: np.ndarray  # (n_components, D) unit principal axes
    mean: np.ndarray  # (D,)


def pca(data: np.ndarray, n_components: int = 2) -> PCAResult:
    """Principal component analysis by SVD of the centred data.

    Args:
      data: (N, D) points, e.g. per-residue or per-sequence embeddings.
      n_components: how many axes to return. With fewer informative axes than asked (N - 1
        or rank < n_components, e.g. two sequences), the extra axes are zero with zero variance.

    Returns:
      ``PCAResult``. Signs are fixed so each axis's largest loading is positive (as scikit-learn
      does), so the same data always gives the same picture.
    """
    x = np.asarray(data, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] == 0:
        raise ValueError(f"PCA needs an (N, D) array with N >= 1, got shape {x.shape}")
    n, d = x.shape
    mean = x.mean(axis=0)
    centred = x - mean
    u, s, vt = np.linalg.svd(centred, full_matrices=False)  # u (N, r), s (r,), vt (r, D)
    signs = np.sign(vt[np.arange(len(vt)), np.abs(vt).argmax(axis=1)])
    signs[signs == 0] = 1.0
    u, vt = u * signs, vt * signs[:, None]
    variance = s**2
    total = variance.sum()
    ratio = variance / total if total > 0 else np.zeros_like(variance)
    # Axes past the data's rank carry no variance; SVD gives them arbitrary directions.
    informative = ratio > 1e-12
    coords = np.zeros((n, n_components))
    components = np.zeros((n_components, d))
    ratios = np.zeros(n_components)
    keep = min(n_components, int(informative.sum()))
    coords[:, :keep] = u[:, :keep] * s[:keep]
    components[:keep] = vt[:keep]
    ratios[:keep] = ratio[:keep]
    return PCAResult(coords, ratios, components, mean)


# --- attention ----------------------------------------------------------------------------------
def strip_special(attention: np.ndarray) -> np.ndarray:
    """Drop the ``<cls>`` (first) and ``<eos>`` (last) rows and columns: (..., L+2, L+2) -> (..., L, L)."""
    return attention[..., 1:-1, 1:-1]


def attention_view(
    attentions: np.ndarray, head: int | None, use_apc: bool = False, keep_special: bool = False
) -> np.ndarray:
    """The 2-D map the attention page shows for one layer.

    Args:
      attentions: (H, L+2, L+2) attention of one layer, with ``<cls>``/``<eos>``.
      head: 0-based head, or None for the average over heads.
      use_apc: show the symmetrised, APC-corrected map (what the contact head reads) instead of
        the raw attention; special tokens are always dropped first, as the contact head does.
      keep_special: keep ``<cls>``/``<eos>`` rows and columns (raw maps only).
    """
    maps = np.asarray(attentions, dtype=np.float64)
    if head is not None and not 0 <= head < maps.shape[0]:
        raise ValueError(f"head {head + 1} does not exist: this layer has heads 1..{maps.shape[0]}")
    selected = maps.mean(axis=0) if head is None else maps[head]
    if use_apc:
        return apc(symmetrize(strip_special(selected)))
    return selected if keep_special else strip_special(selected)


def crop_square(matrix: np.ndarray, start: int, stop: int, with_special: bool = False) -> np.ndarray:
    """Rows and columns ``start:stop`` (residue indices) of a (..., n, n) map, e.g. a page's range.

    Args:
      with_special: the map still has ``<cls>``/``<eos>`` first and last; they are kept (as the
        first and last rows and columns) around the residues.
    """
    m = np.asarray(matrix)
    if not with_special:
        return m[..., start:stop, start:stop]
    keep = np.r_[0, np.arange(start, stop) + 1, m.shape[-1] - 1]
    return m[..., keep[:, None], keep[None, :]]


def block_mean(matrix: np.ndarray, max_size: int) -> np.ndarray:
    """Shrink the last two axes to at most ``max_size`` by averaging blocks (for thumbnails).

    Rows and columns are cut into ``ceil(n / max_size)``-wide blocks; a short last block is
    averaged over the entries it has.
    """
    m = np.asarray(matrix, dtype=np.float64)
    rows, cols = m.shape[-2:]
    factor = max(-(-rows // max_size), -(-cols // max_size), 1)
    if factor == 1:
        return m
    out_rows, out_cols = -(-rows // factor), -(-cols // factor)
    padded = np.full(m.shape[:-2] + (out_rows * factor, out_cols * factor), np.nan)
    padded[..., :rows, :cols] = m
    blocks = padded.reshape(m.shape[:-2] + (out_rows, factor, out_cols, factor))
    return np.nanmean(blocks, axis=(-3, -1))

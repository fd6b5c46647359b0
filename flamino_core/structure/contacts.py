"""Predicted contacts against a real structure: true contacts and precision at L, L/2, L/5.

Definitions (the ones of the ESM papers, Rao et al. 2021, and fair-esm's
``examples/contact_prediction.ipynb``; see docs/structure.md):

* Two sequence positions are in contact when the C-beta atoms of their aligned residues are
  less than 8 Angstrom apart (C-alpha for glycine; see ``structure.py`` for residues without a
  CB atom).
* Separation ``|i - j|`` in sequence positions (not residue numbers): short 6-11, medium 12-23,
  long >= 24, all >= 6. Pairs closer than 6 are never scored.
* Precision at L/k: rank the predicted pairs ``i < j`` of a separation range by predicted
  probability and count the fraction of the top ``floor(L / k)`` that are true contacts.
  ``L`` is the length of the analysed sequence, not of the structure.
* Only pairs whose two positions both have an aligned residue can be judged; the others are
  left out of the ranking, as fair-esm's notebook masks pairs without coordinates. A predicted
  value of NaN (a pair no window covered) is "not predicted" and also left out.
* When fewer candidate pairs than ``floor(L / k)`` remain (a structure covering a fragment of
  the sequence, a short chain at long range), all of them are taken and the precision is the
  fraction of those that are contacts; ``n_pairs`` says how many were judged. fair-esm's
  notebook instead divides by ``floor(L / k)`` whatever is available, which reads a partial
  structure as wrong predictions. With enough candidates the two agree.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np
import pandas as pd

# Separation ranges (inclusive bounds, None: no upper bound) and cutoffs (label -> k in
# floor(L / k)), in the order the table lists them: defined with the other choices the CLI and
# the app offer, so the app's link registry reads them without importing this module.
from flamino_core.options import CONTACT_CUTOFFS as CUTOFFS, SEPARATION_RANGES  # noqa: F401 (part of this module's API)
from flamino_core.structure.align import ChainAlignment

CONTACT_DISTANCE = 8.0  # Angstrom, C-beta to C-beta
PRECISION_COLUMNS = ("record_id", "chain", "range", "cutoff", "precision", "n_pairs", "identity", "coverage")


def distance_map(alignment: ChainAlignment) -> np.ndarray:
    """(L, L) contact-atom distances between sequence positions, NaN where either has no residue."""
    xyz = alignment.chain.contact_xyz[alignment.residue_at.clip(min=0)]  # (L, 3)
    squared = (xyz**2).sum(axis=1)
    # |a - b|^2 = |a|^2 + |b|^2 - 2 a.b: (L, L) without an (L, L, 3) temporary. Coordinates are
    # at most a few hundred Angstrom, so float64 cancellation stays far below 1e-6 A^2.
    d2 = squared[:, None] + squared[None, :] - 2.0 * xyz @ xyz.T
    distances = np.sqrt(np.clip(d2, 0.0, None))
    missing = alignment.residue_at < 0
    distances[missing, :] = np.nan
    distances[:, missing] = np.nan
    return distances


def true_contacts(alignment: ChainAlignment, threshold: float = CONTACT_DISTANCE) -> np.ndarray:
    """(L, L) float: 1.0 for a contact, 0.0 for none, NaN where the structure has no residue."""
    distances = distance_map(alignment)
    with np.errstate(invalid="ignore"):
        contacts = (distances < threshold).astype(np.float64)
    contacts[np.isnan(distances)] = np.nan
    return contacts


@dataclasses.dataclass(frozen=True, eq=False)  # holds arrays: compare fields, not objects
class TopPairs:
    """The top-ranked predicted pairs of one separation range (0-based positions, i < j)."""

    i: np.ndarray
    j: np.ndarray
    probability: np.ndarray
    is_contact: np.ndarray  # bool

    def __len__(self) -> int:
        return len(self.i)

    def first(self, n: int) -> TopPairs:
        """The ``n`` best-ranked pairs (the pairs are in rank order)."""
        return TopPairs(self.i[:n], self.j[:n], self.probability[:n], self.is_contact[:n])

    @property
    def precision(self) -> float:
        return float(self.is_contact.mean()) if len(self) else float("nan")


def top_predictions(predicted: np.ndarray, contacts: np.ndarray, separation: str = "all",
                    k: int | None = None) -> TopPairs:
    """The ``k`` highest predicted pairs ``i < j`` in a separation range that the structure can judge.

    Args:
      predicted: (L, L) predicted contact probabilities (upper triangle read); NaN = not predicted.
      contacts: (L, L) from ``true_contacts`` (NaN where unknown).
      separation: a key of ``SEPARATION_RANGES``.
      k: how many pairs (default L). Ties in probability are broken by position (i, then j), so
        the ranking is deterministic.
    """
    predicted = np.asarray(predicted, dtype=np.float64)
    contacts = np.asarray(contacts, dtype=np.float64)
    if predicted.ndim != 2 or predicted.shape[0] != predicted.shape[1] or predicted.shape != contacts.shape:
        raise ValueError(f"predicted contacts of shape {predicted.shape} do not match the structure's {contacts.shape}")
    if separation not in SEPARATION_RANGES:
        raise ValueError(f"separation must be one of {', '.join(SEPARATION_RANGES)}, not {separation!r}")
    low, high = SEPARATION_RANGES[separation]
    length = len(predicted)
    k = length if k is None else k
    i, j = np.triu_indices(length, k=low)
    if high is not None:
        keep = (j - i) <= high
        i, j = i[keep], j[keep]
    p, truth = predicted[i, j], contacts[i, j]
    judged = np.isfinite(p) & np.isfinite(truth)
    i, j, p, truth = i[judged], j[judged], p[judged], truth[judged]
    order = np.lexsort((j, i, -p))[: max(k, 0)]
    return TopPairs(i[order], j[order], p[order], truth[order] == 1.0)


def precision_rows(predicted: np.ndarray, contacts: np.ndarray, length: int | None = None) -> list[dict]:
    """Precision for every separation range x cutoff: dicts with range, cutoff, precision, n_pairs.

    Args:
      predicted, contacts: as for ``top_predictions``.
      length: L for the cutoffs (default: the map's size, i.e. the sequence length).

    Returns:
      Rows in ``SEPARATION_RANGES`` x ``CUTOFFS`` order; precision is NaN where no pair could be
      judged (n_pairs 0).
    """
    length = len(predicted) if length is None else length
    rows = []
    for separation in SEPARATION_RANGES:
        ranked = top_predictions(predicted, contacts, separation, k=length)
        for cutoff, divisor in CUTOFFS.items():
            top = ranked.is_contact[: length // divisor]
            rows.append({
                "range": separation,
                "cutoff": cutoff,
                "precision": float(top.mean()) if len(top) else float("nan"),
                "n_pairs": int(len(top)),
            })
    return rows


def precision_table(alignment: ChainAlignment, predicted: np.ndarray, record_id: str) -> pd.DataFrame:
    """The precision table of one record against one chain, with ``PRECISION_COLUMNS``.

    One row per separation range x cutoff (12 rows): ``record_id, chain, range, cutoff,
    precision, n_pairs, identity, coverage`` (identity and coverage of the chain's alignment).
    """
    predicted = np.asarray(predicted)
    if predicted.shape != (len(alignment.sequence),) * 2:
        raise ValueError(
            f"{record_id}: predicted contacts have shape {predicted.shape}, but the sequence has "
            f"{len(alignment.sequence)} residues"
        )
    rows = precision_rows(predicted, true_contacts(alignment))
    frame = pd.DataFrame(rows)
    frame.insert(0, "record_id", record_id)
    frame.insert(1, "chain", alignment.chain_id)
    frame["identity"] = alignment.identity
    frame["coverage"] = alignment.coverage
    return frame[list(PRECISION_COLUMNS)]


def precision_by_model(alignment: ChainAlignment, predictions: Mapping[str, np.ndarray],
                       record_id: str) -> pd.DataFrame:
    """``precision_table`` for several models' predictions of the same sequence, with a ``model`` column first.

    Args:
      predictions: model name -> (L, L) predicted contacts, in the order to list them.
    """
    frames = [precision_table(alignment, predicted, record_id).assign(model=name)
              for name, predicted in predictions.items()]
    if not frames:
        return pd.DataFrame(columns=["model", *PRECISION_COLUMNS])
    table = pd.concat(frames, ignore_index=True)
    return table[["model", *PRECISION_COLUMNS]]

"""Predicted contacts as tables of residue pairs: every pair, or the top L (what the Attention
page offers as CSV).

Every pair of a long protein is large (2,554 residues: 3.3 million rows, 67 MB of CSV); the top
L pairs at least 6 positions apart, the pairs contact precision judges, are a few kB.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from flamino_core.numbering import Numbering

MIN_SEPARATION = 6  # as contact precision (structure/contacts.py): closer pairs are not judged


def contacts_frame(contacts: np.ndarray, sequence: str, numbering: Numbering) -> pd.DataFrame:
    """Every residue pair i < j with its contact probability (NaN: not predicted).

    Args:
      contacts: (L, L) predicted probabilities.
      sequence: the L residues.
      numbering: the sequence's residue numbering (``i`` and ``j`` are numbered in it).
    """
    i, j = np.triu_indices(len(sequence), k=1)
    return _pairs(contacts, sequence, numbering, i, j)


def top_contacts_frame(contacts: np.ndarray, sequence: str, numbering: Numbering,
                       min_separation: int = MIN_SEPARATION) -> pd.DataFrame:
    """The L most probable pairs at least ``min_separation`` apart, most probable first (ties by
    i, then j); a pair that was not predicted (NaN) is never among them. Columns as
    ``contacts_frame``."""
    i, j = np.triu_indices(len(sequence), k=min_separation)  # row-major: ties keep (i, j) order
    probability = contacts[i, j]
    finite = np.flatnonzero(np.isfinite(probability))
    order = finite[np.argsort(-probability[finite], kind="stable")][: len(sequence)]
    return _pairs(contacts, sequence, numbering, i[order], j[order])


def _pairs(contacts: np.ndarray, sequence: str, numbering: Numbering, i: np.ndarray, j: np.ndarray) -> pd.DataFrame:
    """The pairs (indices ``i``, ``j``) as rows in ``numbering``, their residues and probabilities."""
    letters = np.array(list(sequence))
    return pd.DataFrame({"i": numbering.number(i), "residue_i": letters[i], "j": numbering.number(j),
                         "residue_j": letters[j], "probability": contacts[i, j]})

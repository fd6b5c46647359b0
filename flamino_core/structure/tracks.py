"""Per-residue tracks to paint on a structure: one registry the CLI (``--track``) and the app share.

Each track is a (L,) array over the analysed sequence's positions, computed from model outputs
the caller already has (logits, substitution scores, contacts, one layer's attention, a layer's
representations). ``ChainAlignment.per_residue`` then carries it onto the structure's residues.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..alphabet import STANDARD_AMINO_ACIDS
from ..analysis import amino_acid_probabilities, entropy, pca

CONTACT_PROBABILITY = 0.5  # a predicted contact, for the contact-count track
CONTACT_MIN_SEPARATION = 6  # as in the precision table: closer pairs are not counted


@dataclasses.dataclass(frozen=True)
class Track:
    """A per-residue quantity the structure views can show."""

    name: str  # identifier (``--track`` value)
    label: str  # axis / colour-bar title
    needs: tuple[str, ...]  # model outputs: logits, scores, contacts, attention, representations
    params: tuple[str, ...] = ()  # extra choices: amino_acid, residue, head, component
    pdb_scale: float = 1.0  # multiplier for the PDB B-factor column (two decimals, -99.99..999.99)
    description: str = ""
    signed: bool = False  # a quantity around 0 (scores, PCA): drawn red-blue, centred on 0


TRACKS: dict[str, Track] = {
    track.name: track
    for track in (
        Track("entropy", "entropy (bits)", ("logits",),
              description="Shannon entropy of the predicted amino acids at each position (unmasked pass)"),
        Track("mean-score", "mean substitution score", ("scores",), signed=True,
              description="mean of log p(mt) - log p(wt) over the 19 substitutions at each position"),
        Track("substitution", "substitution score", ("scores",), ("amino_acid",), signed=True,
              description="log p(mt) - log p(wt) for one chosen amino acid at every position"),
        Track("contact-count", "predicted contacts", ("contacts",),
              description=f"partners with p(contact) >= {CONTACT_PROBABILITY} and separation >= {CONTACT_MIN_SEPARATION}"),
        Track("attention", "attention from residue", ("attention",), ("residue", "head"), pdb_scale=100.0,
              description="attention weights from one chosen residue to every residue, one layer, "
                          "one head or the mean of heads (x100 in the PDB B-factor column)"),
        Track("pca", "PCA component", ("representations",), ("component",), signed=True,
              description="projection of each residue's representation on a principal component"),
    )
}


def track_label(
    name: str,
    *,
    amino_acid: str | None = None,
    residue: int | None = None,
    layer: int | None = None,
    head: int | None = None,
    component: int = 1,
    strategy: str | None = None,
    first: int = 1,
) -> str:
    """What a track's values are, with its choices, for a colour bar, a title or the PDB REMARK.

    Takes ``compute_track``'s choices (``residue`` and ``head`` 0-based, as there) plus the layer
    (fair-esm numbering) and the scoring strategy the values came from; heads are written
    1-based and the residue in the sequence's own numbering, whose first residue is ``first``
    (1 unless the record says otherwise): ``attention from residue 17 (layer 6, head 3)``.
    """
    if name not in TRACKS:
        raise ValueError(f"unknown track {name!r}; choose one of {', '.join(TRACKS)}")
    source = f", {strategy}" if strategy else ""
    if name == "mean-score":
        return f"mean substitution score{source}"
    if name == "substitution":
        return f"score of {amino_acid} at each position{source}"
    if name == "attention":
        heads = "mean of heads" if head is None else f"head {head + 1}"
        where = f"layer {layer}, " if layer is not None else ""
        return f"attention from residue {'?' if residue is None else residue + first} ({where}{heads})"
    if name == "pca":
        return f"PC{component}" + (f" of layer {layer}" if layer is not None else "")
    return TRACKS[name].label


def entropy_track(logits: np.ndarray) -> np.ndarray:
    """(L,) entropy in bits of the predicted amino-acid distribution, from (L, vocab) logits."""
    return entropy(amino_acid_probabilities(logits), axis=0)


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


def compute_track(
    name: str,
    sequence: str,
    *,
    logits: np.ndarray | None = None,
    scores: np.ndarray | None = None,
    contacts: np.ndarray | None = None,
    attention: np.ndarray | None = None,
    representations: np.ndarray | None = None,
    amino_acid: str | None = None,
    residue: int | None = None,
    head: int | None = None,
    component: int = 1,
) -> np.ndarray:
    """One track by its ``TRACKS`` name, from whichever model outputs it needs.

    Args:
      name: a key of ``TRACKS``.
      sequence: the analysed sequence (L residues).
      logits: (L, vocab); scores: (L, 20); contacts: (L, L); attention: (H, L+2, L+2) of the
        chosen layer; representations: (L, D) of the chosen layer.
      amino_acid, residue (0-based), head (0-based, None = mean), component (1-based): the
        track's own choices (``Track.params``).

    Returns:
      (L,) float64 values.

    Raises:
      ValueError: an unknown track, a missing input (naming it) or a bad choice.
    """
    if name not in TRACKS:
        raise ValueError(f"unknown track {name!r}; choose one of {', '.join(TRACKS)}")
    given = {"logits": logits, "scores": scores, "contacts": contacts, "attention": attention,
             "representations": representations}
    missing = [need for need in TRACKS[name].needs if given[need] is None]
    if missing:
        raise ValueError(f"the {name} track needs {', '.join(missing)}")
    if name == "entropy":
        values = entropy_track(logits)
    elif name == "mean-score":
        values = mean_score_track(scores, sequence)
    elif name == "substitution":
        if amino_acid is None:
            raise ValueError("the substitution track needs the amino acid to substitute")
        values = substitution_track(scores, amino_acid)
    elif name == "contact-count":
        values = contact_count_track(contacts)
    elif name == "attention":
        if residue is None:
            raise ValueError("the attention track needs the residue the attention comes from")
        values = attention_track(attention, residue, head)
    else:
        values = pca_track(representations, component)
    values = np.asarray(values, dtype=np.float64)
    if values.shape != (len(sequence),):
        raise ValueError(f"the {name} track has {values.shape[0]} values for a sequence of {len(sequence)} residues")
    return values

"""A predicted structure as NumPy arrays (``FoldedProtein``) and the padding of lengths that share
a compilation: what the pages, the store and the PDB writer read, importable without JAX (the
app's pages stay light; ``predict.py`` runs the model)."""

from __future__ import annotations

import dataclasses

import numpy as np

from flamino_core.model.esmfold import residue_constants as rc

CA = rc.ATOM_ORDER["CA"]
PAD_TO = 64  # residues: lengths 1-64 share one compilation, 65-128 the next, ...


@dataclasses.dataclass(frozen=True)
class FoldedProtein:
    """One predicted structure.

    sequence: the residues folded (uppercase). aatype: (L,) AlphaFold indices.
    atom37: (L, 37, 3) Angstrom; atom37_exists: (L, 37).
    plddt: (L, 37) expected lDDT in [0, 1] per atom slot (the reference's scale; x100 in PDB files).
    pae: (L, L) predicted aligned error in Angstrom; ptm: predicted TM-score.
    """

    sequence: str
    aatype: np.ndarray
    atom37: np.ndarray
    atom37_exists: np.ndarray
    plddt: np.ndarray
    pae: np.ndarray
    ptm: float

    @property
    def residue_plddt(self) -> np.ndarray:
        """(L,) pLDDT of each residue's CA in [0, 1] (the value AlphaFold's per-residue plots show)."""
        return self.plddt[:, CA]

    @property
    def mean_plddt(self) -> float:
        """Mean over every atom that exists, as the esm repository's ``mean_plddt`` (in [0, 1])."""
        return float(np.sum(self.plddt * self.atom37_exists) / np.sum(self.atom37_exists))


def padded_length(length: int, multiple: int | None) -> int:
    """The length a sequence is padded to so that lengths share compilations (None: its own)."""
    return length if multiple is None else -(-length // multiple) * multiple

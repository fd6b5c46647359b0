"""``FoldedComplex``: one ESMFold2 prediction (a complex of one or more protein chains) as NumPy
arrays, importable without JAX so file writers and pages stay light. Built by
``model/esmfold2/predict.py``; written as mmCIF/PDB by ``structure/complex_files.py``."""

from __future__ import annotations

import dataclasses

import numpy as np

from flamino_core.model.esmfold2.residues import HEAVY_ATOMS, ONE_TO_THREE


@dataclasses.dataclass(frozen=True)
class FoldedComplex:
    """The best-ranked diffusion sample of a fold (by pTM, as the reference's ``_rank_samples``) and
    its confidences. pLDDT is on the reference's 0-1 scale here (files write it x 100).

    Token arrays are per residue, in chain order; atom arrays per real atom (padding dropped), in
    the featuriser's order (each residue's heavy atoms, N CA C O then the side chain)."""

    name: str
    chain_ids: tuple[str, ...]  # 'A', 'B', ... (asym_id 0, 1, ...)
    chain_names: tuple[str, ...]  # what each chain is called (a record id), for the files' entity names
    sequences: tuple[str, ...]
    positions: np.ndarray  # (atoms, 3) Angstrom
    plddt_atoms: np.ndarray  # (atoms,) 0-1
    plddt: np.ndarray  # (residues,) 0-1, the mean over each residue's atoms
    pae: np.ndarray  # (residues, residues) Angstrom
    ptm: float
    iptm: float  # 0 for a single chain (no inter-chain pair), as the reference computes it
    chain_pair_iptm: np.ndarray  # (chains, chains)
    complex_plddt: float  # mean over every atom, 0-1
    sample: int = 0  # which diffusion sample this is
    samples: int = 1  # how many were drawn

    @property
    def length(self) -> int:
        return sum(len(sequence) for sequence in self.sequences)

    @property
    def mean_plddt(self) -> float:
        """Mean pLDDT over every atom (0-1), the reference's ``complex_plddt``."""
        return self.complex_plddt

    def residues(self) -> list[tuple[int, int, str]]:
        """``(chain index, residue number from 1, three-letter name)`` per residue."""
        return [(c, i + 1, ONE_TO_THREE.get(letter, "UNK"))
                for c, sequence in enumerate(self.sequences) for i, letter in enumerate(sequence)]

    def atoms(self) -> list[tuple[int, int, str, str]]:
        """``(chain index, residue index over the complex, residue name, atom name)`` per atom, in the
        order of ``positions``."""
        out = []
        for token, (chain, _, residue) in enumerate(self.residues()):
            out += [(chain, token, residue, atom) for atom in HEAVY_ATOMS[residue]]
        return out

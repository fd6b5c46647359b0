"""Align a chain's residues to the analysed sequence, and choose the chain that matches it.

Residue numbers in a structure are not sequence positions (numbering may start anywhere, skip
numbers, carry insertion codes, or follow a homologue's scheme such as chymotrypsin numbering
in 1GBT), and a structure may cover only part of the sequence. So every comparison goes
through a pairwise alignment of the chain's one-letter sequence to the analysed sequence, and
only aligned residue pairs are compared.

Scoring: BLOSUM62 with gap open 10 and extend 0.5, end gaps free, in global mode. These are the
EMBOSS needle defaults (which do not penalise end gaps either): a chain that covers a fragment
of the sequence aligns without paying for the unobserved termini, while an internal gap (missing
loop residues) costs what needle charges. BLOSUM62 rather than an identity matrix, so a
homologue's structure or a point mutant still aligns sensibly.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np
from Bio.Align import PairwiseAligner, substitution_matrices

from flamino_core.structure.files.reading import (
    ChainResidues, ParsedStructure, StructureError, chain_residues, protein_chains,
)

GAP_OPEN, GAP_EXTEND = -10.0, -0.5
# Any identity at or above this is the same protein (or a point mutant), whatever the length.
SAME_PROTEIN_IDENTITY = 0.9


@functools.cache
def _aligner() -> PairwiseAligner:
    aligner = PairwiseAligner(mode="global", substitution_matrix=substitution_matrices.load("BLOSUM62"))
    aligner.open_gap_score, aligner.extend_gap_score = GAP_OPEN, GAP_EXTEND
    aligner.end_gap_score = 0.0
    return aligner


def _blosum_letters(sequence: str) -> str:
    # BLOSUM62 has no row for U (selenocysteine) or O (pyrrolysine); score them as X. The
    # replacement is one letter for one, so alignment indices stay sequence positions.
    return sequence.translate(str.maketrans("UO", "XX"))


@dataclasses.dataclass(frozen=True, eq=False)  # holds arrays: compare fields, not objects
class ChainAlignment:
    """A chain aligned to the analysed sequence.

    ``residue_at[i]`` is the index into ``chain``'s residues aligned to sequence position i
    (0-based), or -1 where no residue is aligned (not in the structure, or a gap).
    """

    sequence: str
    chain: ChainResidues
    residue_at: np.ndarray  # (L,) int
    score: float
    n_aligned: int  # aligned residue pairs (columns without a gap)
    n_identical: int
    text: str  # the alignment as Biopython prints it (sequence on top, chain below)

    @property
    def identity(self) -> float:
        """Identical pairs / aligned pairs (0 when nothing aligns)."""
        return self.n_identical / self.n_aligned if self.n_aligned else 0.0

    @property
    def coverage(self) -> float:
        """Fraction of the sequence's positions that have an aligned residue."""
        return self.n_aligned / len(self.sequence) if self.sequence else 0.0

    @property
    def chain_id(self) -> str:
        return self.chain.chain_id

    def per_position(self, values: np.ndarray, fill: float = np.nan) -> np.ndarray:
        """(N,) per-residue values of the chain -> (L,) per sequence position, ``fill`` elsewhere."""
        values = np.asarray(values, dtype=np.float64)
        out = np.full(len(self.sequence), fill, dtype=np.float64)
        aligned = self.residue_at >= 0
        out[aligned] = values[self.residue_at[aligned]]
        return out

    def per_residue(self, values: np.ndarray, fill: float = np.nan) -> np.ndarray:
        """(L,) per sequence position -> (N,) per residue of the chain, ``fill`` for unaligned residues."""
        values = np.asarray(values, dtype=np.float64)
        if values.shape != (len(self.sequence),):
            raise ValueError(f"expected {len(self.sequence)} values (one per sequence position), "
                             f"got shape {values.shape}")
        out = np.full(len(self.chain), fill, dtype=np.float64)
        aligned = np.flatnonzero(self.residue_at >= 0)
        out[self.residue_at[aligned]] = values[aligned]
        return out

    def describe(self) -> str:
        """``chain A: 223 residues, 223 aligned, identity 100.0%, coverage 95.3% of the sequence``."""
        return (
            f"chain {self.chain_id}: {len(self.chain)} residues, {self.n_aligned} aligned, "
            f"identity {self.identity:.1%}, coverage {self.coverage:.1%} of the sequence"
        )


def align_chain(sequence: str, chain: ChainResidues) -> ChainAlignment:
    """Align one chain's residues to the sequence (see the module docstring for the scoring).

    Of several optimal alignments Biopython's first is taken, so the result is deterministic.
    """
    if not sequence:
        raise ValueError("the sequence is empty")
    target, query = _blosum_letters(sequence), _blosum_letters(chain.sequence)
    alignment = _aligner().align(target, query)[0]
    residue_at = np.full(len(sequence), -1, dtype=np.int64)
    for (t_start, t_end), (q_start, _) in zip(*alignment.aligned):
        residue_at[t_start:t_end] = np.arange(q_start, q_start + t_end - t_start)
    aligned = np.flatnonzero(residue_at >= 0)
    chain_letters = np.array(list(chain.sequence))
    identical = int(np.sum(np.array(list(sequence))[aligned] == chain_letters[residue_at[aligned]]))
    return ChainAlignment(
        sequence=sequence,
        chain=chain,
        residue_at=residue_at,
        score=float(alignment.score),
        n_aligned=len(aligned),
        n_identical=identical,
        text=str(alignment),
    )


def identity_needed(n_aligned: int) -> float:
    """The identity an alignment of ``n_aligned`` pairs needs before we compare structures.

    Rost's curve for the twilight zone (Rost 1999, Protein Eng. 12:85): pairs above
    ``480 * n^(-0.32 (1 + exp(-n / 1000)))`` percent identity are homologous (about 29% for 100
    aligned residues, 21% for 250), capped at ``SAME_PROTEIN_IDENTITY`` so a short chain of the
    very same peptide always qualifies. A flat threshold would not do: with free end gaps an
    unrelated 10-residue peptide or a 40-residue fragment finds 35-40% identity somewhere in a
    protein (measured on the files in shared/structures).
    """
    if n_aligned <= 0:
        return math.inf
    curve = 4.80 * n_aligned ** (-0.32 * (1 + math.exp(-n_aligned / 1000)))
    return min(SAME_PROTEIN_IDENTITY, curve)


def is_comparable(alignment: ChainAlignment, min_identity: float | None = None) -> bool:
    """Whether the alignment is good enough to compare the structure with the sequence.

    Args:
      min_identity: a fixed threshold instead of ``identity_needed`` (the user's choice).
    """
    if alignment.n_aligned == 0:
        return False
    needed = identity_needed(alignment.n_aligned) if min_identity is None else min_identity
    return alignment.identity >= needed


def choose_chain(
    parsed: ParsedStructure,
    sequence: str,
    chain_id: str | None = None,
    model_index: int = 0,
    min_identity: float | None = None,
) -> ChainAlignment:
    """The chain to compare with the sequence, aligned to it.

    Args:
      parsed: the structure.
      sequence: the analysed sequence.
      chain_id: a chain to use; None picks the protein chain with the most identical aligned
        residues (then the higher alignment score, then the first in the file: in a homo-oligomer
        such as 2BEG, chain A).
      model_index: 0-based model.
      min_identity: see ``is_comparable``.

    Raises:
      StructureError: no such model or chain, no protein chain, or an alignment too poor to
        compare (the message gives the identity, the aligned residues and the threshold).
    """
    if chain_id is not None:
        candidates = [align_chain(sequence, chain_residues(parsed, chain_id, model_index))]
    else:
        chains = protein_chains(parsed, model_index)
        if not chains:
            listing = "; ".join(summary.describe() for summary in parsed.chains(model_index))
            raise StructureError(f"{parsed.name} has no protein chain in model {model_index} ({listing})")
        candidates = [align_chain(sequence, chain) for chain in chains]
    # max() keeps the first of equal keys, so ties go to the chain that comes first in the file.
    best = max(candidates, key=lambda a: (a.n_identical, a.score))
    if not is_comparable(best, min_identity):
        needed = identity_needed(best.n_aligned) if min_identity is None else min_identity
        raise StructureError(
            f"{parsed.name} chain {best.chain_id} does not match the sequence well enough to compare: "
            f"identity {best.identity:.1%} over {best.n_aligned} aligned residues "
            f"(at least {needed:.1%} needed{'' if min_identity is not None else ' for that many residues'})"
        )
    return best

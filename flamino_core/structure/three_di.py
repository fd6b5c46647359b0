"""Foldseek 3Di letters of a structure's chain, aligned to the record (SaProt's structure tokens).

The letters come from ``mini3di`` (a NumPy port of Foldseek's 3Di encoder: the same descriptors
and network weights) over the chain's N, C-alpha, C and C-beta atoms; disordered atoms read as
Foldseek reads them (the last alternate location, mini3di's ``disordered_atom="last"``). The
chain is aligned to the record as contacts are (``align.align_chain``): a record residue the
structure lacks gets ``#``, as do residues without the backbone the descriptors need (Foldseek
gives those and each chain's first and last residue its filler state, ``D``; kept as it writes).

Predicted structures (AlphaFold, ESMFold: pLDDT in the B-factor column) have residues with
pLDDT < 70 masked to ``#``, as SaProt's ``get_struc_seq(plddt_mask=...)`` and ProteinGym's SaProt
baseline do (a residue's pLDDT: the mean over its atoms, SaProt's ``extract_plddt``). A file is
taken as predicted where ProteinGym takes it so: its text names AlphaFold (SaProt's
``plddt_mask="auto"``), or ESMFold; callers may say so themselves.
"""

from __future__ import annotations

import dataclasses
import gzip
import os
from pathlib import Path

import numpy as np

from flamino_core.numbering import Numbering
from flamino_core.structure.align import choose_chain
from flamino_core.structure.files.reading import MAX_STRUCTURE_BYTES, ParsedStructure, chain_residues, read_structure

PLDDT_THRESHOLD = 70.0  # SaProt's and ProteinGym's
UNKNOWN = "#"
BACKBONE = ("N", "CA", "C", "CB")


@dataclasses.dataclass(frozen=True)
class StructureTokens:
    """One 3Di letter (lower case) or ``#`` per record residue, and where they came from."""

    letters: str
    structure: str  # the file's name; "" without a structure
    chain_id: str
    predicted: bool  # pLDDT < 70 masked
    low_confidence: int  # residues masked for pLDDT < 70
    masked: tuple[int, ...] = ()  # which: their 0-based positions in the record (#66 D6)

    @property
    def structure_aware(self) -> int:
        """Residues with a 3Di letter (not ``#``)."""
        return sum(letter != UNKNOWN for letter in self.letters)

    def describe(self) -> str:
        """``1GBT.cif chain A: 223 of 230 residues structure-aware`` (and the pLDDT masking)."""
        if not self.structure:
            return f"no structure: all {len(self.letters)} residues '#' (sequence only)"
        masked = f"; {self.low_confidence} masked for pLDDT < {PLDDT_THRESHOLD:g}" if self.predicted else ""
        return (f"{self.structure} chain {self.chain_id}: {self.structure_aware} of {len(self.letters)} "
                f"residues structure-aware{masked}")

    @property
    def all_masked(self) -> bool:
        """Every residue the structure has was masked for pLDDT < 70: the scoring is sequence-only."""
        return self.predicted and self.low_confidence > 0 and self.structure_aware == 0

    def masked_ranges(self, numbering: Numbering = Numbering()) -> str:
        """Which positions were masked for pLDDT < 70, as runs in the record's numbering
        (``1-12, 30-42``); "" when none."""
        runs, start = [], None
        for k, position in enumerate(self.masked):
            if start is None:
                start = position
            if k + 1 == len(self.masked) or self.masked[k + 1] != position + 1:
                first, last = numbering.number(start), numbering.number(position)
                runs.append(f"{first}" if first == last else f"{first}-{last}")
                start = None
        return ", ".join(runs)


def no_structure(sequence: str) -> StructureTokens:
    """Every residue ``#``: SaProt reading the sequence alone."""
    return StructureTokens(UNKNOWN * len(sequence), "", "", False, 0)


def chain_letters(parsed: ParsedStructure, chain_id: str, model_index: int = 0) -> tuple[str, np.ndarray]:
    """(Foldseek's 3Di string of the chain's amino acids as ``chain_residues`` lists them, upper
    case as Foldseek writes it; each residue's mean B-factor)."""
    import mini3di

    residues = chain_residues(parsed, chain_id, model_index)
    chain = parsed.model(model_index)[chain_id]
    coords = np.full((4, len(residues), 3), np.nan, np.float32)
    bfactors = np.zeros(len(residues))
    for i, residue_id in enumerate(residues.residue_ids):
        atoms = [_last_alternate(atom) for atom in chain[residue_id].get_atoms()]
        for atom in atoms:
            if atom.get_name() in BACKBONE:
                coords[BACKBONE.index(atom.get_name()), i] = atom.coord
        bfactors[i] = np.mean([atom.get_bfactor() for atom in atoms])
    encoder = mini3di.Encoder()
    states = encoder.encode_atoms(ca=coords[1], cb=coords[3], n=coords[0], c=coords[2])
    return encoder.build_sequence(states), bfactors


def _last_alternate(atom):
    # Foldseek reads the last alternate location of a disordered atom (mini3di's "last").
    return atom.disordered_get_list()[-1] if atom.is_disordered() else atom


def is_predicted(text: str) -> bool:
    """Whether a structure file's text says it is a prediction whose B-factors are pLDDT."""
    lowered = text.lower()
    return "alphafold" in lowered or "esmfold" in lowered


def is_predicted_structure(parsed: ParsedStructure) -> bool:
    """``is_predicted`` of what the parser kept of the file's header (an AlphaFold DB PDB file's
    TITLE, an mmCIF's ``_struct.title``): for a structure held without its text (the app)."""
    return is_predicted(str(parsed.structure.header))


def structure_tokens(sequence: str, parsed: ParsedStructure, chain_id: str | None = None, predicted: bool = False,
                     model_index: int = 0) -> StructureTokens:
    """The record's 3Di letters from one chain of a structure.

    Args:
      sequence: the record's residues.
      parsed: the structure (``reading.read_structure`` or ``parse_structure_bytes``).
      chain_id: the chain to read; None: the chain most like the record (``align.choose_chain``).
      predicted: the B-factors are pLDDT (``is_predicted`` of the file's text): mask < 70.

    Raises:
      StructureError: no such chain, or none like the record (``align.choose_chain`` says why).
    """
    alignment = choose_chain(parsed, sequence, chain_id, model_index)
    letters, bfactors = chain_letters(parsed, alignment.chain_id, model_index)
    keep = np.array([c.lower() for c in letters])
    low = bfactors < PLDDT_THRESHOLD if predicted else np.zeros(len(letters), bool)
    keep[low] = UNKNOWN
    out = np.full(len(sequence), UNKNOWN)
    aligned = alignment.residue_at >= 0
    out[aligned] = keep[alignment.residue_at[aligned]]
    masked = np.flatnonzero(aligned & low[np.maximum(alignment.residue_at, 0)])
    return StructureTokens("".join(out), parsed.name, alignment.chain_id, predicted, len(masked),
                           tuple(int(p) for p in masked))


def read_structure_tokens(sequence: str, path: str | os.PathLike, chain_id: str | None = None) -> StructureTokens:
    """``structure_tokens`` of a PDB or mmCIF file (gzipped or not), predicted or not as its
    text says (``is_predicted``): what ``flamino variants --structure`` reads."""
    parsed = read_structure(path)
    data = Path(path).read_bytes()[:MAX_STRUCTURE_BYTES]
    text = (gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data).decode("latin-1")
    return structure_tokens(sequence, parsed, chain_id, predicted=is_predicted(text))

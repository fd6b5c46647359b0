"""A predicted structure as PDB text, the way ESMFold's files are written: OpenFold's ``to_pdb``
record layout (one chain ``A``, residues numbered from 1, atoms in atom37 order, occupancy 1.00)
with pLDDT on the 0-100 scale in the B-factor column, as the esm repository's ``esmfold.py``
(``100 * categorical_lddt``) and the AlphaFold database write it, and as viewers colour by it.

transformers' ``EsmForProteinFolding.output_to_pdb`` writes the same records but pLDDT on its
0-1 scale (two decimals, so 0.01 steps): its B-factors x 100 are ours to within that rounding.
"""

from __future__ import annotations

from flamino_core.model.esmfold import residue_constants as rc
from flamino_core.model.esmfold.predict import FoldedProtein
from flamino_core.model.esmfold.residue_tables import atom_types

PLDDT_SCALE = 100.0  # the model's [0, 1] to the 0-100 biologists read


def atom_line(serial: int, atom: str, residue: str, chain: str, number: int, xyz, b_factor: float) -> str:
    """One ATOM record, columns as the PDB format (and OpenFold) lay them out."""
    name = atom if len(atom) == 4 else f" {atom}"
    return (f"{'ATOM':<6}{serial:>5} {name:<4}{'':>1}{residue:>3} {chain:>1}{number:>4}{'':>1}   "
            f"{xyz[0]:>8.3f}{xyz[1]:>8.3f}{xyz[2]:>8.3f}{1.0:>6.2f}{b_factor:>6.2f}          {atom[0]:>2}{'':>2}")


def to_pdb(protein: FoldedProtein, chain: str = "A", remark: str | None = None) -> str:
    """The PDB text of ``protein``: every atom that exists for its residue type (none for 'X'),
    pLDDT x 100 per atom in the B-factor column, then TER and END."""
    lines = [f"REMARK {remark}"] if remark else []
    serial = 1
    for i, restype in enumerate(protein.aatype):
        residue = rc.three_letter(int(restype))
        for slot, atom in enumerate(atom_types):
            if protein.atom37_exists[i, slot] < 0.5:
                continue
            lines.append(atom_line(serial, atom, residue, chain, i + 1, protein.atom37[i, slot],
                                   PLDDT_SCALE * float(protein.plddt[i, slot])))
            serial += 1
    last = len(protein.aatype)
    lines.append(f"{'TER':<6}{serial:>5}      {rc.three_letter(int(protein.aatype[-1])):>3} {chain:>1}{last:>4}")
    lines += ["END", ""]
    return "\n".join(lines)

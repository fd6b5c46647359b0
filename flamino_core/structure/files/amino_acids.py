"""Which residues of a chain are amino acids, the letter each is read as, and the notes on what
was read specially (modified, unknown or token-less amino acids, microheterogeneity, residues
without a C-alpha). The rules are listed in ``reading``'s docstring."""

from __future__ import annotations

import dataclasses
from collections import Counter

from Bio.Data import IUPACData, PDBData

from flamino_core.alphabet import AA_TO_IDX
from flamino_core.structure.contact_atoms import BACKBONE, CA_ONLY, VIRTUAL_CB

# Three-letter code -> one letter. Biopython's PDB table knows ~1000 modified amino acids
# (MSE -> M, SEP -> S, AIB -> A ...) but not selenocysteine / pyrrolysine / UNK, which the
# IUPAC table has (SEC -> U, PYL -> O; ESM-2 has tokens for both).
AMINO_ACID_LETTERS: dict[str, str] = {
    **{code.upper(): letter for code, letter in IUPACData.protein_letters_3to1_extended.items()},
    **PDBData.protein_letters_3to1_extended,
    "UNK": "X",
}
NUCLEOTIDES = frozenset(PDBData.nucleic_letters_3to1_extended)


def is_amino_acid(residue) -> bool:
    """A residue with a C-alpha whose name is in the table, or that carries the N, CA, C backbone."""
    name = residue.get_resname().strip().upper()
    if residue.id[0] == "W" or "CA" not in residue:
        return False  # the calcium ion (residue CA, atom CA) has no name in the table and no N/C
    return name in AMINO_ACID_LETTERS or all(atom in residue for atom in BACKBONE)


def lacks_ca(residue) -> bool:
    """An amino acid by name that has no C-alpha atom (cannot be placed)."""
    return residue.id[0] != "W" and residue.get_resname().strip().upper() in AMINO_ACID_LETTERS and "CA" not in residue


@dataclasses.dataclass
class SpecialResidues:
    """What reading one chain met that is not a plain amino acid, for the chain's notes."""

    unknown: Counter = dataclasses.field(default_factory=Counter)  # not in Biopython's table: X
    modified: Counter = dataclasses.field(default_factory=Counter)  # "MSE as M"
    no_token: Counter = dataclasses.field(default_factory=Counter)  # "XLE (J)": read as X
    no_ca: list[str] = dataclasses.field(default_factory=list)  # "GLY 12": left out
    mixed: list[str] = dataclasses.field(default_factory=list)  # microheterogeneity, from reading's _major_form

    def letter_for(self, name: str) -> str:
        """The one-letter code an amino acid named ``name`` is read as, counted if special."""
        letter = AMINO_ACID_LETTERS.get(name, "X")
        if name not in AMINO_ACID_LETTERS:
            self.unknown[name] += 1
        elif letter not in AA_TO_IDX:  # J (XLE): neither ESM-2 nor BLOSUM62 has it
            self.no_token[f"{name} ({letter})"] += 1
            letter = "X"
        elif name not in PDBData.protein_letters_3to1:
            self.modified[f"{name} as {letter}"] += 1
        return letter

    def notes(self, kinds: list[str]) -> list[str]:
        """One line per kind of special reading, given the contact atom kind of every residue."""
        notes = []
        if self.modified:
            notes.append("modified residues read as their parent amino acid: " + listed_counts(self.modified))
        if self.unknown:
            notes.append("amino acids Biopython's table does not know, read as X: " + listed_counts(self.unknown))
        if self.no_token:
            notes.append("amino acids whose letter ESM-2 has no token for, read as X: " + listed_counts(self.no_token))
        if self.mixed:
            notes.append("two residue types at one position (microheterogeneity), the one with the highest "
                         "occupancy read: " + "; ".join(self.mixed))
        if self.no_ca:
            notes.append("left out, no C-alpha atom: " + ", ".join(self.no_ca))
        kind_counts = Counter(kinds)
        if kind_counts[VIRTUAL_CB]:
            notes.append(f"{kind_counts[VIRTUAL_CB]} residue(s) without a CB atom: C-beta placed from N, CA, C")
        if kind_counts[CA_ONLY]:
            notes.append(f"{kind_counts[CA_ONLY]} residue(s) without a CB atom or the N, CA, C to place one: "
                         "C-alpha used for contacts")
        return notes


def listed_counts(counter: Counter) -> str:
    """``MSE as M x3, SEP as S``: each name, with its count where above one."""
    return ", ".join(f"{name} x{count}" if count > 1 else name for name, count in counter.items())

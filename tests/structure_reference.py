"""Independent readers of the real structures, for checking ``flamino_core.structure.files.reading`` and friends.

They take another path than the code under test: mmCIF through ``Bio.PDB.MMCIF2Dict`` (the raw
``_atom_site`` table, no structure builder), PDB through fixed-column text parsing as the
format's specification lays it out. No classification, no alignment, no virtual atoms: the
tests decide what they compare.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
from Bio.PDB.MMCIF2Dict import MMCIF2Dict

STRUCTURES = Path(__file__).resolve().parents[2] / "shared" / "structures"
STANDARD = {
    "ALA": "A", "ARG": "R", "ASN": "N", "ASP": "D", "CYS": "C", "GLN": "Q", "GLU": "E", "GLY": "G",
    "HIS": "H", "ILE": "I", "LEU": "L", "LYS": "K", "MET": "M", "PHE": "F", "PRO": "P", "SER": "S",
    "THR": "T", "TRP": "W", "TYR": "Y", "VAL": "V",
}  # fmt: skip


@dataclasses.dataclass
class RefResidue:
    label: str  # number + insertion code, as the file writes them
    name: str
    hetero: bool
    atoms: dict[str, np.ndarray]
    bfactors: dict[str, float]


def read_reference(path: Path, chain: str, model: int = 1) -> list[RefResidue]:
    """The residues of one chain of one model (1-based, as files number them), in file order."""
    rows = _mmcif_rows(path, model) if path.suffix == ".cif" else _pdb_rows(path, model)
    residues: dict[tuple, RefResidue] = {}
    for row in rows:
        if row["chain"] != chain:
            continue
        key = (row["number"], row["icode"])
        residue = residues.setdefault(
            key, RefResidue(f"{row['number']}{row['icode']}", row["name"], row["hetero"], {}, {})
        )
        residue.atoms.setdefault(row["atom"], row["xyz"])  # first altloc; the real files have none
        residue.bfactors.setdefault(row["atom"], row["b"])
    return list(residues.values())


def _mmcif_rows(path: Path, model: int):
    table = MMCIF2Dict(str(path))
    columns = {
        key: table[f"_atom_site.{key}"]
        for key in ("group_PDB", "auth_asym_id", "auth_seq_id", "pdbx_PDB_ins_code", "auth_comp_id",
                    "auth_atom_id", "Cartn_x", "Cartn_y", "Cartn_z", "B_iso_or_equiv", "pdbx_PDB_model_num")
    }  # fmt: skip
    for k in range(len(columns["group_PDB"])):
        if int(columns["pdbx_PDB_model_num"][k]) != model:
            continue
        icode = columns["pdbx_PDB_ins_code"][k]
        yield {
            "chain": columns["auth_asym_id"][k],
            "number": int(columns["auth_seq_id"][k]),
            "icode": "" if icode in ("?", ".") else icode,
            "name": columns["auth_comp_id"][k],
            "hetero": columns["group_PDB"][k] == "HETATM",
            "atom": columns["auth_atom_id"][k].strip('"'),
            "xyz": np.array([float(columns[f"Cartn_{c}"][k]) for c in "xyz"]),
            "b": float(columns["B_iso_or_equiv"][k]),
        }


def _pdb_rows(path: Path, model: int):
    yield from pdb_text_rows(path.read_text(), model)


def pdb_text_rows(text: str, model: int = 1):
    """ATOM/HETATM records of one model of PDB-format text (all of it when there is no MODEL)."""
    current = 1
    for line in text.splitlines():
        if line.startswith("MODEL"):
            current = int(line[10:14])
        if not line.startswith(("ATOM  ", "HETATM")) or current != model:
            continue
        yield {
            "chain": line[21],
            "number": int(line[22:26]),
            "icode": line[26].strip(),
            "name": line[17:20].strip(),
            "hetero": line.startswith("HETATM"),
            "atom": line[12:16].strip(),
            "xyz": np.array([float(line[30:38]), float(line[38:46]), float(line[46:54])]),
            "b": float(line[60:66]),
        }


def entity_sequences(path: Path) -> list[str]:
    """The deposited (canonical) sequences of an mmCIF file's polymer entities."""
    table = MMCIF2Dict(str(path))
    return [s.replace("\n", "") for s in table["_entity_poly.pdbx_seq_one_letter_code_can"]]


def seqres(path: Path, chain: str) -> list[str]:
    """Residue names of a chain's SEQRES records (the deposited sequence of a PDB file)."""
    names = []
    for line in path.read_text().splitlines():
        if line.startswith("SEQRES") and line[11] == chain:
            names += line[19:70].split()
    return names

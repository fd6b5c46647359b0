"""The hostile uploads of issue #26, written once: ``test_hosted_server_attacks.py`` checks that a
hosted server refuses each within the issue's time and memory bars, and ``make loadtest
--attacker`` (``loadtest/attacker.py``) repeats the same files while normal sessions work.

Each function writes its file into ``folder`` and returns its path. Deterministic (fixed seeds).
"""

from __future__ import annotations

import gzip
import random
import zlib
from pathlib import Path


def digits(folder: Path) -> Path:
    """999,000 digits as a mutation list (a 40 kB one cost three 30 s health time-outs)."""
    file = folder / "digits.txt"
    file.write_text("1" * 999_000)
    return file


def fasta_bomb(folder: Path) -> Path:
    """A ~260 kB gzipped FASTA inflating to 270 MB of two-letter lines."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    file = folder / "bomb.fa.gz"
    file.write_bytes(b"".join(packer.compress(b"AB\n" * 1_000_000) for _ in range(90)) + packer.flush())
    return file


def structure_bomb(folder: Path, structure: Path) -> Path:
    """A ~981 kB gzipped PDB of 1.35 M atoms: 13,500 models of ``structure``'s first 100 atoms."""
    atoms = "\n".join([line for line in structure.read_text().splitlines() if line.startswith("ATOM  ")][:100])
    text = "".join(f"MODEL     {m + 1:4d}\n{atoms}\nENDMDL\n" for m in range(13_500)) + "END\n"
    file = folder / "models.pdb.gz"
    file.write_bytes(gzip.compress(text.encode(), 6))
    return file


def long_wild_type_dms(folder: Path) -> Path:
    """A 900 kB DMS table (the review's was 990 kB) whose mutated_sequence derives a 100,000-residue wild type."""
    rng = random.Random(26)
    wild = "".join(rng.choice("ACDEFGHIKLMNPQRSTVWY") for _ in range(100_000))
    rows = ["mutant,DMS_score,mutated_sequence"]
    for row in range(9):
        target = "W" if wild[row] != "W" else "A"
        rows.append(f"{wild[row]}{row + 1}{target},{row},{wild[:row]}{target}{wild[row + 1:]}")
    file = folder / "long_wild_type.csv"
    file.write_text("\n".join(rows) + "\n")
    return file


def long_wild_type_labels(folder: Path, rows: int = 40_000) -> Path:
    """A ~330 kB labelled table for the Predict page (issue #33): one row whose mutated_sequence
    derives a 50,000-residue wild type, then ``rows`` rows ``A1C,,k`` that each became that whole
    sequence (a 340 kB one took the server from 0.86 to 4.1 GiB)."""
    rng = random.Random(33)
    wild = "A" + "".join(rng.choice("ACDEFGHIKLMNPQRSTVWY") for _ in range(49_999))
    file = folder / "long_wild_type_labels.csv"
    file.write_text("mutant,mutated_sequence,y\n" + f"A1C,C{wild[1:]},1\n" + "A1C,,k\n" * rows)
    return file


def wide_table(folder: Path) -> Path:
    """960 kB of commas as a table's header (302 s before the Predict page's target picker, +760 MiB)."""
    file = folder / "wide.csv"
    file.write_text("mutant" + "," * 960_000 + "\nA1C\n")
    return file


def duplicate_rows(folder: Path, rows: int = 6_000, length: int = 600) -> Path:
    """6,000 copies of one mutant of a 600-residue wild type, 60 kB: one model pass, and a one-hot
    fit of 6,000 rows x 12,000 columns that ran ~49 minutes holding the heavy-job slot."""
    rng = random.Random(33)
    wild = "A" + "".join(rng.choice("ACDEFGHIKLMNPQRSTVWY") for _ in range(length - 1))
    lines = ["mutant,mutated_sequence,y", f"A1C,C{wild[1:]},0"] + [f"A1C,,{row % 97}" for row in range(1, rows)]
    file = folder / "duplicate_rows.csv"
    file.write_text("\n".join(lines) + "\n")
    return file


MUTATED = "MKVLAAGIVGLLLAAQPAMA"  # the record the mutation-list attack is scored against


def valid_mutations(folder: Path, entries: int = 200_000) -> Path:
    """~900 kB of valid substitutions of ``MUTATED``, one a line: 200,000 entries were scored in
    90-200 s and kept +250 MiB per session (issue #33)."""
    others = "ACDEFGHIKLMNPQRSTVWY"
    lines = []
    for n in range(entries):
        position = n % len(MUTATED)
        target = others[(n // len(MUTATED)) % 20]
        target = target if target != MUTATED[position] else "W"
        lines.append(f"{MUTATED[position]}{position + 1}{target}")
    file = folder / "mutations.txt"
    file.write_text("\n".join(lines) + "\n")
    return file


# --- issue #51: tables whose rows are wider than their header; structures past their chain cap ------------
def wide_row_table(folder: Path, commas: int = 990_000) -> Path:
    """A 990 kB labelled table: a 3-column header and one data row of ``commas`` commas (the Predict
    page was still parsing after 901 s at 8.25 GB: pandas made the extra fields an index)."""
    file = folder / "wide_row.csv"
    file.write_bytes(b"mutant,mutated_sequence,y\nA1C" + b"," * commas + b"\n")
    return file


def comma_table(folder: Path, header: str = "mutant,DMS_score,mutated_sequence", commas: int = 60_000) -> Path:
    """A 60 kB table of commas under a short header (35 s of page work for a DMS table, 27 s for a
    metadata table colouring the Embeddings map)."""
    file = folder / "commas.csv"
    file.write_bytes(header.encode() + b"\nx" + b"," * commas + b"\n")
    return file


_CIF_COLUMNS = ("group_PDB", "id", "type_symbol", "label_atom_id", "label_alt_id", "label_comp_id",
                "pdbx_PDB_ins_code", "Cartn_x", "Cartn_y", "Cartn_z", "occupancy", "B_iso_or_equiv", "auth_seq_id",
                "auth_asym_id", "pdbx_PDB_model_num")  # what Biopython's MMCIFParser reads: 78,000 atoms in 4.1 MB


def _mmcif(rows: list[str]) -> str:
    header = "".join(f"_atom_site.{column}\n" for column in _CIF_COLUMNS)
    return "data_hostile\n#\nloop_\n" + header + "\n".join(rows) + "\n#\n"


def _cif_row(serial: int, atom: str, residue: str, chain: str, number: int, xyz: tuple[float, float, float]) -> str:
    x, y, z = xyz
    return f"ATOM {serial} {atom[0]} {atom} . {residue} ? {x:.1f} {y:.1f} {z:.1f} 1 0 {number} {chain} 1"


def many_chains_mmcif(folder: Path, chains: int = 15_000) -> Path:
    """An mmCIF of ``chains`` chains of one glycine's C-alpha each (~0.8 MB; 12 s of page work)."""
    rows = [_cif_row(n + 1, "CA", "GLY", f"C{n}", 1, (n % 100 * 4.0, n // 100 * 4.0, 0.0)) for n in range(chains)]
    file = folder / "chains.cif"
    file.write_text(_mmcif(rows))
    return file


def large_mmcif(folder: Path, chains: int = 26, residues: int = 600) -> Path:
    """A gzipped mmCIF of 78,000 atoms (under the hosted 100,000-atom and 5 MB inflated caps):
    ``chains`` helices of ``residues`` alanines, 5 atoms each; 16 copies of such a file in one
    upload were 141 s of page work."""
    import math

    rows, serial = [], 0
    for chain in range(chains):
        for residue in range(1, residues + 1):
            angle, rise = math.radians(100 * residue), 1.5 * residue
            for k, atom in enumerate(("N", "CA", "C", "O", "CB")):
                serial += 1
                xyz = (chain % 6 * 30.0 + 2.3 * math.cos(angle) + 0.5 * k, chain // 6 * 30.0 + 2.3 * math.sin(angle),
                       rise + 0.3 * k)
                rows.append(_cif_row(serial, atom, "ALA", f"H{chain}", residue, xyz))
    file = folder / "large.cif.gz"
    file.write_bytes(gzip.compress(_mmcif(rows).encode(), 6, mtime=0))
    return file

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

"""``flamino fold`` end to end with the untrained test model (random:esmfold-tiny): real proteins
cut short (two lengths, one compilation: both pad to 64), and a record over the limit generated
here. What is checked is the command's contract, read back independently: Biopython parses each
PDB into the record's residues, the table's mean pLDDT is the mean of the file's B-factors, the
over-long record (over --max-residues 1022: past it the default is the device's memory, folded
and flagged, tests/integration/test_fold_run.py) is named and skipped with exit status 2. (The numbers themselves are checked
against transformers in tests/parity/test_esmfold_parity.py.)"""

from __future__ import annotations

import csv
import io

import numpy as np
from Bio.Data.IUPACData import protein_letters_3to1
from Bio.PDB import PDBParser

from flamino_core.cli import main
from flamino_core.inputs.fasta import read_fasta


def _sequence(structure) -> str:
    return "".join(protein_letters_3to1[r.get_resname().capitalize()] for r in structure[0]["A"])


def test_fold_writes_a_pdb_per_record_and_the_table(shared_fasta, tmp_path, capsys):
    records = [r for r in read_fasta(shared_fasta / "proteingym_targets.fa").records][:2]
    proteins = {records[0].id: records[0].sequence[:30], records[1].id: records[1].sequence[:45]}
    fasta = tmp_path / "in.fa"
    fasta.write_text("".join(f">{name}\n{seq}\n" for name, seq in proteins.items()) + ">too_long\n" + "MKL" * 341 + "\n")
    out = tmp_path / "folds"
    code = main(["fold", str(fasta), "-m", "random:esmfold-tiny", "-o", str(out), "--max-residues", "1022"])
    err = capsys.readouterr().err
    assert code == 2 and "too_long: 1,023 residues" in err and "untrained test model" in err
    assert "overlapping windows" not in err  # the reader's note for the language models: a fold is whole
    rows = list(csv.DictReader(io.StringIO((out / "folds.csv").read_text())))
    assert [r["name"] for r in rows] == list(proteins)
    for row in rows:
        text = (out / row["pdb"]).read_text()
        assert "UNTRAINED TEST MODEL" in text.splitlines()[0]
        structure = PDBParser(QUIET=True).get_structure(row["name"], io.StringIO(text))
        assert _sequence(structure) == proteins[row["name"]] and int(row["length"]) == len(proteins[row["name"]])
        b_factors = np.array([atom.bfactor for atom in structure.get_atoms()])
        assert 0 <= b_factors.min() and b_factors.max() <= 100
        assert abs(b_factors.mean() - float(row["mean_plddt"])) < 0.01  # B-factors carry two decimals
        assert 0 < float(row["ptm"]) < 1
    assert not (out / "too_long.pdb").exists()


def test_a_model_that_is_not_esmfold_is_refused_in_one_line(tmp_path, capsys):
    fasta = tmp_path / "in.fa"
    fasta.write_text(">a\nMKTAYIAKQR\n")
    assert main(["fold", str(fasta), "-m", str(tmp_path), "-o", str(tmp_path / "o")]) == 2
    assert "not an ESMFold folder" in capsys.readouterr().err
    assert main(["fold", str(fasta), "-m", "esm2_t6_8M_UR50D", "-o", str(tmp_path / "o")]) == 2
    assert "save_pretrained" in capsys.readouterr().err

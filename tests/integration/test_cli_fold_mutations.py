"""``flamino fold --mutations`` (issue #66, item 3) with the untrained ``random:esmfold-tiny``: the
wild type and two variants folded, each variant's PDB superposed on the wild type's, and the
per-residue table; checked against folds made here directly and Biopython's own superposition
(``Bio.PDB.Superimposer``, an independent Kabsch)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from flamino_core.model.model_id import ModelId

# Amyloid beta 1-42 (P05067 672-713): the sequence test_structure_predict_app folds (one compilation).
ABETA42 = "DAEFRHDSGYEVHHQKLVFFAEDVGSNKGAIIGLMVGGVVIA"


def test_fold_mutations_writes_both_structures_superposed_and_the_table(tmp_path, capsys):
    from Bio.PDB import PDBParser, Superimposer

    from flamino_core.cli import main
    from flamino_core.structure.folding.prediction import fold
    from flamino_core.structure.folding.variant_structures import COLUMNS
    from flamino_core.weights.esmfold import load_fold_model

    fasta = tmp_path / "abeta.fa"
    fasta.write_text(f">abeta42/672-713\n{ABETA42}\n")
    out = tmp_path / "out"
    code = main(["fold", str(fasta), "-m", "random:esmfold-tiny", "-o", str(out), "--mutations", "F690P,E693G"])
    assert code == 0
    err = capsys.readouterr().err
    assert "Feldman, Brogi and Skolnick 2026" in err and "F690P: C-alpha RMSD" in err
    names = sorted(p.name for p in out.iterdir())
    stem = "abeta42_672-713"
    assert names == sorted([f"{stem}.pdb", f"{stem}_F690P.pdb", f"{stem}_E693G.pdb", f"{stem}_variants.csv",
                            "folds.csv"])
    table = pd.read_csv(out / f"{stem}_variants.csv")
    assert list(table.columns) == ["variant_name", *COLUMNS] and len(table) == 2 * len(ABETA42)
    assert table.loc[table["mutated"], "position"].tolist() == [690, 693]  # the id's numbering

    model = load_fold_model(ModelId.parse("random:esmfold-tiny"))[0]
    wild = fold(model, ABETA42)
    parser = PDBParser(QUIET=True)
    wt_ca = [a for a in parser.get_structure("w", str(out / f"{stem}.pdb")).get_atoms() if a.get_id() == "CA"]
    np.testing.assert_allclose([a.coord for a in wt_ca], wild.atom37[:, 1], atol=1.5e-3)  # PDB's 0.001 A
    index = 690 - 672  # 0-based: F19 of the peptide, F690 in the id's numbering
    mutant = fold(model, ABETA42[:index] + "P" + ABETA42[index + 1:])
    rows = table[table["variant_name"] == "F690P"]
    mt_ca = [a for a in parser.get_structure("m", str(out / f"{stem}_F690P.pdb")).get_atoms() if a.get_id() == "CA"]
    # The written variant is in the wild type's frame: its distances to the wild type's C-alpha
    # are the table's displacements (both files rounded to 0.001 A: 2e-3 on a distance).
    distances = np.linalg.norm(np.array([a.coord for a in mt_ca]) - np.array([a.coord for a in wt_ca]), axis=1)
    np.testing.assert_allclose(distances, rows["ca_displacement"], atol=2e-3)
    # Biopython's Kabsch on the unsuperposed folds gives the same RMSD (the fit is the optimum).
    from Bio.PDB.Atom import Atom

    def atoms(xyz):
        return [Atom("CA", p, 0, 1, " ", "CA", k, "C") for k, p in enumerate(xyz)]

    fit = Superimposer()
    fit.set_atoms(atoms(wild.atom37[:, 1].astype(float)), atoms(mutant.atom37[:, 1].astype(float)))
    assert fit.rms == pytest.approx(float(np.sqrt(np.mean(rows["ca_displacement"] ** 2))), abs=2e-3)
    np.testing.assert_allclose(rows["plddt_difference"], np.round(100 * (mutant.residue_plddt - wild.residue_plddt),
                                                                  2), atol=0.011)
    folds = pd.read_csv(out / "folds.csv")
    assert folds["pdb"].tolist() == [f"{stem}.pdb", f"{stem}_F690P.pdb", f"{stem}_E693G.pdb"]


def test_fold_mutations_refuses_several_records_and_a_wrong_wild_type(tmp_path, capsys):
    from flamino_core.cli import main

    two = tmp_path / "two.fa"
    two.write_text(f">a\n{ABETA42}\n>b\n{ABETA42}\n")
    assert main(["fold", str(two), "-m", "random:esmfold-tiny", "-o", str(tmp_path / "o"), "--mutations", "D1A"]) == 2
    assert "give one record" in capsys.readouterr().err
    one = tmp_path / "one.fa"
    one.write_text(f">a\n{ABETA42}\n")
    assert main(["fold", str(one), "-m", "random:esmfold-tiny", "-o", str(tmp_path / "o"), "--mutations", "K1A"]) == 2
    assert "a: " in capsys.readouterr().err

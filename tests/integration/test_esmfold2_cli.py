"""``flamino fold`` with ESMFold2 (``cli/fold2.py``) end to end on the untrained test model
(random:esmfold2-tiny): complexes written ``A:B`` in a record and ``--complex``, single chains,
a record with a bad chain, models refused before any work. What is checked is the command's
contract, read back independently of the writer: Biopython's MMCIFParser parses each file into the
chains and residues asked for, with every atom's B-factor a pLDDT on 0-100 whose mean is the
table's mean pLDDT, and the confidences JSON agrees with the table. (The numbers themselves are
checked against transformers in tests/parity/test_esmfold2_predict.py.)"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil

import numpy as np
import pytest
from Bio.Data.IUPACData import protein_letters_3to1
from Bio.PDB import MMCIFParser

from flamino_core.cli import main
from flamino_core.inputs.fasta import read_fasta


def _records(shared_fasta, path: str) -> dict[str, str]:
    return {r.id: r.sequence for r in read_fasta(shared_fasta / path).records}


def _check_fold(out, row: dict, chains: list[str]) -> None:
    """The row's mmCIF holds ``chains`` as chains A, B, ..., its B-factors are pLDDT 0-100 with the
    table's mean, its JSON says the table's pTM/ipTM."""
    text = (out / row["cif"]).read_text()
    assert "UNTRAINED TEST MODEL" in text.splitlines()[4]  # the title, under the data block and entry id
    structure = MMCIFParser(QUIET=True).get_structure(row["name"], io.StringIO(text))
    letters = [chain.id for chain in structure[0]]
    assert letters == list("ABCDEFGH"[:len(chains)]) and row["chains"] == ",".join(letters)
    for chain, sequence in zip(structure[0], chains):
        assert "".join(protein_letters_3to1[r.get_resname().capitalize()] for r in chain) == sequence
        assert [r.id[1] for r in chain] == list(range(1, len(sequence) + 1))
    b_factors = np.array([atom.bfactor for atom in structure.get_atoms()])
    assert 0 <= b_factors.min() and b_factors.max() <= 100 and b_factors.std() > 0.1
    assert abs(b_factors.mean() - float(row["mean_plddt"])) < 0.01  # B-factors carry two decimals
    assert int(row["length"]) == sum(map(len, chains))
    confidences = json.loads((out / row["cif"].replace(".cif", ".confidences.json")).read_text())
    assert confidences["ptm"] == float(row["ptm"]) and 0 < confidences["ptm"] < 1
    assert "not biology" in confidences["model"]
    assert np.shape(confidences["pae"]) == (int(row["length"]),) * 2
    assert np.shape(confidences["chain_pair_iptm"]) == (len(chains),) * 2
    if len(chains) > 1:
        assert confidences["iptm"] == float(row["iptm"]) and 0 < float(row["iptm"]) < 1
    else:
        assert row["iptm"] == ""  # one chain has no interface


def test_complex_notation_single_chains_and_a_bad_chain(shared_fasta, tmp_path, capsys):
    hbb = _records(shared_fasta, "HBB_HUMAN.fa")["HBB_HUMAN"][:24]
    two = list(_records(shared_fasta, "uniprot_two.fa").values())
    a, b = two[0][:17], two[1][:12]
    fasta = tmp_path / "in.fa"
    fasta.write_text(f">pair complex of two\n{a}:\n{b}\n>HBB_HUMAN\n{hbb}\n>broken\nMKV:MK*V\n")
    out = tmp_path / "folds"
    code = main(["fold", str(fasta), "-m", "random:esmfold2-tiny", "-o", str(out), "--pdb"])
    err = capsys.readouterr().err
    assert code == 2 and "untrained test model" in err
    assert "broken chain B: position 3" in err and not list(out.glob("broken*"))
    rows = list(csv.DictReader(io.StringIO((out / "folds.csv").read_text())))
    assert list(rows[0]) == ["name", "chains", "length", "mean_plddt", "ptm", "iptm", "cif"]
    assert [r["name"] for r in rows] == ["pair", "HBB_HUMAN"]
    _check_fold(out, rows[0], [a, b])
    _check_fold(out, rows[1], [hbb])
    assert (out / "pair.pdb").read_text().count("\nTER ") == 2


def test_complex_of_every_record(shared_fasta, tmp_path):
    two = _records(shared_fasta, "uniprot_two.fa")
    chains = [sequence[:15] for sequence in two.values()]
    fasta = tmp_path / "heterodimer.fa"
    fasta.write_text("".join(f">{name}\n{sequence}\n" for name, sequence in zip(two, chains)))
    out = tmp_path / "folds"
    assert main(["fold", str(fasta), "-m", "random:esmfold2-tiny:3", "-o", str(out), "--complex", "--seed", "2"]) == 0
    rows = list(csv.DictReader(io.StringIO((out / "folds.csv").read_text())))
    assert [r["name"] for r in rows] == ["heterodimer"]
    _check_fold(out, rows[0], chains)
    assert json.loads((out / "heterodimer.confidences.json").read_text())["chain_names"] == list(two)


def test_refused_before_any_work(tmp_path, capsys):
    fasta = tmp_path / "in.fa"
    fasta.write_text(">a\nMKTAYIAKQR\n")
    # ESMFold2-only options with ESMFold (v1)
    assert main(["fold", str(fasta), "-m", "random:esmfold-tiny", "-o", str(tmp_path / "o"), "--complex"]) == 2
    assert "--complex: for ESMFold2 models only" in capsys.readouterr().err
    # an ESMFold2 folder without its weights: refused by the loader, nothing written
    folder = tmp_path / "half"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "esmfold2"}))
    assert main(["fold", str(fasta), "-m", str(folder), "-o", str(tmp_path / "o")]) == 2
    assert "expected config.json and model.safetensors" in capsys.readouterr().err
    assert not (tmp_path / "o" / "folds.csv").exists()
    assert main(["fold", str(fasta), "-m", "random:esmfold2-tiny:x", "-o", str(tmp_path / "o")]) == 2
    assert "whole number" in capsys.readouterr().err


@pytest.mark.slow
def test_acceptance_real_lengths(shared_fasta, tmp_path):
    """The issue's acceptance: a two-chain complex and three single chains of 60-400 residues."""
    gym = _records(shared_fasta, "proteingym_targets.fa")
    hbb = _records(shared_fasta, "HBB_HUMAN.fa")["HBB_HUMAN"]
    singles = {name: gym[name] for name in ("ARGR_ECOLI", "CALM1_HUMAN", "BLAT_ECOLX")}  # 69, 149, 286
    fasta = tmp_path / "in.fa"
    fasta.write_text(f">HBB_CALM1\n{hbb}:{gym['CALM1_HUMAN']}\n"
                     + "".join(f">{name}\n{sequence}\n" for name, sequence in singles.items()))
    out = tmp_path / "folds"
    assert main(["fold", str(fasta), "-m", "random:esmfold2-tiny", "-o", str(out)]) == 0
    rows = list(csv.DictReader(io.StringIO((out / "folds.csv").read_text())))
    assert [r["name"] for r in rows] == ["HBB_CALM1", *singles]
    _check_fold(out, rows[0], [hbb, gym["CALM1_HUMAN"]])
    for row, sequence in zip(rows[1:], singles.values()):
        _check_fold(out, row, [sequence])
    keep = os.environ.get("FLAMINO_KEEP_FOLDS")  # to look at the files by hand
    if keep:
        shutil.copytree(out, keep, dirs_exist_ok=True)

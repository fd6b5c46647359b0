"""The PDB export with a track in the B-factor column, read back two ways (structure_export.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from structure_reference import STRUCTURES, entity_sequences, pdb_text_rows

from flamino_core.structure.files.reading import StructureError, parse_structure_bytes, read_structure
from flamino_core.structure.align import choose_chain
from flamino_core.structure.export import UNALIGNED_BFACTOR, pdb_export_problem, pdb_with_track, precision_csv

pytestmark = pytest.mark.skipif(not STRUCTURES.is_dir(), reason=f"real structures not found at {STRUCTURES}")


def _bfactors_by_residue(text: str) -> dict[tuple[str, str], set[float]]:
    """(chain, residue label) -> B-factors of its atoms, from fixed PDB columns (not Biopython)."""
    out: dict[tuple[str, str], set[float]] = {}
    for row in pdb_text_rows(text):
        out.setdefault((row["chain"], f"{row['number']}{row['icode']}"), set()).add(row["b"])
    return out


def test_bfactor_round_trip_on_a_fragment_of_1gbt():
    """The sequence is residues 41-170 of 1GBT's chain: those residues get their position's value
    (two decimals), every other residue the stated fill value. Residues with insertion codes
    (65A, 184A) keep their identity; ligands and water are not written."""
    parsed = read_structure(STRUCTURES / "1GBT.cif")
    full = entity_sequences(STRUCTURES / "1GBT.cif")[0]
    fragment = full[40:170]
    alignment = choose_chain(parsed, fragment)
    values = np.linspace(-12.345, 87.654, len(fragment))
    text = pdb_with_track(parsed, alignment, values, "test track")
    read_back = _bfactors_by_residue(text)
    labels = alignment.chain.labels
    assert set(read_back) == {("A", label) for label in labels}  # no HETATM: ions, ligand, water
    for index, label in enumerate(labels):
        (b,) = read_back[("A", label)]  # one value for all atoms of a residue
        expected = values[index - 40] if 40 <= index < 170 else UNALIGNED_BFACTOR
        assert b == pytest.approx(expected, abs=0.005 + 1e-9)  # the column has two decimals
    assert {"65A", "184A"} <= set(labels[40:170]) and "221A" not in labels[40:170]
    assert text.startswith("REMARK flamino: B-factor column: test track")


def test_round_trip_through_biopython_keeps_coordinates():
    parsed = read_structure(STRUCTURES / "4ZHL.cif")
    protein = entity_sequences(STRUCTURES / "4ZHL.cif")[0]
    alignment = choose_chain(parsed, protein)
    values = np.arange(len(protein), dtype=float) / 10
    values[5] = np.nan  # no value at one position: written as the fill value
    again = parse_structure_bytes(pdb_with_track(parsed, alignment, values, "x", fill=-1.0).encode(), "out.pdb")
    chain = again.model(0)["U"]
    original = parsed.model(0)["U"]
    for index, residue_id in enumerate(alignment.chain.residue_ids):
        expected = -1.0 if index == 5 else round(values[index], 2)
        assert [a.get_bfactor() for a in chain[residue_id]] == pytest.approx([expected] * len(chain[residue_id]))
        np.testing.assert_allclose(chain[residue_id]["CA"].coord, original[residue_id]["CA"].coord, atol=1e-3)


def test_export_does_not_modify_the_parsed_structure():
    parsed = read_structure(STRUCTURES / "1A7G.cif")
    before = [a.get_bfactor() for a in parsed.structure.get_atoms()]
    alignment = choose_chain(parsed, entity_sequences(STRUCTURES / "1A7G.cif")[0])
    pdb_with_track(parsed, alignment, np.ones(82), "ones", whole_model=True)
    assert [a.get_bfactor() for a in parsed.structure.get_atoms()] == before


def test_whole_model_writes_other_chains_and_ligands_with_the_fill_value():
    parsed = read_structure(STRUCTURES / "4ZHL.cif")
    peptide = entity_sequences(STRUCTURES / "4ZHL.cif")[1]
    alignment = choose_chain(parsed, peptide)
    assert alignment.chain_id == "P"
    text = pdb_with_track(parsed, alignment, np.full(len(peptide), 7.5), "x", whole_model=True)
    rows = list(pdb_text_rows(text))
    assert {r["b"] for r in rows if r["chain"] == "U"} == {UNALIGNED_BFACTOR}
    assert {r["b"] for r in rows if r["chain"] == "P" and r["name"] != "HOH"} == {7.5}
    assert {r["b"] for r in rows if r["name"] == "HOH"} == {UNALIGNED_BFACTOR}


def test_modified_residues_and_insertion_codes_in_2n0n():
    parsed = read_structure(STRUCTURES / "2n0n_M1.pdb")
    alignment = choose_chain(parsed, "HAEGKFTSEFF")
    values = np.arange(1, 12, dtype=float)
    read_back = _bfactors_by_residue(pdb_with_track(parsed, alignment, values, "x"))
    assert read_back[("A", "2")] == {2.0}  # AIB, a HETATM residue
    assert read_back[("A", "9A")] == {10.0}
    assert read_back[("A", "11")] == {11.0}  # PH8, read as X, aligned to the sequence's F
    assert ("A", "12") not in read_back  # the NH2 cap is not an amino acid ...
    whole = _bfactors_by_residue(pdb_with_track(parsed, alignment, values, "x", whole_model=True))
    assert whole[("A", "12")] == {UNALIGNED_BFACTOR}  # ... but is in the whole model


def test_values_outside_the_bfactor_column_are_refused():
    parsed = read_structure(STRUCTURES / "2BEG.pdb")
    alignment = choose_chain(parsed, "LVFFAEDVGSNKGAIIGLMVGGVVIA")
    with pytest.raises(StructureError, match="B-factor column holds"):
        pdb_with_track(parsed, alignment, np.full(26, 5000.0), "big")
    with pytest.raises(StructureError, match="B-factor column holds"):
        pdb_with_track(parsed, alignment, np.full(26, 0.5), "attention", scale=1e4)
    # The app asks first, and gets the same message without a PDB being written.
    assert "B-factor column holds" in pdb_export_problem(parsed, alignment, np.full(26, 5000.0), "big")
    assert pdb_export_problem(parsed, alignment, np.full(26, 5.0), "fine") is None


def test_long_remarks_are_wrapped_to_80_columns_not_cut():
    parsed = read_structure(STRUCTURES / "2BEG.pdb")
    alignment = choose_chain(parsed, "LVFFAEDVGSNKGAIIGLMVGGVVIA")
    label = "attention from residue 1022 (layer 33, mean of heads) and some more words to wrap"
    text = pdb_with_track(parsed, alignment, np.zeros(26), label, scale=100)
    remarks = [line for line in text.splitlines() if line.startswith("REMARK")]
    assert all(len(line) <= 80 and line.startswith("REMARK flamino: ") for line in remarks)
    assert f"B-factor column: {label} x100" in " ".join(line[16:] for line in remarks)


def test_precision_csv_has_the_columns_and_empty_nan():
    table = pd.DataFrame(
        [["r", "A", "long", "L", float("nan"), 0, 1.0, 0.5]],
        columns=["record_id", "chain", "range", "cutoff", "precision", "n_pairs", "identity", "coverage"],
    )
    lines = precision_csv(table).splitlines()
    assert lines == ["record_id,chain,range,cutoff,precision,n_pairs,identity,coverage", "r,A,long,L,,0,1.0,0.5"]

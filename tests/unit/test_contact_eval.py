"""Contact precision against real structures (contact_eval.py), checked by an independent computation.

The reference here reads coordinates with ``structure_reference`` (MMCIF2Dict / fixed-column
text, not Bio.PDB's structure builder), maps residues to sequence positions from what is known
about each file (deposited sequence = observed residues; 2BEG numbers residues as Aβ positions),
and ranks pairs with a plain Python sort: no code shared with the module under test.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from structure_reference import STANDARD, STRUCTURES, entity_sequences, read_reference, seqres

from flamino_core.structure.contacts import (
    CUTOFFS,
    PRECISION_COLUMNS,
    SEPARATION_RANGES,
    precision_by_model,
    precision_table,
    top_predictions,
    true_contacts,
)
from flamino_core.structure.files.reading import read_structure
from flamino_core.structure.align import choose_chain

pytestmark = pytest.mark.skipif(not STRUCTURES.is_dir(), reason=f"real structures not found at {STRUCTURES}")
# The issue's ranges, written out here rather than read from the module: inclusive bounds.
RANGES = {"short": (6, 11), "medium": (12, 23), "long": (24, 10**9), "all": (6, 10**9)}
DIVISORS = {"L": 1, "L/2": 2, "L/5": 5}


def _contact_atoms(residues):
    return [r.atoms["CA"] if r.name == "GLY" else r.atoms["CB"] for r in residues]


def reference_case(name: str):
    """(sequence, chain id, contact-atom xyz per sequence position or None)."""
    path = STRUCTURES / name
    if name == "2BEG.pdb":  # Aβ(1-42); the model has residues 17-42, numbered as Aβ positions
        sequence = "".join(STANDARD[n] for n in seqres(path, "A"))
        residues = [r for r in read_reference(path, "A") if r.name in STANDARD]
        xyz = [None] * len(sequence)
        for residue, atom in zip(residues, _contact_atoms(residues)):
            xyz[int(residue.label) - 1] = atom
        return sequence, "A", xyz
    chain = {"1GBT.cif": "A", "1A7G.cif": "E", "4ZHL.cif": "U"}[name]
    sequence = entity_sequences(path)[0]
    residues = [r for r in read_reference(path, chain) if r.name in STANDARD]
    assert "".join(STANDARD[r.name] for r in residues) == sequence  # observed = deposited here
    return sequence, chain, _contact_atoms(residues)


def reference_precision(predicted, xyz, low, high, k):
    pairs = []
    for i in range(len(xyz)):
        for j in range(i + low, min(len(xyz), i + high + 1)):
            p = float(predicted[i][j])
            if xyz[i] is not None and xyz[j] is not None and not math.isnan(p):
                pairs.append((-p, i, j))
    top = sorted(pairs)[:k]
    hits = sum(1 for _, i, j in top if math.dist(xyz[i], xyz[j]) < 8.0)
    return (hits / len(top) if top else math.nan), len(top)


def random_map(length: int, seed: int, nan_fraction: float = 0.0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    m = rng.random((length, length))
    m = (m + m.T) / 2
    if nan_fraction:
        m[rng.random((length, length)) < nan_fraction] = np.nan
    return m


def check_against_reference(table, predicted, xyz):
    length = len(xyz)
    expected_rows = [(r, c) for r in RANGES for c in DIVISORS]
    assert list(zip(table["range"], table["cutoff"])) == expected_rows
    for row in table.itertuples():
        low, high = RANGES[row.range]
        precision, n_pairs = reference_precision(predicted, xyz, low, high, length // DIVISORS[row.cutoff])
        assert row.n_pairs == n_pairs, (row.range, row.cutoff)
        # Both are (integer count) / (integer count): equal up to float rounding.
        assert (math.isnan(precision) and math.isnan(row.precision)) or row.precision == pytest.approx(precision, abs=1e-12)


@pytest.mark.parametrize("name", ["1GBT.cif", "1A7G.cif", "4ZHL.cif", "2BEG.pdb"])
def test_precision_matches_an_independent_computation(name):
    sequence, chain, xyz = reference_case(name)
    alignment = choose_chain(read_structure(STRUCTURES / name), sequence)
    assert alignment.chain_id == chain
    for seed, nan_fraction in ((1, 0.0), (2, 0.3)):  # NaN: pairs no window covered
        predicted = random_map(len(sequence), seed, nan_fraction)
        check_against_reference(precision_table(alignment, predicted, name), predicted, xyz)


def test_true_contacts_match_independent_distances():
    """1GBT with residues added to the sequence: contacts from numpy distances of the reference
    coordinates on aligned positions, NaN on the added ones."""
    sequence, _, xyz = reference_case("1GBT.cif")
    extended = "MKWVT" + sequence + "GSGS"
    contacts = true_contacts(choose_chain(read_structure(STRUCTURES / "1GBT.cif"), extended))
    coords = np.array(xyz)
    distances = np.sqrt(((coords[:, None, :] - coords[None, :, :]) ** 2).sum(-1))
    inner = contacts[5 : 5 + len(sequence), 5 : 5 + len(sequence)]
    assert np.array_equal(inner, (distances < 8.0).astype(float))
    assert np.isnan(contacts[:5]).all() and np.isnan(contacts[:, -4:]).all()
    assert np.array_equal(np.isnan(contacts), np.isnan(contacts.T))


def test_perfect_and_inverse_predictors():
    """Predicting exactly the true contacts gives precision 1 wherever the range has at least
    floor(L/k) contacts; predicting exactly the non-contacts gives 0. Known without the module."""
    sequence, _, xyz = reference_case("1GBT.cif")
    coords = np.array(xyz)
    truth = (np.sqrt(((coords[:, None] - coords[None]) ** 2).sum(-1)) < 8.0).astype(float)
    alignment = choose_chain(read_structure(STRUCTURES / "1GBT.cif"), sequence)
    separation = np.abs(np.subtract.outer(np.arange(len(sequence)), np.arange(len(sequence))))
    # Small noise so ties are broken at random rather than by position.
    noise = random_map(len(sequence), 3) * 1e-3
    perfect = precision_table(alignment, truth + noise, "perfect")
    inverse = precision_table(alignment, 1 - truth + noise, "inverse")
    for good, bad in zip(perfect.itertuples(), inverse.itertuples()):
        low, high = RANGES[good.range]
        in_range = np.triu((separation >= low) & (separation <= high))
        k = len(sequence) // DIVISORS[good.cutoff]
        if truth[in_range].sum() >= k:
            assert good.precision == 1.0, (good.range, good.cutoff)
        if (1 - truth[in_range]).sum() >= k:
            assert bad.precision == 0.0, (bad.range, bad.cutoff)
    assert perfect.set_index(["range", "cutoff"]).loc[("all", "L"), "precision"] == 1.0


def test_nan_predictions_are_never_counted():
    sequence, _, xyz = reference_case("1A7G.cif")
    alignment = choose_chain(read_structure(STRUCTURES / "1A7G.cif"), sequence)
    table = precision_table(alignment, np.full((len(sequence),) * 2, np.nan), "none")
    assert (table["n_pairs"] == 0).all() and table["precision"].isna().all()
    # The highest predictions are NaN'd out: the ranking skips them.
    predicted = random_map(len(sequence), 4)
    top = top_predictions(predicted, true_contacts(alignment), "all", k=10)
    predicted[top.i, top.j] = predicted[top.j, top.i] = np.nan
    again = top_predictions(predicted, true_contacts(alignment), "all", k=10)
    assert not set(zip(top.i, top.j)) & set(zip(again.i, again.j))


def test_partial_structure_counts_only_judged_pairs():
    """2BEG has residues for 26 of 42 positions: at long range (>= 24) only 3 pairs can be judged,
    so n_pairs is 3 for every cutoff, not floor(42/k)."""
    sequence, _, _ = reference_case("2BEG.pdb")
    alignment = choose_chain(read_structure(STRUCTURES / "2BEG.pdb"), sequence)
    table = precision_table(alignment, random_map(42, 5), "abeta").set_index(["range", "cutoff"])
    # Positions 16..41 have residues: separations >= 24 are (16,40), (16,41), (17,41).
    assert [table.loc[("long", c), "n_pairs"] for c in DIVISORS] == [3, 3, 3]
    assert table.loc[("all", "L"), "n_pairs"] == 42


def test_short_chain_has_no_long_range_pairs():
    """2N0N: 11 residues; no pair is 12 or more apart, so medium and long precision are NaN."""
    parsed = read_structure(STRUCTURES / "2n0n_M1.pdb")
    alignment = choose_chain(parsed, "HAEGKFTSEFF")
    table = precision_table(alignment, random_map(11, 6), "2n0n").set_index(["range", "cutoff"])
    assert table.loc[("long", "L"), "n_pairs"] == 0 and math.isnan(table.loc[("long", "L"), "precision"])
    assert table.loc[("all", "L"), "n_pairs"] == 11  # 15 pairs >= 6 apart, top 11 kept
    assert table.loc[("all", "L/5"), "n_pairs"] == 2


def test_columns_and_labels_are_the_issues():
    assert PRECISION_COLUMNS == ("record_id", "chain", "range", "cutoff", "precision", "n_pairs", "identity", "coverage")
    assert list(SEPARATION_RANGES) == ["short", "medium", "long", "all"]
    assert list(CUTOFFS) == ["L", "L/2", "L/5"]


def test_one_table_per_model():
    sequence, _, xyz = reference_case("1A7G.cif")
    alignment = choose_chain(read_structure(STRUCTURES / "1A7G.cif"), sequence)
    maps = {"small": random_map(len(sequence), 7), "large": random_map(len(sequence), 8)}
    table = precision_by_model(alignment, maps, "1A7G")
    assert list(table.columns) == ["model", *PRECISION_COLUMNS]
    assert list(table["model"]) == ["small"] * 12 + ["large"] * 12
    for name, predicted in maps.items():
        check_against_reference(table[table["model"] == name].reset_index(drop=True), predicted, xyz)


def test_shape_mismatch_names_the_record():
    sequence, _, _ = reference_case("1A7G.cif")
    alignment = choose_chain(read_structure(STRUCTURES / "1A7G.cif"), sequence)
    with pytest.raises(ValueError, match="rec1.*shape"):
        precision_table(alignment, np.zeros((10, 10)), "rec1")


def test_random_tiny_model_contacts_against_the_structure():
    """The contact head's map from an untrained model (not biology: only the plumbing from the
    engine's output to the table is checked) on 1A7G's sequence."""
    from flamino_core.engine.engine import Engine
    from flamino_core.weights.loading import load_weights

    sequence, _, xyz = reference_case("1A7G.cif")
    (out,) = Engine(load_weights("random:tiny")).run([sequence], contacts=True)
    alignment = choose_chain(read_structure(STRUCTURES / "1A7G.cif"), out.sequence)
    table = precision_table(alignment, out.contacts, "1A7G")
    check_against_reference(table, out.contacts, xyz)
    assert (table["identity"] == 1.0).all() and (table["coverage"] == 1.0).all()

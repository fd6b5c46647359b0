"""A variant's structure beside the wild type's (issue #66, item 3;
``flamino_core/structure/folding/variant_structures.py``): Kabsch superposition checked against a
known rigid motion, the per-residue comparison against quantities computed here independently
(brute-force distances), and the folds: the wild type once, every variant by the same call."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from flamino_core.model.esmfold import residue_constants as rc
from flamino_core.model.esmfold.folded import FoldedProtein
from flamino_core.numbering import Numbering
from flamino_core.structure.folding import variant_structures as vs

RNG = np.random.default_rng(66)
CA, CB = rc.ATOM_ORDER["CA"], rc.ATOM_ORDER["CB"]
# HBB (P68871) without its initiator Met: the mature chain's numbering, in which E6V is sickle cell
HBB_MATURE_50 = "VHLTPEEKSAVTALWGKVNVDEVGGEALGRLLVVYPWTQRFFESFGDLSTP"


def rotation(seed: int) -> np.ndarray:
    q, r = np.linalg.qr(np.random.default_rng(seed).normal(size=(3, 3)))
    q = q * np.sign(np.diag(r))
    return q if np.linalg.det(q) > 0 else -q


def test_kabsch_recovers_a_rigid_motion_and_never_reflects():
    points = RNG.normal(size=(30, 3)) * 10
    turn, shift = rotation(1), np.array([3.0, -7.0, 12.0])
    moved = points @ turn.T + shift
    r, t = vs.kabsch(points, moved)
    # float64 SVD of 30 points: exact to rounding (1e-9 of coordinates around 10 A)
    np.testing.assert_allclose(points @ r.T + t, moved, atol=1e-9)
    mirrored = points * np.array([1, 1, -1])  # a mirror image: the best *rotation*, det +1
    r, _ = vs.kabsch(points, mirrored)
    assert np.linalg.det(r) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="n >= 3"):
        vs.kabsch(points[:2], moved[:2])


def chain(sequence: str, seed: int = 0) -> FoldedProtein:
    """A made-up fold: a random walk of C-alpha atoms 3.8 A apart, C-beta 1.5 A off (none for G)."""
    rng = np.random.default_rng(seed)
    n = len(sequence)
    steps = rng.normal(size=(n, 3))
    ca = np.cumsum(3.8 * steps / np.linalg.norm(steps, axis=1, keepdims=True), axis=0)
    atom37 = np.zeros((n, 37, 3), np.float32)
    exists = np.zeros((n, 37), np.float32)
    atom37[:, CA], exists[:, CA] = ca, 1
    glycine = np.array([aa == "G" for aa in sequence])
    atom37[~glycine, CB] = ca[~glycine] + rng.normal(size=(int((~glycine).sum()), 3)) * 0.9
    exists[~glycine, CB] = 1
    plddt = np.full((n, 37), 0.5, np.float32) + rng.uniform(0, 0.4, size=(n, 1)).astype(np.float32)
    return FoldedProtein(sequence, rc.aatype(sequence), atom37, exists, plddt, np.zeros((n, n), np.float32), 0.3)


def test_the_comparison_undoes_the_frame_and_counts_what_moved():
    wild = HBB_MATURE_50
    (variant,) = vs.substitution_variants("E6V", wild, Numbering(1))
    wt = chain(wild)
    # The variant's fold: the wild type's, residue 20 moved 6 A, then the whole turned and shifted
    # (a fold's frame is arbitrary): after superposition only residue 20 has moved much.
    moved = wt.atom37.copy()
    moved[19] += np.array([6.0, 0, 0], np.float32) * (wt.atom37_exists[19][:, None] > 0)
    turn = rotation(5)
    framed = (moved @ turn.T + np.array([40.0, -3, 9])) * (wt.atom37_exists[..., None] > 0)
    mt = dataclasses.replace(wt, sequence=variant.apply(wild), atom37=framed.astype(np.float32),
                             plddt=wt.plddt - 0.1)
    result = vs.compare(wt, mt, variant, Numbering(1))
    table = result.table
    assert list(table.columns) == vs.COLUMNS and len(table) == len(wild)
    assert list(table.loc[table["mutated"], "position"]) == [6]
    assert table.loc[table["mutated"], ["wild_type", "variant"]].values.tolist() == [["E", "V"]]
    # one residue 6 A off among 51: the least-squares fit leaves it ~5.9 A off, the rest < 0.3 A
    d = table["ca_displacement"].to_numpy()
    assert d.argmax() == 19 and d[19] > 5.5 and np.delete(d, 19).max() < 0.3
    assert result.rmsd == pytest.approx(np.sqrt(np.mean(d ** 2)), abs=1e-3)
    np.testing.assert_allclose(table["plddt_difference"], -10.0, atol=0.01)  # x100, rounded to 0.01
    # Contacts from brute force on the untransformed coordinates (a rigid motion changes none):
    def contacts(atom37, exists):
        xyz = np.where(exists[:, CB, None] > 0, atom37[:, CB], atom37[:, CA])
        out = np.zeros((len(xyz), len(xyz)), bool)
        for i in range(len(xyz)):
            for j in range(len(xyz)):
                out[i, j] = abs(i - j) >= 6 and np.linalg.norm(xyz[i] - xyz[j]) < 8.0
        return out
    before, after = contacts(wt.atom37, wt.atom37_exists), contacts(moved, wt.atom37_exists)
    assert list(table["contacts_gained"]) == list((after & ~before).sum(1))
    assert list(table["contacts_lost"]) == list((before & ~after).sum(1))
    assert (after != before).any()  # the test moves something that changes contacts
    assert "E6V: C-alpha RMSD" in result.describe()


def test_the_wild_type_is_folded_once_and_each_variant_by_the_same_call():
    wild = HBB_MATURE_50
    asked = []

    def fold_one(sequence):
        asked.append(sequence)
        return chain(sequence, seed=len(asked))

    variants = vs.substitution_variants("E6V, E6K:L3P", wild, Numbering(1))
    wt, results = vs.fold_variants(fold_one, wild, variants, Numbering(1))
    assert asked == [wild, wild[:5] + "V" + wild[6:], wild[:2] + "P" + wild[3:5] + "K" + wild[6:]]
    assert [r.variant for r in results] == ["E6V", "L3P:E6K"] or [r.variant for r in results] == ["E6V", "E6K:L3P"]
    csv = vs.table_csv(results)
    assert csv.splitlines()[0] == "variant_name," + ",".join(vs.COLUMNS)
    assert len(csv.splitlines()) == 1 + 2 * len(wild)


def test_indels_and_unreadable_entries_are_refused_by_name():
    with pytest.raises(ValueError, match="only substitutions"):
        vs.substitution_variants("K3del", "MAKV")
    with pytest.raises(ValueError, match="X9A|beyond|outside|position"):
        vs.substitution_variants("X9A", "MAKV")


def test_a_structures_numbering_names_each_residue_beside_the_records():
    """1GBT-like: a list read in a structure's numbering gets its labels in the table too."""
    from flamino_core.variants.author_numbering import AuthorNumbering

    wild = HBB_MATURE_50
    labels = AuthorNumbering(tuple(str(n) for n in range(10, 10 + len(wild) - 1)) + ("58A",))
    (variant,) = vs.substitution_variants("E15V", wild, Numbering(1), author=labels)
    assert variant.mutant == "E6V"  # the record's numbering
    result = vs.compare(chain(wild), chain(variant.apply(wild), 1), variant, Numbering(1), labels)
    assert list(result.table.columns[:2]) == ["position", "structure_position"]
    assert result.table.loc[result.table["mutated"], "structure_position"].tolist() == ["15"]
    assert vs.table_csv([result]).splitlines()[0].startswith("variant_name,position,structure_position,")

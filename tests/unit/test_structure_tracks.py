"""Per-residue tracks (structure_tracks.py) against computations written out here."""

from __future__ import annotations

import math

import numpy as np
import pytest

from flamino_core.alphabet import TOKENS
from flamino_core.structure.tracks import TRACKS, compute_track, track_label
from flamino_core.numbering import Numbering

STANDARD = "ACDEFGHIKLMNPQRSTVWY"
SEQUENCE = "MKVLAXGHW"  # with an X: its wild type is not among the 20
RNG = np.random.default_rng(12)


def test_entropy_from_logits():
    logits = RNG.normal(size=(len(SEQUENCE), len(TOKENS)))
    values = compute_track("entropy", SEQUENCE, logits=logits)
    for i in range(len(SEQUENCE)):
        exp = [math.exp(logits[i, TOKENS.index(aa)]) for aa in STANDARD]  # the 20, renormalised
        total = sum(exp)
        expected = -sum(e / total * math.log2(e / total) for e in exp)
        assert values[i] == pytest.approx(expected, abs=1e-9)


def test_mean_and_chosen_substitution_scores():
    scores = RNG.normal(size=(len(SEQUENCE), 20))
    mean = compute_track("mean-score", SEQUENCE, scores=scores)
    for i, wt in enumerate(SEQUENCE):
        others = [scores[i, k] for k, aa in enumerate(STANDARD) if aa != wt]
        assert len(others) == (20 if wt == "X" else 19)
        assert mean[i] == pytest.approx(sum(others) / len(others))
    to_ala = compute_track("substitution", SEQUENCE, scores=scores, amino_acid="a")
    assert np.array_equal(to_ala, scores[:, 0])
    with pytest.raises(ValueError, match="amino_acid must be one of"):
        compute_track("substitution", SEQUENCE, scores=scores, amino_acid="J")


def test_contact_count_ignores_close_pairs_and_nan():
    length = len(SEQUENCE)
    contacts = RNG.random((length, length))
    contacts = (contacts + contacts.T) / 2
    contacts[0, 8] = contacts[8, 0] = np.nan  # a pair no window covered
    counts = compute_track("contact-count", SEQUENCE, contacts=contacts)
    for i in range(length):
        expected = sum(1 for j in range(length) if abs(i - j) >= 6 and contacts[i, j] >= 0.5)
        assert counts[i] == expected


def test_attention_from_one_residue():
    heads, length = 3, len(SEQUENCE)
    attention = RNG.random((heads, length + 2, length + 2))
    one_head = compute_track("attention", SEQUENCE, attention=attention, residue=4, head=1)
    assert np.array_equal(one_head, attention[1, 5, 1 : length + 1])  # +1: <cls> comes first
    mean = compute_track("attention", SEQUENCE, attention=attention, residue=0)
    assert np.allclose(mean, attention[:, 1, 1 : length + 1].mean(axis=0))
    with pytest.raises(ValueError, match="residue 10 does not exist"):
        compute_track("attention", SEQUENCE, attention=attention, residue=9)
    with pytest.raises(ValueError, match="head 4 does not exist"):
        compute_track("attention", SEQUENCE, attention=attention, residue=0, head=3)


def test_pca_component_against_eigenvectors():
    representations = RNG.normal(size=(len(SEQUENCE), 6)) * np.array([5, 3, 1, 1, 1, 1])
    centred = representations - representations.mean(axis=0)
    eigenvalues, eigenvectors = np.linalg.eigh(centred.T @ centred)
    for component in (1, 2):
        axis = eigenvectors[:, -component]  # eigh sorts ascending
        values = compute_track("pca", SEQUENCE, representations=representations, component=component)
        expected = centred @ axis
        assert np.allclose(np.abs(values), np.abs(expected))  # an axis's sign is a convention
        assert np.allclose(values, expected) or np.allclose(values, -expected)


def test_missing_inputs_and_unknown_tracks_are_named():
    with pytest.raises(ValueError, match="needs logits"):
        compute_track("entropy", SEQUENCE)
    with pytest.raises(ValueError, match="unknown track 'plddt'"):
        compute_track("plddt", SEQUENCE)
    with pytest.raises(ValueError, match="9 residues"):
        compute_track("contact-count", SEQUENCE, contacts=np.zeros((5, 5)))


def test_registry_names_what_each_track_needs():
    assert set(TRACKS) == {"entropy", "mean-score", "substitution", "contact-count", "attention", "pca"}
    assert TRACKS["attention"].pdb_scale == 100  # weights in [0, 1] would lose all but 2 decimals
    for track in TRACKS.values():
        assert set(track.needs) <= {"logits", "scores", "contacts", "attention", "representations"}


def test_labels_say_the_choices_one_based():
    assert track_label("entropy") == "entropy (bits)"
    assert track_label("attention", residue=16, layer=6, head=2) == "attention from residue 17 (layer 6, head 3)"
    assert track_label("attention", residue=0, layer=2) == "attention from residue 1 (layer 2, mean of heads)"
    # Aβ42 numbered as in APP770 (its residue 1 is APP's 672): position 20 is residue 691.
    from_672 = track_label("attention", residue=19, layer=2, numbering=Numbering(672))
    assert from_672 == "attention from residue 691 (layer 2, mean of heads)"
    assert track_label("substitution", amino_acid="P", strategy="wt-marginals") == "score of P at each position, wt-marginals"
    assert track_label("pca", component=2, layer=0) == "PC2 of layer 0"
    with pytest.raises(ValueError, match="unknown track"):
        track_label("plddt")

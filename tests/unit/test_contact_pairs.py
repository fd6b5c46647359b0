"""Contact pair tables (contact_pairs.py) against plain-Python rankings."""

from __future__ import annotations

import numpy as np

from flamino_core.analysis.contact_pairs import contacts_frame, top_contacts_frame
from flamino_core.numbering import Numbering


def test_top_l_pairs_match_a_plain_ranking_and_skip_close_and_unpredicted_pairs():
    rng = np.random.default_rng(11)
    length, first = 40, 73
    contacts = rng.random((length, length)).round(2)  # rounded: ties, broken by (i, j)
    contacts = (contacts + contacts.T) / 2
    contacts[3, 30] = contacts[30, 3] = np.nan  # not predicted
    contacts[0, 2] = contacts[2, 0] = 5.0  # closer than 6: never among them, however high
    sequence = "".join(rng.choice(list("ACDEFGHIKLMNPQRSTVWY"), length))
    pairs = [(p, i, j) for i in range(length) for j in range(i + 6, length) if not np.isnan(p := contacts[i, j])]
    expected = sorted(pairs, key=lambda t: (-t[0], t[1], t[2]))[:length]
    top = top_contacts_frame(contacts, sequence, Numbering(first))
    assert list(zip(top.probability, top.i - first, top.j - first)) == expected
    assert list(top.residue_i) == [sequence[i] for _, i, _ in expected]
    assert len(top) == length and list(top.columns) == list(contacts_frame(contacts, sequence, Numbering(first)).columns)


def test_every_pair_once():
    contacts = np.arange(25, dtype=float).reshape(5, 5)
    frame = contacts_frame(contacts, "MKVLA", Numbering(1))
    assert list(zip(frame.i, frame.j)) == [(i, j) for i in range(1, 6) for j in range(i + 1, 6)]
    assert list(frame.probability) == [contacts[i - 1, j - 1] for i, j in zip(frame.i, frame.j)]

"""The indefinite article messages put before a generated word (issue 50: "a insertion")."""

import pytest

from flamino_core.wording import article, with_article


# Expected articles as an English speaker reads each word aloud, written by hand (not derived from
# the rule under test): the words flamino generates (variant kinds, family titles, layer and
# residue counts) and the exceptions of each rule.
@pytest.mark.parametrize("word, expected", [
    ("insertion", "an"), ("deletion", "a"), ("delins", "a"), ("duplication", "a"), ("stop", "a"),
    ("frameshift", "a"), ("substitution", "a"), ("multi-substitution", "a"), ("extension", "an"),
    ("ESM-2", "an"), ("ESM-1b", "an"), ("ESM C", "an"), ("SaProt", "a"),
    ("UniProt", "a"), ("unmasked", "an"), ("one-residue", "a"), ("hour", "an"), ("hydrophobic", "a"),
    ("8-layer", "an"), ("6-layer", "a"), ("11-residue", "an"), ("18-residue", "an"), ("80-residue", "an"),
    ("800-residue", "an"), ("110-residue", "a"), ("118-residue", "a"), ("1,800-residue", "a"),
    ("11,000-row", "an"), ("18000-row", "an"), ("8,000,000-row", "an"), ("2-character", "a"),
])
def test_article_follows_the_sound(word, expected):
    assert article(word) == expected


def test_with_article_puts_the_article_before_the_word():
    assert with_article("insertion") == "an insertion"
    assert with_article("SaProt model") == "a SaProt model"

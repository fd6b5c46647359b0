"""HGVS protein indels, stops and frameshifts read into one mutated sequence each (issue #38,
item 1). Every expected sequence below was written out by hand from the HGVS rules, not computed."""

from __future__ import annotations

import time

import pytest

from flamino_core.numbering import Numbering
from flamino_core.variants import notation as m
from flamino_core.variants.indels import parse_mutations, parse_variant
from flamino_core.variants.notation import Variant

# A made-up protein, positions counted by hand:
# M1 K2 V3 L4 A5 G6 H7 E8 W9 Y10 P11 Q12 R13 S14 T15 D16 C17 I18 N19 F20
SEQ = "MKVLAGHEWYPQRSTDCINF"
# Human beta-globin with its initiator Met: M1 V2 H3 L4 T5 P6 E7 E8 K9 S10 A11 V12 T13 A14 L15 W16
HBB = "MVHLTPEEKSAVTALWGKVNVDEVGGEALGRLLVVYPWTQRFFESFGDLSTPDAVMGNPKVKAHGKKVLGAFSDGLAHLDNLKGTFATLSELHCDKLHVDPENFRLLGNVLVCVLAHHFGKEFTPPVQAAYQKVVAGVANALAHKYH"


def indel(text: str, sequence: str = SEQ, numbering: Numbering = Numbering()) -> Variant:
    parsed = parse_variant(text, sequence, numbering)
    assert isinstance(parsed, Variant), parsed
    return parsed


@pytest.mark.parametrize(
    "text, mutant, kind, expected",
    [
        ("p.Lys2del", "K2del", "deletion", "MVLAGHEWYPQRSTDCINF"),
        ("K2del", "K2del", "deletion", "MVLAGHEWYPQRSTDCINF"),
        ("p.Lys2_Leu4del", "K2_L4del", "deletion", "MAGHEWYPQRSTDCINF"),
        ("p.(Val3_Leu4del)", "V3_L4del", "deletion", "MKAGHEWYPQRSTDCINF"),
        ("p.Lys2_Val3insGlyAla", "K2_V3insGA", "insertion", "MKGAVLAGHEWYPQRSTDCINF"),
        ("K2_V3insGA", "K2_V3insGA", "insertion", "MKGAVLAGHEWYPQRSTDCINF"),
        ("p.Phe20delinsTrp", "F20delinsW", "delins", "MKVLAGHEWYPQRSTDCINW"),
        ("p.Lys2_Leu4delinsAsn", "K2_L4delinsN", "delins", "MNAGHEWYPQRSTDCINF"),
        ("p.Gly6delinsTrpVal", "G6delinsWV", "delins", "MKVLAWVHEWYPQRSTDCINF"),
        ("p.Lys2dup", "K2dup", "duplication", "MKKVLAGHEWYPQRSTDCINF"),
        ("p.Lys2_Leu4dup", "K2_L4dup", "duplication", "MKVLKVLAGHEWYPQRSTDCINF"),
        ("p.Trp9Ter", "W9*", "stop", "MKVLAGHE"),
        ("p.Trp9*", "W9*", "stop", "MKVLAGHE"),
        ("W9*", "W9*", "stop", "MKVLAGHE"),
        ("W9X", "W9*", "stop", "MKVLAGHE"),  # the legacy stop
        ("p.Trp9ProfsTer2", "W9Pfs*2", "frameshift", "MKVLAGHEP"),  # Pro, then the new stop
        ("W9fs*1", "W9fs*1", "frameshift", "MKVLAGHE"),
        ("p.Trp9ProfsTer23", "W9Pfs*23", "frameshift", "MKVLAGHE"),  # the new tail is not written
        ("p.[Lys2del;Trp9Phe]", "K2del:W9F", "indel", "MVLAGHEFYPQRSTDCINF"),
        ("p.[Lys2_Val3insGly;Phe20Trp]", "K2_V3insG:F20W", "indel", "MKGVLAGHEWYPQRSTDCINW"),
        ("NP_000000.1:p.Lys2del", "K2del", "deletion", "MVLAGHEWYPQRSTDCINF"),
        ("NM_1.1(GENE):c.4_6del (p.Lys2del)", "K2del", "deletion", "MVLAGHEWYPQRSTDCINF"),
    ],
)
def test_each_indel_is_one_mutated_sequence(text, mutant, kind, expected):
    variant = indel(text)
    assert (variant.mutant, variant.kind, variant.apply(SEQ)) == (mutant, kind, expected)
    assert variant.substitutions == () and variant.text == text


def test_the_record_numbering_applies():
    # HBB numbered from 2 (its initiator Met dropped), as a /2-147 record would be.
    without_met = HBB[1:]
    variant = indel("p.Glu7_Glu8del", without_met, Numbering(2))
    assert variant.apply(without_met)[:10] == "VHLTPKSAVT" and variant.positions == (7, 8)
    assert variant.mutant == "E7_E8del"
    shifted = parse_variant("p.Glu7_Glu8del", without_met)  # numbered from 1: P6, E7
    assert isinstance(shifted, m.VariantIssue) and shifted.kind == m.WRONG_WILD_TYPE
    assert "the sequence has K at position 8, not E" in shifted.message
    outside = parse_variant("p.Met1del", without_met, Numbering(2))
    assert outside.kind == m.OUT_OF_RANGE and "position 1 is outside the sequence (2-147" in outside.message
    assert indel("p.Val2_His3insGly", without_met, Numbering(2)).apply(without_met)[:5] == "VGHLT"
    assert indel("p.Glu7Ter", without_met, Numbering(2)).apply(without_met) == "VHLTP"


@pytest.mark.parametrize(
    "text, kind, words",
    [
        ("p.Trp9fs", m.INDEL, ["without its new stop", "run past the wild type's end"]),
        ("p.Trp9ProfsTer?", m.INDEL, ["without its new stop"]),
        ("p.Met1ext-5", m.INDEL, ["an extension", "not written"]),
        ("p.*21Glnext*17", m.INDEL, ["an extension"]),
        ("p.Lys2_Val3ins5", m.INDEL, ["inserted residues are not written out"]),
        ("p.Lys2_Val3insX[5]", m.INDEL, ["inserted residues are not written out"]),
        ("p.Lys2_Val3insValTer", m.STOP, ["a stop among the inserted residues"]),
        ("p.Lys2_Leu4insGly", m.MALFORMED, ["two neighbouring residues"]),
        ("p.Leu4_Lys2del", m.MALFORMED, ["before it starts"]),
        ("p.Lys2delVal", m.MALFORMED, ["nothing follows del"]),
        ("p.Lys2_Leu4delinsXaa", m.NON_STANDARD, ["X is not one of the 20"]),
        ("p.Lys2_Leu4delinsLysValLeu", m.SYNONYMOUS, ["synonymous"]),
        ("p.Met1Ter", m.INDEL, ["no protein is left"]),
        ("p.Met1_Phe20del", m.INDEL, ["deletes the whole protein"]),
        ("p.Ala2del", m.WRONG_WILD_TYPE, ["the sequence has K at position 2, not A"]),
        ("p.Lys30del", m.OUT_OF_RANGE, ["position 30 is outside the sequence (1-20)"]),
        ("p.[Lys2del;Lys2Ala]", m.REPEATED, ["two changes touch position 2"]),
        ("p.[Trp9Ter;Lys2Ala]", m.INDEL, ["a stop or frameshift together with other changes"]),
        ("*21Q", m.STOP, ["stop-loss"]),
        ("p.Lys2_Val3insJunk", m.MALFORMED, ["not a run of amino-acid codes"]),
    ],
)
def test_every_indel_refusal_names_the_entry_and_the_reason(text, kind, words):
    issue = parse_variant(text, SEQ, order=3)
    assert isinstance(issue, m.VariantIssue), issue
    assert issue.kind == kind and issue.order == 3 and issue.text == text
    for word in words:
        assert word in issue.message, issue.message
    assert repr(text) in issue.message or text in issue.message


def test_substitution_strategies_still_refuse_indels_and_say_what_scores_them():
    for text in ("p.Lys2del", "p.Trp9Ter", "W9X", "p.Lys2_Val3insGly"):
        issue = m.parse_variant(text, SEQ)  # the substitution notation alone: as before
        assert isinstance(issue, m.VariantIssue) and issue.kind in (m.INDEL, m.STOP)
        assert "flamino variants --strategy pll or wt-pll-approx scores it" in issue.message
    assert "only substitutions can be scored" in m.parse_variant("p.Lys2del", SEQ).message
    assert "ESM-2 has no stop token" in m.parse_variant("p.Trp9Ter", SEQ).message


def test_a_mixed_list_keeps_its_order_and_substitutions_stay_substitutions():
    text = "K2A, p.Lys2del, p.[Lys2Ala;Val3Asp], W9*, p.Trp9fs, p.Lys2_Val3insGly"
    variants, issues = parse_mutations(text, SEQ)
    assert [(v.order, v.kind) for v in variants] == [
        (0, "substitution"), (1, "deletion"), (2, "multi-substitution"), (3, "stop"), (5, "insertion")]
    assert [(i.order, i.kind) for i in issues] == [(4, m.INDEL)]
    assert variants[0].substitutions and not variants[0].edits  # scored exactly as before
    assert variants[2].apply(SEQ) == "MADLAGHEWYPQRSTDCINF"


def test_a_table_of_indels_is_read_by_line():
    table = "mutant,label\np.Lys2del,pathogenic\np.Lys2_Val3ins5,\nW9*,benign\n"
    variants, issues = parse_mutations(table, SEQ)
    assert [(v.mutant, v.label) for v in variants] == [("K2del", "pathogenic"), ("W9*", "benign")]
    assert issues[0].message.startswith("line 3: ") and "not written out" in issues[0].message


def test_hostile_indel_entries_read_in_linear_time():
    """Long runs in every slot the indel patterns have (digits, codes, inserted residues) stay fast:
    each entry is capped at MAX_ENTRY_CHARS and every pattern is anchored with no nested repeat."""
    entries = ["K2_V3ins" + "Gly" * 600, "K" + "9" * 1500 + "del", "K2_V3ins" + "A" * 1900,
               "p.[" + "K2del;" * 300 + "]",
               "K2_V3delins" + "*" * 1900, "W9" + "P" * 1900 + "fs*2"]
    start = time.perf_counter()
    for _ in range(50):
        for entry in entries:
            parse_variant(entry, SEQ)
    assert time.perf_counter() - start < 2.0  # measured ~0.05 s; a quadratic pattern takes minutes


@pytest.mark.parametrize(
    "mutated, mutant, kind",
    [
        ("MVLAGHEWYPQRSTDCINF", "K2del", "deletion"),
        ("MKVLAGHEWYPQR", "S14_F20del", "deletion"),
        ("MKVLAGGHEWYPQRSTDCINF", "G6_H7insG", "insertion"),  # G6dup in HGVS: the same protein
        ("MKVLAGHEWYPQRSTDCINFG", "F20insG", "insertion"),
        ("MKVLAWWHEWYPQRSTDCINF", "G6delinsWW", "delins"),
        ("MKVLAWHEWYPQRSTDCINF", "G6W", "substitution"),
    ],
)
def test_a_whole_mutated_sequence_is_one_edit_of_the_wild_type(mutated, mutant, kind):
    from flamino_core.variants.indels import from_sequence

    variant = from_sequence(SEQ, mutated)
    assert (variant.mutant, variant.kind, variant.apply(SEQ)) == (mutant, kind, mutated)


def test_a_whole_sequence_that_cannot_be_scored_says_why():
    from flamino_core.variants.indels import from_sequence

    assert from_sequence(SEQ, SEQ).kind == m.SYNONYMOUS
    assert "'B' is not one of the 20 standard amino acids" in from_sequence(SEQ, "MKB").message

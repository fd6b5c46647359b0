"""Mutation notation: every accepted spelling, every refusal, numbering offsets, tables, junk."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flamino_core.variants import notation as m
from flamino_core.inputs.numbering import Numbering, first_number
from flamino_core.variants.notation import Substitution, Variant, parse_mutations, parse_variant

# Human beta-globin; positions counted by hand: M1 V2 H3 L4 T5 P6 E7 E8 K9 S10 A11 V12 T13 A14 L15 W16 G17.
HBB = "MVHLTPEEKSAVTALWGKVNVDEVGGEALGRLLVVYPWTQRFFESFGDLSTPDAVMGNPKVKAHGKKVLGAFSDGLAHLDNLKGTFATLSELHCDKLHVDPENFRLLGNVLVCVLAHHFGKEFTPPVQAAYQKVVAGVANALAHKYH"


def single(text, sequence=HBB, numbering=Numbering()):
    parsed = parse_variant(text, sequence, numbering)
    assert isinstance(parsed, Variant), parsed
    return parsed


@pytest.mark.parametrize(
    "text",
    ["E7V", "e7v", "p.Glu7Val", "p.(Glu7Val)", "Glu7Val", "p.E7V", "p.GLU7VAL", "p.[Glu7Val]", "E7Val"],
)
def test_every_spelling_of_one_substitution(text):
    variant = single(text)
    # Sickle-cell HbS is E7V in the numbering that counts the initiator methionine (E6V without it).
    assert variant.substitutions == (Substitution(6, "E", "V"),)
    assert variant.mutant == "E7V" and variant.positions == (7,) and variant.text == text.strip()
    assert variant.apply(HBB) == HBB[:6] + "V" + HBB[7:]


@pytest.mark.parametrize("text", ["E7V:K9A", "p.[Glu7Val;Lys9Ala]", "p.[(Glu7Val;Lys9Ala)]", "E7V : K9A"])
def test_multi_mutants(text):
    variant = single(text)
    assert variant.substitutions == (Substitution(6, "E", "V"), Substitution(8, "K", "A"))
    assert variant.mutant == "E7V:K9A" and variant.positions == (7, 9)


def test_a_list_in_any_separator_keeps_input_order():
    text = "E7V\nK9A, p.[Glu7Val;Lys9Ala]; p.(Ser10Gly)\tV2A  H3D:L4P"
    variants, issues = parse_mutations(text, HBB)
    assert issues == []
    assert [v.mutant for v in variants] == ["E7V", "K9A", "E7V:K9A", "S10G", "V2A", "H3D:L4P"]
    assert [v.order for v in variants] == list(range(6))


@pytest.mark.parametrize(
    "text, kind, words",
    [
        ("E7X", m.STOP, ["E7X", "X is the legacy sign for a stop", "p.E7*"]),
        ("E7B", m.NON_STANDARD, ["B is not one"]),
        ("p.Glu7Sec", m.NON_STANDARD, ["U is not one"]),
        ("E7*", m.STOP, ["E7*", "stop"]),
        ("p.Glu7Ter", m.STOP, ["p.Glu7Ter", "stop"]),
        ("p.Glu7*", m.STOP, ["stop"]),
        ("*7E", m.STOP, ["stop-loss"]),
        ("E7E", m.SYNONYMOUS, ["E7E", "synonymous"]),
        ("p.Glu7=", m.SYNONYMOUS, ["synonymous"]),
        ("p.Glu7del", m.INDEL, ["p.Glu7del", "deletion"]),
        ("p.Glu7_Lys9del", m.INDEL, ["deletion"]),
        ("p.Glu7_Glu8insGly", m.INDEL, ["insertion"]),
        ("p.Glu7dup", m.INDEL, ["duplication"]),
        ("p.Glu7fs", m.INDEL, ["frameshift"]),
        ("p.Glu7GlyfsTer5", m.INDEL, ["frameshift"]),
        ("p.Glu7delinsValAla", m.INDEL, ["only substitutions"]),
        ("E7V:E7A", m.REPEATED, ["E7V:E7A", "position 7 is mutated twice"]),
        ("A7V", m.WRONG_WILD_TYPE, ["A7V", "the sequence has E at position 7, not A"]),
        ("p.Ala7Val", m.WRONG_WILD_TYPE, ["p.Ala7Val", "has E at position 7"]),
        ("E200V", m.OUT_OF_RANGE, ["E200V", "position 200 is outside the sequence (1-147)"]),
        ("E0V", m.OUT_OF_RANGE, ["position 0 is outside"]),
        ("E7V:A9V", m.WRONG_WILD_TYPE, ["E7V:A9V", "has K at position 9, not A"]),
        ("hello", m.MALFORMED, ["'hello' is not a protein substitution"]),
        ("p.Xyz7Val", m.MALFORMED, ["'Xyz' is not an amino-acid code"]),
        ("p.Glu7?", m.MALFORMED, ["unknown"]),
        ("E7V::K9A", m.MALFORMED, ["empty substitution"]),
        ("7V", m.MALFORMED, ["not a protein substitution"]),
        ("EV", m.MALFORMED, ["not a protein substitution"]),
    ],
)
def test_every_refusal_names_the_variant_and_the_reason(text, kind, words):
    issue = parse_variant(text, HBB, order=4)
    assert isinstance(issue, m.VariantIssue), issue
    assert issue.kind == kind and issue.order == 4 and issue.text == text
    for word in words:
        assert word in issue.message, issue.message


def test_valid_variants_are_kept_beside_refused_ones():
    variants, issues = parse_mutations("E7V E7* garbage K9A p.Glu7del A7V", HBB)
    assert [(v.order, v.mutant) for v in variants] == [(0, "E7V"), (3, "K9A")]
    assert [(i.order, i.kind) for i in issues] == [
        (1, m.STOP), (2, m.MALFORMED), (4, m.INDEL), (5, m.WRONG_WILD_TYPE)
    ]


def test_offset_numbering():
    domain = HBB[20:60]  # residues 21..60 of the full chain
    variant = single("E23V", domain, Numbering(21))  # HBB[22] is E
    assert HBB[22] == "E" and variant.substitutions == (Substitution(2, "E", "V"),)
    assert variant.mutant == "E23V" and variant.positions == (23,)
    issue = parse_variant("V20A", domain, Numbering(21))
    assert issue.kind == m.OUT_OF_RANGE and "outside the sequence (21-60, numbering starts at 21)" in issue.message


def test_offset_from_record_id():
    assert first_number("SECY_CHLTR/73-433", 361) == (73, "")
    assert first_number("SECY_CHLTR/73-433") == (73, "")
    first, note = first_number("SECY_CHLTR/73-433", 300)
    assert first == 73 and "73-433" in note and "300" in note
    assert first_number("sp|P68871|HBB_HUMAN", 147) == (1, "")
    assert first_number("", 10) == (1, "")


def test_a_shifted_numbering_is_noticed():
    # Variants numbered as in the full chain, pasted against the domain numbered from 1.
    domain = HBB[20:60]
    listed = " ".join(f"{HBB[i]}{i + 1}{'A' if HBB[i] != 'A' else 'G'}" for i in range(25, 35))
    variants, issues = parse_mutations(listed, domain, Numbering(1))
    assert len(variants) < 5  # a few fit by chance (L29A: domain[28] is L too)
    (hint,) = [i for i in issues if i.order == -1]
    assert "all of them fit if the numbering starts at 21" in hint.message
    assert len(parse_mutations(listed, domain, Numbering(21))[0]) == 10
    # Few variants: no hint (a chance fit is too likely).
    _, issues = parse_mutations("A7V", HBB)
    assert all(i.order >= 0 for i in issues)


def test_csv_with_mutant_and_label_columns():
    table = "id,mutant,label\n1,E7V,pathogenic\n2,K9A,benign\n\n3,,x\n4,E7*,benign\n5,p.[Glu7Val;Lys9Ala],\n"
    variants, issues = parse_mutations(table, HBB)
    assert [(v.mutant, v.label) for v in variants] == [("E7V", "pathogenic"), ("K9A", "benign"), ("E7V:K9A", "")]
    assert [(i.order, i.kind, i.label) for i in issues] == [(2, m.MALFORMED, "x"), (3, m.STOP, "benign")]
    assert issues[0].message == "line 5: no mutant"
    assert issues[1].message.startswith("line 6: 'E7*'")


def test_tab_separated_bytes_with_bom():
    variants, issues = parse_mutations("\ufeffmutant\tlabel\nE7V\tB\n".encode("utf-8"), HBB)
    assert [(v.mutant, v.label) for v in variants] == [("E7V", "B")] and not issues


def test_nothing_found_and_undecodable_input_are_said():
    for text in ["", "  \n ,;", b"\xff\xfe\x00", '"mutant\nE7V,x']:
        variants, issues = parse_mutations(text, HBB)
        assert not variants and len(issues) == 1 and issues[0].order == -1 and issues[0].kind == m.INPUT


# --- nothing crashes --------------------------------------------------------------------------------
_PIECES = st.sampled_from(
    ["E7V", "p.", "Glu", "Ter", "*", "=", "?", ":", ";", ",", " ", "\n", "[", "]", "(", ")", "_", "del", "ins",
     "fs", "7", "0", '"mutant', "mutant,label\n", "99999999999999999999", "mutant", "label", "\t", '"', "A", "x", "é", "\x00", "\ufeff"]
)
junk = st.one_of(st.text(max_size=200), st.lists(_PIECES, max_size=40).map("".join))


@settings(deadline=None, max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(junk, st.integers(-5, 200))
def test_any_text_gives_variants_or_messages_never_an_exception(text, first):
    variants, issues = parse_mutations(text, HBB, Numbering(first))
    orders = [v.order for v in variants] + [i.order for i in issues if i.order >= 0]
    assert len(orders) == len(set(orders))
    assert sorted(orders) == list(range(len(orders)))
    assert variants or issues
    for v in variants:
        assert len(set(v.indices)) == len(v.indices) >= 1
        for s in v.substitutions:
            assert 0 <= s.index < len(HBB) and HBB[s.index] == s.wt
            assert s.mt in "ACDEFGHIKLMNPQRSTVWY" and s.mt != s.wt
        assert single(v.mutant, HBB, Numbering(first)).substitutions == v.substitutions  # the spelling reads back
    for issue in issues:
        assert issue.message.strip() and issue.kind


@settings(deadline=None, max_examples=200)
@given(st.binary(max_size=200))
def test_any_bytes(data):
    variants, issues = parse_mutations(data, HBB)
    assert variants or issues


def test_substitution_names_follow_the_map_rows_and_the_numbering():
    import numpy as np

    from flamino_core.variants.substitution_maps import score_rows
    from flamino_core.variants.notation import substitution_names

    names = substitution_names("VHL", Numbering(73))
    rows = list(score_rows("x", "VHL", np.zeros((3, 20))))
    assert len(names) == len(rows) == 60
    assert [f"{wt}{position + 72}{mt}" for _, position, wt, mt, _ in rows] == names
    assert names[:2] == ["V73A", "V73C"] and names[-1] == "L75Y"
    variants, issues = parse_mutations(" ".join(names), "VHL", Numbering(73))  # each reads back (but synonyms)
    assert len(variants) == 57 and {i.kind for i in issues} == {"synonymous"}

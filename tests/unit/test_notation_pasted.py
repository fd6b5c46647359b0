"""Issue 23 item 7: variant names as people paste them, read on the real HRAS sequence (RASH_HUMAN,
P01112, a ProteinGym target in ../shared/fasta/proteingym_targets.fa): the protein change where
there is one, a specific reason where there is none. HRAS G12V (c.35G>T) is ClinVar's
NM_005343.4(HRAS):c.35G>T (p.Gly12Val); W1282X and ΔF508 are CFTR's best-known variants, named
as their papers and patients name them."""

from __future__ import annotations

import pytest

from flamino_core.cli import main
from flamino_core.variants import notation as m
from flamino_core.variants.notation import parse_mutations, parse_variant


@pytest.fixture(scope="module")
def hras(real_sequences) -> str:
    sequence = real_sequences.get("RASH_HUMAN")
    if sequence is None:
        pytest.skip("RASH_HUMAN is not in ../shared/fasta/proteingym_targets.fa")
    assert sequence[11] == "G" and sequence[60] == "Q"  # Gly12, Gln61
    return sequence


@pytest.mark.parametrize("text", ["NP_005334.1:p.Gly12Val", "HRAS:p.G12V", "NM_005343.4(HRAS):c.35G>T (p.Gly12Val)",
                                  "NP_005334.1:p.(Gly12Val)", "p.Gly12Val"])
def test_prefixed_names_read_their_protein_change(hras, text):
    variant = parse_variant(text, hras, reference="NP_005334.1")
    assert isinstance(variant, m.Variant) and variant.mutant == "G12V" and variant.text == text


def test_a_clinvar_name_is_one_entry_in_a_list(hras):
    variants, issues = parse_mutations("NM_005343.4(HRAS):c.35G>T (p.Gly12Val)\nG13D, NP_005334.1:p.Gln61Leu", hras)
    assert [v.mutant for v in variants] == ["G12V", "G13D", "Q61L"] and not issues


@pytest.mark.parametrize(
    "text, kind, words",
    [
        ("Q61X", m.STOP, ["'Q61X'", "legacy sign for a stop", "p.Q61*"]),
        ("W1282X", m.STOP, ["'W1282X'", "legacy sign for a stop"]),
        ("\u0394F508", m.INDEL, ["a deletion", "p.F508del"]),
        ("delF508", m.INDEL, ["a deletion", "p.F508del"]),
        ("NM_005343.4:c.35G>T", m.NUCLEOTIDE, ["a nucleotide change (c.)", "protein consequence"]),
        ("c.35G>T", m.NUCLEOTIDE, ["a nucleotide change"]),
        ("NP_001123914.1:p.Gly12Val", m.WRONG_REFERENCE, ["names NP_001123914.1, but the sequence is NP_005334.1"]),
    ],
)
def test_no_protein_substitution_gets_its_own_reason(hras, text, kind, words):
    issue = parse_variant(text, hras, reference="NP_005334.1")
    assert isinstance(issue, m.VariantIssue) and issue.kind == kind
    assert all(w in issue.message for w in words) and "not a protein substitution" not in issue.message


def test_a_prefix_is_checked_only_against_an_id_of_its_kind(hras):
    for reference in ("sp|P01112|RASH_HUMAN", "RASH_HUMAN", "", "NP_005334"):
        assert isinstance(parse_variant("NP_005334.1:p.Gly12Val", hras, reference=reference), m.Variant)
    assert isinstance(parse_variant("NM_000000.1(HRAS):c.35G>T (p.Gly12Val)", hras, reference="NP_005334.1"), m.Variant)


def test_flamino_variants_reads_them_against_the_record(hras, tmp_path, capsys):
    fasta, out = tmp_path / "hras.fa", tmp_path / "hras.csv"
    fasta.write_text(f">NP_005334.1 GTPase HRas\n{hras}\n")
    code = main(["variants", str(fasta), "--mutations", "NM_005343.4(HRAS):c.35G>T (p.Gly12Val), HRAS:p.G12V, W1282X, "
                 "NP_000000.1:p.Gly12Val", "-m", "random:tiny", "-o", str(out)])  # fmt: skip
    assert code == 0
    rows = out.read_text().splitlines()
    assert rows[1].startswith("NP_005334.1,NM_005343.4(HRAS):c.35G>T (p.Gly12Val),") and rows[1].endswith(",ok")
    assert rows[2].endswith(",ok") and "legacy sign for a stop" in rows[3] and "names NP_000000.1" in rows[4]

"""Sequences pasted in three-letter codes are converted (or refused with the reason), never read
letter by letter. The three-letter texts are made from the real haemoglobin beta sequence with
Biopython's ``seq3``, the inverse of the conversion under test."""

from __future__ import annotations

import pytest
from Bio.SeqUtils import seq3

from flamino_core.inputs.fasta import parse_fasta_text
from conftest import SHARED_FASTA


@pytest.fixture(scope="module")
def hbb() -> str:
    from flamino_core.inputs.fasta import read_fasta

    return read_fasta(SHARED_FASTA / "HBB_HUMAN.fa").records[0].sequence


def codes(sequence: str) -> list[str]:
    text = seq3(sequence)  # MetValHis...
    return [text[i:i + 3] for i in range(0, len(text), 3)]


@pytest.mark.parametrize(
    "style",
    [
        lambda c: "-".join(c),  # Met-Val-His (papers, HGVS)
        lambda c: " ".join(x.upper() for x in c),  # MET VAL HIS (PDB SEQRES)
        lambda c: "\n".join(" ".join(c[i:i + 13]) for i in range(0, len(c), 13)),  # wrapped lines
        lambda c: "-".join(x.lower() for x in c),
        lambda c: "".join(c),  # MetValHis, Title case run together
    ],
    ids=["dashes", "upper-spaces", "wrapped", "lower-dashes", "title-run"],
)
@pytest.mark.parametrize("header", ["", ">HBB_HUMAN haemoglobin beta\n"])
def test_three_letter_sequences_are_converted_with_a_warning(hbb, style, header):
    parsed = parse_fasta_text(header + style(codes(hbb)) + "\n")
    assert [r.sequence for r in parsed.records] == [hbb]
    (warning,) = parsed.warnings
    assert "three-letter codes" in warning.message and f"{len(hbb)} three-letter" in warning.message
    assert not parsed.errors


def test_a_terminal_ter_is_a_stop_and_an_internal_one_is_refused(hbb):
    parsed = parse_fasta_text("-".join(codes(hbb) + ["Ter"]))
    assert parsed.records[0].sequence == hbb
    inner = parse_fasta_text(">x\n" + "-".join(codes(hbb[:10]) + ["Ter"] + codes(hbb[10:20])))
    assert not inner.records
    assert "position 11" in str(inner.errors[0]) and "stop" in str(inner.errors[0])


def test_a_typo_among_three_letter_codes_is_named_not_read_as_letters(hbb):
    words = codes(hbb[:20])
    words[6] = "Gul"
    parsed = parse_fasta_text(">typo\n" + "-".join(words))
    assert not parsed.records
    (error,) = parsed.errors
    assert "'Gul' (residue 7)" in error.message


def test_uppercase_codes_run_together_are_refused_with_the_reason(hbb):
    parsed = parse_fasta_text("".join(codes(hbb[:30])).upper())
    assert not parsed.records
    assert "three-letter" in parsed.errors[0].message and "separate the codes" in parsed.errors[0].message


@pytest.mark.parametrize("text", [
    "MVHLTPEEKSAVTALWGKV",  # one-letter
    "MKV LLA GHT WPA EEK",  # one-letter in blocks of three (not codes)
    "mvhltpeeksavtalwgkv",
])
def test_one_letter_sequences_are_not_taken_for_three_letter_codes(text):
    parsed = parse_fasta_text(text)
    assert parsed.records[0].sequence == "".join(text.split()).upper()
    assert not any("three-letter" in w.message for w in parsed.warnings)

"""Issue 50 row 5: a record made of a structure's chain takes mutations in the structure's own
numbering (1GBT: chymotrypsin numbering, with gaps and insertion codes), in the app and on the
command line, and shows both numberings.

The structure's labels are checked against the independent ``_atom_site`` reader
(``structure_reference``); a variant written in the structure's numbering must score exactly what
the same residue written in the sequence's numbering scores (the residue found here through the
reference reader, not through the code under test)."""

from __future__ import annotations

import pandas as pd
import pytest

from flamino_core.numbering import Numbering
from flamino_core.variants.author_numbering import AuthorNumbering, from_record
from flamino_core.structure.files.chain_records import chain_records
from flamino_core.structure.files.reading import read_structure
from flamino_core.variants import indels, notation
from flamino_core.variants.structure_numbering import COLUMN, parse_mutations, with_structure_column
from structure_reference import STANDARD, STRUCTURES, read_reference

GBT = STRUCTURES / "1GBT.cif"
FIRST = 16  # 1GBT_A/16-245: the pages number the record from its first residue
NUMBERING = Numbering(FIRST)


@pytest.fixture(scope="module")
def trypsin():
    (chain,) = chain_records(read_structure(GBT))
    return chain.record


@pytest.fixture(scope="module")
def reference():
    """Chain A's amino acids as the raw _atom_site table lists them: label -> (index, letter)."""
    residues = [r for r in read_reference(GBT, "A") if r.name in STANDARD and "CA" in r.atoms]
    return {r.label: (i, STANDARD[r.name]) for i, r in enumerate(residues)}


def sequence_name(reference, label: str, target: str) -> str:
    """The substitution at the structure's ``label`` written in the record's numbering (by the
    independent reader: the residue's place among the chain's amino acids, from 16)."""
    index, letter = reference[label]
    return f"{letter}{FIRST + index}{target}"


def test_the_record_carries_the_files_labels_of_every_residue(trypsin, reference):
    numbering = from_record(trypsin)
    assert numbering is not None and list(numbering.labels) == list(reference)
    assert {"184A", "188A", "221A", "65A"} <= set(numbering.labels) and "35" not in numbering.labels
    # The catalytic triad as the literature numbers it: H57, D102, S195.
    assert [reference[label][1] for label in ("57", "102", "195")] == ["H", "D", "S"]


@pytest.mark.parametrize("labels", [("16", "17", "18", "20", "184", "184A", "184B", "185"),
                                    ("-3", "-2", "-1", "0", "1", "2"), ("7",), ("1", "2", "3", "10A")])
def test_labels_survive_the_header(labels):
    written = AuthorNumbering(labels).encode()
    assert " " not in written and "=" not in written  # one key=value field of the header
    assert AuthorNumbering.decode(written).labels == labels


def test_a_header_that_does_not_number_the_sequence_is_ignored_not_expanded():
    """A FASTA header is a stranger's text: a numbering of another length is not the record's,
    and a run of two billion numbers is refused by its count, before anything is expanded."""
    import time

    from flamino_core.inputs.fasta import ProteinRecord

    def record(description: str):
        return ProteinRecord("x", description, "MKTAYIAKQR")

    assert from_record(record("numbering=1..10")).labels == tuple(str(n) for n in range(1, 11))
    assert from_record(record("numbering=1..9")) is None and from_record(record("numbering=1..10,11")) is None
    began = time.monotonic()
    assert from_record(record("numbering=1..2000000000")) is None
    assert from_record(record("numbering=1.." + "9" * 5000)) is None  # past Python's int() digits
    assert time.monotonic() - began < 1.0  # (expanding the run would take minutes and gigabytes)
    assert from_record(record("numbering=1..5,x,7..10")) is None


def test_a_structure_numbered_list_reads_as_the_same_residues(trypsin, reference):
    numbering = from_record(trypsin)
    written = "S195A, H57A, D102N, Y184AF, p.Ser195Ala, S195A:H57A"
    variants, issues = parse_mutations(written, trypsin.sequence, NUMBERING, numbering, reference=trypsin.id)
    assert issues == []
    assert [v.text for v in variants] == ["S195A", "H57A", "D102N", "Y184AF", "p.Ser195Ala", "S195A:H57A"]
    expected = [sequence_name(reference, "195", "A"), sequence_name(reference, "57", "A"),
                sequence_name(reference, "102", "N"), sequence_name(reference, "184A", "F"),
                sequence_name(reference, "195", "A"),
                f"{sequence_name(reference, '195', 'A')}:{sequence_name(reference, '57', 'A')}"]
    assert [v.mutant for v in variants] == expected
    plain, _ = notation.parse_mutations(" ".join(expected), trypsin.sequence, NUMBERING)
    assert [v.substitutions for v in variants] == [v.substitutions for v in plain]


def test_an_insertion_code_is_read_only_where_the_structure_has_one(trypsin, reference):
    numbering = from_record(trypsin)
    g184 = reference["184"][1]
    # G184A: residue 184 to A (nothing follows the A); Y184AF: residue 184A to F.
    assert numbering.to_sequence(f"{g184}184A", NUMBERING)[0] == sequence_name(reference, "184", "A")
    assert numbering.to_sequence("Y184AF", NUMBERING)[0] == sequence_name(reference, "184A", "F")
    k188 = reference["188"][1]  # 188A exists, but 'Arg' is a three-letter target
    assert numbering.to_sequence(f"{k188}188Arg", NUMBERING)[0] == sequence_name(reference, "188", "Arg")


def test_a_position_the_structure_lacks_or_a_wrong_letter_is_named_in_both_numberings(trypsin, reference):
    numbering = from_record(trypsin)
    variants, issues = parse_mutations("A35G, A196V", trypsin.sequence, NUMBERING, numbering,
                                       read=indels.parse_variant)
    assert variants == []
    assert [i.kind for i in issues] == [notation.OUT_OF_RANGE, notation.WRONG_WILD_TYPE]
    assert "35 is not in the structure's numbering" in issues[0].message and "16–245" in issues[0].message
    assert "in the sequence's" in issues[1].message and sequence_name(reference, "196", "V")[1:-1] in issues[1].message


def test_a_hostile_list_in_the_structures_numbering_is_read_in_linear_time(trypsin):
    """1 MB of colons and digits (a list from a stranger on a hosted server): refused as the
    plain reader refuses it, in about the time that reader takes."""
    import time

    numbering = from_record(trypsin)
    # 50,000 entries take ~3 s here (twice the plain reader's time: each entry is scanned once
    # more); 20 s leaves room for a loaded machine, and a quadratic scan of 1 MB would take hours.
    for text in [":" * 1_000_000, "A1:" * 300_000, "S195A " * 50_000]:
        began = time.monotonic()
        parse_mutations(text, trypsin.sequence, NUMBERING, numbering, max_entries=200_000)
        assert time.monotonic() - began < 20, text[:10]


def test_the_results_name_each_variant_in_both_numberings(trypsin, reference):
    numbering = from_record(trypsin)
    table = pd.DataFrame({"variant": [sequence_name(reference, "195", "A"), ""]})
    shown = with_structure_column(table, numbering, NUMBERING)
    assert list(shown[COLUMN]) == ["S195A", ""]


# --- the command line and the app: S195A scores what the sequence's own name scores -------------------
def test_the_command_line_scores_s195a_as_its_sequence_numbered_name(tmp_path, reference):
    from flamino_core.cli import main

    out_structure, out_sequence = tmp_path / "structure.csv", tmp_path / "sequence.csv"
    common = [str(GBT), "-m", "random:tiny", "--strategy", "masked-marginals"]
    assert main(["variants", *common, "--structure-numbering", "--mutations", "S195A,H57A,Y184AF",
                 "-o", str(out_structure)]) == 0
    names = [sequence_name(reference, "195", "A"), sequence_name(reference, "57", "A"),
             sequence_name(reference, "184A", "F")]
    assert main(["variants", *common, "--mutations", ",".join(names), "-o", str(out_sequence)]) == 0
    by_structure, by_sequence = pd.read_csv(out_structure), pd.read_csv(out_sequence)
    assert list(by_structure["mutant"]) == ["S195A", "H57A", "Y184AF"]
    assert list(by_structure["variant"]) == list(by_sequence["variant"]) == names
    assert list(by_sequence[COLUMN]) == ["S195A", "H57A", "Y184AF"]  # both numberings, either way written
    assert list(by_structure["score"]) == list(by_sequence["score"])  # the same passes: equal, not close


def test_the_command_line_refuses_structure_numbering_for_a_plain_fasta(tmp_path, capsys):
    from flamino_core.cli import main

    fasta = tmp_path / "plain.fa"
    fasta.write_text(">plain\nMKTAYIAKQR\n")
    code = main(["variants", str(fasta), "-m", "random:tiny", "--structure-numbering", "--mutations", "K2A",
                 "-o", str(tmp_path / "out.csv")])
    assert code == 2 and "plain carries no structure's numbering" in capsys.readouterr().err


def test_the_variants_page_scores_s195a_in_the_structures_numbering(reference, monkeypatch, tmp_path):
    from test_app import assert_clean, figures, open_page, settle, start, unescaped, upload

    # test_app's app settings (its ``environment`` fixture): the untrained model, offline.
    monkeypatch.setenv("FLAMINO_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("FLAMINO_MODEL", "random:tiny")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    at = upload(start(), [("1GBT.cif", GBT.read_bytes())])
    at = open_page(at, "variants")
    assert at.radio(key="_w_vnumbering").value == "structure"  # the default for a record with gaps
    names = [sequence_name(reference, "195", "A"), sequence_name(reference, "57", "A")]

    def scored(text: str):
        at.text_area(key="_w_mutation_text").input(text)
        settle(at.run(), start=True)
        assert_clean(at)
        return at.dataframe[0].value

    by_structure = scored("S195A, H57A")
    assert list(by_structure["mutant"]) == ["S195A", "H57A"]
    assert list(by_structure["variant"]) == names and list(by_structure[COLUMN]) == ["S195A", "H57A"]
    # #66 D4: by default every scale says 195 (the structure's number), never the record's 192:
    # the table's positions, the From/To filters' bounds, the substitution map's axis and marks.
    assert list(by_structure["positions"]) == ["195", "57"]
    low, high = at.number_input(key="_w_vfrom"), at.number_input(key="_w_vto")
    assert (low.min, low.value, high.max, high.value) == (16, 16, 245, 245)
    low.set_value(100)
    settle(at.run(), start=True)
    assert list(at.dataframe[0].value["mutant"]) == ["S195A"]  # H57A is below 100 as 1GBT numbers it
    marked = next(t for t in figures(at)[0]["data"] if t.get("name") == "your variants")
    assert sorted(marked["x"]) == ["H57", "S195"]
    # No warning about the id the app built from the file (1GBT_A/16-245 for 223 residues).
    assert not any("but the sequence has" in unescaped(c.value) for c in at.sidebar.caption)
    low.set_value(16)
    at.radio(key="_w_vnumbering").set_value("sequence")
    by_sequence = scored(", ".join(names))
    assert list(by_sequence[COLUMN]) == ["S195A", "H57A"]
    assert list(by_sequence["positions"]) == [names[0][1:-1], names[1][1:-1]]  # asked for: the record's
    # The same list means other residues under the other choice: the page's link says which.
    linked = {k: v[-1] if isinstance(v, list) else v for k, v in dict(at.query_params).items()}
    assert linked.get("vnumbering") == "sequence"
    assert list(by_structure["score"]) == list(by_sequence["score"])


def test_flamino_score_names_each_position_in_the_structures_numbering_too(tmp_path, reference):
    from flamino_core.cli import main

    out = tmp_path / "map.csv"
    assert main(["score", str(GBT), "-m", "random:tiny", "--strategy", "wt-marginals", "-o", str(out)]) == 0
    table = pd.read_csv(out, dtype={"structure_position": str})
    assert list(table.columns) == ["record_id", "position", "structure_position", "wt", "mt", "score"]
    by_label = table.drop_duplicates("position").set_index("structure_position")
    assert list(by_label.index) == list(reference)  # every residue, in order, as the file numbers it
    for label, (index, letter) in reference.items():
        assert by_label.loc[label, "position"] == FIRST + index and by_label.loc[label, "wt"] == letter

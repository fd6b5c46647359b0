"""The FASTA validator: real files, awkward inputs, and a never-raises property."""

import gzip
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flamino_core.inputs.fasta import (
    FastaError,
    InputIssue,
    InputLimits,
    ParsedInput,
    ProteinRecord,
    parse_fasta_bytes,
    parse_fasta_text,
    read_fasta,
)

SHARED_FASTA = Path(__file__).resolve().parents[3] / "shared" / "fasta"
ESM_LETTERS = set("LAGVSERTIDPKQNFYMHWCXBUZO")

HBB = (
    "VHLTPEEKSAVTALWGKVNVDEVGGEALGRLLVVYPWTQRFFESFGDLSTPDAVMGNPKV"
    "KAHGKKVLGAFSDGLAHLDNLKGTFATLSELHCDKLHVDPENFRLLGNVLVCVLAHHFGK"
    "EFTPPVQAAYQKVVAGVANALAHKYH"
)
HBB_FASTA = f">HBB_HUMAN Human beta hemoglobin.\n{HBB[:60]}\n{HBB[60:120]}\n{HBB[120:]}\n"


def shared_file(name: str) -> Path:
    path = SHARED_FASTA / name
    if not path.is_file():
        pytest.skip(f"{path} is not available")
    return path


def naive_fasta(text: str) -> list[tuple[str, str]]:
    """Independent reference reader for well-formed files: (header, sequence)."""
    records = []
    for line in text.splitlines():
        if line.startswith(">"):
            records.append([line[1:], ""])
        elif line.strip():
            records[-1][1] += line.strip()
    return [(header, seq) for header, seq in records]


def messages(issues) -> str:
    return "\n".join(str(issue) for issue in issues)


def only_record(parsed: ParsedInput) -> ProteinRecord:
    assert len(parsed.records) == 1, messages(parsed.errors)
    return parsed.records[0]


# ---------------------------------------------------------------- real files


def test_hbb_file():
    parsed = read_fasta(shared_file("HBB_HUMAN.fa"))
    assert parsed.ok
    assert parsed.warnings == () and parsed.errors == ()
    record = only_record(parsed)
    assert record.id == "HBB_HUMAN"
    assert record.description == "Human beta hemoglobin."
    assert record.sequence == HBB
    assert len(record.sequence) == 146


def test_uniprot_file_matches_naive_reader():
    path = shared_file("uniprot_two.fa")
    expected = naive_fasta(path.read_text())
    parsed = read_fasta(path)
    assert parsed.errors == () and parsed.warnings == ()
    assert [r.id for r in parsed.records] == ["sp|P55685|Y4WG_RHISN", "sp|Q1XGE2|HAC1_ASPOR"]
    assert [(f"{r.id} {r.description}", r.sequence) for r in parsed.records] == expected


@pytest.mark.parametrize("name", ["HBB_HUMAN.fa", "uniprot_two.fa"])
def test_every_input_path_agrees_on_real_files(name):
    path = shared_file(name)
    raw = path.read_bytes()
    text = raw.decode("utf-8")
    expected = read_fasta(path).records
    assert parse_fasta_text(text).records == expected
    assert parse_fasta_bytes(raw).records == expected
    assert parse_fasta_bytes(gzip.compress(raw)).records == expected
    assert parse_fasta_bytes(text.encode("utf-16")).records == expected
    assert parse_fasta_bytes(text.encode("utf-16-le")).records == expected  # no BOM
    assert parse_fasta_bytes(b"\xef\xbb\xbf" + raw).records == expected
    assert parse_fasta_text(text.replace("\n", "\r\n")).records == expected
    assert parse_fasta_text(text.replace("\n", "\r")).records == expected
    assert parse_fasta_text(text.lower()).records != expected  # ids are case-sensitive...
    assert [r.sequence for r in parse_fasta_text(text.lower()).records] == [
        r.sequence for r in expected
    ]  # ...but sequences are uppercased


# ---------------------------------------------------------------- sequence rules


def test_bare_sequence_without_header():
    record = only_record(parse_fasta_text("MKTAYIAKQR"))
    assert (record.id, record.description, record.sequence) == ("sequence", "", "MKTAYIAKQR")


def test_bare_multiline_sequence_with_indentation():
    parsed = parse_fasta_text("  " + HBB[:60] + "\n\n" + HBB[60:] + "  \n")
    assert only_record(parsed).sequence == HBB
    assert parsed.warnings == ()


def test_genbank_style_numbering_is_removed_with_one_warning():
    text = (
        ">HBB_HUMAN\n"
        "        1 vhltpeeksa vtalwgkvnv devggealgr llvvypwtqr ffesfgdlst pdavmgnpkv\n"
        "       61 kahgkkvlga fsdglahldn lkgtfatlse lhcdklhvdp enfrllgnvl vcvlahhfgk\n"
        "      121 eftppvqaay qkvvagvana lahkyh\n"
    )
    parsed = parse_fasta_text(text)
    assert only_record(parsed).sequence == HBB
    assert len(parsed.warnings) == 1
    assert parsed.warnings[0].record == "HBB_HUMAN"
    assert "digits" in parsed.warnings[0].message


def test_bare_genbank_origin_block_is_a_sequence():
    parsed = parse_fasta_text("        1 vhltpeeksa vtalwgkvnv\n       21 devggealgr\n")
    assert only_record(parsed).sequence == HBB[:30]
    assert len(parsed.warnings) == 1 and parsed.errors == ()


def test_spaces_inside_sequence_warn_once_per_record():
    parsed = parse_fasta_text(">a\nMKT AYI\nAKQ R\n>b\nMKV\n")
    assert [r.sequence for r in parsed.records] == ["MKTAYIAKQR", "MKV"]
    assert [w.record for w in parsed.warnings] == ["a"]


def test_lowercase_is_uppercased_silently():
    parsed = parse_fasta_text(">a\nmktAYIakqr\n")
    assert only_record(parsed).sequence == "MKTAYIAKQR"
    assert parsed.warnings == () and parsed.errors == ()


def test_gaps_are_removed_with_warning():
    parsed = parse_fasta_text(">aln\n--MK.T-AY..\n")
    assert only_record(parsed).sequence == "MKTAY"
    assert len(parsed.warnings) == 1
    assert "6 gap" in parsed.warnings[0].message


def test_terminal_stop_is_removed_with_warning():
    parsed = parse_fasta_text(">a\nMKTAYIAKQR*\n")
    assert only_record(parsed).sequence == "MKTAYIAKQR"
    assert "terminal '*'" in messages(parsed.warnings)


def test_internal_stop_refuses_only_that_record():
    parsed = parse_fasta_text(">bad\nMKT*AYI\n>good\nMKV\n")
    assert [r.id for r in parsed.records] == ["good"]
    (error,) = parsed.errors
    assert error.record == "bad" and error.level == "error"
    assert "position 4" in error.message and "'*'" in error.message


def test_unknown_letter_is_named_with_its_position():
    bad = HBB[:16] + "J" + HBB[17:]
    parsed = parse_fasta_text(">HBB_HUMAN Human beta hemoglobin.\n" + bad + "\n")
    assert not parsed.ok
    (error,) = parsed.errors
    assert str(error).startswith("HBB_HUMAN: position 17: 'J' is not an amino-acid letter")


def test_positions_ignore_line_breaks_spaces_and_digits():
    (error,) = parse_fasta_text(">x\nMK\n1 T J\n").errors
    assert error.message.startswith("position 4: 'J'")


def test_many_positions_are_summarised():
    (error,) = parse_fasta_text(">x\n" + "MJ" * 7 + "\n").errors
    assert error.message.startswith("positions 2, 4, 6, 8, 10 and 2 more: 'J'")


def test_non_letter_symbols_are_refused():
    parsed = parse_fasta_text(">x\nMK?T#\n")
    assert not parsed.ok
    text = messages(parsed.errors)
    assert "position 3: '?'" in text and "position 5: '#'" in text


def test_invisible_characters_are_shown_as_code_points():
    (error,) = parse_fasta_text(">x\nMK\x00T\n").errors
    assert "U+0000" in error.message


def test_only_bad_records_are_dropped():
    text = ">one\nMKV\n>two\nMKB1Z\n>three\nMK!V\n>four\nQQQ\n"
    parsed = parse_fasta_text(text)
    assert [r.id for r in parsed.records] == ["one", "two", "four"]
    assert [e.record for e in parsed.errors] == ["three"]


def test_all_ESM_letters_are_accepted():
    record = only_record(parse_fasta_text(">x\nLAGVSERTIDPKQNFYMHWCXBUZO\n"))
    assert record.sequence == "LAGVSERTIDPKQNFYMHWCXBUZO"


@pytest.mark.parametrize("sequence", ["ACGTACGTACGTACGTACGTACGT", "acguacguacguacguacgun", "ACGTNNNNACGTACGTACGTAR"])
def test_nucleotides_are_refused_unless_allowed(sequence):
    parsed = parse_fasta_text(">dna\n" + sequence + "\n>p\nMKV\n")
    assert [r.id for r in parsed.records] == ["p"] and parsed.nucleotide_labels == ("dna",)
    (error,) = parsed.errors
    assert error.record == "dna" and "nucleotide sequence, not protein" in error.message
    allowed = parse_fasta_text(">dna\n" + sequence + "\n", allow_nucleotides=True)
    assert only_record(allowed).sequence == sequence.upper() and allowed.nucleotide_labels == ("dna",)
    assert "analysed as protein as asked" in messages(allowed.warnings)


# Under 8 letters nothing tells DNA from a peptide; a protein made of IUPAC codes with too few
# plain bases (GSSNRAT: KIPO's DI500003 in Biopython's kipo_prt_sample.embl) stays protein.
@pytest.mark.parametrize("sequence", ["ACGTACG", HBB, "ACGTACGTACGTACGTACGTMKLWPQ", "GSSNRAT", "MKRYSWDHVKRYSWDHVKRYSWDHV"])
def test_proteins_and_short_sequences_are_not_taken_for_dna(sequence):
    parsed = parse_fasta_text(">x\n" + sequence)
    assert parsed.ok and not parsed.nucleotide_labels
    assert "nucleotide" not in messages(parsed.warnings + parsed.errors)


def test_the_dna_verdict_comes_before_the_length_limit():
    parsed = parse_fasta_text(">chr\n" + "ACGT" * 82_500 + "\n", limits=InputLimits(max_residues_per_record=2000))
    (error,) = parsed.errors
    assert "nucleotide sequence" in error.message and "limit" not in error.message
    allowed = parse_fasta_text(">chr\n" + "ACGT" * 82_500 + "\n", limits=InputLimits(max_residues_per_record=2000), allow_nucleotides=True)
    assert "330,000 residues, more than the limit of 2,000" in allowed.errors[0].message


@pytest.mark.parametrize("text", ["", "   \n\t\n", "\ufeff"])
def test_empty_input(text):
    parsed = parse_fasta_text(text)
    assert not parsed.ok
    assert [str(e) for e in parsed.errors] == ["No sequence found"]
    assert parse_fasta_bytes(text.encode()).errors == parsed.errors


def test_header_only_record_is_an_error_others_kept():
    parsed = parse_fasta_text(">empty\n>full\nMKV\n>also_empty")
    assert [r.id for r in parsed.records] == ["full"]
    assert [e.record for e in parsed.errors] == ["empty", "also_empty"]


def test_sequence_of_only_gaps_is_an_error():
    parsed = parse_fasta_text(">x\n----\n")
    assert not parsed.ok and parsed.errors[0].record == "x"


def test_long_sequence_is_kept_with_window_warning():
    sequence = (HBB * 35)[:5000]
    parsed = parse_fasta_text(">long\n" + sequence + "\n")
    assert only_record(parsed).sequence == sequence
    assert "longer than 1022 residues" in messages(parsed.warnings)
    assert "1022" not in messages(parse_fasta_text(">x\n" + "M" * 1022).warnings)


# ---------------------------------------------------------------- headers


def test_duplicate_ids_are_made_unique():
    parsed = parse_fasta_text(">a\nM\n>a\nK\n>a_2\nV\n>a\nL\n")
    assert [r.id for r in parsed.records] == ["a", "a_2", "a_2_2", "a_3"]
    assert len(parsed.warnings) == 3


def test_missing_id_gets_a_number():
    parsed = parse_fasta_text(">\nMKV\n>x\nMK\n> \nQQ\n")
    assert [r.id for r in parsed.records] == ["record_1", "x", "record_3"]
    assert [w.record for w in parsed.warnings] == ["record 1", "record 3"]


def test_huge_header_is_truncated():
    parsed = parse_fasta_text(">" + "i" * 500 + " " + "d" * 1000 + "\nMKV\n")
    record = only_record(parsed)
    assert record.id == "i" * 100
    assert record.description == "d" * 300
    assert len(parsed.warnings) == 2


def test_html_in_header_is_kept_verbatim():
    header = 'x<img src=x onerror=alert(1)> <script>alert("hi")</script> &amp;'
    record = only_record(parse_fasta_text(">" + header + "\nMKV\n"))
    assert record.id == "x<img"
    assert f"{record.id} {record.description}" == header


def test_control_characters_in_header_are_replaced():
    parsed = parse_fasta_text(">a\x07b desc\x1b[31m\nMKV\n")
    record = only_record(parsed)
    assert "\x07" not in record.id and "\x1b" not in record.description
    assert parsed.warnings


# ---------------------------------------------------------------- not FASTA

STOCKHOLM = """# STOCKHOLM 1.0
#=GF ID  globin
HBB_HUMAN  VHLTPEEKSAVTALWGKVNV
HBA_HUMAN  -VLSPADKTNVKAAWGKVGA
//
"""
CLUSTAL = """CLUSTAL W (1.83) multiple sequence alignment

HBB_HUMAN      VHLTPEEKSAVTALWGKVNV
HBA_HUMAN      -VLSPADKTNVKAAWGKVGA
                *.:*..*: *  * ****
"""
PDB = """HEADER    OXYGEN TRANSPORT                        06-JUN-97   1A3N
ATOM      1  N   VAL A   1      10.720  19.523   6.163  1.00 21.83           N
"""
FASTQ = "@read1\nACGTACGT\n+\nIIIIIIII\n"


@pytest.mark.parametrize(
    "text, name",
    [
        (STOCKHOLM, "Stockholm"),
        (CLUSTAL, "Clustal"),
        (PDB, "PDB"),
        (FASTQ, "FASTQ"),
        ("data_1A3N\n_entry.id 1A3N\n", "mmCIF"),
        ("<!DOCTYPE html>\n<html><body>MKV</body></html>", "HTML"),
        (">P1;HBB\nhemoglobin beta\nVHLTPEEK*\n", "PIR"),
    ],
)
def test_other_formats_get_one_clear_error(text, name):
    parsed = parse_fasta_text("\n" + text)
    assert parsed.records == () and parsed.warnings == ()
    (error,) = parsed.errors
    assert error.record is None
    assert name in error.message and "not FASTA" in error.message
    assert parse_fasta_bytes(gzip.compress(text.encode())).errors == parsed.errors


def test_prose_before_first_header_is_ignored_with_warning():
    parsed = parse_fasta_text("My favourite proteins:\n" + HBB_FASTA)
    assert only_record(parsed).id == "HBB_HUMAN"
    assert "ignored 1 line" in parsed.warnings[0].message and parsed.errors == ()


def test_sequence_before_first_header_is_an_error():
    parsed = parse_fasta_text("MKTAYIAKQR\n" + HBB_FASTA)
    assert only_record(parsed).id == "HBB_HUMAN"
    (error,) = parsed.errors
    assert error.record is None and "before the first '>'" in error.message


# ---------------------------------------------------------------- bytes


def test_binary_junk_is_one_error():
    junk = bytes(range(256)) * 40
    parsed = parse_fasta_bytes(junk)
    assert parsed.records == ()
    assert len(parsed.errors) == 1 and "binary" in parsed.errors[0].message


@pytest.mark.parametrize(
    "data, what",
    [
        (b"\x89PNG\r\n\x1a\n" + bytes(100), "PNG"),
        (b"PK\x03\x04" + bytes(100), "ZIP"),
        (b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n", "PDF"),
        (b"BZh91AY&SY" + bytes(20), "bzip2"),
    ],
)
def test_known_binary_formats_are_named(data, what):
    (error,) = parse_fasta_bytes(data).errors
    assert what in error.message


def test_latin1_header_is_read_with_warning():
    parsed = parse_fasta_bytes(b">prot_\xe9 caf\xe9\nMKV\n")
    record = only_record(parsed)
    assert record.id == "prot_é" and record.description == "café"
    assert "Latin-1" in messages(parsed.warnings)


def test_utf8_header_needs_no_warning():
    parsed = parse_fasta_bytes(">β-globin ünïcode\nMKV\n".encode())
    assert only_record(parsed).id == "β-globin" and parsed.warnings == ()


def test_corrupt_gzip_is_one_error():
    data = gzip.compress(HBB_FASTA.encode())
    for broken in (data[:20], data[:2] + b"junk" + data[6:]):
        parsed = parse_fasta_bytes(broken)
        assert parsed.records == () and "gzip" in parsed.errors[0].message


def test_gzip_bomb_is_capped():
    bomb = gzip.compress(b">x\n" + b"M" * 2_000_000)
    parsed = parse_fasta_bytes(bomb, limits=InputLimits(max_decompressed_bytes=100_000))
    assert parsed.records == () and "more than 100,000 bytes" in parsed.errors[0].message
    assert parse_fasta_bytes(bomb).ok  # within the default cap


def test_utf16_big_endian_with_bom():
    data = b"\xfe\xff" + HBB_FASTA.encode("utf-16-be")
    assert only_record(parse_fasta_bytes(data)).sequence == HBB


def test_read_fasta_problems_are_issues_not_exceptions(tmp_path):
    missing = read_fasta(tmp_path / "nope.fa")
    assert not missing.ok and "not found" in missing.errors[0].message
    folder = read_fasta(tmp_path)
    assert not folder.ok and folder.errors


def test_read_fasta_gzipped_file(tmp_path):
    path = tmp_path / "hbb.fa.gz"
    path.write_bytes(gzip.compress(HBB_FASTA.encode()))
    assert only_record(read_fasta(path)).sequence == HBB


# ---------------------------------------------------------------- limits


def test_max_records_keeps_the_first_n():
    text = "".join(f">s{i}\nMKV\n" for i in range(10))
    parsed = parse_fasta_text(text, limits=InputLimits(max_records=3))
    assert [r.id for r in parsed.records] == ["s0", "s1", "s2"]
    (error,) = parsed.errors
    assert "7 dropped" in error.message


def test_max_residues_per_record():
    parsed = parse_fasta_text(">short\nMKV\n>long\n" + "M" * 50 + "\n", limits=InputLimits(max_residues_per_record=10))
    assert [r.id for r in parsed.records] == ["short"]
    assert parsed.errors[0].record == "long" and "50 residues" in parsed.errors[0].message


def test_max_total_residues_keeps_records_until_budget():
    text = "".join(f">s{i}\n{'M' * 10}\n" for i in range(5))
    parsed = parse_fasta_text(text, limits=InputLimits(max_total_residues=35))
    assert [r.id for r in parsed.records] == ["s0", "s1", "s2"]
    (error,) = parsed.errors
    assert "dropped 2" in error.message and "'s3'" in error.message
    assert parse_fasta_text(text, limits=InputLimits(max_total_residues=50)).errors == ()


def test_negative_limit_is_a_programming_error():
    with pytest.raises(ValueError):
        parse_fasta_text(">x\nM", limits=InputLimits(max_records=-1))


def test_thousands_of_records_are_fast():
    text = "".join(f">seq{i} protein {i}\n{HBB[: 20 + i % 100]}\n" for i in range(5000))
    start = time.perf_counter()
    parsed = parse_fasta_text(text)
    elapsed = time.perf_counter() - start
    assert len(parsed.records) == 5000 and parsed.errors == ()
    assert parsed.records[4999].sequence == HBB[: 20 + 4999 % 100]
    assert elapsed < 5.0


# ---------------------------------------------------------------- API details


def test_issue_str():
    assert str(InputIssue("HBB_HUMAN", "position 17: 'J' is bad", "error")) == (
        "HBB_HUMAN: position 17: 'J' is bad"
    )
    assert str(InputIssue(None, "no sequence found", "error")) == "No sequence found"


def test_require_all_valid():
    assert parse_fasta_text(HBB_FASTA).require_all_valid()[0].sequence == HBB
    with pytest.raises(FastaError) as info:
        parse_fasta_text(HBB_FASTA + ">bad\nMJK\n").require_all_valid()
    assert isinstance(info.value, ValueError)
    assert info.value.issues[0].record == "bad"
    with pytest.raises(FastaError, match="No sequence found"):
        parse_fasta_text("").require_all_valid()


def test_results_are_immutable():
    parsed = parse_fasta_text(HBB_FASTA)
    with pytest.raises(AttributeError):
        parsed.records[0].sequence = "MKV"


# ---------------------------------------------------------------- properties

# Text built from FASTA-ish pieces reaches far more branches than uniform text.
fasta_pieces = st.sampled_from(
    [">", "\n", "\r\n", " ", "\t", "*", "-", ".", "1", "J", "M", "k", "ACGT", "x", "é",
     "\x00", ">a\n", ">a b\n", "LOCUS ", "# STOCKHOLM", "\ufeff", "\ud800"]
)  # fmt: skip
fasta_like_text = st.lists(st.one_of(fasta_pieces, st.text(max_size=5)), max_size=60).map("".join)


def assert_well_formed(parsed: ParsedInput) -> None:
    assert isinstance(parsed, ParsedInput)
    ids = [r.id for r in parsed.records]
    assert len(set(ids)) == len(ids)
    for record in parsed.records:
        assert record.id and record.sequence
        assert set(record.sequence) <= ESM_LETTERS
    assert all(i.level == "warning" for i in parsed.warnings)
    assert all(i.level == "error" for i in parsed.errors)
    assert parsed.ok == bool(parsed.records)
    assert parsed.ok or parsed.errors  # never silently empty


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.text(), fasta_like_text))
def test_any_text_never_raises(text):
    assert_well_formed(parse_fasta_text(text))


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.binary(), fasta_like_text.map(lambda t: t.encode("utf-8", "replace"))))
def test_any_bytes_never_raise(data):
    assert_well_formed(parse_fasta_bytes(data))
    assert_well_formed(parse_fasta_bytes(gzip.compress(data)))


@settings(max_examples=100, deadline=None)
@given(fasta_like_text, st.sampled_from(["utf-16", "utf-16-le", "utf-16-be", "utf-32"]))
def test_any_encoded_text_never_raises(text, codec):
    assert_well_formed(parse_fasta_bytes(text.encode(codec, "replace")))


# ---------------------------------------------------------------- writing FASTA


@pytest.mark.parametrize("name", ["HBB_HUMAN.fa", "uniprot_two.fa"])
def test_to_fasta_writes_what_biopython_writes_and_reads_back(name):
    """The app puts uploaded records back into its text box with ``to_fasta``: the text must be
    plain FASTA (Biopython's writer is the reference: ``>id description``, 60 residues a line)
    and validate to the same records."""
    import io

    from Bio import SeqIO
    from Bio.Seq import Seq
    from Bio.SeqRecord import SeqRecord

    from flamino_core.inputs.fasta import to_fasta

    records = read_fasta(shared_file(name)).records
    expected = io.StringIO()
    SeqIO.write(
        [SeqRecord(Seq(r.sequence), id=r.id, description=f"{r.id} {r.description}") for r in records],
        expected,
        "fasta",
    )
    text = to_fasta(records)
    assert text == expected.getvalue()
    assert parse_fasta_text(text).records == records
    bare = [ProteinRecord("seq", "", "MKV" * 30)]  # no description: no trailing space
    assert to_fasta(bare).splitlines() == [">seq", "MKV" * 20, "MKV" * 10]


def test_both_record_limits_give_one_message_with_the_numbers():
    """Issue 24: 158 records over both limits gave two stacked messages; now one says both."""
    text = "".join(f">s{i}\n{'M' * 10}\n" for i in range(158))
    parsed = parse_fasta_text(text, limits=InputLimits(max_records=100, max_total_residues=550))
    assert [r.id for r in parsed.records] == [f"s{i}" for i in range(55)]
    (error,) = parsed.errors
    assert error.message == ("the input has 158 records; at most 100 records and 550 residues in total are "
                             "analysed at a time: the first 55 were analysed, 103 dropped (from 's55' on)")


def test_a_source_after_the_limits_names_the_limit_that_was_reached():
    """Issue #37: a hosted server's second upload was refused as over "the limit of records" when
    the first had reached the limit of residues in total (its records past that limit were counted
    as read). Each refusal names the limit that was reached, with its number."""
    from flamino_core.inputs.fasta import parse_sources
    from flamino_core.inputs.input_limits import InputLimits

    ten = "".join(f">r{i}\n{'MKTAYIAKQR' * 10}\n" for i in range(10))  # 10 records of 100 residues
    residues = InputLimits(max_records=8, max_total_residues=350)
    parsed, kept = parse_sources([("a.fa", ten), ("b.fa", ">x\nMKV\n")], limits=residues)
    assert kept == (3, 0)
    refusal = [e for e in parsed.errors if e.source == "b.fa"]
    assert [e.message for e in refusal] == ["not read: the inputs before it already hold the limit of 350 residues in total"]
    records = InputLimits(max_records=4, max_total_residues=10_000)
    parsed, kept = parse_sources([("a.fa", ten), ("b.fa", ">x\nMKV\n")], limits=records)
    assert kept == (4, 0)
    assert [e.message for e in parsed.errors if e.source == "b.fa"] == [
        "not read: the inputs before it already hold the limit of 4 records"]


def test_a_second_source_over_the_total_names_the_limit_in_force_not_what_was_left():
    """Issue #67: 16 structure files read as one input were refused as "more than 500 residues in
    total" under a 20,000-residue limit: the second source's reader was told what was left. The
    message names the limit and what the sources before it hold."""
    from flamino_core.inputs.fasta import parse_sources
    from flamino_core.inputs.input_limits import InputLimits

    first = "".join(f">a{i}\n{'MKTAYIAKQR' * 10}\n" for i in range(3))  # 300 residues
    second = "".join(f">b{i}\n{'MKTAYIAKQR' * 10}\n" for i in range(3))
    parsed, kept = parse_sources([("a.fa", first), ("b.fa", second)], limits=InputLimits(max_total_residues=350))
    assert kept == (3, 0)
    said = [e.message for e in parsed.errors if e.source == "b.fa"]
    assert said == ["the input has more than 350 residues in total, the limit (the inputs before this one hold "
                    "300); analysed the first 0 record(s) and dropped 3 (from 'b0' on)"]

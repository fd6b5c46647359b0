"""Every uploaded table is read through one reader on the FASTA reader's decoding (issue 34): a
UTF-16 DMS table, label table or metadata table (what Excel's "Unicode Text" and some of its CSV
exports write) reads exactly as its UTF-8 copy; so do gzip and a European semicolon CSV. Real
tables: the two ProteinGym assays and the 186 ProteinGym targets' headers.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from flamino_core.inputs.fasta import read_fasta
from flamino_core.inputs.tables import TableError, TableLimits, read_table, size_problem
from flamino_core.predictors.table import parse_labelled_table
from flamino_core.records.metadata import join_table
from flamino_core.variants.dms import DmsError, parse_dms

ROOT = Path(__file__).resolve().parents[2]
ASSAYS = [ROOT / "tests" / "data" / "dms" / "TCRG1_MOUSE_Rocklin_2023_1E0L.csv",
          ROOT.parent / "shared" / "dms" / "A0A1I9GEU1_NEIME_Kennouche_2019.csv"]


def as_excel_writes(text: str) -> dict[str, bytes]:
    """The same table as the encodings a spreadsheet or a pipeline writes it in."""
    tabbed = text.replace(",", "\t")  # the assays have no quoted commas: a faithful TSV
    return {
        "utf-16 with BOM": text.encode("utf-16"),
        "utf-16-le, tabs, CRLF (Excel 'Unicode Text')": b"\xff\xfe" + tabbed.replace("\n", "\r\n").encode("utf-16-le"),
        "utf-16-be without BOM": text.encode("utf-16-be"),
        "utf-8 with BOM (Excel 'CSV UTF-8')": b"\xef\xbb\xbf" + text.encode(),
        "gzip": gzip.compress(text.encode(), mtime=0),
        "semicolons (European Excel)": text.replace(",", ";").encode(),
    }


def assay_text(path: Path, rows: int = 400) -> str:
    """The assay's first rows (enough for every column's kinds of values, small enough for a unit test)."""
    lines = path.read_text().splitlines()
    return "\n".join(lines[: rows + 1]) + "\n"


@pytest.mark.parametrize("path", ASSAYS, ids=lambda p: p.stem)
def test_a_dms_table_reads_the_same_in_every_encoding(path):
    text = assay_text(path)
    expected = parse_dms(text.encode())
    for name, data in as_excel_writes(text).items():
        got = parse_dms(data)
        pd.testing.assert_frame_equal(got.frame, expected.frame, obj=name)
        assert (got.wild_type, got.issues) == (expected.wild_type, expected.issues), name


@pytest.mark.parametrize("path", ASSAYS, ids=lambda p: p.stem)
def test_a_label_table_reads_the_same_in_every_encoding(path):
    # The assay as a labelled table: mutated_sequence is each row's protein, DMS_score the target.
    text = assay_text(path)
    expected = parse_labelled_table(text.encode(), "DMS_score")
    assert expected.task == "regression" and len(expected.values) == 400
    for name, data in as_excel_writes(text).items():
        got = parse_labelled_table(data, "DMS_score")
        assert got.sequences == expected.sequences, name
        np.testing.assert_array_equal(got.values, expected.values, err_msg=name)


def test_a_metadata_table_joins_the_same_in_every_encoding():
    records = read_fasta(ROOT.parent / "shared" / "fasta" / "proteingym_targets.fa").records[:40]
    # A user's table of the records' own header fields (id, taxon, a number): real values.
    rows = ["id,taxon,length"] + [f"{r.id},{r.description.split('taxon=')[-1].split()[0] if 'taxon=' in r.description else ''},"
                                  f"{len(r.sequence)}" for r in records]
    text = "\n".join(rows) + "\n"
    expected = join_table(records, text.encode())
    assert expected[0]["length"] == [len(r.sequence) for r in records]
    for name, data in as_excel_writes(text).items():
        assert join_table(records, data) == expected, name


def test_limits_count_the_decoded_table_not_its_encoding():
    """Rows and columns of a UTF-16 table are the text's: 2 bytes per character change neither."""
    text = "a,b,c\n1,2,3\n4,5,6\n"
    limits = TableLimits(max_bytes=10_000, max_columns=3, max_rows=2)
    assert size_problem(text.encode("utf-16"), limits) is None
    assert "has 3 rows" in size_problem((text + "7,8,9\n").encode("utf-16"), limits)
    assert "has 4 columns" in size_problem("a\tb\tc\td\n1\t2\t3\t4\n".encode("utf-16"), limits)


def test_a_gzip_bomb_stops_at_the_byte_limit():
    bomb = gzip.compress(b"a,b\n" + b"1,2\n" * 2_000_000, mtime=0)  # 8 MB of text in ~8 kB
    with pytest.raises(TableError, match="decompress|bytes|limit"):
        read_table(bomb, TableLimits(max_bytes=100_000))


@pytest.mark.parametrize("data, words", [
    (b"PK\x03\x04" + bytes(200), "ZIP archive (or a Word/Excel document), not a CSV table; save it as CSV"),
    (b"%PDF-1.7\n" + bytes(200), "PDF document, not a CSV table; save it as CSV"),
    (bytes(range(256)) * 4, "binary file"),
])
def test_a_file_that_is_not_a_table_is_refused_with_what_it_is(data, words):
    with pytest.raises(DmsError, match="the DMS table: ") as refused:
        parse_dms(data)
    assert words in str(refused.value)

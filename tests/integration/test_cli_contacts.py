"""``flamino contacts`` on the real structures in ../shared/structures, on the untrained ``random:tiny``.

The CSV is checked against a precision computed here from coordinates read by the independent
readers (``structure_reference``: fixed-column PDB text, ``MMCIF2Dict``), residues placed on
sequence positions from what is known about each file, and pairs ranked by a plain sort
(``test_contact_eval.reference_precision``). The predicted map comes from the engine run with the
same options as the command (so the same compiled function, bit for bit); the engine's contacts
are checked against HF transformers in test_cli.py / test_parity.py.
"""

from __future__ import annotations

import csv
import gzip
import http.server
import math
import threading

import numpy as np
import pytest
from Bio.PDB import PDBParser
from structure_reference import STANDARD, STRUCTURES, entity_sequences, read_reference
from test_contact_eval import DIVISORS, RANGES, reference_case, reference_precision
from test_imports import heavy_modules_after

from flamino_core.alphabet import AA_TO_IDX
from flamino_core.cli import main
from flamino_core.engine.engine import Engine
from flamino_core.structure.files import fetch
from flamino_core.weights.loading import load_weights

pytestmark = pytest.mark.skipif(not STRUCTURES.is_dir(), reason=f"real structures not found at {STRUCTURES}")
COLUMNS = ["record_id", "chain", "range", "cutoff", "precision", "n_pairs", "identity", "coverage"]  # the issue's
TINY = "random:tiny"


@pytest.fixture(scope="module")
def engine():
    return Engine(load_weights(TINY))


def write_fasta(path, records: dict[str, str]):
    path.write_text("".join(f">{name}\n{sequence}\n" for name, sequence in records.items()))
    return path


def read_csv(path) -> list[dict]:
    with open(path, newline="") as handle:
        reader = csv.DictReader(handle)
        assert reader.fieldnames == COLUMNS
        return list(reader)


def check_rows(rows, predicted, xyz, record_id, chain, identity, coverage):
    """The 12 rows of one record against the independent precision."""
    assert [(r["range"], r["cutoff"]) for r in rows] == [(r, c) for r in RANGES for c in DIVISORS]
    for row in rows:
        low, high = RANGES[row["range"]]
        precision, n_pairs = reference_precision(predicted, xyz, low, high, len(xyz) // DIVISORS[row["cutoff"]])
        assert (row["record_id"], row["chain"]) == (record_id, chain)
        assert int(row["n_pairs"]) == n_pairs, (row["range"], row["cutoff"])
        if math.isnan(precision):
            assert row["precision"] == ""  # not computable: an empty field
        else:  # (integer count) / (integer count), written with repr precision
            assert float(row["precision"]) == pytest.approx(precision, abs=1e-12)
        assert float(row["identity"]) == pytest.approx(identity, abs=1e-12)
        assert float(row["coverage"]) == pytest.approx(coverage, abs=1e-12)


def entropy_bits(logits: np.ndarray) -> np.ndarray:
    """Shannon entropy (bits) of the softmax over the 20 standard amino acids, per position."""
    columns = [AA_TO_IDX[aa] for aa in "ACDEFGHIKLMNPQRSTVWY"]
    z = logits[:, columns].astype(np.float64)
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    return -(p * np.log2(p)).sum(axis=1)


def bfactors(path, chain: str) -> dict[str, set[float]]:
    """Residue number with insertion code (``184A``) -> the B-factors of its atoms, read back with Biopython."""
    structure = PDBParser(QUIET=True).get_structure("out", str(path))
    assert [c.id for c in structure[0]] == [chain]  # only the aligned chain is written
    return {
        f"{residue.id[1]}{residue.id[2].strip()}": {atom.get_bfactor() for atom in residue}
        for residue in structure[0][chain]
    }


def test_abeta42_against_2beg_csv_and_entropy_in_the_bfactor_column(engine, tmp_path, capsys):
    """2BEG: Aβ(17-42) of Aβ(1-42), numbered as Aβ positions. Precision over the 26 positions
    with structure; the PDB's B-factors are the entropy computed here from the logits."""
    sequence, chain, xyz = reference_case("2BEG.pdb")
    fasta = write_fasta(tmp_path / "abeta.fa", {"abeta42": sequence})
    out, pdb = tmp_path / "precision.csv", tmp_path / "abeta-entropy.pdb"
    code = main(["contacts", str(fasta), "--structure", str(STRUCTURES / "2BEG.pdb"), "-m", TINY,
                 "-o", str(out), "--pdb-out", str(pdb), "--track", "entropy"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "untrained test model" in captured.err and "identity 100.0%, coverage 61.9%" in captured.err
    assert f"wrote {out}" in captured.out

    (run,) = engine.run([sequence], repr_layers=(), logits=True, contacts=True)  # the command's options
    rows = read_csv(out)
    check_rows(rows, run.contacts, xyz, "abeta42", chain, identity=1.0, coverage=26 / 42)
    assert [int(r["n_pairs"]) for r in rows if r["range"] == "long"] == [3, 3, 3]  # the partial structure

    expected = entropy_bits(run.logits)
    read_back = bfactors(pdb, "A")
    assert sorted(read_back, key=int) == [str(n) for n in range(17, 43)]
    for label, values in read_back.items():
        (b,) = values  # one value for every atom of a residue
        assert b == pytest.approx(expected[int(label) - 1], abs=0.005 + 1e-9)  # two decimals in the column
    assert pdb.read_text().startswith("REMARK flamino: B-factor column: entropy (bits)\n")


def test_several_records_the_refused_one_is_named_with_its_identity(engine, tmp_path, capsys):
    """1GBT with its own sequence and Aβ42, which does not match it: the good record's rows are
    written, the other is refused with its identity, and the exit status is 2."""
    sequence, chain, xyz = reference_case("1GBT.cif")
    abeta, _, _ = reference_case("2BEG.pdb")
    fasta = write_fasta(tmp_path / "two.fa", {"thrombin_like": sequence, "abeta42": abeta})
    out = tmp_path / "p.csv"
    code = main(["contacts", str(fasta), "--structure", str(STRUCTURES / "1GBT.cif"), "-m", TINY, "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 2
    assert "abeta42: 1GBT.cif chain A does not match the sequence well enough to compare: identity " in err
    (run,) = engine.run([sequence], repr_layers=(), logits=False, contacts=True)
    rows = read_csv(out)
    assert {r["record_id"] for r in rows} == {"thrombin_like"}
    check_rows(rows, run.contacts, xyz, "thrombin_like", chain, identity=1.0, coverage=1.0)


def test_attention_track_one_pdb_per_record(engine, tmp_path, capsys):
    """Two records matching 1GBT (its sequence, and the same with 5 residues before it): one PDB
    each, named after the record; attention from a residue x100 in the B-factor column."""
    sequence = entity_sequences(STRUCTURES / "1GBT.cif")[0]
    residues = [r for r in read_reference(STRUCTURES / "1GBT.cif", "A") if r.name in STANDARD]
    fasta = write_fasta(tmp_path / "two.fa", {"gbt": sequence, "gbt|longer": "MKWVT" + sequence})
    pdb = tmp_path / "scored.pdb"
    code = main(["contacts", str(fasta), "--structure", str(STRUCTURES / "1GBT.cif"), "-m", TINY,
                 "-o", str(tmp_path / "p.csv"), "--pdb-out", str(pdb), "--track", "attention",
                 "--track-residue", "30", "--track-layer", "1", "--track-head", "2"])
    assert code == 0, capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.glob("scored.*.pdb")) == ["scored.gbt.pdb", "scored.gbt_longer.pdb"]
    for name, offset in (("gbt", 0), ("gbt_longer", 5)):
        full = "MKWVT" * (offset > 0) + sequence
        (run,) = engine.run([full], repr_layers=(), logits=False, attention_layers=(1,), contacts=True)
        # Layer 1, head 2 (index 1), from residue 30: row 30 of the map with <cls> first, residue columns.
        expected = 100 * run.attentions[0][1][30, 1:-1]
        read_back = bfactors(tmp_path / f"scored.{name}.pdb", "A")
        assert set(read_back) == {residue.label for residue in residues}  # 184A, 221A ... kept apart
        for index, residue in enumerate(residues):  # the observed residues are the deposited sequence
            (b,) = read_back[residue.label]
            assert b == pytest.approx(expected[offset + index], abs=0.005 + 1e-9)
        remarks = [line[16:] for line in (tmp_path / f"scored.{name}.pdb").read_text().splitlines()
                   if line.startswith("REMARK flamino: ")]  # wrapped to 80 columns
        assert "B-factor column: attention from residue 30 (layer 1, head 2) x100" in " ".join(remarks)


@pytest.mark.parametrize(
    "structure, extra, message",
    [
        ("../fasta/HBB_HUMAN.fa", [], "is not a PDB or mmCIF structure: it is a FASTA file"),
        ("2BEG.pdb", ["--chain", "Z"], "2BEG.pdb has no chain 'Z' in model 0. Chains: chain A: 26 amino acids"),
        ("2BEG.pdb", ["--model-index", "3"], "there is no model 3"),
        ("1A7G.cif", [], "does not match the sequence well enough to compare: identity 35.0% over 40 aligned"),
        ("1A7G.cif", ["--min-identity", "0.3"], None),  # the user's own threshold lets it through
        ("nowhere.pdb", [], "cannot read"),
    ],
)
def test_exit_2_with_a_message(structure, extra, message, tmp_path, capsys):
    abeta, _, _ = reference_case("2BEG.pdb")
    fasta = write_fasta(tmp_path / "abeta.fa", {"abeta42": abeta})
    out = tmp_path / "p.csv"
    code = main(["contacts", str(fasta), "--structure", str(STRUCTURES / structure), "-m", TINY, "-o", str(out), *extra])
    err = capsys.readouterr().err
    if message is None:
        assert code == 0 and len(read_csv(out)) == 12
        return
    assert code == 2 and message in err, err
    assert not out.exists() and "Traceback" not in err


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--track", "pca"], "--track goes into the B-factor column of the PDB file: give --pdb-out"),
        (["--pdb-out", "x.pdb", "--track", "attention"], "--track attention needs --track-residue N"),
        (["--pdb-out", "x.pdb", "--track", "substitution"], "--track substitution needs --track-aa A"),
        (["--pdb-out", "x.txt"], "should end in .pdb"),
        (["--pdb-out", "x.pdb", "--track", "attention", "--track-residue", "99"], "residue 99 does not exist"),
        (["--pdb-out", "x.pdb", "--track", "attention", "--track-residue", "3", "--track-layer", "0"], "layers 1 and up"),
    ],
)
def test_track_options_that_do_not_fit(extra, message, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    abeta, _, _ = reference_case("2BEG.pdb")
    fasta = write_fasta(tmp_path / "abeta.fa", {"abeta42": abeta})
    code = main(["contacts", str(fasta), "--structure", str(STRUCTURES / "2BEG.pdb"), "-m", TINY, "-o", "p.csv", *extra])
    err = capsys.readouterr().err
    assert code == 2 and message in err, err
    assert not (tmp_path / "x.pdb").exists()


class _OnePdbEntry(http.server.BaseHTTPRequestHandler):
    """Serves 1A7G as RCSB does (gzipped mmCIF at /download/1A7G.cif.gz); 404 otherwise."""

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802
        if self.path != "/download/1A7G.cif.gz":
            self.send_error(404)
            return
        body = gzip.compress((STRUCTURES / "1A7G.cif").read_bytes())
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def test_structure_fetched_by_pdb_id_from_a_local_server(tmp_path, capsys, monkeypatch):
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _OnePdbEntry)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        monkeypatch.setattr(fetch, "RCSB_URL", f"http://127.0.0.1:{httpd.server_address[1]}/download")
        fasta = write_fasta(tmp_path / "e.fa", {"1a7g": entity_sequences(STRUCTURES / "1A7G.cif")[0]})
        out = tmp_path / "p.csv"
        assert main(["contacts", str(fasta), "--structure", "pdb:1a7g", "-m", TINY, "-o", str(out)]) == 0
        assert {r["chain"] for r in read_csv(out)} == {"E"}
        assert main(["contacts", str(fasta), "--structure", "pdb:9ZZZ", "-m", TINY, "-o", str(out)]) == 2
        assert "PDB entry 9ZZZ was not found" in capsys.readouterr().err
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


def test_help_stays_light():
    code = ("import contextlib, io\nfrom flamino_core.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n    assert main(['contacts', '--help']) == 0")
    assert heavy_modules_after(code) == []


def test_pdb_file_names_for_several_records_are_safe_and_distinct(tmp_path):
    from flamino_core.cli.contacts import pdb_paths

    out = tmp_path / "scored.pdb"
    assert pdb_paths(out, ["only|one"]) == [out]
    names = [p.name for p in pdb_paths(out, ["sp|P69905|HBA", "sp|P69905|HBA", "../etc/x", "***"])]
    assert names == ["scored.sp_P69905_HBA.pdb", "scored.sp_P69905_HBA_.pdb", "scored.etc_x.pdb", "scored.record.pdb"]
    assert all(p.parent == tmp_path for p in pdb_paths(out, ["../etc/x"] * 2))

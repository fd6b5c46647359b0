"""``flamino batch fold`` on a Ray cluster gives the files ``flamino fold`` gives: the same PDB file
names and bytes and the same ``folds.csv``, with the batch's manifest, shards and failures file
beside them; a shard computed again folds none of its records twice (issue #64, item 4).

Both fold through ``fold_files.fold_record`` with the untrained test model (its structures are not
biology); the comparison is of bytes, so it holds only if an actor (its own process, one core) and
this process compute the same numbers to the PDB's 3 decimals: they run the same XLA program on the
same CPU (a difference here would be a finding, not noise to tolerate).
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq

from flamino_core.batch import FAILURES, MANIFEST, read_results
from flamino_core.cli import main as cli_main

MODEL = "random:esmfold-tiny"
# Two ids the file names sanitise alike ('b|x' and 'b_x': b_x.pdb, b_x_2.pdb) in different shards, a
# record over --max-residues between them (refused; its name kept for it, as `flamino fold` does)
# and an invalid one.
FASTA = (">a one\nMKTAYIAKQRQISFVKSHFSRQ\n>b|x\nGSHMKLVVLGAGGVGKSALTVQFVQGIFVDEYDPTIEDSY\n"
         f">long\n{'ACDEFGHIKLMNPQRSTVWY' * 4}\n>b_x\nMKVLA\n>bad\nMK@V\n>last\nWWYVACDKPG\n")


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.glob("*.pdb"))}


def test_batch_fold_writes_the_files_of_flamino_fold_and_resumes_without_refolding(tmp_path, ray_head,
                                                                                  monkeypatch):
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")  # the head's setting (a loopback test cluster)
    fasta = tmp_path / "in.fa"
    fasta.write_text(FASTA)
    single, batch = tmp_path / "single", tmp_path / "batch"
    assert cli_main(["fold", str(fasta), "-m", MODEL, "-o", str(single), "--max-residues", "64"]) == 2
    command = ["batch", "fold", str(fasta), "-m", MODEL, "-o", str(batch), "--max-residues", "64",
               "--shard-size", "2", "--actors", "2", "--ray-address", ray_head]
    assert cli_main(command) == 2  # the refused and the invalid record: failures.jsonl

    expected = _files(single)
    assert sorted(expected) == ["a.pdb", "b_x.pdb", "b_x_2.pdb", "last.pdb"]
    assert _files(batch) == expected
    assert (batch / "folds.csv").read_text() == (single / "folds.csv").read_text()
    failures = [json.loads(line) for line in (batch / FAILURES).read_text().splitlines()]
    assert [(f["id"], f["index"]) for f in failures] == [("long", 2), ("bad", 4)]
    assert "64 at most by --max-residues" in failures[0]["reason"]
    manifest = json.loads((batch / MANIFEST).read_text())
    assert manifest["complete"] and manifest["identity"]["options"]["fold"]["max_residues"] == 64
    footer = json.loads(pq.read_metadata(batch / "shard-00000.parquet").metadata[b"flamino_batch"])
    assert footer["length_limit"][:2] == [64, "by --max-residues"]  # the actor's limit, as its plan said
    assert read_results(batch).column("pdb").to_pylist() == ["a.pdb", "b_x.pdb", "b_x_2.pdb", "last.pdb"]

    # A shard whose file is gone (its actor killed after its folds) is computed again from the
    # journal: its records' files are not written again, the table is the same.
    stamps = {p.name: p.stat().st_mtime_ns for p in batch.glob("*.pdb")}
    info = pq.read_metadata(batch / "shard-00001.parquet").metadata
    (batch / "shard-00001.parquet").unlink()
    assert cli_main(command) == 2
    assert {p.name: p.stat().st_mtime_ns for p in batch.glob("*.pdb")} == stamps
    assert pq.read_metadata(batch / "shard-00001.parquet").metadata.keys() == info.keys()
    assert (batch / "folds.csv").read_text() == (single / "folds.csv").read_text()
    assert _files(batch) == expected

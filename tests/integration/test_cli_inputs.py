"""The command line on inputs as people have them: flat files, DNA (``--allow-dna``), and the
ProtSpace export (``flamino embed -o OUT.h5``), on the untrained ``random:tiny`` model."""

from __future__ import annotations

import argparse
import csv
import re
from pathlib import Path

import numpy as np
import pytest

from flamino_core.cli import build_parser, main
from flamino_core.inputs.fasta import read_fasta

DATA = Path(__file__).resolve().parents[1] / "data"
DNA = "ATGGTGCACCTGACCCCCGAGGAGAAGAGCGCCGTGACC"


@pytest.fixture(autouse=True)
def environment(monkeypatch, tmp_path):
    monkeypatch.setenv("FLAMINO_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def subcommands(parser: argparse.ArgumentParser, prefix=()):
    """(name path, parser) of every leaf subcommand."""
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not actions:
        yield prefix, parser
        return
    for name, sub in actions[0].choices.items():
        yield from subcommands(sub, prefix + (name,))


def test_every_command_that_reads_a_fasta_file_takes_allow_dna():
    """Commands declare their FASTA input with ``cli.common.add_fasta_argument``, which brings
    ``--allow-dna``; a new command that reads FASTA without it fails here."""
    readers = []
    for name, parser in subcommands(build_parser()):
        destinations = {action.dest for action in parser._actions}
        if "fasta" in destinations:
            readers.append(name)
            assert "allow_dna" in destinations, f"flamino {' '.join(name)} reads FASTA without --allow-dna"
    assert {("embed",), ("score",)} <= set(readers)


@pytest.mark.parametrize("command", [["embed"], ["score", "--strategy", "wt-marginals"]])
def test_dna_is_refused_first_and_analysed_only_with_allow_dna(command, tmp_path, capsys):
    fasta = tmp_path / "mixed.fa"
    fasta.write_text(f">cds\n{DNA * 9000}\n>protein\nMKVLAAGIVGLLLA\n")  # 351 kb of DNA
    out = tmp_path / ("out.npz" if command[0] == "embed" else "out.csv")
    assert main([*command, str(fasta), "-m", "random:tiny", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "cds: this is nucleotide sequence, not protein" in err and "--allow-dna" in err
    assert "windows" not in err  # the verdict comes first, not the length
    if command[0] == "embed":
        assert list(np.load(out)["ids"]) == ["protein"]
    small = tmp_path / "dna.fa"
    small.write_text(f">cds\n{DNA}\n")
    assert main([*command, str(small), "-m", "random:tiny", "-o", str(out), "--allow-dna"]) == 0
    assert "analysed as protein as asked" in capsys.readouterr().err
    if command[0] == "embed":
        assert list(np.load(out)["sequences"]) == [DNA]


@pytest.mark.parametrize(
    "name, expected_id",
    [("HBB_HUMAN.swiss.txt", "sp|P68871|HBB_HUMAN"), ("NP_000509.gp", "NP_000509.1"),
     ("HBB_synthetic_cds.gb", "SYN_HBB_P.1"), ("HBB_HUMAN.uniprot_web.txt", "sequence")],
)
def test_flat_files_and_pasted_layouts_are_embedded(name, expected_id, tmp_path, capsys):
    out = tmp_path / "out.npz"
    assert main(["embed", str(DATA / name), "-m", "random:tiny", "-o", str(out)]) == 0
    data = np.load(out)
    assert list(data["ids"]) == [expected_id]
    assert len(data["sequences"][0]) == 147
    assert "warning: " + expected_id + ": read" in capsys.readouterr().err


def test_embed_to_h5_is_protspaces_layout_with_the_npz_means(shared_fasta, tmp_path, capsys):
    h5py = pytest.importorskip("h5py")
    fasta = tmp_path / "set.fa"
    two = (shared_fasta / "uniprot_two.fa").read_text()
    fasta.write_text(two + ">HBB_HUMAN/2-147 Pfam-style span\n" + read_fasta(shared_fasta / "HBB_HUMAN.fa").records[0].sequence + "\n")
    records = read_fasta(fasta).records
    assert main(["embed", str(fasta), "-m", "random:tiny", "-o", str(tmp_path / "e.npz"), "--include", "mean"]) == 0
    assert main(["embed", str(fasta), "-m", "random:tiny", "-o", str(tmp_path / "e.h5")]) == 0
    assert "renamed" in capsys.readouterr().err  # the '/' of the Pfam id
    npz = np.load(tmp_path / "e.npz")
    keys = ["sp|P55685|Y4WG_RHISN", "sp|Q1XGE2|HAC1_ASPOR", "HBB_HUMAN_2-147"]
    with h5py.File(tmp_path / "e.h5", "r") as handle:
        assert list(handle.keys()) == sorted(keys)  # HDF5 lists names sorted
        assert handle.attrs["model_name"] == "random:tiny"
        for i, key in enumerate(keys):
            dataset = handle[key]
            assert dataset.shape == npz[f"mean/{i}"].shape and dataset.dtype == np.float32
            np.testing.assert_array_equal(dataset[()], npz[f"mean/{i}"])
        assert handle["HBB_HUMAN_2-147"].attrs["original_id"] == "HBB_HUMAN/2-147"
    with open(tmp_path / "e_metadata.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0])[:3] == ["identifier", "record_id", "length"]  # ProtSpace: the id column first
    assert [r["identifier"] for r in rows] == keys and [r["record_id"] for r in rows] == [r.id for r in records]
    assert [int(r["length"]) for r in rows] == [len(r.sequence) for r in records]
    # The header's own OS= and GN= fields, read here with a regex of the UniProt FASTA format.
    for row, record in zip(rows[:2], records[:2]):
        assert row["organism"] == re.search(r"OS=(.*?) [A-Z]{2}=", record.description).group(1)
        assert row["gene_name"] == re.search(r"GN=(\S+)", record.description).group(1)
    assert (rows[2]["start"], rows[2]["end"], rows[2]["organism"]) == ("2", "147", "")


def test_h5_output_refuses_what_it_cannot_hold(tmp_path, shared_fasta):
    fasta = str(shared_fasta / "HBB_HUMAN.fa")
    assert main(["embed", fasta, "-m", "random:tiny", "-o", str(tmp_path / "e.h5"), "--include", "per_tok"]) == 2
    assert main(["embed", fasta, "-m", "random:tiny", "-o", str(tmp_path / "e.h5"), "--repr-layers", "0", "1"]) == 2
    assert not (tmp_path / "e.h5").exists()


def test_a_structure_file_is_read_into_records_as_the_input_page_reads_it(tmp_path, capsys, monkeypatch):
    """Issue 50: ``flamino embed 1GBT.cif`` exited 2 ("no usable protein sequence") while the app
    turns the same file into records. Its protein chain is one record now, numbered from the file
    (1GBT_A/16-245), holding the residues the file models (read here by the independent
    ``_atom_site`` reader), through the function the Input page calls (counted by a spy);
    gzipped alike; a structure without protein is refused with its chains named."""
    import gzip

    from flamino_core.structure.files import chain_records
    from structure_reference import STANDARD, STRUCTURES, read_reference

    path = STRUCTURES / "1GBT.cif"
    if not path.exists():
        pytest.skip(f"the real structures are not at {STRUCTURES}")
    residues = [r for r in read_reference(path, "A") if not r.hetero and r.name != "HOH"]
    expected = "".join(STANDARD[r.name] for r in residues)
    calls = []
    real = chain_records.structure_records
    monkeypatch.setattr(chain_records, "structure_records", lambda parsed: calls.append(parsed.name) or real(parsed))
    zipped = tmp_path / "1GBT.cif.gz"
    zipped.write_bytes(gzip.compress(path.read_bytes()))
    for source in (path, zipped):
        out = tmp_path / f"{source.name}.npz"
        assert main(["embed", str(source), "-m", "random:tiny", "-o", str(out)]) == 0
        data = np.load(out)
        assert list(data["ids"]) == [f"1GBT_A/{residues[0].label}-{residues[-1].label}"] == ["1GBT_A/16-245"]
        assert list(data["sequences"]) == [expected] and len(expected) == 223
        assert "read as a structure, 1 protein chain (chain A: 223 amino acids" in capsys.readouterr().err
    assert len(calls) == 2

    water = tmp_path / "water.pdb"
    water.write_text("HETATM    1  O   HOH A   1       0.000   0.000   0.000  1.00  0.00           O\nEND\n")
    assert main(["embed", str(water), "-m", "random:tiny", "-o", str(tmp_path / "w.npz")]) == 2
    assert "holds no protein chain" in capsys.readouterr().err

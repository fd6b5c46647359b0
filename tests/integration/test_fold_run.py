"""``flamino fold`` over many records (issue #64 items 4-5, #65 item 3) with the untrained test
model: the plan said before any fold, records folded bucket by bucket, a run interrupted after
its first structure and run again (nothing folded twice, every file and the table identical to
an uninterrupted run's), and a record past the stem's trained length flagged in its file, the
table and on stderr. Folds are counted by wrapping the core's one ``fold`` (what the command
calls), so "folded twice" is observed, not inferred from files."""

from __future__ import annotations

import csv
import io
import json

import pytest

from flamino_core.cli import main
from flamino_core.structure.folding import fold_run, prediction

# Three short records (two buckets' worth of order: input order is not fold order) and one over
# the run's --max-residues: ProteinGym-like letters, fixed here so the test reads alone.
RECORDS = {"first": "MKTAYIAKQRQISFVKSHFSRQLEERLGLIEVQAPILSRVGDGTQDNLSGAEKAVQVKVKALPDAQFEVV",  # 70: bucket 128
           "second": "MSDNGPQNQRNAPRITFGGPSDSTGS",  # 26: bucket 64
           "third": "MADEEKLPPGWEKRMSRSSGRVYYFNHITN"}  # 30: bucket 64
TOO_LONG = "MKL" * 50  # 150 residues, over --max-residues 140


@pytest.fixture
def counted_folds(monkeypatch):
    """Every fold the command asks of the core, by sequence; ``interrupt_after``: a Ctrl-C (as a
    user's, or a killed job's) once that many folds have finished."""
    real = prediction.fold
    calls: list[str] = []
    state = {"interrupt_after": None}

    def fold(model, sequence, **kwargs):
        if state["interrupt_after"] is not None and len(calls) >= state["interrupt_after"]:
            raise KeyboardInterrupt
        calls.append(sequence)
        return real(model, sequence, **kwargs)

    monkeypatch.setattr(prediction, "fold", fold)
    return calls, state


def _fasta(tmp_path):
    path = tmp_path / "in.fa"
    path.write_text("".join(f">{n}\n{s}\n" for n, s in RECORDS.items()) + f">too_long\n{TOO_LONG}\n")
    return path


def _fold(fasta, out):
    return main(["fold", str(fasta), "-m", "random:esmfold-tiny", "-o", str(out), "--max-residues", "140"])


def _files(out):
    return {p.name: p.read_text() for p in sorted(out.iterdir()) if not p.name.startswith(".")}


def test_an_interrupted_run_resumes_without_folding_twice(tmp_path, capsys, counted_folds):
    calls, state = counted_folds
    fasta = _fasta(tmp_path)
    whole = tmp_path / "whole"
    assert _fold(fasta, whole) == 2  # the over-long record is refused: exit status 2, as before
    err = capsys.readouterr().err
    # The plan comes before the first fold: records, buckets, the limit, memory and time.
    plan = err.index("plan: 3 record(s) to fold (26-70 residues) in 2 length bucket(s) of 64: <= 64 (2), <= 128 (1)")
    assert plan < err.index("folded ")
    assert "1 refused" in err and "length limit: 140 residues by --max-residues (this device: " in err
    assert "too_long: 150 residues: 140 at most by --max-residues" in err and "estimate: " in err
    # Bucket by bucket: the two 64-residue bucket records first, each in input order.
    assert calls == [RECORDS["second"], RECORDS["third"], RECORDS["first"]]
    calls.clear()

    resumed = tmp_path / "resumed"
    state["interrupt_after"] = 1
    assert _fold(fasta, resumed) == 130  # Ctrl-C after the first structure
    assert calls == [RECORDS["second"]] and _files(resumed) == {"second.pdb": _files(whole)["second.pdb"]}
    state["interrupt_after"] = None
    capsys.readouterr()
    assert _fold(fasta, resumed) == 2
    assert "1 already folded in this folder (kept)" in capsys.readouterr().err
    assert calls == [RECORDS["second"], RECORDS["third"], RECORDS["first"]]  # each folded once over both runs
    assert _files(resumed) == _files(whole)  # every PDB and folds.csv, byte for byte
    rows = list(csv.DictReader(io.StringIO((resumed / "folds.csv").read_text())))
    assert [r["name"] for r in rows] == list(RECORDS)  # input order, each once
    calls.clear()
    capsys.readouterr()
    assert _fold(fasta, resumed) == 2 and calls == []  # all done: nothing folds, and no model loads
    assert "3 already folded" in (err := capsys.readouterr().err) and "untrained test model" not in err
    assert _files(resumed) == _files(whole)


def test_a_changed_sequence_or_a_missing_file_is_folded_again(tmp_path, counted_folds):
    calls, _ = counted_folds
    fasta, out = _fasta(tmp_path), tmp_path / "out"
    _fold(fasta, out)
    calls.clear()
    (out / "third.pdb").unlink()
    fasta.write_text(fasta.read_text().replace(RECORDS["second"], RECORDS["second"][:-1]))
    assert _fold(fasta, out) == 2
    assert calls == [RECORDS["second"][:-1], RECORDS["third"]]
    rows = {r["name"]: r for r in csv.DictReader(io.StringIO((out / "folds.csv").read_text()))}
    assert rows["second"]["length"] == str(len(RECORDS["second"]) - 1) and len(rows) == 3


def test_a_record_past_the_trained_length_is_flagged(tmp_path, capsys, monkeypatch):
    """The flag at a lowered trained length (25 residues here): a real 1,023-residue fold of the test
    model takes tens of minutes on this CPU (its trunk is cubic in the length), so the length itself
    is checked by the plan's own tests (test_fold_plan_run.py)."""
    monkeypatch.setattr(fold_run, "TRAINED_RESIDUES", 25)
    fasta = tmp_path / "in.fa"
    fasta.write_text(f">short\n{RECORDS['second'][:20]}\n>long\n{RECORDS['third']}\n")
    out = tmp_path / "out"
    assert main(["fold", str(fasta), "-m", "random:esmfold-tiny", "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "note: 1 record(s) over 25 residues" in err and "warning: long: 30 residues, past the ESM-2 stem" in err
    rows = {r["name"]: r for r in csv.DictReader(io.StringIO((out / "folds.csv").read_text()))}
    assert list(next(iter(rows.values()))) == ["name", "length", "mean_plddt", "ptm", "pdb", "past_trained_length"]
    assert rows["long"]["past_trained_length"] == "yes" and rows["short"]["past_trained_length"] == "no"
    header = [line for line in (out / "long.pdb").read_text().splitlines() if line.startswith("REMARK")]
    assert any("PAST THE ESM-2 STEM'S TRAINED LENGTH" in line for line in header)
    assert not any("TRAINED LENGTH" in line for line in (out / "short.pdb").read_text().splitlines())


def test_esmfold2_resumes_too(tmp_path, capsys, monkeypatch):
    """ESMFold2 (cli/fold2.py) runs through the same plan and journal: its lengths compiled as they
    are (no padding, no estimate yet, said). Two chains of one length: one compilation."""
    from flamino_core.model.esmfold2 import predict

    real, calls, state = predict.fold_complex, [], {"interrupt_after": None}

    def fold_complex(model, chains, *args, **kwargs):
        if state["interrupt_after"] is not None and len(calls) >= state["interrupt_after"]:
            raise KeyboardInterrupt
        calls.append(":".join(chains))
        return real(model, chains, *args, **kwargs)

    monkeypatch.setattr(predict, "fold_complex", fold_complex)
    fasta = tmp_path / "in.fa"
    two = [RECORDS["second"][:14], RECORDS["third"][:14]]
    fasta.write_text(f">one\n{two[0]}\n>two\n{two[1]}\n")
    command = ["fold", str(fasta), "-m", "random:esmfold2-tiny", "--steps", "3", "--samples", "1"]
    assert main(command + ["-o", str(tmp_path / "whole")]) == 0
    err = capsys.readouterr().err
    assert "plan: 2 record(s) to fold (14 residues) in 1 distinct length(s), each compiled once" in err
    assert "estimate: none for this model yet" in err
    assert calls == two
    calls.clear()
    state["interrupt_after"] = 1
    assert main(command + ["-o", str(tmp_path / "resumed")]) == 130
    state["interrupt_after"] = None
    assert main(command + ["-o", str(tmp_path / "resumed")]) == 0
    assert calls == two  # each folded once over both runs
    assert _files(tmp_path / "resumed") == _files(tmp_path / "whole")
    header = (tmp_path / "whole" / "folds.csv").read_text().splitlines()[0]
    assert header == "name,chains,length,mean_plddt,ptm,iptm,cif"  # ESMFold2's columns, unchanged


def test_a_killed_process_resumes_from_what_it_noted(tmp_path, counted_folds):
    """A real kill (SIGKILL: no cleanup runs) of ``flamino fold`` once its first structure file
    appears, then the same command again: exactly the records the killed run had not noted are
    folded (whatever the kill's timing), and the folder ends as an uninterrupted run's."""
    import os
    import signal
    import subprocess
    import sys
    import time

    calls, _ = counted_folds
    fasta, out = _fasta(tmp_path), tmp_path / "killed"
    command = [sys.executable, "-m", "flamino_core.cli", "fold", str(fasta), "-m", "random:esmfold-tiny", "-o",
               str(out), "--max-residues", "140"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=dict(os.environ))
    deadline = time.monotonic() + 300
    while not list(out.glob("*.pdb")) and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert list(out.glob("*.pdb")), "the killed run wrote no structure"
    noted = {json.loads(json.loads(line)["key"])[1] for line in (out / fold_run.JOURNAL).read_text().splitlines()
             if line.endswith("}")}
    # Killed mid-run, not after it: the 128-residue bucket's compilation (seconds, even from the
    # persistent cache) follows the first two structures.
    assert process.returncode == -signal.SIGKILL and len(noted) < len(RECORDS)
    assert _fold(fasta, out) == 2
    assert sorted(calls) == sorted(RECORDS[name] for name in RECORDS if name not in noted)
    calls.clear()
    _fold(fasta, tmp_path / "whole")
    assert _files(out) == _files(tmp_path / "whole")

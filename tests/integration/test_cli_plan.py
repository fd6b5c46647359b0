"""``flamino embed`` and ``flamino score`` say their plan's work on stderr before any model pass
(issue #65), through the core's plan (``jobs.plan``: ``Needed``, ``MaskedSet``): the passes
counted from the input and the result store, as the app's pages count them."""

from __future__ import annotations

import sys

import pytest

from flamino_core.cli import main

RECORDS = {"a": "MKVLAAGIVGLLA", "b": "MKTAYIAKQRQISFVKSHFSRQ"}  # 13 and 22 residues
WORK = "<<model work starts>>"


@pytest.fixture
def fasta(tmp_path):
    path = tmp_path / "two.fa"
    path.write_text("".join(f">{name}\n{seq}\n" for name, seq in RECORDS.items()))
    return path


def mark_work(monkeypatch, module, name: str) -> None:
    """Write ``WORK`` on stderr when ``module.name`` (the model's work) is first called."""
    real = getattr(module, name)

    def marked(*args, **kwargs):
        print(WORK, file=sys.stderr)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, marked)


def said_before_work(err: str, line: str) -> bool:
    return line in err and WORK in err and err.index(line) < err.index(WORK)


def test_embed_says_its_unmasked_passes_before_the_engine_runs(fasta, tmp_path, monkeypatch, capsys):
    from flamino_core.engine.engine import Engine

    mark_work(monkeypatch, Engine, "run")
    assert main(["embed", str(fasta), "-m", "random:tiny", "-o", str(tmp_path / "e.npz")]) == 0
    assert said_before_work(capsys.readouterr().err, "flamino: embed: to run: 2 unmasked passes (one per record)")


def test_score_says_its_masked_passes_before_them_and_none_once_stored(fasta, tmp_path, monkeypatch, capsys):
    from flamino_core.store import passes

    mark_work(monkeypatch, passes, "masked_log_probs")
    argv = ["score", str(fasta), "-m", "random:tiny", "-o", str(tmp_path / "s.csv")]
    assert main(argv) == 0
    n = sum(len(s) for s in RECORDS.values())  # masked-marginals: every position of each record, once
    assert said_before_work(capsys.readouterr().err, f"flamino: score: to run: {n} masked passes")
    assert main(argv) == 0  # the store holds every position now
    assert "flamino: score: to run: 0 masked passes" in capsys.readouterr().err


def test_a_wt_marginals_score_says_one_unmasked_pass_per_record(fasta, tmp_path, monkeypatch, capsys):
    from flamino_core.engine.engine import Engine

    mark_work(monkeypatch, Engine, "run")
    assert main(["score", str(fasta), "-m", "random:tiny", "-o", str(tmp_path / "s.csv"),
                 "--strategy", "wt-marginals"]) == 0
    assert said_before_work(capsys.readouterr().err, "flamino: score: to run: 2 unmasked passes (one per record)")


def test_contacts_says_its_passes_and_a_masked_track_its_scan_before_them(tmp_path, monkeypatch, capsys):
    from structure_reference import STRUCTURES, entity_sequences

    from flamino_core.engine.engine import Engine

    sequence = entity_sequences(STRUCTURES / "1A7G.cif")[0]
    fasta = tmp_path / "e.fa"
    fasta.write_text(f">1a7g\n{sequence}\n")
    mark_work(monkeypatch, Engine, "run")
    assert main(["contacts", str(fasta), "--structure", str(STRUCTURES / "1A7G.cif"), "-m", "random:tiny",
                 "-o", str(tmp_path / "c.csv"), "--pdb-out", str(tmp_path / "t.pdb"), "--track", "mean-score",
                 "--track-strategy", "masked-marginals"]) == 0
    err = capsys.readouterr().err
    assert said_before_work(err, "flamino: contacts: to run: 1 unmasked pass (one per record)")
    # the track's masked-marginals scan: every residue masked once
    assert said_before_work(err, f"flamino: contacts: to run: {len(sequence)} masked passes")

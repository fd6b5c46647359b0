""""One place" made executable: a toy whole-sequence scoring strategy and a toy structure track,
each registered in the one place ``docs/architecture.md`` names, are then offered and computed by
every front end they apply to (the command line, batch jobs, the app), with nothing else edited.

The toys' numbers are checked against the same quantity computed here from the engine's outputs.
"""

from __future__ import annotations

import contextlib
import csv
import io

import numpy as np
import pytest
from Bio.PDB import PDBParser
from structure_reference import STRUCTURES
from test_contact_eval import reference_case

from flamino_core import options
from flamino_core.alphabet import AA_TO_IDX, STANDARD_AA_TOKEN_IDS
from flamino_core.analysis.outputs import log_softmax
from flamino_core.cli import main
from flamino_core.engine.engine import Engine
from flamino_core.options import Strategy
from flamino_core.structure import tracks
from flamino_core.structure.tracks import Track
from flamino_core.weights.loading import load_weights

TINY = "random:tiny"
TOY_STRATEGY = "toy-greedy"
TOY_TRACK = "toy-probability"
TOY_TRACK_DESCRIPTION = "toy: p(amino acid) at each position"


def greedy_reduce(log_probs: np.ndarray, residues: str):
    """A toy map: log p(mt) minus the log-probability of the model's favourite token."""
    return log_probs[:, STANDARD_AA_TOKEN_IDS] - log_probs.max(axis=-1, keepdims=True), None


def probability_values(sequence: str, *, logits, amino_acid, **_) -> np.ndarray:
    """A toy track: p(amino_acid) at each position from the unmasked pass."""
    return np.exp(log_softmax(logits.astype(np.float64)))[:, AA_TO_IDX[amino_acid]]


@pytest.fixture
def toys(monkeypatch):
    """The two registrations, one line each, undone after the test."""
    monkeypatch.setitem(options.STRATEGIES, TOY_STRATEGY, Strategy(
        TOY_STRATEGY, "toy: log p(mt) - max log p, one unmasked pass", masked=False, reduce=greedy_reduce))
    monkeypatch.setitem(tracks.TRACKS, TOY_TRACK, Track(
        TOY_TRACK, "p(amino acid)", ("logits",), ("amino_acid",), probability_values,
        "p({amino_acid}) at each position", pdb_scale=100.0, description=TOY_TRACK_DESCRIPTION))


@pytest.fixture(scope="module")
def engine():
    return Engine(load_weights(TINY))


def help_text(argv: list[str]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(argv) == 0
    return out.getvalue()


def expected_greedy(engine, sequence: str) -> np.ndarray:
    (out,) = engine.run([sequence], repr_layers=(), logits=True)
    return greedy_reduce(log_softmax(out.logits.astype(np.float64)), sequence)[0]


def test_a_toy_strategy_is_offered_and_computed_by_the_cli(toys, engine, tmp_path):
    for argv in (["score", "--help"], ["batch", "score", "--help"], ["contacts", "--help"]):
        assert TOY_STRATEGY in help_text(argv), argv  # contacts: --track-strategy (it gives a map)
    sequence = "MKTAYIAKQRQISFVKSHFSRQ"
    fasta = tmp_path / "one.fa"
    fasta.write_text(f">one/5-26\n{sequence}\n")
    out = tmp_path / "toy.csv"
    assert main(["score", str(fasta), "-m", TINY, "-o", str(out), "--strategy", TOY_STRATEGY]) == 0
    rows = list(csv.DictReader(open(out)))
    assert len(rows) == 20 * len(sequence) and rows[0]["position"] == "5"  # numbered from the id
    expected = expected_greedy(engine, sequence)
    got = np.array([float(r["score"]) for r in rows]).reshape(len(sequence), 20)
    np.testing.assert_allclose(got, expected, atol=1e-4)  # float32 passes, written with 6 digits


def test_a_toy_strategy_is_computed_by_a_batch_shard(toys, engine, tmp_path):
    """A shard computed as a Ray worker computes it (in this process: the worker's code path
    without starting Ray); the job's options check accepts the name."""
    from flamino_core import batch
    from flamino_core.batch.results import to_numpy
    from flamino_core.batch.shards import process_shard
    import pyarrow.parquet as pq

    fasta = tmp_path / "in.fa"
    sequences = ["MKTAYIAKQR", "ACDEFGHIK"]
    fasta.write_text("".join(f">s{i}\n{s}\n" for i, s in enumerate(sequences)))
    job = batch.Job(command="score", out_dir=str(tmp_path / "out"), model=TINY, include=(), long="window",
                    strategy=TOY_STRATEGY, shard_size=10, token_budget=8192, key="toy", files=(str(fasta),))
    batch.spool_shards(job, [fasta])
    info = process_shard(engine, job, 0)
    assert info["rows"] == 2 and info["failures"] == []
    table = pq.read_table(batch.shard_path(job.out_dir, 0))
    for row, sequence in enumerate(sequences):
        np.testing.assert_allclose(to_numpy(table.column("scores"))[row], expected_greedy(engine, sequence), atol=1e-5)


def test_a_toy_track_is_offered_checked_and_written_by_the_cli(toys, engine, tmp_path, capsys):
    text = help_text(["contacts", "--help"])
    assert TOY_TRACK in text and f"substitution, {TOY_TRACK}: the amino acid" in " ".join(text.split())
    sequence, _, _ = reference_case("2BEG.pdb")
    fasta = tmp_path / "abeta.fa"
    fasta.write_text(f">abeta42\n{sequence}\n")
    pdb = tmp_path / "toy.pdb"
    argv = ["contacts", str(fasta), "--structure", str(STRUCTURES / "2BEG.pdb"), "-m", TINY, "-o",
            str(tmp_path / "p.csv"), "--pdb-out", str(pdb), "--track", TOY_TRACK]
    assert main(argv) == 2 and f"--track {TOY_TRACK} needs --track-aa A" in capsys.readouterr().err
    assert main([*argv, "--track-aa", "w"]) == 0
    (out,) = engine.run([sequence], repr_layers=(), logits=True)
    expected = probability_values(sequence, logits=out.logits, amino_acid="W") * 100  # its pdb_scale
    structure = PDBParser(QUIET=True).get_structure("toy", pdb)
    for residue in structure[0]["A"]:
        (b,) = {atom.get_bfactor() for atom in residue}
        assert b == pytest.approx(expected[residue.id[1] - 1], abs=0.005 + 1e-9)  # two decimals
    assert pdb.read_text().startswith("REMARK flamino: B-factor column: p(W) at each position x100\n")


@pytest.fixture
def app_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("FLAMINO_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("FLAMINO_MODEL", TINY)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def test_the_app_offers_and_draws_a_toy_track_and_a_toy_strategy(toys, engine, app_environment):
    """The Structure page (AppTest): the toy track in the picker with the widget of its declared
    choice, drawn with its values; the toy strategy among the score tracks' strategies; both in
    a link."""
    from test_app import assert_clean, start
    from test_structure_app import upload, viewer_title, viewer_values

    sequence, _, _ = reference_case("2BEG.pdb")
    at = upload(start({"seq": sequence, "page": "structure", "strack": TOY_TRACK, "saa": "W"}), "2BEG.pdb")
    assert_clean(at)
    assert f"{TOY_TRACK}: {TOY_TRACK_DESCRIPTION}" in at.selectbox(key="_w_strack").options  # "name: description"
    assert at.selectbox(key="_w_saa").value == "W"  # the link's choice, in the widget its Param declares
    assert viewer_title(at).endswith("p(W) at each position")
    (out,) = engine.run([sequence], repr_layers=(), logits=True)
    # Chain A of 2BEG holds Aβ residues 17-42.
    expected = probability_values(sequence, logits=out.logits, amino_acid="W")[16:]
    np.testing.assert_allclose(viewer_values(at), expected, atol=1e-6)

    at.selectbox(key="_w_strack").set_value("mean-score").run()
    assert TOY_STRATEGY in at.radio(key="_w_sscore").options
    at.radio(key="_w_sscore").set_value(TOY_STRATEGY).run()
    assert_clean(at)
    assert viewer_title(at).endswith(f"mean substitution score, {TOY_STRATEGY}")
    greedy = expected_greedy(engine, sequence)
    others = [[greedy[i, k] for k, aa in enumerate("ACDEFGHIKLMNPQRSTVWY") if aa != wt] for i, wt in enumerate(sequence)]
    np.testing.assert_allclose(viewer_values(at), np.mean(others, axis=1)[16:], atol=1e-5)


def test_the_app_reads_and_shares_a_toy_page_option(monkeypatch, app_environment):
    """One ``ViewOption`` in ``views.OPTIONS``: a link carries it into the session (within its
    bounds; another value is refused, the default kept) and the page's share link carries it on.
    (A page then shows it with one ``kept_*`` call, which takes its default and bounds from it.)"""
    from test_app import UBIQUITIN, assert_clean, start

    from app_pages._ui.frame import views

    monkeypatch.setitem(views.OPTIONS, "toyk", views.ViewOption("toyk", "predictions", views.Integer(1, 9), 2))
    at = start({"seq": UBIQUITIN, "page": "predictions", "toyk": "7"})
    assert_clean(at)
    assert at.session_state["toyk"] == 7
    shared = {k: v[-1] if isinstance(v, list) else v for k, v in dict(at.query_params).items()}
    assert shared.get("toyk") == "7" and shared.get("page") == "predictions"
    refused = start({"seq": UBIQUITIN, "page": "predictions", "toyk": "12"})  # out of its bounds
    assert_clean(refused)
    assert "toyk" not in refused.session_state or refused.session_state["toyk"] == 2

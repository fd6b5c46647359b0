"""A new scoring strategy is one declaration (issue 49): a toy "mutant minus mean" strategy, one
``Strategy`` in ``options.STRATEGIES`` written here and nowhere else, is then offered by
``flamino score``, ``flamino batch score``, ``flamino variants`` and ``flamino dms``, scored by the
command line, a batch shard and the Variant effects page, and counted in the page's estimate as
the engine runs it.

The toy's numbers are checked against the same quantity computed here from the engine's logits.
"""

from __future__ import annotations

import contextlib
import csv
import io

import numpy as np
import pytest

from flamino_core import options
from flamino_core.alphabet import STANDARD_AA_TOKEN_IDS, STANDARD_AMINO_ACIDS
from flamino_core.analysis.outputs import log_softmax
from flamino_core.cli import main
from flamino_core.options import Strategy
from flamino_core.engine.engine import Engine
from flamino_core.variants import indels
from flamino_core.weights.loading import load_weights
from test_variant_passes import rows_run  # noqa: F401  (a fixture: the rows the engine builds)

TINY = "random:tiny"
TOY = "toy-minus-mean"
TOY_HELP = "toy: log p(mt) minus the mean log p of the 20 amino acids, one unmasked pass"
SEQUENCE = "VHLTPEEKSAVTALWGKVNVDEVGGEALGRLL"  # haemoglobin β's first 32 residues: E6, K8, K17
MUTATIONS = "E6V, E6V:K8A, K17E, p.Glu7del"  # the deletion: a substitution strategy scores none


def minus_mean(log_probs: np.ndarray, residues: str):
    """The toy map: log p(mt) - mean over the 20 amino acids of log p(a), at each position."""
    standard = log_probs[:, STANDARD_AA_TOKEN_IDS]
    return standard - standard.mean(axis=-1, keepdims=True), None


@pytest.fixture
def toy(monkeypatch):
    """The one declaration, undone after the test."""
    monkeypatch.setitem(options.STRATEGIES, TOY, Strategy(TOY, TOY_HELP, masked=False, reduce=minus_mean,
                                                          kinds=("map", "variant")))


@pytest.fixture(scope="module")
def engine():
    return Engine(load_weights(TINY))


def expected_scores(engine, sequence: str, mutations: str) -> dict[str, float]:
    """Each substitution variant's toy score: the map, from one unmasked pass here, summed over
    its substitutions in float64."""
    (out,) = engine.run([sequence], repr_layers=(), logits=True)
    table = minus_mean(log_softmax(out.logits.astype(np.float64)), sequence)[0]
    variants, _ = indels.parse_mutations(mutations, sequence)
    return {v.text: sum(float(table[s.index, STANDARD_AMINO_ACIDS.index(s.mt)]) for s in v.substitutions)
            for v in variants if not v.edits}


def help_text(argv: list[str]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(argv) == 0
    return out.getvalue()


def test_the_toy_is_offered_and_scored_by_the_command_line(toy, engine, tmp_path):
    for argv in (["variants", "--help"], ["dms", "--help"], ["score", "--help"], ["batch", "score", "--help"]):
        assert TOY in help_text(argv), argv
    fasta = tmp_path / "hbb.fa"
    fasta.write_text(f">hbb\n{SEQUENCE}\n")
    out = tmp_path / "toy.csv"
    assert main(["variants", str(fasta), "--mutations", MUTATIONS, "-m", TINY, "--strategy", TOY, "-o", str(out)]) == 0
    rows = list(csv.DictReader(open(out)))
    assert list(rows[0]) == ["record_id", "mutant", "score", "status"]  # a substitution strategy's columns
    assert [r["status"] for r in rows][:3] == ["ok"] * 3 and "deletion" in rows[3]["status"]
    expected = expected_scores(engine, SEQUENCE, MUTATIONS)
    np.testing.assert_allclose([float(r["score"]) for r in rows[:3]], [expected[r["mutant"]] for r in rows[:3]],
                               atol=1e-4)  # float32 logits, written with 6 significant digits


def test_the_toy_is_computed_by_a_batch_shard(toy, engine, tmp_path):
    """A shard computed as a Ray worker computes it (the worker's code path, without Ray)."""
    from flamino_core import batch
    from flamino_core.batch.results import to_numpy
    from flamino_core.batch.shards import process_shard
    import pyarrow.parquet as pq

    fasta = tmp_path / "in.fa"
    fasta.write_text(f">hbb\n{SEQUENCE}\n")
    job = batch.Job(command="score", out_dir=str(tmp_path / "out"), model=TINY, include=(), long="window",
                    strategy=TOY, shard_size=10, token_budget=8192, key="toy", files=(str(fasta),))
    batch.spool_shards(job, [fasta])
    assert process_shard(engine, job, 0)["failures"] == []
    (out,) = engine.run([SEQUENCE], repr_layers=(), logits=True)
    expected = minus_mean(log_softmax(out.logits.astype(np.float64)), SEQUENCE)[0]
    got = to_numpy(pq.read_table(batch.shard_path(job.out_dir, 0)).column("scores"))[0]
    np.testing.assert_allclose(got, expected, atol=1e-5)


def test_the_toys_estimate_is_the_passes_the_engine_runs(toy, engine, rows_run):  # noqa: F811
    from app_pages._ui.server import jobs_panel
    from flamino_core.variants.score_plan import list_plan
    from flamino_core.variants.scoring import score_variants

    variants, _ = indels.parse_mutations(MUTATIONS, SEQUENCE)
    shown = jobs_panel.cost_of(list_plan(engine, SEQUENCE, variants, TOY, record_id=""), engine)  # the page's
    rows_run[0] = 0
    scored = score_variants(engine, SEQUENCE, variants, TOY)
    assert shown.passes == scored.passes == rows_run[0] == 1  # one unmasked pass: the sequence fits a window
    assert shown.one == "unmasked pass"


def test_the_variant_effects_page_offers_and_scores_the_toy(toy, engine, monkeypatch, tmp_path):
    from test_app import assert_clean, open_page, paste, settle, start

    monkeypatch.setenv("FLAMINO_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("FLAMINO_MODEL", TINY)
    at = open_page(paste(start(), f">hbb\n{SEQUENCE}\n"), "variants")
    at.text_area(key="_w_mutation_text").input(MUTATIONS)
    at = settle(at.run(), start=True)
    picker = at.radio(key="_w_vstrategy")
    assert f"{TOY} — {TOY_HELP}" in picker.options  # its label: name and help, declared once
    at = settle(picker.set_value(TOY).run(), start=True)
    assert_clean(at)
    table = at.dataframe[0].value
    expected = expected_scores(engine, SEQUENCE, MUTATIONS)
    assert list(table["mutant"]) == list(expected)
    np.testing.assert_allclose(table["score"], list(expected.values()), atol=1e-6)
    assert {m.label: m.value for m in at.metric}["Model passes"] == "1"
    carried = at.query_params["vstrategy"]
    assert (carried[-1] if isinstance(carried, list) else carried) == TOY  # the link carries it
